// Whole-stream replay on a GPU (see stream_execute.h). The GPU side (context,
// placement, images, launches, hashing) is the one-launch replay's
// (device_session.h); this file walks the trace a second time and carries out
// each event's operation as streamStep() describes it.
#include "replayer/stream_execute.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include "kernels/device_hasher.h"
#include "kernels/driver_api.h"
#include "replayer/replay_driver.h"
#include "trace_format/trace.h"

namespace gpurr::replay {
namespace {
using namespace gpurr::trace;
using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

class StreamRunner {
 public:
  StreamRunner(const TraceReader& reader, const StreamPlan& plan, const StreamReplayOptions& options,
               DeviceSession& session, const AddressMap& map, StreamOutcome& out)
      : reader_(reader), plan_(plan), options_(options), s_(session), map_(map), out_(out) {}

  // Carries out one operation; false once a check has failed.
  bool run(const StreamOp& op) {
    switch (op.kind) {
      case StreamOpKind::kCopyToDevice: copyToDevice(op); break;
      case StreamOpKind::kCopyOnDevice:
        s_.check(s_.drv.cuMemcpyDtoDAsync(map_.translate(op.dst.address), map_.translate(op.src.address),
                                          op.dst.size, s_.stream()),
                 fmt::format("event #{}: copying {} from {} to {}", op.seq, humanBytes(op.dst.size),
                             describeRange(op.src), describeRange(op.dst)));
        break;
      case StreamOpKind::kMemset: memset(op); break;
      case StreamOpKind::kCopyToHost: checkCopyToHost(op); break;
      case StreamOpKind::kLaunch: launch(op); break;
    }
    ++out_.operations;
    out_.lastSeq = op.seq;
    return !out_.mismatch;
  }

  // Waits for everything enqueued; a kernel fault shows here.
  void finish() { sync("the end of the stream", out_.lastSeq); }

  std::vector<std::string> warnings() const {
    std::vector<std::string> w = launchWarnings_;
    if (storedPointerCopies_ > 0) {
      w.push_back(fmt::format(
          "{} {} to the device {} words that point into relocated memory (first: event #{}, {}, {} word(s), "
          "first at +{:#x}): pointers stored in device memory cannot be rewritten, so kernels may use the recorded "
          "addresses",
          storedPointerCopies_, storedPointerCopies_ == 1 ? "copy" : "copies",
          storedPointerCopies_ == 1 ? "holds" : "hold", firstStoredPointers_.first,
          describeRange(firstStoredPointers_.second.range),
          firstStoredPointers_.second.count, firstStoredPointers_.second.firstOffset));
    }
    return w;
  }

 private:
  // Synchronises the stream; a failure is blamed on what ran since the last
  // synchronisation.
  void sync(const std::string& at, uint64_t seq) {
    if (CUresult r = s_.api.cuStreamSynchronize(s_.stream()); r != CUDA_SUCCESS) fail(at, r);
    syncedSeq_ = seq;
  }

  [[noreturn]] void fail(const std::string& at, CUresult r) const {
    throw ReplayError(fmt::format(
        "{}: the replay failed at {}, or a kernel enqueued after event #{} before it faulted: {}{}", plan_.tracePath,
        at, syncedSeq_,
        s_.api.errorText(r),
        out_.relocated ? " (memory was relocated: a pointer stored in device memory may still hold a recorded "
                         "address; `gpurr replay --all` without --relocate, on a GPU with nothing else running, "
                         "places more ranges as recorded)"
                       : ""));
  }

  void copyToDevice(const StreamOp& op) {
    const std::vector<uint8_t> bytes = reader_.readBlob(*op.data);
    if (out_.relocated) {
      if (auto stored = findStoredPointers(op.dst, bytes, map_)) {
        if (storedPointerCopies_++ == 0) firstStoredPointers_ = {op.seq, *stored};
      }
    }
    s_.check(s_.drv.cuMemcpyHtoDAsync(map_.translate(op.dst.address), bytes.data(), bytes.size(), s_.stream()),
             fmt::format("event #{}: copying {} to {}", op.seq, humanBytes(bytes.size()), describeRange(op.dst)));
    // The host bytes must outlive the copy.
    sync(fmt::format("the copy to the device #{}", op.seq), op.seq);
    out_.bytesRestored += bytes.size();
  }

