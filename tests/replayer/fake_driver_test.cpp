// One-launch replay execution against a fake CUDA driver (fake_driver.h), on
// the CPU: the replayed kernel is an in-place axpy whose pointers sit in a
// by-value struct, run in C++. This checks what a GPU cannot be asked here:
// the order of operations, placement and relocation, input restoration before
// every run, function attributes, verdicts, and that every resource is
// released.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "replayer/execute.h"
#include "tests/replayer/fake_driver.h"
#include "tests/replayer/replay_trace.h"
#include "tests/unit/test_util.h"

using namespace gpurr;
using namespace gpurr::trace;
using namespace gpurr::testing::fake;

namespace {

// ------------------------------------------------------------ the trace

constexpr uint64_t kX = 0x7f1200000000;  // alloc#1
constexpr uint64_t kY = 0x7f1200010000;  // alloc#2, same granule
constexpr uint32_t kN = 5000;
constexpr float kA = 1.75f;

std::vector<uint8_t> floats(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

struct AxpyTrace {
  testing::TempDir dir;
  std::filesystem::path path = dir / "axpy.gpurr";
  uint64_t seq = 0;
  std::vector<float> x, y, yAfter;

  // `recordedA` is what the recording's output was computed with (kA when
  // the recording is right); `image` the module's bytes.
  explicit AxpyTrace(float recordedA = kA, std::string image = "FAKEIMG fake_axpy", bool pointerInX = false,
                     Header header = testing::replayHeader()) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> unit(-1, 1);
    for (uint32_t i = 0; i < kN; ++i) {
      x.push_back(unit(rng));
      y.push_back(unit(rng));
    }
    if (pointerInX) {
      // Two floats' worth holding y's address, as a pointer stored in memory.
      std::memcpy(&x[2], &kY, 8);
    }
    for (uint32_t i = 0; i < kN; ++i) yAfter.push_back(recordedA * x[i] + y[i]);
    testing::ReplayTraceBuilder b(path, header);
    b.alloc(1, kX, kN * 4);
    b.alloc(2, kY, kN * 4);
    b.module(1, std::vector<uint8_t>(image.begin(), image.end()));
    KernelLaunch k;
    k.api = LaunchApi::kLaunchKernelEx;
    k.module = 1;
    k.function = "fake_axpy";
    k.grid = {3, 1, 1};
    k.block = {256, 1, 1};
    k.sharedMemBytes = 64 * 1024;
    k.params.assign(32, 0);
    std::memcpy(k.params.data(), &kN, 4);
    std::memcpy(k.params.data() + 8, &kX, 8);
    std::memcpy(k.params.data() + 16, &kY, 8);
    std::memcpy(k.params.data() + 24, &kA, 4);
    k.paramLayout = {{0, 4}, {8, 24}};
    k.pointers = {{8, 1, 0}, {16, 2, 0}};
    k.inputs = {b.digest(1, kX, 0, floats(x), true), b.digest(2, kY, 0, floats(y), true)};
    k.outputs = {b.digest(1, kX, 0, floats(x), false), b.digest(2, kY, 0, floats(yAfter), true)};
    seq = b.add(k);
    b.close();
  }
};

replay::ReplayOutcome replayWith(FakeDriver& fake, const AxpyTrace& t, replay::ReplayOptions options) {
  TraceReader reader(t.path);
  const replay::ReplayPlan plan = replay::planReplay(reader, t.seq);
  return replay::executeReplay(reader, plan, options, fake.api, fake.drv);
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace

TEST_CASE("fake driver: equal to the recording, at the recorded addresses", "[replayer][execute]") {
  FakeDriver fake;
  AxpyTrace t;
  replay::ReplayOptions options;
  options.repeat = 5;
  const replay::ReplayOutcome o = replayWith(fake, t, options);
  CHECK(o.verdict.kind == replay::VerdictKind::kEqual);
  CHECK(o.verdict.runs == 5);
  CHECK(o.verdict.distinct == 1);
  CHECK(o.verdict.runsMatchingRecording == 5);
  CHECK_FALSE(o.relocated);
  REQUIRE(o.placements.size() == 1);
  CHECK(o.placements[0].recordedStart == kX);
  CHECK(o.placements[0].newStart == kX);
  CHECK(o.placements[0].allocations == std::vector<uint32_t>{1, 2});
  CHECK(o.restoredBytes == 2 * kN * 4);
  CHECK(o.restoredFromDevice);
  CHECK(o.kernelMs.size() == 5);
  CHECK(o.machine.name == "Fake GPU");
  CHECK(o.machine.uuid == "GPU-abababab-abab-abab-abab-abababababab");
  REQUIRE(o.vsRecording.has_value());
  CHECK(o.vsRecording->matches());
  CHECK_FALSE(o.acrossRuns.has_value());
  CHECK(fake.state.axpyLaunches == 5);
  CHECK(fake.state.functionAttributes[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] == 64 * 1024);
  // Address space before anything else; every launch after zeroing and
  // restoring both inputs.
  const auto& calls = fake.state.calls;
  REQUIRE(calls.size() >= 3);
  CHECK(calls[0] == "context");
  CHECK(calls[1] == "reserve");
  CHECK(calls[2] == "load image");
  size_t launches = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i] != "launch") continue;
    ++launches;
    REQUIRE(i >= 3);
    CHECK(calls[i - 1] == "restore");
    CHECK(calls[i - 2] == "restore");
    CHECK(calls[i - 3] == "zero");
  }
  CHECK(launches == 5);
  fake.checkReleased();
}

