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

// The runtime launch callback this thread is inside, if any: a driver launch
// callback nested in it is the same launch (callback_table.h).
struct RuntimeLaunchFrame {
  bool active = false;
  bool recorded = false;    // the runtime callback resolved the function and records the launch
  bool driverSeen = false;  // a driver launch callback came inside it
};
thread_local RuntimeLaunchFrame tlsRuntimeLaunch;

// __cudaLaunchKernel's parameters (the launch nvcc's <<<>>> emits in CUDA
// 13), in the order crt/device_functions.h declares them;
// generated_cuda_runtime_api_meta.h has no struct for it. cudaKernel_t is a
// CUkernel (both are CUkern_st*).
struct CudaLaunchKernelHandleParams {
  cudaKernel_t kernel;
  dim3 gridDim;
  dim3 blockDim;
  void** args;
  size_t sharedMem;
  cudaStream_t stream;
};

// cudaLaunchKernelExC's attributes are the driver's, field for field.
static_assert(sizeof(cudaLaunchAttribute) == sizeof(CUlaunchAttribute));
static_assert(offsetof(cudaLaunchAttribute, val) == offsetof(CUlaunchAttribute, value));
static_assert(static_cast<int>(cudaLaunchAttributeClusterDimension) ==
              static_cast<int>(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION));

trace::LaunchApi launchApi(Handler h, bool perThread) {
  switch (h) {
    case Handler::kLaunchKernelEx:
      return perThread ? trace::LaunchApi::kLaunchKernelExPtsz : trace::LaunchApi::kLaunchKernelEx;
    case Handler::kLaunchCooperative:
      return perThread ? trace::LaunchApi::kLaunchCooperativePtsz : trace::LaunchApi::kLaunchCooperative;
    default:
      return perThread ? trace::LaunchApi::kLaunchKernelPtsz : trace::LaunchApi::kLaunchKernel;
  }
}

// The note on a hashed launch whose pointer parameters point into memory its
// device cannot read (so no range of theirs is hashed), one entry per
// allocation; empty when there is none.
std::string unreadableOperands(const std::vector<ScannedPointer>& scanned, uint32_t device) {
  std::string out;
  std::set<uint32_t> seen;
  for (const ScannedPointer& p : scanned) {
    if (p.readableBytes > 0 || !seen.insert(p.param.allocation).second) continue;
    std::string why;
    switch (p.kind) {
      case AllocationKind::kHostMapped:
        why = "host memory";
        break;
      case AllocationKind::kVmm:
        why = "VMM mapping without read access for device " + std::to_string(device);
        break;
      default:
        why = "memory of device " + std::to_string(p.allocationDevice);
        break;
    }
    out += (out.empty() ? "" : ", ") + std::string("allocation ") + std::to_string(p.param.allocation) + " (" +
           why + ")";
  }
  if (out.empty()) return out;
  return "not hashed, not readable from device " + std::to_string(device) + ": " + out;
}

// Why re-running a launch inside the program would not be the same launch
// again, or would change what the program computes: empty when it can be.
std::string unrepeatableLaunch(const std::string& kernel, const std::vector<ScannedPointer>& scanned,
                               uint32_t device) {
  if (kernel.find("nccl") != std::string::npos)
    return "a collective's kernel waits for other processes, which do not run it again";
  for (const ScannedPointer& p : scanned) {
    const bool elsewhere = p.kind == AllocationKind::kHostMapped || p.kind == AllocationKind::kManaged ||
                           p.kind == AllocationKind::kOther || p.allocationDevice != device;
    if (elsewhere) {
      const char* what = p.kind == AllocationKind::kHostMapped ? "host memory"
                         : p.kind == AllocationKind::kManaged    ? "managed memory"
                         : p.kind == AllocationKind::kOther      ? "another process's memory"
                                                                 : "another device's memory";
      return "it points into allocation " + std::to_string(p.param.allocation) + " (" + what +
             "), which the context's checkpoint is not known to restore";
    }
  }
  return "";
}

