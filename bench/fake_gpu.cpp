// The fake driver callback_bench records through (see fake_gpu.h).
#include "bench/fake_gpu.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/hash_plan.h"
#include "trace_format/hash.h"
#include "trace_format/hash_primitives.h"

namespace gpurr::bench {

thread_local constinit bool inCallbacks = false;
thread_local constinit bool programThread = false;
FakeGpu* gpu = nullptr;
bool FakeGpu::onProgram() const { return counting && programThread; }

}  // namespace gpurr::bench

// Heap allocations made inside the recorder's callbacks on the program's
// thread. Replacing the global allocation functions with malloc and free is
// what the standard allows; GCC's -Wmismatched-new-delete cannot tell, once
// they are inlined (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  using gpurr::bench::gpu;
  if (gpurr::bench::inCallbacks && gpu != nullptr && gpu->onProgram()) ++gpu->heapAllocations;
  if (void* p = std::malloc(n != 0 ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace gpurr::bench {

namespace {

void countAlloc() {
  if (gpu->onProgram()) ++gpu->allocations;
}
void countWait() {
  if (gpu->onProgram()) ++gpu->waits;
}

CUresult fGetErrorString(CUresult, const char** s) { return *s = "fake error", CUDA_SUCCESS; }
CUresult fModuleLoadData(CUmodule* m, const void*) { return *m = reinterpret_cast<CUmodule>(0x1), CUDA_SUCCESS; }
CUresult fModuleUnload(CUmodule) { return CUDA_SUCCESS; }
CUresult fModuleGetFunction(CUfunction* f, CUmodule, const char*) {
  return *f = reinterpret_cast<CUfunction>(0x2), CUDA_SUCCESS;
}
CUresult fCtxGetDevice(CUdevice* d) { return *d = 0, CUDA_SUCCESS; }
CUresult fDeviceGetAttribute(int* v, CUdevice_attribute, CUdevice) { return *v = 4, CUDA_SUCCESS; }
CUresult fMemAlloc(CUdeviceptr* p, size_t n) {
  countAlloc();
  *p = reinterpret_cast<CUdeviceptr>(std::calloc(n, 1));
  return CUDA_SUCCESS;
}
CUresult fMemFree(CUdeviceptr p) {
  countAlloc();
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}
CUresult fMemHostAlloc(void** p, size_t n, unsigned) {
  countAlloc();
  *p = std::calloc(n, 1);
  return CUDA_SUCCESS;
}
CUresult fMemAllocHost(void** p, size_t n) { return fMemHostAlloc(p, n, 0); }
CUresult fMemFreeHost(void* p) {
  countAlloc();
  std::free(p);
  return CUDA_SUCCESS;
}
CUresult fMemHostGetDevicePointer(CUdeviceptr* d, void* p, unsigned) {
  *d = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult fStreamCreate(CUstream* s, unsigned) { return *s = reinterpret_cast<CUstream>(0xEE00), CUDA_SUCCESS; }
CUresult fStreamDestroy(CUstream) { return CUDA_SUCCESS; }
CUresult fMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream) {
  std::memset(reinterpret_cast<void*>(p), v, n);  // once, at the ring's creation
  return CUDA_SUCCESS;
}
CUresult fMemsetD8(CUdeviceptr p, unsigned char v, size_t n) {
  std::memset(reinterpret_cast<void*>(p), v, n);
  return CUDA_SUCCESS;
}
// The hash kernel, on the fake GPU's thread.
CUresult fLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void** args, void**) {
  const auto table = *static_cast<CUdeviceptr*>(args[0]);
  const auto count = *static_cast<uint32_t*>(args[1]);
  const auto out = *static_cast<CUdeviceptr*>(args[3]);
  const auto doneWord = *static_cast<CUdeviceptr*>(args[5]);
  const auto ticket = *static_cast<uint64_t*>(args[6]);
  if (gpu->onProgram()) ++gpu->hashLaunches;
  gpu->push([=] {
    const auto* ranges = reinterpret_cast<const kernels::DeviceHashRange*>(table);
    auto* digests = reinterpret_cast<uint64_t*>(out);
    for (uint32_t r = 0; r < count; ++r) {
      for (uint64_t c = 0; c < kernels::chunkCount(ranges[r].length); ++c) {
        const uint64_t start = c * hash::kChunkBytes;
        const uint64_t len = std::min<uint64_t>(hash::kChunkBytes, ranges[r].length - start);
        digests[ranges[r].firstSlot + c] =
            hash::hashChunk({reinterpret_cast<const uint8_t*>(ranges[r].address + start), len}, c);
      }
    }
    if (doneWord != 0) __atomic_store_n(reinterpret_cast<uint64_t*>(doneWord), ticket, __ATOMIC_RELEASE);
  });
  return CUDA_SUCCESS;
}
CUresult fMemcpyAsync(void* dst, const void* src, size_t n) {
  gpu->push([=] { std::memcpy(dst, src, n); });
  return CUDA_SUCCESS;
}
CUresult fMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream) {
  return fMemcpyAsync(reinterpret_cast<void*>(d), s, n);
}
CUresult fMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream) {
  return fMemcpyAsync(d, reinterpret_cast<const void*>(s), n);
}
CUresult fEventCreate(CUevent* e, unsigned) {
  *e = reinterpret_cast<CUevent>(new std::atomic<bool>(false));
  return CUDA_SUCCESS;
}
CUresult fEventDestroy(CUevent e) {
  delete reinterpret_cast<std::atomic<bool>*>(e);
  return CUDA_SUCCESS;
}
CUresult fEventRecord(CUevent e, CUstream) {
  auto* flag = reinterpret_cast<std::atomic<bool>*>(e);
  flag->store(false);
  gpu->push([flag] { flag->store(true); });
  return CUDA_SUCCESS;
}
CUresult fEventSynchronize(CUevent e) {
  countWait();
  while (!reinterpret_cast<std::atomic<bool>*>(e)->load()) std::this_thread::yield();
  return CUDA_SUCCESS;
}
CUresult fEventQuery(CUevent e) {
  return reinterpret_cast<std::atomic<bool>*>(e)->load() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult fSync() {
  countWait();
  gpu->drain();
  return CUDA_SUCCESS;
}
CUresult fStreamSynchronize(CUstream) { return fSync(); }
CUresult fStreamQuery(CUstream) {
  countWait();
  std::lock_guard lock(gpu->mu);
  return gpu->queue.empty() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult fExchangeCaptureMode(CUstreamCaptureMode*) {
  if (gpu->onProgram()) ++gpu->modeExchanges;
  return CUDA_SUCCESS;
}
CUresult fCtxPushCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult fCtxPopCurrent(CUcontext* c) { return *c = nullptr, CUDA_SUCCESS; }
CUresult fStreamIsCapturing(CUstream, CUstreamCaptureStatus* s) {
  if (gpu->onProgram()) ++gpu->captureQueries;
  return *s = CU_STREAM_CAPTURE_STATUS_NONE, CUDA_SUCCESS;
}
CUresult fDriverGetVersion(int* v) { return *v = 13000, CUDA_SUCCESS; }
CUresult fDeviceGetCount(int* n) { return *n = 0, CUDA_SUCCESS; }
CUresult fFuncGetName(const char** name, CUfunction) { return *name = kKernelName, CUDA_SUCCESS; }
CUresult fFuncGetParamInfo(CUfunction f, size_t i, size_t* off, size_t* size) {
  if (i >= 4) return CUDA_ERROR_INVALID_VALUE;
  *off = 8 * i;
  *size = i < 3 ? 8 : f == kWideKernel ? sizeof(OffsetCalculator) : 4;
  return CUDA_SUCCESS;
}

}  // namespace

kernels::DriverApi fakeApi() {
  kernels::DriverApi a;
  a.cuGetErrorString = fGetErrorString;
  a.cuModuleLoadData = fModuleLoadData;
  a.cuModuleUnload = fModuleUnload;
  a.cuModuleGetFunction = fModuleGetFunction;
  a.cuCtxGetDevice = fCtxGetDevice;
  a.cuDeviceGetAttribute = fDeviceGetAttribute;
  a.cuMemAlloc = fMemAlloc;
  a.cuMemFree = fMemFree;
  a.cuMemAllocHost = fMemAllocHost;
  a.cuMemHostAlloc = fMemHostAlloc;
  a.cuMemFreeHost = fMemFreeHost;
  a.cuMemHostGetDevicePointer = fMemHostGetDevicePointer;
  a.cuMemsetD8 = fMemsetD8;
  a.cuMemsetD8Async = fMemsetD8Async;
  a.cuStreamCreate = fStreamCreate;
  a.cuStreamDestroy = fStreamDestroy;
  a.cuMemcpyHtoDAsync = fMemcpyHtoDAsync;
  a.cuMemcpyDtoHAsync = fMemcpyDtoHAsync;
  a.cuLaunchKernel = fLaunchKernel;
  a.cuEventCreate = fEventCreate;
  a.cuEventDestroy = fEventDestroy;
  a.cuEventRecord = fEventRecord;
  a.cuEventSynchronize = fEventSynchronize;
  a.cuEventQuery = fEventQuery;
  a.cuCtxSynchronize = fSync;
  a.cuStreamSynchronize = fStreamSynchronize;
  a.cuStreamQuery = fStreamQuery;
  a.cuThreadExchangeStreamCaptureMode = fExchangeCaptureMode;
  a.cuCtxPushCurrent = fCtxPushCurrent;
  a.cuCtxPopCurrent = fCtxPopCurrent;
  a.cuStreamIsCapturing = fStreamIsCapturing;
  a.cuDriverGetVersion = fDriverGetVersion;
  a.cuDeviceGetCount = fDeviceGetCount;
  a.cuFuncGetName = fFuncGetName;
  a.cuFuncGetParamInfo = fFuncGetParamInfo;
  return a;
}


}  // namespace gpurr::bench
