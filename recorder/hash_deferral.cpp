// Deferred output hashes (see hash_deferral.h): each stream's open batch,
// what flushes it, and the shares of a batch the trace thread waits on.
#include "recorder/hash_deferral.h"

#include <cuda.h>

#include <algorithm>
#include <cstddef>
#include <chrono>
#include <iterator>
#include <new>
#include <thread>

#include "recorder/recycling.h"

namespace gpurr::recorder {

namespace {

// How long the trace thread waits on an open batch before asking the
// program's threads to flush it (they do at their next recorded call).
constexpr auto kAskAfter = std::chrono::milliseconds(2);

bool overlaps(const trace::DeviceRange& a, const trace::DeviceRange& b) {
  return a.address < b.address + b.size && b.address < a.address + a.size;
}

// The legacy default stream: ordered after (and before) every blocking
// stream's work without an event.
bool legacy(uint64_t stream) { return stream == 0 || stream == reinterpret_cast<uint64_t>(CU_STREAM_LEGACY); }

}  // namespace

// One launch's share of a batch: its ranges' digests, in order. Lives in
// a place of its batch's storage (no allocation per launch); deleting it
// gives its reference to the batch back, once it is wholly destroyed.
class DeferredSlice final : public PendingHashes {
 public:
  DeferredSlice(DeferredBatch* batch, uint32_t first, uint32_t count) : batch_(batch), first_(first), count_(count) {}
  static void operator delete(void* p);
  bool wait(std::vector<kernels::HashResult>& out, std::string& error) override;

 private:
  DeferredBatch* batch_;
  uint32_t first_, count_;
};

// The ranges of one stream's open batch, then the hash enqueued for them;
// shared by the stream's table entry while open and by its slices, and kept
// for reuse (with its vectors' capacity) when the last lets go.
class DeferredBatch {
 public:
  enum State : int { kOpen, kEnqueued, kFailed };
  static constexpr size_t kRoom = 32;  // ranges a batch kept for reuse has room for
  static DeferredBatch* take() {
    DeferredBatch* b = nullptr;
    if (!hand().take(b)) b = new DeferredBatch;
    b->state.store(kOpen, std::memory_order_relaxed);
    b->refs.store(1, std::memory_order_relaxed);  // the open table's
    return b;
  }
  void release() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    pending.reset();
    ranges.clear();
    ranges.reserve(kRoom);  // made here, mostly on the trace thread
    onlyRead.clear();
    onlyRead.reserve(kRoom);
    error.clear();
    results.clear();
    resolved = ok = false;
    slices = 0;
    DeferredBatch* self = this;
    hand().put(self);
  }
  DeferredSlice* slice(uint32_t first, uint32_t count) {
    refs.fetch_add(1, std::memory_order_relaxed);
    Place& place = places[slices++];
    place.owner = this;
    return ::new (place.bytes) DeferredSlice(this, first, count);
  }
  // A slice's place: the batch it belongs to, beside the slice itself.
  struct Place {
    DeferredBatch* owner = nullptr;
    alignas(DeferredSlice) unsigned char bytes[sizeof(DeferredSlice)];
  };
  // The trace thread: waits until the batch is enqueued or has failed,
  // asking the program's threads to flush it after a while.
  void awaitFlushed() {
    const auto start = std::chrono::steady_clock::now();
    for (uint32_t polls = 0; state.load(std::memory_order_acquire) == kOpen; ++polls) {
      if (polls >= 64) {
        if (std::chrono::steady_clock::now() - start >= kAskAfter)
          HashDeferral::asked().store(true, std::memory_order_relaxed);
        std::this_thread::sleep_for(std::chrono::microseconds(polls < 1024 ? 20 : 200));
      }
    }
  }
  bool resultsOf(uint32_t first, uint32_t count, std::vector<kernels::HashResult>& out, std::string& why) {
    awaitFlushed();
    if (state.load(std::memory_order_acquire) == kFailed) {
      why = error;
      return false;
    }
    std::lock_guard lock(mu);
    if (!resolved) {
      ok = pending->wait(results, resultError);
      resolved = true;
    }
    if (!ok) {
      why = resultError;
      return false;
    }
    // Each slice is waited for once (by the trace thread): its results move.
    out.assign(std::make_move_iterator(results.begin() + first),
               std::make_move_iterator(results.begin() + first + count));
    return true;
  }

