// Stage 6, the blast radius: from the first divergence on, which later
// operations read data derived from it, and which later divergences no
// earlier one explains (independent); of those that read nothing of each
// other, the first is the one that happened first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "diff/model.h"
#include "diff/pairing.h"
#include "diff/reorder.h"

namespace gpurr::diff {

// A place in the alignment: stretch `run` of it, and `offset` within it
// when it is matched.
struct AlignmentAt {
  size_t run = 0;
  uint64_t offset = 0;
};

// What the pass over the rest of the alignment finds: the blast radius, and
// the stretches of the alignment from the first divergence's on (the first
// few).
struct BlastResult {
  BlastRadius blast;
  std::vector<PathDivergence> pathDivergences;
  // Where a divergence that happened before the one found first in
  // alignment order is, when one is: `blast` is then its blast radius, and
  // the one found first is among the independent ones.
  std::optional<AlignmentAt> earliest;
  // A path divergence first whose first operation the PyTorch layer did not
  // observe: the first operation of a later stretch of as many operations a
  // side, of the same shapes in order, at the same place in another step,
  // that it observed (the same stretch in a later step, which the layer
  // observed in full).
  std::optional<OpInfo> namedLater;
};

// The blast radius of `firstDivergence`, found at `first`, by taint
// propagated through allocations over the rest of the alignment. `groups`:
// the reordering of each stretch (reorderings); `benign` absorbs and counts
// the pairs that differ by a benign difference alone.
BlastResult blastRadius(const Context& ctx, const std::vector<AlignedRun>& runs, const std::vector<Group>& groups,
                        AlignmentAt first, const FirstDivergence& firstDivergence, BenignPairs& benign);

}  // namespace gpurr::diff
