// Replay planning on traces written with TraceWriter: which allocations are
// reserved, which blobs restore them, which outputs are compared, relocation
// of pointer parameters (inside by-value structs too), and the errors for
// everything a replay cannot do without.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cstring>

#include "replayer/plan.h"
#include "tests/replayer/replay_trace.h"
#include "tests/unit/test_util.h"

using namespace gpurr;
using namespace gpurr::trace;
using gpurr::replay::ReplayError;

namespace {

constexpr uint64_t kX = 0x7f1200000000;  // alloc#1, 4 KiB
constexpr uint64_t kY = 0x7f1200001000;  // alloc#2, 4 KiB, same 2 MiB granule as x
constexpr uint64_t kZ = 0x7f1200400000;  // alloc#3, 64 KiB, another granule
constexpr uint64_t kW = 0x7f1300000000;  // alloc#4, never referenced

uint64_t u64At(const std::vector<uint8_t>& bytes, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, bytes.data() + at, 8);
  return v;
}

// saxpy(x, y, n, a) reading x and y, writing y; z is read through a pointer
// at offset 0x40. Returns the launch's seq.
struct Saxpy {
  testing::TempDir dir;
  std::filesystem::path path = dir / "t.gpurr";
  uint64_t launchSeq = 0;
  std::vector<uint8_t> x = testing::patternBytes(1, 4096);
  std::vector<uint8_t> y = testing::patternBytes(2, 4096);
  std::vector<uint8_t> z = testing::patternBytes(3, 65536);
  std::vector<uint8_t> yAfter = testing::patternBytes(4, 4096);

  explicit Saxpy(bool snapshots = true, bool withOutputs = true) {
    testing::ReplayTraceBuilder b(path);
    b.alloc(1, kX, 4096);
    b.alloc(2, kY, 4096);
    b.alloc(3, kZ, 65536);
    b.alloc(4, kW, 4096);
    b.module(1);
    b.add(Sync{SyncKind::kContextSynchronize, 0, 0});
    KernelLaunch k;
    k.module = 1;
    k.function = "_Z5saxpyPKfPfS0_if";
    k.grid = {4, 1, 1};
    k.block = {256, 1, 1};
    testing::addPointer(k, 1, kX, 0);
    testing::addPointer(k, 2, kY, 0);
    testing::addPointer(k, 3, kZ, 0x40);
    testing::addScalar(k, 1024);
    testing::addScalar(k, 0x40000000);
    k.inputs = {b.digest(1, kX, 0, x, snapshots), b.digest(2, kY, 0, y, snapshots),
                b.digest(3, kZ, 0, z, snapshots)};
    if (withOutputs) k.outputs = {b.digest(2, kY, 0, yAfter, true)};
    launchSeq = b.add(k);
    b.add(Free{2, kY});
    b.close();
  }
};

}  // namespace

