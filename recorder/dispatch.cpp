// The dispatcher: every CUPTI callback the recorder subscribes to, by
// domain and handler (callback_table.h), to the recorder of its kind.
// Launches go through the launch path's seam: prepareLaunch at ENTER,
// processLaunch at EXIT (launches.h).
#include <cuda.h>

#include <exception>
#include <string>

#include "kernels/device_hasher.h"
#include "recorder/callback_data.h"
#include "recorder/reentrancy.h"
#include "recorder/session.h"
#include "recorder/write_history.h"

namespace gpurr::recorder {

namespace {

// The stream of a capture call, as the tracker counts it: every begin and end
// call, runtime or driver, takes the stream first.
uint64_t captureStream(const CUpti_CallbackData& cb, bool perThread) {
  return streamIdentity(enqueueStream(u64(params<cuStreamEndCapture_params>(cb).hStream), perThread));
}

// Memory that goes away outside stream order (no wait for the GPU, unlike
// cuMemFree): a hash kernel enqueued before, which may run later, must have
// run first.
bool releasesUnordered(Handler h) {
  return h == Handler::kMemUnmap || h == Handler::kAddressFree || h == Handler::kMemHostUnregister ||
         h == Handler::kIpcCloseMemHandle;
}

// At the ENTER of a call that may write, free or show the host what a
// deferred hash is to read, or order another stream after it: the hashes
// held back are enqueued first (hash_deferral.h). Launches check their own
// ranges (LaunchRecorder); capture begins flush in onCallback.
void flushDeferredHashes(HashRules& hashing, Handler h, bool perThread, const CUpti_CallbackData& cb) {
  switch (h) {
    case Handler::kEventRecord: case Handler::kEventRecordWithFlags:
      // Another stream may wait on the event, then write the ranges.
      hashing.beforeEventRecord(u64(cb.context),
                                enqueueStream(u64(params<cuEventRecord_params>(cb).hStream), perThread));
      return;
    case Handler::kMemcpyHtoD: case Handler::kMemcpyHtoDAsync: case Handler::kMemcpyDtoH:
    case Handler::kMemcpyDtoHAsync: case Handler::kMemcpyDtoD: case Handler::kMemcpyDtoDAsync:
    case Handler::kMemcpy: case Handler::kMemcpyAsync: case Handler::kMemcpyPeer:
    case Handler::kMemcpyPeerAsync: case Handler::kMemcpy2D: case Handler::kMemcpy2DAsync:
    case Handler::kMemcpy3D: case Handler::kMemcpy3DAsync:
    case Handler::kMemsetD8: case Handler::kMemsetD16: case Handler::kMemsetD32:
    case Handler::kMemsetD8Async: case Handler::kMemsetD16Async: case Handler::kMemsetD32Async:
    case Handler::kMemsetD2D8: case Handler::kMemsetD2D16: case Handler::kMemsetD2D32:
    case Handler::kMemsetD2D8Async: case Handler::kMemsetD2D16Async: case Handler::kMemsetD2D32Async:
    case Handler::kCtxSynchronize: case Handler::kStreamSynchronize: case Handler::kEventSynchronize:
    case Handler::kGraphLaunch: case Handler::kStreamCall: case Handler::kUnsupported:
    case Handler::kMemFree: case Handler::kMemFreeAsync: case Handler::kMemFreeHost: case Handler::kMemHostUnregister:
    case Handler::kAddressFree: case Handler::kMemUnmap: case Handler::kIpcCloseMemHandle:
      hashing.flushAll();
      return;
    default:
      return;
  }
}

}  // namespace

void RecordSession::onCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata) {
  if (finished_.load(std::memory_order_relaxed) || cbdata == nullptr) return;
  ThreadFlags& flags = threadFlags();
  if (flags.ended) {
    afterThreadEnded(domain, cbid, *static_cast<const CUpti_CallbackData*>(cbdata), flags.inside);
    return;
  }
  // The recorder's own calls are not recorded. But the driver may load one of
  // the program's modules inside them (lazily, from the recorder's
  // cuKernelGetFunction): that module is the program's, and its load will
  // not be announced again.
  bool& inside = flags.inside;
  if (inside && (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_MODULE_LOADED ||
                 kernels::loadingHashModule()))
    return;
  ReentrancyGuard guard(inside);
  try {
    // The trace thread waits for a deferred hash: flushed at the program's
    // next API call, never inside a resource callback (a module loading in
    // the middle of cuModuleLoadData or of the recorder's own lookup, a
    // stream or graph node being made), where the driver is in the middle
    // of a call of its own.
    if (domain != CUPTI_CB_DOMAIN_RESOURCE) hashing_.flushIfAsked();
    // A capture begins: counted open before the driver begins it, once
    // the other threads' callbacks in flight are done (capture_tracker.h).
    if (domain != CUPTI_CB_DOMAIN_RESOURCE) {
      const auto& cb = *static_cast<const CUpti_CallbackData*>(cbdata);
      if (cb.callbackSite == CUPTI_API_ENTER) {
        const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
        const RuntimeEntry r = runtime ? runtimeHandler(cbid) : RuntimeEntry{};
        const HandlerEntry d = runtime ? HandlerEntry{r.capture, r.perThread} : driverHandler(cbid);
        if (d.handler == Handler::kCaptureBegin) {
          device_->captures().beginning(captureStream(cb, d.perThread));
          hashing_.flushAll();  // nothing is held back while a capture may be open
        }
      }
    }
    CaptureTracker::Section section(device_->captures());
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
      onDriver(cbid, *static_cast<const CUpti_CallbackData*>(cbdata));
    } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
      onRuntime(cbid, *static_cast<const CUpti_CallbackData*>(cbdata));
    } else if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
      onResource(cbid, cbdata);
    }
  } catch (const std::exception& e) {
    // Nothing may propagate into the driver: the program must run on.
    out_.warnOnce(std::string("exception:") + e.what(),
                  std::string("internal recorder error (") + e.what() + "); the event was not recorded");
  }
}