  void memset(const StreamOp& op) {
    const CUdeviceptr dst = map_.translate(op.dst.address);
    const size_t count = op.dst.size / op.elementSize;
    CUresult r = CUDA_SUCCESS;
    switch (op.elementSize) {
      case 1: r = s_.drv.cuMemsetD8Async(dst, static_cast<unsigned char>(op.value), count, s_.stream()); break;
      case 2: r = s_.drv.cuMemsetD16Async(dst, static_cast<unsigned short>(op.value), count, s_.stream()); break;
      default: r = s_.drv.cuMemsetD32Async(dst, op.value, count, s_.stream()); break;
    }
    s_.check(r, fmt::format("event #{}: setting {}", op.seq, describeRange(op.dst)));
  }

  void checkCopyToHost(const StreamOp& op) {
    if (!op.checked) return;
    const std::vector<kernels::HashResult> hashed =
        hash(op, {{map_.translate(op.src.address), op.src.size}}, fmt::format("the copy to the host #{}", op.seq));
    ++out_.checkedCopiesToHost;
    if (hashed[0].digest == op.digest) {
      ++out_.matchingCopiesToHost;
      return;
    }
    StreamMismatch m;
    m.seq = op.seq;
    m.kind = StreamOpKind::kCopyToHost;
    m.launchIndex = out_.launches;
    m.outputsChecked = 1;
    m.outputs.push_back({0, op.src, op.digest, hashed[0].digest});
    std::vector<RangeState> recorded{{op.src, op.digest, {}, std::nullopt, BlobEncoding::kRaw}};
    std::vector<RangeState> replayed{{op.src, hashed[0].digest, {}, std::nullopt, BlobEncoding::kRaw}};
    m.comparison = StateComparison::compare(recorded, replayed, options_.elementType);
    out_.mismatch = std::move(m);
  }

  CUfunction functionOf(const KernelLaunch& k) {
    auto mod = modules_.find(k.module);
    if (mod == modules_.end()) {
      const ModuleImage& image = plan_.modules.at(k.module);
      const std::vector<uint8_t> bytes = reader_.readBlob(image.image);
      mod = modules_.emplace(k.module, s_.loadModule(plan_.tracePath, k.module, bytes)).first;
    }
    const auto key = std::make_pair(k.module, k.function);
    auto fn = functions_.find(key);
    if (fn == functions_.end()) {
      fn = functions_.emplace(key, s_.function(mod->second, k.function, plan_.tracePath, k.module)).first;
    }
    return fn->second;
  }

