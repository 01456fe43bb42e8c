// Each context's hashing state (see context_hashing.h): the ring and its
// batches, the snapshot staging and its copies, and their end with the context.
#include "recorder/context_hashing.h"

#include <cstring>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "recorder/recycling.h"
#include "trace_format/hash_primitives.h"

namespace gpurr::recorder {

namespace {

// A batch that finds no room in the ring waits up to kRingWait for the trace
// thread, then is dropped.
constexpr auto kRingWait = std::chrono::seconds(2);
// How often the trace thread, waiting for a batch, asks whether the context
// has failed (CudaDevice::hashWaitLimit_ bounds the wait itself).
constexpr auto kHealthInterval = std::chrono::milliseconds(10);

// Staging capacity for `size` bytes: powers of two up to 2 MiB, then whole
// 2 MiB units, so that buffers are reused across similar sizes.
size_t stagingCapacity(size_t size) {
  constexpr size_t kUnit = size_t{2} << 20;
  if (size >= kUnit) return (size + kUnit - 1) / kUnit * kUnit;
  size_t c = 64 * 1024;
  while (c < size) c *= 2;
  return c;
}

// Between two polls of what the GPU writes: spin at first, then sleep a
// little, then longer (the trace thread waits; the program does not).
void pollPause(uint32_t polls) {
  if (polls >= 64) std::this_thread::sleep_for(std::chrono::microseconds(polls < 1024 ? 20 : 200));
}

}  // namespace

// A hash's requests and their plan, kept for the next hash once it is done
// (Recycler): their vectors keep their capacity, at least kRoom (made when
// given back, on the trace thread, so that a batch of a few launches' ranges
// allocates nothing on the program's).
struct HashRequests {
  static constexpr size_t kRoom = 32;
  std::vector<kernels::HashRequest> requests;
  kernels::HashPlan plan;
  void makeRoom() {
    requests.reserve(kRoom);
    plan.ranges.reserve(kRoom);
    plan.firstSlot.reserve(kRoom);
  }
};

// One hash batch in flight. Made on the program's thread for nearly every
// launch and freed by the trace thread: its memory and its requests' are
// reused (Pooled, Recycler).
class PendingCuda : public PendingHashes, public Pooled<PendingCuda> {
 public:
  PendingCuda(std::shared_ptr<ContextHashing> cs, std::span<const kernels::HashRequest> requests,
              uint64_t stream)
      : cs_(std::move(cs)), held_(Recycler<HashRequests>::take()), requests_(held_->requests), plan_(held_->plan),
        stream_(stream) {
    requests_.assign(requests.begin(), requests.end());
    kernels::planHashBatch(requests_, plan_);
  }
  ~PendingCuda() override {
    if (batch_) orphan();
    held_->makeRoom();
    Recycler<HashRequests>::give(std::move(held_));
  }

  const kernels::HashPlan& plan() const { return plan_; }
  // Holds cs_->mu.
  void setBatch(const HashRing::Batch& b) {
    batch_ = b;
    cs_->inFlight.push_back(this);
  }
  uint64_t sequence() const { return batch_->sequence; }
  uint64_t ticket() const { return batch_->sequence + 1; }  // never 0, the words' initial value
  uint64_t* doneWord() const { return cs_->doneWords() + batch_->sequence % ContextHashing::kRingBatches; }
  bool completed() const { return __atomic_load_n(doneWord(), __ATOMIC_ACQUIRE) == ticket(); }

  // Folds the digests from the ring and gives the batch's room back. Caller
  // holds cs_->mu; `ok`: the batch completed; `abandoned`: given up while its
  // kernel may still run.
  void finishLocked(bool ok, const std::string& error, bool abandoned = false) {
    if (ok && batch_) {
      std::span<const uint64_t> chunks(cs_->digests() + batch_->firstDigest, plan_.totalSlots);
      results_.resize(requests_.size());
      for (size_t i = 0; i < requests_.size(); ++i) {
        results_[i].digest = kernels::foldRequest(plan_, requests_, i, chunks);
        // A range of one chunk has no chunk digests but its own (the trace
        // keeps those of 2 to 256 chunks: toRangeDigests).
        const uint64_t first = plan_.firstSlot[i], n = kernels::chunkCount(requests_[i].length);
        if (n >= 2) results_[i].chunkDigests.assign(chunks.begin() + first, chunks.begin() + first + n);
      }
    } else if (ok) {
      results_.resize(requests_.size());
      for (size_t i = 0; i < requests_.size(); ++i) results_[i].digest = kernels::foldRequest(plan_, requests_, i, {});
    } else {
      failed_ = true;
      error_ = error;
    }
    // A batch given up while its kernel may still run keeps its room until
    // its ticket shows; one of a failed context keeps it for good.
    if (batch_) releaseLocked(ok, abandoned ? &cs_->abandoned : nullptr);
    done_ = true;
  }