  std::atomic<int> refs{0};
  std::atomic<int> state{kOpen};
  std::vector<trace::DeviceRange> ranges;  // while open, under HashDeferral::mu_
  std::vector<uint8_t> onlyRead;           // ... of each range: only read by its launch (HashDeferral::add)
  uint32_t slices = 0;
  std::unique_ptr<PendingHashes> pending;  // set before state becomes kEnqueued
  std::string error;                       // set before state becomes kFailed

 private:
  struct Delete {
    void operator()(DeferredBatch*& b) const {
      delete b;
      b = nullptr;
    }
  };
  static Hand<DeferredBatch*, Delete>& hand() {
    static auto* shelf = new Shelf<DeferredBatch*>;  // never destroyed: releases may come at exit
    thread_local Hand<DeferredBatch*, Delete> h(*shelf);
    return threadLocalRef(h);
  }
  std::mutex mu;  // the trace thread's reading of the results
  bool resolved = false, ok = false;
  std::vector<kernels::HashResult> results;
  std::string resultError;
  Place places[HashDeferral::kMaxSlices];
};

void DeferredSlice::operator delete(void* p) {
  auto* place = reinterpret_cast<DeferredBatch::Place*>(static_cast<unsigned char*>(p) -
                                                        offsetof(DeferredBatch::Place, bytes));
  place->owner->release();
}

bool DeferredSlice::wait(std::vector<kernels::HashResult>& out, std::string& error) {
  return batch_->resultsOf(first_, count_, out, error);
}

std::atomic<bool>& HashDeferral::asked() {
  static std::atomic<bool> flag{false};
  return flag;
}

HashDeferral::HashDeferral(Device& device, Failed failed) : device_(device), failed_(std::move(failed)) {
  open_.reserve(64);
}

HashDeferral::~HashDeferral() { flushAll(); }

HashDeferral::Open* HashDeferral::openFor(uint64_t context, uint64_t stream) {
  for (Open& o : open_)
    if (o.context == context && o.stream == stream) return &o;
  return nullptr;
}

bool HashDeferral::flushLocked(Open& o, std::string& error) {
  DeferredBatch* b = o.batch;
  requests_.clear();
  for (const trace::DeviceRange& r : b->ranges) requests_.push_back({r.address, r.size});
  std::unique_ptr<PendingHashes> p = device_.hash(o.context, o.stream, requests_, false, error);
  const bool ok = p != nullptr;
  if (ok) {
    b->pending = std::move(p);
    b->state.store(DeferredBatch::kEnqueued, std::memory_order_release);
  } else {
    b->error = error;
    b->state.store(DeferredBatch::kFailed, std::memory_order_release);
    failed_(b->ranges, error);
  }
  o = open_.back();
  open_.pop_back();
  b->release();  // the table's reference
  return ok;
}

void HashDeferral::flushAllLocked() {
  asked().store(false, std::memory_order_relaxed);
  std::string error;
  while (!open_.empty()) flushLocked(open_.back(), error);
}

void HashDeferral::flushAll() {
  std::lock_guard lock(mu_);
  flushAllLocked();
}

bool HashDeferral::orderedBeforeLegacy(Open& o, uint64_t context) {
  if (o.context != context || legacy(o.stream)) return false;
  if (o.blocking < 0) o.blocking = device_.blockingStream(o.stream) ? 1 : 0;
  return o.blocking == 1;
}