void RecordSession::afterThreadEnded(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                     const CUpti_CallbackData& cb, bool& inside) {
  // A thread whose thread_locals are being destroyed (EndsWithThread): its
  // calls are no longer recorded, but memory it frees is hashed first, so
  // that no hash enqueued later reads it.
  if (inside || domain != CUPTI_CB_DOMAIN_DRIVER_API || cb.callbackSite != CUPTI_API_ENTER) return;
  const Handler h = driverHandler(cbid).handler;
  const bool unordered = releasesUnordered(h);
  if (!unordered && h != Handler::kMemFree && h != Handler::kMemFreeAsync && h != Handler::kMemFreeHost) return;
  ReentrancyGuard guard(inside);
  try {
    hashing_.flushAll();
    if (std::string why; unordered) device_->awaitHashesInFlight(why);
  } catch (const std::exception&) {
  }
}

void RecordSession::onResource(CUpti_CallbackId cbid, const void* cbdata) {
  const auto& res = *static_cast<const CUpti_ResourceData*>(cbdata);
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_MODULE_LOADED:
      if (res.resourceDescriptor != nullptr)
        modules_.moduleLoaded(*static_cast<const CUpti_ModuleResourceData*>(res.resourceDescriptor));
      break;
    case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING:
      modules_.moduleUnloading();
      break;
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
      hashing_.flushAll();
      device_->contextDestroying(u64(res.context));
      memory_.contextDestroying(u64(res.context));
      break;
    default:
      break;
  }
}

