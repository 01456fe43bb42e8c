// Hash batching: how buffers are packed into chunk slots, and that folding
// the slots' digests gives hash::hashBuffer. The device kernel is simulated
// by hashing each slot's chunk with the CPU reference, slot by slot, exactly
// as the kernel's blocks walk the DeviceHashRange table.
#include <catch2/catch.hpp>

#include <random>

#include "kernels/hash_plan.h"
#include "trace_format/hash.h"
#include "trace_format/hash_primitives.h"

using namespace gpurr;
using namespace gpurr::kernels;

namespace {

// What the kernel computes: for every slot, find its range by the table
// (last firstSlot <= slot) and hash that chunk.
std::vector<uint64_t> simulateKernel(const HashPlan& plan) {
  std::vector<uint64_t> digests(plan.totalSlots, 0);
  for (uint64_t slot = 0; slot < plan.totalSlots; ++slot) {
    size_t lo = 0, hi = plan.ranges.size();
    while (hi - lo > 1) {
      const size_t mid = (lo + hi) / 2;
      if (plan.ranges[mid].firstSlot <= slot) lo = mid; else hi = mid;
    }
    const DeviceHashRange& r = plan.ranges[lo];
    const uint64_t chunk = slot - r.firstSlot;
    const uint64_t start = chunk * hash::kChunkBytes;
    const uint64_t len = std::min<uint64_t>(hash::kChunkBytes, r.length - start);
    digests[slot] = hash::hashChunk({reinterpret_cast<const uint8_t*>(r.address + start), len}, chunk);
  }
  return digests;
}

}  // namespace

TEST_CASE("chunk counts", "[kernels][plan]") {
  CHECK(chunkCount(0) == 0);
  CHECK(chunkCount(1) == 1);
  CHECK(chunkCount(65536) == 1);
  CHECK(chunkCount(65537) == 2);
  CHECK(chunkCount(uint64_t{1} << 30) == 16384);
}

TEST_CASE("requests get consecutive chunk slots, empty ones get none", "[kernels][plan]") {
  const std::vector<HashRequest> requests = {{0x1000, 100}, {0x9000, 0}, {0x20000, 200000}, {0x90000, 65536}};
  const HashPlan plan = planHashBatch(requests);
  CHECK(plan.totalSlots == 1 + 0 + 4 + 1);
  CHECK(plan.firstSlot == std::vector<uint64_t>{0, 1, 1, 5});
  REQUIRE(plan.ranges.size() == 3);
  CHECK(plan.ranges[0].address == 0x1000);
  CHECK(plan.ranges[1].address == 0x20000);
  CHECK(plan.ranges[1].firstSlot == 1);
  CHECK(plan.ranges[2].firstSlot == 5);
  CHECK(planHashBatch({}).totalSlots == 0);
}

TEST_CASE("batched digests equal the CPU buffer hash", "[kernels][plan]") {
  std::vector<uint8_t> data((3 << 20) + 123);
  std::mt19937_64 rng(7);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const uint64_t base = reinterpret_cast<uint64_t>(data.data());
  const std::vector<std::pair<uint64_t, uint64_t>> cases = {
      {0, 0}, {1, 1}, {3, 15}, {0, 16}, {5, 17}, {0, 65535}, {0, 65536}, {7, 65537}, {100, 2 << 20}, {0, data.size()}};
  std::vector<HashRequest> requests;
  for (auto [off, len] : cases) requests.push_back({base + off, len});
  const HashPlan plan = planHashBatch(requests);
  const std::vector<uint64_t> digests = simulateKernel(plan);
  for (size_t i = 0; i < requests.size(); ++i) {
    INFO("offset " << cases[i].first << " length " << cases[i].second);
    CHECK(foldRequest(plan, requests, i, digests) ==
          hash::hashBuffer({data.data() + cases[i].first, cases[i].second}));
  }
  // A digest from the wrong slots must not match: the fold depends on them.
  std::vector<uint64_t> shuffled = digests;
  std::swap(shuffled[plan.firstSlot[9]], shuffled[plan.firstSlot[9] + 1]);
  CHECK(foldRequest(plan, requests, 9, shuffled) != hash::hashBuffer(data));
}
