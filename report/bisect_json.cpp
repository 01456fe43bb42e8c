// report.json: what `gpurr bisect` found, as one JSON object (docs/BISECT.md),
// made from the same model as report.html.
#include "report/bisect_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "report/diff_report.h"

namespace gpurr::report {

namespace {

Json runJson(const RunInfo& r) {
  return Json{{"trace", r.trace.empty() ? Json(nullptr) : Json(r.trace)},
              {"log", r.log},
              {"exitCode", r.exitCode},
              {"seconds", r.seconds},
              {"launches", r.launches},
              {"snapshot", r.snapshot.empty() ? Json(nullptr) : Json(r.snapshot)},
              {"stoppedAfterStep", r.stoppedAfterStep >= 0 ? Json(r.stoppedAfterStep) : Json(nullptr)},
              {"stoppedByBisect", r.stoppedByBisect},
              {"startedDuring", r.startedBeside != 0 ? Json(r.startedBeside) : Json(nullptr)}};
}

Json comparedJson(const Compared& c) {
  Json env = Json::array();
  for (const Compared::Difference& d : c.environment) {
    const diff::EnvDifference& e = d.field;
    env.push_back({{"run", d.run}, {"process", d.process}, {"field", e.field},
                   {"a", e.a ? Json(*e.a) : Json(nullptr)}, {"b", e.b ? Json(*e.b) : Json(nullptr)},
                   {"affectsResults", e.affectsResults}});
  }
  Json j{{"runs", c.runs},
         {"processes", c.processes},
         {"launches", c.launches},
         {"hashedLaunches", c.hashedLaunches},
         {"copies", c.copies},
         {"memsets", c.memsets},
         {"bytesHashed", c.bytesHashed}};
  j["environmentDifferences"] = env;
  return j;
}

}  // namespace

std::string stoppedRunsText(const std::vector<RunInfo>& runs) {
  int64_t upTo = -1;
  for (const RunInfo& r : runs) {
    if (r.stoppedAfterStep < 0) return "";
    upTo = upTo < 0 ? r.stoppedAfterStep : std::min(upTo, r.stoppedAfterStep);
  }
  return upTo < 0 ? "" : fmt::format(" up to training step {}, where gpurr stopped them", upTo);
}

Json bisectJson(const Report& report) {
  const BisectFacts& o = *report.bisect;
  Json runs = Json::array();
  for (const RunInfo& r : o.runs) runs.push_back(runJson(r));
  return Json{{"gpurrBisect", 1},
              {"verdict", o.verdict},
              {"command", o.command},
              {"recordOptions", o.recordOptions},
              {"directory", o.directory},
              {"runs", runs},
              {"baseRun", o.baseRun},
              {"diff", report.diff ? comparisonJson(*report.diff) : Json(nullptr)},
              {"confirmation", o.confirmation ? comparisonJson(*o.confirmation) : Json(nullptr)},
              {"confirmationOther", o.confirmationOther ? comparisonJson(*o.confirmationOther) : Json(nullptr)},
              {"reproduced", o.reproduced ? Json(*o.reproduced) : Json(nullptr)},
              {"reproducedElsewhere", o.reproducedElsewhere},
              {"snapshotLaunch", o.snapshotLaunch ? Json(*o.snapshotLaunch) : Json(nullptr)},
              {"replay", o.replay ? *o.replay : Json(nullptr)},
              {"replayError", o.replayError ? Json(*o.replayError) : Json(nullptr)},
              {"timeline", Json(report.timeline)},
              {"compared", o.compared ? comparedJson(*o.compared) : Json(nullptr)},
              {"error", o.error.empty() ? Json(nullptr) : Json(o.error)},
              {"failures", o.failures},
              {"seconds", o.seconds}};
}

}  // namespace gpurr::report
