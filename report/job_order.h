// The job's order of events across ranks: what happened before what, by
// the collectives the ranks took part in together. A collective joins its
// ranks: what a rank did before it happened before what any of its ranks
// does after it (Lamport, "Time, Clocks, and the Ordering of Events in a
// Distributed System", 1978). The job's view (job.h) orders its origins and
// the collectives that spread a divergence by it, not by counts of
// collectives, which differ between communicators: a subgroup that runs
// five all-reduces for each of the world's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpurr::report {

class CollectiveOrder {
 public:
  // `lists[p]`: process p's collectives in the order it issued them, each
  // as the id of the collective of the job it is (< `collectives`): the
  // same id in every process that took part in it.
  CollectiveOrder(std::vector<std::vector<uint32_t>> lists, uint32_t collectives);

  // For process p's point after its first `k` collectives: each process's
  // first collective that happened after it (its index in that process's
  // list; the list's size where none did).
  std::vector<uint64_t> after(size_t p, uint64_t k) const;

  // A logical clock of collective `id`: one more than the clocks of the
  // collectives its processes took part in just before it, so that one that
  // happened before another has a smaller clock; UINT64_MAX for one whose
  // processes never all reached it (they issued collectives in another
  // order: a mismatch).
  uint64_t clock(uint32_t id) const { return clock_[id]; }

  // The collective at index `k` of process p's list, if any.
  const std::vector<uint32_t>& list(size_t p) const { return lists_[p]; }

 private:
  std::vector<std::vector<uint32_t>> lists_;
  // Each collective's (process, index in its list).
  std::vector<std::vector<std::pair<uint32_t, uint64_t>>> members_;
  std::vector<uint64_t> clock_;
};

}  // namespace gpurr::report