TEST_CASE("plan: reserves the referenced allocations and restores their snapshots", "[replayer][plan]") {
  Saxpy t;
  TraceReader reader(t.path);
  const replay::ReplayPlan plan = replay::planReplay(reader, t.launchSeq);
  CHECK(plan.seq == t.launchSeq);
  CHECK(plan.launchIndex == 0);
  CHECK(plan.launch.function == "_Z5saxpyPKfPfS0_if");
  CHECK(plan.module.ordinal == 1);
  CHECK(plan.module.arch == 90);
  CHECK(reader.readBlob(plan.module.image) == testing::patternBytes(99, 1000));
  CHECK(plan.recordedArch == 90);
  REQUIRE(plan.recordedGpu.has_value());
  CHECK(plan.recordedGpu->name == "NVIDIA H100 80GB HBM3");

  REQUIRE(plan.ranges.size() == 3);  // alloc#4 is live but not referenced
  CHECK(plan.ranges[0].allocation == 1);
  CHECK(plan.ranges[0].address == kX);
  CHECK(plan.ranges[0].size == 4096);
  CHECK(plan.ranges[1].allocation == 2);
  CHECK(plan.ranges[1].address == kY);
  CHECK(plan.ranges[2].allocation == 3);
  CHECK(plan.ranges[2].size == 65536);
  for (const auto& r : plan.ranges) {
    CHECK(r.restored);
    CHECK_FALSE(r.freedBeforeLaunch);
  }

  REQUIRE(plan.inputs.size() == 3);
  CHECK(reader.readBlob(plan.inputs[0].snapshot) == t.x);
  CHECK(reader.readBlob(plan.inputs[1].snapshot) == t.y);
  CHECK(reader.readBlob(plan.inputs[2].snapshot) == t.z);
  CHECK(plan.inputs[1].range.address == kY);
  CHECK(plan.inputs[1].digest == hash::hashBuffer(t.y));

  REQUIRE(plan.outputs.size() == 1);
  CHECK(plan.outputs[0].recorded);
  CHECK(plan.outputs[0].range.allocation == 2);
  CHECK(plan.outputs[0].digest == hash::hashBuffer(t.yAfter));
  CHECK(plan.outputs[0].chunkDigests == hash::chunkDigests(t.yAfter));
  REQUIRE(plan.outputs[0].snapshot.has_value());
  CHECK(reader.readBlob(*plan.outputs[0].snapshot) == t.yAfter);
  CHECK(plan.warnings.empty());
}

TEST_CASE("plan: regions share granules and keep relative places", "[replayer][plan]") {
  Saxpy t;
  const replay::ReplayPlan plan = replay::planReplay(TraceReader(t.path), t.launchSeq);
  const auto regions = replay::groupIntoRegions(plan.ranges, 2 << 20);
  REQUIRE(regions.size() == 2);
  CHECK(regions[0].start == kX);  // 0x7f1200000000 is 2 MiB aligned
  CHECK(regions[0].size == (2 << 20));
  CHECK(regions[0].members == std::vector<size_t>{0, 1});
  CHECK(regions[1].start == kZ);
  CHECK(regions[1].size == (2 << 20));
  CHECK(regions[1].members == std::vector<size_t>{2});

  // A range straddling a granule boundary takes both granules.
  std::vector<replay::ReservedRange> straddle = {{5, (2 << 20) - 16, 32, (2 << 20) - 16, AllocationKind::kDevice, false, true}};
  const auto two = replay::groupIntoRegions(straddle, 2 << 20);
  REQUIRE(two.size() == 1);
  CHECK(two[0].start == 0);
  CHECK(two[0].size == (4 << 20));
}

TEST_CASE("plan: relocation rewrites pointer parameters to the new bases", "[replayer][plan]") {
  Saxpy t;
  const replay::ReplayPlan plan = replay::planReplay(TraceReader(t.path), t.launchSeq);
  replay::AddressMap map;
  // x and y's region moves, z's stays.
  const uint64_t newBase = 0x7e0000000000;
  map.place(kX, 2 << 20, newBase);
  map.place(kZ, 2 << 20, kZ);
  CHECK(map.moved());
  const std::vector<uint8_t> params = replay::relocateParams(plan, map);
  REQUIRE(params.size() == plan.launch.params.size());
  CHECK(u64At(params, 0) == newBase);
  CHECK(u64At(params, 8) == newBase + 0x1000);  // y keeps its place relative to x
  CHECK(u64At(params, 16) == kZ + 0x40);        // unmoved, offset kept
  // Scalars untouched.
  CHECK(std::equal(params.begin() + 24, params.end(), plan.launch.params.begin() + 24));

  const DeviceRange moved = replay::relocateRange(plan.inputs[1].range, map);
  CHECK(moved.address == newBase + 0x1000);
  CHECK(moved.allocation == 2);
}

