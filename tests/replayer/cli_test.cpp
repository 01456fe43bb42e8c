// `gpurr replay` as a user runs it: usage errors, a missing trace, a bad
// launch number and, on a machine without a GPU, a clear "no GPU" error; all
// exit 2. `--plan` works without a GPU.
#include <catch2/catch.hpp>
#include <dlfcn.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <string>

#include "tests/replayer/replay_trace.h"
#include "tests/unit/test_util.h"

using namespace gpurr;

namespace {

struct Result {
  int code = -1;
  std::string output;  // stdout and stderr together
};

Result runGpurr(const std::string& args) {
  const std::string cmd = std::string(GPURR_BINARY_DIR) + "/bin/gpurr " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool driverPresent() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib) dlclose(lib);
  return lib != nullptr;
}

// A trace with one launch (#3) whose inputs all have snapshots.
std::filesystem::path writeTrace(const testing::TempDir& dir) {
  const auto path = dir / "t.gpurr";
  testing::ReplayTraceBuilder b(path);
  b.alloc(1, 0x7f1200000000, 4096);
  b.alloc(2, 0x7f1200001000, 4096);
  b.module(1);
  trace::KernelLaunch k;
  k.module = 1;
  k.function = "_Z5scalePKfPfi";
  k.grid = {4, 1, 1};
  k.block = {256, 1, 1};
  testing::addPointer(k, 1, 0x7f1200000000, 0);
  testing::addPointer(k, 2, 0x7f1200001000, 0);
  testing::addScalar(k, 1024);
  k.inputs = {b.digest(1, 0x7f1200000000, 0, testing::patternBytes(1, 4096), true)};
  k.outputs = {b.digest(2, 0x7f1200001000, 0, testing::patternBytes(2, 4096), false)};
  b.add(k, trace::Origin{"aten::mul", {"aten::mul"}, trace::Phase::kForward, "", "Net.scale", "/w/train.py", 12, 0, 0});
  b.close();
  return path;
}

// A --full trace: x copied from the host, y set, one launch reading x and
// writing y, y read back.
std::filesystem::path writeFullTrace(const testing::TempDir& dir) {
  const auto path = dir / "full.gpurr";
  trace::Header h = testing::replayHeader();
  h.options.full = true;
  h.options.captureHostData = true;
  testing::ReplayTraceBuilder b(path, h);
  b.alloc(1, 0x7f1200000000, 4096);
  b.alloc(2, 0x7f1200001000, 4096);
  b.module(1);
  trace::Memcpy up;
  up.kind = trace::MemcpyKind::kHostToDevice;
  up.size = 4096;
  up.dst = {0x7f1200000000, 4096, 1, 0};
  up.data = b.writer().putBlob(testing::patternBytes(1, 4096));
  b.add(up);
  b.add(trace::Memset{0, false, {0x7f1200001000, 4096, 2, 0}, 0, 1, 0x1234});
  trace::KernelLaunch k;
  k.module = 1;
  k.function = "_Z5scalePKfPfi";
  testing::addPointer(k, 1, 0x7f1200000000, 0);
  testing::addPointer(k, 2, 0x7f1200001000, 0);
  testing::addScalar(k, 1024);
  k.outputs = {b.digest(2, 0x7f1200001000, 0, testing::patternBytes(2, 4096), false)};
  b.add(k);
  b.close();
  return path;
}

}  // namespace

TEST_CASE("gpurr replay: usage errors exit 2", "[replayer][cli]") {
  testing::TempDir dir;
  const std::string trace = writeTrace(dir).string();
  const Result noLaunch = runGpurr("replay " + trace);
  CHECK(noLaunch.code == 2);
  CHECK_THAT(noLaunch.output, Catch::Contains("--launch is required"));

  const Result notNumber = runGpurr("replay " + trace + " --launch abc");
  CHECK(notNumber.code == 2);
  CHECK_THAT(notNumber.output, Catch::Contains("--launch"));

  const Result badRepeat = runGpurr("replay " + trace + " --launch 3 --repeat 0");
  CHECK(badRepeat.code == 2);
  CHECK_THAT(badRepeat.output, Catch::Contains("--repeat"));

  const Result badType = runGpurr("replay " + trace + " --launch 3 --element-type f128");
  CHECK(badType.code == 2);
  CHECK_THAT(badType.output, Catch::Contains("unknown type 'f128'"));
}

