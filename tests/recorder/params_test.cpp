// Kernel parameter packing and pointer scanning.
#include <catch2/catch.hpp>

#include <cuda.h>

#include <cstring>
#include <random>

#include "recorder/params.h"

using namespace gpurr;
using namespace gpurr::recorder;
using trace::AllocationKind;

namespace {
template <typename T>
void put(std::vector<uint8_t>& buf, size_t off, T v) {
  if (buf.size() < off + sizeof(T)) buf.resize(off + sizeof(T));
  std::memcpy(buf.data() + off, &v, sizeof(T));
}
}  // namespace

TEST_CASE("kernelParams are packed at the layout's offsets", "[recorder][params]") {
  uint64_t ptr = 0x1234;
  int32_t n = 7;
  struct {
    float a;
    uint64_t b;
  } s{1.5f, 0x99};
  void* args[] = {&ptr, &n, &s};
  const std::vector<trace::ParamInfo> layout = {{0, 8}, {8, 4}, {16, 16}};
  const std::vector<uint8_t> p = packParams(args, layout);
  REQUIRE(p.size() == 32);
  uint64_t got;
  std::memcpy(&got, p.data(), 8);
  CHECK(got == 0x1234);
  int32_t gotN;
  std::memcpy(&gotN, p.data() + 8, 4);
  CHECK(gotN == 7);
  CHECK(std::memcmp(p.data() + 16, &s, 16) == 0);
  CHECK(p[12] == 0);  // padding is zero, not garbage
  CHECK(packParams(args, {}).empty());
}

TEST_CASE("the extra array gives the parameter buffer", "[recorder][params]") {
  uint8_t buffer[24];
  for (int i = 0; i < 24; ++i) buffer[i] = static_cast<uint8_t>(i);
  size_t size = sizeof(buffer);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  auto p = paramsFromExtra(extra);
  REQUIRE(p);
  CHECK(*p == std::vector<uint8_t>(buffer, buffer + 24));
  void* noBuffer[] = {CU_LAUNCH_PARAM_END};
  CHECK_FALSE(paramsFromExtra(noBuffer));
  CHECK_FALSE(paramsFromExtra(nullptr));
}

TEST_CASE("pointers are found in aligned words, also inside by-value structs", "[recorder][params]") {
  AllocationMap map;
  map.add(0x10000, 0x1000, AllocationKind::kDevice, 0, 0);  // 1
  map.add(0x20000, 0x1000, AllocationKind::kDevice, 0, 0);  // 2
  map.add(0x30000, 0x1000, AllocationKind::kDevice, 0, 0);  // 3
  std::vector<uint8_t> params;
  put<uint64_t>(params, 0, 0x10010);   // plain pointer
  put<uint32_t>(params, 8, 5);         // an int
  put<uint32_t>(params, 12, 0);
  put<uint64_t>(params, 16, 0x20000);  // first field of a struct {T* p; int n; T* q;}
  put<uint64_t>(params, 24, 3);
  put<uint64_t>(params, 32, 0x20800);  // its last field: same allocation
  put<uint32_t>(params, 40, 0);
  put<uint64_t>(params, 44, 0x30000);  // unaligned: not a pointer word
  put<uint32_t>(params, 52, 0);
  put<uint64_t>(params, 56, 0x40000);  // no allocation there
  const std::vector<ScannedPointer> found = scanPointers(params, map, 0);
  REQUIRE(found.size() == 3);
  CHECK(found[0].param == trace::PointerParam{0, 1, 0x10});
  CHECK(found[1].param == trace::PointerParam{16, 2, 0});
  CHECK(found[2].param == trace::PointerParam{32, 2, 0x800});
  CHECK(found[0].readableBytes == 0x1000 - 0x10);

  // One range per allocation, from its lowest pointer to its end.
  const std::vector<trace::DeviceRange> ranges = referencedRanges(found);
  REQUIRE(ranges.size() == 2);
  CHECK(ranges[0] == trace::DeviceRange{0x10010, 0xff0, 1, 0x10});
  CHECK(ranges[1] == trace::DeviceRange{0x20000, 0x1000, 2, 0});
}