void HashDeferral::beforeEventRecord(uint64_t context, uint64_t stream) {
  std::lock_guard lock(mu_);
  std::string error;
  if (legacy(stream)) {
    for (size_t i = open_.size(); i-- > 0;)
      if (open_[i].context == context && (legacy(open_[i].stream) || orderedBeforeLegacy(open_[i], context)))
        flushLocked(open_[i], error);
    return;
  }
  if (Open* o = openFor(context, stream)) flushLocked(*o, error);
  // A blocking stream's work after now waits for the legacy stream's.
  for (size_t i = open_.size(); i-- > 0;) {
    if (open_[i].context == context && legacy(open_[i].stream) && device_.blockingStream(stream)) {
      flushLocked(open_[i], error);
      break;
    }
  }
}

void HashDeferral::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  flushAllLocked();
}

bool HashDeferral::anyOpen() {
  std::lock_guard lock(mu_);
  return !open_.empty();
}

void HashDeferral::beforeLaunch(uint64_t context, uint64_t stream, std::span<const trace::DeviceRange> ranges,
                                std::span<const OperandRole> roles, bool unseen) {
  std::lock_guard lock(mu_);
  if (open_.empty()) return;
  if (unseen) {
    flushAllLocked();
    return;
  }
  std::string error;
  for (size_t i = open_.size(); i-- > 0;) {
    Open& o = open_[i];
    const bool own = o.context == context && o.stream == stream;
    // Between two streams one of which is the legacy stream, the launch is
    // ordered after everything enqueued on the other: a later launch,
    // copy or wait ordered after it is then ordered after the hash only if
    // the hash is enqueued first, even when this launch only reads.
    const bool implicit = !own && (legacy(o.stream) || legacy(stream));
    // Only a launch ordered after the batch's writers can write its ranges
    // unseen, in order: one on its stream, or across the legacy stream.
    if (own || implicit) ++o.launches;
    bool flush = o.launches >= kMaxLaunches || (legacy(stream) && orderedBeforeLegacy(o, context));
    for (size_t j = 0; j < ranges.size() && !flush; ++j) {
      // A launch that only reads a range leaves the bytes its digest is to
      // be of. Another stream's launch that may write a held output is
      // flushed for even when the program did not order it after the
      // range's writer; a held input its launch only read, only across the
      // legacy stream (HashDeferral::add).
      if (!roles.empty() && roles[j] == OperandRole::kRead && !implicit) continue;
      const std::vector<trace::DeviceRange>& held = o.batch->ranges;
      for (size_t r = 0; r < held.size() && !flush; ++r) {
        flush = overlaps(held[r], ranges[j]) && (own || implicit || !o.batch->onlyRead[r]);
      }
    }
    if (flush) flushLocked(o, error);
  }
}

std::unique_ptr<PendingHashes> HashDeferral::add(uint64_t context, uint64_t stream,
                                                 std::span<const trace::DeviceRange> ranges, bool now, bool onlyRead,
                                                 std::string& error) {
  uint64_t bytes = 0;
  for (const trace::DeviceRange& r : ranges) bytes += r.size;
  std::lock_guard lock(mu_);
  if (closed_ || stream == reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD) || device_.captures().mayBeOpen())
    now = true;
  Open* o = openFor(context, stream);
  if (o != nullptr && (o->batch->slices == kMaxSlices || o->batch->ranges.size() + ranges.size() > kMaxRanges ||
                       o->bytes + bytes > kMaxBytes)) {
    std::string ignored;  // reported to the shares already in it
    flushLocked(*o, ignored);
    o = nullptr;
  }
  if (o == nullptr) {
    open_.push_back(Open{context, stream, 0, 0, DeferredBatch::take()});
    o = &open_.back();
  }
  DeferredBatch* b = o->batch;
  std::unique_ptr<PendingHashes> share(b->slice(static_cast<uint32_t>(b->ranges.size()),
                                                static_cast<uint32_t>(ranges.size())));
  b->ranges.insert(b->ranges.end(), ranges.begin(), ranges.end());
  b->onlyRead.insert(b->onlyRead.end(), ranges.size(), onlyRead ? 1 : 0);
  o->bytes += bytes;
  if (now && !flushLocked(*o, error)) return nullptr;
  return share;
}

}  // namespace gpurr::recorder
