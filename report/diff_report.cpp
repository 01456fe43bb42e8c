// The text and JSON reports of a comparison, shared by `gpurr diff` and
// `gpurr bisect`, so that both commands say the same thing.
#include "report/diff_report.h"

#include <fmt/color.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "diff/wording.h"
#include "report/job.h"
#include "report/ranks.h"
#include "report/text.h"
#include "report/words.h"
#include "trace_format/trace.h"

namespace gpurr::report {
using namespace gpurr::trace;
using namespace gpurr::diff;

std::string Style::bold(const std::string& s) const {
  return color ? fmt::format(fmt::emphasis::bold, "{}", s) : s;
}
std::string Style::red(const std::string& s) const {
  return color ? fmt::format(fg(fmt::terminal_color::bright_red) | fmt::emphasis::bold, "{}", s) : s;
}
std::string Style::yellow(const std::string& s) const {
  return color ? fmt::format(fg(fmt::terminal_color::yellow), "{}", s) : s;
}
std::string Style::green(const std::string& s) const {
  return color ? fmt::format(fg(fmt::terminal_color::green), "{}", s) : s;
}
std::string Style::dim(const std::string& s) const {
  return color ? fmt::format(fmt::emphasis::faint, "{}", s) : s;
}

namespace {

// ------------------------------------------------------------ text


std::string opLine(const OpInfo& o) {
  std::string s = fmt::format("#{} {}", o.seq, o.kind == OpKind::kLaunch ? shortName(o.name, 80) : o.name);
  if (o.kind == OpKind::kLaunch) s += fmt::format(" grid {} block {}", dim(o.grid), dim(o.block));
  for (const Annotation& a : o.annotations) {
    if (std::holds_alternative<AlgorithmChoice>(a) || std::holds_alternative<FrameworkOp>(a)) {
      s += fmt::format(" {{{}}}", describe(a));
    }
  }
  if (o.origin) s += fmt::format(" {{op {}}}", describe(*o.origin, diff::originStep(o)));
  return s;
}

// The "op" rows of a matched pair: where each run's operation came from in
// the program (its recorded origin), one row when both runs say the same,
// else one per run. Without origins, the launch's FrameworkOp annotations, or
// the operation's name for a copy or memset.
void opRows(const std::function<void(const std::string&, const std::string&)>& row, const OpInfo& a,
            const OpInfo& b) {
  const bool launch = a.kind == OpKind::kLaunch;
  if (a.origin || b.origin) {
    const OriginStep step = launch ? OriginStep::kLaunch : OriginStep::kOperation;
    const std::string ta = a.origin ? describe(*a.origin, step) : "(not recorded)";
    const std::string tb = b.origin ? describe(*b.origin, step) : "(not recorded)";
    if (ta == tb) {
      row("op", launch ? ta : fmt::format("{} from {}", a.name, ta));
      return;
    }
    if (!launch) row("op", a.name);
    row(launch ? "op" : "", "run A: " + ta);
    row("", "run B: " + tb);
    return;
  }
  if (launch) {
    std::string ops;
    for (const Annotation& x : a.annotations) {
      if (const auto* f = std::get_if<FrameworkOp>(&x)) ops += (ops.empty() ? "" : ", ") + f->name;
    }
    if (!ops.empty()) row("op", ops);
  } else {
    row("op", a.name);
  }
}

std::string rangeLine(const char* what, const RangeDifference& r) {
  // One run's alone (compareRanges): the other run has no such range.
  if (r.a.size == 0 && r.b.size != 0)
    return fmt::format("{} {} {} ({}): in run B only", what, r.index, where(r.b), humanBytes(r.b.size));
  std::string s = fmt::format("{} {} {} ({})", what, r.index, where(r.a), humanBytes(r.a.size));
  if (r.b.size == 0 && r.a.size != 0) return s + ": in run A only";
  if (r.boundsDiffer) {
    return s + fmt::format(": bounded differently, to the {}'s end in run A and the {}'s end in run B ({}): "
                           "not comparable",
                           toString(r.a.bound), toString(r.b.bound), humanBytes(r.b.size));
  }
  if (r.digestA == r.digestB && r.digestA != 0) {
    // Equal bytes in ranges that do not correspond (compareRanges).
    return s + fmt::format(": the same bytes (digest {}), in run B at {}", hex16(r.digestA), where(r.b));
  }
  // Run B's range elsewhere in its allocation, or of another size (a
  // pointer that points elsewhere): said, as the bytes compared are those.
  if (r.a.offset != r.b.offset || r.a.size != r.b.size) {
    s += fmt::format(", run B's {} ({})", where(r.b), humanBytes(r.b.size));
  }
  if (r.chunkBytes > 0) {
    s += fmt::format(": {} of {} chunks differ", r.differingChunks, r.chunks);
  }
  if (r.values) {
    s += fmt::format("{} {} of {} bytes differ (at {}); as float32 {} of {} values, max |d| {:.3g}",
                     r.chunkBytes > 0 ? ";" : ":", withCommas(r.values->differingBytes),
                     withCommas(r.a.size), spansText(r), withCommas(r.values->differingFloats),
                     withCommas(r.values->floats), r.values->maxAbsDiff);
  } else if (r.chunkBytes > 0) {
    s += fmt::format(" (bytes {})", spansText(r));
  } else {
    auto digest = [](uint64_t d) { return d == 0 ? std::string("none (not hashed)") : hex16(d); };
    s += fmt::format(": digest {} vs {}", digest(r.digestA), digest(r.digestB));
  }
  return s;
}

void printFirst(std::ostream& os, const Style& st, const FirstDivergence& d,
                const std::vector<std::string>& replayRows) {
  auto row = [&](const std::string& key, const std::string& value) {
    os << fmt::format("  {:<8} {}\n", key, value);
  };
  if (d.path) {
    const PathDivergence& s = *d.stretch;
    // A reordering shows the operations at both ends: the stretch's own
    // side, and the other end's where the stretch leaves that side empty.
    const Reordering* m = s.reordered ? &*s.reordered : nullptr;
    const std::vector<OpInfo>& aOps = m && s.aCount == 0 ? m->otherOps : s.aOps;
    const std::vector<OpInfo>& bOps = m && s.bCount == 0 ? m->otherOps : s.bOps;
    const uint64_t aCount = m && s.aCount == 0 ? m->otherCount : s.aCount;
    const uint64_t bCount = m && s.bCount == 0 ? m->otherCount : s.bCount;
    auto side = [](uint64_t count, const std::vector<OpInfo>& ops) {
      if (count == 0 || ops.empty()) return std::string("nothing");
      return fmt::format("{} from #{}", count == 1 ? "1 operation" : fmt::format("{} operations", count),
                         ops.front().seq);
    };
    const OpInfo& any = s.aOps.empty() ? s.bOps.front() : s.aOps.front();
    os << st.bold(fmt::format("first divergence: {} at {}",
                              m ? "the runs do the same operations in another order" : "the runs take different paths",
                              opTitle(any)))
       << fmt::format("  (run A {}, run B {})\n", side(aCount, aOps), side(bCount, bOps));
    for (const auto* ops : {&aOps, &bOps}) {
      const bool isA = ops == &aOps;
      const uint64_t count = isA ? aCount : bCount;
      if (ops->empty()) row(isA ? "run A" : "run B", "(nothing)");
      for (size_t i = 0; i < ops->size(); ++i) {
        row(i == 0 ? (isA ? "run A" : "run B") : "", opLine((*ops)[i]));
      }
      if (count > ops->size()) row("", fmt::format("... {} more", count - ops->size()));
    }
  } else {
    os << st.bold(fmt::format("first divergence: {} on stream {}", opTitle(d.a), d.a.stream))
       << fmt::format("  (run A #{}, run B #{})\n", d.a.seq, d.b.seq);
    if (d.a.kind == OpKind::kLaunch) {
      row("kernel", fmt::format("{}   grid {} block {}", shortName(d.a.name), dim(d.a.grid), dim(d.a.block)));
    }
    opRows(row, d.a, d.b);
    auto buffers = [](size_t n) { return fmt::format("{} buffer{}", n, n == 1 ? "" : "s"); };
    if (d.inputsIdentical && d.inputsUncompared > 0) {
      row("inputs", fmt::format("not known: {} not comparable{}", buffers(d.inputsUncompared),
                                d.inputCount == 0 ? ""
                                                  : fmt::format(", {} identical ({})", buffers(d.inputCount),
                                                                humanBytes(d.inputBytes))));
    } else if (d.inputsIdentical && d.inputsVouched > 0) {
      row("inputs", fmt::format("identical: {}{} by the write history",
                                d.inputCount == 0 ? "" : fmt::format("{} hashed at first use ({}), ",
                                                                     buffers(d.inputCount), humanBytes(d.inputBytes)),
                                buffers(d.inputsVouched)));
    } else if (d.inputsIdentical) {
      row("inputs", d.inputCount == 0 ? "none recorded"
                                       : fmt::format("identical ({} buffer{}, {} hashed)", d.inputCount,
                                                     d.inputCount == 1 ? "" : "s", humanBytes(d.inputBytes)));
    } else {
      bool first = true;
      for (const RangeDifference& r : d.inputs) {
        row(first ? "inputs" : "", (first ? "differ: " : "        ") + rangeLine("input", r));
        first = false;
      }
    }
    if (d.a.kind == OpKind::kLaunch || !d.paramsIdentical) {
      if (d.paramsIdentical) {
        row("params", "identical after pointer normalisation");
      } else {
        for (size_t i = 0; i < d.params.size() && i < 4; ++i) {
          const ParamDifference& p = d.params[i];
          row(i == 0 ? "params" : "",
              fmt::format("{}{} bytes {:#x}-{:#x}{}: {}", i == 0 ? "differ: " : "        ",
                          p.param >= 0 ? fmt::format("param {}", p.param) : std::string("raw"), p.offset,
                          p.offset + p.size, meaningText(p).empty() ? "" : " (" + meaningText(p) + ")",
                          p.words.empty() ? fmt::format("A {} B {}", p.a, p.b) : "words " + p.words));
        }
        if (d.params.size() > 4) row("", fmt::format("        ... {} more", d.params.size() - 4));
      }
    }
    bool first = true;
    for (const RangeDifference& r : d.outputs) {
      row(first ? "outputs" : "", (first ? "differ: " : "        ") + rangeLine("output", r));
      first = false;
    }
  }
  if (opUnobserved(d)) row("unnamed", unobservedText(d));
  row("cause", st.red(causeSummary(d)));
  const std::vector<std::string> evidence = evidenceSentences(d);
  for (size_t i = 0; i < evidence.size(); ++i) row(i == 0 ? "evidence" : "", evidence[i]);
  for (const auto* check : {&d.determinismA, &d.determinismB}) {
    if (!*check) continue;
    const DeterminismCheck& c = **check;
    row("replay", fmt::format("run {}: the recorder re-ran it {} times: {} distinct result{} -> {}",
                              check == &d.determinismA ? 'A' : 'B', c.runs, c.distinctResults,
                              c.distinctResults == 1 ? "" : "s",
                              c.distinctResults > 1 ? "intrinsic" : "deterministic on these inputs"));
  }
  for (const std::string& r : replayRows) row("replay", r);
  for (size_t i = 0; i < d.known.size(); ++i) {
    const CulpritMatch& k = d.known[i];
    row(i == 0 ? "known" : "", fmt::format("{}: {}", k.op, k.why));
    if (!k.matched.empty()) row("", fmt::format("matched by {}: {}", k.matchedBy, k.matched));
    if (!k.argument.empty()) {
      row("", fmt::format("applies when {}: the recording does not show arguments", k.argument));
    }
    row("", fmt::format("fix: {}", k.fix));
  }
}

// ------------------------------------------------------------ JSON

Json opJson(const OpInfo& o) {
  Json annotations = Json::array();
  for (const Annotation& a : o.annotations) annotations.push_back(toJson(a));
  Json j{{"seq", o.seq}, {"index", o.index}, {"kind", toString(o.kind)}, {"stream", o.stream},
         {"thread", o.thread}, {"name", o.name}};
  if (o.kind == OpKind::kLaunch) {
    j["launchIndex"] = o.launchIndex;
    j["demangled"] = demangle(o.name);
    j["grid"] = Json::array({o.grid.x, o.grid.y, o.grid.z});
    j["block"] = Json::array({o.block.x, o.block.y, o.block.z});
  }
  j["annotations"] = annotations;
  j["origin"] = o.origin ? toJson(*o.origin) : Json(nullptr);
  return j;
}

Json rangeJson(const DeviceRange& r) {
  Json j{{"allocation", r.allocation}, {"offset", r.offset}, {"size", r.size}};
  if (r.bound == RangeBound::kBlock) j["bound"] = "block";  // absent: the allocation's end
  return j;
}

Json rangeDiffJson(const RangeDifference& r) {
  Json spans = Json::array();
  for (const auto& [b, e] : r.spans) spans.push_back(Json::array({b, e}));
  Json j{{"index", r.index},
         {"a", rangeJson(r.a)},
         {"b", rangeJson(r.b)},
         {"digestA", hex16(r.digestA)},
         {"digestB", hex16(r.digestB)},
         {"chunkBytes", r.chunkBytes},
         {"chunks", r.chunks},
         {"differingChunks", r.differingChunks},
         {"differingSpans", spans},
         {"boundsDiffer", r.boundsDiffer}};
  if (r.values) {
    j["values"] = Json{{"differingBytes", r.values->differingBytes},
                       {"float32Values", r.values->floats},
                       {"differingFloat32", r.values->differingFloats},
                       {"maxAbsDiff", r.values->maxAbsDiff}};
  }
  if (r.writtenChecked) {
    j["unwrittenBytes"] = Json{{"a", r.unwrittenA}, {"b", r.unwrittenB}};
  }
  return j;
}

Json pathJson(const PathDivergence& p) {
  Json a = Json::array(), b = Json::array();
  for (const OpInfo& o : p.aOps) a.push_back(opJson(o));
  for (const OpInfo& o : p.bOps) b.push_back(opJson(o));
  Json reordered = nullptr;
  if (p.reordered) {
    const Reordering& m = *p.reordered;
    reordered = {{"a", {{"firstIndex", m.aBegin}, {"endIndex", m.aEnd}}},
                 {"b", {{"firstIndex", m.bBegin}, {"endIndex", m.bEnd}}},
                 {"count", m.count},
                 {"crossed", m.crossed}};
  }
  return Json{{"a", {{"firstIndex", p.aBegin}, {"count", p.aCount}, {"ops", a}}},
              {"b", {{"firstIndex", p.bBegin}, {"count", p.bCount}, {"ops", b}}},
              {"readsTaintedData", p.readsTainted},
              {"reordered", reordered}};
}

Json firstJson(const FirstDivergence& d) {
  Json inputs = Json::array(), outputs = Json::array(), params = Json::array(), known = Json::array();
  for (const RangeDifference& r : d.inputs) inputs.push_back(rangeDiffJson(r));
  for (const RangeDifference& r : d.outputs) outputs.push_back(rangeDiffJson(r));
  for (const ParamDifference& p : d.params) {
    params.push_back({{"offset", p.offset}, {"size", p.size}, {"param", p.param}, {"a", p.a},
                      {"b", p.b}, {"meaning", meaningText(p)}});
  }
  for (const CulpritMatch& k : d.known) {
    known.push_back({{"id", k.id}, {"op", k.op}, {"why", k.why}, {"fix", k.fix},
                     {"source", k.source}, {"matchedBy", k.matchedBy}, {"matched", k.matched}});
    if (!k.argument.empty()) known.back()["argument"] = k.argument;
  }
  Json j{{"path", d.path},
         {"a", shownOp(d, true) ? opJson(d.a) : Json(nullptr)},
         {"b", shownOp(d, false) ? opJson(d.b) : Json(nullptr)},
         {"cause", jsonName(d.cause)},
         {"mechanism", jsonName(d.mechanism)},
         {"summary", causeSummary(d)},
         {"evidence", evidenceSentences(d)},
         {"inputs", {{"identical", d.inputsIdentical}, {"count", d.inputCount},
                     {"bytes", d.inputBytes}, {"vouched", d.inputsVouched}, {"uncompared", d.inputsUncompared},
                     {"differing", inputs}}},
         {"params", {{"identical", d.paramsIdentical}, {"differing", params}}},
         {"outputs", {{"count", d.outputCount}, {"differing", outputs}}},
         {"known", known}};
  if (opUnobserved(d)) j["unobserved"] = true;
  if (d.namedLater) j["namedLater"] = opJson(*d.namedLater);
  if (d.stretch) j["stretch"] = pathJson(*d.stretch);
  if (d.swap) {
    j["swap"] = {{"a", {{"index", d.swap->aIndex}, {"seq", d.swap->aSeq}}},
                 {"b", {{"index", d.swap->bIndex}, {"seq", d.swap->bSeq}}}};
  }
  Json checks = Json::object();
  if (d.determinismA) checks["a"] = {{"runs", d.determinismA->runs}, {"distinctResults", d.determinismA->distinctResults}};
  if (d.determinismB) checks["b"] = {{"runs", d.determinismB->runs}, {"distinctResults", d.determinismB->distinctResults}};
  j["determinismCheck"] = checks;
  return j;
}

}  // namespace



void printProcess(std::ostream& os, const Style& st, const ProcessDiff& p,
                  const std::vector<std::string>& replayRows) {
  for (const std::string& w : p.warnings) os << st.yellow("warning: " + w) << '\n';
  bool anyEnv = false;
  for (const EnvDifference& e : p.environment) {
    if (!anyEnv) {
      const bool matters = std::any_of(p.environment.begin(), p.environment.end(),
                                       [](const EnvDifference& d) { return d.affectsResults; });
      os << st.bold("environment differs")
         << (matters ? " (shown first: it can change results)\n" : " (for context: none of it changes results)\n");
      anyEnv = true;
    }
    os << fmt::format("  {:<28} A {}   B {}{}\n", text::oneLine(e.field), text::oneLine(e.a ? *e.a : "(unset)"),
                      text::oneLine(e.b ? *e.b : "(unset)"), e.affectsResults ? "" : "   (context)");
  }
  // The pairs matched despite a benign difference, a line for each kind.
  auto absorbed = [&] {
    for (const std::string& line : pairedDespiteLines(p)) os << fmt::format("  {:<8} {}\n", "paired", line);
    if (const auto line = setAsideLine(p)) os << fmt::format("  {:<8} {}\n", "autotune", *line);
  };
  if (p.identical && !p.gaps.empty()) {
    os << st.yellow(fmt::format("not known: {} operations match, with equal parameters and outputs, up to where {}; "
                                "nothing after it was compared",
                                withCommas(p.matched), p.gaps.front()))
       << '\n';
    absorbed();
    return;
  }
  if (p.identical) {
    os << st.green(fmt::format("identical: {} operations match, with equal parameters and outputs{}",
                               withCommas(p.matched), notHashed(p)))
       << '\n';
    absorbed();
    return;
  }
  if (!p.firstDivergence) return;
  printFirst(os, st, *p.firstDivergence, replayRows);
  const BlastRadius& b = p.blast;
  auto row = [&](const std::string& key, const std::string& value) {
    os << fmt::format("  {:<8} {}\n", key, value);
  };
  if (b.laterOps == 0) {
    row("after it", "no later operations");
  } else {
    row("after it", fmt::format("{} of {} later operations{} read data derived from it",
                                withCommas(b.taintedOps), withCommas(b.laterOps),
                                b.laterLaunches == 0 ? std::string()
                                                     : fmt::format(" ({} of {} launches)",
                                                                   withCommas(b.taintedLaunches),
                                                                   withCommas(b.laterLaunches))));
  }
  if (b.independentCount == 0) {
    row("also", b.divergentOps == 0   ? "no later divergence"
                : b.divergentOps == 1 ? "no independent divergence: the one later divergent "
                                        "operation reads data derived from it"
                                      : fmt::format("no independent divergence: all {} later "
                                                    "divergent operations read data derived from it",
                                                    withCommas(b.divergentOps)));
  } else {
    row("also", fmt::format("{} independent divergence{} (not explained by the first{}):",
                            withCommas(b.independentCount), b.independentCount == 1 ? "" : "s", repeatsFirst(b)));
    for (const IndependentDivergence& i : b.independent) {
      const OpInfo& o = i.a.name.empty() ? i.b : i.a;
      row("", fmt::format("{} {}{} ({}): {}", opTitle(o), o.kind == OpKind::kLaunch ? shortName(o.name, 60) : o.name,
                          o.origin ? fmt::format(" [{}{}]", describe(*o.origin, OriginStep::kNone),
                                                 o.origin->step < 0 ? "" : fmt::format(", step {}", o.origin->step))
                                   : std::string(),
                          whereBoth(i), i.reason));
      if (i.more > 0) row("", "  " + moreLikeItText(i));
    }
    if (const uint64_t unlisted = b.unlisted(); unlisted > 0) {
      row("", fmt::format("and {} more at other places (not listed)", withCommas(unlisted)));
    }
  }
  if (p.pathDivergenceCount > (p.firstDivergence->path ? 1u : 0u)) {
    row("paths", fmt::format("{} path divergence{} in all (gpurr diff --json lists {})", p.pathDivergenceCount,
                             p.pathDivergenceCount == 1 ? "" : "s",
                             p.pathDivergences.size() < p.pathDivergenceCount
                                 ? fmt::format("the first {}", p.pathDivergences.size())
                                 : std::string(p.pathDivergenceCount == 1 ? "it" : "them")));
  }
  absorbed();
}

Json processJson(const ProcessDiff& p) {
  Json env = Json::array();
  for (const EnvDifference& e : p.environment) {
    env.push_back({{"field", e.field},
                   {"a", e.a ? Json(*e.a) : Json(nullptr)},
                   {"b", e.b ? Json(*e.b) : Json(nullptr)},
                   {"affectsResults", e.affectsResults}});
  }
  Json independent = Json::array();
  const auto orNull = [](const auto& v) { return v ? Json(*v) : Json(nullptr); };
  for (const IndependentDivergence& i : p.blast.independent) {
    const Json lastStep = i.last.step < 0 ? Json(nullptr) : Json(i.last.step);
    independent.push_back({{"path", i.path},
                           {"a", i.a.name.empty() ? Json(nullptr) : opJson(i.a)},
                           {"b", i.b.name.empty() ? Json(nullptr) : opJson(i.b)},
                           {"reason", i.reason},
                           {"more", i.more},
                           {"last", i.more == 0 ? Json(nullptr)
                                                : Json{{"a", orNull(i.last.seqA)},
                                                       {"b", orNull(i.last.seqB)},
                                                       {"step", lastStep}}}});
  }
  Json paths = Json::array();
  for (const PathDivergence& d : p.pathDivergences) paths.push_back(pathJson(d));
  const BlastRadius& b = p.blast;
  Json j{{"name", p.name},
              {"a", p.pathA},
              {"b", p.pathB},
              {"identical", p.identical},
              {"warnings", p.warnings},
              {"environment", env},
              {"operations", {{"a", p.opsA}, {"b", p.opsB}, {"matched", p.matched},
                              {"alignmentBounded", p.alignmentBounded}}},
              {"firstDivergence", p.firstDivergence ? firstJson(*p.firstDivergence) : Json(nullptr)},
              {"blastRadius", {{"laterOperations", b.laterOps},
                               {"taintedOperations", b.taintedOps},
                               {"laterLaunches", b.laterLaunches},
                               {"taintedLaunches", b.taintedLaunches},
                               {"laterDivergentOperations", b.divergentOps},
                               {"explainedByTaint", b.explainedOps},
                               {"independentCount", b.independentCount},
                               {"repeatsFirst", b.repeatsFirst},
                               {"independent", independent},
                               {"unlisted", b.unlisted()}}},
              {"pathDivergences", {{"count", p.pathDivergenceCount}, {"listed", paths}}}};
  if (p.undigestedA != 0 || p.undigestedB != 0) {
    j["operations"]["notHashed"] = {{"a", p.undigestedA}, {"b", p.undigestedB}};  // only their parameters compared
  }
  j["operations"]["withOutputs"] = {{"a", p.withOutputsA}, {"b", p.withOutputsB}};
  for (const auto& [paired, key] : {std::pair{&p.pairedDespiteStaleWords, "staleWords"},
                                    std::pair{&p.pairedDespiteLaunchConfiguration, "launchConfiguration"},
                                    std::pair{&p.pairedDespiteRenamedAllocation, "renamedAllocation"}}) {
    if (paired->count > 0) j["pairedDespite"][key] = {{"count", paired->count}, {"first", opJson(*paired->first)}};
  }
  if (p.allocationsRenamed > 0) j["allocationsRenamed"] = p.allocationsRenamed;
  if (p.benchmarkingA + p.benchmarkingB > 0) {
    j["setAside"]["benchmarking"] = {{"a", p.benchmarkingA}, {"b", p.benchmarkingB}};
  }
  if (!p.gaps.empty()) j["gaps"] = p.gaps;  // a run's recorder dropped events: compared up to there
  return j;
}


bool useColor(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* noColor = std::getenv("NO_COLOR");
  if (noColor && *noColor) return false;
  const char* term = std::getenv("TERM");
  if (term && std::string_view(term) == "dumb") return false;
  return ::isatty(STDOUT_FILENO) == 1;
}

void printComparison(std::ostream& os, const Style& st, const RunComparison& c) {
  const std::optional<JobView> job = jobView(c);
  printComparison(os, st, c, job ? &*job : nullptr);
}

void printComparison(std::ostream& os, const Style& st, const RunComparison& c, const JobView* job) {
  os << st.dim(text::oneLine(fmt::format("gpurr diff {} {}", c.a, c.b))) << '\n';
  printRanks(os, st, c);
  if (job) printJob(os, st, c, *job);
  const std::vector<size_t> order = processOrder(c, job);
  // Each report, with the job's notes; reports alike but for the process's
  // own rank are printed once, the others named after it.
  std::vector<std::string> reports(c.processes.size()), names(c.processes.size());
  std::vector<int32_t> ranks(c.processes.size());
  for (size_t i = 0; i < c.processes.size(); ++i) {
    std::ostringstream r;
    printProcess(r, st, c.processes[i]);
    for (const std::string& note : job && job->notes.count(i) ? job->notes.at(i) : std::vector<std::string>{}) {
      r << fmt::format("  {:<8} {}\n", "job", note);
    }
    reports[i] = r.str();
    names[i] = c.processes[i].name;
    ranks[i] = job ? job->processRanks[i] : c.processes[i].rankA;
  }
  const std::vector<std::vector<size_t>> with = alikeReports(reports, ranks, order);
  std::vector<bool> shown(c.processes.size(), false);
  for (size_t i : order) {
    if (shown[i]) continue;
    if (!names[i].empty()) os << '\n' << st.bold(fmt::format("== process {} ==", names[i])) << '\n';
    os << reports[i];
    for (size_t k : with[i]) shown[k] = true;
    if (with[i].empty() || names[i].empty()) continue;
    os << '\n'
       << st.bold(fmt::format("== {}: the same report as {}{} ==", processesText(with[i], ranks, names),
                              names[i], alikeText(reports, ranks, i, with[i])))
       << '\n';
  }
  // The processes compared agree, but not every process could be.
  std::string uncompared;
  for (const auto& [names, side] : {std::pair{&c.onlyA, "A"}, std::pair{&c.onlyB, "B"}}) {
    for (const std::string& n : *names) {
      uncompared += fmt::format("{}{} was recorded in run {} only", uncompared.empty() ? "" : ", ", n, side);
    }
  }
  for (const IncompleteTrace& u : c.unreadable) {
    uncompared += fmt::format("{}{} could not be read", uncompared.empty() ? "" : ", ", u.name);
  }
  if (c.unknown() && !uncompared.empty()) {
    const bool one = c.onlyA.size() + c.onlyB.size() + c.unreadable.size() == 1;
    // No process of one run has the name of one of the other's: none was compared.
    const std::string compared =
        c.processes.empty() ? "no process was compared (no trace's name is in both runs: pair them by giving each "
                              "run's traces the same names)"
                            : "the processes compared agree";
    os << '\n'
       << st.yellow(fmt::format("not known: {}, but {}: {} results are not known", compared,
                                text::oneLine(uncompared), one ? "its" : "their"))
       << '\n';
  }
}

Json comparisonJson(const RunComparison& c) {
  const std::optional<JobView> job = jobView(c);
  return comparisonJson(c, job ? &*job : nullptr);
}

Json comparisonJson(const RunComparison& c, const JobView* job) {
  Json processes = Json::array();
  for (const ProcessDiff& p : c.processes) processes.push_back(processJson(p));
  Json out{{"gpurrDiff", 1},
           {"a", c.a},
           {"b", c.b},
           {"verdict", c.identical() ? "identical" : c.unknown() ? "notKnown" : "diverged"},
           {"identical", c.identical()},
           {"forced", c.forced},
           {"processes", processes},
           {"onlyInA", c.onlyA},
           {"onlyInB", c.onlyB}};
  if (c.directories) out["ranks"] = ranksJson(c);
  if (job) out["job"] = jobJson(c, *job);
  return out;
}

}  // namespace gpurr::report
