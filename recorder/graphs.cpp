// Executable graphs (see graphs.h): what each one's nodes can touch, learnt
// when it is instantiated or updated, and its launches hashed before and
// after like a kernel launch's.
#include "recorder/graphs.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>

#include "recorder/callback_data.h"
#include "recorder/write_history.h"

namespace gpurr::recorder {

namespace {

using trace::AllocationKind;

// Words as the bytes scanPointers reads.
std::span<const uint8_t> asBytes(const std::vector<uint64_t>& words) {
  return {reinterpret_cast<const uint8_t*>(words.data()), words.size() * sizeof(uint64_t)};
}

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

GraphRecorder::GraphRecorder(std::mutex& mu, Device& device, SessionOutput& out, MemoryRecorder& memory,
                             ModuleRecorder& modules, HashRules& hashing)
    : mu_(mu), device_(device), out_(out), memory_(memory), modules_(modules), hashing_(hashing) {}

void GraphRecorder::execCall(Handler h, const CUpti_CallbackData& cb) {
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


void GraphRecorder::learnGraph(uint64_t exec, uint64_t graph, uint64_t context) {
  Device::GraphNodes nodes;
  std::string error;
  bool known = device_.graphNodes(graph, nodes, error);
  std::vector<uint64_t> words = std::move(nodes.addresses);
  for (const Device::GraphNodes::Kernel& k : nodes.kernels) {
    if (!known) break;
    uint32_t module = 0;
    bool ambiguous = false;
    const CachedFunction* const fn = &modules_.functionInfo(k.function, nullptr, module, ambiguous);
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
  for (const ScannedPointer& p : scanPointers(asBytes(words), memory_.allocations(), device))
    g.addresses.push_back(p.address);
  graphExecs_[exec] = std::move(g);
}


void GraphRecorder::prepareLaunch(bool perThread, const CUpti_CallbackData& cb) {
  const auto& p = params<cuGraphLaunch_params>(cb);
  trace::GraphLaunch g;
  g.graphExec = u64(p.hGraph);
  g.stream = u64(p.hStream);
  auto pending = std::make_unique<PendingLaunch>();
  pending->entry = std::make_unique<SinkEntry>();
  pending->context = u64(cb.context);
  pending->stream = enqueueStream(g.stream, perThread);
  const bool canEnqueue = markCaptured(device_, g, pending->stream).canEnqueue;
  if (g.captured) {
    pending->entry->event = out_.newEvent(std::move(g));
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
      const std::vector<ScannedPointer> scanned =
          scanPointers(asBytes(it->second.addresses), memory_.allocations(), device);
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
    pending->entry->before =
        hashing_.hashRanges(pending->context, pending->stream,
                            hashing_.inputsToHash(ranges, {}, pending->stream, blind));
    pending->entry->after.ranges = std::move(ranges);
    pending->hashOutputs = true;
  } else if (known) {
    hashing_.forgotten(ranges);  // written without a digest
  } else {
    writeHistory().clear();  // it may write anything, unhashed
  }
  pending->entry->event = out_.newEvent(std::move(g));
  if (cb.correlationData != nullptr) *cb.correlationData = u64(pending.release());
}


}  // namespace gpurr::recorder
