// The background thread that owns the TraceWriter: it receives finished
// events in order, waits for their GPU digests (which the program does not
// wait for), stores blobs, appends, and flushes about once a second so that a
// crash leaves complete blocks. The program's threads never touch the disk.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "recorder/device.h"
#include "recorder/snapshot.h"
#include "recorder/warn.h"
#include "trace_format/trace.h"

namespace gpurr::recorder {

// Ranges whose digests are being computed, and how to read them.
struct HashTicket {
  std::unique_ptr<PendingHashes> pending;   // null: nothing was hashed
  std::vector<trace::DeviceRange> ranges;   // one per request, in order
  std::string error;                        // why `ranges` could not be hashed (pending null)
};

// The full bytes of one range of a ticket, on their way to the blob store.
struct SnapshotCopy {
  size_t range = 0;                    // index into the ticket's ranges
  SnapshotBudget::Lease lease;         // released after the copy (declared first)
  std::unique_ptr<PendingCopy> copy;
};

struct SinkEntry {
  trace::Event event;         // seq is assigned by the sink
  std::vector<uint8_t> blob;  // ModuleLoad: the cubin; Memcpy: host data
  HashTicket before;          // KernelLaunch / GraphLaunch / Collective inputs
  HashTicket after;           // outputs; Memcpy / Memset: the written range
  std::vector<SnapshotCopy> beforeSnapshots;  // KernelLaunch: inputs before it ran
  std::vector<SnapshotCopy> afterSnapshots;   // outputs after it ran
};

// Turns a ticket's results into RangeDigests. Ranges of 2..256 chunks keep
// their chunk digests, which locate a difference inside the range.
std::vector<trace::RangeDigest> toRangeDigests(const std::vector<trace::DeviceRange>& ranges,
                                               const std::vector<kernels::HashResult>& results);

class TraceSink {
 public:
  // `thread` = false runs nothing in the background: push() then completes
  // entries at once (tests, and a fallback when no thread can be started).
  TraceSink(std::unique_ptr<trace::TraceWriter> writer, WarnFn warn, bool thread = true,
            unsigned flushIntervalMs = 1000);
  ~TraceSink();  // close()

  // Queues an entry; assigns its seq. Thread-safe; never waits for the disk.
  void push(SinkEntry&& entry);

  // Waits until every entry queued so far is written (or dropped).
  void drain();

  // drain(), then closes the trace, writing `hostRegions` and the step after
  // which the program was stopped (-1: it was not) into its index.
  // Later pushes are dropped.
  void close(std::vector<trace::HostRegion> hostRegions = {}, int64_t stoppedAfterStep = -1);

  uint64_t pushed() const;

 private:
  void run();
  void complete(SinkEntry& entry);

  std::unique_ptr<trace::TraceWriter> writer_;
  WarnFn warn_;
  const unsigned flushIntervalMs_;
  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<SinkEntry> queue_;
  uint64_t nextSeq_ = 0;
  uint64_t done_ = 0;        // entries completed
  bool closing_ = false, closed_ = false, broken_ = false, busy_ = false;
  bool digestWarned_ = false, snapshotWarned_ = false;
  std::thread thread_;
};

}  // namespace gpurr::recorder
