// Whole-stream replay planning (see stream_plan.h): one walk over the events
// in recorded order, collecting address space, images and operations, and
// checking that every byte the stream needs from the host was recorded.
#include "replayer/stream_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "trace_format/trace.h"

namespace gpurr::replay {
namespace {
using namespace gpurr::trace;

std::string plural(uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

class Planner {
 public:
  Planner(const Header& header, const std::string& tracePath, const StreamPlanOptions& options,
          const std::function<bool(const BlobId&)>& hasBlob)
      : options_(options), hasBlob_(hasBlob) {
    plan_.tracePath = tracePath;
    plan_.header = header;
    plan_.until = options.until;
    if (!header.options.full) {
      throw ReplayError(fmt::format(
          "{}: not a --full recording: whole-stream replay needs every host-to-device byte, set and launch of "
          "the program, and this trace keeps digests only. Record one with `gpurr record --full -o TRACE -- {}`, "
          "or replay single launches of this one with `gpurr replay {} --launch K`",
          tracePath, commandLineOf(header), tracePath));
    }
    if (!header.pointersResolved) {
      plan_.warnings.push_back(
          "this trace's recorder did not resolve pointer parameters to allocations: parameters are passed as "
          "recorded and cannot be relocated");
    }
  }

  // Feeds one event; returns false once the replayed part has ended.
  bool feed(const Event& e) {
    if (options_.until && e.seq > *options_.until) return false;
    if (const auto* a = std::get_if<Allocation>(&e.payload)) {
      if (a->ordinal != 0) allocations_[a->ordinal] = *a;
    } else if (const auto* m = std::get_if<ModuleLoad>(&e.payload)) {
      loaded_[m->ordinal] = *m;
    }
    StreamStep step = streamStep(e);
    if (step.stop) {
      plan_.stopSeq = e.seq;
      plan_.stopReason = *step.stop;
      return false;
    }
    if (plan_.events == 0) plan_.firstSeq = e.seq;
    ++plan_.events;
    plan_.lastSeq = e.seq;
    if (const auto* k = std::get_if<KernelLaunch>(&e.payload); k && k->api == LaunchApi::kLaunchHost) {
      ++plan_.hostFunctions;
    }
    if (step.op) account(e, *step.op);
    return true;
  }

  StreamPlan finish() {
    // Address space: every allocation ever live.
    std::set<uint32_t> devices;
    for (const auto& [ordinal, a] : allocations_) {
      if (a.size == 0) continue;
      if (a.kind != AllocationKind::kHostMapped && a.kind != AllocationKind::kModuleGlobal) devices.insert(a.device);
      plan_.allocationStarts[ordinal] = a.address;
      ReservedRange r{ordinal, a.address, a.size, a.address, a.kind, false, false};
      if (a.kind == AllocationKind::kVmm) {
        // Only the parts the stream touches: the rest of a reservation may
        // never have been mapped, and may be far larger than the GPU.
        const auto parts = vmmParts_.find(ordinal);
        if (parts == vmmParts_.end()) continue;
        for (const auto& [start, end] : mergeIntervals(parts->second)) {
          ReservedRange part = r;
          part.address = start;
          part.size = end - start;
          plan_.ranges.push_back(part);
        }
        continue;
      }
      plan_.ranges.push_back(r);
    }
    for (const auto& [start, end] : mergeIntervals(loose_)) {
      plan_.ranges.push_back({0, start, end - start, start, AllocationKind::kOther, false, false});
    }
    std::sort(plan_.ranges.begin(), plan_.ranges.end(),
              [](const ReservedRange& a, const ReservedRange& b) { return a.address < b.address; });
    if (devices.size() > 1) {
      std::string list;
      for (uint32_t d : devices) list += (list.empty() ? "" : ", ") + std::to_string(d);
      throw ReplayError(fmt::format("{}: the program allocated memory on GPUs {}; whole-stream replay re-runs one "
                                    "GPU's stream (record one process per GPU)",
                                    plan_.tracePath, list));
    }
    plan_.recordedDevice = devices.empty() ? 0 : *devices.begin();
    plan_.recordedGpu = recordedGpuOf(plan_.header, plan_.recordedDevice);
    plan_.recordedArch = recordedArchOf(plan_.recordedGpu, plan_.modules.empty() ? 0 : plan_.modules.begin()->second.arch);

    if (!loose_.empty()) {
      plan_.warnings.push_back(fmt::format(
          "{} lie outside every allocation the trace knows of; they get address space of their own, zero-filled",
          plural(loose_.size(), "recorded range", "recorded ranges")));
    }
    for (const auto& [kind, n] : kindsTouched_) {
      const char* why = kind == AllocationKind::kHostMapped
                            ? "pinned host memory the device reads directly: what the host wrote there was not "
                              "recorded, so it starts zero-filled"
                        : kind == AllocationKind::kManaged
                            ? "managed memory: what the host wrote there was not recorded, so it starts zero-filled"
                            : "module globals: copies into them land at their recorded addresses, but kernels that "
                              "use them by name see the freshly loaded image's values";
      plan_.warnings.push_back(
          fmt::format("{} touched by the stream {} {}", plural(n, "allocation", "allocations"), n == 1 ? "is" : "are",
                      why));
    }
    if (!unknownPointers_.empty()) {
      plan_.warnings.push_back(fmt::format(
          "{} point into allocations no event allocated (first alloc#{}); they are passed as recorded",
          plural(unknownPointers_.size(), "pointer parameter", "pointer parameters"), *unknownPointers_.begin()));
    }
    const RecordingOptions& o = plan_.header.options;
    if (unhashed_ > 0 && o.launchRange.empty() && o.kernelRegex.empty()) {
      plan_.warnings.push_back(fmt::format(
          "{} not hashed although the recording selected every launch (first #{}): launches made while a stream was "
          "being captured into a CUDA graph are recorded so, and did not run then; replay runs them",
          plural(unhashed_, "launch was", "launches were"), firstUnhashed_));
    }
    if (plan_.operations == 0) {
      plan_.warnings.push_back(plan_.stopSeq ? "nothing to replay before the stop"
                                             : "the trace holds no GPU operation to replay");
    }
    return std::move(plan_);
  }

 private:
  void touch(const DeviceRange& range) {
    if (range.size == 0) return;
    const auto a = range.allocation != 0 ? allocations_.find(range.allocation) : allocations_.end();
    if (a == allocations_.end() || range.address < a->second.address ||
        range.address + range.size > a->second.address + a->second.size) {
      loose_.emplace_back(range.address, range.address + range.size);
      return;
    }
    if (a->second.kind == AllocationKind::kVmm) vmmParts_[a->first].emplace_back(range.address, range.address + range.size);
    if (a->second.kind == AllocationKind::kHostMapped || a->second.kind == AllocationKind::kManaged ||
        a->second.kind == AllocationKind::kModuleGlobal) {
      if (warnedAllocations_.insert(a->first).second) ++kindsTouched_[a->second.kind];
    }
  }

  void account(const Event& e, StreamOp op) {
    const std::string what = fmt::format("{}: event #{}", plan_.tracePath, e.seq);
    switch (op.kind) {
      case StreamOpKind::kCopyToDevice:
        if (op.data->size != op.dst.size) {
          throw ReplayError(fmt::format("{}: the recorded bytes of the copy to {} hold {}, not {} (trace damaged?)",
                                        what, describeRange(op.dst), humanBytes(op.data->size),
                                        humanBytes(op.dst.size)));
        }
        if (!hasBlob_(op.data->id)) {
          throw ReplayError(fmt::format("{}: the bytes copied to {} (blob {}) are missing from {}/blobs", what,
                                        describeRange(op.dst), op.data->id.hex(), plan_.tracePath));
        }
        ++plan_.copiesToDevice;
        plan_.bytesToDevice += op.dst.size;
        touch(op.dst);
        break;
      case StreamOpKind::kCopyOnDevice:
        ++plan_.copiesOnDevice;
        touch(op.dst);
        touch(op.src);
        break;
      case StreamOpKind::kCopyToHost:
        ++plan_.copiesToHost;
        plan_.checkedCopiesToHost += op.checked;
        if (op.checked) touch(op.src);
        break;
      case StreamOpKind::kMemset:
        ++plan_.memsets;
        touch(op.dst);
        break;
      case StreamOpKind::kLaunch: {
        const KernelLaunch& k = *op.launch;
        const auto mod = loaded_.find(k.module);
        if (mod == loaded_.end()) {
          throw ReplayError(fmt::format("{}: launch of {} names module #{}, which no event before it loaded (trace "
                                        "damaged?)",
                                        what, k.function, k.module));
        }
        if (!plan_.modules.contains(k.module)) {
          if (mod->second.cubin.size == 0 || !hasBlob_(mod->second.cubin.id)) {
            throw ReplayError(fmt::format("{}: the image of module #{} (blob {}), which launch of {} needs, is "
                                          "missing from {}/blobs",
                                          what, k.module, mod->second.cubin.id.hex(), k.function, plan_.tracePath));
          }
          plan_.modules[k.module] = {mod->second.ordinal, mod->second.cubin, mod->second.arch};
        }
        for (const PointerParam& p : k.pointers) {
          if (uint64_t{p.byteOffset} + 8 > k.params.size()) {
            throw ReplayError(fmt::format("{}: pointer parameter at byte {} lies outside the {} parameter bytes of "
                                          "{} (trace damaged?)",
                                          what, p.byteOffset, k.params.size(), k.function));
          }
          if (!allocations_.contains(p.allocation)) unknownPointers_.insert(p.allocation);
        }
        for (const RangeDigest& r : k.inputs) touch(r.range);
        for (const RangeDigest& r : k.outputs) touch(r.range);
        ++plan_.launches;
        plan_.checkedLaunches += op.checked;
        if (!k.hashed && unhashed_++ == 0) firstUnhashed_ = e.seq;
        break;
      }
    }
    ++plan_.operations;
    if (plan_.preview.size() < options_.previewOps) {
      op.launch = nullptr;
      plan_.preview.push_back(std::move(op));
    }
  }

  StreamPlanOptions options_;
  std::function<bool(const BlobId&)> hasBlob_;
  StreamPlan plan_;
  std::map<uint32_t, Allocation> allocations_;  // every allocation seen, by ordinal
  std::map<uint32_t, ModuleLoad> loaded_;
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> vmmParts_;
  std::vector<std::pair<uint64_t, uint64_t>> loose_;
  std::set<uint32_t> unknownPointers_;
  std::set<uint32_t> warnedAllocations_;
  std::map<AllocationKind, uint64_t> kindsTouched_;
  uint64_t unhashed_ = 0, firstUnhashed_ = 0;
};

}  // namespace

const char* toString(StreamOpKind kind) {
  switch (kind) {
    case StreamOpKind::kCopyToDevice: return "copy to device";
    case StreamOpKind::kCopyOnDevice: return "copy on device";
    case StreamOpKind::kCopyToHost: return "copy to host";
    case StreamOpKind::kMemset: return "memset";
    case StreamOpKind::kLaunch: return "launch";
  }
  return "?";
}

StreamStep streamStep(const Event& e) {
  StreamStep step;
  StreamOp op;
  op.seq = e.seq;
  // A launch, copy or set captured into a graph ran only inside the graph's
  // launch, where replay stops.
  if (!ranWhenRecorded(e.payload)) return step;
  if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) {
    if (k->api == LaunchApi::kLaunchHost) return step;  // runs nothing on the device
    if (k->module == 0 || k->function.empty()) {
      step.stop = fmt::format(
          "launch #{} ({}) cannot be re-run: the recorder did not tie its function to a loaded module image, so "
          "there is no code to load",
          e.seq, k->function.empty() ? "unnamed function" : k->function);
      return step;
    }
    op.kind = StreamOpKind::kLaunch;
    op.launch = k;
    op.function = k->function;
    op.module = k->module;
    op.checked = k->hashed && std::any_of(k->outputs.begin(), k->outputs.end(),
                                          [](const RangeDigest& r) { return r.range.size > 0; });
    step.op = std::move(op);
  } else if (const auto* m = std::get_if<Memcpy>(&e.payload)) {
    if (m->size == 0) return step;
    switch (m->kind) {
      case MemcpyKind::kHostToDevice:
        // A --full recording keeps the bytes of every contiguous copy; a 2D
        // or 3D one (rows with pitches) it records by extent only.
        if (!m->data) {
          step.stop = fmt::format(
              "event #{} copies {} from the host to {}, but the trace holds no copy of those bytes (a 2D or 3D copy, "
              "whose rows and pitches the recorder does not keep, or a recording made without --full)",
              e.seq, humanBytes(m->size), describeRange(m->dst));
          break;
        }
        op.kind = StreamOpKind::kCopyToDevice;
        op.dst = m->dst;
        op.dst.size = m->size;
        op.data = m->data;
        step.op = std::move(op);
        break;
      case MemcpyKind::kDeviceToDevice:
        // A contiguous copy always has the digest of what it wrote; a 2D or
        // 3D one (rows with pitches the trace does not keep) never has.
        if (m->digest == 0) {
          step.stop = fmt::format(
              "event #{} is a device-to-device copy of {} that the trace describes only by its extent (a 2D or 3D "
              "copy, or one made while its stream was captured into a CUDA graph): the bytes it wrote are unknown",
              e.seq, humanBytes(m->size));
          break;
        }
        op.kind = StreamOpKind::kCopyOnDevice;
        op.dst = m->dst;
        op.src = m->src;
        op.dst.size = op.src.size = m->size;
        step.op = std::move(op);
        break;
      case MemcpyKind::kDeviceToHost:
        op.kind = StreamOpKind::kCopyToHost;
        op.src = m->src;
        op.src.size = m->size;
        op.digest = m->digest;
        op.checked = m->digest != 0;
        step.op = std::move(op);
        break;
      case MemcpyKind::kHostToHost:
        break;
      case MemcpyKind::kPeer:
        step.stop = fmt::format("event #{} is a peer copy between GPUs: whole-stream replay re-runs one GPU's stream",
                                e.seq);
        break;
      case MemcpyKind::kUnknown:
        step.stop = fmt::format("event #{} is a copy of {} in an unknown direction: the recorder could not tell "
                                "host memory from device memory",
                                e.seq, humanBytes(m->size));
        break;
    }
  } else if (const auto* s = std::get_if<Memset>(&e.payload)) {
    if (s->dst.size == 0) return step;
    const bool sized = s->elementSize == 1 || s->elementSize == 2 || s->elementSize == 4;
    if (!sized || s->dst.size % s->elementSize != 0 || s->digest == 0) {
      // A contiguous set always has the digest of what it wrote; a 2D set's
      // extent includes the gaps between rows, which it left alone.
      step.stop = fmt::format(
          "event #{} sets {} to {:#x} in {}-byte elements, but the trace describes it only by its extent (a 2D set, "
          "cuMemsetD2D*, whose pitch and width it does not keep, or one made while its stream was captured into a "
          "CUDA graph): it cannot be repeated as one contiguous set",
          e.seq, describeRange(s->dst), s->value, s->elementSize);
      return step;
    }
    op.kind = StreamOpKind::kMemset;
    op.dst = s->dst;
    op.value = s->value;
    op.elementSize = s->elementSize;
    step.op = std::move(op);
  } else if (const auto* g = std::get_if<GraphLaunch>(&e.payload)) {
    step.stop = fmt::format(
        "event #{} launches a CUDA graph{}: the trace keeps no record of its nodes, so whole-stream replay "
        "cannot run it",
        e.seq, g->nodeCount == 0 ? "" : " (" + plural(g->nodeCount, "node", "nodes") + ")");
  } else if (const auto* c = std::get_if<Collective>(&e.payload)) {
    step.stop = fmt::format("event #{} is a collective ({}): what it received came from other processes, which "
                            "whole-stream replay of one process does not run",
                            e.seq, describe(*c));
  }
  return step;
}

StreamPlan planStreamReplay(const TraceReader& reader, const StreamPlanOptions& options) {
  Planner planner(reader.header(), reader.path().string(), options,
                  [&](const BlobId& id) { return reader.hasBlob(id); });
  reader.forEach([&](const Event& e) { return planner.feed(e); });
  StreamPlan plan = planner.finish();
  plan.traceEvents = reader.eventCount();
  return plan;
}

StreamPlan planStreamReplay(std::span<const Event> events, const Header& header, const std::string& tracePath,
                            const StreamPlanOptions& options, const std::function<bool(const BlobId&)>& hasBlob) {
  Planner planner(header, tracePath, options, hasBlob);
  for (const Event& e : events) {
    if (!planner.feed(e)) break;
  }
  StreamPlan plan = planner.finish();
  plan.traceEvents = events.size();
  return plan;
}

}  // namespace gpurr::replay
