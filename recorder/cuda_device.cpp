// The CUDA driver side of the recorder (see cuda_device.h).
#include "recorder/cuda_device.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "kernels/device_hasher.h"
#include "recorder/hash_ring.h"
#include "trace_format/hash_primitives.h"
#include "recorder/torch_version.h"

namespace gpurr::recorder {

namespace {

// Each context's hash ring (HashRing): descriptors and chunk digests of the
// batches in flight, in pinned host memory the GPU reads and writes directly.
// 32 MiB of digests cover 256 GiB of hashed bytes in flight; a batch that
// finds no room waits up to kRingWait for the trace thread, then is dropped.
constexpr uint64_t kRingRanges = 64 * 1024;
constexpr uint64_t kRingDigests = 4 * 1024 * 1024;
constexpr uint64_t kRingBatches = 8192;
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

// A symbol from a library the program may have loaded (any scope).
void* loadedSymbol(std::initializer_list<const char*> libraries, const char* symbol) {
  if (void* s = dlsym(RTLD_DEFAULT, symbol)) return s;
  for (const char* lib : libraries) {
    if (void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD)) {
      void* s = dlsym(h, symbol);
      dlclose(h);
      if (s) return s;
    }
  }
  return nullptr;
}

// Between two polls of what the GPU writes: spin at first, then sleep a
// little, then longer (the trace thread waits; the program does not).
void pollPause(uint32_t polls) {
  if (polls >= 64) std::this_thread::sleep_for(std::chrono::microseconds(polls < 1024 ? 20 : 200));
}

// Lets this thread make the recorder's allocating calls while another thread
// captures a graph in global mode (where they would otherwise fail and
// invalidate that capture); restores the thread's mode afterwards.
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(const kernels::DriverApi& api) : api_(api) {
    if (api_.cuThreadExchangeStreamCaptureMode) active_ = api_.cuThreadExchangeStreamCaptureMode(&mode_) == CUDA_SUCCESS;
  }
  ~RelaxedCaptureMode() {
    if (active_) api_.cuThreadExchangeStreamCaptureMode(&mode_);
  }

 private:
  const kernels::DriverApi& api_;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool active_ = false;
};

}  // namespace

class PendingCuda;
class PendingCudaCopy;

struct CudaDevice::ContextState {
  const kernels::DriverApi* api = nullptr;
  CUcontext ctx = nullptr;
  std::unique_ptr<kernels::DeviceHasher> hasher;
  std::mutex mu;
  std::condition_variable ringFreed;
  // The ring: one pinned, device-mapped host allocation holding the
  // descriptors, the chunk digests and a completion word per batch place;
  // one counter per batch place in device memory (zero between batches).
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
  std::set<PendingCuda*> inFlight;
  // Batches given up while their kernel may still run (the stream blocked
  // past the wait limit): (sequence, ticket). Their room comes back once
  // their ticket shows.
  std::vector<std::pair<uint64_t, uint64_t>> abandoned;
  // Snapshot staging: free pinned buffers by capacity, spare events, copies
  // in flight (detached when the context goes away). `stagingBytes` counts
  // every staging buffer the context holds, in use or free; a buffer given
  // back is kept while that stays within `stagingLimit`. Reusing them
  // matters: pinning and unpinning tens of MiB costs more than copying them.
  std::multimap<size_t, void*> freeStaging;
  uint64_t stagingBytes = 0;
  uint64_t stagingLimit = 0;
  std::vector<CUevent> freeEvents;
  std::set<PendingCudaCopy*> copiesInFlight;
  bool dead = false;

  // Allocates the ring (once, with the context current). False with `error`.
  bool createRing(std::string& error);
  void releaseResources();
  // Gives back the room of abandoned batches whose kernel has run since.
  void reclaimAbandonedLocked();
  // False with the reason once the context has failed.
  bool healthy(std::string& why);
};

class PendingCuda : public PendingHashes {
 public:
  PendingCuda(std::shared_ptr<CudaDevice::ContextState> cs, std::span<const kernels::HashRequest> requests,
              uint64_t stream)
      : cs_(std::move(cs)), requests_(requests.begin(), requests.end()), plan_(kernels::planHashBatch(requests_)),
        stream_(stream) {}
  ~PendingCuda() override {
    std::vector<kernels::HashResult> ignored;
    std::string error;
    if (batch_) wait(ignored, error);
  }

