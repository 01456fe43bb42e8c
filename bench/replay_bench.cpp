// Replay cost of one kernel: runs a bandwidth-bound axpy once as an
// application would, records it (inputs snapshotted) into a trace, then
// replays it in process with executeReplay and prints
//   - the original kernel time and the replayed kernel time,
//   - the restore time per run against restored bytes / device-to-device
//     bandwidth (the floor for a restore from device memory),
//   - setup and hashing time, and the verdict;
// then a whole stream: the same kernel run STEPS times after two
// host-to-device copies, as a program would (timed), recorded as a --full
// trace (each launch's output hashed with the device hash kernel) and
// replayed with executeStreamReplay (`gpurr replay --all`), timed likewise.
//
//   replay_bench [MIB_PER_BUFFER=64] [RUNS=10] [STEPS=20]
// Exits 77 where no GPU is present.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/device_hasher.h"
#include "kernels/driver_api.h"
#include "replayer/execute.h"
#include "replayer/replay_driver.h"
#include "replayer/report.h"
#include "replayer/stream_execute.h"
#include "replayer/stream_plan.h"
#include "trace_format/hash.h"
#include "trace_format/trace.h"

std::span<const unsigned char> replayBenchImage();

using namespace gpurr;
namespace fs = std::filesystem;

namespace {

gpurr::kernels::DriverApi api;
replay::ReplayDriver drv;

#define CHECK_CU(call)                                                                       \
  do {                                                                                       \
    if (CUresult r_ = (call); r_ != CUDA_SUCCESS) {                                          \
      std::fprintf(stderr, "replay_bench: %s failed: %s\n", #call, api.errorText(r_).c_str()); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Median milliseconds of `f` enqueued on the null stream, between events.
template <typename F>
double timeMs(int reps, F&& f) {
  CUevent a = nullptr, b = nullptr;
  CHECK_CU(api.cuEventCreate(&a, CU_EVENT_DEFAULT));
  CHECK_CU(api.cuEventCreate(&b, CU_EVENT_DEFAULT));
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    CHECK_CU(api.cuEventRecord(a, nullptr));
    f();
    CHECK_CU(api.cuEventRecord(b, nullptr));
    CHECK_CU(api.cuEventSynchronize(b));
    float t = 0;
    CHECK_CU(api.cuEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  api.cuEventDestroy(a);
  api.cuEventDestroy(b);
  return median(ms);
}

trace::RangeDigest digestOf(uint32_t ordinal, CUdeviceptr ptr, const std::vector<uint8_t>& bytes,
                            trace::TraceWriter& w) {
  trace::RangeDigest r;
  r.range = {ptr, bytes.size(), ordinal, 0};
  r.chunkDigests = hash::chunkDigests(bytes);
  r.digest = hash::foldChunks(r.chunkDigests, bytes.size());
  r.snapshot = w.putBlob(bytes, trace::BlobEncoding::kBytePlanes4);
  return r;
}

double msSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

trace::Header benchHeader(CUdevice device) {
  trace::Header h;
  h.toolVersion = "replay_bench";
  char name[256] = {};
  api.cuDeviceGetName(name, sizeof(name), device);
  int major = 0, minor = 0, driver = 0, sms = 0;
  api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  api.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  api.cuDriverGetVersion(&driver);
  h.gpus = {{0, name, "", static_cast<uint32_t>(sms), static_cast<uint32_t>(major), static_cast<uint32_t>(minor),
             0, ""}};
  h.driverVersion = driver;
  return h;
}

// The bench kernel's parameter buffer as the kernel receives it (x, y, a
// padded to 8 bytes, n), and the `extra` array that passes it to
// cuLaunchKernel. Not copyable: `extra` points into it.
struct AxpyParams {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(32, 0);
  size_t size = 32;
  void* extra[5];
  AxpyParams(CUdeviceptr x, CUdeviceptr y, float a, unsigned long long n)
      : extra{CU_LAUNCH_PARAM_BUFFER_POINTER, bytes.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END} {
    std::memcpy(bytes.data(), &x, 8);
    std::memcpy(bytes.data() + 8, &y, 8);
    std::memcpy(bytes.data() + 16, &a, 4);
    std::memcpy(bytes.data() + 24, &n, 8);
  }
  AxpyParams(const AxpyParams&) = delete;
  AxpyParams& operator=(const AxpyParams&) = delete;
};

// Eight blocks of 256 threads per SM: enough to fill the GPU.
unsigned axpyGrid(CUdevice device) {
  int sms = 0;
  api.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  return static_cast<unsigned>(sms) * 8;
}

// A launch of the bench kernel (module 1; x in allocation 1, y in 2) as the
// recorder writes it, before its digests.
trace::KernelLaunch axpyLaunch(const AxpyParams& p, unsigned grid) {
  trace::KernelLaunch k;
  k.module = 1;
  k.function = "bench_axpy";
  k.grid = {grid, 1, 1};
  k.block = {256, 1, 1};
  k.params = p.bytes;
  k.paramLayout = {{0, 8}, {8, 8}, {16, 4}, {24, 8}};
  k.pointers = {{0, 1, 0}, {8, 2, 0}};
  return k;
}

// The whole-stream case: copies x and y up, runs the axpy `steps` times
// (timed end to end on the host, as a program's GPU part), records the same
// as a --full trace with each launch's output digest from the device hash
// kernel, frees everything and replays the trace with --all.
void wholeStream(CUdevice device, uint64_t bytes, int steps) {
  CUmodule module = nullptr;
  CHECK_CU(api.cuModuleLoadData(&module, replayBenchImage().data()));
  CUfunction f = nullptr;
  CHECK_CU(api.cuModuleGetFunction(&f, module, "bench_axpy"));
  const unsigned long long n = bytes / 4;
  std::vector<float> hx(n), hy(n);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-1, 1);
  for (float& v : hx) v = unit(rng);
  for (float& v : hy) v = unit(rng);
  CUdeviceptr x = 0, y = 0;
  CHECK_CU(api.cuMemAlloc(&x, bytes));
  CHECK_CU(api.cuMemAlloc(&y, bytes));
  const AxpyParams params(x, y, 0.25f, n);
  const unsigned grid = axpyGrid(device);
  auto upload = [&] {
    CHECK_CU(api.cuMemcpyHtoD(x, hx.data(), bytes));
    CHECK_CU(api.cuMemcpyHtoD(y, hy.data(), bytes));
  };
  auto step = [&] {
    CHECK_CU(api.cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, nullptr, nullptr, const_cast<void**>(params.extra)));
  };

  const auto start = std::chrono::steady_clock::now();
  upload();
  for (int i = 0; i < steps; ++i) step();
  CHECK_CU(api.cuCtxSynchronize());
  const double originalMs = msSince(start);

  char tmpl[] = "/tmp/gpurr-replay-bench-stream-XXXXXX";
  const fs::path dir = fs::path(mkdtemp(tmpl)) / "stream.gpurr";
  {
    trace::Header h = benchHeader(device);
    h.options.full = true;
    h.options.captureHostData = true;
    trace::TraceWriter w(dir, h);
    uint64_t seq = 0;
    auto add = [&](trace::Payload p) { w.append({seq++, 0, 0, std::move(p)}); };
    add(trace::Allocation{1, x, bytes, trace::AllocationKind::kDevice, 0, 0});
    add(trace::Allocation{2, y, bytes, trace::AllocationKind::kDevice, 0, 0});
    add(trace::ModuleLoad{1, w.putBlob(replayBenchImage()), h.gpus[0].ccMajor * 10 + h.gpus[0].ccMinor});
    for (const auto& [ordinal, address, host] :
         {std::tuple{1u, x, &hx}, std::tuple{2u, y, &hy}}) {
      trace::Memcpy m;
      m.kind = trace::MemcpyKind::kHostToDevice;
      m.size = bytes;
      m.dst = {address, bytes, ordinal, 0};
      m.src = {reinterpret_cast<uint64_t>(host->data()), bytes, 0, 0};
      const std::span<const uint8_t> data(reinterpret_cast<const uint8_t*>(host->data()), bytes);
      m.digest = hash::hashBuffer(data);
      m.data = w.putBlob(data, trace::BlobEncoding::kBytePlanes4);
      add(m);
    }
    std::string error;
    std::unique_ptr<kernels::DeviceHasher> hasher = kernels::DeviceHasher::create(api, error);
    if (!hasher) {
      std::fprintf(stderr, "replay_bench: loading the hash kernel: %s\n", error.c_str());
      std::exit(1);
    }
    upload();
    std::vector<kernels::HashResult> hashed;
    for (int i = 0; i < steps; ++i) {
      step();
      CHECK_CU(hasher->hashNow(nullptr, std::vector<kernels::HashRequest>{{y, bytes}}, hashed, false));
      trace::KernelLaunch k = axpyLaunch(params, grid);
      trace::RangeDigest out;
      out.range = {y, bytes, 2, 0};
      out.digest = hashed[0].digest;
      k.outputs = {out};
      add(k);
    }
    w.close();
  }
  // Give the recorded addresses back so that the replay can take them.
  api.cuMemFree(x);
  api.cuMemFree(y);
  api.cuModuleUnload(module);

  trace::TraceReader reader(dir);
  const replay::StreamPlan plan = replay::planStreamReplay(reader);
  const replay::StreamOutcome o = replay::executeStreamReplay(reader, plan, {});
  std::printf("replay_bench: whole stream, 2 copies of %.1f MiB and %d launches\n", bytes / 1048576.0, steps);
  std::printf("  original program     %9.3f ms (copies and launches, host clock)\n", originalMs);
  std::printf("  replay --all         %9.3f ms = operations %.3f ms (hashing %.3f ms) + setup %.1f ms\n", o.totalMs,
              o.replayMs, o.hashMs, o.setupMs);
  std::printf("  replay / original    %9.2fx (operations only)\n", o.replayMs / originalMs);
  std::printf("  verdict              %s\n", replay::streamVerdictLine(plan, o).c_str());
  fs::remove_all(dir.parent_path());
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 10;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 20;
  std::string error;
  const kernels::FirstDevice gpu = kernels::openFirstDevice(api);
  if (!gpu.ok || !drv.load(error)) {
    const std::string why = gpu.ok ? error : gpu.error;
    const bool skip = !gpu.ok ? gpu.absent : true;
    std::fprintf(stderr, "replay_bench: %s%s\n", skip ? "skipped: " : "", why.c_str());
    return skip ? 77 : 1;
  }
  CUmodule module = nullptr;
  CHECK_CU(api.cuModuleLoadData(&module, replayBenchImage().data()));
  CUfunction f = nullptr;
  CHECK_CU(api.cuModuleGetFunction(&f, module, "bench_axpy"));

  const uint64_t bytes = mib << 20;
  const unsigned long long n = bytes / 4;
  CUdeviceptr x = 0, y = 0, scratch = 0;
  CHECK_CU(api.cuMemAlloc(&x, bytes));
  CHECK_CU(api.cuMemAlloc(&y, bytes));
  CHECK_CU(api.cuMemAlloc(&scratch, bytes));
  std::vector<float> host(n);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-1, 1);
  for (float& v : host) v = unit(rng);
  CHECK_CU(api.cuMemcpyHtoD(x, host.data(), bytes));
  for (float& v : host) v = unit(rng);
  CHECK_CU(api.cuMemcpyHtoD(y, host.data(), bytes));

  const AxpyParams params(x, y, 0.5f, n);
  const unsigned grid = axpyGrid(gpu.device);
  auto launch = [&] {
    CHECK_CU(api.cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, nullptr, nullptr, const_cast<void**>(params.extra)));
  };

  // The recording: inputs as the kernel saw them, outputs after one launch.
  std::vector<uint8_t> xBytes(bytes), yBefore(bytes), yAfter(bytes);
  CHECK_CU(api.cuMemcpyDtoH(xBytes.data(), x, bytes));
  CHECK_CU(api.cuMemcpyDtoH(yBefore.data(), y, bytes));
  launch();
  CHECK_CU(api.cuCtxSynchronize());
  CHECK_CU(api.cuMemcpyDtoH(yAfter.data(), y, bytes));

  // The original's time (y keeps changing; the time does not) and the
  // device-to-device bandwidth a restore from device memory would get.
  const double originalMs = timeMs(runs, launch);
  const double d2dMs = timeMs(runs, [&] { CHECK_CU(api.cuMemcpyDtoD(scratch, x, bytes)); });
  const double d2dGBs = bytes / (d2dMs * 1e-3) / 1e9;

  char tmpl[] = "/tmp/gpurr-replay-bench-XXXXXX";
  const fs::path dir = fs::path(mkdtemp(tmpl)) / "bench.gpurr";
  uint64_t launchSeq = 0;
  {
    const trace::Header h = benchHeader(gpu.device);
    trace::TraceWriter w(dir, h);
    w.append({0, 0, 0, trace::Allocation{1, x, bytes, trace::AllocationKind::kDevice, 0, 0}});
    w.append({1, 0, 0, trace::Allocation{2, y, bytes, trace::AllocationKind::kDevice, 0, 0}});
    w.append({2, 0, 0, trace::ModuleLoad{1, w.putBlob(replayBenchImage()), h.gpus[0].ccMajor * 10 + h.gpus[0].ccMinor}});
    trace::KernelLaunch k = axpyLaunch(params, grid);
    k.inputs = {digestOf(1, x, xBytes, w), digestOf(2, y, yBefore, w)};
    trace::RangeDigest out;
    out.range = {y, bytes, 2, 0};
    out.digest = hash::hashBuffer(yAfter);
    k.outputs = {out};
    launchSeq = 3;
    w.append({launchSeq, 0, 0, k});
    w.close();
  }
  // Give the recorded addresses back so that the replay can take them.
  api.cuMemFree(x);
  api.cuMemFree(y);
  api.cuMemFree(scratch);
  api.cuModuleUnload(module);

  trace::TraceReader reader(dir);
  const replay::ReplayPlan plan = replay::planReplay(reader, launchSeq);
  replay::ReplayOptions options;
  options.repeat = static_cast<uint32_t>(runs);
  const replay::ReplayOutcome o = replay::executeReplay(reader, plan, options);

  const double restoreFloorMs = o.restoredBytes / (d2dGBs * 1e9) * 1e3;
  std::printf("replay_bench: %s, %llu MiB per buffer, %d runs\n", o.machine.name.c_str(),
              static_cast<unsigned long long>(mib), runs);
  std::printf("  original kernel      %9.3f ms\n", originalMs);
  std::printf("  replayed kernel      %9.3f ms (median)\n", median(o.kernelMs));
  std::printf("  restore per run      %9.3f ms for %.1f MiB from %s, zeroing included (median)\n",
              median(o.restoreMs), o.restoredBytes / 1048576.0, o.restoredFromDevice ? "device copies" : "host memory");
  std::printf("  restore at D2D speed %9.3f ms (%.0f GB/s device-to-device)\n", restoreFloorMs, d2dGBs);
  std::printf("  replay per run       %9.3f ms = restore + kernel + hash %.3f ms\n",
              median(o.restoreMs) + median(o.kernelMs) + median(o.hashMs), median(o.hashMs));
  std::printf("  setup                %9.1f ms (context, reservation, image, hash kernel)\n", o.setupMs);
  std::printf("  placement            %s\n", o.relocated ? "relocated" : "at the recorded addresses");
  std::printf("  verdict              %s\n", replay::verdictLine(o).c_str());
  fs::remove_all(dir.parent_path());
  wholeStream(gpu.device, bytes, steps);
  api.cuDevicePrimaryCtxRelease(gpu.device);
  return 0;
}