TEST_CASE("gpurr replay: a missing trace exits 2 naming it", "[replayer][cli]") {
  testing::TempDir dir;
  const std::string missing = (dir / "nope.gpurr").string();
  const Result r = runGpurr("replay " + missing + " --launch 3");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("gpurr replay: error:") && Catch::Contains(missing));
}

TEST_CASE("gpurr replay: a launch number that is not a launch exits 2", "[replayer][cli]") {
  testing::TempDir dir;
  const std::string trace = writeTrace(dir).string();
  const Result notLaunch = runGpurr("replay " + trace + " --launch 1");
  CHECK(notLaunch.code == 2);
  CHECK_THAT(notLaunch.output, Catch::Contains("event #1 is an alloc event, not a kernel launch") &&
                                   Catch::Contains("#3 after it"));
  const Result beyond = runGpurr("replay " + trace + " --launch 40");
  CHECK(beyond.code == 2);
  CHECK_THAT(beyond.output, Catch::Contains("no event #40"));
}

TEST_CASE("gpurr replay: --plan needs no GPU", "[replayer][cli]") {
  testing::TempDir dir;
  const std::string trace = writeTrace(dir).string();
  const Result text = runGpurr("replay " + trace + " --launch 3 --plan");
  CHECK(text.code == 0);
  CHECK_THAT(text.output, Catch::Contains("reserve   alloc#1 0x7f1200000000 4.0 KiB"));
  CHECK_THAT(text.output, Catch::Contains("reserve   alloc#2 0x7f1200001000 4.0 KiB (zero-filled)"));
  CHECK_THAT(text.output, Catch::Contains("restore   alloc#1+0x0 (4.0 KiB)"));
  CHECK_THAT(text.output, Catch::Contains("aten::mul (forward) in Net.scale, train.py:12, step 0"));
  const Result json = runGpurr("replay " + trace + " --launch 3 --plan --json");
  CHECK(json.code == 0);
  const auto j = nlohmann::json::parse(json.output);
  CHECK(j["seq"] == 3);
  CHECK(j["ranges"].size() == 2);
  CHECK(j["pointers"][1]["allocation"] == 2);
}

TEST_CASE("gpurr replay: without a GPU, a clear error and exit 2", "[replayer][cli]") {
  testing::TempDir dir;
  const std::string trace = writeTrace(dir).string();
  const Result r = runGpurr("replay " + trace + " --launch 3 --repeat 5");
  // On a GPU machine the image (arbitrary bytes) fails to load: still exit 2.
  CHECK(r.code == 2);
  if (!driverPresent()) {
    CHECK_THAT(r.output, Catch::Contains("gpurr replay: error: no GPU: cannot load the CUDA driver (libcuda.so.1)"));
    CHECK_THAT(r.output, Catch::Contains("needs an NVIDIA GPU"));
  } else {
    CHECK_THAT(r.output, Catch::Contains("gpurr replay: error:"));
  }
}

TEST_CASE("gpurr replay: the example trace holds digests only and says how to record snapshots",
          "[replayer][cli]") {
  const std::string example = std::string(GPURR_SOURCE_DIR) + "/examples/synthetic.gpurr";
  const Result r = runGpurr("replay " + example + " --launch 8 --repeat 50");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("launch #8 (sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize128x128x32"));
  CHECK_THAT(r.output, Catch::Contains("no snapshot of input alloc#2+0x0 (16.0 KiB), alloc#1+0x0 (256.0 KiB)"));
  // Event #8 is the trace's second launch: --snapshot counts launches.
  CHECK_THAT(r.output, Catch::Contains("`gpurr record --snapshot 1 -- python train.py --steps 1`"));
}

