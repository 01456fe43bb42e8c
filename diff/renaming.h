// Stage 3, after the pairing: allocations run B named otherwise than run A.
// An allocation's identity counts the operations of its first user's kind
// before that user (model.h, AllocationIds), so one extra launch of a
// kernel in run B (a workspace's fill) gives every allocation a later
// launch of that kernel uses first the identity its predecessor has in run
// A, and the launches that use them no longer match. The launches the
// alignment paired by shape (pairing.h) say which allocation is which: what
// each pointer of a pair points to, counted over the pairs, are votes.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "diff/align.h"
#include "diff/model.h"

namespace gpurr::diff {

// The pointers of the launches renamings() read, kept across its rounds: a
// round reads from a trace only the launches no round before it read.
class LaunchPointers {
 public:
  // What a launch's pointers point into, and its kernel (by a nonzero
  // hash of its name; 0: not a launch).
  struct Launch {
    size_t function = 0;
    std::vector<trace::PointerParam> pointers;
  };
  using Map = std::unordered_map<uint64_t, Launch>;  // by seq

  // Those of the launches `seqs` (sorted) of `run`: the ones not read
  // before are read in one pass over its trace from the first of them to
  // the last.
  const Map& of(const Run& run, const std::vector<uint64_t>& seqs);

 private:
  std::unordered_map<const trace::TraceReader*, Map> byTrace_;
};

// Run B's allocations (by ordinal) that the pairs of `alignment` whose
// identities differ place at another allocation of run A than its identity
// does, with that allocation's identity: more of those pairs point them
// there than anywhere else, each allocation of run A taken once, its size
// and kind the same (`all`). `guarded`: those but the ones of an allocation
// of run B first used before the alignment's first edit, or to an identity
// that such an allocation holds (it may be that allocation of run A: an
// extra operation on one buffer, whose output the next operation reads where
// the other run's reads that buffer, makes the next operation's pointers
// point there). Reads the
// pointers of up to 2^18 such pairs through `read`. nullopt when there is
// none.
struct Renamings {
  std::unordered_map<uint32_t, uint64_t> all, guarded;
};
std::optional<Renamings> renamings(const Context& ctx, const Alignment& alignment, LaunchPointers& read);

// How many of run A's operations, from its first, `alignment` matches with
// operations of the same identity, up to its first edit or pair that
// differs; and whether a (new) alignment still matches each of those `n`
// with one of the same identity. A renaming that takes an allocation's
// identity from it where the runs agreed makes operations there differ.
uint64_t agreeingPrefix(const Run& a, const Run& b, const Alignment& alignment);
bool keepsAgreeing(const Run& a, const Run& b, const Alignment& alignment, uint64_t n);

// How many matched pairs of `alignment` have the same identity: of two
// summaries of one pair of runs, the better.
uint64_t sameIdentities(const Run& a, const Run& b, const Alignment& alignment);

}  // namespace gpurr::diff
