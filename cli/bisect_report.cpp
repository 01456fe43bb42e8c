// The reports of `gpurr bisect` made from its Outcome (bisect_outcome.h):
// the one-screen text and the facts behind report.json and report.html.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <sstream>

#include "cli/bisect_outcome.h"
#include "report/job.h"
#include "report/text.h"
#include "trace_format/trace.h"

namespace gpurr::cli::bisect {
using namespace gpurr::report;
using gpurr::diff::FirstDivergence;
using gpurr::diff::ProcessDiff;

namespace {

// The runs started during run `r` (held at their first CUDA call while it
// recorded): "  (runs 2 and 3 started during it: ...)", or "".
std::string startedDuring(const Outcome& o, const RunRecord& r) {
  std::vector<uint32_t> beside;
  for (const RunRecord& x : o.runs) {
    if (x.startedBeside == r.number && r.number != 0) beside.push_back(x.number);
  }
  if (beside.empty()) return "";
  const std::string which =
      beside.size() == 1 ? fmt::format("run {}", beside[0])
                         : fmt::format("runs {} and {}",
                                       fmt::join(beside.begin(), beside.end() - 1, ", "), beside.back());
  return fmt::format("  ({} started during it: their start shared the machine with it, so its time is more than "
                     "recording alone costs)",
                     which);
}

std::string runLine(const Outcome& o, const RunRecord& r) {
  std::string s = fmt::format("{:<8} {}  {}  {} launches  {}", fmt::format("run {}", r.number),
                              !r.started  ? std::string("not started")
                              : r.signal  ? fmt::format("signal {}", r.signal)
                                          : fmt::format("exit {}", r.exitCode),
                              clockTime(r.seconds), withCommas(r.launches),
                              r.traced ? r.trace.filename().string() : std::string("(no trace)"));
  if (!r.snapshot.empty()) s += fmt::format("  (snapshots of launch #{})", r.snapshot);
  if (r.startedBeside != 0) s += fmt::format("  (started during run {})", r.startedBeside);
  s += startedDuring(o, r);
  if (r.stoppedAfterStep >= 0) {
    s += fmt::format("  (stopped after step {}{})", r.stoppedAfterStep,
                     !r.stoppedByBisect ? ""
                     : r.confirmation   ? ", the step of the divergence it confirms"
                                        : ", soon after its first divergence");
  }
  return s;
}

std::string firstDivergenceText(const RunComparison& c) {
  const std::optional<DivergencePoint> p = earliestDivergence(c);
  if (!p) return c.identical() ? "identical" : "different processes ran";
  const ProcessDiff& d = c.processes[p->process];
  const FirstDivergence& f = *d.firstDivergence;
  const diff::OpInfo& op = f.path && f.stretch && f.stretch->aOps.empty() ? f.b : f.a;
  return fmt::format("first divergence at {}{}{}{}", f.path ? "a path divergence at " : "", opTitle(op),
                     op.origin ? fmt::format(" ({})", trace::describe(*op.origin, trace::OriginStep::kNone)) : std::string(),
                     d.name.empty() ? "" : " in " + d.name);
}

std::vector<std::string> replayRows(const Outcome& o) {
  if (o.replay) {
    const RunRecord* c = o.confirmationRun();
    return {replaySummary(*o.replay, c ? c->number : 0)};
  }
  if (o.replayError) return {"not run: " + *o.replayError};
  return {};
}

}  // namespace

std::string renderText(const Outcome& o, const Style& st) {
  std::ostringstream os;
  std::string options = joinedCommand(o.recordOptions);
  os << st.dim(fmt::format("gpurr bisect {}{}-- {}", options, options.empty() ? "" : " ", joinedCommand(o.command)))
     << '\n';
  for (const RunRecord& r : o.runs) os << "  " << runLine(o, r) << '\n';
  for (const std::string& f : o.failures) os << st.yellow(f) << '\n';
  if (o.verdict == "failed") {
    os << st.red(fmt::format("failed: {}", o.error.empty() ? "see above" : o.error.substr(0, o.error.find('\n'))))
       << '\n';
  } else if (o.verdict == "identical") {
    const RunTally& t = o.tally;
    const uint64_t unhashed = t.launches - std::min(t.hashedLaunches, t.launches);
    const std::string until = report::stoppedRunsText(factsOf(o).runs);  // runs gpurr stopped: identical up to there
    os << st.green(unhashed == 0
                       ? fmt::format("identical: the {} runs are bitwise identical{}", o.comparisons.size() + 1, until)
                       : fmt::format("identical: the {} runs agree in all that was compared{}; {} of the launches "
                                     "were not hashed, so only their parameters were compared",
                                     o.comparisons.size() + 1, until, withCommas(unhashed)))
       << '\n';
    os << fmt::format("  {:<8} {} process{}, {} launches ({} hashed), {} copies, {} memsets, {} hashed per run\n",
                      "compared", t.processes, t.processes == 1 ? "" : "es", withCommas(t.launches),
                      withCommas(t.hashedLaunches), withCommas(t.copies), withCommas(t.memsets),
                      humanBytes(t.bytesHashed));
    uint64_t matched = 0;
    for (const ProcessDiff& p : o.comparisons.front().second.processes) matched += p.matched;
    os << fmt::format("  {:<8} {} operations in each pair of runs, with equal parameters and outputs{}\n", "matched",
                      withCommas(matched), unhashed == 0 ? "" : " where hashed");
    std::vector<std::string> env;
    for (const auto& [number, c] : o.comparisons) {
      for (const ProcessDiff& p : c.processes) {
        for (const diff::EnvDifference& e : p.environment) {
          const std::string line = fmt::format("{}: run {} {}, run {} {}{}", e.field, o.base, e.a ? *e.a : "(unset)", number,
                                               e.b ? *e.b : "(unset)", e.affectsResults ? "" : " (context)");
          if (std::find(env.begin(), env.end(), line) == env.end()) env.push_back(line);
        }
      }
    }
    if (env.empty()) {
      os << fmt::format("  {:<8} identical (variables that affect results, GPUs, driver, library versions)\n",
                        "environ");
    } else {
      for (size_t i = 0; i < env.size(); ++i) {
        os << fmt::format("  {:<8} {}\n", i == 0 ? "environ" : "", (i == 0 ? "differs, without effect: " : "") + env[i]);
      }
    }
    if (!o.tally.error.empty()) os << st.yellow("warning: " + o.tally.error) << '\n';
    for (const auto& [number, c] : o.comparisons) {
      for (const ProcessDiff& p : c.processes) {
        for (const std::string& w : p.warnings) {
          os << st.yellow(fmt::format("warning: runs {} and {}{}: {}", o.base, number,
                                      p.name.empty() ? "" : " (" + p.name + ")", w))
             << '\n';
        }
      }
    }
  } else if (const ProcessDiff* p = o.chosenProcess()) {
    // A job's view across its ranks first: which rank the divergence began
    // on (the process reported below), and which received it.
    const std::optional<JobView> job = jobView(*o.chosenComparison());
    if (job) {
      printJob(os, st, *o.chosenComparison(), *job);
      os << '\n';
    }
    os << st.bold(fmt::format("runs {} and {} diverge", o.base, o.chosenRun()));
    if (!p->name.empty()) os << st.bold(fmt::format(" in process {}", p->name));
    os << '\n';
    printProcess(os, st, *p, replayRows(o));
    std::string others;
    for (const ProcessDiff& q : o.chosenComparison()->processes) {
      if (&q != p && !q.identical) others += (others.empty() ? "" : ", ") + q.name;
    }
    if (!others.empty() && !job) os << fmt::format("  {:<8} also diverging: {}\n", "process", others);
    if (const RunRecord* c = o.confirmationRun(); c && o.reproduced) {
      const std::string what = o.snapshotLaunch ? fmt::format(" (snapshots of launch #{})", *o.snapshotLaunch) : "";
      if (o.reproducedElsewhere) {
        os << fmt::format("  {:<8} run {}{}: {} at another launch of the same op, for the same cause, as chance decides "
                          "which of its launches differs first: against run {}: {}; against run {}: {}\n",
                          "confirm", c->number, what, st.green("reproduced"), o.base,
                          firstDivergenceText(*o.confirmation), o.chosenRun(),
                          firstDivergenceText(*o.confirmationOther));
      } else if (*o.reproduced) {
        const bool vsFirst = divergesAt(*o.confirmation, p->name, o.point->indexA);
        // Where it agrees with the first run, the other was the odd one.
        const std::string odd = !vsFirst && o.confirmation->identical()
                                    ? fmt::format("; it agrees with run {} as far as it went: run {} was the odd one",
                                                  o.base, o.chosenRun())
                                    : "";
        os << fmt::format("  {:<8} run {}{} diverges from run {} at the same operation: {}{}\n", "confirm", c->number,
                          what, vsFirst ? o.base : o.chosenRun(), st.green("reproduced"), odd);
      } else {
        os << fmt::format("  {:<8} {}: run {}{} against run {}: {}; against run {}: {}\n", "confirm",
                          st.yellow("not reproduced at the same place"), c->number, what, o.base,
                          firstDivergenceText(*o.confirmation), o.chosenRun(),
                          firstDivergenceText(*o.confirmationOther));
      }
    } else if (const RunRecord* c = o.confirmationRun()) {
      os << fmt::format("  {:<8} {}\n", "confirm",
                        st.yellow(fmt::format("run {} failed: the divergence is not confirmed", c->number)));
    }
  } else if (const RunComparison* c = o.chosenComparison()) {
    os << st.bold(fmt::format("runs {} and {} diverge: different processes ran", o.base, o.chosenRun())) << '\n';
    for (const std::string& n : c->onlyA) os << fmt::format("  process {} only in run {}\n", n, o.base);
    for (const std::string& n : c->onlyB) os << fmt::format("  process {} only in run {}\n", n, o.chosenRun());
  }
  if (!o.error.empty() && o.verdict != "failed") os << st.yellow("warning: " + o.error) << '\n';
  // --until-step that stopped none of the runs (record's warning, in each
  // run's log, said why).
  const auto until = std::find(o.recordOptions.begin(), o.recordOptions.end(), "--until-step");
  if (until != o.recordOptions.end() && until + 1 != o.recordOptions.end() &&
      std::none_of(o.runs.begin(), o.runs.end(), [](const RunRecord& r) { return r.stoppedAfterStep >= 0; })) {
    os << st.yellow(fmt::format("warning: --until-step {} stopped none of the runs: each ended by itself first, or "
                                "the program never stepped a torch.optim optimizer (by whose steps the PyTorch "
                                "layer counts training steps; its steps are then all step 0)",
                                *(until + 1)))
       << '\n';
  }
  return os.str();
}

BisectFacts factsOf(const Outcome& o) {
  BisectFacts f;
  f.verdict = o.verdict;
  f.command = o.command;
  f.recordOptions = o.recordOptions;
  f.directory = o.dir.string();
  for (const RunRecord& r : o.runs) {
    f.runs.push_back({r.traced ? r.trace.string() : std::string(), r.log.string(), r.exitCode, r.seconds, r.launches,
                      r.snapshot, r.stoppedAfterStep, r.stoppedByBisect, r.startedBeside});
  }
  f.baseRun = o.base;
  f.confirmation = o.confirmation ? &*o.confirmation : nullptr;
  f.confirmationOther = o.confirmationOther ? &*o.confirmationOther : nullptr;
  f.reproduced = o.reproduced;
  f.reproducedElsewhere = o.reproducedElsewhere;
  f.snapshotLaunch = o.snapshotLaunch;
  f.replay = o.replay;
  f.replayError = o.replayError;
  if (o.verdict == "identical") {
    Compared c;
    c.runs = o.comparisons.size() + 1;
    c.processes = o.tally.processes;
    c.launches = o.tally.launches;
    c.hashedLaunches = o.tally.hashedLaunches;
    c.copies = o.tally.copies;
    c.memsets = o.tally.memsets;
    c.bytesHashed = o.tally.bytesHashed;
    for (const auto& [number, comparison] : o.comparisons) {
      for (const ProcessDiff& p : comparison.processes) {
        for (const diff::EnvDifference& e : p.environment) c.environment.push_back({number, p.name, e});
      }
    }
    f.compared = c;
  }
  f.error = o.error;
  f.failures = o.failures;
  f.seconds = o.seconds;
  return f;
}

}  // namespace gpurr::cli::bisect