  void launch(const StreamOp& op) {
    const KernelLaunch& k = *op.launch;
    std::vector<std::string> warnings;
    PreparedLaunch prepared = s_.prepareLaunch(
        functionOf(k), k, relocateParams(k, op.seq, plan_.allocationStarts, map_), map_, warnings);
    for (std::string& w : warnings) {
      if (std::find(launchWarnings_.begin(), launchWarnings_.end(), w) == launchWarnings_.end()) {
        launchWarnings_.push_back(std::move(w));
      }
    }
    s_.check(s_.launch(prepared),
             fmt::format("event #{}: launching {} grid ({},{},{}) block ({},{},{})", op.seq, k.function, k.grid.x,
                         k.grid.y, k.grid.z, k.block.x, k.block.y, k.block.z));
    const uint64_t index = out_.launches++;
    out_.unhashedLaunches += !k.hashed;
    if (!op.checked) return;

    std::vector<size_t> outputs;
    std::vector<kernels::HashRequest> requests;
    for (size_t i = 0; i < k.outputs.size(); ++i) {
      if (k.outputs[i].range.size == 0) continue;
      outputs.push_back(i);
      requests.push_back({map_.translate(k.outputs[i].range.address), k.outputs[i].range.size});
    }
    const std::vector<kernels::HashResult> hashed =
        hash(op, requests, fmt::format("launch #{} ({})", op.seq, k.function));
    ++out_.checkedLaunches;
    StreamMismatch m;
    m.seq = op.seq;
    m.kind = StreamOpKind::kLaunch;
    m.launchIndex = index;
    m.launchNumber = k.number != trace::kNoLaunchNumber ? k.number : index;
    m.function = k.function;
    m.outputsChecked = outputs.size();
    std::vector<size_t> differing;  // positions in `requests`
    for (size_t j = 0; j < outputs.size(); ++j) {
      if (hashed[j].digest != k.outputs[outputs[j]].digest) differing.push_back(j);
    }
    if (differing.empty()) {
      ++out_.matchingLaunches;
      return;
    }
    // The replay ends here, so the outputs are still as the launch left
    // them: hashed again with chunk digests to locate the differences.
    std::vector<kernels::HashRequest> again;
    for (size_t j : differing) again.push_back(requests[j]);
    const std::vector<kernels::HashResult> chunked =
        hash(op, again, fmt::format("launch #{} ({})", op.seq, k.function), true);
    std::vector<RangeState> recorded, replayed;
    for (size_t d = 0; d < differing.size(); ++d) {
      const size_t j = differing[d];
      const RangeDigest& o = k.outputs[outputs[j]];
      m.outputs.push_back({outputs[j], o.range, o.digest, hashed[j].digest});
      RangeState r{o.range, o.digest, o.chunkDigests, std::nullopt, BlobEncoding::kRaw};
      RangeState p{o.range, hashed[j].digest, chunked[d].chunkDigests, std::nullopt, BlobEncoding::kRaw};
      // Chunk digests are compared only where the recording kept them;
      // elements where it kept the bytes.
      if (r.chunkDigests.empty()) p.chunkDigests.clear();
      if (o.snapshot && o.snapshot->size == o.range.size && reader_.hasBlob(o.snapshot->id)) {
        r.bytes = reader_.readBlob(*o.snapshot);
        r.encoding = o.snapshot->encoding;
        p.bytes = s_.download(requests[j].address, requests[j].length, "output");
      }
      recorded.push_back(std::move(r));
      replayed.push_back(std::move(p));
    }
    m.comparison = StateComparison::compare(recorded, replayed, options_.elementType);
    out_.mismatch = std::move(m);
  }

  // Digests of `requests`, with chunk digests when `chunks` is set (only
  // for a mismatch's report: the check itself needs the digests alone).
  std::vector<kernels::HashResult> hash(const StreamOp& op, const std::vector<kernels::HashRequest>& requests,
                                        const std::string& at, bool chunks = false) {
    const auto start = Clock::now();
    std::vector<kernels::HashResult> hashed;
    // The hash synchronises the stream: a fault of the operation (or of an
    // unchecked one before it) shows here.
    if (CUresult r = s_.hasher().hashNow(s_.stream(), requests, hashed, chunks); r != CUDA_SUCCESS) fail(at, r);
    syncedSeq_ = op.seq;
    out_.hashMs += msSince(start);
    return hashed;
  }

