// Background trace writing (see trace_sink.h).
#include "recorder/trace_sink.h"

#include <chrono>

#include "recorder/reentrancy.h"

namespace gpurr::recorder {

std::vector<trace::RangeDigest> toRangeDigests(const std::vector<trace::DeviceRange>& ranges,
                                               const std::vector<kernels::HashResult>& results) {
  std::vector<trace::RangeDigest> out(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    out[i].range = ranges[i];
    if (i < results.size()) {
      out[i].digest = results[i].digest;
      if (results[i].chunkDigests.size() >= 2 && results[i].chunkDigests.size() <= 256)
        out[i].chunkDigests = results[i].chunkDigests;
    }
  }
  return out;
}

TraceSink::TraceSink(std::unique_ptr<trace::TraceWriter> writer, WarnFn warn, bool thread, unsigned flushIntervalMs)
    : writer_(std::move(writer)), warn_(std::move(warn)), flushIntervalMs_(flushIntervalMs) {
  if (thread) thread_ = std::thread([this] { run(); });
}

TraceSink::~TraceSink() { close(); }

uint64_t TraceSink::pushed() const {
  std::lock_guard lock(mu_);
  return nextSeq_;
}

void TraceSink::push(SinkEntry&& entry) {
  std::unique_lock lock(mu_);
  if (closing_) return;  // the tickets' destructors release their GPU slots
  entry.event.seq = nextSeq_++;
  for (SnapshotCopy& c : entry.beforeSnapshots) c.lease.markQueued();
  for (SnapshotCopy& c : entry.afterSnapshots) c.lease.markQueued();
  if (!thread_.joinable()) {
    // Inline mode: complete under the lock so that seq order is kept.
    complete(entry);
    ++done_;
    return;
  }
  queue_.push_back(std::move(entry));
  lock.unlock();
  wake_.notify_one();
}

void TraceSink::drain() {
  std::unique_lock lock(mu_);
  const uint64_t target = nextSeq_;
  idle_.wait(lock, [&] { return done_ >= target || !thread_.joinable(); });
}

void TraceSink::close(std::vector<trace::HostRegion> hostRegions, int64_t stoppedAfterStep) {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closing_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  closed_ = true;
  if (writer_ && !broken_) {
    try {
      writer_->setHostRegions(std::move(hostRegions));
      writer_->setStoppedAfterStep(stoppedAfterStep);
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
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait_for(lock, std::chrono::milliseconds(flushIntervalMs_), [&] { return !queue_.empty() || closing_; });
    while (!queue_.empty()) {
      SinkEntry entry = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      complete(entry);  // waits for the GPU and writes, unlocked
      unflushed = true;
      entry = SinkEntry{};  // release tickets before reporting done
      lock.lock();
      ++done_;
      idle_.notify_all();
    }
    if (unflushed && Clock::now() - lastFlush >= std::chrono::milliseconds(flushIntervalMs_)) {
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
    if (closing_ && queue_.empty()) return;
  }
}

void TraceSink::complete(SinkEntry& entry) {
  // The digests of a ticket; nothing when its ranges could not be hashed
  // (then none is recorded: a range without its digest would compare as 0).
  std::string failed;  // why a hash enqueued earlier did not complete
  auto resolve = [&](HashTicket& t) -> std::vector<trace::RangeDigest> {
    if (!t.pending) return {};
    std::vector<kernels::HashResult> results;
    std::string error;
    const bool ok = t.pending->wait(results, error);
    t.pending.reset();
    if (!ok) {
      if (!digestWarned_) {
        digestWarned_ = true;
        warn_("cannot read back buffer digests (" + error + "); the affected events carry no digests");
      }
      failed = error;
      return {};
    }
    return toRangeDigests(t.ranges, results);
  };
  std::vector<trace::RangeDigest> before = resolve(entry.before);
  std::vector<trace::RangeDigest> after = resolve(entry.after);
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
    if (auto* k = std::get_if<trace::KernelLaunch>(&ev.payload)) {
      k->inputs = std::move(before);
      k->outputs = std::move(after);
      // Outputs that could not be hashed: the launch is not compared.
      if (!entry.after.ranges.empty() && k->outputs.empty()) k->hashed = false;
      if (!failed.empty()) k->annotations.emplace_back(std::in_place_type<trace::Note>, "not hashed: " + failed);
    } else if (auto* g = std::get_if<trace::GraphLaunch>(&ev.payload)) {
      g->inputs = std::move(before);
      g->outputs = std::move(after);
    } else if (auto* c = std::get_if<trace::Collective>(&ev.payload)) {
      // A framework's collective of host tensors comes with its digests.
      if (!before.empty()) c->inputs = std::move(before);
      if (!after.empty()) c->outputs = std::move(after);
    } else if (auto* c = std::get_if<trace::Memcpy>(&ev.payload)) {
      if (!after.empty()) c->digest = after[0].digest;
      if (!entry.blob.empty()) c->data = writer_->putBlob(entry.blob);
    } else if (auto* s = std::get_if<trace::Memset>(&ev.payload)) {
      if (!after.empty()) s->digest = after[0].digest;
    } else if (auto* m = std::get_if<trace::ModuleLoad>(&ev.payload)) {
      if (!entry.blob.empty()) m->cubin = writer_->putBlob(entry.blob);
    }
    writer_->append(ev);
  } catch (const std::exception& e) {
    broken_ = true;
    warn_(std::string("cannot write the trace: ") + e.what() +
          "; recording stops here (the program continues, later events are lost)");
  }
}

}  // namespace gpurr::recorder
