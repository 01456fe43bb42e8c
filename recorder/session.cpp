// The recording logic: one handler per kind of driver call (see session.h).
#include "recorder/session.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <iterator>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "kernels/device_hasher.h"
#include "recorder/callback_data.h"
#include "recorder/framework_context.h"
#include "recorder/library_call.h"
#include "recorder/reentrancy.h"
#include "recorder/rng_params.h"
#include "trace_format/hash.h"

namespace gpurr::recorder {

namespace {

using trace::AllocationKind;

}  // namespace

RecordSession::RecordSession(RecorderOptions options, std::unique_ptr<Device> device, OpenSink openSink,
                             WarnFn warn)
    : options_(std::move(options)), device_(std::move(device)),
      out_(options_, *device_, std::move(openSink), std::move(warn)) {}

RecordSession::~RecordSession() { finish(); }

void RecordSession::finish() {
  if (finished_.exchange(true)) return;
  out_.close();
}

void RecordSession::onCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata) {
  if (finished_.load(std::memory_order_relaxed) || cbdata == nullptr) return;
  // The recorder's own calls are not recorded. But the driver may load one of
  // the program's modules inside them (lazily, from the recorder's
  // cuKernelGetFunction): that module is the program's, and its load will
  // not be announced again.
  if (inRecorder() && (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_MODULE_LOADED ||
                       kernels::loadingHashModule()))
    return;
  ReentrancyGuard guard;
  try {
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
  switch (e.handler) {
    case Handler::kLaunchKernel:
    case Handler::kLaunchKernelEx:
    case Handler::kLaunchCooperative:
      if (enter) launches_.prepareLaunch(e, cb); else launches_.processLaunch(cb);
      return;
    case Handler::kGraphLaunch:
      if (enter) graphLaunch(e.perThread, cb); else launches_.processLaunch(cb);
      return;
    case Handler::kGraphInstantiate: case Handler::kGraphExecUpdate: case Handler::kGraphExecChanged:
    case Handler::kGraphExecDestroy:
      graphExecCall(e.handler, cb);
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
  if (!enter && e.handler == Handler::kCaptureEnd) {
    // The capture is over when its stream captures no more, whatever the call
    // returned (invalidated, unjoined work, success): the driver says.
    const uint64_t stream = enqueueStream(u64(params<cuStreamEndCapture_params>(cb).hStream), e.perThread);
    if (!device_->captureState(stream).capture) hashing_.captureEnded();
    return;
  }
  if (enter || !succeeded(cb)) return;
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
    case Handler::kCaptureBegin:
      hashing_.captureBegan();
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
  if (e.launch == RuntimeLaunch::kNone) return;
  if (cb.callbackSite == CUPTI_API_EXIT) {
    launches_.processLaunch(e, cb);
  } else {
    launches_.prepareLaunch(e, cb);
  }
}

namespace {
// Words as the bytes scanPointers reads.
std::span<const uint8_t> asBytes(const std::vector<uint64_t>& words) {
  return {reinterpret_cast<const uint8_t*>(words.data()), words.size() * sizeof(uint64_t)};
}

}  // namespace

namespace {
// The parameters every instantiation shares, and every update
// (callback_table.cpp); every change names the executable graph first.
struct InstantiateParams {
  CUgraphExec* phGraphExec;
  CUgraph hGraph;
};
struct UpdateParams {
  CUgraphExec hGraphExec;
  CUgraph hGraph;
};
#define GPURR_SAME_PREFIX(T, Prefix, a, b) \
  static_assert(offsetof(T, a) == offsetof(Prefix, a) && offsetof(T, b) == offsetof(Prefix, b));
GPURR_SAME_PREFIX(cuGraphInstantiate_params, InstantiateParams, phGraphExec, hGraph)
GPURR_SAME_PREFIX(cuGraphInstantiate_v2_params, InstantiateParams, phGraphExec, hGraph)
GPURR_SAME_PREFIX(cuGraphInstantiateWithFlags_params, InstantiateParams, phGraphExec, hGraph)
GPURR_SAME_PREFIX(cuGraphInstantiateWithParams_params, InstantiateParams, phGraphExec, hGraph)
GPURR_SAME_PREFIX(cuGraphInstantiateWithParams_ptsz_params, InstantiateParams, phGraphExec, hGraph)
GPURR_SAME_PREFIX(cuGraphExecUpdate_params, UpdateParams, hGraphExec, hGraph)
GPURR_SAME_PREFIX(cuGraphExecUpdate_v2_params, UpdateParams, hGraphExec, hGraph)
#undef GPURR_SAME_PREFIX
static_assert(offsetof(cuGraphExecKernelNodeSetParams_params, hGraphExec) == 0 &&
              offsetof(cuGraphExecKernelNodeSetParams_v2_params, hGraphExec) == 0 &&
              offsetof(cuGraphExecMemcpyNodeSetParams_params, hGraphExec) == 0 &&
              offsetof(cuGraphExecMemsetNodeSetParams_params, hGraphExec) == 0 &&
              offsetof(cuGraphExecChildGraphNodeSetParams_params, hGraphExec) == 0 &&
              offsetof(cuGraphExecBatchMemOpNodeSetParams_params, hGraphExec) == 0 &&
              offsetof(cuGraphExecNodeSetParams_params, hGraphExec) == 0 &&
              offsetof(cuGraphExecDestroy_params, hGraphExec) == 0);
}  // namespace

void RecordSession::graphExecCall(Handler h, const CUpti_CallbackData& cb) {
  const bool enter = cb.callbackSite == CUPTI_API_ENTER;
  if (h == Handler::kGraphInstantiate) {
    const auto& p = params<InstantiateParams>(cb);
    if (!enter && succeeded(cb) && p.phGraphExec != nullptr)
      learnGraph(u64(*p.phGraphExec), u64(p.hGraph), u64(cb.context));
    return;
  }
  // Whatever the call does to the graph, what was known of it may be
  // wrong from now on (and its handle may be given to another graph).
  const uint64_t exec = u64(params<cuGraphExecDestroy_params>(cb).hGraphExec);
  if (enter) {
    std::lock_guard lock(mu_);
    graphExecs_.erase(exec);
  } else if (h == Handler::kGraphExecUpdate && succeeded(cb)) {
    learnGraph(exec, u64(params<UpdateParams>(cb).hGraph), u64(cb.context));
  }
}

void RecordSession::learnGraph(uint64_t exec, uint64_t graph, uint64_t context) {
  Device::GraphNodes nodes;
  std::string error;
  bool known = device_->graphNodes(graph, nodes, error);
  std::vector<uint64_t> words = std::move(nodes.addresses);
  for (const Device::GraphNodes::Kernel& k : nodes.kernels) {
    if (!known) break;
    uint32_t module = 0;
    bool ambiguous = false;
    const std::shared_ptr<const CachedFunction> fn = modules_.functionInfo(k.function, nullptr, module, ambiguous);
    std::vector<uint8_t> params;
    if (auto fromExtra = paramsFromExtra(k.extra)) {
      params = std::move(*fromExtra);
    } else if (fn->info.layoutKnown) {
      params = packParams(k.kernelParams, fn->info.layout);
    } else {
      known = false;
      error = "the parameter layout of " + (fn->info.name.empty() ? std::string("a kernel") : fn->info.name) +
              " is unknown";
    }
    for (size_t at = 0; at + 8 <= params.size(); at += 8) {
      uint64_t word;
      std::memcpy(&word, params.data() + at, 8);
      words.push_back(word);
    }
  }
  if (!known) {
    out_.warnOnce("graph nodes", "a CUDA graph's nodes cannot all be followed (" + error +
                                     "): its launches hash every allocation");
    std::lock_guard lock(mu_);
    graphExecs_.erase(exec);
    return;
  }
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  const uint32_t device = memory_.deviceOf(context);
  GraphExec g;
  g.nodes = nodes.count;
  std::lock_guard lock(mu_);
  for (const ScannedPointer& p : scanPointers(asBytes(words), memory_.allocations(), device)) g.addresses.push_back(p.address);
  graphExecs_[exec] = std::move(g);
}

void RecordSession::graphLaunch(bool perThread, const CUpti_CallbackData& cb) {
  const auto& p = params<cuGraphLaunch_params>(cb);
  trace::GraphLaunch g;
  g.graphExec = u64(p.hGraph);
  g.stream = u64(p.hStream);
  auto pending = std::make_unique<PendingLaunch>();
  pending->context = u64(cb.context);
  pending->stream = enqueueStream(g.stream, perThread);
  const bool canEnqueue = markCaptured(*device_, g, pending->stream).canEnqueue;
  if (g.captured) {
    pending->entry.event = out_.newEvent(std::move(g));
    if (cb.correlationData != nullptr) *cb.correlationData = u64(pending.release());
    return;
  }
  // Its pre and post state: the ranges its nodes' addresses reach, as a
  // launch's pointers do, where its nodes are known; otherwise every device
  // allocation its device can read.
  const uint32_t device = memory_.deviceOf(pending->context);
  std::vector<trace::DeviceRange> ranges;
  std::vector<uint32_t> blind;
  bool known = false;
  {
    std::lock_guard lock(mu_);
    if (auto it = graphExecs_.find(g.graphExec); it != graphExecs_.end()) {
      known = true;
      g.nodeCount = it->second.nodes;
      const std::vector<ScannedPointer> scanned = scanPointers(asBytes(it->second.addresses), memory_.allocations(), device);
      ranges = referencedRanges(scanned);
      blind = blindAllocations(scanned);
    } else {
      memory_.allocations().forEach([&](const trace::Allocation& a) {
        if (a.kind == AllocationKind::kHostMapped || a.kind == AllocationKind::kManaged) return;
        if (historyBlind(a.kind)) blind.push_back(a.ordinal);
        for (const auto& [at, size] : memory_.allocations().readableParts(a, device))
          ranges.push_back({at, size, a.ordinal, at - a.address});
      });
    }
  }
  if (!ranges.empty() && canEnqueue) {
    pending->entry.before =
        hashing_.hashRanges(pending->context, pending->stream, hashing_.inputsToHash(ranges, {}, pending->stream, blind));
    pending->entry.after.ranges = std::move(ranges);
    pending->hashOutputs = true;
  } else if (known) {
    hashing_.forgotten(ranges);  // written without a digest
  } else {
    writeHistory().clear();  // it may write anything, unhashed
  }
  pending->entry.event = out_.newEvent(std::move(g));
  if (cb.correlationData != nullptr) *cb.correlationData = u64(pending.release());
}

}  // namespace gpurr::recorder
