// The launch path (see launches.h): a kernel launch from its ENTER callback
// (described, its pointers scanned, its inputs hashed) to its EXIT (outputs
// hashed, the event handed to the trace thread).
#include "recorder/launches.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "recorder/callback_data.h"
#include "recorder/framework_context.h"
#include "recorder/library_call.h"
#include "recorder/rng_params.h"
#include "recorder/thread_local_ref.h"

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

// Buffers of a launch's thread (capacity kept): a launch's callbacks never
// nest on one thread. One thread_local, so one lookup (thread_local_ref.h).
struct LaunchBuffers {
  std::vector<ScannedPointer> scanned;  // the pointers its parameters hold
  std::vector<Block> blocks;            // the framework allocator's block of each of its ranges
  std::vector<OperandRole> roles;       // the roles of its ranges in its framework op
};
thread_local EndsWithThread<LaunchBuffers> tlsBuffers;

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

LaunchRecorder::LaunchRecorder(std::mutex& mu, const RecorderOptions& options, Device& device, SessionOutput& out,
                               MemoryRecorder& memory, ModuleRecorder& modules, HashRules& hashing)
    : mu_(mu), options_(options), device_(device), out_(out), memory_(memory), modules_(modules),
      hashing_(hashing) {}

void LaunchRecorder::prepareLaunch(const HandlerEntry& e, const CUpti_CallbackData& cb) {
  // Inside a runtime launch callback on this thread: the same launch, which
  // the runtime callback records when it could resolve the function.
  RuntimeLaunchFrame& runtime = threadLocalRef(tlsRuntimeLaunch);
  if (runtime.active) {
    runtime.driverSeen = true;
    if (runtime.recorded) return;
  }
  LaunchCall call;
  if (!driverLaunchCall(e.handler, e.perThread, cb, call)) return;
  std::unique_ptr<PendingLaunch> pending = startLaunch(call, cb);
  if (cb.correlationData != nullptr) *cb.correlationData = u64(pending.release());
}

void LaunchRecorder::prepareLaunch(const RuntimeEntry& e, const CUpti_CallbackData& cb) {
  // ENTER. Before anything can return or throw: EXIT reads both.
  RuntimeLaunchFrame& runtime = threadLocalRef(tlsRuntimeLaunch);
  runtime = RuntimeLaunchFrame{true, false, false};
  if (cb.correlationData != nullptr) *cb.correlationData = 0;
  out_.ensureStarted();
  if (!out_.recording()) return;
  // No context yet: the runtime binds one to the thread inside this call
  // (cupti_callbacks.h: the context may change from the entry to the exit
  // of a runtime call that initialises one), so the driver callback it
  // makes has the context the launch runs in.
  if (cb.context == nullptr) return;
  LaunchCall call = runtimeCall(e, cb);
  if (call.function == 0) return;  // left to the driver callback, if one comes
  runtime.recorded = true;
  std::unique_ptr<PendingLaunch> pending = startLaunch(call, cb);
  if (cb.correlationData != nullptr) *cb.correlationData = u64(pending.release());
}

void LaunchRecorder::processLaunch(const RuntimeEntry& e, const CUpti_CallbackData& cb) {
  const RuntimeLaunchFrame frame = std::exchange(threadLocalRef(tlsRuntimeLaunch), RuntimeLaunchFrame{});
  const bool ok = cb.functionReturnValue != nullptr &&
                  *static_cast<const cudaError_t*>(cb.functionReturnValue) == cudaSuccess;
  if (cb.correlationData != nullptr && *cb.correlationData != 0) {
    std::unique_ptr<PendingLaunch> pending(reinterpret_cast<PendingLaunch*>(*cb.correlationData));
    *cb.correlationData = 0;
    settleLaunch(std::move(pending), ok);
  } else if (ok && !frame.driverSeen && out_.recording()) {
    // Neither domain could describe the function (a program linked with
    // the static runtime, say): the launch is still counted, bare.
    LaunchCall call = runtimeCall(e, cb);
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
      call.launch.number = nextLaunch_++;
    }
    SinkEntry entry;
    entry.event = out_.newEvent(std::move(call.launch));
    out_.emit(std::move(entry));
  }
}

LaunchCall LaunchRecorder::runtimeCall(const RuntimeEntry& e, const CUpti_CallbackData& cb) {
  LaunchCall call = runtimeLaunchCall(e, cb);
  if (call.hostFunction != 0) call.function = modules_.runtimeFunction(call.hostFunction);
  return call;
}

std::unique_ptr<PendingLaunch> LaunchRecorder::startLaunch(LaunchCall& call, const CUpti_CallbackData& cb) {
  const auto began = std::chrono::steady_clock::now();
  const uint64_t opsBefore = countOnThisThread().enqueued;
  std::unique_ptr<PendingLaunch> pending = describeLaunch(call, cb, began);
  pending->spent = std::chrono::steady_clock::now() - began;
  pending->opsBefore = opsBefore;
  return pending;
}

