// Background trace writing (see trace_sink.h).
#include "recorder/trace_sink.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "recorder/recycling.h"
#include "recorder/reentrancy.h"
#include "recorder/thread_local_ref.h"

namespace gpurr::recorder {

namespace {

// Written entries' boxes kept for reuse: as many as were ever in flight at
// once (Shelf's default: the largest ring's slots). A launch's box keeps
// the capacity of its containers, up to kLaunchEntryBytes (a launch's are
// some hundreds of bytes; a rare large one is freed); other entries' boxes
// are kept empty.
constexpr uint64_t kLaunchEntryBytes = 4096;
// Entries the trace thread takes from the ring at once, and the launch path
// from its shelf.
constexpr size_t kTakeAtOnce = 64;
Shelf<EntryBox>& launchEntries() {
  static auto* s = new Shelf<EntryBox>;  // never destroyed: entries may be written at exit
  return *s;
}
Shelf<EntryBox>& otherEntries() {
  static auto* s = new Shelf<EntryBox>;
  return *s;
}

// A thread's launch boxes, taken from the shelf kTakeAtOnce at a time, and
// its other entries' boxes.
thread_local Hand<EntryBox, Drop, 2 * kTakeAtOnce> tlsLaunchEntries(launchEntries());
thread_local Hand<EntryBox> tlsOtherEntries(otherEntries());

// Makes a written launch's entry as new but for its containers' capacity
// (takeLaunchEntry); false when they hold more than kLaunchEntryBytes.
bool emptyLaunchEntry(SinkEntry& e) {
  auto& k = std::get<trace::KernelLaunch>(e.event.payload);
  trace::KernelLaunch fresh;
  fresh.function.swap(k.function);
  fresh.attributes.swap(k.attributes);
  fresh.params.swap(k.params);
  fresh.paramLayout.swap(k.paramLayout);
  fresh.pointers.swap(k.pointers);
  fresh.inputs.swap(k.inputs);
  fresh.outputs.swap(k.outputs);
  fresh.reads.swap(k.reads);
  fresh.annotations.swap(k.annotations);
  k = std::move(fresh);
  k.function.clear();
  k.attributes.clear();
  k.params.clear();
  k.paramLayout.clear();
  k.pointers.clear();
  k.inputs.clear();
  k.outputs.clear();
  k.reads.clear();
  k.annotations.clear();
  for (HashTicket* t : {&e.before, &e.after}) {
    t->pending.reset();
    t->ranges.clear();
    t->error.clear();
  }
  e.blob.clear();
  e.beforeSnapshots.clear();
  e.afterSnapshots.clear();
  e.event.seq = e.event.timeNs = 0;
  e.event.thread = 0;
  e.kernel = nullptr;
  e.followedOrigin = nullptr;
  // Room for a few ranges of each kind, made here on the trace thread: a
  // launch taking a box whose launch had none (no first use, no op) then
  // allocates nothing for its own.
  constexpr size_t kFewRanges = 4;
  e.after.ranges.reserve(kFewRanges);
  e.before.ranges.reserve(kFewRanges);
  k.reads.reserve(kFewRanges);
  return entryHeapBytes(e) <= kLaunchEntryBytes + sizeof(SinkEntry);
}

// Keeps written entries' boxes (at most kTakeAtOnce) for other entries,
// each kind on its shelf with one lock (a full shelf frees the rest).
void keepEntries(std::span<EntryBox> written) {
  EntryBox launches[kTakeAtOnce], others[kTakeAtOnce];
  size_t nLaunches = 0, nOthers = 0;
  for (EntryBox& e : written) {
    if (std::holds_alternative<trace::KernelLaunch>(e->event.payload)) {
      if (emptyLaunchEntry(*e)) launches[nLaunches++] = std::move(e);
    } else {
      *e = SinkEntry{};
      others[nOthers++] = std::move(e);
    }
    e.reset();
  }
  if (nLaunches != 0) launchEntries().put({launches, nLaunches});
  if (nOthers != 0) otherEntries().put({others, nOthers});
}

}  // namespace

std::vector<trace::RangeDigest> toRangeDigests(const std::vector<trace::DeviceRange>& ranges,
                                               const std::vector<kernels::HashResult>& results) {
  std::vector<trace::RangeDigest> out;
  toRangeDigests(ranges, results, out);
  return out;
}

void toRangeDigests(const std::vector<trace::DeviceRange>& ranges, const std::vector<kernels::HashResult>& results,
                    std::vector<trace::RangeDigest>& out) {
  out.resize(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    trace::RangeDigest& d = out[i];
    d.range = ranges[i];
    d.digest = 0;
    d.snapshot.reset();
    d.chunkDigests.clear();
    if (i < results.size()) {
      d.digest = results[i].digest;
      if (results[i].chunkDigests.size() >= 2 && results[i].chunkDigests.size() <= 256)
        d.chunkDigests = results[i].chunkDigests;
    }
  }
}

namespace {

// Asks for the cache lines of `bytes` from `p` (at most kPrefetchBytes) for
// writing, without waiting for them.
constexpr size_t kPrefetchBytes = 1024;
void prefetchForWrite(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t i = 0; i < std::min(bytes, kPrefetchBytes); i += 64) __builtin_prefetch(c + i, 1, 3);
}
template <typename V>
void prefetchForWrite(const V& v) {
  prefetchForWrite(v.data(), v.capacity() * sizeof(typename V::value_type));
}

}  // namespace