TEST_CASE("plan: pointers inside by-value structs are relocated at any 8-byte offset", "[replayer][plan]") {
  testing::TempDir dir;
  const auto path = dir / "s.gpurr";
  const uint64_t a = 0x7f0000000000, bAddr = 0x7f0000600000;
  uint64_t seq = 0;
  {
    testing::ReplayTraceBuilder b(path);
    b.alloc(1, a, 256);
    b.alloc(2, bAddr, 512);
    b.module(1);
    // kernel(int n, struct { float* in; int k; float* out; } s): n at 0,
    // the struct at 8: in at 8, k at 16, out at 24.
    KernelLaunch k;
    k.module = 1;
    k.function = "_Z6kerneli6Params";
    k.params.resize(32);
    const uint32_t n = 64;
    std::memcpy(k.params.data(), &n, 4);
    const uint64_t in = a + 0x10, out = bAddr + 0x100;
    const uint32_t kk = 7;
    std::memcpy(k.params.data() + 8, &in, 8);
    std::memcpy(k.params.data() + 16, &kk, 4);
    std::memcpy(k.params.data() + 24, &out, 8);
    k.paramLayout = {{0, 4}, {8, 24}};
    k.pointers = {{8, 1, 0x10}, {24, 2, 0x100}};
    k.inputs = {b.digest(1, a, 0, testing::patternBytes(5, 256), true),
                b.digest(2, bAddr, 0, testing::patternBytes(6, 512), true)};
    k.outputs = {b.digest(2, bAddr, 0, testing::patternBytes(7, 512), false)};
    seq = b.add(k);
    b.close();
  }
  const replay::ReplayPlan plan = replay::planReplay(TraceReader(path), seq);
  REQUIRE(plan.ranges.size() == 2);
  replay::AddressMap map;
  map.place(a, 2 << 20, 0x100000000);
  map.place(bAddr, 2 << 20, 0x200000000);
  const std::vector<uint8_t> params = replay::relocateParams(plan, map);
  CHECK(u64At(params, 8) == 0x100000000 + 0x10);
  CHECK(u64At(params, 24) == 0x200000000 + 0x100);
  uint32_t n = 0, kk = 0;
  std::memcpy(&n, params.data(), 4);
  std::memcpy(&kk, params.data() + 16, 4);
  CHECK(n == 64);
  CHECK(kk == 7);
}

TEST_CASE("plan: a VMM reservation is planned as the parts its recorded ranges cover", "[replayer][plan]") {
  testing::TempDir dir;
  const auto path = dir / "v.gpurr";
  const uint64_t segment = 0x7f4000000000;  // 64 GiB reserved, little of it mapped
  const uint64_t segmentSize = uint64_t{64} << 30;
  uint64_t seq = 0;
  {
    testing::ReplayTraceBuilder b(path);
    b.alloc(1, segment, segmentSize, AllocationKind::kVmm);
    b.module(1);
    KernelLaunch k;
    k.module = 1;
    k.function = "_Z3addPfS_";
    testing::addPointer(k, 1, segment, 0x200000);
    testing::addPointer(k, 1, segment, 0x40000000);
    k.inputs = {b.digest(1, segment + 0x200000, 0x200000, testing::patternBytes(1, 65536), true),
                b.digest(1, segment + 0x210000, 0x210000, testing::patternBytes(2, 4096), true),
                b.digest(1, segment + 0x40000000, 0x40000000, testing::patternBytes(3, 8192), true)};
    k.outputs = {b.digest(1, segment + 0x40000000, 0x40000000, testing::patternBytes(4, 8192), false)};
    seq = b.add(k);
    b.close();
  }
  const replay::ReplayPlan plan = replay::planReplay(TraceReader(path), seq);
  REQUIRE(plan.ranges.size() == 2);
  CHECK(plan.ranges[0].allocation == 1);
  CHECK(plan.ranges[0].address == segment + 0x200000);
  CHECK(plan.ranges[0].size == 65536 + 4096);  // two touching inputs, merged
  CHECK(plan.ranges[1].address == segment + 0x40000000);
  CHECK(plan.ranges[1].size == 8192);
  for (const auto& r : plan.ranges) CHECK(r.allocationAddress == segment);

  // Each part moves on its own; pointers follow the part they point into.
  replay::AddressMap map;
  for (const replay::Region& region : replay::groupIntoRegions(plan.ranges, 2 << 20)) {
    map.place(region.start, region.size, region.start - 0x1000000000);
  }
  const std::vector<uint8_t> params = replay::relocateParams(plan, map);
  CHECK(u64At(params, 0) == segment + 0x200000 - 0x1000000000);
  CHECK(u64At(params, 8) == segment + 0x40000000 - 0x1000000000);
}

