// HashRing's bookkeeping (hash_ring.h): the room each hash batch takes in the two circular areas, and gives back.
#include "recorder/hash_ring.h"

#include <algorithm>

namespace gpurr::recorder {

HashRing::HashRing(uint64_t ranges, uint64_t digests, uint64_t batches)
    : ranges_{ranges, 0}, digests_{digests, 0}, batches_(batches), live_(batches) {}

bool HashRing::fits(uint64_t ranges, uint64_t digests) const {
  return ranges <= ranges_.capacity && digests <= digests_.capacity;
}

std::optional<uint64_t> HashRing::place(const Area& area, uint64_t tail, uint64_t n) const {
  if (liveCount_ == 0) return n <= area.capacity ? std::optional<uint64_t>(0) : std::nullopt;
  if (area.head > tail) {
    // Live units are [tail, head): free are [head, capacity) and [0, tail).
    if (area.head + n <= area.capacity) return area.head;
    if (n <= tail) return 0;
    return std::nullopt;
  }
  // Wrapped: live are [tail, end of use) and [0, head); free is [head, tail)
  // (nothing when head == tail: batches are never empty).
  if (area.head + n <= tail) return area.head;
  return std::nullopt;
}

std::optional<HashRing::Batch> HashRing::take(uint64_t ranges, uint64_t digests) {
  ranges = std::max<uint64_t>(ranges, 1);  // an empty batch would make a full ring look empty
  digests = std::max<uint64_t>(digests, 1);
  if (!fits(ranges, digests) || liveCount_ >= batches_) return std::nullopt;
  const uint64_t rangeTail = liveCount_ == 0 ? 0 : oldest().rangeStart;
  const uint64_t digestTail = liveCount_ == 0 ? 0 : oldest().digestStart;
  const std::optional<uint64_t> r = place(ranges_, rangeTail, ranges);
  const std::optional<uint64_t> d = place(digests_, digestTail, digests);
  if (!r || !d) return std::nullopt;
  live_[nextSequence_ % batches_] = {*r, *r + ranges, *d, *d + digests};
  ++liveCount_;
  ranges_.head = *r + ranges;
  digests_.head = *d + digests;
  return Batch{nextSequence_++, *r, *d};
}

void HashRing::giveBack(uint64_t sequence) {
  if (sequence < nextSequence_ - liveCount_ || sequence >= nextSequence_) return;
  live_[sequence % batches_].released = true;
  while (liveCount_ > 0 && oldest().released) --liveCount_;
  if (liveCount_ == 0) ranges_.head = digests_.head = 0;
}

}  // namespace gpurr::recorder
