// Whole-stream replay planning on traces written with TraceWriter:
// allocations over time (a freed range reused), copies with and without their
// bytes, memsets, launches checked and not, where replay stops (graph
// launches, 2D sets, copies it cannot repeat; not what was captured into a
// graph), --until, and the refusals
// (not --full, several GPUs, missing images).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "replayer/report.h"
#include "replayer/stream_plan.h"
#include "tests/replayer/replay_trace.h"
#include "tests/unit/test_util.h"

using namespace gpurr;
using namespace gpurr::trace;
using gpurr::replay::ReplayError;
using gpurr::replay::StreamOpKind;

namespace {

constexpr uint64_t kX = 0x7f1200000000;  // alloc#1 (4 KiB), freed, then alloc#3 (8 KiB) at the same place
constexpr uint64_t kY = 0x7f1200400000;  // alloc#2, 4 KiB, another granule

Header fullHeader() {
  Header h = testing::replayHeader();
  h.options.full = true;
  h.options.captureHostData = true;
  return h;
}

Memcpy copy(MemcpyKind kind, DeviceRange dst, DeviceRange src, uint64_t size) {
  Memcpy m;
  m.kind = kind;
  m.size = size;
  m.dst = dst;
  m.src = src;
  return m;
}

// A launch of `function` reading `in` and writing `out` (whole allocations).
KernelLaunch launchOf(testing::ReplayTraceBuilder& b, const std::string& function, uint32_t inOrdinal, uint64_t in,
                      uint32_t outOrdinal, uint64_t out, uint64_t size, bool hashed = true) {
  KernelLaunch k;
  k.module = 1;
  k.function = function;
  k.grid = {4, 1, 1};
  k.block = {256, 1, 1};
  testing::addPointer(k, inOrdinal, in, 0);
  testing::addPointer(k, outOrdinal, out, 0);
  testing::addScalar(k, static_cast<uint32_t>(size / 4));
  k.hashed = hashed;
  if (hashed) {
    k.inputs = {b.digest(inOrdinal, in, 0, testing::patternBytes(inOrdinal, size), false)};
    k.outputs = {b.digest(outOrdinal, out, 0, testing::patternBytes(outOrdinal + 100, size), false)};
  }
  return k;
}

// The stream of the tests: see the seq comments.
struct Stream {
  testing::TempDir dir;
  std::filesystem::path path = dir / "full.gpurr";
  BlobRef xData;