  const kernels::HashPlan& plan() const { return plan_; }
  // Holds cs_->mu.
  void setBatch(const HashRing::Batch& b) {
    batch_ = b;
    cs_->inFlight.insert(this);
  }
  uint64_t ticket() const { return batch_->sequence + 1; }  // never 0, the words' initial value
  uint64_t* doneWord() const { return cs_->doneWords() + batch_->sequence % kRingBatches; }
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
        const uint64_t first = plan_.firstSlot[i], n = kernels::chunkCount(requests_[i].length);
        results_[i].chunkDigests.assign(chunks.begin() + first, chunks.begin() + first + n);
      }
    } else if (ok) {
      results_.resize(requests_.size());
      for (size_t i = 0; i < requests_.size(); ++i) results_[i].digest = kernels::foldRequest(plan_, requests_, i, {});
    } else {
      failed_ = true;
      error_ = error;
    }
    if (batch_) {
      // Room is given back only when the GPU is done with it: a batch given
      // up while its kernel may still run keeps its room until its ticket
      // shows; one of a failed context keeps it for good.
      if (ok) {
        cs_->ring.giveBack(batch_->sequence);
      } else if (abandoned) {
        cs_->abandoned.emplace_back(batch_->sequence, ticket());
      }
      cs_->inFlight.erase(this);
      cs_->reclaimAbandonedLocked();
      cs_->ringFreed.notify_all();
      batch_.reset();
    }
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

  std::shared_ptr<CudaDevice::ContextState> cs_;
  std::vector<kernels::HashRequest> requests_;
  kernels::HashPlan plan_;
  uint64_t stream_;
  std::optional<HashRing::Batch> batch_;
  bool done_ = false, failed_ = false;
  std::string error_;
  std::vector<kernels::HashResult> results_;
};

class PendingCudaCopy : public PendingCopy {
 public:
  PendingCudaCopy(std::shared_ptr<CudaDevice::ContextState> cs, void* host, size_t capacity, size_t size, CUevent ev)
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
  std::shared_ptr<CudaDevice::ContextState> cs_;
  uint8_t* host_;
  size_t capacity_, size_;
  CUevent event_;
  bool done_ = false, failed_ = false, stillCopying_ = false;
  std::string error_;
  std::vector<uint8_t> owned_;
};

bool CudaDevice::ContextState::createRing(std::string& error) {
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

void CudaDevice::ContextState::reclaimAbandonedLocked() {
  if (ringHost == nullptr) return;  // released with the context
  std::erase_if(abandoned, [&](const std::pair<uint64_t, uint64_t>& b) {
    if (__atomic_load_n(doneWords() + b.first % kRingBatches, __ATOMIC_ACQUIRE) != b.second) return false;
    ring.giveBack(b.first);
    return true;
  });
}

bool CudaDevice::ContextState::healthy(std::string& why) {
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

void CudaDevice::ContextState::releaseResources() {
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
  hasher.reset();
}

std::unique_ptr<CudaDevice> CudaDevice::create(std::string& error) {
  std::unique_ptr<CudaDevice> d(new CudaDevice());
  if (!d->api_.load(error)) return nullptr;
  std::string ignored;
  if (void* lib = kernels::openCudaDriver(ignored))
    d->launchKernelEx_ = reinterpret_cast<decltype(&::cuLaunchKernelEx)>(dlsym(lib, "cuLaunchKernelEx"));
  return d;
}

std::unique_ptr<CudaDevice> CudaDevice::create(const kernels::DriverApi& api) {
  std::unique_ptr<CudaDevice> d(new CudaDevice());
  d->api_ = api;
  return d;
}

CudaDevice::~CudaDevice() = default;  // at exit the driver may be gone: leak, don't call it

bool CudaDevice::describeFunction(uint64_t function, FunctionInfo& out) {
  // cuKernelGetFunction may load the kernel's module (lazy loading): not a
  // call that may break a capture this thread runs in global mode.
  RelaxedCaptureMode relaxed(api_);
  const auto f = reinterpret_cast<CUfunction>(function);
  const auto k = reinterpret_cast<CUkernel>(function);
  const char* name = nullptr;
  bool isKernel = false;
  if (api_.cuFuncGetName && api_.cuFuncGetName(&name, f) == CUDA_SUCCESS && name) {
    out.name = name;
  } else if (api_.cuKernelGetName && api_.cuKernelGetName(&name, k) == CUDA_SUCCESS && name) {
    out.name = name;
    isKernel = true;
  }
  // Parameter layout: ask for parameter 0, 1, 2... until INVALID_VALUE.
  auto layoutOf = [&](auto getInfo, auto handle) -> bool {
    if (getInfo == nullptr) return false;
    out.layout.clear();
    for (size_t i = 0; i < 65536; ++i) {
      size_t offset = 0, size = 0;
      const CUresult r = getInfo(handle, i, &offset, &size);
      if (r == CUDA_ERROR_INVALID_VALUE) return true;
      if (r != CUDA_SUCCESS) return false;
      out.layout.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(size)});
    }
    return true;
  };
  out.layoutKnown = isKernel ? layoutOf(api_.cuKernelGetParamInfo, k) : layoutOf(api_.cuFuncGetParamInfo, f);
  if (!out.layoutKnown && !isKernel) out.layoutKnown = layoutOf(api_.cuKernelGetParamInfo, k);

  CUfunction asFunction = f;
  if (isKernel && (api_.cuKernelGetFunction == nullptr || api_.cuKernelGetFunction(&asFunction, k) != CUDA_SUCCESS))
    asFunction = nullptr;
  CUmodule module = nullptr;
  if (asFunction && api_.cuFuncGetModule && api_.cuFuncGetModule(&module, asFunction) == CUDA_SUCCESS)
    out.module = reinterpret_cast<uint64_t>(module);
  return !out.name.empty();
}