void RecordSession::onDriver(CUpti_CallbackId cbid, const CUpti_CallbackData& cb) {
  const HandlerEntry e = driverHandler(cbid);
  if (e.handler == Handler::kNone) return;
  const bool enter = cb.callbackSite == CUPTI_API_ENTER;
  const bool launch = e.handler == Handler::kLaunchKernel || e.handler == Handler::kLaunchKernelEx ||
                      e.handler == Handler::kLaunchCooperative || e.handler == Handler::kGraphLaunch;
  // EXIT takes a pending launch from correlationData, which CUPTI does not
  // promise to zero: clear it before anything here can return or throw.
  if (launch && enter && cb.correlationData != nullptr) *cb.correlationData = 0;
  out_.ensureStarted();
  if (!out_.recording()) return;  // recording is off (warned when the trace could not be opened)
  if (enter) {
    flushDeferredHashes(hashing_, e.handler, e.perThread, cb);
    if (std::string why; releasesUnordered(e.handler) && !device_->awaitHashesInFlight(why))
      out_.warnOnce("unmapped", "memory was released while a hash kernel enqueued before it had not run (" + why +
                                    "); a digest may be of released memory");
  }
  switch (e.handler) {
    case Handler::kLaunchKernel:
    case Handler::kLaunchKernelEx:
    case Handler::kLaunchCooperative:
      if (enter) launches_.prepareLaunch(e, cb); else launches_.processLaunch(cb);
      return;
    case Handler::kGraphLaunch:
      if (enter) graphs_.prepareLaunch(e.perThread, cb); else launches_.processLaunch(cb);
      return;
    case Handler::kGraphInstantiate: case Handler::kGraphExecUpdate: case Handler::kGraphExecChanged:
    case Handler::kGraphExecDestroy:
      graphs_.execCall(e.handler, cb);
      return;
    case Handler::kModuleLoad:
      if (enter) modules_.loadCallEnter(); else modules_.loadCallExit(cb);
      return;
    case Handler::kUnsupported:
      if (enter) {
        out_.warnOnce(cb.functionName ? cb.functionName : "?",
                      std::string(cb.functionName ? cb.functionName : "a driver call") +
                          " is not recorded yet; what it writes is not in the trace");
        writeHistory().clear();  // whatever it writes: every range is a first use again
      }
      return;
    default:
      break;
  }
  if (e.handler == Handler::kCaptureBegin || e.handler == Handler::kCaptureEnd) {
    if (!enter) captureSettled(e.handler, e.perThread, cb, succeeded(cb));
    return;
  }
  if (enter || !succeeded(cb) || e.handler == Handler::kStreamCall) return;
  switch (e.handler) {
    case Handler::kMemcpyHtoD: case Handler::kMemcpyHtoDAsync: case Handler::kMemcpyDtoH:
    case Handler::kMemcpyDtoHAsync: case Handler::kMemcpyDtoD: case Handler::kMemcpyDtoDAsync:
    case Handler::kMemcpy: case Handler::kMemcpyAsync: case Handler::kMemcpyPeer:
    case Handler::kMemcpyPeerAsync: case Handler::kMemcpy2D: case Handler::kMemcpy2DAsync:
    case Handler::kMemcpy3D: case Handler::kMemcpy3DAsync:
      copies_.copyExit(e.handler, e.perThread, cb);
      return;
    case Handler::kMemsetD8: case Handler::kMemsetD16: case Handler::kMemsetD32:
    case Handler::kMemsetD8Async: case Handler::kMemsetD16Async: case Handler::kMemsetD32Async:
    case Handler::kMemsetD2D8: case Handler::kMemsetD2D16: case Handler::kMemsetD2D32:
    case Handler::kMemsetD2D8Async: case Handler::kMemsetD2D16Async: case Handler::kMemsetD2D32Async:
      copies_.setExit(e.handler, e.perThread, cb);
      return;
    case Handler::kCtxSynchronize: case Handler::kStreamSynchronize: case Handler::kEventRecord:
    case Handler::kEventRecordWithFlags: case Handler::kEventSynchronize: case Handler::kStreamWaitEvent:
      copies_.syncExit(e.handler, e.perThread, cb);
      return;
    default:
      memory_.onExit(e.handler, cb);
      return;
  }
}

void RecordSession::onRuntime(CUpti_CallbackId cbid, const CUpti_CallbackData& cb) {
  const RuntimeEntry e = runtimeHandler(cbid);
  if (e.capture != Handler::kNone) {
    if (cb.callbackSite == CUPTI_API_EXIT) {
      const bool ok = cb.functionReturnValue != nullptr &&
                      *static_cast<const cudaError_t*>(cb.functionReturnValue) == cudaSuccess;
      captureSettled(e.capture, e.perThread, cb, ok);
    }
    return;
  }
  if (e.launch == RuntimeLaunch::kNone) return;
  if (cb.callbackSite == CUPTI_API_EXIT) {
    launches_.processLaunch(e, cb);
  } else {
    launches_.prepareLaunch(e, cb);
  }
}

void RecordSession::captureSettled(Handler h, bool perThread, const CUpti_CallbackData& cb, bool ok) {
  // A begin that succeeded leaves its stream capturing. Otherwise (a begin
  // that failed, an end, whatever it returned: invalidated, unjoined work,
  // success) the driver says whether the stream still captures; when it
  // cannot say, the capture may be open.
  const uint64_t stream = enqueueStream(u64(params<cuStreamEndCapture_params>(cb).hStream), perThread);
  bool capturing = true;
  if (h == Handler::kCaptureEnd || !ok) {
    const Device::StreamCapture state = device_->captureState(stream);
    capturing = state.capture.has_value() || !state.canEnqueue;
  }
  device_->captures().settled(captureStream(cb, perThread), capturing);
}

}  // namespace gpurr::recorder
