// Alignment of two runs' operation sequences: which operations correspond,
// and which stretches were taken by one run only (another cuDNN/cuBLAS
// algorithm, a different number of kernels). Myers' O(ND) difference
// algorithm on operation identities, with its cost bounded.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace gpurr::diff {

// A run of the alignment: `length` operations matched one to one starting at
// a[aBegin] and b[bBegin], or a stretch of aCount operations of A replaced by
// bCount operations of B (one of the two may be zero).
struct AlignedRun {
  bool match = true;
  uint64_t aBegin = 0, bBegin = 0;
  uint64_t aCount = 0, bCount = 0;  // equal for a match
};

struct AlignOptions {
  // Sequences longer than this (after the common prefix and suffix) are
  // aligned window by window, so the cost stays O(window * edits) per window.
  uint64_t window = 4096;
  // Upper bound on the edit distance explored in one window; beyond it the
  // window is reported as one stretch.
  uint64_t maxEdits = 2048;
};

struct Alignment {
  std::vector<AlignedRun> runs;  // in order, covering both sequences
  uint64_t matched = 0;
  bool bounded = false;  // some window hit maxEdits: a stretch may be coarser than minimal
};

// Aligns `a` and `b` (operation identities). Adjacent stretches are merged.
Alignment align(std::span<const uint64_t> a, std::span<const uint64_t> b,
                const AlignOptions& options = {});

}  // namespace gpurr::diff