uint64_t CudaDevice::runtimeFunction(uint64_t hostFunction) {
  // cudaError_t cudaGetFuncBySymbol(cudaFunction_t*, const void*): a
  // cudaFunction_t is a CUfunction. PyTorch loads libcudart RTLD_LOCAL, so
  // it is looked up in the loaded library, not in the global scope alone. A
  // program linked with the static runtime exports none of it: 0.
  using GetFuncBySymbol = int (*)(CUfunction*, const void*);
  using LastError = int (*)();
  void* rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
  auto find = [&](const char* name) { return rt != nullptr ? dlsym(rt, name) : dlsym(RTLD_DEFAULT, name); };
  const auto get = reinterpret_cast<GetFuncBySymbol>(find("cudaGetFuncBySymbol"));
  const auto peek = reinterpret_cast<LastError>(find("cudaPeekAtLastError"));
  const auto clear = reinterpret_cast<LastError>(find("cudaGetLastError"));
  if (rt != nullptr) dlclose(rt);  // only drops the reference NOLOAD took
  // A failed lookup sets the thread's last runtime error, which the program
  // reads after its launch (PyTorch checks every launch): look up only while
  // that state holds no error of the program's, and clear ours.
  if (get == nullptr || peek == nullptr || clear == nullptr || peek() != 0) return 0;
  RelaxedCaptureMode relaxed(api_);  // the lookup may load the module, as above
  CUfunction f = nullptr;
  if (get(&f, reinterpret_cast<const void*>(hostFunction)) != 0) {
    clear();
    return 0;
  }
  return reinterpret_cast<uint64_t>(f);
}

Device::StreamCapture CudaDevice::captureState(uint64_t stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  const CUresult r = api_.cuStreamGetCaptureInfo != nullptr
                         ? api_.cuStreamGetCaptureInfo(reinterpret_cast<CUstream>(stream), &status, &id, nullptr,
                                                       nullptr, nullptr, nullptr)
                         : api_.cuStreamIsCapturing(reinterpret_cast<CUstream>(stream), &status);
  StreamCapture out;
  // An error (e.g. the legacy stream while another stream captures in global
  // mode) means: not captured, and keep off.
  if (r != CUDA_SUCCESS) return out;
  if (status == CU_STREAM_CAPTURE_STATUS_ACTIVE) out.capture = id;
  out.canEnqueue = status == CU_STREAM_CAPTURE_STATUS_NONE;
  return out;
}

bool CudaDevice::graphNodes(uint64_t graph, GraphNodes& out, std::string& error) {
  out = {};
  return addGraphNodes(reinterpret_cast<CUgraph>(graph), out, error, 0);
}