  explicit Stream(Header header = fullHeader()) {
    testing::ReplayTraceBuilder b(path, header);
    b.alloc(1, kX, 4096);                                    // #0
    b.alloc(2, kY, 4096);                                    // #1
    b.module(1);                                             // #2
    Memcpy up = copy(MemcpyKind::kHostToDevice, {kX, 4096, 1, 0}, {0x5000, 4096, 0, 0}, 4096);
    xData = b.writer().putBlob(testing::patternBytes(1, 4096));
    up.data = xData;
    b.add(up);                                               // #3
    b.add(Memset{0, false, {kY, 4096, 2, 0}, 0x3f800000, 4, 0x1234});  // #4
    b.add(launchOf(b, "_Z4stepPKfPfi", 1, kX, 2, kY, 4096));  // #5
    b.add(Free{1, kX});                                      // #6
    b.alloc(3, kX, 8192);                                    // #7: alloc#1's range, reused
    Memcpy onDevice = copy(MemcpyKind::kDeviceToDevice, {kX, 4096, 3, 0}, {kY, 4096, 2, 0}, 4096);
    onDevice.digest = 0x77;
    b.add(onDevice);                                         // #8
    b.add(launchOf(b, "_Z4stepPKfPfi", 3, kX, 2, kY, 4096, /*hashed=*/false));  // #9
    Memcpy down = copy(MemcpyKind::kDeviceToHost, {0x6000, 4096, 0, 0}, {kY, 4096, 2, 0}, 4096);
    down.digest = 0x99;
    b.add(down);                                             // #10
    b.add(Sync{SyncKind::kContextSynchronize, 0, 0});        // #11
    b.add(GraphLaunch{0xabc, 0, 3, {}, {}});                 // #12
    b.add(launchOf(b, "_Z4stepPKfPfi", 3, kX, 2, kY, 4096));  // #13
    b.close();
  }
};

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace

TEST_CASE("stream plan: address space over time, operations in order, stop at a graph launch",
          "[replayer][stream]") {
  Stream t;
  TraceReader reader(t.path);
  const replay::StreamPlan plan = replay::planStreamReplay(reader);

  // Every allocation ever live, the reused range once per allocation.
  REQUIRE(plan.ranges.size() == 3);
  CHECK(plan.ranges[0].address == kX);
  CHECK(plan.ranges[1].address == kX);
  CHECK(plan.ranges[2].address == kY);
  CHECK(((plan.ranges[0].allocation == 1 && plan.ranges[0].size == 4096 && plan.ranges[1].allocation == 3 &&
          plan.ranges[1].size == 8192) ||
         (plan.ranges[0].allocation == 3 && plan.ranges[1].allocation == 1)));
  CHECK(plan.allocationStarts.at(1) == kX);
  CHECK(plan.allocationStarts.at(3) == kX);
  CHECK(plan.allocationStarts.at(2) == kY);
  // The reused range is one region: both allocations lie at one new place.
  const auto regions = replay::groupIntoRegions(plan.ranges, 2 << 20);
  REQUIRE(regions.size() == 2);
  CHECK(regions[0].members.size() == 2);
  CHECK(regions[0].start == kX);

  CHECK(plan.modules.size() == 1);
  CHECK(plan.modules.at(1).arch == 90);
  CHECK(plan.recordedArch == 90);

  // Stops before the graph launch; what comes after it is not counted.
  REQUIRE(plan.stopSeq.has_value());
  CHECK(*plan.stopSeq == 12);
  CHECK_THAT(plan.stopReason, Catch::Contains("event #12 launches a CUDA graph (3 nodes)") &&
                                  Catch::Contains("cannot run it"));
  CHECK(plan.firstSeq == 0);
  CHECK(plan.lastSeq == 11);
  CHECK(plan.events == 12);
  CHECK(plan.traceEvents == 14);
  CHECK(plan.launches == 2);
  CHECK(plan.checkedLaunches == 1);
  CHECK(plan.copiesToDevice == 1);
  CHECK(plan.bytesToDevice == 4096);
  CHECK(plan.memsets == 1);
  CHECK(plan.copiesOnDevice == 1);
  CHECK(plan.copiesToHost == 1);
  CHECK(plan.checkedCopiesToHost == 1);
  CHECK(plan.operations == 6);

  REQUIRE(plan.preview.size() == 6);
  const std::vector<std::pair<uint64_t, StreamOpKind>> expected = {
      {3, StreamOpKind::kCopyToDevice}, {4, StreamOpKind::kMemset},     {5, StreamOpKind::kLaunch},
      {8, StreamOpKind::kCopyOnDevice}, {9, StreamOpKind::kLaunch},     {10, StreamOpKind::kCopyToHost}};
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(plan.preview[i].seq == expected[i].first);
    CHECK(plan.preview[i].kind == expected[i].second);
    CHECK(plan.preview[i].launch == nullptr);  // the event is gone
  }
  CHECK(plan.preview[0].data == t.xData);
  CHECK(plan.preview[0].dst.allocation == 1);
  CHECK(plan.preview[1].value == 0x3f800000);
  CHECK(plan.preview[1].elementSize == 4);
  CHECK(plan.preview[2].function == "_Z4stepPKfPfi");
  CHECK(plan.preview[2].checked);
  CHECK(plan.preview[3].dst.allocation == 3);
  CHECK(plan.preview[3].src.allocation == 2);
  CHECK_FALSE(plan.preview[4].checked);
  CHECK(plan.preview[5].digest == 0x99);
  CHECK(plan.preview[5].checked);

  CHECK_THAT(joined(plan.warnings),
             Catch::Contains("1 launch was not hashed although the recording selected every launch (first #9)"));