TEST_CASE("plan: address map translates inside regions, one past the end, and nothing else",
          "[replayer][plan]") {
  replay::AddressMap map;
  map.place(0x1000000, 0x200000, 0x9000000);
  CHECK(map.translate(0x1000000) == 0x9000000);
  CHECK(map.translate(0x10fffff) == 0x90fffff);
  CHECK(map.translate(0x1200000) == 0x9200000);  // one past the end moves with it
  CHECK(map.translate(0x1200001) == 0x1200001);
  CHECK(map.translate(0xfffff) == 0xfffff);
  CHECK(map.relocated(0x1000010));
  CHECK_FALSE(map.relocated(0x1200000));
  replay::AddressMap same;
  same.place(0x1000000, 0x200000, 0x1000000);
  CHECK_FALSE(same.moved());
  CHECK_FALSE(same.relocated(0x1000010));
}

TEST_CASE("plan: pointers stored in device memory are found for the warning", "[replayer][plan]") {
  replay::AddressMap map;
  map.place(0x7f0000000000, 0x200000, 0x7e0000000000);
  std::vector<uint8_t> bytes(64, 0);
  const uint64_t inside = 0x7f0000000100, outside = 0x1234;
  std::memcpy(bytes.data() + 16, &outside, 8);
  std::memcpy(bytes.data() + 24, &inside, 8);
  std::memcpy(bytes.data() + 40, &inside, 8);
  const auto found = replay::findStoredPointers({0x7f0000300000, 64, 9, 0}, bytes, map);
  REQUIRE(found.has_value());
  CHECK(found->count == 2);
  CHECK(found->firstOffset == 24);
  std::vector<uint8_t> clean(64, 0);
  CHECK_FALSE(replay::findStoredPointers({0x7f0000300000, 64, 9, 0}, clean, map).has_value());
}

TEST_CASE("plan: a missing input snapshot says how to record one", "[replayer][plan][errors]") {
  Saxpy t(/*snapshots=*/false);
  try {
    replay::planReplay(TraceReader(t.path), t.launchSeq);
    FAIL("expected a ReplayError");
  } catch (const ReplayError& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("no snapshot of input alloc#1+0x0 (4.0 KiB)"));
    // --snapshot counts launches (the trace's first), not events.
    CHECK(t.launchSeq != 0);
    CHECK_THAT(msg, Catch::Contains("gpurr record --snapshot 0 -- python train.py --lr 0.1"));
    CHECK_THAT(msg, Catch::Contains(t.path.string()));
  }
}

TEST_CASE("plan: no such event, and events that are not launches", "[replayer][plan][errors]") {
  Saxpy t;
  TraceReader reader(t.path);
  CHECK_THROWS_WITH(replay::planReplay(reader, 999), Catch::Contains("no event #999") &&
                                                         Catch::Contains("end at #7"));
  CHECK_THROWS_WITH(replay::planReplay(reader, 0),
                    Catch::Contains("event #0 is an alloc event, not a kernel launch") &&
                        Catch::Contains(fmt::format("#{} after it", t.launchSeq)));
  CHECK_THROWS_WITH(replay::planReplay(reader, t.launchSeq + 1),
                    Catch::Contains("is a free event") && Catch::Contains(fmt::format("#{} before it", t.launchSeq)));
}

