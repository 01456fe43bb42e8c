// A fake CUDA driver for the replayer's CPU tests: the driver tables point
// at functions that keep device memory in host vectors, reserve address space
// like cuMemAddressReserve (a hint, refused where taken), run the hash kernel
// with the CPU hash and run the recorded image's kernels as C++ functions
// (FakeGpu::kernels, by name). An image is any blob starting "FAKEIMG".
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kernels/device_hasher.h"
#include "kernels/driver_api.h"
#include "kernels/hash_layout.h"
#include "replayer/replay_driver.h"
#include "trace_format/hash.h"

namespace gpurr::testing::fake {

// ------------------------------------------------------------ the fake GPU

inline constexpr uint64_t kGranule = 2 << 20;
inline const CUfunction kHashFunction = reinterpret_cast<CUfunction>(uintptr_t{0x1001});
inline const CUmodule kHashModule = reinterpret_cast<CUmodule>(uintptr_t{0x2001});
inline const CUmodule kUserModule = reinterpret_cast<CUmodule>(uintptr_t{0x2002});
inline constexpr char kImageMagic[] = "FAKEIMG";

struct FakeGpu {
  int ccMajor = 9, ccMinor = 0;
  std::map<uint64_t, uint64_t> reserved;               // start -> size
  std::map<uint64_t, std::vector<uint8_t>> memory;     // mapped or allocated, by start
  std::vector<std::pair<uint64_t, uint64_t>> taken;    // ranges the "driver" holds already
  std::map<CUmemGenericAllocationHandle, uint64_t> handles;
  CUmemGenericAllocationHandle nextHandle = 1;
  uint64_t nextAddress = 0x300000000000;
  int contexts = 0, modules = 0, streams = 0, events = 0;
  std::map<int, int> functionAttributes;
  int axpyLaunches = 0;
  // Kernels the recorded image holds, by name: each gets the launch's
  // configuration and parameter bytes, as a GPU would.
  std::map<std::string, std::function<CUresult(const CUlaunchConfig&, std::span<const uint8_t>)>> kernels;
  std::map<CUfunction, std::string> functionNames;
  std::map<std::string, int> launchesOf;
  uint64_t refusedAllocSize = 0;  // cuMemAlloc of exactly this many bytes runs out of memory
  bool nondeterministic = false;
  bool faultOnLaunch = false;
  CUresult sticky = CUDA_SUCCESS;  // a kernel fault, reported at the next sync
  std::vector<std::string> calls;  // driver calls of interest, in order
};
inline FakeGpu* gpu = nullptr;

inline bool overlaps(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) { return a < b + bn && b < a + an; }

inline bool addressFree(uint64_t addr, uint64_t size) {
  for (const auto& [s, n] : gpu->reserved) {
    if (overlaps(addr, size, s, n)) return false;
  }
  for (const auto& [s, n] : gpu->taken) {
    if (overlaps(addr, size, s, n)) return false;
  }
  return true;
}

inline uint8_t* at(uint64_t addr, uint64_t size) {
  auto it = gpu->memory.upper_bound(addr);
  if (it == gpu->memory.begin()) return nullptr;
  --it;
  if (addr + size > it->first + it->second.size()) return nullptr;
  return it->second.data() + (addr - it->first);
}

inline uint64_t bump(uint64_t size) {
  while (!addressFree(gpu->nextAddress, size)) gpu->nextAddress += kGranule;
  const uint64_t a = gpu->nextAddress;
  gpu->nextAddress += (size + kGranule - 1) / kGranule * kGranule;
  return a;
}

inline CUresult fGetErrorString(CUresult, const char** s) {
  *s = "fake error";
  return CUDA_SUCCESS;
}
inline CUresult fInit(unsigned) { return CUDA_SUCCESS; }
inline CUresult fDeviceGetCount(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}
inline CUresult fDeviceGet(CUdevice* d, int i) {
  *d = i;
  return CUDA_SUCCESS;
}
inline CUresult fDeviceGetName(char* name, int len, CUdevice) {
  std::snprintf(name, len, "Fake GPU");
  return CUDA_SUCCESS;
}
inline CUresult fDeviceGetUuid(CUuuid* u, CUdevice) {
  std::memset(u, 0xab, sizeof(*u));
  return CUDA_SUCCESS;
}
inline CUresult fDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR   ? gpu->ccMajor
       : a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? gpu->ccMinor
       : a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT     ? 4
                                                           : 0;
  return CUDA_SUCCESS;
}
inline CUresult fDeviceTotalMem(size_t* b, CUdevice) {
  *b = size_t{16} << 30;
  return CUDA_SUCCESS;
}
inline CUresult fDeviceGetPCIBusId(char* s, int len, CUdevice) {
  std::snprintf(s, len, "0000:00:00.0");
  return CUDA_SUCCESS;
}
inline CUresult fDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
inline CUresult fPrimaryCtxRetain(CUcontext* c, CUdevice) {
  ++gpu->contexts;
  *c = reinterpret_cast<CUcontext>(uintptr_t{0x3001});
  gpu->calls.push_back("context");
  return CUDA_SUCCESS;
}
inline CUresult fPrimaryCtxRelease(CUdevice) {
  --gpu->contexts;
  return CUDA_SUCCESS;
}
inline CUresult fCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
inline CUresult fCtxGetDevice(CUdevice* d) {
  *d = 0;
  return CUDA_SUCCESS;
}
inline CUresult fModuleLoadData(CUmodule* m, const void* image) {
  if (image == kernels::hashKernelFatbin().data()) {
    *m = kHashModule;
  } else if (std::memcmp(image, kImageMagic, sizeof(kImageMagic) - 1) == 0) {
    *m = kUserModule;
  } else {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  ++gpu->modules;
  gpu->calls.push_back(*m == kHashModule ? "load hash module" : "load image");
  return CUDA_SUCCESS;
}
inline CUresult fModuleUnload(CUmodule) {
  --gpu->modules;
  return CUDA_SUCCESS;
}
inline CUresult fModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  if (m == kHashModule && std::string(name) == kernels::kHashKernelName) {
    *f = kHashFunction;
  } else if (m == kUserModule && gpu->kernels.contains(name)) {
    *f = reinterpret_cast<CUfunction>(uintptr_t{0x1100} + std::distance(gpu->kernels.begin(), gpu->kernels.find(name)));
    gpu->functionNames[*f] = name;
  } else {
    return CUDA_ERROR_NOT_FOUND;
  }
  return CUDA_SUCCESS;
}
// The hash kernel: chunk digests of every range, by the CPU reference.
inline CUresult fLaunchKernel(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void** args, void**) {
  if (f != kHashFunction) return CUDA_ERROR_INVALID_HANDLE;
  const auto ranges = *static_cast<CUdeviceptr*>(args[0]);
  const auto count = *static_cast<uint32_t*>(args[1]);
  const auto slots = *static_cast<uint64_t*>(args[2]);
  const auto digests = *static_cast<CUdeviceptr*>(args[3]);
  const auto* table = reinterpret_cast<const kernels::DeviceHashRange*>(at(ranges, count * sizeof(kernels::DeviceHashRange)));
  auto* out = reinterpret_cast<uint64_t*>(at(digests, slots * 8));
  if (!table || !out) return CUDA_ERROR_ILLEGAL_ADDRESS;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* bytes = at(table[i].address, table[i].length);
    if (!bytes) return CUDA_ERROR_ILLEGAL_ADDRESS;
    const auto chunks = hash::chunkDigests({bytes, table[i].length});
    std::copy(chunks.begin(), chunks.end(), out + table[i].firstSlot);
  }
  return CUDA_SUCCESS;
}
inline CUresult fMemAlloc(CUdeviceptr* p, size_t n) {
  if (n == gpu->refusedAllocSize) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = bump(n);
  gpu->reserved[*p] = n;
  gpu->memory[*p].assign(n, 0);
  return CUDA_SUCCESS;
}
inline CUresult fMemFree(CUdeviceptr p) {
  gpu->reserved.erase(p);
  return gpu->memory.erase(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
inline CUresult fMemcpyHtoD(CUdeviceptr d, const void* s, size_t n) {
  uint8_t* p = at(d, n);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(p, s, n);
  return CUDA_SUCCESS;
}
inline CUresult fMemcpyDtoH(void* d, CUdeviceptr s, size_t n) {
  const uint8_t* p = at(s, n);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(d, p, n);
  return CUDA_SUCCESS;
}
inline CUresult fMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream) {
  gpu->calls.push_back("restore");
  return fMemcpyHtoD(d, s, n);
}
// The hash kernel's descriptor upload (not a restore of recorded bytes).
inline CUresult fHashTableUpload(CUdeviceptr d, const void* s, size_t n, CUstream) { return fMemcpyHtoD(d, s, n); }
inline CUresult fMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream) {
  uint8_t* to = at(d, n);
  const uint8_t* from = at(s, n);
  if (!to || !from) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(to, from, n);
  gpu->calls.push_back("restore");
  return CUDA_SUCCESS;
}
inline CUresult fMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream) { return fMemcpyDtoH(d, s, n); }
inline CUresult fMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream) {
  uint8_t* p = at(d, n);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  std::memset(p, v, n);
  gpu->calls.push_back("zero");
  return CUDA_SUCCESS;
}
template <typename T>
inline CUresult fill(CUdeviceptr d, T v, size_t n) {
  auto* p = reinterpret_cast<T*>(at(d, n * sizeof(T)));
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  std::fill(p, p + n, v);
  gpu->calls.push_back("set");
  return CUDA_SUCCESS;
}
inline CUresult fMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream) { return fill<uint16_t>(d, v, n); }
inline CUresult fMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream) { return fill<uint32_t>(d, v, n); }
inline CUresult fStreamSynchronize(CUstream) {
  const CUresult r = gpu->sticky;
  return r;
}
inline CUresult fStreamCreate(CUstream* s, unsigned) {
  ++gpu->streams;
  *s = reinterpret_cast<CUstream>(uintptr_t{0x4001});
  return CUDA_SUCCESS;
}
inline CUresult fStreamDestroy(CUstream) {
  --gpu->streams;
  return CUDA_SUCCESS;
}
inline CUresult fEventCreate(CUevent* e, unsigned) {
  ++gpu->events;
  *e = reinterpret_cast<CUevent>(static_cast<uintptr_t>(0x5000 + gpu->events));
  return CUDA_SUCCESS;
}
inline CUresult fEventDestroy(CUevent) {
  --gpu->events;
  return CUDA_SUCCESS;
}
inline CUresult fEventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
inline CUresult fEventElapsedTime(float* ms, CUevent, CUevent) {
  *ms = 0.125f;
  return CUDA_SUCCESS;
}
inline CUresult fMemAddressReserve(CUdeviceptr* p, size_t size, size_t, CUdeviceptr addr, unsigned long long) {
  *p = addr != 0 && addressFree(addr, size) ? addr : bump(size);
  gpu->reserved[*p] = size;
  gpu->calls.push_back("reserve");
  return CUDA_SUCCESS;
}
inline CUresult fMemAddressFree(CUdeviceptr p, size_t) { return gpu->reserved.erase(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
inline CUresult fMemCreate(CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp*, unsigned long long) {
  *h = gpu->nextHandle++;
  gpu->handles[*h] = size;
  return CUDA_SUCCESS;
}
inline CUresult fMemRelease(CUmemGenericAllocationHandle h) {
  return gpu->handles.erase(h) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
inline CUresult fMemMap(CUdeviceptr p, size_t size, size_t, CUmemGenericAllocationHandle h, unsigned long long) {
  if (!gpu->handles.contains(h) || !gpu->reserved.contains(p)) return CUDA_ERROR_INVALID_VALUE;
  gpu->memory[p].assign(size, 0xcd);  // not zero: replay must clear it
  return CUDA_SUCCESS;
}
inline CUresult fMemUnmap(CUdeviceptr p, size_t) { return gpu->memory.erase(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
inline CUresult fMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) { return CUDA_SUCCESS; }
inline CUresult fMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) {
  *g = kGranule;
  return CUDA_SUCCESS;
}
inline CUresult fFuncSetAttribute(CUfunction, CUfunction_attribute a, int v) {
  gpu->functionAttributes[a] = v;
  return CUDA_SUCCESS;
}
inline CUresult fFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction) {
  *v = gpu->functionAttributes.contains(a) ? gpu->functionAttributes[a] : 0;
  return CUDA_SUCCESS;
}
// Launches a kernel of the image, reading its parameters from the buffer.
inline CUresult fLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  const auto name = gpu->functionNames.find(f);
  if (name == gpu->functionNames.end() || kernelParams != nullptr || extra == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (extra[0] != CU_LAUNCH_PARAM_BUFFER_POINTER || extra[2] != CU_LAUNCH_PARAM_BUFFER_SIZE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (config->sharedMemBytes > 48 * 1024 &&
      gpu->functionAttributes[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] < static_cast<int>(config->sharedMemBytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  gpu->calls.push_back("launch");
  ++gpu->launchesOf[name->second];
  if (gpu->faultOnLaunch) {
    gpu->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
    return CUDA_SUCCESS;
  }
  const CUresult r = gpu->kernels[name->second](
      *config, {static_cast<const uint8_t*>(extra[1]), *static_cast<size_t*>(extra[3])});
  // A bad access faults the context, reported at the next synchronisation.
  if (r == CUDA_ERROR_ILLEGAL_ADDRESS) gpu->sticky = r;
  return r == CUDA_ERROR_ILLEGAL_ADDRESS ? CUDA_SUCCESS : r;
}

// fake_axpy(unsigned n, struct { const float* x; float* y; float a; } p):
// y = a * x + y.
inline CUresult fakeAxpy(const CUlaunchConfig&, std::span<const uint8_t> params) {
  if (params.size() != 32) return CUDA_ERROR_INVALID_VALUE;
  uint32_t n;
  uint64_t x, y;
  float a;
  std::memcpy(&n, params.data(), 4);
  std::memcpy(&x, params.data() + 8, 8);
  std::memcpy(&y, params.data() + 16, 8);
  std::memcpy(&a, params.data() + 24, 4);
  auto* xs = reinterpret_cast<float*>(at(x, n * 4ull));
  auto* ys = reinterpret_cast<float*>(at(y, n * 4ull));
  if (!xs || !ys) return CUDA_ERROR_ILLEGAL_ADDRESS;
  for (uint32_t i = 0; i < n; ++i) ys[i] = a * xs[i] + ys[i];
  // A "race": the last element depends on how many launches came before.
  if (gpu->nondeterministic) ys[n - 1] += static_cast<float>(gpu->axpyLaunches % 3) * 0.5f;
  ++gpu->axpyLaunches;
  return CUDA_SUCCESS;
}

struct FakeDriver {
  FakeGpu state;
  kernels::DriverApi api;
  replay::ReplayDriver drv;
  FakeDriver() {
    gpu = &state;
    api.cuGetErrorString = fGetErrorString;
    api.cuInit = fInit;
    api.cuDeviceGetCount = fDeviceGetCount;
    api.cuDeviceGet = fDeviceGet;
    api.cuDeviceGetName = fDeviceGetName;
    api.cuDeviceGetUuid = fDeviceGetUuid;
    api.cuDeviceGetAttribute = fDeviceGetAttribute;
    api.cuDeviceTotalMem = fDeviceTotalMem;
    api.cuDeviceGetPCIBusId = fDeviceGetPCIBusId;
    api.cuDriverGetVersion = fDriverGetVersion;
    api.cuDevicePrimaryCtxRetain = fPrimaryCtxRetain;
    api.cuDevicePrimaryCtxRelease = fPrimaryCtxRelease;
    api.cuCtxSetCurrent = fCtxSetCurrent;
    api.cuCtxGetDevice = fCtxGetDevice;
    api.cuModuleLoadData = fModuleLoadData;
    api.cuModuleUnload = fModuleUnload;
    api.cuModuleGetFunction = fModuleGetFunction;
    api.cuLaunchKernel = fLaunchKernel;
    api.cuMemAlloc = fMemAlloc;
    api.cuMemFree = fMemFree;
    api.cuMemcpyHtoD = fMemcpyHtoD;
    api.cuMemcpyHtoDAsync = fHashTableUpload;
    api.cuMemcpyDtoH = fMemcpyDtoH;
    api.cuStreamSynchronize = fStreamSynchronize;
    api.cuEventCreate = fEventCreate;
    api.cuEventDestroy = fEventDestroy;
    api.cuEventRecord = fEventRecord;
    api.cuEventElapsedTime = fEventElapsedTime;
    drv.cuMemAddressReserve = fMemAddressReserve;
    drv.cuMemAddressFree = fMemAddressFree;
    drv.cuMemCreate = fMemCreate;
    drv.cuMemRelease = fMemRelease;
    drv.cuMemMap = fMemMap;
    drv.cuMemUnmap = fMemUnmap;
    drv.cuMemSetAccess = fMemSetAccess;
    drv.cuMemGetAllocationGranularity = fMemGetAllocationGranularity;
    drv.cuMemsetD8Async = fMemsetD8Async;
    drv.cuMemcpyHtoDAsync = fMemcpyHtoDAsync;
    drv.cuMemcpyDtoHAsync = fMemcpyDtoHAsync;
    drv.cuMemcpyDtoDAsync = fMemcpyDtoDAsync;
    drv.cuLaunchKernelEx = fLaunchKernelEx;
    drv.cuFuncSetAttribute = fFuncSetAttribute;
    drv.cuFuncGetAttribute = fFuncGetAttribute;
    drv.cuStreamCreate = fStreamCreate;
    drv.cuStreamDestroy = fStreamDestroy;
    drv.cuMemsetD16Async = fMemsetD16Async;
    drv.cuMemsetD32Async = fMemsetD32Async;
    state.kernels["fake_axpy"] = fakeAxpy;
  }
  ~FakeDriver() { gpu = nullptr; }
  // Everything the replay took, it gave back.
  void checkReleased() const {
    CHECK(state.reserved.empty());
    CHECK(state.memory.empty());
    CHECK(state.handles.empty());
    CHECK(state.contexts == 0);
    CHECK(state.modules == 0);
    CHECK(state.streams == 0);
    CHECK(state.events == 0);
  }
};

}  // namespace gpurr::testing::fake