TEST_CASE("the scan finds what a lookup of every aligned word finds", "[recorder][params]") {
  // Words at the extent's edges, inside and outside allocations, zeros and
  // small numbers, in parameter buffers of every length up to 100 bytes:
  // the scan, which rules words out four at a time, must agree with a
  // lookup of each word.
  AllocationMap map;
  map.add(0x10000, 0x1000, AllocationKind::kDevice, 0, 0);
  map.add(0x30000, 0x800, AllocationKind::kDevice, 0, 0);
  const uint64_t candidates[] = {0,       1,       0xffff,  0x10000, 0x10fff, 0x11000, 0x2ffff,
                                 0x30000, 0x307ff, 0x30800, 0x30801, ~0ull,   0x20000};
  std::mt19937_64 rng(7);
  for (size_t bytes = 0; bytes <= 100; ++bytes) {
    for (int round = 0; round < 20; ++round) {
      std::vector<uint8_t> params(bytes);
      for (size_t off = 0; off + 8 <= bytes; off += 8)
        put<uint64_t>(params, off, candidates[rng() % std::size(candidates)]);
      std::vector<trace::PointerParam> expected;
      for (size_t off = 0; off + 8 <= bytes; off += 8) {
        uint64_t word;
        std::memcpy(&word, params.data() + off, 8);
        if (const auto r = map.resolveFrom(word, 0))
          expected.push_back({static_cast<uint32_t>(off), r->ordinal, r->offset});
      }
      std::vector<trace::PointerParam> found;
      for (const ScannedPointer& p : scanPointers(params, map, 0)) found.push_back(p.param);
      REQUIRE(found == expected);
    }
  }
}

TEST_CASE("pointers into freed memory are not pointers", "[recorder][params]") {
  AllocationMap map;
  map.add(0x10000, 0x1000, AllocationKind::kDevice, 0, 0);
  std::vector<uint8_t> params;
  put<uint64_t>(params, 0, 0x10000);
  CHECK(scanPointers(params, map, 0).size() == 1);
  map.remove(0x10000);
  CHECK(scanPointers(params, map, 0).empty());
  // A short trailing word is never read past the buffer.
  CHECK(scanPointers(std::vector<uint8_t>(7, 0xff), map, 0).empty());
}

TEST_CASE("pointers into separate VMM mappings give separate ranges", "[recorder][params]") {
  AllocationMap map;
  map.add(0x100000, 0x400000, AllocationKind::kVmm, 0, 0);
  map.map(0x100000, 0x100000);
  map.map(0x300000, 0x100000);
  map.setAccess(0x100000, 0x100000, 0, true);
  map.setAccess(0x300000, 0x100000, 0, true);
  std::vector<uint8_t> params;
  put<uint64_t>(params, 0, 0x300010);
  put<uint64_t>(params, 8, 0x100020);
  put<uint64_t>(params, 16, 0x250000);  // unmapped hole: not readable, ignored
  const auto found = scanPointers(params, map, 0);
  REQUIRE(found.size() == 2);
  const auto ranges = referencedRanges(found);
  REQUIRE(ranges.size() == 2);
  CHECK(ranges[0] == trace::DeviceRange{0x100020, 0xfffe0, 1, 0x20});
  CHECK(ranges[1] == trace::DeviceRange{0x300010, 0xffff0, 1, 0x200010});
}

TEST_CASE("a range is read when its tensor holds an operand the op reads and none it writes",
          "[recorder][params]") {
  using framework::Operand;
  // Three tensors of one segment, and a range with no known tensor extent.
  const std::vector<trace::DeviceRange> ranges = {
      {0x10100, 0x0f00, 1, 0x100, trace::RangeBound::kBlock},  // a view into [0x10000, 0x11000)
      {0x11000, 0x1000, 1, 0x1000, trace::RangeBound::kBlock},
      {0x12000, 0x1000, 1, 0x2000, trace::RangeBound::kBlock},
      {0x20000, 0x8000, 2, 0, trace::RangeBound::kAllocation},
  };
  const TensorExtent extent = [](const trace::DeviceRange& r) -> std::optional<std::pair<uint64_t, uint64_t>> {
    if (r.bound != trace::RangeBound::kBlock) return std::nullopt;
    return std::pair<uint64_t, uint64_t>{r.address & ~uint64_t{0xfff}, 0x1000};
  };
  using enum OperandRole;
  auto roles = [&](std::vector<Operand> ops) { return operandRoles(ranges, ops, extent); };
  CHECK(roles({{0x10000, false}, {0x11000, true}}) == std::vector{kRead, kWritten, kNotGiven, kUnknown});
  // A written operand wins over a read one in the same tensor (an out= argument that is also an input).
  CHECK(roles({{0x10000, false}, {0x10000, true}, {0x12000, false}}) ==
        std::vector{kWritten, kNotGiven, kRead, kUnknown});
  // A range whose tensor is no operand (a workspace, an output made inside the op): given nothing.
  CHECK(roles({{0x10000, false}}) == std::vector{kRead, kNotGiven, kNotGiven, kUnknown});
  // An operand in a range without a tensor extent says nothing about it.
  CHECK(roles({{0x20000, false}}) == std::vector{kNotGiven, kNotGiven, kNotGiven, kUnknown});
  // No operands reported: nothing is known.
  CHECK(roles({}) == std::vector{kUnknown, kUnknown, kUnknown, kUnknown});
}
