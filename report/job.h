// The job's view of a comparison of two directories of per-rank traces whose
// processes ran collectives: one verdict across ranks. Collectives issued
// differently by the ranks of one run (another operation, count or type at
// the same sequence number of a communicator) come first; then each rank's
// first divergence is an origin (it does not come from what a collective
// received) or a receiver (a collective to which the rank sent identical
// data received different data), and the earliest origins in the job's
// collective order are named (several when they diverged before the same
// collective); then how the divergence spread: which collective carried it
// from which ranks to which; and, where a collective received different
// data although every rank sent it identical data, the job's cause at it
// (diff/reduction_order.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "diff/reduction_order.h"
#include "report/compare.h"
#include "report/diff_report.h"

namespace gpurr::report {

// One rank's call at a sequence number where the ranks disagree.
struct CollectiveCallSite {
  std::string process;  // "rank1.gpurr"
  int32_t rank = -1;
  std::string call;     // trace::describe of the collective; "(none)" when the rank issued none, or
                        // "(its trace ends before it: cut short)"
  std::string file;
  uint32_t line = 0;
};

struct CollectiveMismatch {
  std::string run;  // the run's path as given
  uint64_t communicator = 0;
  uint64_t sequence = 0;
  // A send and its receive: sender << 32 | receiver, `sequence` then their
  // place among the calls between those two (CollectiveCall::ends); -1.
  int64_t ends = -1;
  std::vector<CollectiveCallSite> calls;
};

// "collective #3", or "send/receive #1 from rank 0 to rank 1 (the calls
// between those two, counted from 0)".
std::string mismatchedCall(const CollectiveMismatch& m);

struct RankVerdict {
  size_t process = 0;  // index into RunComparison::processes
  int32_t rank = -1;
  bool origin = false;
  // A receiver's: run A's event of the collective that carried the
  // divergence to it. That is its first divergence (a collective it sent
  // identical data and received other data from), or an earlier collective
  // whose receipt has no digest (an asynchronous one, as
  // DistributedDataParallel's gradient all-reduces) to which it sent
  // identical data and another rank other data.
  uint64_t carrier = 0;
  // Collectives this rank completed in run A before its first divergence
  // (a receiver: before its carrier): its place in the job's collective
  // order.
  uint64_t collectivesBefore = 0;
  // A receiver's carrier is an asynchronous collective (no digest of what
  // it received) to which no rank recorded sent other data, but some ranks
  // of its communicator were not recorded in both runs: the divergence may
  // have come from one of them, or have begun here.
  bool fromUnrecorded = false;
};

// A collective that carried the divergence: the ranks whose data sent to it
// differs between the runs (`from`) and the ranks it carried it to (`to`:
// they sent it identical data; RankVerdict::carrier).
struct SpreadStep {
  uint64_t communicator = 0, sequence = 0;
  std::string collective;  // "ncclAllReduce sum 1024 float32 (communicator 5eed0c0111ec71f5, #0)"
  trace::CollectiveOp op = trace::CollectiveOp::kOther;
  std::optional<trace::Origin> origin;  // run A's, on the first rank of `to`: the Python line and step
  std::vector<int32_t> from, to;
  // Its other ranks whose own first divergence came before they issued it:
  // where none is in `from` (what they sent was not hashed, an object
  // collective's), the likely senders of what differed.
  std::vector<int32_t> divergedBefore;
  bool reduces = false;  // it has a reduction (all-reduce, reduce-scatter, reduce)
  // Every rank of the communicator was recorded with this collective in
  // both runs, issuing the same call (op, count and type) in both, what it
  // sent hashed, and sent identical data in both: what the ranks received
  // differs by the collective alone.
  bool everyRankSentIdentical = false;
  // What every rank of `to` received has no digest (an asynchronous call,
  // an object collective's): that it differed is inferred from their later
  // divergence.
  bool receivedUnhashed = false;
  // Its ranks issued it differently in a run (a collective mismatch): it
  // may never have completed, and what it gave is not what it would have.
  bool issuedDifferently = false;
};

struct JobView {
  std::vector<int32_t> processRanks;           // each process's rank, by index into RunComparison::processes
  // The first communicator with another number of ranks in each run (jobs
  // of different sizes: their collectives do not correspond).
  struct Sizes {
    uint64_t communicator = 0;
    int32_t a = 0, b = 0;
  };
  std::optional<Sizes> sizes;
  std::vector<CollectiveMismatch> mismatches;  // the first few of each run
  std::vector<RankVerdict> ranks;              // ranks that diverged, in process order
  // Indices into `ranks`: the origins that no other origin's divergence
  // reached through collectives before they diverged (job_order.h), in rank
  // order (several where they diverged independently).
  std::vector<size_t> earliestOrigins;
  // Whether the earliest origins diverged just before the same collective.
  bool sameCollective = true;
  std::vector<SpreadStep> spread;  // in the job's collective order
  // Where a rank may have received the divergence from ranks not recorded
  // (RankVerdict::fromUnrecorded), those of the first such collective, each
  // with why: "rank2.gpurr (cut short before it in run B)", "rank7.gpurr
  // (missing in run B)".
  std::vector<std::string> unseen;
  // The first reducing collective of `spread` that every rank sent
  // identical data (index into `spread`), and the job's verdict at it.
  std::optional<size_t> reductionOrderAt;
  std::optional<diff::CollectiveVerdict> cause;
  // What the job knows about a process's own report that the process alone
  // cannot: for a receiver, the ranks that sent its carrier other data; for
  // a collective its report lists as an independent divergence, the ranks
  // that sent that collective other data (it came from them). By index into
  // RunComparison::processes; printed after the process's report.
  std::map<size_t, std::vector<std::string>> notes;
  // The same without the run A event numbers they give, each rank's own:
  // for ranks shown together (the HTML ranks table's rows).
  std::map<size_t, std::vector<std::string>> notesAlike;
};

// The job's view, when `c` compares directories whose run A traces hold
// collectives (nullopt otherwise: nothing is added to the report).
std::optional<JobView> jobView(const RunComparison& c);

// The order in which the reports show the processes: a job's earliest
// origins first (where the divergence began), then its other origins, in
// rank order, then the others as compared.
std::vector<size_t> processOrder(const RunComparison& c, const JobView* job);
// The process a report leads with: the first in that order that diverged
// (null when none did).
const diff::ProcessDiff* leadProcess(const RunComparison& c, const JobView* job);

// "rank 3", "ranks 0-4, 6, 7", "no rank".
std::string ranksText(const std::vector<int32_t>& ranks);
// The same list without its word: "0-4, 6, 7".
std::string rankList(const std::vector<int32_t>& ranks);

// `text` with a process's own place in its collectives ("rank 3 of 64", for
// rank 3) written `with` instead ("rank # of "): texts of several ranks
// alike but for it become equal.
std::string withOwnRankAs(std::string text, int32_t rank, std::string_view with);

// Processes whose reports are alike but for their own rank ("rank 3 of
// 64"), host and device addresses and digests, so that a job's 63
// receivers of one all-reduce show one report:
// `reports[i]` is process i's report and `ranks[i]` its rank (-1 unknown);
// returns, for each process in `order`, the processes shown with it (in
// `order`, never before it), and an empty list for those shown with an
// earlier one and for those alike to none.
std::vector<std::vector<size_t>> alikeReports(const std::vector<std::string>& reports,
                                              const std::vector<int32_t>& ranks, const std::vector<size_t>& order);
// How the reports of process `i` and those shown with it (`with`) differ,
// after a comma: ", each with its own rank", or, where their addresses or
// digests differ too (each rank's own buffers and data), ", each with its
// own rank, addresses and digests (--json gives them)"; where none has a
// rank, nothing, or ", but for their addresses and digests (...)".
std::string alikeText(const std::vector<std::string>& reports, const std::vector<int32_t>& ranks, size_t i,
                      const std::vector<size_t>& with);
// The processes `group` (indices, as alikeReports gives them), in few words:
// "ranks 1-4, 6-63" where every rank is known, else their names ("rank1.gpurr,
// proc7.gpurr and 3 more").
std::string processesText(const std::vector<size_t>& group, const std::vector<int32_t>& ranks,
                          const std::vector<std::string>& names);
// A spread step's collective with its Python line and step.
std::string spreadCollectiveText(const SpreadStep& s);

void printJob(std::ostream& os, const Style& st, const RunComparison& c, const JobView& job);
// "no origin: every rank that diverged received its divergence through a
// collective (WHY)", for a job with ranks that diverged and no origin.
std::string noOriginText(const JobView& job);
// A rank's role: "origin", "receiver", or "origin or receiver" (one
// perhaps reached from a rank not recorded).
std::string roleOf(const RankVerdict& v);
// "the jobs differ in size: communicator ... has 2 ranks in run A and 4 in run B ..."
std::string sizesText(const JobView::Sizes& s);
nlohmann::ordered_json jobJson(const RunComparison& c, const JobView& job);

}  // namespace gpurr::report