EntryBox takeLaunchEntry() {
  EntryBox e;
  auto& hand = threadLocalRef(tlsLaunchEntries);
  if (hand.take(e)) {
    // A kept box was last read by the trace thread, on another core: the
    // launch's writes would wait for its lines one after another. They are
    // asked for at once instead: this box's containers now (its own lines
    // were asked for when it was next in the hand), and the next box's own
    // lines for the next launch, whose own work between launches hides the
    // wait.
    const auto& k = std::get<trace::KernelLaunch>(e->event.payload);
    prefetchForWrite(k.params);
    prefetchForWrite(k.pointers);
    prefetchForWrite(e->after.ranges);
    if (const EntryBox* next = hand.next()) prefetchForWrite(next->get(), sizeof(SinkEntry));
    return e;
  }
  e = std::make_unique<SinkEntry>();
  e->event.payload.emplace<trace::KernelLaunch>();
  return e;
}

uint64_t entryHeapBytes(const SinkEntry& e) {
  uint64_t n = sizeof(SinkEntry) + e.blob.capacity() +
               (e.before.ranges.capacity() + e.after.ranges.capacity()) * sizeof(trace::DeviceRange) +
               (e.beforeSnapshots.capacity() + e.afterSnapshots.capacity()) * sizeof(SnapshotCopy);
  if (const auto* k = std::get_if<trace::KernelLaunch>(&e.event.payload)) {
    n += k->function.capacity() + k->params.capacity() + k->paramLayout.capacity() * sizeof(trace::ParamInfo) +
         k->pointers.capacity() * sizeof(trace::PointerParam) +
         k->attributes.capacity() * sizeof(trace::LaunchAttribute) +
         k->annotations.capacity() * sizeof(trace::Annotation) +
         (k->inputs.capacity() + k->outputs.capacity() + k->reads.capacity()) * sizeof(trace::RangeDigest);
  }
  if (e.event.origin) {
    n += e.event.origin->op.capacity() + e.event.origin->module.capacity() + e.event.origin->file.capacity();
    for (const std::string& op : e.event.origin->opStack) n += sizeof(std::string) + op.capacity();
  }
  return n;
}

