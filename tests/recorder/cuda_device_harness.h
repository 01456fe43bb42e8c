// The CudaDevice tests' harness: a fake driver table whose "device memory"
// is host memory and whose stream operations are deferred until an event,
// stream or context synchronisation or a stream query, as on a GPU that runs
// behind the host (the hash kernel runs the CPU reference).
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "recorder/cuda_device.h"
#include "trace_format/hash.h"
#include "trace_format/hash_primitives.h"

namespace gpurr::recorder::cuda_device_testing {

struct FakeGpu {
  std::recursive_mutex mu;                  // the trace thread and the program's threads call in
  std::deque<std::function<void()>> queue;  // enqueued work, in stream order
  std::map<CUevent, bool> events;           // recorded -> completed
  int allocs = 0, frees = 0, launches = 0, ctxSyncs = 0, streamSyncs = 0, modeExchanges = 0, queries = 0;
  bool kernelsVanish = false;  // launches succeed but never run (a lost kernel)
  bool blocked = false;        // the program's stream is stuck: nothing enqueued runs
  CUresult sticky = CUDA_SUCCESS;  // the context failed: every call returns this
  std::set<uint64_t> ownStreams, queried;  // streams the recorder created; streams queried
  CUstreamCaptureMode captureMode = CU_STREAM_CAPTURE_MODE_GLOBAL;  // of the calling thread
  std::vector<CUstreamCaptureMode> waitModes;  // the thread's mode at each cuEventSynchronize
  CUresult launchResult = CUDA_SUCCESS;
  std::map<uint64_t, CUstreamCaptureStatus> capture;
  int captureQueries = 0;