  const TraceReader& reader_;
  const StreamPlan& plan_;
  const StreamReplayOptions& options_;
  DeviceSession& s_;
  const AddressMap& map_;
  StreamOutcome& out_;
  std::map<uint32_t, CUmodule> modules_;
  std::map<std::pair<uint32_t, std::string>, CUfunction> functions_;
  std::vector<std::string> launchWarnings_;
  uint64_t storedPointerCopies_ = 0;
  std::pair<uint64_t, StoredPointers> firstStoredPointers_;
  uint64_t syncedSeq_ = 0;
};

// Replays the stream again from zeroed memory up to the mismatching launch
// and compares its inputs with the recorded input digests, so that the report
// can say whether the kernel got what it got in the recording.
void checkMismatchInputs(const TraceReader& reader, const StreamPlan& plan, const StreamReplayOptions& options,
                         DeviceSession& s, const AddressMap& map, StreamOutcome& out) {
  StreamMismatch& m = *out.mismatch;
  std::optional<KernelLaunch> launch;
  reader.forEach(
      [&](const Event& e) {
        if (const auto* k = std::get_if<KernelLaunch>(&e.payload); k && e.seq == m.seq) launch = *k;
        return false;
      },
      m.seq);
  if (!launch) return;
  std::vector<kernels::HashRequest> requests;
  std::vector<size_t> recorded;  // indices into the launch's inputs
  for (size_t i = 0; i < launch->inputs.size(); ++i) {
    const RangeDigest& in = launch->inputs[i];
    if (in.range.size == 0) continue;
    requests.push_back({map.translate(in.range.address), in.range.size});
    recorded.push_back(i);
  }
  if (requests.empty()) return;
  s.zeroReserved();
  s.check(s.api.cuStreamSynchronize(s.stream()), "zeroing the reserved memory");
  StreamOutcome again;
  again.relocated = out.relocated;
  StreamRunner runner(reader, plan, options, s, map, again);
  reader.forEach(
      [&](const Event& e) {
        if (e.seq >= m.seq) return false;
        const StreamStep step = streamStep(e);
        return !step.op || runner.run(*step.op);
      },
      plan.firstSeq);
  if (again.mismatch) {
    m.rerunDifferedAt = again.mismatch->seq;
    return;
  }
  runner.finish();
  std::vector<kernels::HashResult> hashed;
  const auto start = Clock::now();
  s.check(s.hasher().hashNow(s.stream(), requests, hashed, false),
          fmt::format("hashing the inputs of launch #{}", m.seq));
  out.hashMs += msSince(start);
  m.inputsChecked = true;
  m.inputRanges = requests.size();
  for (size_t i = 0; i < requests.size(); ++i) {
    const RangeDigest& in = launch->inputs[recorded[i]];
    if (hashed[i].digest != in.digest) m.inputs.push_back({recorded[i], in.range, in.digest, hashed[i].digest});
  }
}

}  // namespace

const char* jsonName(StreamVerdict verdict) {
  switch (verdict) {
    case StreamVerdict::kEqual: return "equal";
    case StreamVerdict::kDifferent: return "different";
    case StreamVerdict::kStopped: return "stopped";
  }
  return "?";
}

int exitCode(StreamVerdict verdict) {
  switch (verdict) {
    case StreamVerdict::kEqual: return 0;
    case StreamVerdict::kDifferent: return 1;
    case StreamVerdict::kStopped: return 2;
  }
  return 2;
}

StreamOutcome executeStreamReplay(const TraceReader& reader, const StreamPlan& plan,
                                  const StreamReplayOptions& options) {
  kernels::DriverApi api;
  ReplayDriver drv;
  loadDriver(api, drv);
  return executeStreamReplay(reader, plan, options, api, drv);
}

StreamOutcome executeStreamReplay(const TraceReader& reader, const StreamPlan& plan,
                                  const StreamReplayOptions& options, const kernels::DriverApi& api,
                                  const ReplayDriver& drv) {
  const auto t0 = Clock::now();
  StreamOutcome out;
  out.warnings = plan.warnings;
  DeviceSession s(api, drv);
  s.open(plan.tracePath, plan.recordedArch, plan.recordedGpu, options.device, out.warnings);
  out.machine = s.machine();

  // Address space first, before any image, the hash kernel or anything else
  // can take the recorded addresses.
  AddressMap map;
  out.placements = s.place(plan.ranges, options.forceRelocate, map, out.warnings);
  out.relocated = map.moved();
  s.createStream();
  // Memory the program had not written held whatever it held then; here it
  // starts zeroed, the same on every replay.
  s.zeroReserved();
  s.check(api.cuStreamSynchronize(s.stream()), "zeroing the reserved memory");
  out.setupMs = msSince(t0);

  const auto replayStart = Clock::now();
  StreamRunner runner(reader, plan, options, s, map, out);
  if (plan.events > 0) {
    reader.forEach(
        [&](const Event& e) {
          if (e.seq > plan.lastSeq) return false;
          const StreamStep step = streamStep(e);
          return !step.op || runner.run(*step.op);
        },
        plan.firstSeq);
  }
  if (!out.mismatch) runner.finish();
  if (out.mismatch && out.mismatch->kind == StreamOpKind::kLaunch) {
    checkMismatchInputs(reader, plan, options, s, map, out);
  }
  out.replayMs = msSince(replayStart);
  for (std::string& w : runner.warnings()) out.warnings.push_back(std::move(w));
  out.verdict = out.mismatch ? StreamVerdict::kDifferent : plan.stopSeq ? StreamVerdict::kStopped : StreamVerdict::kEqual;
  out.environment = environmentDifferences(plan.header, plan.recordedGpu, out.machine);
  out.totalMs = msSince(t0);
  return out;
}

}  // namespace gpurr::replay
