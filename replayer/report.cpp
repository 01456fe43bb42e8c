// Text and JSON views of replay plans and outcomes (see report.h).
#include "replayer/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace gpurr::replay {
namespace {
using namespace gpurr::trace;

std::string hex16(uint64_t v) { return fmt::format("{:016x}", v); }
std::string dim(const Dim3& d) { return fmt::format("({},{},{})", d.x, d.y, d.z); }

void line(std::string& out, std::string_view key, const std::string& value) {
  out += fmt::format("  {:<9} {}\n", key, value);
}

Json rangeJson(const DeviceRange& r) {
  return Json{{"address", r.address}, {"size", r.size}, {"allocation", r.allocation}, {"offset", r.offset}};
}

Json elementsJson(const ElementDiff& d) {
  return Json{{"type", toString(d.type)},        {"assumed", d.assumed},
              {"elements", d.elements},          {"differing", d.differing},
              {"firstDiffering", d.firstDiffering}, {"maxAbsDiff", d.maxAbs},
              {"maxUlp", d.maxUlp},              {"nanMismatches", d.nanMismatches},
              {"infMismatches", d.infMismatches}};
}

Json comparisonJson(const StateComparison& c) {
  Json ranges = Json::array();
  for (const RangeComparison& r : c.ranges()) {
    Json j{{"range", rangeJson(r.range)}, {"equal", r.equal}, {"digestA", hex16(r.digestA)},
           {"digestB", hex16(r.digestB)}};
    if (r.chunks > 0) {
      j["chunks"] = r.chunks;
      j["differingChunks"] = r.differingChunks;
      j["firstDifferingChunk"] = r.firstDifferingChunk;
    }
    if (r.elements) j["elements"] = elementsJson(*r.elements);
    ranges.push_back(std::move(j));
  }
  return Json{{"matches", c.matches()}, {"differing", c.differing()}, {"ranges", ranges}};
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Json machineJson(const MachineInfo& m) {
  return Json{{"ordinal", m.ordinal}, {"name", m.name},       {"uuid", m.uuid},
              {"ccMajor", m.ccMajor}, {"ccMinor", m.ccMinor}, {"smCount", m.smCount},
              {"driverVersion", m.driverVersion}};
}

Json placementsJson(const std::vector<Placement>& placements) {
  Json out = Json::array();
  for (const Placement& p : placements) {
    out.push_back({{"recordedStart", p.recordedStart}, {"size", p.size}, {"newStart", p.newStart},
                   {"relocated", p.relocated()}, {"allocations", p.allocations}});
  }
  return out;
}

std::string regionsText(const std::vector<Placement>& placements) {
  uint64_t bytes = 0;
  size_t moved = 0;
  for (const Placement& p : placements) {
    bytes += p.size;
    moved += p.relocated();
  }
  std::string s = fmt::format("{} region(s), {} reserved, ", placements.size(), humanBytes(bytes));
  if (moved == 0) return s + "all at their recorded addresses";
  return s + fmt::format("{} relocated", moved);
}

}  // namespace

std::string formatPlan(const ReplayPlan& plan) {
  std::string out = fmt::format("replay plan for launch #{} of {} (launch {} of the trace)\n", plan.seq,
                                plan.tracePath, plan.launchIndex);
  const KernelLaunch& k = plan.launch;
  line(out, "kernel", k.function);
  if (plan.origin) line(out, "op", describe(*plan.origin));
  line(out, "shape", fmt::format("grid {} block {}{} dynamic shared {}", dim(k.grid), dim(k.block),
                                 k.cluster.x ? " cluster " + dim(k.cluster) : "", humanBytes(k.sharedMemBytes)));
  line(out, "params", fmt::format("{} in {} parameter(s), {} pointer word(s), {} launch attribute(s)",
                                  humanBytes(k.params.size()), k.paramLayout.size(), k.pointers.size(),
                                  k.attributes.size()));
  line(out, "module", fmt::format("#{} sm_{} image {} (blob {})", plan.module.ordinal, plan.module.arch,
                                  humanBytes(plan.module.image.size), plan.module.image.id.hex()));
  line(out, "GPU", plan.recordedGpu ? fmt::format("recorded on {} (sm_{})", plan.recordedGpu->name, plan.recordedArch)
                                    : fmt::format("recorded on sm_{}", plan.recordedArch));
  for (const ReservedRange& r : plan.ranges) {
    line(out, "reserve",
         fmt::format("{} {:#x} {}{}{}", r.allocation ? fmt::format("alloc#{}", r.allocation) : std::string("range"),
                     r.address, humanBytes(r.size), r.restored ? "" : " (zero-filled)",
                     r.freedBeforeLaunch ? " (freed before the launch)" : ""));
  }
  for (const InputRestore& in : plan.inputs) {
    line(out, "restore", fmt::format("{} from blob {}", describeRange(in.range), in.snapshot.id.hex()));
  }
  for (const OutputCheck& o : plan.outputs) {
    line(out, "compare", fmt::format("{} {}{}", describeRange(o.range),
                                     o.recorded ? "digest " + hex16(o.digest) : std::string("between runs"),
                                     o.snapshot ? " and snapshot" : ""));
  }
  for (const std::string& w : plan.warnings) out += "  warning: " + w + "\n";
  return out;
}

Json planJson(const ReplayPlan& plan) {
  const KernelLaunch& k = plan.launch;
  Json ranges = Json::array(), inputs = Json::array(), outputs = Json::array(), pointers = Json::array();
  for (const ReservedRange& r : plan.ranges) {
    ranges.push_back({{"allocation", r.allocation}, {"address", r.address}, {"size", r.size},
                      {"kind", toString(r.kind)}, {"restored", r.restored}, {"freedBeforeLaunch", r.freedBeforeLaunch}});
  }
  for (const InputRestore& in : plan.inputs) {
    inputs.push_back({{"range", rangeJson(in.range)}, {"snapshot", in.snapshot.id.hex()}, {"digest", hex16(in.digest)}});
  }
  for (const OutputCheck& o : plan.outputs) {
    Json j{{"range", rangeJson(o.range)}, {"recorded", o.recorded}};
    if (o.recorded) j["digest"] = hex16(o.digest);
    if (o.snapshot) j["snapshot"] = o.snapshot->id.hex();
    outputs.push_back(std::move(j));
  }
  for (const PointerParam& p : k.pointers) {
    pointers.push_back({{"byteOffset", p.byteOffset}, {"allocation", p.allocation}, {"offset", p.offset}});
  }
  Json j{{"trace", plan.tracePath},
         {"seq", plan.seq},
         {"launchIndex", plan.launchIndex},
         {"function", k.function},
         {"grid", {k.grid.x, k.grid.y, k.grid.z}},
         {"block", {k.block.x, k.block.y, k.block.z}},
         {"cluster", {k.cluster.x, k.cluster.y, k.cluster.z}},
         {"sharedMemBytes", k.sharedMemBytes},
         {"paramBytes", k.params.size()},
         {"pointers", pointers},
         {"module", {{"ordinal", plan.module.ordinal}, {"arch", plan.module.arch}, {"image", plan.module.image.id.hex()},
                     {"size", plan.module.image.size}}},
         {"recordedDevice", plan.recordedDevice},
         {"recordedArch", plan.recordedArch},
         {"ranges", ranges},
         {"inputs", inputs},
         {"outputs", outputs},
         {"warnings", plan.warnings}};
  return j;
}

std::string verdictLine(const ReplayOutcome& o) {
  const Verdict& v = o.verdict;
  switch (v.kind) {
    case VerdictKind::kEqual:
      return fmt::format("deterministic and equal to the recording: {} of {} run(s) identical", v.runs, v.runs);
    case VerdictKind::kDifferent:
      return fmt::format("deterministic over {} run(s), but different from the recording", v.runs);
    case VerdictKind::kNondeterministic:
      return fmt::format("nondeterministic: {} distinct results in {} runs ({} equal to the recording)", v.distinct,
                         v.runs, v.runsMatchingRecording);
    case VerdictKind::kUnrecorded:
      return fmt::format("deterministic over {} run(s); the trace holds no outputs to compare with", v.runs);
  }
  return "?";
}

std::string formatOutcome(const ReplayPlan& plan, const ReplayOutcome& o) {
  std::string out = fmt::format("replay of launch #{} from {}\n", plan.seq, plan.tracePath);
  const KernelLaunch& k = plan.launch;
  line(out, "kernel", fmt::format("{}  grid {} block {}", k.function, dim(k.grid), dim(k.block)));
  if (plan.origin) line(out, "op", describe(*plan.origin));
  line(out, "GPU", fmt::format("{} {} (sm_{}{}), driver CUDA {}", o.machine.ordinal, o.machine.name, o.machine.ccMajor,
                               o.machine.ccMinor, driverVersionText(o.machine.driverVersion)));
  line(out, "memory", regionsText(o.placements));
  line(out, "inputs", fmt::format("{} range(s), {}, restored before each run from {}", plan.inputs.size(),
                                  humanBytes(o.restoredBytes), o.restoredFromDevice ? "device copies" : "host memory"));
  line(out, "verdict", verdictLine(o));
  const Verdict& v = o.verdict;
  if (v.kind == VerdictKind::kNondeterministic) {
    std::vector<uint32_t> counts = v.runsPerResult;
    std::sort(counts.rbegin(), counts.rend());
    std::string spread;
    for (size_t i = 0; i < counts.size() && i < 8; ++i) spread += (i ? ", " : "") + std::to_string(counts[i]);
    if (counts.size() > 8) spread += ", ...";
    line(out, "results", fmt::format("runs per distinct result: {}", spread));
    std::string varying;
    for (size_t i : v.varyingOutputs) varying += (varying.empty() ? "" : ", ") + describeRange(plan.outputs[i].range);
    line(out, "varying", varying);
    if (o.acrossRuns) {
      for (const std::string& d : o.acrossRuns->describe()) {
        line(out, "runs", fmt::format("1 vs {}: {}", o.acrossRunsOther + 1, d));
      }
    }
    line(out, "cause", "same inputs, parameters and code give different outputs: the kernel is intrinsically "
                       "nondeterministic (atomics, split reductions or races)");
  }
  if (o.vsRecording && !o.vsRecording->matches()) {
    for (const std::string& d : o.vsRecording->describe()) line(out, "recording", "run 1 vs recorded: " + d);
  }
  if (v.kind == VerdictKind::kDifferent) {
    if (o.environment.empty()) {
      line(out, "machine", "same GPU model and driver as the recording: the recorded run was one of several "
                           "possible results, or the recording missed part of what the kernel read");
    } else {
      for (const std::string& e : o.environment) line(out, "machine", e);
    }
  }
  if (!o.kernelMs.empty()) {
    line(out, "time", fmt::format("kernel {:.3f} ms (median of {}), restore {:.3f} ms, hash {:.3f} ms, setup {:.1f} ms",
                                  median(o.kernelMs), o.kernelMs.size(), median(o.restoreMs), median(o.hashMs),
                                  o.setupMs));
  }
  for (const std::string& w : o.warnings) out += "  warning: " + w + "\n";
  return out;
}

Json outcomeJson(const ReplayPlan& plan, const ReplayOutcome& o) {
  const Verdict& v = o.verdict;
  const Json placements = placementsJson(o.placements);
  Json runs = Json::array();
  for (const auto& digests : o.runs) {
    Json d = Json::array();
    for (uint64_t x : digests) d.push_back(hex16(x));
    runs.push_back(std::move(d));
  }
  Json j{{"trace", plan.tracePath},
         {"seq", plan.seq},
         {"function", plan.launch.function},
         {"verdict", jsonName(v.kind)},
         {"summary", verdictLine(o)},
         {"runs", v.runs},
         {"distinctResults", v.distinct},
         {"runsPerResult", v.runsPerResult},
         {"runsMatchingRecording", v.runsMatchingRecording},
         {"varyingOutputs", v.varyingOutputs},
         {"differingOutputs", v.differingOutputs},
         {"gpu", machineJson(o.machine)},
         {"environmentDifferences", o.environment},
         {"relocated", o.relocated},
         {"placements", placements},
         {"restoredBytes", o.restoredBytes},
         {"restoredFromDevice", o.restoredFromDevice},
         {"digests", runs},
         {"kernelMs", o.kernelMs},
         {"restoreMs", o.restoreMs},
         {"hashMs", o.hashMs},
         {"setupMs", o.setupMs},
         {"warnings", o.warnings}};
  j["vsRecording"] = o.vsRecording ? comparisonJson(*o.vsRecording) : Json(nullptr);
  j["acrossRuns"] = o.acrossRuns ? comparisonJson(*o.acrossRuns) : Json(nullptr);
  if (o.acrossRuns) j["acrossRunsOther"] = o.acrossRunsOther;
  return j;
}


// ---------------------------------------------------------------- whole stream

namespace {

std::string count(uint64_t n) {
  std::string digits = std::to_string(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return digits;
}

std::string recordedOn(const StreamPlan& plan) {
  return plan.recordedGpu ? fmt::format("{} (sm_{})", plan.recordedGpu->name, plan.recordedArch)
                          : fmt::format("sm_{}", plan.recordedArch);
}

std::string opText(const StreamOp& op) {
  switch (op.kind) {
    case StreamOpKind::kCopyToDevice:
      return fmt::format("copy to device   {} from blob {}", describeRange(op.dst), op.data ? op.data->id.hex() : "?");
    case StreamOpKind::kCopyOnDevice:
      return fmt::format("copy on device   {} -> {}", describeRange(op.src), describeRange(op.dst));
    case StreamOpKind::kCopyToHost:
      return fmt::format("copy to host     {}{}", describeRange(op.src),
                         op.checked ? " (digest " + hex16(op.digest) + " checked)" : "");
    case StreamOpKind::kMemset:
      return fmt::format("memset           {} = {:#x} ({}-byte elements)", describeRange(op.dst), op.value,
                         op.elementSize);
    case StreamOpKind::kLaunch:
      return fmt::format("launch           {} (module #{}){}", op.function, op.module,
                         op.checked ? "" : " (not hashed in the recording: run, not checked)");
  }
  return "?";
}

Json opJson(const StreamOp& op) {
  Json j{{"seq", op.seq}, {"kind", toString(op.kind)}};
  switch (op.kind) {
    case StreamOpKind::kCopyToDevice:
      j["dst"] = rangeJson(op.dst);
      j["data"] = op.data ? Json(op.data->id.hex()) : Json(nullptr);
      break;
    case StreamOpKind::kCopyOnDevice:
      j["src"] = rangeJson(op.src);
      j["dst"] = rangeJson(op.dst);
      break;
    case StreamOpKind::kCopyToHost:
      j["src"] = rangeJson(op.src);
      j["checked"] = op.checked;
      if (op.checked) j["digest"] = hex16(op.digest);
      break;
    case StreamOpKind::kMemset:
      j["dst"] = rangeJson(op.dst);
      j["value"] = op.value;
      j["elementSize"] = op.elementSize;
      break;
    case StreamOpKind::kLaunch:
      j["function"] = op.function;
      j["module"] = op.module;
      j["checked"] = op.checked;
      break;
  }
  return j;
}

uint64_t reservedBytes(const StreamPlan& plan) {
  uint64_t bytes = 0;
  for (const ReservedRange& r : plan.ranges) bytes += r.size;
  return bytes;
}

// What to run next to look at a mismatching launch alone.
std::string launchSuggestion(const StreamPlan& plan, uint64_t seq) {
  return fmt::format("gpurr replay {} --launch {} --repeat 50", plan.tracePath, seq);
}

}  // namespace

std::string formatStreamPlan(const StreamPlan& plan) {
  std::string out = fmt::format("whole-stream replay plan for {} (recorded on {})\n", plan.tracePath, recordedOn(plan));
  if (plan.events == 0) {
    line(out, "events", fmt::format("none of the trace's {} to replay", count(plan.traceEvents)));
  } else {
    line(out, "events", fmt::format("#{}..#{}: {} of the trace's {}{}", plan.firstSeq, plan.lastSeq, count(plan.events),
                                    count(plan.traceEvents), plan.until ? fmt::format(" (--until {})", *plan.until) : ""));
  }
  line(out, "launches", fmt::format("{} ({} checked against recorded output digests{})", count(plan.launches),
                                    count(plan.checkedLaunches),
                                    plan.hostFunctions ? fmt::format(", {} host functions skipped", plan.hostFunctions)
                                                       : std::string()));
  line(out, "copies", fmt::format("{} to the device ({} restored from the recording), {} on the device, {} to the host "
                                  "({} checked)",
                                  count(plan.copiesToDevice), humanBytes(plan.bytesToDevice),
                                  count(plan.copiesOnDevice), count(plan.copiesToHost),
                                  count(plan.checkedCopiesToHost)));
  line(out, "memsets", count(plan.memsets));
  line(out, "memory", fmt::format("{} range(s), {} to reserve at the recorded addresses", plan.ranges.size(),
                                  humanBytes(reservedBytes(plan))));
  uint64_t imageBytes = 0;
  for (const auto& [ordinal, m] : plan.modules) imageBytes += m.image.size;
  line(out, "modules", fmt::format("{} image(s) to load, {}", plan.modules.size(), humanBytes(imageBytes)));
  for (size_t i = 0; i < plan.preview.size(); ++i) {
    line(out, i == 0 ? "first" : "", fmt::format("#{:<6} {}", plan.preview[i].seq, opText(plan.preview[i])));
  }
  if (plan.operations > plan.preview.size()) {
    line(out, "", fmt::format("... and {} more operation(s)", count(plan.operations - plan.preview.size())));
  }
  if (plan.stopSeq) {
    line(out, "stop", fmt::format("before #{}: {}", *plan.stopSeq, plan.stopReason));
  }
  for (const std::string& w : plan.warnings) out += "  warning: " + w + "\n";
  return out;
}

Json streamPlanJson(const StreamPlan& plan) {
  Json ranges = Json::array(), modules = Json::array(), preview = Json::array();
  for (const ReservedRange& r : plan.ranges) {
    ranges.push_back({{"allocation", r.allocation}, {"address", r.address}, {"size", r.size}, {"kind", toString(r.kind)}});
  }
  for (const auto& [ordinal, m] : plan.modules) {
    modules.push_back({{"ordinal", ordinal}, {"arch", m.arch}, {"image", m.image.id.hex()}, {"size", m.image.size}});
  }
  for (const StreamOp& op : plan.preview) preview.push_back(opJson(op));
  return Json{{"trace", plan.tracePath},
              {"mode", "stream"},
              {"until", plan.until ? Json(*plan.until) : Json(nullptr)},
              {"recordedDevice", plan.recordedDevice},
              {"recordedArch", plan.recordedArch},
              {"traceEvents", plan.traceEvents},
              {"events", plan.events},
              {"firstSeq", plan.firstSeq},
              {"lastSeq", plan.lastSeq},
              {"operations", plan.operations},
              {"launches", plan.launches},
              {"checkedLaunches", plan.checkedLaunches},
              {"hostFunctions", plan.hostFunctions},
              {"copiesToDevice", plan.copiesToDevice},
              {"bytesToDevice", plan.bytesToDevice},
              {"copiesOnDevice", plan.copiesOnDevice},
              {"copiesToHost", plan.copiesToHost},
              {"checkedCopiesToHost", plan.checkedCopiesToHost},
              {"memsets", plan.memsets},
              {"ranges", ranges},
              {"reservedBytes", reservedBytes(plan)},
              {"modules", modules},
              {"preview", preview},
              {"stopSeq", plan.stopSeq ? Json(*plan.stopSeq) : Json(nullptr)},
              {"stopReason", plan.stopSeq ? Json(plan.stopReason) : Json(nullptr)},
              {"warnings", plan.warnings}};
}

std::string streamVerdictLine(const StreamPlan& plan, const StreamOutcome& o) {
  switch (o.verdict) {
    case StreamVerdict::kEqual:
      if (o.checkedLaunches == 0) {
        return fmt::format("equal, but nothing was checked: none of the {} replayed launch(es) has recorded output "
                           "digests",
                           count(o.launches));
      }
      return fmt::format("equal: all {} checked launch(es) match the recording ({} replayed)", count(o.checkedLaunches),
                         count(o.launches));
    case StreamVerdict::kDifferent: {
      const StreamMismatch& m = *o.mismatch;
      if (m.kind == StreamOpKind::kLaunch) {
        return fmt::format("different at launch #{} ({}): {} earlier checked launch(es) matched", m.seq, m.function,
                           count(o.matchingLaunches));
      }
      return fmt::format("different at the copy to the host #{}: what the program read back differs ({} earlier "
                         "checked launch(es) matched)",
                         m.seq, count(o.matchingLaunches));
    }
    case StreamVerdict::kStopped:
      return fmt::format("stopped before event #{}: all {} checked launch(es) up to it match the recording",
                         plan.stopSeq.value_or(0), count(o.checkedLaunches));
  }
  return "?";
}

std::string formatStreamOutcome(const StreamPlan& plan, const StreamOutcome& o) {
  std::string out = fmt::format("whole-stream replay of {}\n", plan.tracePath);
  line(out, "GPU", fmt::format("{} {} (sm_{}{}), driver CUDA {}", o.machine.ordinal, o.machine.name, o.machine.ccMajor,
                               o.machine.ccMinor, driverVersionText(o.machine.driverVersion)));
  line(out, "memory", regionsText(o.placements));
  line(out, "verdict", streamVerdictLine(plan, o));
  line(out, "replayed", fmt::format("{} operation(s) up to #{}: {} launch(es), {} checked, {} matching{}; {} copied to "
                                    "the device from the recording",
                                    count(o.operations), o.lastSeq, count(o.launches), count(o.checkedLaunches),
                                    count(o.matchingLaunches),
                                    o.unhashedLaunches ? fmt::format(", {} not hashed in the recording (run unchecked)",
                                                                     count(o.unhashedLaunches))
                                                       : std::string(),
                                    humanBytes(o.bytesRestored)));
  if (o.checkedCopiesToHost > 0) {
    line(out, "readback", fmt::format("{} of {} checked copies to the host match", count(o.matchingCopiesToHost),
                                      count(o.checkedCopiesToHost)));
  }
  if (o.mismatch) {
    const StreamMismatch& m = *o.mismatch;
    for (const DigestMismatch& d : m.outputs) {
      line(out, m.kind == StreamOpKind::kLaunch ? "output" : "source",
           fmt::format("{}{}: recorded {}, replayed {}", m.kind == StreamOpKind::kLaunch ? fmt::format("#{} ", d.output) : "",
                       describeRange(d.range), hex16(d.recorded), hex16(d.replayed)));
    }
    if (m.comparison) {
      for (const std::string& d : m.comparison->describe()) line(out, "differs", d);
    }
    if (m.kind == StreamOpKind::kLaunch) {
      line(out, "matching", fmt::format("{} of {} output(s) of this launch", m.outputsChecked - m.outputs.size(),
                                        m.outputsChecked));
    }
    if (m.inputsChecked && m.inputs.empty()) {
      line(out, "inputs", fmt::format("equal to the recording ({} range(s), the stream replayed again up to the "
                                      "launch): same inputs, different outputs: the kernel is nondeterministic on "
                                      "them, or this GPU and driver compute it differently",
                                      m.inputRanges));
    } else if (m.inputsChecked) {
      for (const DigestMismatch& d : m.inputs) {
        line(out, "input", fmt::format("#{} {}: recorded {}, replayed {}", d.output, describeRange(d.range),
                                       hex16(d.recorded), hex16(d.replayed)));
      }
      line(out, "inputs", fmt::format("{} of {} differ from the recording before the launch: the state diverged "
                                      "where no check saw it (memory the program had not written, host writes to "
                                      "mapped or managed memory, or a launch the recording did not hash)",
                                      m.inputs.size(), m.inputRanges));
    } else if (m.rerunDifferedAt) {
      line(out, "rerun", fmt::format("a second replay up to the launch differed earlier, at #{}: the replayed stream "
                                     "is not deterministic",
                                     *m.rerunDifferedAt));
    }
    if (!o.environment.empty()) {
      for (const std::string& e : o.environment) line(out, "machine", e);
    } else {
      line(out, "machine", "same GPU model and driver as the recording");
    }
    if (m.kind == StreamOpKind::kLaunch) {
      line(out, "next", fmt::format("{} re-runs it alone from recorded inputs (they need snapshots: `gpurr record "
                                    "--full --snapshot {} -- {}`)",
                                    launchSuggestion(plan, m.seq), m.launchNumber, commandLineOf(plan.header)));
    }
  } else if (plan.stopSeq) {
    line(out, "stop", fmt::format("#{}: {}", *plan.stopSeq, plan.stopReason));
  }
  line(out, "time", fmt::format("replay {:.1f} ms (hashing {:.1f} ms), setup {:.1f} ms", o.replayMs, o.hashMs, o.setupMs));
  for (const std::string& w : o.warnings) out += "  warning: " + w + "\n";
  return out;
}

Json streamOutcomeJson(const StreamPlan& plan, const StreamOutcome& o) {
  Json mismatch = nullptr;
  if (o.mismatch) {
    const StreamMismatch& m = *o.mismatch;
    Json outputs = Json::array();
    for (const DigestMismatch& d : m.outputs) {
      outputs.push_back({{"output", d.output}, {"range", rangeJson(d.range)}, {"recorded", hex16(d.recorded)},
                         {"replayed", hex16(d.replayed)}});
    }
    mismatch = Json{{"seq", m.seq},
                    {"kind", toString(m.kind)},
                    {"launchIndex", m.launchIndex},
                    {"function", m.function},
                    {"matchedBefore", o.matchingLaunches},
                    {"outputsChecked", m.outputsChecked},
                    {"outputs", outputs},
                    {"comparison", m.comparison ? comparisonJson(*m.comparison) : Json(nullptr)},
                    {"suggestion", m.kind == StreamOpKind::kLaunch ? Json(launchSuggestion(plan, m.seq)) : Json(nullptr)}};
    Json inputs = Json::array();
    for (const DigestMismatch& d : m.inputs) {
      inputs.push_back({{"input", d.output}, {"range", rangeJson(d.range)}, {"recorded", hex16(d.recorded)},
                        {"replayed", hex16(d.replayed)}});
    }
    mismatch["inputsChecked"] = m.inputsChecked;
    mismatch["inputRanges"] = m.inputRanges;
    mismatch["differingInputs"] = inputs;
    mismatch["rerunDifferedAt"] = m.rerunDifferedAt ? Json(*m.rerunDifferedAt) : Json(nullptr);
  }
  return Json{{"trace", plan.tracePath},
              {"mode", "stream"},
              {"verdict", jsonName(o.verdict)},
              {"summary", streamVerdictLine(plan, o)},
              {"until", plan.until ? Json(*plan.until) : Json(nullptr)},
              {"stopSeq", plan.stopSeq ? Json(*plan.stopSeq) : Json(nullptr)},
              {"stopReason", plan.stopSeq ? Json(plan.stopReason) : Json(nullptr)},
              {"operations", o.operations},
              {"lastSeq", o.lastSeq},
              {"launches", o.launches},
              {"checkedLaunches", o.checkedLaunches},
              {"matchingLaunches", o.matchingLaunches},
              {"unhashedLaunches", o.unhashedLaunches},
              {"checkedCopiesToHost", o.checkedCopiesToHost},
              {"matchingCopiesToHost", o.matchingCopiesToHost},
              {"bytesRestored", o.bytesRestored},
              {"mismatch", mismatch},
              {"gpu", machineJson(o.machine)},
              {"environmentDifferences", o.environment},
              {"relocated", o.relocated},
              {"placements", placementsJson(o.placements)},
              {"setupMs", o.setupMs},
              {"replayMs", o.replayMs},
              {"hashMs", o.hashMs},
              {"totalMs", o.totalMs},
              {"warnings", o.warnings}};
}

}  // namespace gpurr::replay
