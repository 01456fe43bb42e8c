// The driver callback table (see callback_table.h).
#include "recorder/callback_table.h"

#include <array>
#include <vector>

namespace gpurr::recorder {

namespace {

struct Row {
  CUpti_CallbackId cbid;
  Handler handler;
  bool perThread;
};

#define ROW(name, h) {CUPTI_DRIVER_TRACE_CBID_##name, Handler::h, false}
#define ROW_PT(name, h) {CUPTI_DRIVER_TRACE_CBID_##name, Handler::h, true}

constexpr Row kRows[] = {
    ROW(cuLaunchKernel, kLaunchKernel),
    ROW_PT(cuLaunchKernel_ptsz, kLaunchKernel),
    ROW(cuLaunchKernelEx, kLaunchKernelEx),
    ROW_PT(cuLaunchKernelEx_ptsz, kLaunchKernelEx),
    ROW(cuLaunchCooperativeKernel, kLaunchCooperative),
    ROW_PT(cuLaunchCooperativeKernel_ptsz, kLaunchCooperative),
    ROW(cuGraphLaunch, kGraphLaunch),
    ROW_PT(cuGraphLaunch_ptsz, kGraphLaunch),

    ROW(cuMemAlloc_v2, kMemAlloc),
    ROW(cuMemAllocPitch_v2, kMemAllocPitch),
    ROW(cuMemAllocAsync, kMemAllocAsync),
    ROW_PT(cuMemAllocAsync_ptsz, kMemAllocAsync),
    ROW(cuMemAllocFromPoolAsync, kMemAllocFromPoolAsync),
    ROW_PT(cuMemAllocFromPoolAsync_ptsz, kMemAllocFromPoolAsync),
    ROW(cuMemAllocManaged, kMemAllocManaged),
    ROW(cuMemFree_v2, kMemFree),
    ROW(cuMemFreeAsync, kMemFreeAsync),
    ROW_PT(cuMemFreeAsync_ptsz, kMemFreeAsync),
    ROW(cuMemHostAlloc, kMemHostAlloc),
    ROW(cuMemAllocHost_v2, kMemAllocHost),
    ROW(cuMemHostRegister_v2, kMemHostRegister),
    ROW(cuMemHostUnregister, kMemHostUnregister),
    ROW(cuMemFreeHost, kMemFreeHost),
    ROW(cuMemAddressReserve, kAddressReserve),
    ROW(cuMemAddressFree, kAddressFree),
    ROW(cuMemMap, kMemMap),
    ROW(cuMemUnmap, kMemUnmap),
    ROW(cuMemSetAccess, kMemSetAccess),
    ROW(cuIpcOpenMemHandle, kIpcOpenMemHandle),
    ROW(cuIpcOpenMemHandle_v2, kIpcOpenMemHandle),
    ROW(cuIpcCloseMemHandle, kIpcCloseMemHandle),
    ROW(cuMemPoolImportPointer, kMemPoolImportPointer),
    ROW(cuModuleGetGlobal_v2, kModuleGetGlobal),
    ROW(cuLibraryGetGlobal, kLibraryGetGlobal),
    ROW(cuModuleLoad, kModuleLoad),
    ROW(cuModuleLoadData, kModuleLoad),
    ROW(cuModuleLoadDataEx, kModuleLoad),
    ROW(cuModuleLoadFatBinary, kModuleLoad),

    ROW(cuMemcpyHtoD_v2, kMemcpyHtoD),
    ROW_PT(cuMemcpyHtoD_v2_ptds, kMemcpyHtoD),
    ROW(cuMemcpyHtoDAsync_v2, kMemcpyHtoDAsync),
    ROW_PT(cuMemcpyHtoDAsync_v2_ptsz, kMemcpyHtoDAsync),
    ROW(cuMemcpyDtoH_v2, kMemcpyDtoH),
    ROW_PT(cuMemcpyDtoH_v2_ptds, kMemcpyDtoH),
    ROW(cuMemcpyDtoHAsync_v2, kMemcpyDtoHAsync),
    ROW_PT(cuMemcpyDtoHAsync_v2_ptsz, kMemcpyDtoHAsync),
    ROW(cuMemcpyDtoD_v2, kMemcpyDtoD),
    ROW_PT(cuMemcpyDtoD_v2_ptds, kMemcpyDtoD),
    ROW(cuMemcpyDtoDAsync_v2, kMemcpyDtoDAsync),
    ROW_PT(cuMemcpyDtoDAsync_v2_ptsz, kMemcpyDtoDAsync),
    ROW(cuMemcpy, kMemcpy),
    ROW_PT(cuMemcpy_ptds, kMemcpy),
    ROW(cuMemcpyAsync, kMemcpyAsync),
    ROW_PT(cuMemcpyAsync_ptsz, kMemcpyAsync),
    ROW(cuMemcpyPeer, kMemcpyPeer),
    ROW_PT(cuMemcpyPeer_ptds, kMemcpyPeer),
    ROW(cuMemcpyPeerAsync, kMemcpyPeerAsync),
    ROW_PT(cuMemcpyPeerAsync_ptsz, kMemcpyPeerAsync),
    ROW(cuMemcpy2D_v2, kMemcpy2D),
    ROW_PT(cuMemcpy2D_v2_ptds, kMemcpy2D),
    ROW(cuMemcpy2DUnaligned_v2, kMemcpy2D),
    ROW_PT(cuMemcpy2DUnaligned_v2_ptds, kMemcpy2D),
    ROW(cuMemcpy2DAsync_v2, kMemcpy2DAsync),
    ROW_PT(cuMemcpy2DAsync_v2_ptsz, kMemcpy2DAsync),
    ROW(cuMemcpy3D_v2, kMemcpy3D),
    ROW_PT(cuMemcpy3D_v2_ptds, kMemcpy3D),
    ROW(cuMemcpy3DAsync_v2, kMemcpy3DAsync),
    ROW_PT(cuMemcpy3DAsync_v2_ptsz, kMemcpy3DAsync),
    ROW(cuMemcpyBatchAsync, kUnsupported),
    ROW_PT(cuMemcpyBatchAsync_ptsz, kUnsupported),
    ROW(cuMemcpyBatchAsync_v2, kUnsupported),
    ROW_PT(cuMemcpyBatchAsync_v2_ptsz, kUnsupported),
    ROW(cuMemcpy3DBatchAsync, kUnsupported),
    ROW_PT(cuMemcpy3DBatchAsync_ptsz, kUnsupported),
    ROW(cuMemcpy3DBatchAsync_v2, kUnsupported),
    ROW_PT(cuMemcpy3DBatchAsync_v2_ptsz, kUnsupported),
    ROW(cuLaunchCooperativeKernelMultiDevice, kUnsupported),

    ROW(cuMemsetD8_v2, kMemsetD8),
    ROW_PT(cuMemsetD8_v2_ptds, kMemsetD8),
    ROW(cuMemsetD16_v2, kMemsetD16),
    ROW_PT(cuMemsetD16_v2_ptds, kMemsetD16),
    ROW(cuMemsetD32_v2, kMemsetD32),
    ROW_PT(cuMemsetD32_v2_ptds, kMemsetD32),
    ROW(cuMemsetD8Async, kMemsetD8Async),
    ROW_PT(cuMemsetD8Async_ptsz, kMemsetD8Async),
    ROW(cuMemsetD16Async, kMemsetD16Async),
    ROW_PT(cuMemsetD16Async_ptsz, kMemsetD16Async),
    ROW(cuMemsetD32Async, kMemsetD32Async),
    ROW_PT(cuMemsetD32Async_ptsz, kMemsetD32Async),
    ROW(cuMemsetD2D8_v2, kMemsetD2D8),
    ROW_PT(cuMemsetD2D8_v2_ptds, kMemsetD2D8),
    ROW(cuMemsetD2D16_v2, kMemsetD2D16),
    ROW_PT(cuMemsetD2D16_v2_ptds, kMemsetD2D16),
    ROW(cuMemsetD2D32_v2, kMemsetD2D32),
    ROW_PT(cuMemsetD2D32_v2_ptds, kMemsetD2D32),
    ROW(cuMemsetD2D8Async, kMemsetD2D8Async),
    ROW_PT(cuMemsetD2D8Async_ptsz, kMemsetD2D8Async),
    ROW(cuMemsetD2D16Async, kMemsetD2D16Async),
    ROW_PT(cuMemsetD2D16Async_ptsz, kMemsetD2D16Async),
    ROW(cuMemsetD2D32Async, kMemsetD2D32Async),
    ROW_PT(cuMemsetD2D32Async_ptsz, kMemsetD2D32Async),

    ROW(cuCtxSynchronize, kCtxSynchronize),
    ROW(cuCtxSynchronize_v2, kCtxSynchronize),
    ROW(cuStreamSynchronize, kStreamSynchronize),
    ROW_PT(cuStreamSynchronize_ptsz, kStreamSynchronize),
    ROW(cuEventRecord, kEventRecord),
    ROW_PT(cuEventRecord_ptsz, kEventRecord),
    ROW(cuEventRecordWithFlags, kEventRecordWithFlags),
    ROW_PT(cuEventRecordWithFlags_ptsz, kEventRecordWithFlags),
    ROW(cuEventSynchronize, kEventSynchronize),
    ROW(cuStreamWaitEvent, kStreamWaitEvent),
    ROW_PT(cuStreamWaitEvent_ptsz, kStreamWaitEvent),
    ROW(cuStreamQuery, kStreamCall),
    ROW_PT(cuStreamQuery_ptsz, kStreamCall),
    ROW(cuStreamDestroy_v2, kStreamCall),
    ROW(cuLaunchHostFunc, kStreamCall),
    ROW_PT(cuLaunchHostFunc_ptsz, kStreamCall),
    ROW(cuStreamAddCallback, kStreamCall),
    ROW_PT(cuStreamAddCallback_ptsz, kStreamCall),
    ROW(cuStreamWriteValue32, kStreamCall),
    ROW_PT(cuStreamWriteValue32_ptsz, kStreamCall),
    ROW(cuStreamWriteValue64, kStreamCall),
    ROW_PT(cuStreamWriteValue64_ptsz, kStreamCall),
    ROW(cuStreamBatchMemOp, kStreamCall),
    ROW_PT(cuStreamBatchMemOp_ptsz, kStreamCall),
    ROW(cuStreamWriteValue32_v2, kStreamCall),
    ROW_PT(cuStreamWriteValue32_v2_ptsz, kStreamCall),
    ROW(cuStreamWriteValue64_v2, kStreamCall),
    ROW_PT(cuStreamWriteValue64_v2_ptsz, kStreamCall),
    ROW(cuStreamBatchMemOp_v2, kStreamCall),
    ROW_PT(cuStreamBatchMemOp_v2_ptsz, kStreamCall),

    ROW(cuStreamBeginCapture, kCaptureBegin),
    ROW_PT(cuStreamBeginCapture_ptsz, kCaptureBegin),
    ROW(cuStreamBeginCapture_v2, kCaptureBegin),
    ROW_PT(cuStreamBeginCapture_v2_ptsz, kCaptureBegin),
    ROW(cuStreamBeginCaptureToGraph, kCaptureBegin),
    ROW_PT(cuStreamBeginCaptureToGraph_ptsz, kCaptureBegin),
    ROW(cuStreamEndCapture, kCaptureEnd),
    ROW_PT(cuStreamEndCapture_ptsz, kCaptureEnd),

    // Every instantiation's parameters start with (CUgraphExec*, CUgraph),
    // every update's with (CUgraphExec, CUgraph), every change's with the
    // CUgraphExec (graphs.cpp checks).
    ROW(cuGraphInstantiate, kGraphInstantiate),
    ROW(cuGraphInstantiate_v2, kGraphInstantiate),
    ROW(cuGraphInstantiateWithFlags, kGraphInstantiate),
    ROW(cuGraphInstantiateWithParams, kGraphInstantiate),
    ROW_PT(cuGraphInstantiateWithParams_ptsz, kGraphInstantiate),
    ROW(cuGraphExecUpdate, kGraphExecUpdate),
    ROW(cuGraphExecUpdate_v2, kGraphExecUpdate),
    ROW(cuGraphExecKernelNodeSetParams, kGraphExecChanged),
    ROW(cuGraphExecKernelNodeSetParams_v2, kGraphExecChanged),
    ROW(cuGraphExecMemcpyNodeSetParams, kGraphExecChanged),
    ROW(cuGraphExecMemsetNodeSetParams, kGraphExecChanged),
    ROW(cuGraphExecChildGraphNodeSetParams, kGraphExecChanged),
    ROW(cuGraphExecBatchMemOpNodeSetParams, kGraphExecChanged),
    ROW(cuGraphExecNodeSetParams, kGraphExecChanged),
    ROW(cuGraphExecDestroy, kGraphExecDestroy),
};

struct Table {
  std::array<HandlerEntry, CUPTI_DRIVER_TRACE_CBID_SIZE> byId{};
  std::vector<CUpti_CallbackId> ids;
  Table() {
    for (const Row& r : kRows) {
      byId[r.cbid] = {r.handler, r.perThread};
      ids.push_back(r.cbid);
    }
  }
};

const Table& table() {
  static const Table t;  // immutable after construction
  return t;
}

}  // namespace

namespace {

struct RuntimeRow {
  CUpti_CallbackId cbid;
  RuntimeLaunch launch;
  bool perThread;
  Handler capture = Handler::kNone;
};

#define RT_CAPTURE(name, h, perThread) \
  {CUPTI_RUNTIME_TRACE_CBID_##name, RuntimeLaunch::kNone, perThread, Handler::h}

constexpr RuntimeRow kRuntimeRows[] = {
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, RuntimeLaunch::kLaunchKernel, false},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, RuntimeLaunch::kLaunchKernel, true},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, RuntimeLaunch::kLaunchKernelExC, false},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060, RuntimeLaunch::kLaunchKernelExC, true},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, RuntimeLaunch::kLaunchCooperative, false},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000, RuntimeLaunch::kLaunchCooperative, true},
    {CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, RuntimeLaunch::kLaunchKernelHandle, false},
    {CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000, RuntimeLaunch::kLaunchKernelHandle, true},
    // Captures begun and ended through the runtime: no header promises that
    // the driver's capture callbacks fire inside them (CaptureTracker).
    RT_CAPTURE(cudaStreamBeginCapture_v10000, kCaptureBegin, false),
    RT_CAPTURE(cudaStreamBeginCapture_ptsz_v10000, kCaptureBegin, true),
    RT_CAPTURE(cudaStreamBeginCaptureToGraph_v12030, kCaptureBegin, false),
    RT_CAPTURE(cudaStreamBeginCaptureToGraph_ptsz_v12030, kCaptureBegin, true),
    RT_CAPTURE(cudaStreamEndCapture_v10000, kCaptureEnd, false),
    RT_CAPTURE(cudaStreamEndCapture_ptsz_v10000, kCaptureEnd, true),
};

#undef RT_CAPTURE

}  // namespace

RuntimeEntry runtimeHandler(CUpti_CallbackId cbid) {
  for (const RuntimeRow& r : kRuntimeRows)
    if (r.cbid == cbid) return {r.launch, r.perThread, r.capture};
  return {};
}

std::span<const CUpti_CallbackId> subscribedRuntimeCallbacks() {
  static const std::vector<CUpti_CallbackId> ids = [] {
    std::vector<CUpti_CallbackId> v;
    for (const RuntimeRow& r : kRuntimeRows) v.push_back(r.cbid);
    return v;
  }();
  return ids;
}

HandlerEntry driverHandler(CUpti_CallbackId cbid) {
  return cbid < CUPTI_DRIVER_TRACE_CBID_SIZE ? table().byId[cbid] : HandlerEntry{};
}

std::span<const CUpti_CallbackId> subscribedDriverCallbacks() { return table().ids; }

}  // namespace gpurr::recorder
