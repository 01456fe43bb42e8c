// Stage 3, after the alignment: pairs of operations the identities tell apart
// that are one operation (same-shape launches whose pointers moved, another
// launch configuration), and pairs that differ by a benign difference alone.
#pragma once

#include <cstdint>
#include <unordered_set>

#include "diff/align.h"
#include "diff/model.h"

namespace gpurr::diff {

// The identity includes where pointer parameters point, so a launch whose
// pointer points elsewhere (into another allocation, or at another offset)
// is no match for its counterpart: the alignment makes a stretch of it. Pairs
// of launches at the start (or the end) of a stretch that have the same shape
// (kernel, launch configuration, parameter size), issued from the same site
// where both have one (Op::sameSite: not an added layer's first launch and
// the final norm's), are the same operation with
// its pointers moved, or with a pointer seen on one side only: they are
// matched here, so that the diff compares their parameters instead of
// reporting a different path. In a stretch with more operations on one
// side, where the pairs from the end taken first would pair an operation
// with another partner, the pairs whose inputs and outputs agree more by
// digest are kept (an extra launch next to the real one). First, a match
// between two stretches that it shifts against each other (more of run A
// before it, as many more of run B after it) is undone where the
// operations, paired in order, have the same shapes and agree in their
// digests at least as well: the tie an extra launch's shifted identities
// leave to the alignment.
void matchSameShape(Alignment& alignment, const Run& a, const Run& b);

// A stretch of one launch in each run, the same kernel with the same
// parameters, inputs and outputs launched with another configuration: one
// operation (an autotuner timed block sizes and kept another). Paired in
// `alignment`; returns run A's index of each. Each check reads both events
// again: at most 2^18 of them, and none after 4,096 in a row that were no
// such pair.
std::unordered_set<uint64_t> pairLaunchConfigurations(const Context& ctx, Alignment& alignment);

// Matched pairs whose identities differ (their pointers, their launch
// configuration, an allocation one run renamed) by a benign difference
// alone: counted, their first kept, and not taken for a divergence.
class BenignPairs {
 public:
  BenignPairs(const Context& ctx, std::unordered_set<uint64_t> configurationOnly)
      : ctx_(ctx), configurationOnly_(std::move(configurationOnly)) {}

  // Whether matched pair (ia, ib), whose identities differ, differs by a
  // benign difference alone; counted when it does.
  bool absorb(uint64_t ia, uint64_t ib);

  PairedDespite staleWords, launchConfiguration, renamedAllocation;

 private:
  const Context& ctx_;
  std::unordered_set<uint64_t> configurationOnly_;
};

}  // namespace gpurr::diff
