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

std::string regionsText(const ReplayOutcome& o) {
  uint64_t bytes = 0;
  size_t moved = 0;
  for (const Placement& p : o.placements) {
    bytes += p.size;
    moved += p.relocated();
  }
  std::string s = fmt::format("{} region(s), {} reserved, ", o.placements.size(), humanBytes(bytes));
  if (moved == 0) return s + "all at their recorded addresses";
  return s + fmt::format("{} relocated", moved);
}

}  // namespace

std::string formatPlan(const ReplayPlan& plan) {
  std::string out = fmt::format("replay plan for launch #{} of {} (launch {} of the trace)\n", plan.seq,
                                plan.tracePath, plan.launchIndex);
  const KernelLaunch& k = plan.launch;
  line(out, "kernel", k.function);
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
  line(out, "GPU", fmt::format("{} {} (sm_{}{}), driver CUDA {}", o.machine.ordinal, o.machine.name, o.machine.ccMajor,
                               o.machine.ccMinor, driverVersionText(o.machine.driverVersion)));
  line(out, "memory", regionsText(o));
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
  Json placements = Json::array();
  for (const Placement& p : o.placements) {
    placements.push_back({{"recordedStart", p.recordedStart}, {"size", p.size}, {"newStart", p.newStart},
                          {"relocated", p.relocated()}, {"allocations", p.allocations}});
  }
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
         {"gpu", {{"ordinal", o.machine.ordinal}, {"name", o.machine.name}, {"uuid", o.machine.uuid},
                  {"ccMajor", o.machine.ccMajor}, {"ccMinor", o.machine.ccMinor}, {"smCount", o.machine.smCount},
                  {"driverVersion", o.machine.driverVersion}}},
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

}  // namespace gpurr::replay
