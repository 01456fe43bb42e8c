// A version stamp for the tables whose answers a thread keeps (a function's
// description, a context's device): each change takes a value that no table
// of any session had before, so an answer kept from before a change, or
// from another session's tables, never matches.
#pragma once

#include <atomic>
#include <cstdint>

namespace gpurr::recorder {

class Generation {
 public:
  Generation() { bump(); }
  // The tables changed (called with their lock held).
  void bump() { value_.store(next().fetch_add(1, std::memory_order_relaxed), std::memory_order_release); }
  uint64_t now() const { return value_.load(std::memory_order_acquire); }

 private:
  static std::atomic<uint64_t>& next() {
    static std::atomic<uint64_t> n{1};  // 0 is no generation: a kept answer's before it is set
    return n;
  }
  std::atomic<uint64_t> value_{0};
};

}  // namespace gpurr::recorder