TEST_CASE("plan: missing images and modules", "[replayer][plan][errors]") {
  testing::TempDir dir;
  const auto path = dir / "m.gpurr";
  uint64_t noModule = 0, unknownModule = 0, noImage = 0, imageLeftOut = 0;
  {
    testing::ReplayTraceBuilder b(path);
    b.add(ModuleLoad{1, BlobRef{BlobId{1, 2}, 100, BlobEncoding::kRaw}, 90});  // never stored
    b.add(ModuleLoad{2, BlobRef{}, 90});  // recorded without --snapshot or --full
    KernelLaunch k;
    k.function = "_Z1kv";
    k.module = 2;
    imageLeftOut = b.add(k);
    k.function = "_Z1kv";
    k.module = 0;
    noModule = b.add(k);
    k.module = 7;
    unknownModule = b.add(k);
    k.module = 1;
    noImage = b.add(k);
    b.close();
  }
  TraceReader reader(path);
  CHECK_THROWS_WITH(replay::planReplay(reader, noModule), Catch::Contains("(module 0)"));
  CHECK_THROWS_WITH(replay::planReplay(reader, unknownModule), Catch::Contains("module #7, which no event"));
  CHECK_THROWS_WITH(replay::planReplay(reader, noImage),
                    Catch::Contains("image of module #1") && Catch::Contains("is missing from"));
  CHECK_THROWS_WITH(replay::planReplay(reader, imageLeftOut),
                    Catch::Contains("holds no image of module #2") && Catch::Contains("record with --snapshot"));
}

TEST_CASE("plan: a snapshot blob deleted from the store is an error", "[replayer][plan][errors]") {
  Saxpy t;
  {
    TraceReader reader(t.path);
    const replay::ReplayPlan plan = replay::planReplay(reader, t.launchSeq);
    const std::string id = plan.inputs[0].snapshot.id.hex();
    std::filesystem::remove(t.path / "blobs" / id.substr(0, 2) / id);
  }
  CHECK_THROWS_WITH(replay::planReplay(TraceReader(t.path), t.launchSeq),
                    Catch::Contains("snapshot of input alloc#1+0x0") && Catch::Contains("is missing from"));
}

TEST_CASE("plan: pointers without any recorded input need a snapshot", "[replayer][plan][errors]") {
  testing::TempDir dir;
  const auto path = dir / "n.gpurr";
  uint64_t seq = 0;
  {
    testing::ReplayTraceBuilder b(path);
    b.alloc(1, kX, 4096);
    b.module(1);
    KernelLaunch k;
    k.module = 1;
    k.function = "_Z1kPf";
    k.hashed = false;
    testing::addPointer(k, 1, kX, 0);
    seq = b.add(k);
    b.close();
  }
  CHECK_THROWS_WITH(replay::planReplay(TraceReader(path), seq),
                    Catch::Contains("takes 1 device pointer(s)") && Catch::Contains("skipped this launch") &&
                        Catch::Contains("--snapshot 0"));  // the trace's first launch, event #2
}

TEST_CASE("plan: a hashed launch that reads nothing starts from zero-filled memory", "[replayer][plan]") {
  testing::TempDir dir;
  const auto path = dir / "f.gpurr";
  uint64_t seq = 0;
  const std::vector<uint8_t> filled(4096, 0x3f);
  {
    testing::ReplayTraceBuilder b(path);
    b.alloc(1, kX, 4096);
    b.module(1);
    KernelLaunch k;
    k.module = 1;
    k.function = "_Z4fillPfm";
    testing::addPointer(k, 1, kX, 0);
    k.outputs = {b.digest(1, kX, 0, filled, false)};
    seq = b.add(k);
    b.close();
  }
  const replay::ReplayPlan plan = replay::planReplay(TraceReader(path), seq);
  REQUIRE(plan.ranges.size() == 1);
  CHECK_FALSE(plan.ranges[0].restored);
  CHECK(plan.inputs.empty());
  REQUIRE(plan.outputs.size() == 1);
  CHECK(plan.outputs[0].digest == hash::hashBuffer(filled));
  REQUIRE(plan.warnings.size() == 1);
  CHECK_THAT(plan.warnings[0], Catch::Contains("alloc#1 4.0 KiB is not among the recorded inputs"));
}

