// Driver-API loader and launcher of the device hash kernel.
#include "kernels/device_hasher.h"

#include <algorithm>

namespace gpurr::kernels {

namespace {
thread_local bool tlsLoadingHashModule = false;

struct LoadingHashModule {
  LoadingHashModule() { tlsLoadingHashModule = true; }
  ~LoadingHashModule() { tlsLoadingHashModule = false; }
};
}  // namespace

bool loadingHashModule() { return tlsLoadingHashModule; }

std::unique_ptr<DeviceHasher> DeviceHasher::create(const DriverApi& api, std::string& error) {
  std::unique_ptr<DeviceHasher> h(new DeviceHasher(api));
  const std::span<const unsigned char> image = hashKernelFatbin();
  // Loaded in full here, not lazily at its first launch, so that the module's
  // load happens where loadingHashModule() says so.
  const LoadingHashModule loading;
  CUresult r = api.cuModuleLoadData(&h->module_, image.data());
  if (r != CUDA_SUCCESS) {
    error = "cannot load the hash kernel into this context: " + api.errorText(r);
    h->module_ = nullptr;
    return nullptr;
  }
  r = api.cuModuleGetFunction(&h->function_, h->module_, kHashKernelName);
  if (r != CUDA_SUCCESS) {
    error = std::string("cannot find ") + kHashKernelName + " in the hash module: " + api.errorText(r);
    return nullptr;
  }
  if (api.cuFuncLoad != nullptr) api.cuFuncLoad(h->function_);  // CUDA_MODULE_LOADING=LAZY defers it otherwise
  CUdevice dev = 0;
  int sms = 0;
  if (api.cuCtxGetDevice(&dev) == CUDA_SUCCESS &&
      api.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == CUDA_SUCCESS && sms > 0) {
    // 8 resident 256-thread blocks per SM fill it; a grid-stride loop does the rest.
    h->maxBlocks_ = static_cast<unsigned>(sms) * 8;
  } else {
    h->maxBlocks_ = 1024;
  }
  return h;
}

DeviceHasher::~DeviceHasher() {
  if (rangesDev_ != 0) api_.cuMemFree(rangesDev_);
  if (digestsDev_ != 0) api_.cuMemFree(digestsDev_);
  if (module_ != nullptr) api_.cuModuleUnload(module_);
}

CUresult DeviceHasher::enqueue(CUstream stream, CUdeviceptr ranges, uint32_t rangeCount, uint64_t totalSlots,
                               CUdeviceptr digests, CUdeviceptr blocksDone, CUdeviceptr doneWord,
                               uint64_t ticket) const {
  if (totalSlots == 0) return CUDA_SUCCESS;
  const unsigned blocks = static_cast<unsigned>(std::min<uint64_t>(totalSlots, maxBlocks_));
  void* args[] = {&ranges, &rangeCount, &totalSlots, &digests, &blocksDone, &doneWord, &ticket};
  return api_.cuLaunchKernel(function_, blocks, 1, 1, kHashBlockThreads, 1, 1, 0, stream, args, nullptr);
}

CUresult DeviceHasher::reserve(size_t rangeBytes, size_t digestBytes) {
  if (rangeBytes > rangesCap_) {
    if (rangesDev_ != 0) api_.cuMemFree(rangesDev_);
    rangesDev_ = 0;
    rangesCap_ = 0;
    const size_t cap = std::max<size_t>(rangeBytes, 4096);
    if (CUresult r = api_.cuMemAlloc(&rangesDev_, cap); r != CUDA_SUCCESS) return r;
    rangesCap_ = cap;
  }
  if (digestBytes > digestsCap_) {
    if (digestsDev_ != 0) api_.cuMemFree(digestsDev_);
    digestsDev_ = 0;
    digestsCap_ = 0;
    const size_t cap = std::max<size_t>(digestBytes, 64 * 1024);
    if (CUresult r = api_.cuMemAlloc(&digestsDev_, cap); r != CUDA_SUCCESS) return r;
    digestsCap_ = cap;
  }
  return CUDA_SUCCESS;
}

CUresult DeviceHasher::hashNow(CUstream stream, std::span<const HashRequest> requests,
                               std::vector<HashResult>& out, bool keepChunkDigests) {
  const HashPlan plan = planHashBatch(requests);
  std::vector<uint64_t> chunks(plan.totalSlots);
  if (plan.totalSlots > 0) {
    const size_t rangeBytes = plan.ranges.size() * sizeof(DeviceHashRange);
    if (CUresult r = reserve(rangeBytes, plan.totalSlots * 8); r != CUDA_SUCCESS) return r;
    // The table is reused between calls: drain the stream first, so that no
    // earlier hash still reads it. The upload goes on `stream` itself: a
    // synchronous copy from pageable memory may still be in flight when it
    // returns, and is not ordered with a non-blocking stream.
    if (CUresult r = api_.cuStreamSynchronize(stream); r != CUDA_SUCCESS) return r;
    if (CUresult r = api_.cuMemcpyHtoDAsync(rangesDev_, plan.ranges.data(), rangeBytes, stream); r != CUDA_SUCCESS)
      return r;
    if (CUresult r = enqueue(stream, rangesDev_, static_cast<uint32_t>(plan.ranges.size()), plan.totalSlots,
                             digestsDev_);
        r != CUDA_SUCCESS)
      return r;
    if (CUresult r = api_.cuStreamSynchronize(stream); r != CUDA_SUCCESS) return r;
    if (CUresult r = api_.cuMemcpyDtoH(chunks.data(), digestsDev_, plan.totalSlots * 8); r != CUDA_SUCCESS)
      return r;
  }
  out.assign(requests.size(), {});
  for (size_t i = 0; i < requests.size(); ++i) {
    out[i].digest = foldRequest(plan, requests, i, chunks);
    if (keepChunkDigests) {
      const auto first = chunks.begin() + static_cast<ptrdiff_t>(plan.firstSlot[i]);
      out[i].chunkDigests.assign(first, first + static_cast<ptrdiff_t>(chunkCount(requests[i].length)));
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace gpurr::kernels
