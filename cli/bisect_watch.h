// Stopping a run of `gpurr bisect` soon after its first divergence: while a
// run after the first is recorded, its traces are compared with the first
// run's as they grow (the recorder of a watched run closes a block four
// times a second); once they diverge at an operation of training step D
// that the run has gone well past, or that two comparisons in a row find at
// the same place, the run is told to stop after step D + 1
// (`gpurr record --stop-file`): far enough for the report's blast radius
// over the rest of that step and the next. The comparison made after the
// run is the one reported; this one only decides when to stop. The runs of
// a job of several processes are not watched.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

namespace gpurr::cli::bisect {

class RunWatch {
 public:
  // Compares `first` (a finished run: a trace or a directory of traces)
  // with the run that `gpurr record -o out` is recording, in the staging
  // directory it keeps beside `out` (cli/record.cpp), on a thread of its
  // own, and writes the step to stop after into `stopFile` when they
  // diverge. Each comparison is followed by a pause of at least a quarter
  // second and four times its own length, so that watching takes at most a
  // fifth of a core.
  RunWatch(std::filesystem::path first, std::filesystem::path out, std::filesystem::path stopFile);
  // Stops watching (waits for a comparison under way) and removes the stop
  // file.
  ~RunWatch();
  RunWatch(const RunWatch&) = delete;
  RunWatch& operator=(const RunWatch&) = delete;

  // The step the run was told to stop after, -1 while it was not.
  int64_t stopAfter() const { return stopAfter_.load(); }

 private:
  void watch();
  // One comparison of the run so far: whether watching is done (it told
  // the run to stop, or the run's first divergence has no step to stop
  // after).
  bool compareOnce();

  std::filesystem::path first_, out_, stopFile_;
  // The first divergence of the last comparison, to be seen again before
  // the run is stopped.
  struct Seen {
    uint64_t seqA = 0, seqB = 0;  // its events
    int64_t step = -1;
    uint64_t opsB = 0;  // the operations of the run watched, compared then
    uint64_t endB = 0;  // the index after its operations in the run watched
  };
  std::optional<Seen> seen_;
  std::atomic<int64_t> stopAfter_{-1};
  std::mutex mu_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace gpurr::cli::bisect
