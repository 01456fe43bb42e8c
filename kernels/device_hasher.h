// Loads the embedded hash kernel into the current CUDA context with the driver
// API and launches it. Used by the recorder (inside the recorded program's
// context), the replayer, the GPU tests and the benchmark.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/driver_api.h"
#include "kernels/hash_plan.h"

namespace gpurr::kernels {

// The fatbin of hash_kernel.cu, generated and embedded at build time.
std::span<const unsigned char> hashKernelFatbin();

struct HashResult {
  uint64_t digest = 0;
  std::vector<uint64_t> chunkDigests;
};

// The hash kernel loaded in one context. Create and use it with that context
// current; it owns the module and its scratch buffers.
// Whether this thread is loading the hash kernel's module now: a CUPTI
// client that ignores its own calls still sees the program's modules loaded
// inside them (lazy loading), and this tells the hash module apart.
bool loadingHashModule();

class DeviceHasher {
 public:
  // Loads the module into the current context. Returns null with a reason in
  // `error` on failure (no context, no image for this GPU...).
  static std::unique_ptr<DeviceHasher> create(const DriverApi& api, std::string& error);
  ~DeviceHasher();
  DeviceHasher(const DeviceHasher&) = delete;
  DeviceHasher& operator=(const DeviceHasher&) = delete;

  // Enqueues the kernel on `stream`: `ranges` (`rangeCount` DeviceHashRange
  // entries) -> `digests` (`totalSlots` uint64 chunk digests), both device
  // addresses (device memory, or mapped pinned host memory). With
  // `doneWord`, the kernel writes `ticket` there once every digest is
  // written, using the zeroed counter at `blocksDone`. Nothing is waited for.
  CUresult enqueue(CUstream stream, CUdeviceptr ranges, uint32_t rangeCount, uint64_t totalSlots,
                   CUdeviceptr digests, CUdeviceptr blocksDone = 0, CUdeviceptr doneWord = 0,
                   uint64_t ticket = 0) const;

  // Hashes the buffers synchronously on `stream` (uploads the plan, launches,
  // downloads and folds). Fills `out` (one per request) and returns
  // CUDA_SUCCESS, or the first failing call's result.
  CUresult hashNow(CUstream stream, std::span<const HashRequest> requests, std::vector<HashResult>& out,
                   bool keepChunkDigests = false);

  const DriverApi& api() const { return api_; }

 private:
  DeviceHasher(const DriverApi& api) : api_(api) {}
  CUresult reserve(size_t rangeBytes, size_t digestBytes);

  const DriverApi& api_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  unsigned maxBlocks_ = 1;
  CUdeviceptr rangesDev_ = 0, digestsDev_ = 0;
  size_t rangesCap_ = 0, digestsCap_ = 0;
};

}  // namespace gpurr::kernels