namespace {

// Whether the program waits here for the GPU: what the trace has so far
// should then reach the trace thread without waiting for its timer.
bool isSynchronisation(const trace::Event& ev) {
  const auto* s = std::get_if<trace::Sync>(&ev.payload);
  return s && (s->kind == trace::SyncKind::kContextSynchronize || s->kind == trace::SyncKind::kStreamSynchronize ||
               s->kind == trace::SyncKind::kEventSynchronize);
}

}  // namespace

SinkOptions sinkOptions(const RecorderOptions& options) {
  SinkOptions sink;
  sink.flushIntervalMs = options.flushIntervalMs;
  sink.queueBytes = options.traceQueueBytes;
  sink.slowWriterUs = options.slowWriterUs;
  return sink;
}

std::unique_ptr<TraceSink> openTrace(const RecorderOptions& options, const trace::Header& header, WarnFn warn) {
  std::string error;
  const std::optional<std::filesystem::path> dir = claimTraceDirectory(*options.output, options.rankName, error);
  if (!dir) {
    warn("cannot create the trace directory (" + error + "); this process is not recorded");
    return nullptr;
  }
  try {
    auto writer = std::make_unique<trace::TraceWriter>(*dir, header);
    return std::make_unique<TraceSink>(std::move(writer), warn, sinkOptions(options));
  } catch (const std::exception& e) {
    std::error_code ec;
    std::filesystem::remove_all(*dir, ec);
    warn(std::string("cannot start the trace (") + e.what() + "); this process is not recorded");
    return nullptr;
  }
}

TraceSink::TraceSink(std::unique_ptr<trace::TraceWriter> writer, WarnFn warn, SinkOptions options)
    : writer_(std::move(writer)), warn_(std::move(warn)), options_(options) {
  if (options_.thread) {
    // As many slots as entries fill half of the bound with their boxes
    // alone (at most 65536); the rest of the bound for what the queued
    // entries hold, boxes included.
    const size_t slots = std::clamp<uint64_t>(options_.queueBytes / 2 / sizeof(SinkEntry), 16, 65536);
    slots_.resize(slots);
    slotHeap_.resize(slots);
    const uint64_t ring = slots * (sizeof(EntryBox) + sizeof(uint64_t));
    heapLimit_ = options_.queueBytes > ring ? options_.queueBytes - ring : 0;
    wakeCount_ = std::max<size_t>(1, slots / 8);
    wakeHeap_ = heapLimit_ / 8;
    peakBytes_ = ring;
    thread_ = std::thread([this] { run(); });
  }
}

TraceSink::~TraceSink() { close(); }

uint64_t TraceSink::pushed() const {
  std::lock_guard lock(mu_);
  return nextSeq_;
}

SinkStats TraceSink::stats() const {
  std::lock_guard lock(mu_);
  return {nextSeq_,   wakeups_,   slots_.size(), slots_.size() * (sizeof(EntryBox) + sizeof(uint64_t)),
          peakBytes_, droppedTotal_};
}

bool TraceSink::enqueue(EntryBox entry, uint64_t heapBytes, bool urgent) {
  entry->event.seq = nextSeq_++;
  for (SnapshotCopy& c : entry->beforeSnapshots) c.lease.markQueued();
  for (SnapshotCopy& c : entry->afterSnapshots) c.lease.markQueued();
  const size_t i = (head_ + count_) % slots_.size();
  slots_[i] = std::move(entry);
  slotHeap_[i] = heapBytes;
  ++count_;
  heapQueued_ += heapBytes;
  peakBytes_ = std::max(peakBytes_, slots_.size() * (sizeof(EntryBox) + sizeof(uint64_t)) + heapQueued_);
  if (!sleeping_ || wakeSent_) return false;
  if (!urgent && count_ < wakeCount_ && heapQueued_ < wakeHeap_) return false;
  wakeSent_ = true;
  return true;
}

void TraceSink::push(SinkEntry&& entry) {
  EntryBox box;
  if (!threadLocalRef(tlsOtherEntries).take(box)) box = std::make_unique<SinkEntry>();
  *box = std::move(entry);
  push(std::move(box));
}

