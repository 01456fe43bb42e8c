// Stretches of the alignment that hold the same operations on both sides in
// another order (reorderings), and what a report shows of a stretch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "diff/model.h"

namespace gpurr::diff {

// The stretches of a reordering: runs [first, last] of the alignment.
struct Group {
  size_t first = SIZE_MAX, last = SIZE_MAX;
  bool any() const { return first != SIZE_MAX; }
};

// By stretch of `runs`: the reordering it is part of; none for another path.
std::vector<Group> reorderings(const Context& ctx, const std::vector<AlignedRun>& runs);

// Stretch `r` of the alignment, as a report shows it (with its reordering
// `g`, if any), and that reordering alone.
PathDivergence stretchOf(const Context& ctx, const std::vector<AlignedRun>& runs, size_t r, Group g);
Reordering reorderingOf(const Context& ctx, const std::vector<AlignedRun>& runs, size_t r, Group g);

// "run B does this operation 20 operations later"
std::string reorderingText(const Reordering& m);

}  // namespace gpurr::diff
