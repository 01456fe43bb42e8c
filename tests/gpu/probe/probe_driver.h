// The CUDA driver entry points the probes call, resolved with dlopen/dlsym at
// run time so that the probes build against the headers alone and start on a
// machine without a driver. Names are those cuda.h maps to (cuMemAlloc ->
// cuMemAlloc_v2, ...), resolved by their expanded names.
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <string>

namespace probe {

#define PROBE_DRIVER_FUNCTIONS(X)                                                                   \
  X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute)           \
  X(cuDriverGetVersion) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxGetCurrent)           \
  X(cuCtxSynchronize) X(cuGetErrorName) X(cuModuleLoadData) X(cuModuleUnload)                       \
  X(cuModuleGetFunction) X(cuLibraryLoadData) X(cuLibraryUnload) X(cuLibraryGetKernel)              \
  X(cuKernelGetFunction) X(cuKernelGetLibrary) X(cuKernelGetName) X(cuKernelGetParamInfo)           \
  X(cuFuncGetName) X(cuFuncGetParamInfo) X(cuFuncLoad) X(cuFuncIsLoaded) X(cuFuncGetModule)         \
  X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree) X(cuMemAllocHost) X(cuMemFreeHost)                   \
  X(cuMemHostAlloc) X(cuMemHostRegister) X(cuMemHostUnregister) X(cuMemcpyHtoD) X(cuMemcpyDtoH)     \
  X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemsetD8) X(cuEventCreate) X(cuEventRecord)         \
  X(cuEventSynchronize) X(cuEventDestroy) X(cuStreamCreate) X(cuStreamSynchronize)                  \
  X(cuStreamDestroy) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) X(cuMemMap)          \
  X(cuMemUnmap) X(cuMemRelease) X(cuMemSetAccess) X(cuMemGetAllocationGranularity)

#define PROBE_STRINGIFY_EXPANDED(x) PROBE_STRINGIFY(x)
#define PROBE_STRINGIFY(x) #x

struct Driver {
#define PROBE_DECLARE(name) decltype(&::name) name = nullptr;
  PROBE_DRIVER_FUNCTIONS(PROBE_DECLARE)
#undef PROBE_DECLARE
  void* lib = nullptr;

  // Loads libcuda.so.1 (the process's copy when there is one). False, with
  // `error` set, when there is no driver; missing entry points stay null.
  bool load(std::string& error) {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == nullptr) {
      const char* why = dlerror();
      error = std::string("cannot load libcuda.so.1 (") + (why ? why : "not found") + ")";
      return false;
    }
#define PROBE_RESOLVE(name) name = reinterpret_cast<decltype(name)>(dlsym(lib, PROBE_STRINGIFY_EXPANDED(name)));
    PROBE_DRIVER_FUNCTIONS(PROBE_RESOLVE)
#undef PROBE_RESOLVE
    return true;
  }

  // "CUDA_SUCCESS", "CUDA_ERROR_INVALID_VALUE", ...
  std::string name(CUresult r) const {
    const char* s = nullptr;
    if (cuGetErrorName != nullptr && cuGetErrorName(r, &s) == CUDA_SUCCESS && s != nullptr) return s;
    return "CUresult(" + std::to_string(static_cast<int>(r)) + ")";
  }
};

}  // namespace probe