void TraceSink::push(EntryBox entry) {
  const bool urgent = isSynchronisation(entry->event);
  const uint64_t heapBytes = options_.thread ? entryHeapBytes(*entry) : 0;
  std::unique_lock lock(mu_);
  if (closing_) return;  // the tickets' destructors release their GPU slots
  if (!options_.thread) {
    // Inline mode: complete under the lock so that seq order is kept.
    entry->event.seq = nextSeq_++;
    complete(*entry);
    keepEntries({&entry, 1});
    ++done_;
    return;
  }
  // A pending gap needs a slot of its own, before this entry.
  const bool gap = dropped_.total() != 0;
  const uint64_t gapBytes = gap ? sizeof(SinkEntry) : 0;
  if (count_ + (gap ? 2 : 1) > slots_.size() || heapQueued_ + heapBytes + gapBytes > heapLimit_) {
    // Full: the entry is dropped and counted; its tickets' and leases'
    // destructors give back their GPU slots and host memory.
    const size_t kind = entry->event.payload.index();
    if (kind < dropped_.byKind.size()) ++dropped_.byKind[kind];
    if (!gap) dropped_.firstTimeNs = entry->event.timeNs;
    dropped_.lastTimeNs = entry->event.timeNs;
    ++droppedTotal_;
    const bool warn = !dropWarned_;
    dropWarned_ = true;
    const bool wake = sleeping_ && !wakeSent_;
    wakeSent_ = wakeSent_ || wake;
    lock.unlock();
    if (wake) wake_.notify_one();
    if (warn) {
      warn_("the trace thread cannot keep up with the program: events beyond " +
            std::to_string(options_.queueBytes >> 20) +
            " MiB waiting for it are dropped, and the trace says how many of which kinds, where "
            "(gpurr record --trace-queue raises the bound)");
    }
    return;
  }
  if (gap) {
    auto marker = std::make_unique<SinkEntry>();
    marker->event.payload = dropped_;
    marker->event.timeNs = dropped_.lastTimeNs;
    marker->event.thread = entry->event.thread;
    dropped_ = {};
    enqueue(std::move(marker), gapBytes, false);
  }
  const bool wake = enqueue(std::move(entry), heapBytes, urgent);
  lock.unlock();
  if (wake) wake_.notify_one();
}

void TraceSink::drain() {
  std::unique_lock lock(mu_);
  const uint64_t target = nextSeq_;
  if (!options_.thread || closed_) return;
  if (done_ < target) {
    wakeSent_ = true;
    wake_.notify_one();
  }
  idle_.wait(lock, [&] { return done_ >= target || closed_; });
}

void TraceSink::flush() {
  std::unique_lock lock(mu_);
  if (closing_ || closed_) return;
  if (!options_.thread) {  // entries were written as they came, under the lock
    if (writer_ && !broken_) writer_->flush();
    return;
  }
  const uint64_t generation = flushes_;
  flushWanted_ = wakeSent_ = true;
  wake_.notify_one();
  // Bounded: a GPU that hangs (the program was stopped because it did)
  // would hold the digests the trace thread waits for, and the program's
  // exit with them.
  if (!idle_.wait_for(lock, std::chrono::milliseconds(options_.flushWaitMs),
                      [&] { return flushes_ > generation || closed_; })) {
    warn_("the trace thread did not write what was recorded within " + std::to_string(options_.flushWaitMs) +
          " ms (is the GPU hung?); the trace keeps what it wrote before");
  }
}

