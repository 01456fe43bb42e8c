// Stage 2, the canonical order: each run's operations put in the normal form
// of their host threads' interleavings, so that two runs whose threads only
// raced to enqueue differently hold the same sequence.
#pragma once

#include <cstdint>

#include "diff/model.h"

namespace gpurr::diff {

// Where the canonical order of both runs starts: after the operations both
// agree on from the start while neither had shown a second host thread.
uint64_t agreedStart(const Run& a, const Run& b);

// Puts `run`'s operations from `start` in canonical order, in place.
// Throws trace::TraceError when there are too many to order.
void canonicalOrder(Run& run, uint64_t start);

}  // namespace gpurr::diff
