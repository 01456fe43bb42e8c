// The CUDA driver entry points gpurr calls, resolved at run time from
// libcuda.so.1 (dlopen) instead of linked: the recorder runs inside programs
// that load the driver themselves, and CPU test binaries that contain this
// code must start on machines without a driver.
#pragma once

#include <cuda.h>

#include <string>

namespace gpurr::kernels {

// X(name): every function, by its cuda.h name (macros such as cuMemAlloc ->
// cuMemAlloc_v2 are expanded before the symbol is looked up).
#define GPURR_DRIVER_FUNCTIONS(X) \
  X(cuGetErrorString)             \
  X(cuInit)                       \
  X(cuDevicePrimaryCtxRetain)     \
  X(cuDevicePrimaryCtxRelease)    \
  X(cuDriverGetVersion)           \
  X(cuCtxGetCurrent)              \
  X(cuCtxSetCurrent)              \
  X(cuCtxGetDevice)               \
  X(cuCtxSynchronize)             \
  X(cuCtxPushCurrent)             \
  X(cuCtxPopCurrent)              \
  X(cuDeviceGetCount)             \
  X(cuDeviceGet)                  \
  X(cuDeviceGetName)              \
  X(cuDeviceGetUuid)              \
  X(cuDeviceTotalMem)             \
  X(cuDeviceGetAttribute)         \
  X(cuDeviceGetPCIBusId)          \
  X(cuModuleLoadData)             \
  X(cuModuleUnload)               \
  X(cuModuleGetFunction)          \
  X(cuLaunchKernel)               \
  X(cuMemAlloc)                   \
  X(cuMemFree)                    \
  X(cuMemGetAddressRange)         \
  X(cuMemAllocHost)               \
  X(cuMemHostAlloc)               \
  X(cuMemHostGetDevicePointer)    \
  X(cuMemFreeHost)                \
  X(cuMemcpyHtoD)                 \
  X(cuMemcpyDtoH)                 \
  X(cuMemcpyDtoD)                 \
  X(cuMemcpyHtoDAsync)            \
  X(cuMemcpyDtoHAsync)            \
  X(cuMemsetD8)                   \
  X(cuMemsetD8Async)              \
  X(cuStreamCreate)               \
  X(cuStreamDestroy)              \
  X(cuStreamSynchronize)          \
  X(cuStreamQuery)                \
  X(cuStreamIsCapturing)          \
  X(cuStreamGetCaptureInfo)       \
  X(cuStreamGetCtx)               \
  X(cuStreamGetFlags)             \
  X(cuThreadExchangeStreamCaptureMode) \
  X(cuEventCreate)                \
  X(cuEventDestroy)               \
  X(cuEventRecord)                \
  X(cuEventSynchronize)           \
  X(cuEventQuery)                 \
  X(cuEventElapsedTime)           \
  X(cuFuncGetName)                \
  X(cuFuncGetModule)              \
  X(cuFuncGetParamInfo)           \
  X(cuKernelGetName)              \
  X(cuKernelGetFunction)          \
  X(cuKernelGetParamInfo)         \
  X(cuFuncLoad)                   \
  X(cuGraphGetNodes)              \
  X(cuGraphNodeGetType)           \
  X(cuGraphKernelNodeGetParams)   \
  X(cuGraphMemcpyNodeGetParams)   \
  X(cuGraphMemsetNodeGetParams)   \
  X(cuGraphChildGraphNodeGetGraph)

// The CUDA driver library (libcuda.so.1), the process's own copy when it is
// already loaded; null with `error` set when there is none.
void* openCudaDriver(std::string& error);

struct DriverApi;

// Device 0 with its primary context made current, for GPU tests and
// benchmarks. `absent` is set when there is no driver or no device (the
// caller's cue to skip); otherwise a failure is an error.
struct FirstDevice {
  CUdevice device = 0;
  CUcontext context = nullptr;
  bool ok = false;
  bool absent = false;
  std::string error;
};
FirstDevice openFirstDevice(DriverApi& api);

// A table of driver function pointers. Every pointer is null until load()
// succeeds; a few newer ones may stay null on older drivers (checked at use).
struct DriverApi {
#define GPURR_DECLARE_DRIVER_FN(name) decltype(&::name) name = nullptr;
  GPURR_DRIVER_FUNCTIONS(GPURR_DECLARE_DRIVER_FN)
#undef GPURR_DECLARE_DRIVER_FN

  // Opens libcuda.so.1 (without initialising it) and resolves the table.
  // Returns false with a reason in `error` when the driver is absent or
  // lacks a function gpurr cannot do without.
  bool load(std::string& error);

  // "CUDA_ERROR_X (text)" for a result code.
  std::string errorText(CUresult result) const;
};

}  // namespace gpurr::kernels
