// The thread-local flag that marks the recorder's own driver calls: while it
// is set on a thread, CUPTI callbacks on that thread are ignored (the hash
// kernel's launches, copies and module load must not be recorded).
#pragma once

namespace gpurr::recorder {

bool inRecorder();
// This thread's flag itself, for a caller that tests it and then sets it
// (one thread_local lookup instead of two: thread_local_ref.h).
bool& inRecorderFlag();

// Sets the flag for its lifetime (nests).
class ReentrancyGuard {
 public:
  ReentrancyGuard();
  explicit ReentrancyGuard(bool& flag);  // flag: inRecorderFlag()
  ~ReentrancyGuard();
  ReentrancyGuard(const ReentrancyGuard&) = delete;
  ReentrancyGuard& operator=(const ReentrancyGuard&) = delete;

 private:
  bool* flag_;  // this thread's flag
  bool previous_;
};

}  // namespace gpurr::recorder