bool CudaDevice::addGraphNodes(CUgraph graph, GraphNodes& out, std::string& error, int depth) {
  if (depth > 64) return error = "child graphs nested too deep", false;
  auto failed = [&](const char* what, CUresult r) {
    error = fmt::format("{}: {}", what, api_.errorText(r));
    return false;
  };
  size_t n = 0;
  CUresult r = api_.cuGraphGetNodes(graph, nullptr, &n);
  if (r != CUDA_SUCCESS) return failed("cuGraphGetNodes", r);
  std::vector<CUgraphNode> nodes(n);
  if (n > 0 && (r = api_.cuGraphGetNodes(graph, nodes.data(), &n)) != CUDA_SUCCESS)
    return failed("cuGraphGetNodes", r);
  nodes.resize(std::min(n, nodes.size()));
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type;
    if ((r = api_.cuGraphNodeGetType(node, &type)) != CUDA_SUCCESS) return failed("cuGraphNodeGetType", r);
    ++out.count;
    switch (type) {
      case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS p{};
        if ((r = api_.cuGraphKernelNodeGetParams(node, &p)) != CUDA_SUCCESS)
          return failed("cuGraphKernelNodeGetParams", r);
        const uint64_t function = p.func != nullptr ? reinterpret_cast<uint64_t>(p.func)
                                                    : reinterpret_cast<uint64_t>(p.kern);
        out.kernels.push_back({function, p.kernelParams, p.extra});
        break;
      }
      case CU_GRAPH_NODE_TYPE_MEMCPY: {
        CUDA_MEMCPY3D c{};
        if ((r = api_.cuGraphMemcpyNodeGetParams(node, &c)) != CUDA_SUCCESS)
          return failed("cuGraphMemcpyNodeGetParams", r);
        // Unified addressing: a device or unified side is a device address
        // (arrays are not memory gpurr hashes; host memory is not hashed).
        for (const auto& [memory, address] : {std::pair{c.srcMemoryType, c.srcDevice}, {c.dstMemoryType, c.dstDevice}}) {
          if (memory == CU_MEMORYTYPE_DEVICE || memory == CU_MEMORYTYPE_UNIFIED) out.addresses.push_back(address);
        }
        break;
      }
      case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS m{};
        if ((r = api_.cuGraphMemsetNodeGetParams(node, &m)) != CUDA_SUCCESS)
          return failed("cuGraphMemsetNodeGetParams", r);
        out.addresses.push_back(m.dst);
        break;
      }
      case CU_GRAPH_NODE_TYPE_GRAPH: {
        CUgraph child = nullptr;
        if ((r = api_.cuGraphChildGraphNodeGetGraph(node, &child)) != CUDA_SUCCESS)
          return failed("cuGraphChildGraphNodeGetGraph", r);
        if (!addGraphNodes(child, out, error, depth + 1)) return false;
        break;
      }
      // No device memory of the program's: host code (which cannot call
      // CUDA), ordering, and the graph's own allocations (never hashed).
      case CU_GRAPH_NODE_TYPE_HOST: case CU_GRAPH_NODE_TYPE_EMPTY: case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      case CU_GRAPH_NODE_TYPE_EVENT_RECORD: case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
      case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT: case CU_GRAPH_NODE_TYPE_MEM_ALLOC: case CU_GRAPH_NODE_TYPE_MEM_FREE:
        break;
      case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        return error = "it holds a batched memory operation node", false;
      case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return error = "it holds a conditional node", false;
      default:
        return error = fmt::format("it holds a node of kind {}", static_cast<int>(type)), false;
    }
  }
  return true;
}

std::shared_ptr<CudaDevice::ContextState> CudaDevice::stateFor(uint64_t context, std::string& error) {
  std::lock_guard lock(mu_);
  if (auto it = contexts_.find(context); it != contexts_.end()) return it->second;
  auto cs = std::make_shared<ContextState>();
  cs->api = &api_;
  cs->ctx = reinterpret_cast<CUcontext>(context);
  cs->waitLimit = hashWaitLimit_;
  cs->stagingLimit = stagingLimit_;
  // In the current context = `context`; once per context, on its first hash.
  cs->hasher = kernels::DeviceHasher::create(api_, error);
  if (!cs->hasher) return nullptr;
  if (!cs->createRing(error)) {
    cs->releaseResources();
    return nullptr;
  }
  contexts_.emplace(context, cs);
  return cs;
}

