// The device hash kernel's own source (kernels/hash_kernel.cu), compiled for
// the host with a small emulation of the CUDA execution model: one block of
// 256 threads at a time, real threads, __syncthreads as a block barrier and
// warp shuffles through a per-warp exchange with barriers. It checks on the
// CPU that the kernel's lane assignment, loads and lane tree compute
// hash.cpp's function bit for bit; tests/gpu/hash_match checks the compiled
// kernel on a GPU.
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "kernels/hash_plan.h"
#include "trace_format/hash.h"

namespace emu {

struct Dim {
  unsigned x = 0, y = 0, z = 0;
};

struct BlockState {
  std::barrier<> block{256};
  std::array<std::unique_ptr<std::barrier<>>, 8> warps;
  std::array<std::array<uint64_t, 32>, 8> exchange{};
  BlockState() {
    for (auto& w : warps) w = std::make_unique<std::barrier<>>(32);
  }
};

inline thread_local Dim threadIdx;
inline Dim blockIdx, gridDim;
inline BlockState* block = nullptr;

}  // namespace emu

using emu::blockIdx;
using emu::gridDim;
using emu::threadIdx;

struct uint4 {
  unsigned x, y, z, w;
};

inline uint4 __ldcs(const uint4* p) { return *p; }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline void __syncthreads() { emu::block->block.arrive_and_wait(); }
inline uint64_t __shfl_down_sync(unsigned, uint64_t v, unsigned delta) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  auto& ex = emu::block->exchange[warp];
  ex[lane] = v;
  emu::block->warps[warp]->arrive_and_wait();
  const uint64_t r = lane + delta < 32 ? ex[lane + delta] : v;
  emu::block->warps[warp]->arrive_and_wait();
  return r;
}

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static
#define __launch_bounds__(n)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#include "kernels/hash_kernel.cu"
#pragma GCC diagnostic pop

namespace {

// Runs the kernel over `plan` with `blocks` blocks, one block after another;
// with `done`, the completion signal of the recorder's ring too.
struct Completion {
  uint32_t blocksDone = 0;
  uint64_t word = 0;
  uint64_t ticket = 0;
  uint64_t wordWhenLastBlockStarted = ~uint64_t{0};
};
std::vector<uint64_t> runKernel(const gpurr::kernels::HashPlan& plan, unsigned blocks,
                                Completion* done = nullptr) {
  std::vector<uint64_t> digests(plan.totalSlots, 0);
  emu::gridDim = {blocks, 1, 1};
  for (unsigned b = 0; b < blocks; ++b) {
    emu::BlockState state;
    emu::block = &state;
    emu::blockIdx = {b, 0, 0};
    if (done && b + 1 == blocks) done->wordWhenLastBlockStarted = done->word;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < 256; ++t) {
      threads.emplace_back([&, t] {
        threadIdx = {t, 0, 0};
        gpurr_hash_chunks(plan.ranges.data(), static_cast<uint32_t>(plan.ranges.size()), plan.totalSlots,
                          digests.data(), done ? &done->blocksDone : nullptr, done ? &done->word : nullptr,
                          done ? done->ticket : 0);
      });
    }
    for (auto& th : threads) th.join();
  }
  return digests;
}

}  // namespace

TEST_CASE("the kernel source computes the CPU hash (emulated execution)", "[kernels][emulation]") {
  std::vector<uint8_t> data((1 << 18) + 64);
  std::mt19937_64 rng(99);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  // 16-byte aligned base, so offsets choose the alignment.
  const uint64_t base = (reinterpret_cast<uint64_t>(data.data()) + 15) & ~uint64_t{15};
  const auto* p = reinterpret_cast<const uint8_t*>(base);
  const std::vector<std::pair<uint64_t, uint64_t>> cases = {
      {0, 0},      {0, 1},     {3, 15},     {0, 16},     {5, 17},    {0, 4095},
      {0, 65535},  {0, 65536}, {1, 65536},  {0, 65537},  {8, 65552}, {0, 3 * 65536 + 40},
      {12, 4100},  {15, 65536}};
  std::vector<gpurr::kernels::HashRequest> requests;
  for (auto [off, len] : cases) requests.push_back({base + off, len});
  const auto plan = gpurr::kernels::planHashBatch(requests);
  for (unsigned blocks : {1u, 3u}) {
    const std::vector<uint64_t> digests = runKernel(plan, blocks);
    for (size_t i = 0; i < requests.size(); ++i) {
      INFO("blocks " << blocks << ", offset " << cases[i].first << ", length " << cases[i].second);
      const std::span<const uint8_t> bytes(p + cases[i].first, cases[i].second);
      CHECK(gpurr::kernels::foldRequest(plan, requests, i, digests) == gpurr::hash::hashBuffer(bytes));
      const auto chunks = gpurr::hash::chunkDigests(bytes);
      for (size_t c = 0; c < chunks.size(); ++c) CHECK(digests[plan.firstSlot[i] + c] == chunks[c]);
    }
  }
}

TEST_CASE("the kernel raises its ticket once, when its last block is done, and leaves the counter at 0",
          "[kernels][emulation][ring]") {
  std::vector<uint8_t> data(5 * 65536 + 100, 7);
  const std::vector<gpurr::kernels::HashRequest> requests = {{reinterpret_cast<uint64_t>(data.data()), data.size()}};
  const auto plan = gpurr::kernels::planHashBatch(requests);
  for (unsigned blocks : {1u, 3u, 6u}) {
    Completion done;
    done.ticket = 41 + blocks;
    const std::vector<uint64_t> digests = runKernel(plan, blocks, &done);
    CHECK(done.wordWhenLastBlockStarted == 0);  // not raised before every block finished
    CHECK(done.word == done.ticket);
    CHECK(done.blocksDone == 0);                // ready for the next batch in this place
    CHECK(digests == runKernel(plan, blocks));  // the signal changes no digest
  }
}