  // Destroyed unread (its entry dropped, its launch failed): not waited for
  // on the program's thread, which may be far ahead of the GPU. Its room
  // comes back once its ticket shows, as an abandoned batch's, without
  // making later waits give up.
  void orphan() {
    std::lock_guard lock(cs_->mu);
    if (!batch_) return;  // finished meanwhile (by the context's teardown)
    releaseLocked(completed(), &cs_->orphaned);
    done_ = true;
  }

  void finishEmpty() {
    std::lock_guard lock(cs_->mu);
    finishLocked(true, "");
  }

  bool wait(std::vector<kernels::HashResult>& out, std::string& error) override {
    std::unique_lock lock(cs_->mu);
    if (!done_) {
      lock.unlock();
      std::string why;
      bool abandoned = false;
      const bool ok = waitForTicket(why, abandoned);
      lock.lock();
      if (!done_) finishLocked(ok, why, abandoned);
    }
    if (failed_) {
      error = error_;
      return false;
    }
    out = results_;
    return true;
  }

 private:
  // Polls the batch's completion word (no driver call while the GPU keeps
  // up), under the context's lock: the context's teardown frees the ring and
  // finishes the batch itself. Now and then asks whether the context has
  // failed, so that a kernel that will never run is not waited for; a stream
  // that stays blocked past the wait limit (a collective waiting for another
  // process, a debugger) abandons the batch, not the context.
  bool waitForTicket(std::string& why, bool& abandoned) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    auto nextCheck = start + kHealthInterval;
    for (uint32_t polls = 0;; ++polls) {
      {
        std::lock_guard lock(cs_->mu);
        if (done_ || cs_->dead) {  // finished by the teardown, or enqueued as it ran
          why = "the context was destroyed";
          return false;
        }
        if (completed()) return true;
      }
      const auto now = Clock::now();
      if (now >= nextCheck) {
        nextCheck = now + kHealthInterval;
        if (!cs_->healthy(why)) return false;
        std::lock_guard lock(cs_->mu);
        cs_->reclaimAbandonedLocked();
        if (!cs_->abandoned.empty()) {
          // An earlier batch is still stuck: its stream has not moved for the
          // whole wait limit, so this one is given up at once, not after a
          // wait limit of its own (a hung collective and a thousand queued
          // launches would hold the trace thread for a day).
          why = "an earlier hash kernel of this context did not complete: its stream stayed blocked";
          abandoned = true;
          return false;
        }
      }
      if (now - start > cs_->waitLimit) {
        why = fmt::format("the hash kernel did not complete within {} s: its stream stayed blocked",
                          std::chrono::duration_cast<std::chrono::seconds>(cs_->waitLimit).count());
        abandoned = true;
        return false;
      }
      pollPause(polls);
    }
  }

  // The batch leaves the ring's flight (caller holds cs_->mu): its room is
  // given back when its kernel has run (`ran`: the GPU is done with it),
  // else kept on `until` until its ticket shows, or for good (null).
  void releaseLocked(bool ran, std::vector<std::pair<uint64_t, uint64_t>>* until) {
    if (ran) {
      cs_->ring.giveBack(batch_->sequence);
    } else if (until != nullptr) {
      until->emplace_back(batch_->sequence, ticket());
    }
    std::erase(cs_->inFlight, this);
    cs_->reclaimAbandonedLocked();
    cs_->ringFreed.notify_all();
    batch_.reset();
  }

  std::shared_ptr<ContextHashing> cs_;
  std::unique_ptr<HashRequests> held_;
  std::vector<kernels::HashRequest>& requests_;  // held_'s
  kernels::HashPlan& plan_;                      // held_'s
  uint64_t stream_;
  std::optional<HashRing::Batch> batch_;
  bool done_ = false, failed_ = false;
  std::string error_;
  std::vector<kernels::HashResult> results_;
};

class PendingCudaCopy : public PendingCopy {
 public:
  PendingCudaCopy(std::shared_ptr<ContextHashing> cs, void* host, size_t capacity, size_t size, CUevent ev)
      : cs_(std::move(cs)), host_(static_cast<uint8_t*>(host)), capacity_(capacity), size_(size), event_(ev) {}