std::unique_ptr<PendingHashes> CudaDevice::hash(uint64_t context, uint64_t stream,
                                                std::span<const kernels::HashRequest> requests, bool synchronous,
                                                std::string& error) {
  RelaxedCaptureMode relaxed(api_);
  std::shared_ptr<ContextState> cs = stateFor(context, error);
  if (!cs) return nullptr;
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
    if (CUresult r = api_.cuStreamSynchronize(s); r != CUDA_SUCCESS) {
      error = "cuStreamSynchronize: " + api_.errorText(r);
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
    error = "launching the hash kernel: " + api_.errorText(r);
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
    api_.cuStreamSynchronize(s);
    std::vector<kernels::HashResult> ignored;
    std::string waitError;
    pending->wait(ignored, waitError);  // results stay in `pending`
  }
  return pending;
}

std::unique_ptr<PendingCopy> CudaDevice::copyToHost(uint64_t context, uint64_t stream, uint64_t address,
                                                    uint64_t size, bool synchronous, std::string& error) {
  RelaxedCaptureMode relaxed(api_);
  std::shared_ptr<ContextState> cs = stateFor(context, error);
  if (!cs) return nullptr;
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
        api_.cuMemFreeHost(largest->second);
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
    error = std::string(what) + ": " + api_.errorText(r);
    std::lock_guard lock(cs->mu);
    if (host != nullptr) cs->freeStaging.emplace(capacity, host);
    if (ev != nullptr) cs->freeEvents.push_back(ev);
    return nullptr;
  };
  if (host == nullptr) {
    if (CUresult r = api_.cuMemAllocHost(&host, capacity); r != CUDA_SUCCESS) {
      host = nullptr;
      return giveBack(r, "allocating pinned staging memory");
    }
    std::lock_guard lock(cs->mu);
    cs->stagingBytes += capacity;
  }
  if (ev == nullptr) {
    if (CUresult r = api_.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING); r != CUDA_SUCCESS) {
      ev = nullptr;
      return giveBack(r, "cuEventCreate");
    }
  }
  // Stream order: the copy sees exactly what the launch saw (or left).
  if (CUresult r = api_.cuMemcpyDtoHAsync(host, address, size, s); r != CUDA_SUCCESS)
    return giveBack(r, "cuMemcpyDtoHAsync");
  if (CUresult r = api_.cuEventRecord(ev, s); r != CUDA_SUCCESS) {
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

bool CudaDevice::rerunLaunch(uint64_t context, const Relaunch& launch, std::span<const kernels::HashRequest> outputs,
                             uint32_t runs, std::vector<std::vector<uint64_t>>& digests, std::string& error) {
  if (!checkpoint_.save || !checkpoint_.restore || !checkpoint_.free) {
    error = "no libcheckpoint.so (the CUPTI checkpoint API) beside the libcupti in use or on the loader's path";
    return false;
  }
  if (!launchKernelEx_) {
    error = "the CUDA driver lacks cuLaunchKernelEx";
    return false;
  }
  auto cuptiText = [&](const char* what, CUptiResult r) {
    const char* text = nullptr;
    if (checkpoint_.resultString) checkpoint_.resultString(r, &text);
    return std::string(what) + ": " + (text ? text : "error " + std::to_string(static_cast<int>(r)));
  };
  RelaxedCaptureMode relaxed(api_);
  const auto stream = reinterpret_cast<CUstream>(launch.stream);
  auto digestOutputs = [&](std::vector<uint64_t>& out) {
    std::unique_ptr<PendingHashes> p = hash(context, launch.stream, outputs, true, error);
    std::vector<kernels::HashResult> results;
    if (!p || !p->wait(results, error)) return false;
    out.clear();
    for (const kernels::HashResult& r : results) out.push_back(r.digest);
    return true;
  };
  // Once before the checkpoint: the hash kernel's module and a slot large
  // enough exist then, so the runs allocate nothing the checkpoint lacks.
  std::vector<uint64_t> warmUp;
  if (!digestOutputs(warmUp)) return false;
  // Every stream of the context is at rest while its memory is saved.
  if (CUresult r = api_.cuCtxSynchronize(); r != CUDA_SUCCESS) {
    error = "cuCtxSynchronize: " + api_.errorText(r);
    return false;
  }
  using NV::Cupti::Checkpoint::CUpti_Checkpoint;  // the size macro names it unqualified
  CUpti_Checkpoint cp{};
  cp.structSize = CUpti_Checkpoint_STRUCT_SIZE;
  cp.ctx = reinterpret_cast<CUcontext>(context);
  // PyTorch's allocator holds most of the device, so the checkpoint spills
  // to host memory: a quarter of it stays free for the program (the save
  // fails instead, and the launch is recorded without the check).
  const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0) cp.reserveHostMB = static_cast<size_t>(pages) / 4 * pageSize >> 20;
  if (CUptiResult r = checkpoint_.save(&cp); r != CUPTI_SUCCESS) {
    error = cuptiText("cuptiCheckpointSave", r);
    return false;
  }
  std::vector<CUlaunchAttribute> attributes(launch.attributes, launch.attributes + launch.attributeCount);
  for (CUlaunchAttribute& a : attributes) {
    // The program's events are recorded by its own launch, not by a re-run
    // that other streams or threads waiting on them would take for it.
    if (a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT || a.id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT)
      a.id = CU_LAUNCH_ATTRIBUTE_IGNORE;
  }
  if (launch.cooperative) {
    CUlaunchAttribute a{};
    a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    a.value.cooperative = 1;
    attributes.push_back(a);
  }
  CUlaunchConfig config{};
  config.gridDimX = launch.grid.x, config.gridDimY = launch.grid.y, config.gridDimZ = launch.grid.z;
  config.blockDimX = launch.block.x, config.blockDimY = launch.block.y, config.blockDimZ = launch.block.z;
  config.sharedMemBytes = launch.sharedMemBytes;
  config.hStream = stream;
  config.attrs = attributes.empty() ? nullptr : attributes.data();
  config.numAttrs = static_cast<unsigned>(attributes.size());
  bool ok = true;
  digests.assign(runs, {});
  for (uint32_t i = 0; i < runs && ok; ++i) {
    // This thread is inside the recorder: the launch raises no recording.
    if (CUresult r = launchKernelEx_(&config, reinterpret_cast<CUfunction>(launch.function), launch.kernelParams,
                                     launch.extra);
        r != CUDA_SUCCESS) {
      error = "re-launching the kernel: " + api_.errorText(r);
      ok = false;
    } else if (!digestOutputs(digests[i])) {
      ok = false;
    }
    if (CUptiResult r = checkpoint_.restore(&cp); r != CUPTI_SUCCESS) {
      error = cuptiText("cuptiCheckpointRestore", r) + "; the program's device memory may differ from an "
              "unrecorded run";
      ok = false;
    }
  }
  checkpoint_.free(&cp);
  // The restored memory is in place before the program's own launch.
  if (CUresult r = api_.cuCtxSynchronize(); r != CUDA_SUCCESS && ok) {
    error = "cuCtxSynchronize after the restore: " + api_.errorText(r);
    ok = false;
  }
  return ok;
}

