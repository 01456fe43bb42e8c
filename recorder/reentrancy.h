// The thread-local flag that marks the recorder's own driver calls: while it
// is set on a thread, CUPTI callbacks on that thread are ignored (the hash
// kernel's launches, copies and module load must not be recorded).
#pragma once

namespace gpurr::recorder {

bool inRecorder();

// Sets the flag for its lifetime (nests).
class ReentrancyGuard {
 public:
  ReentrancyGuard();
  ~ReentrancyGuard();
  ReentrancyGuard(const ReentrancyGuard&) = delete;
  ReentrancyGuard& operator=(const ReentrancyGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace gpurr::recorder
