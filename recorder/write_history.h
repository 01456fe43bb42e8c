// Which device bytes recorded operations have touched since their memory was
// handed out, and on which stream: a launch's ranges (read or written, the
// recorder cannot tell), a copy's or a set's destination, each once its
// digest is on its way. Without --hash-inputs a launch hashes before it runs
// only the ranges holding bytes it cannot take on trust (FORMAT.md,
// `hashInputs`): bytes nothing recorded has touched yet, and bytes last
// touched on another stream (which only the program's synchronisation, if
// any, orders before the launch). Every other byte it reads was last touched
// on its own stream by an earlier recorded operation, whose digests vouch for
// it in the diff.
//
// Memory handed out again (an allocation, a block of PyTorch's caching
// allocator) starts untouched: its stale bytes are the previous owner's. So
// do bytes written without a digest: the history must never vouch for them.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace gpurr::recorder {

class WriteHistory {
 public:
  // Marks [begin, end) touched on `stream`; true when some of it was not
  // touched before, or was last touched on another stream.
  bool touch(uint64_t begin, uint64_t end, uint64_t stream) {
    std::lock_guard lock(mu_);
    return touchLocked(begin, end, stream);
  }
  // The history held for several touches at once (a launch's ranges): one
  // lock instead of one per range.
  class Held {
   public:
    explicit Held(WriteHistory& history) : history_(history), lock_(history.mu_) {}
    bool touch(uint64_t begin, uint64_t end, uint64_t stream) { return history_.touchLocked(begin, end, stream); }

   private:
    WriteHistory& history_;
    std::lock_guard<std::mutex> lock_;
  };
  // [begin, end) starts untouched again (handed out afresh, freed, remapped,
  // or written without a digest).
  void forget(uint64_t begin, uint64_t end);
  // Everything starts untouched again (a write whose ranges are unknown).
  void clear();
  // Disjoint touched intervals kept (tests, memory accounting).
  size_t intervals() const;

 private:
  struct Touched {
    uint64_t begin, end, stream;
  };
  bool touchLocked(uint64_t begin, uint64_t end, uint64_t stream);
  // The index of the first interval that ends after `at`. Caller holds mu_.
  size_t firstEndingAfter(uint64_t at) const;
  // touched_[lo, hi) becomes `with`, in place where it can. Caller holds mu_.
  void replace(size_t lo, size_t hi, std::span<const Touched> with);

  mutable std::mutex mu_;
  // Sorted by begin, disjoint; neighbours differ in stream or abut not. A
  // flat array: a launch touches intervals that mostly exist already, which
  // then change in place, with no allocation.
  std::vector<Touched> touched_;
};

// The process's history: the session and the framework layer's block events
// share it.
WriteHistory& writeHistory();

}  // namespace gpurr::recorder