void CudaDevice::contextDestroying(uint64_t context) {
  std::shared_ptr<ContextState> cs;
  {
    std::lock_guard lock(mu_);
    auto it = contexts_.find(context);
    if (it == contexts_.end()) return;
    cs = it->second;
    contexts_.erase(it);
  }
  RelaxedCaptureMode relaxed(api_);
  const bool pushed = api_.cuCtxPushCurrent(cs->ctx) == CUDA_SUCCESS;
  // Everything enqueued is finished after this; the pinned mirrors (freed
  // with the context) are read now, not by the trace thread later.
  const CUresult r = api_.cuCtxSynchronize();
  {
    std::lock_guard lock(cs->mu);
    std::set<PendingCuda*> inFlight = cs->inFlight;
    for (PendingCuda* p : inFlight) {
      p->finishLocked(r == CUDA_SUCCESS && p->completed(),
                      r == CUDA_SUCCESS ? "the hash kernel did not run before the context was destroyed"
                                        : "the context was destroyed: " + api_.errorText(r));
    }
    std::set<PendingCudaCopy*> copies = cs->copiesInFlight;
    for (PendingCudaCopy* c : copies) c->detachLocked(r == CUDA_SUCCESS);
    cs->copiesInFlight.clear();
    cs->dead = true;
    cs->releaseResources();
  }
  if (pushed) {
    CUcontext popped;
    api_.cuCtxPopCurrent(&popped);
  }
}

uint32_t CudaDevice::currentDevice() {
  CUdevice dev = 0;
  return api_.cuCtxGetDevice(&dev) == CUDA_SUCCESS ? static_cast<uint32_t>(dev) : 0;
}