  const std::string text = replay::formatStreamPlan(plan);
  CHECK_THAT(text, Catch::Contains("events    #0..#11: 12 of the trace's 14"));
  CHECK_THAT(text, Catch::Contains("launches  2 (1 checked against recorded output digests)"));
  CHECK_THAT(text, Catch::Contains("1 to the device (4.0 KiB restored from the recording)"));
  CHECK_THAT(text, Catch::Contains("stop      before #12: event #12 launches a CUDA graph"));
  CHECK_THAT(text, Catch::Contains("#3      copy to device   alloc#1+0x0 (4.0 KiB) from blob " + t.xData.id.hex()));
  const auto json = replay::streamPlanJson(plan);
  CHECK(json["stopSeq"] == 12);
  CHECK(json["launches"] == 2);
  CHECK(json["preview"][1]["kind"] == "memset");
  CHECK(json["ranges"].size() == 3);
}

TEST_CASE("stream plan: --until stops after the event", "[replayer][stream]") {
  Stream t;
  TraceReader reader(t.path);
  replay::StreamPlanOptions options;
  options.until = 5;
  const replay::StreamPlan plan = replay::planStreamReplay(reader, options);
  CHECK_FALSE(plan.stopSeq.has_value());
  CHECK(plan.lastSeq == 5);
  CHECK(plan.events == 6);
  CHECK(plan.launches == 1);
  CHECK(plan.operations == 3);
  // alloc#3 comes after it: not reserved.
  REQUIRE(plan.ranges.size() == 2);
  CHECK(plan.ranges[0].allocation == 1);
  CHECK(plan.ranges[1].allocation == 2);
  CHECK_THAT(replay::formatStreamPlan(plan), Catch::Contains("(--until 5)"));

  options.until = 0;
  const replay::StreamPlan nothing = replay::planStreamReplay(reader, options);
  CHECK(nothing.operations == 0);
  CHECK_THAT(joined(nothing.warnings), Catch::Contains("the trace holds no GPU operation to replay"));
}

TEST_CASE("stream plan: a trace recorded without --full is refused, saying how to record one",
          "[replayer][stream]") {
  Header h = testing::replayHeader();
  h.options.captureHostData = true;
  Stream t(h);
  TraceReader reader(t.path);
  CHECK_THROWS_AS(replay::planStreamReplay(reader), ReplayError);
  CHECK_THROWS_WITH(replay::planStreamReplay(reader),
                    Catch::Contains(t.path.string() + ": not a --full recording") &&
                        Catch::Contains("`gpurr record --full -o TRACE -- python train.py --lr 0.1`") &&
                        Catch::Contains("--launch K"));
}

TEST_CASE("stream plan: a copy to the device without its bytes stops the replay, a missing blob is an error",
          "[replayer][stream]") {
  const Header header = fullHeader();
  std::vector<Event> events;
  events.push_back({0, 0, 0, Allocation{1, kX, 4096, AllocationKind::kDevice, 0, 0}});
  Memcpy up = copy(MemcpyKind::kHostToDevice, {kX, 4096, 1, 0}, {0x5000, 4096, 0, 0}, 4096);
  events.push_back({1, 0, 0, up});
  auto all = [](const BlobId&) { return true; };
  // A --full recording keeps the bytes of every copy but 2D and 3D ones.
  const replay::StreamPlan stopped = replay::planStreamReplay(events, header, "t.gpurr", {}, all);
  REQUIRE(stopped.stopSeq.has_value());
  CHECK(*stopped.stopSeq == 1);
  CHECK_THAT(stopped.stopReason, Catch::Contains("event #1 copies 4.0 KiB from the host to alloc#1+0x0 (4.0 KiB), "
                                                 "but the trace holds no copy of those bytes (a 2D or 3D copy") &&
                                     Catch::Contains("or a recording made without --full"));
  CHECK(stopped.copiesToDevice == 0);

  const std::vector<uint8_t> bytes = testing::patternBytes(5, 4096);
  up.data = BlobRef{blobIdOf(bytes), 4096, BlobEncoding::kRaw};
  events[1].payload = up;
  auto none = [](const BlobId&) { return false; };
  CHECK_THROWS_WITH(replay::planStreamReplay(events, header, "t.gpurr", {}, none),
                    Catch::Contains("t.gpurr: event #1: the bytes copied to alloc#1+0x0 (4.0 KiB) (blob " +
                                    up.data->id.hex() + ") are missing from t.gpurr/blobs"));
  // With the blob there, the copy is planned.
  const replay::StreamPlan plan = replay::planStreamReplay(events, header, "t.gpurr", {}, all);
  CHECK(plan.copiesToDevice == 1);
  CHECK(plan.bytesToDevice == 4096);
}

