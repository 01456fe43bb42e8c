// Stage 6, the blast radius: from the first divergence on, which later
// operations read data derived from it, and which later divergences no
// earlier one explains (independent).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "diff/model.h"
#include "diff/pairing.h"
#include "diff/reorder.h"

namespace gpurr::diff {

// What the pass over the rest of the alignment finds: the blast radius, and
// the stretches of the alignment from the first divergence's on (the first
// few).
struct BlastResult {
  BlastRadius blast;
  std::vector<PathDivergence> pathDivergences;
};

// The blast radius of `first`, found at stretch `firstRun` of `runs` (at
// `firstOffset` within it, when matched), by taint propagated through
// allocations over the rest of the alignment. `groups`: the reordering of
// each stretch (reorderings); `benign` absorbs and counts the pairs that
// differ by a benign difference alone.
BlastResult blastRadius(const Context& ctx, const std::vector<AlignedRun>& runs, const std::vector<Group>& groups,
                        size_t firstRun, uint64_t firstOffset, const FirstDivergence& first, BenignPairs& benign);

}  // namespace gpurr::diff