void TraceSink::close(std::vector<trace::HostRegion> hostRegions, int64_t stoppedAfterStep,
                      std::optional<trace::RecorderMemory> memory, std::optional<trace::LayerSteps> layerSteps) {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closing_ = true;
  }
  wake_.notify_all();
  idle_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  closed_ = true;
  if (dropped_.total() != 0) {  // events dropped after the last one kept
    SinkEntry marker;
    marker.event.seq = nextSeq_++;
    marker.event.timeNs = dropped_.lastTimeNs;
    marker.event.payload = dropped_;
    dropped_ = {};
    complete(marker);
  }
  if (writer_ && !broken_) {
    try {
      writer_->setHostRegions(std::move(hostRegions));
      writer_->setStoppedAfterStep(stoppedAfterStep);
      if (memory) {
        memory->queueBytes = peakBytes_;
        memory->writerBytes = writer_->memoryBound();
        memory->hostBytes = memory->queueBytes + memory->snapshotBytes + memory->writerBytes;
        memory->eventsDropped = droppedTotal_;
        writer_->setRecorderMemory(*memory);
      }
      if (layerSteps) writer_->setLayerSteps(*layerSteps);
      writer_->close();
    } catch (const std::exception& e) {
      warn_(std::string("cannot finish the trace: ") + e.what() + "; it stays readable up to its last complete block");
    }
  }
  writer_.reset();
}

void TraceSink::run() {
  // This thread's own driver calls (event waits) must not be recorded.
  ReentrancyGuard guard;
  using Clock = std::chrono::steady_clock;
  auto lastFlush = Clock::now();
  bool unflushed = false;
  EntryBox taken[kTakeAtOnce];
  std::unique_lock lock(mu_);
  for (;;) {
    if (count_ == 0 && !closing_) {
      sleeping_ = true;
      wake_.wait_for(lock, std::chrono::milliseconds(options_.wakeIntervalMs), [&] { return wakeSent_ || closing_; });
      sleeping_ = wakeSent_ = false;
      ++wakeups_;
    }
    while (count_ > 0) {
      // Up to kTakeAtOnce entries at a time: the ring's lock, which every
      // push takes, goes between the cores once a batch, not once an entry.
      // What they hold counts against the bound until they are written.
      size_t n = 0;
      uint64_t takenHeap = 0;
      for (; n < kTakeAtOnce && count_ > 0; ++n) {
        taken[n] = std::move(slots_[head_]);
        takenHeap += slotHeap_[head_];
        head_ = (head_ + 1) % slots_.size();
        --count_;
      }
      lock.unlock();
      for (size_t i = 0; i < n; ++i) {
        if (options_.slowWriterUs != 0) std::this_thread::sleep_for(std::chrono::microseconds(options_.slowWriterUs));
        complete(*taken[i]);  // waits for the GPU and writes, unlocked
      }
      keepEntries({taken, n});  // their tickets released before done is reported
      unflushed = true;
      lock.lock();
      heapQueued_ -= takenHeap;
      done_ += n;
      idle_.notify_all();
    }
    const bool wanted = flushWanted_;  // by flush(), after the entries just written
    if (unflushed && (wanted || Clock::now() - lastFlush >= std::chrono::milliseconds(options_.flushIntervalMs))) {
      lock.unlock();
      if (writer_ && !broken_) {
        try {
          writer_->flush();
        } catch (const std::exception& e) {
          broken_ = true;
          warn_(std::string("cannot write the trace: ") + e.what() +
                "; recording stops here (the program continues, later events are lost)");
        }
      }
      lock.lock();
      unflushed = false;
      lastFlush = Clock::now();
    }
    if (wanted) {
      flushWanted_ = false;
      ++flushes_;
      idle_.notify_all();
    }
    if (closing_ && count_ == 0) return;
  }
}

