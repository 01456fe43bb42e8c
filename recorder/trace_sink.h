// The background thread that owns the TraceWriter: it receives finished
// events in order, waits for their GPU digests (which the program does not
// wait for), stores blobs, appends, and flushes about once a second so that a
// crash leaves complete blocks. The program's threads never touch the disk:
// they put each entry in a bounded ring allocated once, and wake the trace
// thread only when the ring fills past a threshold, at a synchronisation,
// a drain or the close; otherwise it looks at the ring on a short timer.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "recorder/device.h"
#include "recorder/kernel_text.h"
#include "recorder/options.h"
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
  // KernelLaunch: its kernel's name and parameter layout, copied into the
  // event when it is written (null: the event has its own).
  const KernelText* kernel = nullptr;
  // KernelLaunch while the framework layer follows a learned step: its
  // origin but for the step and stepLaunch that event.origin holds, kept
  // for the process, copied into the event when it is written (null: the
  // event's origin is whole).
  const trace::Origin* followedOrigin = nullptr;
  std::vector<uint8_t> blob;  // ModuleLoad: the cubin; Memcpy: host data
  HashTicket before;          // KernelLaunch / GraphLaunch / Collective inputs
  HashTicket after;           // outputs; Memcpy / Memset: the written range
  std::vector<SnapshotCopy> beforeSnapshots;  // KernelLaunch: inputs before it ran
  std::vector<SnapshotCopy> afterSnapshots;   // outputs after it ran
};

// An entry on its way to the trace thread. The ring holds entries by
// pointer, so handing one over moves no event; a written entry's box is
// kept for another.
using EntryBox = std::unique_ptr<SinkEntry>;

// The box a launch builds its entry in: that of a launch written earlier,
// its KernelLaunch as new but for its containers' capacity (name,
// parameters, layout, pointers, attributes, read ranges, annotations; and
// its tickets' ranges), so that the launch path allocates nothing for
// them, and its origin left for the next origin to overwrite; or a new one.
EntryBox takeLaunchEntry();

// The host memory an entry holds while it waits in the ring, its box
// included (estimated from its vectors' and strings' capacities).
uint64_t entryHeapBytes(const SinkEntry& entry);

// Turns a ticket's results into RangeDigests. Ranges of 2..256 chunks keep
// their chunk digests, which locate a difference inside the range.
std::vector<trace::RangeDigest> toRangeDigests(const std::vector<trace::DeviceRange>& ranges,
                                               const std::vector<kernels::HashResult>& results);
// The same into `out` (its capacity reused).
void toRangeDigests(const std::vector<trace::DeviceRange>& ranges, const std::vector<kernels::HashResult>& results,
                    std::vector<trace::RangeDigest>& out);

struct SinkOptions {
  // false runs nothing in the background: push() then completes entries at
  // once (tests, and a fallback when no thread can be started).
  bool thread = true;
  unsigned flushIntervalMs = 1000;  // a block is closed at least this often
  unsigned flushWaitMs = 10'000;    // flush() waits this long at most
  unsigned wakeIntervalMs = 50;     // the trace thread looks at the ring at least this often
  // The ring's host memory, its slots and what the queued entries hold
  // (GPURR_TRACE_QUEUE_MB).
  uint64_t queueBytes = uint64_t{64} << 20;
  // Tests: the trace thread sleeps this long before writing each event, as
  // a writer that cannot keep up would (GPURR_TEST_SLOW_WRITER_US).
  unsigned slowWriterUs = 0;
};

// The sink's options that the recorder's options set.
SinkOptions sinkOptions(const RecorderOptions& options);

// What the sink has done, for the benchmarks and `gpurr info`.
struct SinkStats {
  uint64_t pushed = 0;       // entries given a seq
  uint64_t wakeups = 0;      // times the trace thread woke (timer or program)
  uint64_t slots = 0;        // ring slots (allocated once)
  uint64_t ringBytes = 0;    // their size
  uint64_t peakBytes = 0;    // most host memory the ring held: slots and entries' heap
  uint64_t dropped = 0;      // entries dropped because the ring was full
};

