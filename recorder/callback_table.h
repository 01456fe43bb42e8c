// The fixed (domain, cbid) -> handler table: which driver API callbacks the
// recorder subscribes to and what each one means. Variants that share a
// parameter struct (_v2, _ptds, _ptsz) map to one handler; `perThread` says
// that stream 0 means the per-thread default stream.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <span>

namespace gpurr::recorder {

enum class Handler : uint8_t {
  kNone = 0,
  // launches
  kLaunchKernel, kLaunchKernelEx, kLaunchCooperative, kGraphLaunch,
  // allocations
  kMemAlloc, kMemAllocPitch, kMemAllocAsync, kMemAllocFromPoolAsync, kMemAllocManaged, kMemFree, kMemFreeAsync,
  kMemHostAlloc, kMemAllocHost, kMemHostRegister, kMemHostUnregister, kMemFreeHost, kAddressReserve,
  kAddressFree, kMemMap, kMemUnmap, kMemSetAccess, kIpcOpenMemHandle, kIpcCloseMemHandle, kMemPoolImportPointer,
  kModuleGetGlobal, kLibraryGetGlobal, kModuleLoad,
  // copies and sets
  kMemcpyHtoD, kMemcpyHtoDAsync, kMemcpyDtoH, kMemcpyDtoHAsync, kMemcpyDtoD, kMemcpyDtoDAsync, kMemcpy,
  kMemcpyAsync, kMemcpyPeer, kMemcpyPeerAsync, kMemcpy2D, kMemcpy2DAsync, kMemcpy3D, kMemcpy3DAsync,
  kMemsetD8, kMemsetD16, kMemsetD32, kMemsetD8Async, kMemsetD16Async, kMemsetD32Async,
  kMemsetD2D8, kMemsetD2D16, kMemsetD2D32, kMemsetD2D8Async, kMemsetD2D16Async, kMemsetD2D32Async,
  // synchronisation
  kCtxSynchronize, kStreamSynchronize, kEventRecord, kEventRecordWithFlags, kEventSynchronize, kStreamWaitEvent,
  // other calls on a stream the recorder does not record (a query, a host
  // function, a memory operation, its destruction): deferred hashes are
  // enqueued before them (hash_deferral.h)
  kStreamCall,
  // graph capture begins and ends (the determinism check must not sync then)
  kCaptureBegin, kCaptureEnd,
  // executable graphs made, changed and destroyed (what a graph launch touches)
  kGraphInstantiate, kGraphExecUpdate, kGraphExecChanged, kGraphExecDestroy,
  // calls the recorder cannot follow yet: warned about once
  kUnsupported,
};

struct HandlerEntry {
  Handler handler = Handler::kNone;
  bool perThread = false;  // a _ptsz / _ptds variant
};

// The runtime API's launch calls. The runtime launches through the driver,
// but no header promises that the driver's launch callbacks fire for its
// internal launches (profilers subscribe to both domains), so these are
// subscribed too; a driver launch callback nested in one of them on the same
// thread is the same launch and is recorded once (launches.cpp).
enum class RuntimeLaunch : uint8_t {
  kNone = 0,
  kLaunchKernel,       // cudaLaunchKernel(const void* func, dim3, dim3, void**, size_t, cudaStream_t)
  kLaunchKernelExC,    // cudaLaunchKernelExC(const cudaLaunchConfig_t*, const void* func, void**)
  kLaunchCooperative,  // cudaLaunchCooperativeKernel(same as cudaLaunchKernel)
  kLaunchKernelHandle, // __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t): nvcc's <<<>>>
};

struct RuntimeEntry {
  RuntimeLaunch launch = RuntimeLaunch::kNone;
  bool perThread = false;  // a _ptsz variant
  // kCaptureBegin or kCaptureEnd for the runtime's capture calls
  // (cudaStreamBeginCapture, cudaStreamBeginCaptureToGraph,
  // cudaStreamEndCapture), whose first parameter is the stream; else kNone.
  Handler capture = Handler::kNone;
};

// The handler of a runtime API callback id (launch and capture kNone for ids
// not subscribed).
RuntimeEntry runtimeHandler(CUpti_CallbackId cbid);

// Every runtime callback id with a handler, to enable one by one.
std::span<const CUpti_CallbackId> subscribedRuntimeCallbacks();

// The handler of a driver API callback id (kNone for ids not subscribed).
HandlerEntry driverHandler(CUpti_CallbackId cbid);

// Every driver callback id with a handler, to enable one by one.
std::span<const CUpti_CallbackId> subscribedDriverCallbacks();

}  // namespace gpurr::recorder