std::unique_ptr<PendingLaunch> LaunchRecorder::describeLaunch(LaunchCall& call, const CUpti_CallbackData& cb,
                                                              std::chrono::steady_clock::time_point began) {
  const Handler h = call.handler;
  const bool perThread = call.perThread;
  const uint64_t function = call.function;
  void** const kernelParams = call.kernelParams;
  void** const extra = call.extra;
  PartClock clock(options_.timeParts, partNs_);
  LaunchBuffers& buffers = threadLocalRef(tlsBuffers);
  std::vector<ScannedPointer>& scanned = buffers.scanned;
  // Built in the entry of a launch written earlier, whose containers keep
  // their capacity (the launch allocates nothing for them), and handed to
  // the trace thread's ring whole.
  auto pending = std::make_unique<PendingLaunch>();
  pending->entry = takeLaunchEntry();
  SinkEntry& entry = *pending->entry;
  trace::KernelLaunch& k = std::get<trace::KernelLaunch>(entry.event.payload);
  call.moveInto(k);
  k.api = launchApi(h, perThread);
  k.context = u64(cb.context);

  uint32_t module = 0;
  bool ambiguousModule = false;
  const CachedFunction* const fn = &modules_.functionInfo(function, cb.symbolName, module, ambiguousModule);
  entry.kernel = fn->text;  // its name and layout, copied in by the trace thread
  k.module = module;
  if (ambiguousModule)
    k.annotations.emplace_back(std::in_place_type<trace::Note>,
                               "module unknown: several loaded images with different code define this kernel name");
  bool unseen = false;  // its pointers cannot be found: it may reach any memory
  if (auto fromExtra = paramsFromExtra(extra)) {
    k.params = std::move(*fromExtra);
  } else if (fn->info.layoutKnown) {
    packParams(kernelParams, fn->info.layout, k.params);
  } else if (kernelParams != nullptr) {
    k.annotations.emplace_back(std::in_place_type<trace::Note>,
                               "parameter layout unknown (driver lacks cuFuncGetParamInfo): parameters not captured");
    unseen = true;
  }

  for (trace::RngState& r : decodePhilox(k.params, fn->philox))
    k.annotations.emplace_back(std::in_place_type<trace::RngState>, std::move(r));
  appendLibraryCallAnnotations(k.annotations);
  clock.lap(kDescribe);

  // Only what the launch's device is known to be able to read is hashed.
  const uint32_t device = memory_.deviceOf(k.context);
  pending->context = k.context;
  pending->stream = enqueueStream(k.stream, perThread);
  // Enqueued on a stream being captured into a graph: the kernel does not run
  // now (the graph's launch runs it), so it takes no launch number and
  // nothing is hashed, copied or re-run for it.
  const bool canEnqueue = markCaptured(device_, k, pending->stream).canEnqueue;
  if (k.captured) {
    k.hashed = false;
    {
      std::lock_guard lock(mu_);
      scanPointers(k.params, memory_.allocations(), device, scanned);
    }
    k.pointers.reserve(scanned.size());
    for (const ScannedPointer& p : scanned) k.pointers.push_back(p.param);
    clock.lap(kPointers);
    out_.stamp(entry.event, fn->key, began, &entry.followedOrigin);
    clock.lap(kFramework);
    return pending;
  }

  uint64_t index;
  {
    std::lock_guard lock(mu_);
    index = nextLaunch_++;
    scanPointers(k.params, memory_.allocations(), device, scanned);
  }
  k.number = index;
  k.pointers.reserve(scanned.size());
  for (const ScannedPointer& p : scanned) k.pointers.push_back(p.param);
  std::vector<trace::DeviceRange> ranges = std::move(entry.after.ranges);  // emptied, its capacity kept
  {
    framework::BlockReader blocks;
    referencedRanges(scanned, [&blocks](uint64_t address) { return blocks.at(address); }, ranges, &buffers.blocks);
  }
  const std::string unreadable = unreadableOperands(scanned, device);
  clock.lap(kPointers);

  bool selected = launchInRange(options_, index) && fn->selectedByName;
  if (selected && options_.steps) {
    const int64_t step = framework::currentStep();
    selected = stepSelected(options_, step);
    if (step < 0) {
      out_.warnOnce("steps",
                    "--steps selects by the PyTorch layer's training step, and this process has reported "
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
  // What the op reads and writes (a snapshot keeps every range, before and after);
  // while the framework layer learns a step, for every launch.
  const bool learning = framework::attribution() == framework::Attribution::kLearn;
  std::vector<OperandRole>& roles = buffers.roles;
  roles.clear();
  if ((k.hashed && !snapshot) || learning) hashing_.operandRolesOf(ranges, buffers.blocks, fn->key, k.params, k.pointers, roles);
  if (learning) {
    std::vector<uint8_t> learned;
    for (OperandRole r : roles) learned.push_back(static_cast<uint8_t>(r));
    framework::learnRoles(std::move(learned));
    if (!k.hashed || snapshot) roles.clear();
  }
  // The hashes held back that this launch may disturb are enqueued before
  // it, and before anything of ours below.
  hashing_.beforeLaunch(pending->context, pending->stream, ranges, roles, unseen);
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
    std::vector<trace::DeviceRange> inputs = std::move(entry.before.ranges);
    // Ranges the launch only reads hold the same bytes after it: their
    // digests may wait in the stream's batch (hash_deferral.h), which is
    // flushed before anything may write them. Any other is hashed now.
    bool onlyRead = false;
    if (snapshot) {
      inputs.assign(ranges.begin(), ranges.end());
    } else {
      onlyRead = hashing_.inputsToHash(ranges, roles, pending->stream, blindAllocations(scanned), inputs);
    }
    entry.before =
        snapshot ? hashing_.hashRanges(pending->context, pending->stream, std::move(inputs))
                 : hashing_.hashLaunchRanges(pending->context, pending->stream, std::move(inputs),
                                             !onlyRead || unseen, onlyRead && !unseen);
    if (snapshot)
      entry.beforeSnapshots = hashing_.snapshotRanges(pending->context, pending->stream, ranges);
  }
  clock.lap(kBefore);
  if (k.hashed) {
    if (!roles.empty()) {
      // What the launch only reads is not hashed after it: unchanged, and
      // vouched for by its last writer. The others keep their order.
      size_t written = 0;
      for (size_t i = 0; i < ranges.size(); ++i) {
        if (roles[i] == OperandRole::kRead) {
          k.reads.push_back({ranges[i], 0, {}, {}});
        } else {
          ranges[written++] = ranges[i];
        }
      }
      ranges.resize(written);
    }
    entry.after.ranges = std::move(ranges);  // hashed again at EXIT
    pending->hashOutputs = true;
    pending->snapshot = snapshot;
    // Memory another writer reaches (the host, another process, a kernel
    // by its symbol) is hashed at once, not held back for later launches.
    pending->hashNow = std::any_of(scanned.begin(), scanned.end(), [](const ScannedPointer& p) {
      return historyBlind(p.kind) || p.kind == AllocationKind::kHostMapped;
    });
  }
  out_.stamp(entry.event, fn->key, began, &entry.followedOrigin);
  clock.lap(kFramework);
  return pending;
}

void LaunchRecorder::processLaunch(const CUpti_CallbackData& cb) {
  if (cb.correlationData == nullptr || *cb.correlationData == 0) return;
  std::unique_ptr<PendingLaunch> pending(reinterpret_cast<PendingLaunch*>(*cb.correlationData));
  *cb.correlationData = 0;
  settleLaunch(std::move(pending), succeeded(cb));
}

void LaunchRecorder::settleLaunch(std::unique_ptr<PendingLaunch> pending, bool succeeded) {
  if (succeeded) finishLaunch(std::move(pending));
  else hashing_.forgotten(pending->entry->before.ranges);
}

void LaunchRecorder::finishLaunch(std::unique_ptr<PendingLaunch> pending) {
  const auto began = std::chrono::steady_clock::now();
  PartClock clock(options_.timeParts, partNs_);
  if (pending->hashOutputs && !device_.canEnqueue(pending->stream)) {
    // Another thread began a capture since the launch's ENTER (on its stream,
    // or on a blocking stream while it ran on the legacy one): nothing more
    // may be enqueued there.
    pending->hashOutputs = false;
    hashing_.forgotten(pending->entry->after.ranges);
    if (auto* k = std::get_if<trace::KernelLaunch>(&pending->entry->event.payload)) {
      k->hashed = false;
      k->annotations.emplace_back(std::in_place_type<trace::Note>,
                                  "stream cannot take work after the launch (a graph capture began): not hashed");
    }
    pending->entry->after.ranges.clear();
  }
  if (pending->hashOutputs) {
    std::vector<trace::DeviceRange> ranges = std::move(pending->entry->after.ranges);
    if (pending->snapshot)
      pending->entry->afterSnapshots = hashing_.snapshotRanges(pending->context, pending->stream, ranges);
    pending->entry->after =
        pending->snapshot
            ? hashing_.hashRanges(pending->context, pending->stream, std::move(ranges))
            : hashing_.hashLaunchRanges(pending->context, pending->stream, std::move(ranges), pending->hashNow);
  }
  if (auto* k = std::get_if<trace::KernelLaunch>(&pending->entry->event.payload)) {
    for (const HashTicket* t : {&pending->entry->before, &pending->entry->after}) {
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

std::string LaunchRecorder::partsText() const {
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

}  // namespace gpurr::recorder