TEST_CASE("gpurr replay --all: usage errors exit 2", "[replayer][cli][stream]") {
  testing::TempDir dir;
  const std::string trace = writeFullTrace(dir).string();
  const Result both = runGpurr("replay " + trace + " --all --launch 5");
  CHECK(both.code == 2);
  CHECK_THAT(both.output, Catch::Contains("give it or --launch K, not both"));
  const Result until = runGpurr("replay " + trace + " --launch 5 --until 3");
  CHECK(until.code == 2);
  CHECK_THAT(until.output, Catch::Contains("--until applies to --all"));
  const Result repeat = runGpurr("replay " + trace + " --all --repeat 5");
  CHECK(repeat.code == 2);
  CHECK_THAT(repeat.output, Catch::Contains("--repeat applies to one launch"));
  const Result neither = runGpurr("replay " + trace);
  CHECK(neither.code == 2);
  CHECK_THAT(neither.output, Catch::Contains("or --all to replay the whole stream"));
}

TEST_CASE("gpurr replay --all: a trace without --full says how to record one", "[replayer][cli][stream]") {
  testing::TempDir dir;
  const std::string trace = writeTrace(dir).string();
  const Result r = runGpurr("replay " + trace + " --all --plan");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("gpurr replay: error: " + trace + ": not a --full recording") &&
                           Catch::Contains("`gpurr record --full -o TRACE -- python train.py --lr 0.1`"));
}

TEST_CASE("gpurr replay --all --plan needs no GPU", "[replayer][cli][stream]") {
  testing::TempDir dir;
  const std::string trace = writeFullTrace(dir).string();
  const Result text = runGpurr("replay " + trace + " --all --plan");
  CHECK(text.code == 0);
  CHECK_THAT(text.output, Catch::Contains("whole-stream replay plan for " + trace +
                                          " (recorded on NVIDIA H100 80GB HBM3 (sm_90))"));
  CHECK_THAT(text.output, Catch::Contains("launches  1 (1 checked against recorded output digests)"));
  CHECK_THAT(text.output, Catch::Contains("memory    2 range(s), 8.0 KiB to reserve at the recorded addresses"));
  CHECK_THAT(text.output, Catch::Contains("#5      launch           _Z5scalePKfPfi (module #1)"));
  const Result json = runGpurr("replay " + trace + " --all --plan --json --until 4");
  CHECK(json.code == 0);
  const auto j = nlohmann::json::parse(json.output);
  CHECK(j["mode"] == "stream");
  CHECK(j["until"] == 4);
  CHECK(j["operations"] == 2);
  CHECK(j["preview"][0]["kind"] == "copy to device");
  CHECK(j["bytesToDevice"] == 4096);
}

TEST_CASE("gpurr replay --all: without a GPU, a clear error and exit 2", "[replayer][cli][stream]") {
  testing::TempDir dir;
  const std::string trace = writeFullTrace(dir).string();
  const Result r = runGpurr("replay " + trace + " --all --json");
  CHECK(r.code == 2);
  if (!driverPresent()) {
    CHECK_THAT(r.output, Catch::Contains("gpurr replay: error: no GPU: cannot load the CUDA driver (libcuda.so.1)"));
  } else {
    CHECK_THAT(r.output, Catch::Contains("gpurr replay: error:"));
  }
}

TEST_CASE("gpurr replay: a directory of traces names one to replay", "[replayer][cli][stream]") {
  testing::TempDir dir;
  std::filesystem::create_directory(dir / "run.gpurr");
  {
    testing::ReplayTraceBuilder a(dir / "run.gpurr" / "proc1.gpurr");
    a.close();
    testing::ReplayTraceBuilder b(dir / "run.gpurr" / "proc0.gpurr");
    b.close();
  }
  const Result r = runGpurr("replay " + (dir / "run.gpurr").string() + " --all");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("a directory of 2 per-process traces (proc0.gpurr, ...), not one trace: name "
                                       "one of them (" + (dir / "run.gpurr" / "proc0.gpurr").string() + ")"));
  CHECK_THAT(r.output, !Catch::Contains("one per process: replay one of them"));  // said once
}