  void runAll() {
    std::lock_guard lock(mu);
    while (!blocked && !queue.empty()) {
      auto op = std::move(queue.front());
      queue.pop_front();
      op();
    }
  }
};
inline FakeGpu* gpu = nullptr;  // the fake functions' GPU, set by Fixture

inline CUresult fGetErrorString(CUresult, const char** s) { return *s = "fake error", CUDA_SUCCESS; }
inline CUresult fModuleLoadData(CUmodule* m, const void*) { return *m = reinterpret_cast<CUmodule>(0x1), CUDA_SUCCESS; }
inline CUresult fModuleUnload(CUmodule) { return CUDA_SUCCESS; }
inline CUresult fModuleGetFunction(CUfunction* f, CUmodule, const char*) {
  return *f = reinterpret_cast<CUfunction>(0x2), CUDA_SUCCESS;
}
inline CUresult fCtxGetDevice(CUdevice* d) { return *d = 0, CUDA_SUCCESS; }
inline CUresult fDeviceGetAttribute(int* v, CUdevice_attribute, CUdevice) { return *v = 4, CUDA_SUCCESS; }
inline CUresult fMemAlloc(CUdeviceptr* p, size_t n) {
  ++gpu->allocs;
  *p = reinterpret_cast<CUdeviceptr>(std::calloc(n, 1));
  return CUDA_SUCCESS;
}
inline CUresult fMemFree(CUdeviceptr p) {
  ++gpu->frees;
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}
inline CUresult fMemAllocHost(void** p, size_t n) {
  ++gpu->allocs;
  *p = std::calloc(n, 1);
  return CUDA_SUCCESS;
}
inline CUresult fMemHostAlloc(void** p, size_t n, unsigned) {
  ++gpu->allocs;
  *p = std::calloc(n, 1);
  return CUDA_SUCCESS;
}
inline CUresult fMemHostGetDevicePointer(CUdeviceptr* d, void* p, unsigned) {
  *d = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: the same address
  return CUDA_SUCCESS;
}
inline CUresult fMemsetD8(CUdeviceptr p, unsigned char v, size_t n) {
  std::memset(reinterpret_cast<void*>(p), v, n);
  return CUDA_SUCCESS;
}
inline CUresult fMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream) {
  std::lock_guard lock(gpu->mu);
  gpu->queue.push_back([=] { std::memset(reinterpret_cast<void*>(p), v, n); });
  return CUDA_SUCCESS;
}
inline CUresult fStreamCreate(CUstream* s, unsigned flags) {
  REQUIRE(flags == CU_STREAM_NON_BLOCKING);
  std::lock_guard lock(gpu->mu);
  *s = reinterpret_cast<CUstream>(0xEE00 + gpu->ownStreams.size());
  gpu->ownStreams.insert(reinterpret_cast<uint64_t>(*s));
  return CUDA_SUCCESS;
}
inline CUresult fStreamDestroy(CUstream s) {
  std::lock_guard lock(gpu->mu);
  return gpu->ownStreams.erase(reinterpret_cast<uint64_t>(s)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
inline CUresult fStreamQuery(CUstream s) {
  std::lock_guard lock(gpu->mu);
  ++gpu->queries;
  gpu->queried.insert(reinterpret_cast<uint64_t>(s));
  gpu->waitModes.push_back(gpu->captureMode);
  if (gpu->sticky != CUDA_SUCCESS) return gpu->sticky;
  gpu->runAll();
  return CUDA_SUCCESS;
}
inline CUresult fMemFreeHost(void* p) {
  ++gpu->frees;
  std::free(p);
  return CUDA_SUCCESS;
}
inline CUresult fMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream) {
  gpu->queue.push_back([=] { std::memcpy(reinterpret_cast<void*>(dst), src, n); });
  return CUDA_SUCCESS;
}
inline CUresult fMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream) {
  gpu->queue.push_back([=] { std::memcpy(dst, reinterpret_cast<const void*>(src), n); });
  return CUDA_SUCCESS;
}
// The hash kernel: every chunk slot of the table, by the CPU reference.
inline CUresult fLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned block, unsigned, unsigned, unsigned,
                       CUstream, void** args, void**) {
  if (gpu->launchResult != CUDA_SUCCESS) return gpu->launchResult;
  ++gpu->launches;
  REQUIRE(block == 256);
  const auto table = *static_cast<CUdeviceptr*>(args[0]);
  const auto count = *static_cast<uint32_t*>(args[1]);
  const auto slots = *static_cast<uint64_t*>(args[2]);
  const auto out = *static_cast<CUdeviceptr*>(args[3]);
  const auto counter = *static_cast<CUdeviceptr*>(args[4]);
  const auto doneWord = *static_cast<CUdeviceptr*>(args[5]);
  const auto ticket = *static_cast<uint64_t*>(args[6]);
  if (gpu->kernelsVanish) return CUDA_SUCCESS;
  std::lock_guard lock(gpu->mu);
  gpu->queue.push_back([=] {
    const auto* ranges = reinterpret_cast<const kernels::DeviceHashRange*>(table);
    auto* digests = reinterpret_cast<uint64_t*>(out);
    for (uint32_t r = 0; r < count; ++r) {
      for (uint64_t c = 0; c < kernels::chunkCount(ranges[r].length); ++c) {
        const uint64_t start = c * hash::kChunkBytes;
        const uint64_t len = std::min<uint64_t>(hash::kChunkBytes, ranges[r].length - start);
        REQUIRE(ranges[r].firstSlot + c < slots);
        digests[ranges[r].firstSlot + c] =
            hash::hashChunk({reinterpret_cast<const uint8_t*>(ranges[r].address + start), len}, c);
      }
    }
    if (doneWord != 0) {  // the last block: counter back to 0, ticket raised
      REQUIRE(*reinterpret_cast<uint32_t*>(counter) == 0);
      __atomic_store_n(reinterpret_cast<uint64_t*>(doneWord), ticket, __ATOMIC_RELEASE);
    }
  });
  return CUDA_SUCCESS;
}
inline CUresult fEventCreate(CUevent* e, unsigned) {
  *e = reinterpret_cast<CUevent>(new int(0));
  gpu->events[*e] = false;
  return CUDA_SUCCESS;
}
inline CUresult fEventDestroy(CUevent e) {
  gpu->events.erase(e);
  delete reinterpret_cast<int*>(e);
  return CUDA_SUCCESS;
}
inline CUresult fEventRecord(CUevent e, CUstream) {
  gpu->events[e] = false;
  gpu->queue.push_back([e] { gpu->events[e] = true; });
  return CUDA_SUCCESS;
}
inline CUresult fEventSynchronize(CUevent e) {
  if (!gpu->events.count(e)) return CUDA_ERROR_INVALID_HANDLE;
  gpu->waitModes.push_back(gpu->captureMode);
  while (!gpu->events[e] && !gpu->queue.empty()) {
    auto op = std::move(gpu->queue.front());
    gpu->queue.pop_front();
    op();
  }
  return CUDA_SUCCESS;
}
inline CUresult fEventQuery(CUevent e) {  // the GPU gets on with its work when asked
  std::lock_guard lock(gpu->mu);
  if (!gpu->events.count(e)) return CUDA_ERROR_INVALID_HANDLE;
  gpu->waitModes.push_back(gpu->captureMode);
  if (!gpu->events[e]) gpu->runAll();
  return gpu->events[e] ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
inline CUresult fCtxSynchronize() {
  std::lock_guard lock(gpu->mu);
  ++gpu->ctxSyncs;
  gpu->runAll();
  return CUDA_SUCCESS;
}
inline CUresult fStreamSynchronize(CUstream s) {
  std::lock_guard lock(gpu->mu);
  if (!gpu->ownStreams.count(reinterpret_cast<uint64_t>(s))) ++gpu->streamSyncs;  // the program's streams
  gpu->runAll();
  return CUDA_SUCCESS;
}
inline CUresult fExchangeCaptureMode(CUstreamCaptureMode* mode) {
  std::swap(*mode, gpu->captureMode);
  ++gpu->modeExchanges;
  return CUDA_SUCCESS;
}
inline CUresult fCtxPushCurrent(CUcontext) { return CUDA_SUCCESS; }
inline CUresult fCtxPopCurrent(CUcontext* c) { return *c = nullptr, CUDA_SUCCESS; }
inline CUresult fStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  auto it = gpu->capture.find(reinterpret_cast<uint64_t>(s));
  *status = it == gpu->capture.end() ? CU_STREAM_CAPTURE_STATUS_NONE : it->second;
  return CUDA_SUCCESS;
}
// Streams in `capture` report their status and the capture id 0x70 + stream;
// 0xE is the legacy stream while a blocking stream captures.
inline CUresult fStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph*,
                               const CUgraphNode**, const CUgraphEdgeData**, size_t*) {
  ++gpu->captureQueries;
  if (reinterpret_cast<uint64_t>(s) == 0xE) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  fStreamIsCapturing(s, status);
  if (id != nullptr) *id = 0x70 + reinterpret_cast<uint64_t>(s);
  return CUDA_SUCCESS;
}
// Function 0x100 is a CUfunction with params (8 @0, 4 @8); 0x200 is a CUkernel.
inline CUresult fFuncGetName(const char** name, CUfunction f) {
  if (reinterpret_cast<uint64_t>(f) != 0x100) return CUDA_ERROR_INVALID_HANDLE;
  return *name = "_Z1fPfi", CUDA_SUCCESS;
}
inline CUresult fKernelGetName(const char** name, CUkernel k) {
  if (reinterpret_cast<uint64_t>(k) != 0x200) return CUDA_ERROR_INVALID_HANDLE;
  return *name = "_Z1kv", CUDA_SUCCESS;
}
inline CUresult fFuncGetParamInfo(CUfunction f, size_t i, size_t* off, size_t* size) {
  if (reinterpret_cast<uint64_t>(f) != 0x100) return CUDA_ERROR_INVALID_HANDLE;
  if (i == 0) return *off = 0, *size = 8, CUDA_SUCCESS;
  if (i == 1) return *off = 8, *size = 4, CUDA_SUCCESS;
  return CUDA_ERROR_INVALID_VALUE;
}
inline CUresult fKernelGetParamInfo(CUkernel k, size_t, size_t*, size_t*) {
  return reinterpret_cast<uint64_t>(k) == 0x200 ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
}
inline CUresult fFuncGetModule(CUmodule* m, CUfunction f) {
  *m = reinterpret_cast<CUmodule>(reinterpret_cast<uint64_t>(f) + 0x1000);
  return CUDA_SUCCESS;
}
inline CUresult fKernelGetFunction(CUfunction* f, CUkernel k) {
  *f = reinterpret_cast<CUfunction>(reinterpret_cast<uint64_t>(k) + 1);
  return CUDA_SUCCESS;
}

