// Where each hash batch's descriptors and chunk digests live in a context's
// hash ring (CudaDevice): two circular areas of pinned, device-mapped host
// memory, allocated once. The hash kernel reads the descriptors and writes
// the digests there directly, and raises the batch's completion word, so a
// batch costs the program's stream one kernel launch and nothing else. Pure
// bookkeeping, tested on the CPU.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace gpurr::recorder {

class HashRing {
 public:
  struct Batch {
    uint64_t sequence = 0;     // batches taken before it; its completion word is sequence % batches
    uint64_t firstRange = 0;   // index into the descriptor area
    uint64_t firstDigest = 0;  // index into the digest area
  };

  // Areas of `ranges` descriptors and `digests` chunk digests; at most
  // `batches` batches in flight.
  HashRing(uint64_t ranges, uint64_t digests, uint64_t batches);

  // Room for a batch of `ranges` descriptors and `digests` digests, each
  // contiguous; nothing when the ring is full now (or could never hold it:
  // see fits).
  std::optional<Batch> take(uint64_t ranges, uint64_t digests);
  // Whether an empty ring could hold such a batch.
  bool fits(uint64_t ranges, uint64_t digests) const;
  // The batch's digests have been read: its room is reused once every batch
  // taken before it is given back too.
  void giveBack(uint64_t sequence);

  uint64_t inFlight() const { return liveCount_; }
  uint64_t batches() const { return batches_; }

 private:
  struct Area {
    uint64_t capacity = 0, head = 0;
  };
  struct Live {
    uint64_t rangeStart, rangeEnd, digestStart, digestEnd;
    bool released = false;
  };
  // Start of `n` contiguous units of `area` after its head, given the oldest
  // live batch's start (`tail`) there; nothing when they do not fit.
  std::optional<uint64_t> place(const Area& area, uint64_t tail, uint64_t n) const;

  Area ranges_, digests_;
  uint64_t batches_;
  uint64_t nextSequence_ = 0;  // of the next batch taken
  // Taken and not yet reclaimed: the batches of sequences [nextSequence_ -
  // liveCount_, nextSequence_), batch s at live_[s % batches_]. Allocated
  // once: taking a batch allocates nothing.
  std::vector<Live> live_;
  uint64_t liveCount_ = 0;
  Live& oldest() { return live_[(nextSequence_ - liveCount_) % batches_]; }
  const Live& oldest() const { return live_[(nextSequence_ - liveCount_) % batches_]; }
};

}  // namespace gpurr::recorder
