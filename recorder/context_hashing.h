// Each context's hashing state behind CudaDevice (cuda_device.h): the hash
// kernel, the hash ring (pinned, device-mapped host memory: a hash is one
// kernel launch on the program's stream that reads its descriptors from the
// ring, writes its digests there and raises a completion word; the trace
// thread polls that word and folds), the pinned staging of snapshot copies,
// and the hashes and copies in flight, finished when the context goes away.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "kernels/device_hasher.h"
#include "kernels/driver_api.h"
#include "recorder/device.h"
#include "recorder/hash_ring.h"

namespace gpurr::recorder {

// Lets this thread make the recorder's allocating calls while another thread
// captures a graph in global mode (where they would otherwise fail and
// invalidate that capture); restores the thread's mode afterwards.
// `captureMayBeOpen` false (CaptureTracker): no capture is open, and the
// thread's mode is left alone.
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(const kernels::DriverApi& api, bool captureMayBeOpen = true) : api_(api) {
    if (captureMayBeOpen && api_.cuThreadExchangeStreamCaptureMode)
      active_ = api_.cuThreadExchangeStreamCaptureMode(&mode_) == CUDA_SUCCESS;
  }
  ~RelaxedCaptureMode() {
    if (active_) api_.cuThreadExchangeStreamCaptureMode(&mode_);
  }

 private:
  const kernels::DriverApi& api_;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool active_ = false;
};

class PendingCuda;
class PendingCudaCopy;

struct ContextHashing {
  const kernels::DriverApi* api = nullptr;
  CUcontext ctx = nullptr;
  std::unique_ptr<kernels::DeviceHasher> hasher;
  std::mutex mu;
  std::condition_variable ringFreed;
  // The ring: one pinned, device-mapped host allocation holding the
  // descriptors, the chunk digests and a completion word per batch place;
  // one counter per batch place in device memory (zero between batches).
  // 32 MiB of digests cover 256 GiB of hashed bytes in flight; a batch that
  // finds no room waits a while (kRingWait, context_hashing.cpp) for the
  // trace thread, then is dropped.
  static constexpr uint64_t kRingRanges = 64 * 1024;
  static constexpr uint64_t kRingDigests = 4 * 1024 * 1024;
  static constexpr uint64_t kRingBatches = 8192;
  HashRing ring{kRingRanges, kRingDigests, kRingBatches};
  void* ringHost = nullptr;
  CUdeviceptr ringDev = 0, counters = 0;
  kernels::DeviceHashRange* ranges() const { return static_cast<kernels::DeviceHashRange*>(ringHost); }
  uint64_t* digests() const { return reinterpret_cast<uint64_t*>(ranges() + kRingRanges); }
  uint64_t* doneWords() const { return digests() + kRingDigests; }
  static constexpr size_t kRingBytes = kRingRanges * sizeof(kernels::DeviceHashRange) +
                                       (kRingDigests + kRingBatches) * sizeof(uint64_t);
  // The recorder's own stream in the context: clears the counters, and a
  // query of it shows whether the context has failed. The program's streams
  // are never queried: a query of a stream being captured invalidates the
  // program's capture.
  CUstream watch = nullptr;
  std::chrono::milliseconds waitLimit{0};
  std::atomic<bool> broken{false};  // the context failed (a sticky error): no kernel of it runs again
  std::string brokenWhy;            // under mu
  uint64_t dropped = 0;             // batches refused for want of room
  std::vector<PendingCuda*> inFlight;  // a flat list: added to for nearly every launch
  // Batches given up while their kernel may still run (the stream blocked
  // past the wait limit): (sequence, ticket). Their room comes back once
  // their ticket shows.
  std::vector<std::pair<uint64_t, uint64_t>> abandoned;
  // Batches whose ticket was destroyed unread while their kernel had not
  // run (an entry dropped): the same, but nobody waited for them.
  std::vector<std::pair<uint64_t, uint64_t>> orphaned;
  // Snapshot staging: free pinned buffers by capacity, spare events, copies
  // in flight (detached when the context goes away). `stagingBytes` counts
  // every staging buffer the context holds, in use or free; a buffer given
  // back is kept while that stays within `stagingLimit`. Reusing them
  // matters: pinning and unpinning tens of MiB costs more than copying them.
  std::multimap<size_t, void*> freeStaging;
  uint64_t stagingBytes = 0;
  uint64_t stagingPeak = 0;  // the most stagingBytes has been
  uint64_t stagingLimit = 0;
  std::vector<CUevent> freeEvents;
  std::set<PendingCudaCopy*> copiesInFlight;
  bool dead = false;

  // The state of `context` (current on this thread): the hash kernel loaded
  // and the ring allocated, once, on its first hash or copy. Null with `error`.
  static std::shared_ptr<ContextHashing> create(const kernels::DriverApi& api, uint64_t context,
                                                std::chrono::milliseconds waitLimit, uint64_t stagingLimit,
                                                std::string& error);
  // Device::hash and Device::copyToHost in this context (the caller is in
  // relaxed capture mode).
  static std::unique_ptr<PendingHashes> hash(const std::shared_ptr<ContextHashing>& cs, uint64_t stream,
                                             std::span<const kernels::HashRequest> requests, bool synchronous,
                                             std::string& error);
  static std::unique_ptr<PendingCopy> copyToHost(const std::shared_ptr<ContextHashing>& cs, uint64_t stream,
                                                 uint64_t address, uint64_t size, bool synchronous,
                                                 std::string& error);
  // The context is being destroyed and has been synchronised (`synchronized`:
  // the result): every hash and copy in flight is finished, the pinned
  // memory freed.
  void destroyed(CUresult synchronized);

  // Allocates the ring (once, with the context current). False with `error`.
  bool createRing(std::string& error);
  void releaseResources();
  // Gives back the room of abandoned and orphaned batches whose kernel has
  // run since.
  void reclaimAbandonedLocked();
  // False with the reason once the context has failed.
  bool healthy(std::string& why);
  // Waits until every hash kernel enqueued so far has run (those abandoned
  // excepted), polling their completion words, for at most the wait limit;
  // the trace thread still folds them. False with `why` when one did not.
  bool awaitInFlight(std::string& why);
};

}  // namespace gpurr::recorder
