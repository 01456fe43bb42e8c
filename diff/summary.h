// Stage 1, the summary: one pass over each run's trace, both at once, that
// keeps one compact record per operation (Op) with hashes of its identity
// and its outputs, allocations named by their identity.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "diff/model.h"

namespace gpurr::diff {

// Summarises both runs (`a.reader`, `b.reader` set) into their Run, on
// `threads` threads; `drop` gives up the operations both agree on from the
// start as it goes. From the first position where they differ on, each
// trace keeps its last decompressed blocks, up to kKeptFrameBytes, for the
// passes that read it again from the first divergence (TraceReader::
// keepRecentBlocks; the caller gives them back; on several threads, a run
// read to its end before the other showed the difference keeps none).
// Throws trace::TraceError on a corrupt trace.
void summariseBoth(Run& a, Run& b, unsigned threads, bool drop);
inline constexpr uint64_t kKeptFrameBytes = uint64_t{16} << 20;

// Where two runs agree at one position: the same identity, and the same
// outputs where both hashed them.
bool agree(const Op& a, const Op& b);

// The data dependencies between operations of different host threads and
// streams that the summary found, (from, to) by position, in the order of
// `to`; the run gives them up.
std::vector<std::pair<uint32_t, uint32_t>> takeDependencies(Run& run);

}  // namespace gpurr::diff