  ~PendingCudaCopy() override {
    std::span<const uint8_t> ignored;
    std::string error;
    wait(ignored, error);  // the GPU must be done with the buffer before it is reused
    std::lock_guard lock(cs_->mu);
    cs_->copiesInFlight.erase(this);
    if (host_ == nullptr) return;  // detached: the context's resources are gone
    if (stillCopying_) return;     // given up while the GPU may still write it: freed with the context
    if (event_ != nullptr) cs_->freeEvents.push_back(event_);
    if (cs_->stagingBytes <= cs_->stagingLimit) {
      cs_->freeStaging.emplace(capacity_, host_);
    } else {
      // Freeing pinned memory may need the context current on this thread.
      RelaxedCaptureMode relaxed(*cs_->api);
      const bool pushed = cs_->api->cuCtxPushCurrent(cs_->ctx) == CUDA_SUCCESS;
      cs_->api->cuMemFreeHost(host_);
      cs_->stagingBytes -= capacity_;
      CUcontext popped;
      if (pushed) cs_->api->cuCtxPopCurrent(&popped);
    }
  }

  // Polls the copy's event under the context's lock (the teardown, which
  // takes it, detaches the copy and destroys the event), up to the wait
  // limit: a copy behind a stream that does not move is given up.
  bool wait(std::span<const uint8_t>& bytes, std::string& error) override {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    std::unique_lock lock(cs_->mu);
    for (uint32_t polls = 0; !done_; ++polls) {
      CUresult r;
      {
        RelaxedCaptureMode relaxed(*cs_->api);  // as in PendingCuda::wait
        r = cs_->api->cuEventQuery(event_);
      }
      if (r != CUDA_ERROR_NOT_READY) {
        done_ = true;
        if (r != CUDA_SUCCESS) failed_ = true, error_ = "copying a snapshot: " + cs_->api->errorText(r);
        break;
      }
      if (Clock::now() - start > cs_->waitLimit) {
        done_ = failed_ = stillCopying_ = true;
        error_ = "a snapshot copy did not complete within the wait limit: its stream stayed blocked";
        break;
      }
      lock.unlock();
      pollPause(polls);
      lock.lock();
    }
    if (failed_) {
      error = error_;
      return false;
    }
    bytes = host_ != nullptr ? std::span<const uint8_t>(host_, size_) : std::span<const uint8_t>(owned_);
    return true;
  }

  // The context is going away and has been synchronised: keep the bytes in
  // ordinary memory, since its pinned memory is freed with it. Holds cs_->mu.
  void detachLocked(bool ok) {
    if (!done_) {
      done_ = true;
      if (!ok) failed_ = true, error_ = "the context was destroyed during a snapshot copy";
    }
    if (!failed_ && host_ != nullptr) owned_.assign(host_, host_ + size_);
    cs_->freeStaging.emplace(capacity_, host_);  // freed by releaseResources
    if (event_ != nullptr) cs_->freeEvents.push_back(event_);
    host_ = nullptr;
    event_ = nullptr;
  }

 private:
  std::shared_ptr<ContextHashing> cs_;
  uint8_t* host_;
  size_t capacity_, size_;
  CUevent event_;
  bool done_ = false, failed_ = false, stillCopying_ = false;
  std::string error_;
  std::vector<uint8_t> owned_;
};