void TraceSink::complete(SinkEntry& entry) {
  // The digests of a ticket; nothing when its ranges could not be hashed
  // (then none is recorded: a range without its digest would compare as 0).
  std::string failed;  // why a hash enqueued earlier did not complete
  auto resolve = [&](HashTicket& t, std::vector<trace::RangeDigest>& out) {
    out.clear();
    if (!t.pending) return;
    std::string error;
    const bool ok = t.pending->wait(results_, error);
    t.pending.reset();
    if (!ok) {
      if (!digestWarned_) {
        digestWarned_ = true;
        warn_("cannot read back buffer digests (" + error + "); the affected events carry no digests");
      }
      failed = error;
      return;
    }
    toRangeDigests(t.ranges, results_, out);
  };
  // A launch's digests go straight into its event, whose kept entry holds
  // their room from an earlier launch (emptyLaunchEntry).
  auto* launch = std::get_if<trace::KernelLaunch>(&entry.event.payload);
  std::vector<trace::RangeDigest>& before = launch ? launch->inputs : beforeDigests_;
  std::vector<trace::RangeDigest>& after = launch ? launch->outputs : afterDigests_;
  resolve(entry.before, before);
  resolve(entry.after, after);
  if (broken_ || !writer_) return;
  try {
    // Each snapshot goes to the blob store as soon as its copy is done, and
    // its staging memory back to the device's pool with it.
    auto store = [&](std::vector<SnapshotCopy>& copies, std::vector<trace::RangeDigest>& digests) {
      for (SnapshotCopy& c : copies) {
        std::span<const uint8_t> bytes;
        std::string error;
        if (c.copy && c.copy->wait(bytes, error)) {
          if (c.range < digests.size()) digests[c.range].snapshot = storeSnapshot(*writer_, bytes);
        } else if (!snapshotWarned_) {
          snapshotWarned_ = true;
          warn_("cannot read back a buffer snapshot (" + error + "); the affected ranges carry no snapshot");
        }
        c.copy.reset();
        c.lease.release();
      }
    };
    store(entry.beforeSnapshots, before);
    store(entry.afterSnapshots, after);
    trace::Event& ev = entry.event;
    if (trace::KernelLaunch* k = launch) {
      if (entry.kernel != nullptr) {
        k->function = entry.kernel->name;
        k->paramLayout = entry.kernel->layout;
      }
      if (entry.followedOrigin != nullptr && ev.origin) {
        const int64_t step = ev.origin->step;
        const uint64_t stepLaunch = ev.origin->stepLaunch;
        *ev.origin = *entry.followedOrigin;
        ev.origin->step = step;
        ev.origin->stepLaunch = stepLaunch;
        ev.origin->byPlace = true;
      }
      // Outputs that could not be hashed: the launch is not compared.
      if (!entry.after.ranges.empty() && k->outputs.empty()) k->hashed = false;
      if (!failed.empty()) k->annotations.emplace_back(std::in_place_type<trace::Note>, "not hashed: " + failed);
    } else if (auto* g = std::get_if<trace::GraphLaunch>(&ev.payload)) {
      g->inputs = std::move(before);
      g->outputs = std::move(after);
    } else if (auto* c = std::get_if<trace::Collective>(&ev.payload)) {
      // A framework's collective comes with its host tensors' digests; its
      // device tensors' follow them.
      c->inputs.insert(c->inputs.end(), before.begin(), before.end());
      c->outputs.insert(c->outputs.end(), after.begin(), after.end());
    } else if (auto* c = std::get_if<trace::Memcpy>(&ev.payload)) {
      if (!after.empty()) c->digest = after[0].digest;
      if (!entry.blob.empty()) c->data = writer_->putBlob(entry.blob);
    } else if (auto* s = std::get_if<trace::Memset>(&ev.payload)) {
      if (!after.empty()) s->digest = after[0].digest;
    } else if (auto* m = std::get_if<trace::ModuleLoad>(&ev.payload)) {
      if (!entry.blob.empty()) m->cubin = writer_->putBlob(entry.blob);
    }
    writer_->append(ev, entry.kernel);  // a kept kernel text stands for its name
  } catch (const std::exception& e) {
    broken_ = true;
    warn_(std::string("cannot write the trace: ") + e.what() +
          "; recording stops here (the program continues, later events are lost)");
  }
}

}  // namespace gpurr::recorder
