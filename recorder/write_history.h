// Which device bytes recorded operations have touched since their memory was
// handed out: a launch's ranges (read or written, the recorder cannot tell),
// a copy's or a set's destination. Without --hash-inputs a launch hashes
// before it runs only the ranges holding bytes nothing recorded has touched
// yet (FORMAT.md, `hashInputs`): every other byte it reads was last touched by
// an earlier recorded operation, whose outputs vouch for it in the diff.
//
// Memory handed out again (an allocation, a block of PyTorch's caching
// allocator) starts untouched: its stale bytes are the previous owner's.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

namespace gpurr::recorder {

class WriteHistory {
 public:
  // Marks [begin, end) touched; true when some of it was not touched before.
  bool touch(uint64_t begin, uint64_t end);
  // [begin, end) starts untouched again (handed out afresh, or freed).
  void forget(uint64_t begin, uint64_t end);
  // Disjoint touched intervals kept (tests, memory accounting).
  size_t intervals() const;

 private:
  void cut(uint64_t begin, uint64_t end);  // caller holds mu_

  mutable std::mutex mu_;
  std::map<uint64_t, uint64_t> touched_;  // begin -> end, disjoint, not adjacent
};

// The process's history: the session and the framework layer's block events
// share it.
WriteHistory& writeHistory();

}  // namespace gpurr::recorder
