// GPU test of `gpurr replay`: runs a kernel once, snapshots its inputs and
// outputs with cuMemcpyDtoH, writes a trace with TraceWriter (the kernel's
// fatbin as the module image), then replays it 50 times with `gpurr replay`
// and checks the verdict:
//
//   replay_gpu_test atomic         float atomicAdd reduction -> nondeterministic,
//                                  with the number of distinct results
//   replay_gpu_test deterministic  in-place axpy with a by-value struct of
//                                  pointers and 64 KiB of dynamic shared memory
//                                  -> identical to the recording 50 times, also
//                                  with --relocate
//
// Exits 77 (skipped) where no GPU is present. `gpurr` is found next to this
// build (GPURR_RELATIVE_GPURR from this executable) or in $GPURR_BIN.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/driver_api.h"
#include "replayer/replay_driver.h"
#include "trace_format/hash.h"
#include "trace_format/trace.h"

std::span<const unsigned char> replayTestImage();

using namespace gpurr;
namespace fs = std::filesystem;

namespace {

constexpr int kSkip = 77;
constexpr int kRuns = 50;

kernels::DriverApi api;
replay::ReplayDriver drv;

#define CHECK_CU(call)                                                                        \
  do {                                                                                        \
    if (CUresult r_ = (call); r_ != CUDA_SUCCESS) {                                           \
      std::fprintf(stderr, "replay_gpu_test: %s failed: %s\n", #call, api.errorText(r_).c_str()); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

int failures = 0;
void expect(bool ok, const std::string& what) {
  std::fprintf(stderr, "replay_gpu_test: %s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  failures += !ok;
}

struct Buffer {
  uint32_t ordinal = 0;
  CUdeviceptr ptr = 0;
  uint64_t size = 0;
};

std::vector<uint8_t> download(const Buffer& b) {
  std::vector<uint8_t> bytes(b.size);
  CHECK_CU(api.cuMemcpyDtoH(bytes.data(), b.ptr, b.size));
  return bytes;
}

trace::RangeDigest digestOf(const Buffer& b, const std::vector<uint8_t>& bytes, trace::TraceWriter& w) {
  trace::RangeDigest r;
  r.range = {b.ptr, b.size, b.ordinal, 0};
  r.chunkDigests = hash::chunkDigests(bytes);
  r.digest = hash::foldChunks(r.chunkDigests, bytes.size());
  r.snapshot = w.putBlob(bytes);
  return r;
}

trace::Header headerFor(CUdevice dev) {
  trace::Header h;
  h.toolVersion = "replay_gpu_test";
  h.commandLine = {"replay_gpu_test"};
  trace::GpuInfo g;
  char name[256] = {};
  api.cuDeviceGetName(name, sizeof(name), dev);
  g.name = name;
  int v = 0;
  api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  g.ccMajor = v;
  api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  g.ccMinor = v;
  api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
  g.smCount = v;
  size_t mem = 0;
  api.cuDeviceTotalMem(&mem, dev);
  g.memoryBytes = mem;
  h.gpus = {g};
  int driver = 0;
  api.cuDriverGetVersion(&driver);
  h.driverVersion = driver;
  return h;
}

// One recorded launch: what the kernel got and what it produced.
struct Recorded {
  std::string function;
  trace::Dim3 grid, block;
  uint32_t sharedMemBytes = 0;
  std::vector<uint8_t> params;
  std::vector<trace::ParamInfo> layout;
  std::vector<trace::PointerParam> pointers;
  std::vector<Buffer> buffers;
  std::vector<std::vector<uint8_t>> before, after;  // per buffer
};

// Launches `r` the way an application would, snapshotting every buffer
// before and after.
void runOnce(CUmodule module, Recorded& r) {
  CUfunction f = nullptr;
  CHECK_CU(api.cuModuleGetFunction(&f, module, r.function.c_str()));
  if (r.sharedMemBytes > 0) {
    CHECK_CU(drv.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, r.sharedMemBytes));
  }
  for (const Buffer& b : r.buffers) r.before.push_back(download(b));
  size_t size = r.params.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, r.params.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  CUlaunchConfig config{};
  config.gridDimX = r.grid.x;
  config.gridDimY = r.grid.y;
  config.gridDimZ = r.grid.z;
  config.blockDimX = r.block.x;
  config.blockDimY = r.block.y;
  config.blockDimZ = r.block.z;
  config.sharedMemBytes = r.sharedMemBytes;
  CHECK_CU(drv.cuLaunchKernelEx(&config, f, nullptr, extra));
  CHECK_CU(api.cuCtxSynchronize());
  for (const Buffer& b : r.buffers) r.after.push_back(download(b));
}

// Writes the trace of `r`; returns the launch's event number.
uint64_t writeTrace(const fs::path& dir, CUdevice dev, const Recorded& r) {
  trace::TraceWriter w(dir, headerFor(dev));
  uint64_t seq = 0;
  auto add = [&](trace::Payload p) {
    w.append(trace::Event{seq, seq * 1000, 0, std::move(p)});
    return seq++;
  };
  for (const Buffer& b : r.buffers) {
    add(trace::Allocation{b.ordinal, b.ptr, b.size, trace::AllocationKind::kDevice, 0, 0});
  }
  const std::span<const unsigned char> image = replayTestImage();
  const trace::Header h = headerFor(dev);
  add(trace::ModuleLoad{1, w.putBlob(image), h.gpus[0].ccMajor * 10 + h.gpus[0].ccMinor});
  trace::KernelLaunch k;
  k.api = trace::LaunchApi::kLaunchKernelEx;
  k.module = 1;
  k.function = r.function;
  k.grid = r.grid;
  k.block = r.block;
  k.sharedMemBytes = r.sharedMemBytes;
  k.params = r.params;
  k.paramLayout = r.layout;
  k.pointers = r.pointers;
  for (size_t i = 0; i < r.buffers.size(); ++i) {
    k.inputs.push_back(digestOf(r.buffers[i], r.before[i], w));
    k.outputs.push_back(digestOf(r.buffers[i], r.after[i], w));
  }
  const uint64_t launchSeq = add(k);
  for (const Buffer& b : r.buffers) add(trace::Free{b.ordinal, b.ptr});
  w.close();
  return launchSeq;
}

fs::path gpurrBinary() {
  if (const char* env = std::getenv("GPURR_BIN")) return env;
  return fs::canonical("/proc/self/exe").parent_path() / GPURR_RELATIVE_GPURR;
}

struct ReplayRun {
  int code = -1;
  nlohmann::json result;
  std::string output;
};

ReplayRun runReplay(const fs::path& trace, uint64_t seq, const std::string& extra) {
  const std::string cmd = gpurrBinary().string() + " replay " + trace.string() + " --launch " + std::to_string(seq) +
                          " --repeat " + std::to_string(kRuns) + " --json " + extra;
  std::fprintf(stderr, "replay_gpu_test: running %s\n", cmd.c_str());
  ReplayRun run;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return run;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) run.output.append(buf.data(), n);
  const int status = pclose(p);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.result = nlohmann::json::parse(run.output, nullptr, false);
  return run;
}

Buffer alloc(uint32_t ordinal, uint64_t size) {
  Buffer b{ordinal, 0, size};
  CHECK_CU(api.cuMemAlloc(&b.ptr, size));
  return b;
}

void putParam(Recorded& r, uint32_t offset, const void* value, uint32_t size) {
  if (r.params.size() < offset + size) r.params.resize(offset + size);
  std::memcpy(r.params.data() + offset, value, size);
}

Recorded atomicCase(std::mt19937& rng) {
  Recorded r;
  r.function = "atomic_sum";
  const unsigned n = 1 << 22;
  r.buffers = {alloc(1, uint64_t{n} * 4), alloc(2, 16 * 4)};
  // Magnitudes over many binades make the rounding depend on the order.
  std::vector<float> x(n);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (float& v : x) v = std::ldexp(unit(rng), exponent(rng));
  CHECK_CU(api.cuMemcpyHtoD(r.buffers[0].ptr, x.data(), r.buffers[0].size));
  CHECK_CU(api.cuMemsetD8(r.buffers[1].ptr, 0, r.buffers[1].size));
  putParam(r, 0, &r.buffers[0].ptr, 8);
  putParam(r, 8, &r.buffers[1].ptr, 8);
  putParam(r, 16, &n, 4);
  r.layout = {{0, 8}, {8, 8}, {16, 4}};
  r.pointers = {{0, 1, 0}, {8, 2, 0}};
  r.grid = {1024, 1, 1};
  r.block = {256, 1, 1};
  return r;
}

Recorded deterministicCase(std::mt19937& rng) {
  Recorded r;
  r.function = "staged_axpy";
  const unsigned n = 16384 * 64 + 1000;  // a partial last chunk
  r.buffers = {alloc(1, uint64_t{n} * 4), alloc(2, uint64_t{n} * 4)};
  std::vector<float> x(n), y(n);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (float& v : x) v = unit(rng);
  for (float& v : y) v = unit(rng);
  CHECK_CU(api.cuMemcpyHtoD(r.buffers[0].ptr, x.data(), r.buffers[0].size));
  CHECK_CU(api.cuMemcpyHtoD(r.buffers[1].ptr, y.data(), r.buffers[1].size));
  // (unsigned n, struct { const float* x; float* y; float a; } p): n at 0,
  // p at 8 (x at 8, y at 16, a at 24), 32 bytes in all.
  const float a = 1.75f;
  r.params.assign(32, 0);
  putParam(r, 0, &n, 4);
  putParam(r, 8, &r.buffers[0].ptr, 8);
  putParam(r, 16, &r.buffers[1].ptr, 8);
  putParam(r, 24, &a, 4);
  r.layout = {{0, 4}, {8, 24}};
  r.pointers = {{8, 1, 0}, {16, 2, 0}};
  r.grid = {(n + 16383) / 16384, 1, 1};
  r.block = {256, 1, 1};
  r.sharedMemBytes = 16384 * 4;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "atomic" && mode != "deterministic") {
    std::fprintf(stderr, "usage: replay_gpu_test atomic|deterministic\n");
    return 2;
  }
  std::string error;
  const kernels::FirstDevice gpu = kernels::openFirstDevice(api);
  if (!gpu.ok || !drv.load(error)) {
    const std::string why = gpu.ok ? error : gpu.error;
    const bool skip = !gpu.ok ? gpu.absent : true;
    std::fprintf(stderr, "replay_gpu_test: %s%s\n", skip ? "skipped: " : "", why.c_str());
    return skip ? kSkip : 1;
  }
  CUmodule module = nullptr;
  CHECK_CU(api.cuModuleLoadData(&module, replayTestImage().data()));

  std::mt19937 rng(2024);
  Recorded r = mode == "atomic" ? atomicCase(rng) : deterministicCase(rng);
  runOnce(module, r);

  char tmpl[] = "/tmp/gpurr-replay-test-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  const fs::path tracePath = dir / "run.gpurr";
  const uint64_t seq = writeTrace(tracePath, gpu.device, r);
  // The replay runs in its own process; this one lets go of the GPU first.
  for (const Buffer& b : r.buffers) api.cuMemFree(b.ptr);
  api.cuModuleUnload(module);

  const ReplayRun run = runReplay(tracePath, seq, "");
  if (run.result.is_discarded()) {
    std::fprintf(stderr, "replay_gpu_test: gpurr replay printed no JSON (exit %d):\n%s\n", run.code,
                 run.output.c_str());
    return 1;
  }
  const auto& j = run.result;
  std::fprintf(stderr, "replay_gpu_test: %s\n", j.value("summary", std::string("?")).c_str());
  expect(j["runs"] == kRuns, "50 runs");
  if (mode == "atomic") {
    const int distinct = j["distinctResults"];
    expect(run.code == 1, "exit status 1 (nondeterministic), got " + std::to_string(run.code));
    expect(j["verdict"] == "nondeterministic", "verdict nondeterministic, got " + j["verdict"].dump());
    expect(distinct > 1 && distinct <= kRuns, "distinct results in 1 < n <= 50: " + std::to_string(distinct));
    expect(j["runsPerResult"].size() == static_cast<size_t>(distinct), "runs per result listed");
    expect(!j["acrossRuns"].is_null() && j["acrossRuns"]["ranges"][1]["equal"] == false,
           "the sums differ between runs");
    expect(j["acrossRuns"]["ranges"][0]["equal"] == true, "the input x is not changed by any run");
  } else {
    expect(run.code == 0, "exit status 0 (deterministic and equal), got " + std::to_string(run.code));
    expect(j["verdict"] == "equal", "verdict equal, got " + j["verdict"].dump());
    expect(j["distinctResults"] == 1, "one distinct result");
    expect(j["runsMatchingRecording"] == kRuns, "every run equal to the recording");
    // The kernel only sees its pointers through the by-value struct: moving
    // every range tests that those words were rewritten.
    const ReplayRun moved = runReplay(tracePath, seq, "--relocate");
    expect(moved.code == 0, "--relocate: exit status 0, got " + std::to_string(moved.code));
    if (!moved.result.is_discarded()) {
      expect(moved.result["relocated"] == true, "--relocate: ranges were relocated");
      expect(moved.result["verdict"] == "equal", "--relocate: verdict equal");
    } else {
      expect(false, "--relocate printed JSON: " + moved.output);
    }
  }
  if (failures == 0) fs::remove_all(dir);
  api.cuDevicePrimaryCtxRelease(gpu.device);
  return failures == 0 ? 0 : 1;
}