bool ContextHashing::createRing(std::string& error) {
  auto fail = [&](const char* what, CUresult r) {
    error = std::string(what) + ": " + api->errorText(r);
    return false;
  };
  if (CUresult r = api->cuMemHostAlloc(&ringHost, kRingBytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
      r != CUDA_SUCCESS) {
    ringHost = nullptr;
    return fail("allocating the hash ring (cuMemHostAlloc)", r);
  }
  std::memset(ringHost, 0, kRingBytes);
  if (CUresult r = api->cuMemHostGetDevicePointer(&ringDev, ringHost, 0); r != CUDA_SUCCESS)
    return fail("mapping the hash ring (cuMemHostGetDevicePointer)", r);
  if (CUresult r = api->cuMemAlloc(&counters, kRingBatches * sizeof(uint32_t)); r != CUDA_SUCCESS) {
    counters = 0;
    return fail("allocating the hash ring's counters (cuMemAlloc)", r);
  }
  if (CUresult r = api->cuStreamCreate(&watch, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS) {
    watch = nullptr;
    return fail("creating the recorder's stream (cuStreamCreate)", r);
  }
  // On the recorder's stream, waited for: the legacy stream is not ordered
  // with the program's non-blocking streams, where the first hashes run.
  if (CUresult r = api->cuMemsetD8Async(counters, 0, kRingBatches * sizeof(uint32_t), watch); r != CUDA_SUCCESS)
    return fail("clearing the hash ring's counters (cuMemsetD8Async)", r);
  if (CUresult r = api->cuStreamSynchronize(watch); r != CUDA_SUCCESS)
    return fail("clearing the hash ring's counters (cuStreamSynchronize)", r);
  return true;
}

void ContextHashing::reclaimAbandonedLocked() {
  if (ringHost == nullptr) return;  // released with the context
  auto ran = [&](const std::pair<uint64_t, uint64_t>& b) {
    if (__atomic_load_n(doneWords() + b.first % kRingBatches, __ATOMIC_ACQUIRE) != b.second) return false;
    ring.giveBack(b.first);
    return true;
  };
  std::erase_if(abandoned, ran);
  std::erase_if(orphaned, ran);
}

bool ContextHashing::awaitInFlight(std::string& why) {
  std::vector<std::pair<uint64_t, uint64_t>> batches;  // (sequence, ticket)
  {
    std::lock_guard lock(mu);
    if (dead || ringHost == nullptr) return true;
    for (const PendingCuda* p : inFlight) batches.emplace_back(p->sequence(), p->ticket());
    batches.insert(batches.end(), orphaned.begin(), orphaned.end());
  }
  const auto start = std::chrono::steady_clock::now();
  for (uint32_t polls = 0; !batches.empty(); ++polls) {
    {
      std::lock_guard lock(mu);
      if (dead) return true;  // finished by the context's teardown
      std::erase_if(batches, [&](const std::pair<uint64_t, uint64_t>& b) {
        return __atomic_load_n(doneWords() + b.first % kRingBatches, __ATOMIC_ACQUIRE) == b.second;
      });
    }
    if (batches.empty()) break;
    if (std::chrono::steady_clock::now() - start > waitLimit) {
      why = fmt::format("{} hash kernels did not complete within {} s", batches.size(),
                        std::chrono::duration_cast<std::chrono::seconds>(waitLimit).count());
      return false;
    }
    if (polls % 1024 == 1023 && !healthy(why)) return false;
    pollPause(polls);
  }
  return true;
}

bool ContextHashing::healthy(std::string& why) {
  // Under the lock: the teardown, which takes it too, cannot destroy the
  // stream or the context meanwhile.
  std::lock_guard lock(mu);
  if (broken) {
    why = brokenWhy;
    return false;
  }
  if (dead) return true;  // the teardown finishes every batch
  RelaxedCaptureMode relaxed(*api);  // as for every call of the trace thread
  const bool pushed = api->cuCtxPushCurrent(ctx) == CUDA_SUCCESS;
  const CUresult r = api->cuStreamQuery(watch);  // empty: success, or the context's sticky error
  if (pushed) {
    CUcontext popped;
    api->cuCtxPopCurrent(&popped);
  }
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY) return true;
  brokenWhy = "the context failed: " + api->errorText(r);
  broken = true;
  why = brokenWhy;
  return false;
}

std::shared_ptr<ContextHashing> ContextHashing::create(const kernels::DriverApi& api, uint64_t context,
                                                       std::chrono::milliseconds waitLimit, uint64_t stagingLimit,
                                                       std::string& error) {
  auto cs = std::make_shared<ContextHashing>();
  cs->api = &api;
  cs->ctx = reinterpret_cast<CUcontext>(context);
  cs->waitLimit = waitLimit;
  cs->stagingLimit = stagingLimit;
  // In the current context = `context`; once per context, on its first hash.
  cs->hasher = kernels::DeviceHasher::create(api, error);
  if (!cs->hasher) return nullptr;
  if (!cs->createRing(error)) {
    cs->releaseResources();
    return nullptr;
  }
  return cs;
}

void ContextHashing::releaseResources() {
  for (auto& [capacity, host] : freeStaging) api->cuMemFreeHost(host);
  freeStaging.clear();
  stagingBytes = 0;
  for (CUevent e : freeEvents) api->cuEventDestroy(e);
  freeEvents.clear();
  if (ringHost != nullptr) api->cuMemFreeHost(ringHost);
  if (counters != 0) api->cuMemFree(counters);
  if (watch != nullptr) api->cuStreamDestroy(watch);
  ringHost = nullptr;
  ringDev = counters = 0;
  watch = nullptr;
  abandoned.clear();
  orphaned.clear();
  hasher.reset();
}

std::unique_ptr<PendingHashes> ContextHashing::hash(const std::shared_ptr<ContextHashing>& cs, uint64_t stream,
                                                    std::span<const kernels::HashRequest> requests,
                                                    bool synchronous, std::string& error) {
  const kernels::DriverApi& driver = *cs->api;
  auto pending = std::make_unique<PendingCuda>(cs, requests, stream);
  const kernels::HashPlan& plan = pending->plan();
  if (plan.totalSlots == 0) {
    pending->finishEmpty();
    return pending;
  }
  const auto s = reinterpret_cast<CUstream>(stream);
  if (synchronous) {
    // The stream, not the context: other streams may be capturing graphs,
    // and a context synchronisation would break their capture.
    ++countOnThisThread().syncCalls;
    if (CUresult r = driver.cuStreamSynchronize(s); r != CUDA_SUCCESS) {
      error = "cuStreamSynchronize: " + driver.errorText(r);
      return nullptr;
    }
  }

  // Room in the ring: the trace thread gives it back as it reads digests.
  // When the GPU runs far behind, wait a little, then drop the batch rather
  // than stall the program without end.
  HashRing::Batch batch;
  {
    std::unique_lock lock(cs->mu);
    if (cs->dead) {
      error = "the context is being destroyed";
      return nullptr;
    }
    if (cs->broken) {
      error = cs->brokenWhy;
      return nullptr;
    }
    const uint64_t rangeCount = plan.ranges.size();
    if (!cs->ring.fits(rangeCount, plan.totalSlots)) {
      ++cs->dropped;
      error = fmt::format("{} GiB of buffers in one launch exceed what the hash ring holds ({} GiB)",
                          (plan.totalSlots * hash::kChunkBytes) >> 30, (kRingDigests * hash::kChunkBytes) >> 30);
      return nullptr;
    }
    std::optional<HashRing::Batch> b = cs->ring.take(rangeCount, plan.totalSlots);
    // Abandoned batches that completed since give their room back without
    // a notification: look again now and then.
    for (auto waited = std::chrono::milliseconds(0); !b && waited < kRingWait; waited += kHealthInterval) {
      cs->reclaimAbandonedLocked();
      b = cs->ring.take(rangeCount, plan.totalSlots);
      if (!b) {
        cs->ringFreed.wait_for(lock, kHealthInterval,
                               [&] { return (b = cs->ring.take(rangeCount, plan.totalSlots)).has_value(); });
      }
    }
    if (!b) {
      ++cs->dropped;
      error = fmt::format("the hash ring is full: the GPU runs more than {} s of hashing behind the program "
                          "(dropped so far: {})",
                          std::chrono::duration_cast<std::chrono::seconds>(kRingWait).count(), cs->dropped);
      return nullptr;
    }
    batch = *b;
  }
  // The descriptors, with slots relative to the batch's first digest.
  std::memcpy(cs->ranges() + batch.firstRange, plan.ranges.data(),
              plan.ranges.size() * sizeof(kernels::DeviceHashRange));
  const uint64_t place = batch.sequence % kRingBatches;
  const CUdeviceptr hostBase = reinterpret_cast<CUdeviceptr>(cs->ringHost);
  auto onDevice = [&](const void* p) { return cs->ringDev + (reinterpret_cast<CUdeviceptr>(p) - hostBase); };
  if (CUresult r = cs->hasher->enqueue(s, onDevice(cs->ranges() + batch.firstRange),
                                       static_cast<uint32_t>(plan.ranges.size()), plan.totalSlots,
                                       onDevice(cs->digests() + batch.firstDigest),
                                       cs->counters + place * sizeof(uint32_t), onDevice(cs->doneWords() + place),
                                       batch.sequence + 1);
      r != CUDA_SUCCESS) {
    error = "launching the hash kernel: " + driver.errorText(r);
    std::lock_guard lock(cs->mu);
    cs->ring.giveBack(batch.sequence);  // nothing was enqueued
    cs->ringFreed.notify_all();
    return nullptr;
  }
  ++countOnThisThread().enqueued;
  {
    std::lock_guard lock(cs->mu);
    pending->setBatch(batch);
  }
  if (synchronous) {
    ++countOnThisThread().syncCalls;
    driver.cuStreamSynchronize(s);
    std::vector<kernels::HashResult> ignored;
    std::string waitError;
    pending->wait(ignored, waitError);  // results stay in `pending`
  }
  return pending;
}

std::unique_ptr<PendingCopy> ContextHashing::copyToHost(const std::shared_ptr<ContextHashing>& cs, uint64_t stream,
                                                        uint64_t address, uint64_t size, bool synchronous,
                                                        std::string& error) {
  const kernels::DriverApi& driver = *cs->api;
  const auto s = reinterpret_cast<CUstream>(stream);
  void* host = nullptr;
  size_t capacity = 0;
  CUevent ev = nullptr;
  {
    std::lock_guard lock(cs->mu);
    if (cs->dead) {
      error = "the context is being destroyed";
      return nullptr;
    }
    // The smallest free buffer that fits, unless it would waste more than half.
    if (auto it = cs->freeStaging.lower_bound(size);
        it != cs->freeStaging.end() && it->first <= 2 * stagingCapacity(size)) {
      capacity = it->first;
      host = it->second;
      cs->freeStaging.erase(it);
    } else {
      // A new buffer: make room for it first among the free ones, the
      // largest first.
      capacity = stagingCapacity(size);
      while (!cs->freeStaging.empty() && cs->stagingBytes + capacity > cs->stagingLimit) {
        const auto largest = std::prev(cs->freeStaging.end());
        driver.cuMemFreeHost(largest->second);
        cs->stagingBytes -= largest->first;
        cs->freeStaging.erase(largest);
      }
    }
    if (!cs->freeEvents.empty()) {
      ev = cs->freeEvents.back();
      cs->freeEvents.pop_back();
    }
  }
  auto giveBack = [&](CUresult r, const char* what) -> std::unique_ptr<PendingCopy> {
    error = std::string(what) + ": " + driver.errorText(r);
    std::lock_guard lock(cs->mu);
    if (host != nullptr) cs->freeStaging.emplace(capacity, host);
    if (ev != nullptr) cs->freeEvents.push_back(ev);
    return nullptr;
  };
  if (host == nullptr) {
    if (CUresult r = driver.cuMemAllocHost(&host, capacity); r != CUDA_SUCCESS) {
      host = nullptr;
      return giveBack(r, "allocating pinned staging memory");
    }
    std::lock_guard lock(cs->mu);
    cs->stagingBytes += capacity;
    cs->stagingPeak = std::max(cs->stagingPeak, cs->stagingBytes);
  }
  if (ev == nullptr) {
    if (CUresult r = driver.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING); r != CUDA_SUCCESS) {
      ev = nullptr;
      return giveBack(r, "cuEventCreate");
    }
  }
  // Stream order: the copy sees exactly what the launch saw (or left).
  if (CUresult r = driver.cuMemcpyDtoHAsync(host, address, size, s); r != CUDA_SUCCESS)
    return giveBack(r, "cuMemcpyDtoHAsync");
  if (CUresult r = driver.cuEventRecord(ev, s); r != CUDA_SUCCESS) {
    // The copy is queued with nothing to tell when it is done: its staging
    // is not reused (freed with the context).
    host = nullptr;
    return giveBack(r, "cuEventRecord");
  }
  countOnThisThread().enqueued += 2;
  auto copy = std::make_unique<PendingCudaCopy>(cs, host, capacity, size, ev);
  {
    std::lock_guard lock(cs->mu);
    cs->copiesInFlight.insert(copy.get());
  }
  if (synchronous) {
    std::span<const uint8_t> bytes;
    std::string waitError;
    copy->wait(bytes, waitError);  // a failure stays in `copy`
  }
  return copy;
}

void ContextHashing::destroyed(CUresult synchronized) {
  const CUresult r = synchronized;
  std::lock_guard lock(mu);
  const std::vector<PendingCuda*> pending = inFlight;
  for (PendingCuda* p : pending) {
    p->finishLocked(r == CUDA_SUCCESS && p->completed(),
                    r == CUDA_SUCCESS ? "the hash kernel did not run before the context was destroyed"
                                      : "the context was destroyed: " + api->errorText(r));
  }
  std::set<PendingCudaCopy*> copies = copiesInFlight;
  for (PendingCudaCopy* c : copies) c->detachLocked(r == CUDA_SUCCESS);
  copiesInFlight.clear();
  dead = true;
  releaseResources();
}

}  // namespace gpurr::recorder