// The parts of the launch callbacks timed with options.timeParts, in the
// order they run: the kernel described (its name, parameters, RNG state and
// library call), its pointers found and their ranges, the hashes and copies
// enqueued before it (and a determinism check), the framework's part (which
// ranges its op only reads, and its origin), and the EXIT callback (the
// outputs' hashes enqueued, the event handed to the trace thread).
enum LaunchPart : size_t { kDescribe, kPointers, kBefore, kFramework, kExit, kLaunchPartCount };
constexpr const char* kLaunchPartNames[] = {"describe", "pointers", "before", "framework", "exit"};
static_assert(std::size(kLaunchPartNames) == kLaunchPartCount);

// Adds the time since the previous lap to a part's sum; does nothing when off.
template <typename Sums>
class PartClock {
 public:
  PartClock(bool on, Sums& sums) : sums_(on ? &sums : nullptr) {
    static_assert(std::tuple_size_v<Sums> == kLaunchPartCount);
    if (on) last_ = std::chrono::steady_clock::now();
  }
  void lap(LaunchPart part) {
    if (sums_ == nullptr) return;
    const auto now = std::chrono::steady_clock::now();
    (*sums_)[part].fetch_add(static_cast<uint64_t>((now - last_).count()), std::memory_order_relaxed);
    last_ = now;
  }

 private:
  Sums* sums_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace

// State carried from a launch's ENTER callback to its EXIT (through
// CUpti_CallbackData::correlationData).
struct RecordSession::PendingLaunch {
  SinkEntry entry;
  uint64_t context = 0;
  uint64_t stream = 0;  // to enqueue on
  bool hashOutputs = false;
  bool snapshot = false;  // copy the outputs' bytes at EXIT too
  // The recorder's cost so far: time in its callbacks, and the thread's
  // count of enqueued operations when the launch's ENTER began.
  std::chrono::nanoseconds spent{0};
  uint64_t opsBefore = 0;
};

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
      if (enter) launchEnter(e.handler, e.perThread, cb); else launchExit(cb);
      return;
    case Handler::kGraphLaunch:
      if (enter) graphLaunch(e.perThread, cb); else launchExit(cb);
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
    const RuntimeLaunchFrame frame = std::exchange(tlsRuntimeLaunch, RuntimeLaunchFrame{});
    const bool ok = cb.functionReturnValue != nullptr &&
                    *static_cast<const cudaError_t*>(cb.functionReturnValue) == cudaSuccess;
    if (cb.correlationData != nullptr && *cb.correlationData != 0) {
      std::unique_ptr<PendingLaunch> pending(reinterpret_cast<PendingLaunch*>(*cb.correlationData));
      *cb.correlationData = 0;
      if (ok) finishLaunch(std::move(pending));
    } else if (ok && !frame.driverSeen && out_.recording()) {
      // Neither domain could describe the function (a program linked with
      // the static runtime, say): the launch is still counted, bare.
      LaunchCall call = runtimeLaunchCall(e, cb);
      call.launch.api = launchApi(call.handler, e.perThread);
      call.launch.context = u64(cb.context);
      call.launch.function = cb.symbolName != nullptr ? cb.symbolName : "";
      call.launch.hashed = false;
      call.launch.annotations.emplace_back(
          std::in_place_type<trace::Note>,
          "reported by the runtime alone and its function could not be resolved: parameters and buffers not "
          "captured");
      {
        std::lock_guard lock(mu_);
        ++nextLaunch_;
      }
      SinkEntry entry;
      entry.event = out_.newEvent(std::move(call.launch));
      out_.emit(std::move(entry));
    }
    return;
  }
  // ENTER. Before anything can return or throw: EXIT reads both.
  tlsRuntimeLaunch = RuntimeLaunchFrame{true, false, false};
  if (cb.correlationData != nullptr) *cb.correlationData = 0;
  out_.ensureStarted();
  if (!out_.recording()) return;
  LaunchCall call = runtimeLaunchCall(e, cb);
  if (call.function == 0) return;  // left to the driver callback, if one comes
  tlsRuntimeLaunch.recorded = true;
  std::unique_ptr<PendingLaunch> pending = startLaunch(std::move(call), cb);
  if (cb.correlationData != nullptr) *cb.correlationData = u64(pending.release());
}