TEST_CASE("fake driver: a taken address relocates the region and rewrites the struct's pointers",
          "[replayer][execute]") {
  FakeDriver fake;
  fake.state.taken = {{kX - 4096, 8192}};
  AxpyTrace t;
  replay::ReplayOptions options;
  options.repeat = 3;
  const replay::ReplayOutcome o = replayWith(fake, t, options);
  CHECK(o.relocated);
  REQUIRE(o.placements.size() == 1);
  CHECK(o.placements[0].newStart != kX);
  // Equal only if the kernel found x and y where they now are.
  CHECK(o.verdict.kind == replay::VerdictKind::kEqual);
  CHECK_THAT(joined(o.warnings), Catch::Contains("1 of 1 address region(s) could not be placed"));
  fake.checkReleased();

  FakeDriver forced;
  AxpyTrace t2;
  options.forceRelocate = true;
  const replay::ReplayOutcome f = replayWith(forced, t2, options);
  CHECK(f.relocated);
  CHECK(f.placements[0].newStart != kX);
  CHECK(f.verdict.kind == replay::VerdictKind::kEqual);
  CHECK_THAT(joined(f.warnings), Catch::Contains("(--relocate)"));
  forced.checkReleased();
}

TEST_CASE("fake driver: pointers stored in memory are named when relocating", "[replayer][execute]") {
  FakeDriver fake;
  AxpyTrace t(kA, "FAKEIMG fake_axpy", /*pointerInX=*/true);
  replay::ReplayOptions options;
  options.forceRelocate = true;
  const replay::ReplayOutcome o = replayWith(fake, t, options);
  CHECK_THAT(joined(o.warnings),
             Catch::Contains("input alloc#1+0x0 (19.5 KiB) holds 1 word(s) that point into relocated memory "
                             "(first at +0x8)"));
  fake.checkReleased();
}