class TraceSink {
 public:
  TraceSink(std::unique_ptr<trace::TraceWriter> writer, WarnFn warn, SinkOptions options = {});
  ~TraceSink();  // close()

  // Queues an entry (the first form in a box kept by the sink); assigns its
  // seq. Thread-safe; never waits for the disk, the GPU or the trace
  // thread, only for the ring's lock, which every holder keeps for a few
  // stores of a pointer. When the ring is full (its slots, or
  // `queueBytes`), the entry is dropped and counted (one warning): the next
  // entry queued, or the close, is preceded by an EventsDropped marker
  // saying how many of which kinds were lost there.
  void push(SinkEntry&& entry);
  void push(EntryBox entry);

  // Waits until every entry queued so far is written (or dropped).
  void drain();

  // drain(), then writes the trace's open block to its file: what was
  // recorded so far stays readable if the process then dies without
  // closing the trace (a Python program ended by Ctrl-C kills itself with
  // SIGINT after its atexit handlers, before C's). The trace stays open.
  // Waits SinkOptions::flushWaitMs at most (then warns).
  void flush();

  // drain(), then closes the trace, writing `hostRegions`, the step after
  // which the program was stopped (-1: it was not) and, when given, the
  // recorder's memory into its index (`memory`'s snapshot, pinned and device
  // parts; the sink adds the queue's and the writer's) and how the framework
  // layer attributed the steps. Later pushes are dropped.
  void close(std::vector<trace::HostRegion> hostRegions = {}, int64_t stoppedAfterStep = -1,
             std::optional<trace::RecorderMemory> memory = std::nullopt,
             std::optional<trace::LayerSteps> layerSteps = std::nullopt);

  uint64_t pushed() const;
  SinkStats stats() const;

 private:
  void run();
  void complete(SinkEntry& entry);
  // Puts `entry` in the next free slot (under mu_); whether to wake the
  // trace thread.
  bool enqueue(EntryBox entry, uint64_t heapBytes, bool urgent);

  std::unique_ptr<trace::TraceWriter> writer_;
  WarnFn warn_;
  const SinkOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::vector<EntryBox> slots_;       // the ring, allocated once
  std::vector<uint64_t> slotHeap_;    // each queued entry's entryHeapBytes
  size_t head_ = 0, count_ = 0;       // the oldest queued slot, how many are queued
  uint64_t heapLimit_ = 0;            // entries' heap bytes allowed besides the slots
  uint64_t heapQueued_ = 0;
  size_t wakeCount_ = 0;              // queued entries that wake the trace thread
  uint64_t wakeHeap_ = 0;             // ... or queued heap bytes
  bool sleeping_ = false, wakeSent_ = false;
  uint64_t nextSeq_ = 0;
  uint64_t done_ = 0;        // entries completed
  uint64_t wakeups_ = 0, peakBytes_ = 0;
  trace::EventsDropped dropped_;      // dropped since the last entry queued
  uint64_t droppedTotal_ = 0;
  bool dropWarned_ = false;
  bool closing_ = false, closed_ = false, broken_ = false;
  bool flushWanted_ = false;  // flush(): the trace thread writes its open block next
  uint64_t flushes_ = 0;      // ... and counts it done
  bool digestWarned_ = false, snapshotWarned_ = false;
  // What complete() fills for each entry, kept with its capacity (complete
  // runs on one thread at a time): a ticket's results, and the digests of
  // an event other than a launch (a launch's go into its kept entry).
  std::vector<kernels::HashResult> results_;
  std::vector<trace::RangeDigest> beforeDigests_, afterDigests_;
  std::thread thread_;
};

// The process's trace, in the directory it claims under the options'
// output (claimTraceDirectory), its header written. nullptr, said through
// `warn`, where it cannot be made (a full disk, no inode left): the process
// is not recorded, and what it had made of the directory is removed, so
// that no unreadable trace is left in the job.
std::unique_ptr<TraceSink> openTrace(const RecorderOptions& options, const trace::Header& header, WarnFn warn);

}  // namespace gpurr::recorder
