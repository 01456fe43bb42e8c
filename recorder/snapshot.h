// Snapshots of device buffers (--snapshot): the bound on the host memory they
// occupy between the copy and the blob store, and how their bytes are stored.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>

#include "trace_format/trace.h"

namespace gpurr::recorder {

// Host memory held by snapshots: staging buffers being filled by the GPU and
// buffers queued for the trace thread. acquire() makes the program's thread
// wait (back-pressure) instead of dropping data. Bytes of entries not yet
// handed to the trace thread ("held") never make anyone wait for them, since
// only queued bytes may be released without the program's help; so one
// launch's ranges may go over the limit when nothing else is queued. Even
// queued copies may need the program to go on (a kernel spinning on a flag
// that a kernel this thread is about to launch sets): the wait is bounded,
// then the limit is passed rather than the program stalled for good.
class SnapshotBudget {
 public:
  explicit SnapshotBudget(uint64_t limitBytes,
                          std::chrono::milliseconds waitLimit = std::chrono::seconds(10))
      : limit_(limitBytes), waitLimit_(waitLimit) {}

  // A share of the budget, given back when destroyed.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept : budget_(o.budget_), bytes_(o.bytes_), queued_(o.queued_) { o.budget_ = nullptr; }
    Lease& operator=(Lease&& o) noexcept;
    ~Lease() { release(); }
    // The entry holding this lease now belongs to the trace thread.
    void markQueued();
    uint64_t bytes() const { return bytes_; }
    void release();

   private:
    friend class SnapshotBudget;
    SnapshotBudget* budget_ = nullptr;
    uint64_t bytes_ = 0;
    bool queued_ = false;
  };

  // Waits while queued bytes exist and taking `bytes` would pass the limit,
  // at most the wait limit.
  Lease acquire(uint64_t bytes);

  uint64_t limit() const { return limit_; }
  uint64_t inUse() const;    // held + queued
  uint64_t peak() const;     // largest inUse() so far
  uint64_t waits() const;    // how many acquire() calls had to wait
  uint64_t overruns() const;  // ... and gave up waiting, passing the limit

 private:
  const uint64_t limit_;
  const std::chrono::milliseconds waitLimit_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  uint64_t held_ = 0, queued_ = 0, peak_ = 0, waits_ = 0, overruns_ = 0;
};

// The blob encoding that stores `bytes` smallest, judged by compressing a
// sample (up to 64 KiB from four places) each way with zstd: byte planes
// pay for float and half data, whose exponent bytes repeat.
trace::BlobEncoding chooseSnapshotEncoding(std::span<const uint8_t> bytes);

// Stores a snapshot in the trace's blob store (deduplicated by content).
trace::BlobRef storeSnapshot(trace::TraceWriter& writer, std::span<const uint8_t> bytes);

}  // namespace gpurr::recorder