TEST_CASE("fake driver: a nondeterministic kernel, with the runs compared element-wise", "[replayer][execute]") {
  FakeDriver fake;
  fake.state.nondeterministic = true;
  AxpyTrace t;
  replay::ReplayOptions options;
  options.repeat = 7;
  const replay::ReplayOutcome o = replayWith(fake, t, options);
  CHECK(o.verdict.kind == replay::VerdictKind::kNondeterministic);
  CHECK(o.verdict.distinct == 3);
  CHECK(o.verdict.runsPerResult == std::vector<uint32_t>{3, 2, 2});
  CHECK(o.verdict.varyingOutputs == std::vector<size_t>{1});
  CHECK(o.verdict.runsMatchingRecording == 3);  // launches 0, 3, 6 add nothing
  REQUIRE(o.acrossRuns.has_value());
  CHECK(o.acrossRunsOther == 1);
  const replay::RangeComparison& y = o.acrossRuns->ranges()[1];
  CHECK_FALSE(y.equal);
  REQUIRE(y.elements.has_value());
  CHECK(y.elements->differing == 1);
  CHECK(y.elements->firstDiffering == kN - 1);
  CHECK(y.elements->maxAbs == Approx(0.5));
  CHECK(o.acrossRuns->ranges()[0].equal);
  fake.checkReleased();
}

TEST_CASE("fake driver: different from the recording names the machine differences", "[replayer][execute]") {
  FakeDriver fake;
  AxpyTrace t(/*recordedA=*/2.0f);
  replay::ReplayOptions options;
  options.repeat = 2;
  const replay::ReplayOutcome o = replayWith(fake, t, options);
  CHECK(o.verdict.kind == replay::VerdictKind::kDifferent);
  CHECK(o.verdict.differingOutputs == std::vector<size_t>{1});
  REQUIRE(o.vsRecording.has_value());
  const replay::RangeComparison& y = o.vsRecording->ranges()[1];
  REQUIRE(y.elements.has_value());
  CHECK(y.elements->assumed);
  CHECK(y.elements->elements == kN);
  CHECK(y.elements->differing > kN * 9 / 10);
  CHECK(y.elements->maxAbs <= 0.25 + 1e-6);  // |(2 - 1.75) * x| with |x| <= 1
  CHECK_THAT(joined(o.environment), Catch::Contains("GPU: NVIDIA H100 80GB HBM3 (sm_90) -> Fake GPU (sm_90)"));
  fake.checkReleased();
}

TEST_CASE("fake driver: another architecture, a refused image, a faulting kernel", "[replayer][execute]") {
  {
    FakeDriver fake;
    fake.state.ccMajor = 8;
    AxpyTrace t;
    CHECK_THROWS_WITH(replayWith(fake, t, {}),
                      Catch::Contains("recorded on NVIDIA H100 80GB HBM3 (sm_90)") &&
                          Catch::Contains("0 Fake GPU (sm_80)"));
  }
  {
    FakeDriver fake;
    AxpyTrace t(kA, "not an image");
    CHECK_THROWS_WITH(replayWith(fake, t, {}), Catch::Contains("loading the image of module #1"));
    fake.checkReleased();
  }
  {
    FakeDriver fake;
    AxpyTrace t;
    fake.state.faultOnLaunch = true;
    replay::ReplayOptions options;
    options.forceRelocate = true;
    CHECK_THROWS_WITH(replayWith(fake, t, options),
                      Catch::Contains("the replayed kernel failed on run 1") &&
                          Catch::Contains("a pointer stored in device memory may still hold a recorded address"));
    fake.checkReleased();
  }
}

TEST_CASE("fake driver: inputs restored from host memory when the GPU has no room for copies",
          "[replayer][execute]") {
  FakeDriver fake;
  fake.state.refusedAllocSize = kN * 4;  // the size of each input
  AxpyTrace t;
  replay::ReplayOptions options;
  options.repeat = 3;
  const replay::ReplayOutcome o = replayWith(fake, t, options);
  CHECK_FALSE(o.restoredFromDevice);
  CHECK(o.verdict.kind == replay::VerdictKind::kEqual);
  CHECK_THAT(joined(o.warnings), Catch::Contains("restored from host memory before each run"));
  fake.checkReleased();
}