TEST_CASE("plan: freed, unrestored and unrecorded ranges are warned about", "[replayer][plan]") {
  testing::TempDir dir;
  const auto path = dir / "w.gpurr";
  uint64_t seq = 0;
  {
    testing::ReplayTraceBuilder b(path);
    b.alloc(1, kX, 4096);
    b.alloc(2, kY, 4096);
    b.add(Free{2, kY});
    b.module(1);
    KernelLaunch k;
    k.module = 1;
    k.function = "_Z1kPfS_";
    testing::addPointer(k, 1, kX, 0);
    testing::addPointer(k, 2, kY, 0);  // use after free
    // A loose range outside every allocation, read by the kernel.
    k.inputs = {b.digest(1, kX, 0, testing::patternBytes(1, 4096), true),
                b.digest(0, 0x500000000, 0, testing::patternBytes(2, 128), true)};
    seq = b.add(k);
    b.close();
  }
  const replay::ReplayPlan plan = replay::planReplay(TraceReader(path), seq);
  REQUIRE(plan.ranges.size() == 3);
  CHECK(plan.ranges[0].allocation == 0);  // 0x500000000 sorts first
  CHECK(plan.ranges[0].size == 128);
  CHECK(plan.ranges[0].restored);
  CHECK(plan.ranges[2].allocation == 2);
  CHECK(plan.ranges[2].freedBeforeLaunch);
  CHECK_FALSE(plan.ranges[2].restored);
  // No outputs recorded: every reserved range is compared between runs.
  REQUIRE(plan.outputs.size() == 3);
  for (const auto& o : plan.outputs) CHECK_FALSE(o.recorded);
  std::string all;
  for (const std::string& w : plan.warnings) all += w + "\n";
  CHECK_THAT(all, Catch::Contains("alloc#2") && Catch::Contains("use after free"));
  CHECK_THAT(all, Catch::Contains("starts zero-filled"));
  CHECK_THAT(all, Catch::Contains("outside every allocation"));
  CHECK_THAT(all, Catch::Contains("no output digests"));
}

TEST_CASE("plan: from events in memory, and event attributes are left out", "[replayer][plan]") {
  std::vector<Event> events;
  const BlobRef image{BlobId{5, 6}, 10, BlobEncoding::kRaw};
  events.push_back({0, 0, 0, Allocation{1, kX, 4096, AllocationKind::kModuleGlobal, 0, 0}});
  events.push_back({1, 0, 0, ModuleLoad{1, image, 80}});
  KernelLaunch k;
  k.module = 1;
  k.function = "_Z1kv";
  k.attributes = {{7, std::vector<uint8_t>(16, 0)}, {4, {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0}}};
  RangeDigest in;
  in.range = {kX, 4096, 1, 0};
  in.snapshot = BlobRef{BlobId{7, 8}, 4096, BlobEncoding::kRaw};
  k.inputs = {in};
  events.push_back({5, 0, 0, k});
  Header header;  // no GPU described: the image's architecture stands in
  const replay::ReplayPlan plan =
      replay::planReplay(events, header, "mem.gpurr", 5, [](const BlobId&) { return true; });
  CHECK(plan.recordedArch == 80);
  CHECK_FALSE(plan.recordedGpu.has_value());
  CHECK(plan.launchIndex == 0);
  std::string all;
  for (const std::string& w : plan.warnings) all += w + "\n";
  CHECK_THAT(all, Catch::Contains("launch attribute 7"));
  CHECK_THAT(all, Catch::Contains("module globals"));
  CHECK_FALSE(replay::replayableAttribute(7));
  CHECK_FALSE(replay::replayableAttribute(12));
  CHECK(replay::replayableAttribute(4));
}
