// The thread-local flag that marks the recorder's own driver calls: while it
// is set on a thread, CUPTI callbacks on that thread are ignored (the hash
// kernel's launches, copies and module load must not be recorded).
#pragma once

namespace gpurr::recorder {

// This thread's flags, one thread_local destroyed trivially (valid to the
// thread's very end): `inside`, the recorder's own driver calls; `ended`,
// the thread's thread_locals with destructors have begun to be destroyed
// (the thread ends; or exit(), which destroys the main thread's before C's
// exit handlers run, and those may still call CUDA: EndsWithThread,
// thread_local_ref.h).
struct ThreadFlags {
  bool inside = false;
  bool ended = false;
};
ThreadFlags& threadFlags();

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
