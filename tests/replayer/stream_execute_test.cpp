// Whole-stream replay against the fake CUDA driver (fake_driver.h), on the
// CPU: a recorded stream of copies, sets and launches of an integer kernel
// (y[i] += x[i] + c) whose digests the test computes the way the program
// would have. Every digest matching; launch 3's output recorded differently
// (replay stops there and says so); relocation; unhashed launches run but
// not checked; a stop at a graph launch; resources released.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "replayer/report.h"
#include "replayer/stream_execute.h"
#include "tests/replayer/fake_driver.h"
#include "tests/replayer/replay_trace.h"
#include "tests/unit/test_util.h"

using namespace gpurr;
using namespace gpurr::trace;
using namespace gpurr::testing::fake;

namespace {

constexpr uint64_t kX = 0x7f1200000000;  // alloc#1
constexpr uint64_t kY = 0x7f1200010000;  // alloc#2, same granule as x
constexpr uint64_t kZ = 0x7f1200800000;  // alloc#3, another granule
constexpr uint32_t kN = 3000;

int addCalls = 0;
int glitchAtCall = 0;  // this call (1-based) adds 1 more to y[0]: a rare race

// fake_add(unsigned n, unsigned* x, unsigned* y, unsigned c): y[i] += x[i] + c.
CUresult fakeAdd(const CUlaunchConfig&, std::span<const uint8_t> params) {
  if (params.size() != 28) return CUDA_ERROR_INVALID_VALUE;
  uint32_t n, c;
  uint64_t x, y;
  std::memcpy(&n, params.data(), 4);
  std::memcpy(&x, params.data() + 8, 8);
  std::memcpy(&y, params.data() + 16, 8);
  std::memcpy(&c, params.data() + 24, 4);
  auto* xs = reinterpret_cast<uint32_t*>(at(x, n * 4ull));
  auto* ys = reinterpret_cast<uint32_t*>(at(y, n * 4ull));
  if (!xs || !ys) return CUDA_ERROR_ILLEGAL_ADDRESS;
  for (uint32_t i = 0; i < n; ++i) ys[i] += xs[i] + c;
  if (++addCalls == glitchAtCall) ys[0] += 1;
  return CUDA_SUCCESS;
}

std::vector<uint8_t> bytesOf(const std::vector<uint32_t>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

uint64_t digestOf(const std::vector<uint32_t>& v) { return hash::hashBuffer(bytesOf(v)); }

Header fullHeader() {
  Header h = testing::replayHeader();
  h.options.full = true;
  h.options.captureHostData = true;
  return h;
}

// The recorded program, simulated: x copied from the host, y set to 7, five
// launches of fake_add (c = 1..5; the third reads z, a copy of y), then y
// read back.
struct StreamTrace {
  testing::TempDir dir;
  std::filesystem::path path = dir / "stream.gpurr";
  std::vector<uint64_t> launchSeqs;
  uint64_t readBackSeq = 0;

  // `wrongLaunch`: the launch (0-based) whose recorded output is taken as if
  // c had been 40 (a nondeterministic kernel's other result); `unhashed`:
  // launches recorded without digests; `graphAfter`: a graph launch after
  // the second launch.
  // `wrongInput`: the wrong launch's recorded inputs differ too (the state
  // had diverged before it).
  // `pointerInX`: x's bytes from the host hold y's address at +0x10, as a
  // pointer stored in device memory.
  explicit StreamTrace(int wrongLaunch = -1, std::vector<int> unhashed = {}, bool graphAfter = false,
                       bool wrongInput = false, bool pointerInX = false) {
    std::vector<uint32_t> x(kN), y(kN, 7), z(kN, 0);
    for (uint32_t i = 0; i < kN; ++i) x[i] = i * 2654435761u;
    if (pointerInX) std::memcpy(&x[4], &kY, 8);
    testing::ReplayTraceBuilder b(path, fullHeader());
    b.alloc(1, kX, kN * 4);
    b.alloc(2, kY, kN * 4);
    b.alloc(3, kZ, kN * 4);
    const std::string image = "FAKEIMG fake_add";
    b.module(1, std::vector<uint8_t>(image.begin(), image.end()));
    Memcpy up;
    up.kind = MemcpyKind::kHostToDevice;
    up.size = kN * 4;
    up.dst = {kX, kN * 4, 1, 0};
    up.src = {0x5000, kN * 4, 0, 0};
    up.digest = digestOf(x);
    up.data = b.writer().putBlob(bytesOf(x));
    b.add(up);
    b.add(Memset{0, false, {kY, kN * 4, 2, 0}, 7, 4, digestOf(y)});
    for (int i = 0; i < 5; ++i) {
      const uint32_t c = static_cast<uint32_t>(i + 1);
      const bool fromZ = i == 2;
      if (fromZ) {
        z = y;
        Memcpy dd;
        dd.kind = MemcpyKind::kDeviceToDevice;
        dd.size = kN * 4;
        dd.dst = {kZ, kN * 4, 3, 0};
        dd.src = {kY, kN * 4, 2, 0};
        dd.digest = digestOf(z);
        b.add(dd);
      }
      const std::vector<uint32_t>& in = fromZ ? z : x;
      const uint32_t inOrdinal = fromZ ? 3 : 1;
      const uint64_t inAddress = fromZ ? kZ : kX;
      KernelLaunch k;
      k.module = 1;
      k.function = "fake_add";
      k.grid = {12, 1, 1};
      k.block = {256, 1, 1};
      testing::addScalar(k, kN);
      testing::addPointer(k, inOrdinal, inAddress, 0);
      testing::addPointer(k, 2, kY, 0);
      testing::addScalar(k, c);
      std::vector<uint32_t> yBefore = y;
      if (i == wrongLaunch && wrongInput) yBefore[17] ^= 1;
      k.inputs = {b.digest(inOrdinal, inAddress, 0, bytesOf(in), false), b.digest(2, kY, 0, bytesOf(yBefore), false)};
      for (uint32_t j = 0; j < kN; ++j) y[j] += in[j] + c;
      std::vector<uint32_t> recorded = y;
      if (i == wrongLaunch) {
        for (uint32_t j = 0; j < kN; ++j) recorded[j] += 39;
      }
      k.outputs = {b.digest(inOrdinal, inAddress, 0, bytesOf(in), false),
                   b.digest(2, kY, 0, bytesOf(recorded), /*snapshot=*/i == wrongLaunch)};
      if (std::find(unhashed.begin(), unhashed.end(), i) != unhashed.end()) {
        k.hashed = false;
        k.inputs.clear();
        k.outputs.clear();
      }
      launchSeqs.push_back(b.add(k));
      if (graphAfter && i == 1) b.add(GraphLaunch{0xabc, 0, 2, {}, {}});
    }
    Memcpy down;
    down.kind = MemcpyKind::kDeviceToHost;
    down.size = kN * 4;
    down.dst = {0x6000, kN * 4, 0, 0};
    down.src = {kY, kN * 4, 2, 0};
    down.digest = digestOf(y);
    readBackSeq = b.add(down);
    b.close();
  }
};

struct Replayed {
  replay::StreamPlan plan;
  replay::StreamOutcome outcome;
};

Replayed replayWith(FakeDriver& fake, const StreamTrace& t, replay::StreamReplayOptions options = {},
                    int glitch = 0) {
  fake.state.kernels["fake_add"] = fakeAdd;
  addCalls = 0;
  glitchAtCall = glitch;
  TraceReader reader(t.path);
  Replayed r;
  r.plan = replay::planStreamReplay(reader);
  r.outcome = replay::executeStreamReplay(reader, r.plan, options, fake.api, fake.drv);
  return r;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace

TEST_CASE("stream replay: every digest matches the recording", "[replayer][stream][execute]") {
  FakeDriver fake;
  StreamTrace t;
  const auto [plan, o] = replayWith(fake, t);
  CHECK(o.verdict == replay::StreamVerdict::kEqual);
  CHECK(replay::exitCode(o.verdict) == 0);
  CHECK_FALSE(o.mismatch.has_value());
  CHECK(o.launches == 5);
  CHECK(o.checkedLaunches == 5);
  CHECK(o.matchingLaunches == 5);
  CHECK(o.unhashedLaunches == 0);
  CHECK(o.checkedCopiesToHost == 1);
  CHECK(o.matchingCopiesToHost == 1);
  CHECK(o.bytesRestored == kN * 4);
  CHECK(o.operations == 9);  // copy, set, 5 launches, copy on device, read-back
  CHECK(o.lastSeq == t.readBackSeq);
  CHECK(fake.state.launchesOf["fake_add"] == 5);
  CHECK_FALSE(o.relocated);
  REQUIRE(o.placements.size() == 2);
  CHECK(o.placements[0].newStart == kX);
  CHECK(o.placements[1].newStart == kZ);
  // Address space before anything else, the image loaded once.
  const auto& calls = fake.state.calls;
  REQUIRE(calls.size() >= 3);
  CHECK(calls[0] == "context");
  CHECK(calls[1] == "reserve");
  CHECK(calls[2] == "reserve");
  CHECK(std::count(calls.begin(), calls.end(), "load image") == 1);
  CHECK(std::count(calls.begin(), calls.end(), "set") == 1);  // the recorded 4-byte set

  const std::string text = replay::formatStreamOutcome(plan, o);
  CHECK_THAT(text, Catch::Contains("verdict   equal: all 5 checked launch(es) match the recording (5 replayed)"));
  CHECK_THAT(text, Catch::Contains("readback  1 of 1 checked copies to the host match"));
  const auto json = replay::streamOutcomeJson(plan, o);
  CHECK(json["verdict"] == "equal");
  CHECK(json["matchingLaunches"] == 5);
  CHECK(json["mismatch"].is_null());
  CHECK(json["bytesRestored"] == kN * 4);
  fake.checkReleased();
}

TEST_CASE("stream replay: launch 3's output differs: replay stops there and says so", "[replayer][stream][execute]") {
  FakeDriver fake;
  StreamTrace t(/*wrongLaunch=*/3);
  const auto [plan, o] = replayWith(fake, t);
  CHECK(o.verdict == replay::StreamVerdict::kDifferent);
  CHECK(replay::exitCode(o.verdict) == 1);
  REQUIRE(o.mismatch.has_value());
  const replay::StreamMismatch& m = *o.mismatch;
  CHECK(m.seq == t.launchSeqs[3]);
  CHECK(m.kind == replay::StreamOpKind::kLaunch);
  CHECK(m.launchIndex == 3);
  CHECK(m.function == "fake_add");
  CHECK(m.outputsChecked == 2);
  REQUIRE(m.outputs.size() == 1);
  CHECK(m.outputs[0].output == 1);
  CHECK(m.outputs[0].range.allocation == 2);
  CHECK(m.outputs[0].recorded != m.outputs[0].replayed);
  CHECK(o.matchingLaunches == 3);
  CHECK(o.checkedLaunches == 4);
  // Nothing after it ran; then launches 0 to 2 again, to check its inputs.
  CHECK(fake.state.launchesOf["fake_add"] == 4 + 3);
  CHECK(m.inputsChecked);
  CHECK(m.inputRanges == 2);
  CHECK(m.inputs.empty());
  CHECK_FALSE(m.rerunDifferedAt.has_value());
  CHECK(o.checkedCopiesToHost == 0);
  CHECK(o.lastSeq == t.launchSeqs[3]);
  // The recording kept the output's bytes: every element differs.
  REQUIRE(m.comparison.has_value());
  const replay::RangeComparison& y = m.comparison->ranges()[0];
  CHECK_FALSE(y.equal);
  CHECK(y.chunks == 1);
  CHECK(y.differingChunks == 1);
  REQUIRE(y.elements.has_value());
  CHECK(y.elements->differing == kN);

  const std::string text = replay::formatStreamOutcome(plan, o);
  CHECK_THAT(text, Catch::Contains(fmt::format("verdict   different at launch #{} (fake_add): 3 earlier checked "
                                               "launch(es) matched",
                                               m.seq)));
  CHECK_THAT(text, Catch::Contains(fmt::format("output    #1 alloc#2+0x0 (11.7 KiB): recorded {:016x}, replayed {:016x}",
                                               m.outputs[0].recorded, m.outputs[0].replayed)));
  CHECK_THAT(text, Catch::Contains(fmt::format("gpurr replay {} --launch {} --repeat 50", t.path.string(), m.seq)));
  CHECK(m.launchNumber == 3);  // --snapshot selects launches by their number, not their event's
  CHECK_THAT(text, Catch::Contains("--full --snapshot 3 -- "));
  CHECK_THAT(text, Catch::Contains("inputs    equal to the recording (2 range(s), the stream replayed again up to "
                                   "the launch): same inputs, different outputs"));
  const auto json = replay::streamOutcomeJson(plan, o);
  CHECK(json["verdict"] == "different");
  CHECK(json["mismatch"]["seq"] == m.seq);
  CHECK(json["mismatch"]["launchIndex"] == 3);
  CHECK(json["mismatch"]["matchedBefore"] == 3);
  CHECK(json["mismatch"]["outputs"][0]["recorded"] == fmt::format("{:016x}", m.outputs[0].recorded));
  CHECK(json["mismatch"]["comparison"]["differing"] == 1);
  CHECK(json["mismatch"]["inputsChecked"] == true);
  CHECK(json["mismatch"]["differingInputs"].empty());
  fake.checkReleased();
}

TEST_CASE("stream replay: a mismatch whose inputs already differed says the state diverged unseen",
          "[replayer][stream][execute]") {
  FakeDriver fake;
  StreamTrace t(/*wrongLaunch=*/3, {}, false, /*wrongInput=*/true);
  const auto [plan, o] = replayWith(fake, t);
  REQUIRE(o.mismatch.has_value());
  const replay::StreamMismatch& m = *o.mismatch;
  CHECK(m.seq == t.launchSeqs[3]);
  CHECK(m.inputsChecked);
  REQUIRE(m.inputs.size() == 1);
  CHECK(m.inputs[0].output == 1);
  CHECK(m.inputs[0].range.allocation == 2);
  const std::string text = replay::formatStreamOutcome(plan, o);
  CHECK_THAT(text, Catch::Contains("inputs    1 of 2 differ from the recording before the launch: the state diverged "
                                   "where no check saw it"));
  CHECK_THAT(text, Catch::Contains(fmt::format("input     #1 alloc#2+0x0 (11.7 KiB): recorded {:016x}",
                                               m.inputs[0].recorded)));
  CHECK(replay::streamOutcomeJson(plan, o)["mismatch"]["differingInputs"][0]["input"] == 1);
  fake.checkReleased();
}

TEST_CASE("stream replay: a second replay that differs earlier says the stream is not deterministic",
          "[replayer][stream][execute]") {
  FakeDriver fake;
  StreamTrace t(/*wrongLaunch=*/3);
  // Calls 1-4 are the first replay (launches 0-3); call 6 is launch 1 again.
  const auto [plan, o] = replayWith(fake, t, {}, /*glitch=*/6);
  REQUIRE(o.mismatch.has_value());
  CHECK(o.mismatch->seq == t.launchSeqs[3]);
  CHECK_FALSE(o.mismatch->inputsChecked);
  REQUIRE(o.mismatch->rerunDifferedAt.has_value());
  CHECK(*o.mismatch->rerunDifferedAt == t.launchSeqs[1]);
  CHECK_THAT(replay::formatStreamOutcome(plan, o),
             Catch::Contains(fmt::format("rerun     a second replay up to the launch differed earlier, at #{}",
                                         t.launchSeqs[1])));
  fake.checkReleased();
}

TEST_CASE("stream replay: relocated memory still matches (pointer parameters rewritten)",
          "[replayer][stream][execute]") {
  FakeDriver fake;
  fake.state.taken = {{kX + 4096, 4096}};
  StreamTrace t;
  const auto [plan, o] = replayWith(fake, t);
  CHECK(o.relocated);
  REQUIRE(o.placements.size() == 2);
  CHECK(o.placements[0].newStart != kX);
  CHECK(o.placements[1].newStart == kZ);
  // Equal only if every copy, set and launch found its memory where it now is.
  CHECK(o.verdict == replay::StreamVerdict::kEqual);
  CHECK(o.matchingLaunches == 5);
  CHECK_THAT(joined(o.warnings), Catch::Contains("1 of 2 address region(s) could not be placed"));
  fake.checkReleased();

  FakeDriver forced;
  StreamTrace t2(-1, {}, false, false, /*pointerInX=*/true);
  replay::StreamReplayOptions options;
  options.forceRelocate = true;
  const auto [plan2, f] = replayWith(forced, t2, options);
  CHECK(f.placements[0].newStart != kX);
  CHECK(f.placements[1].newStart != kZ);
  CHECK(f.verdict == replay::StreamVerdict::kEqual);
  CHECK_THAT(joined(f.warnings), Catch::Contains("(--relocate)"));
  CHECK_THAT(joined(f.warnings), Catch::Contains("1 copy to the device holds words that point into relocated memory "
                                                 "(first: event #4, alloc#1+0x0 (11.7 KiB), 1 word(s), first at +0x10)"));
  forced.checkReleased();
}

TEST_CASE("stream replay: launches recorded without digests run but are not checked", "[replayer][stream][execute]") {
  FakeDriver fake;
  StreamTrace t(-1, {1, 4});
  const auto [plan, o] = replayWith(fake, t);
  CHECK(o.verdict == replay::StreamVerdict::kEqual);
  CHECK(o.launches == 5);
  CHECK(o.checkedLaunches == 3);
  CHECK(o.matchingLaunches == 3);
  CHECK(o.unhashedLaunches == 2);
  CHECK_THAT(replay::formatStreamOutcome(plan, o), Catch::Contains("2 not hashed in the recording (run unchecked)"));
  // The read-back sees what all five launches wrote.
  CHECK(o.matchingCopiesToHost == 1);
  CHECK(fake.state.launchesOf["fake_add"] == 5);
  fake.checkReleased();
}

TEST_CASE("stream replay: stops at a graph launch, everything before it checked", "[replayer][stream][execute]") {
  FakeDriver fake;
  StreamTrace t(-1, {}, /*graphAfter=*/true);
  const auto [plan, o] = replayWith(fake, t);
  CHECK(o.verdict == replay::StreamVerdict::kStopped);
  CHECK(replay::exitCode(o.verdict) == 2);
  CHECK(o.launches == 2);
  CHECK(o.matchingLaunches == 2);
  CHECK(fake.state.launchesOf["fake_add"] == 2);
  const std::string text = replay::formatStreamOutcome(plan, o);
  CHECK_THAT(text, Catch::Contains(fmt::format("verdict   stopped before event #{}: all 2 checked launch(es) up to it "
                                               "match the recording",
                                               t.launchSeqs[1] + 1)));
  CHECK_THAT(text, Catch::Contains("launches a CUDA graph (2 nodes)"));
  CHECK(replay::streamOutcomeJson(plan, o)["verdict"] == "stopped");
  fake.checkReleased();
}

TEST_CASE("stream replay: a kernel fault names where it showed and what ran before", "[replayer][stream][execute]") {
  FakeDriver fake;
  fake.state.faultOnLaunch = true;
  StreamTrace t;
  CHECK_THROWS_WITH(replayWith(fake, t),
                    Catch::Contains(fmt::format("the replay failed at launch #{} (fake_add)", t.launchSeqs[0])) &&
                        Catch::Contains("CUDA error 700"));
  fake.checkReleased();

  FakeDriver other;
  other.state.ccMajor = 8;
  StreamTrace t2;
  CHECK_THROWS_WITH(replayWith(other, t2), Catch::Contains("recorded on NVIDIA H100 80GB HBM3 (sm_90)") &&
                                               Catch::Contains("0 Fake GPU (sm_80)"));
}
