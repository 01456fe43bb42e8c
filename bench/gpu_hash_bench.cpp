// Benchmark of the device hash kernel against a device-to-device copy of the
// same size: prints hash throughput / copy throughput for large buffers and
// for batches of 1 MiB ranges. The goals are >= 0.9 for 64 MiB and up, and
// >= 0.5 for batches of 1 MiB ranges: after the table, a line "goal missed:
// ..." for each case below its goal, and exit status 1. Needs a GPU (exits 77
// without one).
//
//   gpu_hash_bench [repeats]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/device_hasher.h"

using namespace gpurr;

namespace {

#define CHECK_CU(call)                                                                  \
  do {                                                                                  \
    if (CUresult r_ = (call); r_ != CUDA_SUCCESS) {                                     \
      std::fprintf(stderr, "gpu_hash_bench: %s failed: %s\n", #call, api.errorText(r_).c_str()); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

// Milliseconds per repetition of `body` on the default stream, by events.
template <typename F>
float timeMs(const kernels::DriverApi& api, int repeats, F body) {
  CUevent start, stop;
  CHECK_CU(api.cuEventCreate(&start, CU_EVENT_DEFAULT));
  CHECK_CU(api.cuEventCreate(&stop, CU_EVENT_DEFAULT));
  body();  // warm-up
  CHECK_CU(api.cuEventRecord(start, nullptr));
  for (int i = 0; i < repeats; ++i) body();
  CHECK_CU(api.cuEventRecord(stop, nullptr));
  CHECK_CU(api.cuEventSynchronize(stop));
  float ms = 0;
  CHECK_CU(api.cuEventElapsedTime(&ms, start, stop));
  api.cuEventDestroy(start);
  api.cuEventDestroy(stop);
  return ms / repeats;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
  kernels::DriverApi api;
  std::string error;
  const kernels::FirstDevice gpu = kernels::openFirstDevice(api);
  if (!gpu.ok) {
    std::fprintf(stderr, "gpu_hash_bench: %s\n", gpu.error.c_str());
    return gpu.absent ? 77 : 1;
  }
  const CUdevice dev = gpu.device;
  char name[256] = {};
  api.cuDeviceGetName(name, sizeof(name), dev);
  auto hasher = kernels::DeviceHasher::create(api, error);
  if (!hasher) {
    std::fprintf(stderr, "gpu_hash_bench: %s\n", error.c_str());
    return 1;
  }

  const uint64_t maxBytes = uint64_t{1} << 30;
  CUdeviceptr src = 0, dst = 0;
  CHECK_CU(api.cuMemAlloc(&src, maxBytes));
  CHECK_CU(api.cuMemAlloc(&dst, maxBytes));
  CHECK_CU(api.cuMemsetD8(src, 0x5a, maxBytes));

  std::printf("device: %s, %d repeats\n", name, repeats);
  std::printf("%-28s %10s %10s %8s\n", "case", "copy GB/s", "hash GB/s", "ratio");
  std::vector<std::string> missed;
  auto run = [&](const char* label, const std::vector<kernels::HashRequest>& requests, uint64_t bytes,
                 double goal) {
    const kernels::HashPlan plan = kernels::planHashBatch(requests);
    CUdeviceptr table = 0, digests = 0;
    CHECK_CU(api.cuMemAlloc(&table, plan.ranges.size() * sizeof(kernels::DeviceHashRange)));
    CHECK_CU(api.cuMemAlloc(&digests, plan.totalSlots * 8));
    CHECK_CU(api.cuMemcpyHtoD(table, plan.ranges.data(), plan.ranges.size() * sizeof(kernels::DeviceHashRange)));
    const float copyMs = timeMs(api, repeats, [&] { CHECK_CU(api.cuMemcpyDtoD(dst, src, bytes)); });
    const float hashMs = timeMs(api, repeats, [&] {
      CHECK_CU(hasher->enqueue(nullptr, table, static_cast<uint32_t>(plan.ranges.size()), plan.totalSlots, digests));
    });
    std::printf("%-28s %10.1f %10.1f %8.2f\n", label, bytes / copyMs / 1e6, bytes / hashMs / 1e6, copyMs / hashMs);
    if (copyMs / hashMs < goal) {
      char line[128];
      std::snprintf(line, sizeof line, "%s: hash / copy %.2f (goal >= %.1f)", label, copyMs / hashMs, goal);
      missed.push_back(line);
    }
    api.cuMemFree(table);
    api.cuMemFree(digests);
  };

  for (uint64_t mib : {64, 256, 1024}) {
    const std::string label = std::to_string(mib) + " MiB buffer";
    run(label.c_str(), {{src, mib << 20}}, mib << 20, 0.9);
  }
  for (uint64_t count : {16, 64, 256}) {
    std::vector<kernels::HashRequest> requests;
    for (uint64_t i = 0; i < count; ++i) requests.push_back({src + (i << 20), 1 << 20});
    const std::string label = std::to_string(count) + " x 1 MiB batch";
    run(label.c_str(), requests, count << 20, 0.5);
  }

  hasher.reset();
  api.cuMemFree(src);
  api.cuMemFree(dst);
  api.cuDevicePrimaryCtxRelease(dev);
  for (const std::string& m : missed) std::printf("goal missed: %s\n", m.c_str());
  return missed.empty() ? 0 : 1;
}
