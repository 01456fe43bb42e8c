// The ranks of a comparison of two directories of per-process traces: how
// many traces each run holds, those present in one run only (a rank that
// did not start, or left no trace), those that ended early (a rank that
// crashed or was killed) and those that could not be read (not compared).
// Printed before the job's view and the processes.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "report/compare.h"
#include "report/diff_report.h"

namespace gpurr::report {

// Nothing for two traces, or when every rank is in both runs, complete and
// read.
void printRanks(std::ostream& os, const Style& st, const RunComparison& c);

// {"a": N, "b": M, "missing": {"a": [...], "b": [...]}, "incomplete": {"a":
// [{"process", "detail"}], "b": [...]}, "unreadable": [{"process",
// "detail"}]}; null for two traces.
nlohmann::ordered_json ranksJson(const RunComparison& c);

}  // namespace gpurr::report
