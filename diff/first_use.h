// The inputs of a launch of first-use traces (FORMAT.md, hashInputs), and
// each run's write history before its divergent operation: what vouches for
// the bytes neither run hashed, and which bytes no recorded operation wrote.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "diff/decode.h"
#include "diff/intervals.h"
#include "diff/model.h"

namespace gpurr::diff {

// One run's write history before its divergent operation: what the run's
// recorded operations before event `seq` last did to the bytes of the
// allocations that operation touches. Unlabelled: never written since
// allocated; 0: written without a digest (writesUndigested: a launch not
// hashed counts as writing from each pointer to the end of its allocation, a
// graph launch without outputs as writing everything; a collective that
// received asynchronously); 1: written with one.
// The run is scanned from its start, once, on first need: only for the first
// divergence.
class WritesBefore {
 public:
  WritesBefore(const Run& run, uint64_t seq, const OpView& v) : run_(run), seq_(seq) {
    auto add = [&](const std::vector<RangeDigest>& rs) {
      for (const RangeDigest& r : rs) {
        if (r.range.allocation != 0) ordinals_.push_back(r.range.allocation);
      }
    };
    add(v.inputs);
    add(v.outputs);
    if (v.launch) add(v.launch->reads);
    std::sort(ordinals_.begin(), ordinals_.end());
    ordinals_.erase(std::unique(ordinals_.begin(), ordinals_.end()), ordinals_.end());
  }

  // Bytes of [begin, end) of `allocation` that some operation wrote.
  uint64_t written(uint32_t allocation, uint64_t begin, uint64_t end) {
    return labels().covered(allocation, begin, end);
  }

  // Whether the last write of any byte of `r` left no digest.
  bool undigested(const DeviceRange& r) {
    if (run_.firstUndigested >= seq_ || r.allocation == 0) return false;  // no such write: nothing to scan
    return labels().minLabel(r.allocation, r.offset, r.offset + r.size) == 0;
  }

  // The last collective that wrote bytes of `r` last, receiving them
  // asynchronously (its event), if any did.
  std::optional<uint64_t> receivedBy(const DeviceRange& r) {
    if (!undigested(r)) return std::nullopt;
    std::optional<uint64_t> by;
    received_.forEach(r.allocation, r.offset, r.offset + r.size, [&](IntervalLabels::Label seq) {
      by = std::max<uint64_t>(by.value_or(0), static_cast<uint64_t>(seq));
    });
    return by;
  }

 private:
  const IntervalLabels& labels() {
    if (!labels_) scan();
    return *labels_;
  }

  // Fills labels_ and received_ (the bytes collectives last wrote without a
  // digest, labelled with their events).
  void scan();

  const Run& run_;
  uint64_t seq_;
  std::vector<uint32_t> ordinals_;
  std::optional<IntervalLabels> labels_;
  IntervalLabels received_;
};

// Counts the bytes of each difference's spans that no recorded operation of
// its run wrote before the divergence.
void checkWritten(WritesBefore& history, std::vector<RangeDifference>& diffs, bool sideA);

// Whether either run hashed a launch's ranges before it ran only where their
// bytes had not been touched by a recorded operation (FORMAT.md, hashInputs).
bool firstUseInputs(const Context& ctx);

// The inputs of a launch of first-use traces compared, and what vouches for
// the others, into `d`.
void compareFirstUseInputs(const Context& ctx, const OpView& va, const OpView& vb, WritesBefore& historyA,
                           WritesBefore& historyB, FirstDivergence& d);

}  // namespace gpurr::diff
