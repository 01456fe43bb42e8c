// What one `gpurr bisect` found (Outcome: its runs, comparisons,
// confirmation and replay), and the reports made from it: the one-screen
// text (report.txt, and what the command prints) and the facts that
// report.json and report.html are made from (report/bisect_report.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/bisect.h"
#include "report/bisect_report.h"
#include "report/diff_report.h"

namespace gpurr::cli::bisect {

struct RunRecord {
  uint32_t number = 0;
  fs::path trace, log;
  std::string snapshot;  // the --snapshot selection, "" for none
  bool confirmation = false;  // the run after the comparison
  bool started = true;
  std::string startError;
  int exitCode = 0;
  int signal = 0;
  double seconds = 0;
  uint64_t launches = 0;
  int64_t stoppedAfterStep = -1;  // gpurr stopped the program after this step (--until-step, or the bisect)
  bool stoppedByBisect = false;   // ... by the bisect, soon after its first divergence (bisect_watch.h)
  uint32_t startedBeside = 0;     // the run during which it was started, held at its start; 0 when none
  bool traced = false;  // a trace was written
  bool failed() const { return !started || exitCode != 0; }
};

// Everything a bisect found, for the text and JSON reports.
struct Outcome {
  std::vector<std::string> command;
  std::vector<std::string> recordOptions;  // passed to every gpurr record
  fs::path dir;
  std::vector<RunRecord> runs;  // the N runs, then the confirmation run
  std::string verdict = "failed";
  std::string error;  // why the verdict is "failed", or why a step went wrong
  std::vector<std::string> failures;  // each failed run, with its log's end
  // The run the others are compared with: run 1, or with --keep-going the
  // first run that left a trace.
  uint32_t base = 1;
  // The comparisons of the base run with every other run.
  std::vector<std::pair<uint32_t, report::RunComparison>> comparisons;
  std::optional<size_t> chosen;  // index into comparisons
  std::optional<DivergencePoint> point;
  std::optional<uint64_t> snapshotLaunch;
  std::string noSnapshotWhy;
  std::optional<report::RunComparison> confirmation;       // the base run vs the confirmation run
  std::optional<report::RunComparison> confirmationOther;  // run B of the pair vs the confirmation run
  std::optional<bool> reproduced;
  // Reproduced for the same cause at another launch of the same op and line,
  // not at the same operation (divergesAlike).
  bool reproducedElsewhere = false;
  std::optional<Json> replay;
  std::optional<std::string> replayError;
  nlohmann::json timeline = nullptr;  // report::timelineAround's object
  RunTally tally;  // the base run, when the runs are identical
  double seconds = 0;
  int interruptedBy = 0;  // the signal that stopped the bisect, 0 when none

  const report::RunComparison* chosenComparison() const { return chosen ? &comparisons[*chosen].second : nullptr; }
  const diff::ProcessDiff* chosenProcess() const {
    return chosen && point ? &comparisons[*chosen].second.processes[point->process] : nullptr;
  }
  uint32_t chosenRun() const { return chosen ? comparisons[*chosen].first : 0; }
  const RunRecord* confirmationRun() const {
    return !runs.empty() && runs.back().confirmation ? &runs.back() : nullptr;
  }
};

// The one-screen answer.
std::string renderText(const Outcome& o, const report::Style& st);

// What the bisect found, as the model report.json and report.html are made
// from (the comparisons it points to are the outcome's).
report::BisectFacts factsOf(const Outcome& o);

}  // namespace gpurr::cli::bisect