RecordSession::LaunchCall RecordSession::runtimeLaunchCall(const RuntimeEntry& e, const CUpti_CallbackData& cb) {
  LaunchCall call;
  call.perThread = e.perThread;
  trace::KernelLaunch& k = call.launch;
  auto plain = [&](const void* func, dim3 grid, dim3 block, void** args, size_t shm, cudaStream_t stream) {
    call.function = func != nullptr ? modules_.runtimeFunction(u64(func)) : 0;
    k.grid = {grid.x, grid.y, grid.z};
    k.block = {block.x, block.y, block.z};
    k.sharedMemBytes = static_cast<uint32_t>(shm);
    k.stream = u64(stream);
    call.kernelParams = args;
  };
  switch (e.launch) {
    case RuntimeLaunch::kLaunchKernel: {
      const auto& p = params<cudaLaunchKernel_v7000_params>(cb);
      call.handler = Handler::kLaunchKernel;
      plain(p.func, p.gridDim, p.blockDim, p.args, p.sharedMem, p.stream);
      break;
    }
    case RuntimeLaunch::kLaunchCooperative: {
      const auto& p = params<cudaLaunchCooperativeKernel_v9000_params>(cb);
      call.handler = Handler::kLaunchCooperative;
      plain(p.func, p.gridDim, p.blockDim, p.args, p.sharedMem, p.stream);
      break;
    }
    case RuntimeLaunch::kLaunchKernelHandle: {
      const auto& p = params<CudaLaunchKernelHandleParams>(cb);
      call.handler = Handler::kLaunchKernel;
      plain(nullptr, p.gridDim, p.blockDim, p.args, p.sharedMem, p.stream);
      call.function = u64(p.kernel);  // a CUkernel, described as the driver's are
      break;
    }
    case RuntimeLaunch::kLaunchKernelExC: {
      const auto& p = params<cudaLaunchKernelExC_v11060_params>(cb);
      call.handler = Handler::kLaunchKernelEx;
      if (p.config == nullptr) break;
      const cudaLaunchConfig_t& c = *p.config;
      plain(p.func, c.gridDim, c.blockDim, p.args, c.dynamicSmemBytes, c.stream);
      call.setAttributes(reinterpret_cast<const CUlaunchAttribute*>(c.attrs), c.numAttrs);
      break;
    }
    case RuntimeLaunch::kNone:
      break;
  }
  return call;
}

// ------------------------------------------------------------------ launches

namespace {
// Words as the bytes scanPointers reads.
std::span<const uint8_t> asBytes(const std::vector<uint64_t>& words) {
  return {reinterpret_cast<const uint8_t*>(words.data()), words.size() * sizeof(uint64_t)};
}

}  // namespace

void RecordSession::launchEnter(Handler h, bool perThread, const CUpti_CallbackData& cb) {
  // Inside a runtime launch callback on this thread: the same launch, which
  // the runtime callback records when it could resolve the function.
  if (tlsRuntimeLaunch.active) {
    tlsRuntimeLaunch.driverSeen = true;
    if (tlsRuntimeLaunch.recorded) return;
  }
  LaunchCall call;
  call.handler = h;
  call.perThread = perThread;
  trace::KernelLaunch& k = call.launch;
  if (h == Handler::kLaunchKernelEx) {
    const auto& p = params<cuLaunchKernelEx_params>(cb);
    if (p.config == nullptr) return;
    const CUlaunchConfig& c = *p.config;
    call.function = u64(p.f);
    k.grid = {c.gridDimX, c.gridDimY, c.gridDimZ};
    k.block = {c.blockDimX, c.blockDimY, c.blockDimZ};
    k.sharedMemBytes = c.sharedMemBytes;
    k.stream = u64(c.hStream);
    call.setAttributes(c.attrs, c.numAttrs);
    call.kernelParams = p.kernelParams;
    call.extra = p.extra;
  } else if (h == Handler::kLaunchCooperative) {
    const auto& p = params<cuLaunchCooperativeKernel_params>(cb);
    call.function = u64(p.f);
    k.grid = {p.gridDimX, p.gridDimY, p.gridDimZ};
    k.block = {p.blockDimX, p.blockDimY, p.blockDimZ};
    k.sharedMemBytes = p.sharedMemBytes;
    k.stream = u64(p.hStream);
    call.kernelParams = p.kernelParams;
  } else {
    const auto& p = params<cuLaunchKernel_params>(cb);
    call.function = u64(p.f);
    k.grid = {p.gridDimX, p.gridDimY, p.gridDimZ};
    k.block = {p.blockDimX, p.blockDimY, p.blockDimZ};
    k.sharedMemBytes = p.sharedMemBytes;
    k.stream = u64(p.hStream);
    call.kernelParams = p.kernelParams;
    call.extra = p.extra;
  }
  std::unique_ptr<PendingLaunch> pending = startLaunch(std::move(call), cb);
  if (cb.correlationData != nullptr) *cb.correlationData = u64(pending.release());
}

