// What a report of `gpurr bisect` holds besides the comparison it chose: the
// runs, the verdict, the confirmation run, the replay of the divergent launch,
// and what identical runs held. With the comparison and the timeline it is
// the one model that report.json and report.html are both made from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/compare.h"
#include "report/event_json.h"

namespace gpurr::report {

struct JobView;  // report/job.h

// One recorded run.
struct RunInfo {
  std::string trace;  // "" when the run left no trace
  std::string log;
  int exitCode = 0;
  double seconds = 0;
  uint64_t launches = 0;
  std::string snapshot;  // the launches recorded with snapshots (--snapshot), "" for none
  int64_t stoppedAfterStep = -1;  // gpurr stopped the program after this step (--until-step), -1 when not
  bool stoppedByBisect = false;   // ... soon after its first divergence, the bisect having seen it
  uint32_t startedBeside = 0;     // started during this run, held before its first CUDA call; 0 when not
};

// What identical runs held, summed over the base run's processes, and the
// header fields that differ between runs without changing results.
struct Compared {
  size_t runs = 0, processes = 0;
  uint64_t launches = 0, hashedLaunches = 0, copies = 0, memsets = 0, bytesHashed = 0;
  struct Difference {
    uint32_t run = 0;  // the run compared with the base run
    std::string process;
    diff::EnvDifference field;
  };
  std::vector<Difference> environment;
};

struct BisectFacts {
  std::string verdict = "failed";  // identical, diverged, notReproduced, failed
  std::vector<std::string> command;
  std::vector<std::string> recordOptions;  // passed to every gpurr record
  std::string directory;
  std::vector<RunInfo> runs;  // the N runs, then the confirmation run
  uint32_t baseRun = 1;
  // The base run and run B of the chosen pair, each against the confirmation run.
  const RunComparison* confirmation = nullptr;
  const RunComparison* confirmationOther = nullptr;
  std::optional<bool> reproduced;
  bool reproducedElsewhere = false;  // at another launch of the same op, for the same cause
  std::optional<uint64_t> snapshotLaunch;
  std::optional<Json> replay;  // what `gpurr replay --json` wrote
  std::optional<std::string> replayError;
  std::optional<Compared> compared;  // identical runs only
  std::string error;                 // why it failed, or a warning
  std::vector<std::string> failures;  // each failed run, with its log's end
  double seconds = 0;
};

// A report: the comparison shown (null when none was made), the operations
// around its first divergence (timelineAround's object, or null), and for
// `gpurr bisect` what the bisect found (null for `gpurr diff`).
struct Report {
  const RunComparison* diff = nullptr;
  nlohmann::json timeline = nullptr;
  const BisectFacts* bisect = nullptr;
  // The job's view of `diff` when the caller has computed it (jobView); null:
  // renderHtml computes it.
  const std::optional<JobView>* job = nullptr;
};

// " up to training step N, where gpurr stopped them" where gpurr stopped
// every run after a training step (--until-step), N the earliest of those
// steps; "" where a run went on to its end.
std::string stoppedRunsText(const std::vector<RunInfo>& runs);

// report.json: what `gpurr bisect --json` prints (docs/BISECT.md).
Json bisectJson(const Report& report);

}  // namespace gpurr::report
