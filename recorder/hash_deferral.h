// HashDeferral: the hashes of a launch's outputs held back on their stream
// and enqueued with later ones as one hash kernel launch. Stream order lets a
// digest of the bytes launch N left be taken after launch N+1 as long as
// nothing enqueued in between may write them; so each stream keeps an open
// batch of output ranges, enqueued (flushed) before anything that may write
// one of them or let another stream or the host see them: a launch on the
// same stream that may write a range (it reaches it through a pointer its op
// does not only read), a launch on another stream that may write one (or
// reaches it at all, when one of the two streams is the legacy stream), an
// event record on the stream, a synchronisation, copy, set, free, graph
// launch or capture, and at the latest after kMaxLaunches launches on its stream
// (docs/RECORDING.md, "Deferred output hashes"). A launch's own hashes
// before it runs join its stream's batch, which is then flushed: one launch
// of the hash kernel for both.
//
// Each launch's share of a batch is a PendingHashes of its own (a slice),
// which the trace thread waits on as on any other: when its batch is still
// open, it waits for the flush, and after kAskAfter asks the program's
// threads to flush at their next recorded call (flushIfAsked).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "recorder/device.h"
#include "recorder/params.h"
#include "trace_format/events.h"

namespace gpurr::recorder {

class DeferredBatch;

class HashDeferral {
 public:
  // Launches after which an open batch is flushed, counted on its stream
  // (and on any stream across the legacy stream): the window in which a
  // write the recorder cannot see (through a pointer held in device memory)
  // could land before a digest in stream order. Another stream's launch is
  // ordered after the batch's writers only through an event recorded on
  // their stream, whose record flushes, or through the legacy stream: work
  // on it waits for every blocking stream's work before it, and a blocking
  // stream's later work waits for it (cuda.h, CU_STREAM_NON_BLOCKING). So a
  // launch or event record on the legacy stream flushes the blocking
  // streams' batches, and an event record on a blocking stream the legacy
  // stream's batch (a blocking stream's launch that may write it flushes
  // it as any launch does).
  static constexpr uint64_t kMaxLaunches = 8;
  // Bounds of one batch: launches' shares, descriptors and bytes (well
  // within the hash ring: 64K descriptors, 256 GiB).
  static constexpr uint32_t kMaxSlices = 16;
  static constexpr uint32_t kMaxRanges = 4096;
  static constexpr uint64_t kMaxBytes = uint64_t{32} << 30;

  // `failed`: a flushed batch could not be enqueued (its ranges, why).
  using Failed = std::function<void(std::span<const trace::DeviceRange>, const std::string&)>;
  HashDeferral(Device& device, Failed failed);
  ~HashDeferral();  // flushes what is open

  // A launch on `stream` is about to be enqueued, reaching `ranges` (each
  // `roles[i]`, or unknown when `roles` is empty: then it may write them).
  // Flushes every open batch it may write, or reaches at all across the
  // legacy stream, those older than kMaxLaunches launches, and for a launch
  // on the legacy stream those of blocking streams; all of them when
  // `unseen` (the launch may reach memory no scanned pointer shows).
  void beforeLaunch(uint64_t context, uint64_t stream, std::span<const trace::DeviceRange> ranges,
                    std::span<const OperandRole> roles, bool unseen);
  // Adds `ranges` to `stream`'s open batch (of `context`) and returns this
  // share's digests to come; with `now` the batch is flushed before
  // returning (a launch's inputs, hashed before it runs), and so it is on a
  // per-thread default stream (which another thread cannot name) or while
  // a graph capture may be open. Null with `error` when flushed and the
  // batch could not be enqueued. `onlyRead`: inputs of a launch that only
  // reads them, held back; a launch on another stream that may write them
  // does not flush for them (a program orders such a write after the read
  // by an event recorded on this stream, whose record flushes; without it
  // the read itself races the write), unless one of the streams is the
  // legacy stream.
  std::unique_ptr<PendingHashes> add(uint64_t context, uint64_t stream, std::span<const trace::DeviceRange> ranges,
                                     bool now, bool onlyRead, std::string& error);
  // An event is recorded on `stream` (of `context`), which another stream
  // may wait on: flushes the stream's open batch and those it is ordered
  // after or before across the legacy stream. Then every open batch; every
  // open batch when the trace thread asked for it since.
  void beforeEventRecord(uint64_t context, uint64_t stream);
  void flushAll();
  // The recorder closes: every open batch is flushed, and from now on a
  // batch is flushed as its ranges come (a launch already past the session's
  // end check on another thread must not leave one open that nothing will
  // flush again, with the trace thread waiting on it).
  void close();
  void flushIfAsked() {
    if (asked().load(std::memory_order_relaxed)) flushAll();
  }
  // Whether any batch is open (tests).
  bool anyOpen();

  // Set by a trace thread waiting on an open batch; read by flushIfAsked.
  static std::atomic<bool>& asked();

 private:
  struct Open {
    uint64_t context = 0, stream = 0;
    uint64_t launches = 0;  // since its first range came, on its stream (or across the legacy stream)
    uint64_t bytes = 0;
    DeferredBatch* batch = nullptr;
    int blocking = -1;  // whether its stream synchronizes with the legacy stream; -1: not asked yet
  };
  Open* openFor(uint64_t context, uint64_t stream);
  // Whether work on the legacy stream of `context` after now is ordered
  // after `o`'s writers (and so everything a blocking stream runs after it).
  bool orderedBeforeLegacy(Open& o, uint64_t context);
  // Enqueues `o`'s batch and closes it (under mu_). Null with `error` when
  // it could not be enqueued (the batch failed, its ranges reported).
  bool flushLocked(Open& o, std::string& error);
  void flushAllLocked();

  Device& device_;
  Failed failed_;
  std::mutex mu_;  // held while a batch is enqueued: a launch that must follow it waits for it
  bool closed_ = false;  // under mu_
  std::vector<Open> open_;  // one per stream with an open batch (few)
  std::vector<kernels::HashRequest> requests_;  // a flush's, capacity kept
};

}  // namespace gpurr::recorder