inline kernels::DriverApi fakeApi() {
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
  a.cuMemFreeHost = fMemFreeHost;
  a.cuMemHostAlloc = fMemHostAlloc;
  a.cuMemHostGetDevicePointer = fMemHostGetDevicePointer;
  a.cuMemsetD8 = fMemsetD8;
  a.cuMemsetD8Async = fMemsetD8Async;
  a.cuStreamCreate = fStreamCreate;
  a.cuStreamDestroy = fStreamDestroy;
  a.cuStreamQuery = fStreamQuery;
  a.cuMemcpyHtoDAsync = fMemcpyHtoDAsync;
  a.cuMemcpyDtoHAsync = fMemcpyDtoHAsync;
  a.cuLaunchKernel = fLaunchKernel;
  a.cuEventCreate = fEventCreate;
  a.cuEventDestroy = fEventDestroy;
  a.cuEventRecord = fEventRecord;
  a.cuEventSynchronize = fEventSynchronize;
  a.cuEventQuery = fEventQuery;
  a.cuCtxSynchronize = fCtxSynchronize;
  a.cuStreamSynchronize = fStreamSynchronize;
  a.cuThreadExchangeStreamCaptureMode = fExchangeCaptureMode;
  a.cuCtxPushCurrent = fCtxPushCurrent;
  a.cuCtxPopCurrent = fCtxPopCurrent;
  a.cuStreamIsCapturing = fStreamIsCapturing;
  a.cuFuncGetName = fFuncGetName;
  a.cuKernelGetName = fKernelGetName;
  a.cuFuncGetParamInfo = fFuncGetParamInfo;
  a.cuKernelGetParamInfo = fKernelGetParamInfo;
  a.cuFuncGetModule = fFuncGetModule;
  a.cuKernelGetFunction = fKernelGetFunction;
  return a;
}

inline std::vector<uint8_t> randomBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

struct Fixture {
  FakeGpu state;
  Fixture() { gpu = &state; }
  ~Fixture() { gpu = nullptr; }
};

}  // namespace gpurr::recorder::cuda_device_testing
