// The job's view of a comparison of two directories of per-rank traces whose
// processes ran collectives: one verdict across ranks. Collectives issued
// differently by the ranks of one run (another operation, count or type at
// the same sequence number of a communicator) come first; then each rank's
// first divergence is an origin (it does not come from what a collective
// received) or a receiver (a collective to which the rank sent identical
// data received different data), and the earliest origin in the job's
// collective order is named.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/compare.h"
#include "report/diff_report.h"

namespace gpurr::report {

// One rank's call at a sequence number where the ranks disagree.
struct CollectiveCallSite {
  std::string process;  // "rank1.gpurr"
  int32_t rank = -1;
  std::string call;     // trace::describe of the collective; "(none)" when the rank issued none
  std::string file;
  uint32_t line = 0;
};

struct CollectiveMismatch {
  std::string run;  // the run's path as given
  uint64_t communicator = 0;
  uint64_t sequence = 0;
  std::vector<CollectiveCallSite> calls;
};

struct RankVerdict {
  size_t process = 0;  // index into RunComparison::processes
  int32_t rank = -1;
  bool origin = false;
  // Collectives this rank completed in run A before its first divergence:
  // its place in the job's collective order.
  uint64_t collectivesBefore = 0;
};

struct JobView {
  std::vector<CollectiveMismatch> mismatches;  // the first few of each run
  std::vector<RankVerdict> ranks;              // ranks that diverged, in process order
  std::optional<size_t> earliestOrigin;        // index into `ranks`
};

// The job's view, when `c` compares directories whose run A traces hold
// collectives (nullopt otherwise: nothing is added to the report).
std::optional<JobView> jobView(const RunComparison& c);

void printJob(std::ostream& os, const Style& st, const RunComparison& c, const JobView& job);
nlohmann::ordered_json jobJson(const RunComparison& c, const JobView& job);

}  // namespace gpurr::report