TEST_CASE("stream plan: sets and copies the trace describes only by their extent stop the replay",
          "[replayer][stream]") {
  const Header header = fullHeader();
  auto all = [](const BlobId&) { return true; };
  std::vector<Event> events;
  events.push_back({0, 0, 0, Allocation{1, kX, 1 << 20, AllocationKind::kDevice, 0, 0}});
  events.push_back({1, 0, 0, Memset{0, false, {kX, 4096, 1, 0}, 0, 1, 0x55}});
  // A 2D set: its extent spans the rows and the gaps between them, no digest.
  events.push_back({2, 0, 0, Memset{0, false, {kX, 3 * 1024 + 100, 1, 0}, 0xffff, 2, 0}});
  replay::StreamPlan plan = replay::planStreamReplay(events, header, "t.gpurr", {}, all);
  REQUIRE(plan.stopSeq.has_value());
  CHECK(*plan.stopSeq == 2);
  CHECK_THAT(plan.stopReason, Catch::Contains("event #2 sets alloc#1+0x0 (3.1 KiB) to 0xffff in 2-byte elements") &&
                                  Catch::Contains("a 2D set, cuMemsetD2D*"));
  CHECK(plan.memsets == 1);

  events[2].payload = copy(MemcpyKind::kDeviceToDevice, {kX + 8192, 4096, 1, 8192}, {kX, 4096, 1, 0}, 4096);
  plan = replay::planStreamReplay(events, header, "t.gpurr", {}, all);
  REQUIRE(plan.stopSeq.has_value());
  CHECK_THAT(plan.stopReason, Catch::Contains("device-to-device copy of 4.0 KiB") && Catch::Contains("2D or 3D"));

  events[2].payload = copy(MemcpyKind::kPeer, {kX + 8192, 4096, 1, 8192}, {kX, 4096, 1, 0}, 4096);
  plan = replay::planStreamReplay(events, header, "t.gpurr", {}, all);
  CHECK_THAT(plan.stopReason, Catch::Contains("peer copy between GPUs"));

  // Host-to-host copies, syncs and host functions need nothing.
  events[2].payload = copy(MemcpyKind::kHostToHost, {0x1000, 64, 0, 0}, {0x2000, 64, 0, 0}, 64);
  KernelLaunch host;
  host.api = LaunchApi::kLaunchHost;
  events.push_back({3, 0, 0, host});
  plan = replay::planStreamReplay(events, header, "t.gpurr", {}, all);
  CHECK_FALSE(plan.stopSeq.has_value());
  CHECK(plan.operations == 1);
  CHECK(plan.hostFunctions == 1);
  CHECK(plan.events == 4);

  // A launch captured into a graph did not run: nothing to load or run (not
  // even a module: it names none).
  KernelLaunch captured;
  captured.function = "_Z4stepPf";
  captured.captured = true;
  captured.captureId = 5;
  events.push_back({4, 0, 0, captured});
  plan = replay::planStreamReplay(events, header, "t.gpurr", {}, all);
  CHECK_FALSE(plan.stopSeq.has_value());
  CHECK(plan.launches == 0);
  CHECK(plan.operations == 1);

  // Nor did copies, sets and graph launches captured into a graph, each of
  // which would stop the replay if it had run (no digest, no bytes, a graph).
  Memcpy onDevice = copy(MemcpyKind::kDeviceToDevice, {kX + 8192, 4096, 1, 8192}, {kX, 4096, 1, 0}, 4096);
  Memcpy toDevice = copy(MemcpyKind::kHostToDevice, {kX, 64, 1, 0}, {0x1000, 64, 0, 0}, 64);
  Memset set{0, true, {kX, 4096, 1, 0}, 0, 1, 0};
  GraphLaunch graph;
  graph.nodeCount = 3;
  onDevice.captured = toDevice.captured = set.captured = graph.captured = true;
  events.push_back({5, 0, 0, onDevice});
  events.push_back({6, 0, 0, toDevice});
  events.push_back({7, 0, 0, set});
  events.push_back({8, 0, 0, graph});
  plan = replay::planStreamReplay(events, header, "t.gpurr", {}, all);
  CHECK_FALSE(plan.stopSeq.has_value());
  CHECK(plan.operations == 1);
  CHECK(plan.memsets == 1);
}

