// Stage 5, classification of a first divergence at a stretch of the
// alignment: a reordering (who issued the operations, which touch their
// data) or another path (an algorithm choice).
#pragma once

#include <cstddef>
#include <vector>

#include "diff/model.h"
#include "diff/reorder.h"

namespace gpurr::diff {

// The first divergence at stretch `r` of `runs`, part of reordering `g` if any.
FirstDivergence classifyPath(const Context& ctx, const std::vector<AlignedRun>& runs, size_t r, Group g);

}  // namespace gpurr::diff
