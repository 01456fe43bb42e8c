// The report model for the report tests: two runs compared as `gpurr diff`
// compares them, and what a bisect found read from a fixture (a report.json's
// bisect keys), so that a page can be rendered from known inputs.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diff/culprits.h"
#include "report/bisect_report.h"
#include "report/compare.h"
#include "report/diff_report.h"
#include "report/html.h"
#include "report/timeline.h"

namespace testutil {

// Runs `a` and `b` compared with the checked-in known-culprits table, as
// `gpurr diff a b` compares them.
inline gpurr::report::RunComparison compare(const std::filesystem::path& a, const std::filesystem::path& b) {
  static const gpurr::diff::Culprits culprits =
      gpurr::diff::Culprits::load(std::filesystem::path(GPURR_SOURCE_DIR) / "data" / "known_culprits.json");
  return gpurr::report::compareRuns(a, b, false, &culprits);
}

// The process of `c` that diverges first, or null.
inline const gpurr::diff::ProcessDiff* firstDiffering(const gpurr::report::RunComparison& c) {
  for (const auto& p : c.processes) {
    if (p.firstDivergence) return &p;
  }
  return nullptr;
}

// The operations around the first divergence of `c`'s first differing
// process (an empty timeline when the runs are identical).
inline nlohmann::json timelineOf(const gpurr::report::RunComparison& c) {
  const gpurr::diff::ProcessDiff* p = firstDiffering(c);
  if (!p) {
    return c.processes.empty() ? nlohmann::json(nullptr)
                               : gpurr::report::timelineAround(c.processes[0].pathA, c.processes[0].pathB,
                                                               gpurr::diff::ProcessDiff{});
  }
  return gpurr::report::timelineAround(p->pathA, p->pathB, *p);
}

// What a bisect found, from a fixture holding report.json's bisect keys.
inline gpurr::report::BisectFacts bisectFrom(const nlohmann::json& j) {
  using nlohmann::json;
  auto str = [](const json& o, const char* key) {
    return o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
  };
  auto strs = [](const json& o, const char* key) {
    std::vector<std::string> out;
    if (o.contains(key) && o[key].is_array()) {
      for (const json& x : o[key]) {
        if (x.is_string()) out.push_back(x.get<std::string>());
      }
    }
    return out;
  };
  gpurr::report::BisectFacts b;
  b.verdict = str(j, "verdict");
  b.command = strs(j, "command");
  b.recordOptions = strs(j, "recordOptions");
  b.directory = str(j, "directory");
  if (j.contains("runs") && j["runs"].is_array()) {
    for (const json& r : j["runs"]) {
      gpurr::report::RunInfo run;
      run.trace = str(r, "trace");
      run.log = str(r, "log");
      run.exitCode = r.value("exitCode", 0);
      run.seconds = r.value("seconds", 0.0);
      run.launches = r.value("launches", uint64_t{0});
      run.snapshot = str(r, "snapshot");
      b.runs.push_back(run);
    }
  }
  if (j.contains("reproduced") && j["reproduced"].is_boolean()) b.reproduced = j["reproduced"].get<bool>();
  if (j.contains("snapshotLaunch") && j["snapshotLaunch"].is_number_unsigned()) {
    b.snapshotLaunch = j["snapshotLaunch"].get<uint64_t>();
  }
  if (j.contains("replay") && !j["replay"].is_null()) b.replay = gpurr::report::Json(j["replay"]);
  if (j.contains("replayError") && j["replayError"].is_string()) b.replayError = j["replayError"].get<std::string>();
  if (j.contains("compared") && j["compared"].is_object()) {
    const json& c = j["compared"];
    gpurr::report::Compared compared;
    compared.runs = c.value("runs", size_t{0});
    compared.processes = c.value("processes", size_t{0});
    compared.launches = c.value("launches", uint64_t{0});
    compared.hashedLaunches = c.value("hashedLaunches", uint64_t{0});
    compared.copies = c.value("copies", uint64_t{0});
    compared.memsets = c.value("memsets", uint64_t{0});
    compared.bytesHashed = c.value("bytesHashed", uint64_t{0});
    for (const json& d : c.value("environmentDifferences", json::array())) {
      gpurr::report::Compared::Difference difference;
      difference.run = d.value("run", 0u);
      difference.process = str(d, "process");
      difference.field.field = str(d, "field");
      if (d.contains("a") && d["a"].is_string()) difference.field.a = d["a"].get<std::string>();
      if (d.contains("b") && d["b"].is_string()) difference.field.b = d["b"].get<std::string>();
      difference.field.affectsResults = d.value("affectsResults", true);
      compared.environment.push_back(difference);
    }
    b.compared = compared;
  }
  b.error = str(j, "error");
  b.failures = strs(j, "failures");
  b.seconds = j.value("seconds", 0.0);
  return b;
}

// A report to render: each part optional, the pointers of the model set
// when rendering (so that the parts can be changed in between).
struct TestReport {
  std::optional<gpurr::report::RunComparison> diff, confirmation;
  std::optional<gpurr::report::BisectFacts> bisect;
  nlohmann::json timeline = nullptr;

  std::string html() {
    gpurr::report::Report r;
    r.diff = diff ? &*diff : nullptr;
    r.timeline = timeline;
    if (bisect) {
      bisect->confirmation = confirmation ? &*confirmation : nullptr;
      r.bisect = &*bisect;
    }
    return gpurr::report::renderHtml(r);
  }
};

}  // namespace testutil