TEST_CASE("stream plan: VMM reservations get the parts the stream touches", "[replayer][stream]") {
  const Header header = fullHeader();
  auto all = [](const BlobId&) { return true; };
  constexpr uint64_t kV = 0x7f4000000000;
  std::vector<Event> events;
  events.push_back({0, 0, 0, Allocation{1, kV, uint64_t{64} << 30, AllocationKind::kVmm, 0, 0}});
  events.push_back({1, 0, 0, Memset{0, false, {kV + (4 << 20), 4096, 1, 4 << 20}, 0, 4, 0x55}});
  events.push_back({2, 0, 0, Memset{0, false, {kV + (4 << 20) + 4096, 4096, 1, (4 << 20) + 4096}, 0, 4, 0x55}});
  events.push_back({3, 0, 0, Memset{0, false, {kV + (40 << 20), 100, 1, 40 << 20}, 0, 1, 0x55}});
  const replay::StreamPlan plan = replay::planStreamReplay(events, header, "t.gpurr", {}, all);
  REQUIRE(plan.ranges.size() == 2);
  CHECK(plan.ranges[0].address == kV + (4 << 20));
  CHECK(plan.ranges[0].size == 8192);
  CHECK(plan.ranges[0].allocationAddress == kV);
  CHECK(plan.ranges[1].address == kV + (40 << 20));
  CHECK(plan.ranges[1].size == 100);
  CHECK(plan.allocationStarts.at(1) == kV);
}

TEST_CASE("stream plan: refusals: several GPUs, an image never loaded or missing, no module", "[replayer][stream]") {
  const Header header = fullHeader();
  auto all = [](const BlobId&) { return true; };
  std::vector<Event> events;
  events.push_back({0, 0, 0, Allocation{1, kX, 4096, AllocationKind::kDevice, 0, 0}});
  events.push_back({1, 0, 0, Allocation{2, kY, 4096, AllocationKind::kDevice, 1, 0}});
  CHECK_THROWS_WITH(replay::planStreamReplay(events, header, "t.gpurr", {}, all),
                    Catch::Contains("allocated memory on GPUs 0, 1"));

  events.pop_back();
  KernelLaunch k;
  k.module = 7;
  k.function = "_Z4fillPfi";
  events.push_back({1, 0, 0, k});
  CHECK_THROWS_WITH(replay::planStreamReplay(events, header, "t.gpurr", {}, all),
                    Catch::Contains("names module #7, which no event before it loaded"));

  const std::vector<uint8_t> image = testing::patternBytes(9, 100);
  events.insert(events.begin() + 1, {1, 0, 0, ModuleLoad{7, BlobRef{blobIdOf(image), 100, BlobEncoding::kRaw}, 90}});
  events[2].seq = 2;
  auto none = [](const BlobId&) { return false; };
  CHECK_THROWS_WITH(replay::planStreamReplay(events, header, "t.gpurr", {}, none),
                    Catch::Contains("the image of module #7") && Catch::Contains("is missing from t.gpurr/blobs"));
  CHECK(replay::planStreamReplay(events, header, "t.gpurr", {}, all).launches == 1);

  std::get<KernelLaunch>(events[2].payload).module = 0;
  const replay::StreamPlan plan = replay::planStreamReplay(events, header, "t.gpurr", {}, all);
  REQUIRE(plan.stopSeq.has_value());
  CHECK_THAT(plan.stopReason, Catch::Contains("launch #2 (_Z4fillPfi) cannot be re-run"));
}