void RecordSession::LaunchCall::setAttributes(const CUlaunchAttribute* a, unsigned n) {
  attrs = a;
  numAttrs = a != nullptr ? n : 0;
  for (unsigned i = 0; i < numAttrs; ++i) {
    trace::LaunchAttribute la;
    la.id = static_cast<uint32_t>(a[i].id);
    const auto* v = reinterpret_cast<const uint8_t*>(&a[i].value);
    la.value.assign(v, v + sizeof(a[i].value));
    launch.attributes.push_back(std::move(la));
    if (a[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
      launch.cluster = {a[i].value.clusterDim.x, a[i].value.clusterDim.y, a[i].value.clusterDim.z};
  }
}

std::unique_ptr<RecordSession::PendingLaunch> RecordSession::startLaunch(LaunchCall call,
                                                                         const CUpti_CallbackData& cb) {
  const auto began = std::chrono::steady_clock::now();
  const uint64_t opsBefore = countOnThisThread().enqueued;
  std::unique_ptr<PendingLaunch> pending = describeLaunch(std::move(call), cb);
  pending->spent = std::chrono::steady_clock::now() - began;
  pending->opsBefore = opsBefore;
  return pending;
}

std::unique_ptr<RecordSession::PendingLaunch> RecordSession::describeLaunch(LaunchCall call,
                                                                            const CUpti_CallbackData& cb) {
  const Handler h = call.handler;
  const bool perThread = call.perThread;
  const uint64_t function = call.function;
  void** const kernelParams = call.kernelParams;
  void** const extra = call.extra;
  PartClock clock(options_.timeParts, partNs_);
  trace::KernelLaunch k = std::move(call.launch);
  k.api = launchApi(h, perThread);
  k.context = u64(cb.context);

  uint32_t module = 0;
  bool ambiguousModule = false;
  const std::shared_ptr<const CachedFunction> fn = modules_.functionInfo(function, cb.symbolName, module, ambiguousModule);
  k.function = fn->info.name;
  k.module = module;
  if (ambiguousModule)
    k.annotations.emplace_back(std::in_place_type<trace::Note>,
                               "module unknown: several loaded images with different code define this kernel name");
  k.paramLayout = fn->info.layout;
  if (auto fromExtra = paramsFromExtra(extra)) {
    k.params = std::move(*fromExtra);
  } else if (fn->info.layoutKnown) {
    k.params = packParams(kernelParams, fn->info.layout);
  } else if (kernelParams != nullptr) {
    k.annotations.emplace_back(std::in_place_type<trace::Note>,
                               "parameter layout unknown (driver lacks cuFuncGetParamInfo): parameters not captured");
  }

  for (trace::RngState& r : decodePhilox(k.params, fn->philox))
    k.annotations.emplace_back(std::in_place_type<trace::RngState>, std::move(r));
  appendLibraryCallAnnotations(k.annotations);
  clock.lap(kDescribe);

  // Only what the launch's device is known to be able to read is hashed.
  const uint32_t device = memory_.deviceOf(k.context);
  auto pending = std::make_unique<PendingLaunch>();
  pending->context = k.context;
  pending->stream = enqueueStream(k.stream, perThread);
  // Enqueued on a stream being captured into a graph: the kernel does not run
  // now (the graph's launch runs it), so it takes no launch number and
  // nothing is hashed, copied or re-run for it.
  const bool canEnqueue = markCaptured(*device_, k, pending->stream).canEnqueue;
  if (k.captured) {
    k.hashed = false;
    {
      std::lock_guard lock(mu_);
      for (const ScannedPointer& p : scanPointers(k.params, memory_.allocations(), device)) k.pointers.push_back(p.param);
    }
    clock.lap(kPointers);
    pending->entry.event = out_.newEvent(std::move(k));
    clock.lap(kFramework);
    return pending;
  }

  std::vector<ScannedPointer> scanned;
  uint64_t index;
  {
    std::lock_guard lock(mu_);
    index = nextLaunch_++;
    scanned = scanPointers(k.params, memory_.allocations(), device);
  }
  for (const ScannedPointer& p : scanned) k.pointers.push_back(p.param);
  std::vector<trace::DeviceRange> ranges = referencedRanges(scanned, framework::blockAt);
  const std::string unreadable = unreadableOperands(scanned, device);
  clock.lap(kPointers);

  bool selected = launchInRange(options_, index) && fn->selectedByName;
  if (selected && options_.steps) {
    const int64_t step = framework::currentStep();
    selected = stepSelected(options_, step);
    if (step < 0) {
      out_.warnOnce("steps", "--steps selects by the PyTorch layer's training step, and this process has reported "
                             "none: its launches are listed but not hashed");
    }
  }
  // A snapshot is only useful next to the digests it explains.
  const bool snapshot = !options_.snapshot.empty() &&
                        (fn->snapshotByName || launchNumberSelected(options_.snapshot, index));
  k.hashed = selected || snapshot;
  if (k.hashed && !ranges.empty() && !canEnqueue) {
    // The legacy stream while another stream captures in global mode: the
    // launch itself will fail; nothing may be enqueued around it.
    k.hashed = false;
    k.annotations.emplace_back(std::in_place_type<trace::Note>,
                               "stream cannot take work now (a graph capture elsewhere): not hashed");
    hashing_.forgotten(ranges);  // written without a digest
  }
  // What the op reads and writes (a snapshot keeps every range, before and after).
  const std::vector<OperandRole> roles = k.hashed && !snapshot ? hashing_.operandRolesOf(ranges) : std::vector<OperandRole>();
  clock.lap(kFramework);
  // The determinism check follows --launches/--kernels, or --snapshot when
  // neither is given ("keep this launch's bytes and re-run it").
  const bool checked = options_.launchesText.empty() && options_.kernelsText.empty() ? snapshot : selected;
  const std::string unrepeatable =
      k.hashed && checked && options_.checkDeterminism > 0 ? unrepeatableLaunch(fn->info.name, scanned, device) : "";
  if (!unrepeatable.empty()) {
    k.annotations.emplace_back(std::in_place_type<trace::Note>, "determinism check skipped: " + unrepeatable);
  } else if (k.hashed && checked && options_.checkDeterminism > 0 && !ranges.empty()) {
    // Before anything of ours is enqueued: the re-runs start from the state
    // the program's launch will see, and leave it so.
    Relaunch r;
    r.function = function;
    r.grid = k.grid, r.block = k.block, r.sharedMemBytes = k.sharedMemBytes;
    r.stream = pending->stream;
    r.attributes = call.attrs, r.attributeCount = call.numAttrs;
    r.cooperative = h == Handler::kLaunchCooperative;
    r.kernelParams = kernelParams, r.extra = extra;
    hashing_.checkDeterminism(pending->context, r, ranges, k.annotations);
  }
  if (k.hashed && !unreadable.empty()) k.annotations.emplace_back(std::in_place_type<trace::Note>, unreadable);
  if (k.hashed) {
    pending->entry.before =
        hashing_.hashRanges(pending->context, pending->stream,
                   snapshot ? ranges : hashing_.inputsToHash(ranges, roles, pending->stream, blindAllocations(scanned)));
    if (snapshot) pending->entry.beforeSnapshots = hashing_.snapshotRanges(pending->context, pending->stream, ranges);
  }
  clock.lap(kBefore);
  if (k.hashed) {
    if (!roles.empty()) {
      // What the launch only reads is not hashed after it: unchanged, and
      // vouched for by its last writer.
      std::vector<trace::DeviceRange> written;
      for (size_t i = 0; i < ranges.size(); ++i) {
        if (roles[i] == OperandRole::kRead) {
          k.reads.push_back({ranges[i], 0, {}, {}});
        } else {
          written.push_back(ranges[i]);
        }
      }
      ranges = std::move(written);
    }
    pending->entry.after.ranges = std::move(ranges);  // hashed again at EXIT
    pending->hashOutputs = true;
    pending->snapshot = snapshot;
  }
  pending->entry.event = out_.newEvent(std::move(k));
  clock.lap(kFramework);
  return pending;
}

void RecordSession::launchExit(const CUpti_CallbackData& cb) {
  if (cb.correlationData == nullptr || *cb.correlationData == 0) return;
  std::unique_ptr<PendingLaunch> pending(reinterpret_cast<PendingLaunch*>(*cb.correlationData));
  *cb.correlationData = 0;
  if (succeeded(cb)) {
    finishLaunch(std::move(pending));
  } else {
    // Nothing ran and nothing is recorded: the first uses it hashed are
    // first uses still.
    hashing_.forgotten(pending->entry.before.ranges);
  }
}

void RecordSession::finishLaunch(std::unique_ptr<PendingLaunch> pending) {
  const auto began = std::chrono::steady_clock::now();
  PartClock clock(options_.timeParts, partNs_);
  if (pending->hashOutputs && !device_->canEnqueue(pending->stream)) {
    // Another thread began a capture since the launch's ENTER (on its stream,
    // or on a blocking stream while it ran on the legacy one): nothing more
    // may be enqueued there.
    pending->hashOutputs = false;
    hashing_.forgotten(pending->entry.after.ranges);
    if (auto* k = std::get_if<trace::KernelLaunch>(&pending->entry.event.payload)) {
      k->hashed = false;
      k->annotations.emplace_back(std::in_place_type<trace::Note>,
                                  "stream cannot take work after the launch (a graph capture began): not hashed");
    }
    pending->entry.after.ranges.clear();
  }
  if (pending->hashOutputs) {
    std::vector<trace::DeviceRange> ranges = std::move(pending->entry.after.ranges);
    if (pending->snapshot)
      pending->entry.afterSnapshots = hashing_.snapshotRanges(pending->context, pending->stream, ranges);
    pending->entry.after = hashing_.hashRanges(pending->context, pending->stream, std::move(ranges));
  }
  if (auto* k = std::get_if<trace::KernelLaunch>(&pending->entry.event.payload)) {
    for (const HashTicket* t : {&pending->entry.before, &pending->entry.after}) {
      if (!t->ranges.empty() && !t->pending)
        k->annotations.emplace_back(std::in_place_type<trace::Note>, "not hashed: " + t->error);
    }
    const auto spent = pending->spent + (std::chrono::steady_clock::now() - began);
    k->recorderNs = static_cast<uint32_t>(std::min<int64_t>(spent.count(), UINT32_MAX));
    k->recorderOps =
        static_cast<uint16_t>(std::min<uint64_t>(countOnThisThread().enqueued - pending->opsBefore, UINT16_MAX));
  }
  out_.emit(std::move(pending->entry));
  clock.lap(kExit);
  if (options_.timeParts) timedLaunches_.fetch_add(1, std::memory_order_relaxed);
}

std::string RecordSession::launchPartsText() const {
  const uint64_t n = timedLaunches_.load();
  if (!options_.timeParts || n == 0) return "";
  std::string parts;
  uint64_t total = 0;
  for (size_t i = 0; i < kLaunchPartCount; ++i) {
    const uint64_t ns = partNs_[i].load();
    total += ns;
    parts += fmt::format("{}{} {:.2f} us", i == 0 ? "" : ", ", kLaunchPartNames[i], static_cast<double>(ns) / 1e3 / n);
  }
  return fmt::format("recorder: launch callbacks by part, mean per launch over {} launches: {} (in all {:.2f} us)",
                     n, parts, static_cast<double>(total) / 1e3 / n);
}

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