bool CudaDevice::addressRange(uint64_t address, uint64_t& base, uint64_t& size) {
  if (api_.cuMemGetAddressRange == nullptr) return false;
  CUdeviceptr b = 0;
  size_t s = 0;
  if (api_.cuMemGetAddressRange(&b, &s, address) != CUDA_SUCCESS) return false;
  base = b, size = s;
  return true;
}

void CudaDevice::describeSystem(trace::Header& h) {
  int version = 0;
  if (api_.cuDriverGetVersion(&version) == CUDA_SUCCESS) h.driverVersion = static_cast<uint32_t>(version);
  int count = 0;
  if (api_.cuDeviceGetCount(&count) == CUDA_SUCCESS) {
    for (int i = 0; i < count; ++i) {
      CUdevice dev;
      if (api_.cuDeviceGet(&dev, i) != CUDA_SUCCESS) continue;
      trace::GpuInfo g;
      g.ordinal = static_cast<uint32_t>(i);
      char name[256] = {};
      if (api_.cuDeviceGetName(name, sizeof(name) - 1, dev) == CUDA_SUCCESS) g.name = name;
      CUuuid uuid;
      if (api_.cuDeviceGetUuid(&uuid, dev) == CUDA_SUCCESS) {
        const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
        char text[64];
        std::snprintf(text, sizeof(text),
                      "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                      b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        g.uuid = text;
      }
      int v = 0;
      if (api_.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == CUDA_SUCCESS)
        g.smCount = static_cast<uint32_t>(v);
      if (api_.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == CUDA_SUCCESS)
        g.ccMajor = static_cast<uint32_t>(v);
      if (api_.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == CUDA_SUCCESS)
        g.ccMinor = static_cast<uint32_t>(v);
      size_t bytes = 0;
      if (api_.cuDeviceTotalMem(&bytes, dev) == CUDA_SUCCESS) g.memoryBytes = bytes;
      char bus[64] = {};
      if (api_.cuDeviceGetPCIBusId(bus, sizeof(bus) - 1, dev) == CUDA_SUCCESS) g.pciBusId = bus;
      h.gpus.push_back(std::move(g));
    }
  }
  // Library versions, from the copies the program has loaded (if any).
  using IntGetter = int (*)(int*);
  using SizeGetter = size_t (*)();
  using PropGetter = int (*)(int, int*);
  if (auto f = reinterpret_cast<IntGetter>(loadedSymbol({"libcudart.so.13", "libcudart.so.12", "libcudart.so"},
                                                        "cudaRuntimeGetVersion"))) {
    int v = 0;
    if (f(&v) == 0) h.cudaRuntimeVersion = static_cast<uint32_t>(v);
  }
  if (auto f = reinterpret_cast<SizeGetter>(
          loadedSymbol({"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"}, "cudnnGetVersion")))
    h.cudnnVersion = static_cast<uint32_t>(f());
  if (auto f = reinterpret_cast<PropGetter>(loadedSymbol({"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
                                                         "cublasGetProperty"))) {
    int major = 0, minor = 0, patch = 0;  // libraryPropertyType: MAJOR, MINOR, PATCH
    if (f(0, &major) == 0 && f(1, &minor) == 0 && f(2, &patch) == 0)
      h.cublasVersion = static_cast<uint32_t>(major * 10000 + minor * 100 + patch);
  }
  if (auto f = reinterpret_cast<IntGetter>(loadedSymbol({"libnccl.so.2", "libnccl.so"}, "ncclGetVersion"))) {
    int v = 0;
    if (f(&v) == 0) h.libraries.push_back({"nccl", std::to_string(v)});
  }
  if (auto f = reinterpret_cast<IntGetter>(loadedSymbol({"libcurand.so.10", "libcurand.so"}, "curandGetVersion"))) {
    int v = 0;
    if (f(&v) == 0) h.libraries.push_back({"curand", std::to_string(v)});
  }
  if (auto f = reinterpret_cast<SizeGetter>(
          loadedSymbol({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, "cublasLtGetVersion")))
    h.libraries.push_back({"cublasLt", std::to_string(f())});
  if (auto torch = loadedTorchVersion()) h.libraries.push_back({"pytorch", *torch});
}

}  // namespace gpurr::recorder
