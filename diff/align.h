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
  // A sequence cut short (its run's trace ends before the other's): the
  // other's operations after its last one are not edits. The alignment
  // takes all of the cut sequence at the fewest edits, and the other's
  // rest is its last run, a stretch of that sequence alone. (Counting
  // them as edits would rather slide the cut sequence's operations over
  // later ones of the same kind.)
  enum class Cut : uint8_t { kNeither, kA, kB };
  Cut cut = Cut::kNeither;
};

struct Alignment {
  std::vector<AlignedRun> runs;  // in order, covering both sequences
  uint64_t matched = 0;
  bool bounded = false;  // some window hit maxEdits: a stretch may be coarser than minimal
};

// Operation identities, by position: a contiguous array, or a word every
// `stride` in chunks of 2^shift positions (the diff's store of operations,
// read in place).
class Keys {
 public:
  Keys() = default;
  Keys(std::span<const uint64_t> keys) : data_(keys.data()), size_(keys.size()) {}
  Keys(const std::vector<uint64_t>& keys) : Keys(std::span<const uint64_t>(keys)) {}
  // Positions [begin, begin + size) of the chunked store `chunks`. With
  // `tagWord` > 0, the word that many words after each identity holds a
  // tag in its top 16 bits (Op::word: where the program issued the
  // operation), mixed into the identity: operations of one identity with
  // different tags differ, and a tag of 0 leaves the identity as it is.
  Keys(const uint64_t* const* chunks, unsigned shift, uint64_t stride, uint64_t begin, uint64_t size,
       unsigned tagWord = 0)
      : chunks_(chunks), shift_(shift), tagWord_(tagWord), stride_(stride), begin_(begin), size_(size) {}

  uint64_t size() const { return size_; }
  uint64_t operator[](uint64_t i) const {
    if (chunks_ == nullptr) return data_[begin_ + i];
    const uint64_t p = begin_ + i;
    const uint64_t* k = chunks_[p >> shift_] + (p & ((uint64_t{1} << shift_) - 1)) * stride_;
    return tagWord_ == 0 ? *k : withTag(*k, k[tagWord_] >> 48);
  }
  // An identity with a tag mixed in; the identity itself for tag 0.
  static uint64_t withTag(uint64_t key, uint64_t tag) { return key ^ tag * 0x9e3779b97f4a7c15; }
  Keys subspan(uint64_t offset, uint64_t count) const {
    Keys k = *this;
    k.begin_ += offset;
    k.size_ = count;
    return k;
  }

 private:
  const uint64_t* data_ = nullptr;
  const uint64_t* const* chunks_ = nullptr;
  unsigned shift_ = 0, tagWord_ = 0;
  uint64_t stride_ = 1, begin_ = 0, size_ = 0;
};

// Aligns `a` and `b` (operation identities). Adjacent stretches are merged.
Alignment align(Keys a, Keys b, const AlignOptions& options = {});

}  // namespace gpurr::diff
