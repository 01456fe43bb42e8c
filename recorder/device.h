// What the recording logic needs from the GPU, as an interface: the CUDA
// implementation (cuda_device.cpp) talks to the driver; CPU tests substitute
// a fake that hashes host memory. Keeps RecordSession testable without a GPU.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/device_hasher.h"
#include "kernels/hash_plan.h"
#include "recorder/capture_tracker.h"
#include "recorder/thread_local_ref.h"
#include "trace_format/events.h"

namespace gpurr::recorder {

struct FunctionInfo {
  std::string name;                       // mangled
  uint64_t module = 0;                    // CUmodule handle; 0 = unknown
  std::vector<trace::ParamInfo> layout;
  bool layoutKnown = false;
};

// Digests of one batch of ranges, possibly still being computed on the GPU.
class PendingHashes {
 public:
  virtual ~PendingHashes() = default;
  // Waits for the digests, one per request, in order. False (with `error`)
  // when they could not be computed.
  virtual bool wait(std::vector<kernels::HashResult>& out, std::string& error) = 0;
};

// The bytes of one device range copied to host memory (a snapshot),
// possibly still in flight. Destroying it gives the staging memory back.
class PendingCopy {
 public:
  virtual ~PendingCopy() = default;
  // Waits for the copy. `bytes` stays valid while this object lives. False
  // (with `error`) when the copy failed.
  virtual bool wait(std::span<const uint8_t>& bytes, std::string& error) = 0;
};

// A launch as the program made it, to be made again (--check-determinism).
// The pointers are the program's own, valid during its launch callback.
struct Relaunch {
  uint64_t function = 0;  // CUfunction, or a CUkernel cast to one
  trace::Dim3 grid, block;
  uint32_t sharedMemBytes = 0;
  uint64_t stream = 0;    // to launch on (per-thread default stream resolved)
  const CUlaunchAttribute* attributes = nullptr;
  uint32_t attributeCount = 0;
  bool cooperative = false;
  void** kernelParams = nullptr;
  void** extra = nullptr;
};

// What the recorder did on the calling thread, for the cost of each launch
// (the session reads it around the launch's callbacks): GPU operations it
// enqueued on the program's streams, and driver calls that wait for the GPU
// (stream, event or context synchronisation). Devices count what they do.
struct ThreadCounts {
  uint64_t enqueued = 0;
  uint64_t syncCalls = 0;
};
inline ThreadCounts& countOnThisThread() {
  thread_local ThreadCounts counts;
  return threadLocalRef(counts);
}

class Device {
 public:
  virtual ~Device() = default;

  // Name, module and parameter layout of a launched function (a CUfunction,
  // or a CUkernel cast to one). False when the driver knows nothing of it.
  virtual bool describeFunction(uint64_t function, FunctionInfo& out) = 0;

  // The CUfunction of a runtime entry function (the host function a
  // cudaLaunchKernel names), through the process's CUDA runtime; 0 when it
  // cannot be resolved (a program linked with the static runtime). Leaves
  // the runtime's last-error state as the program left it.
  virtual uint64_t runtimeFunction(uint64_t hostFunction) {
    (void)hostFunction;
    return 0;
  }

  // What graph capture means for `stream` now, from one driver query
  // (cuStreamGetCaptureInfo).
  struct StreamCapture {
    // The id of the capture `stream` is part of, when it is being captured:
    // work enqueued there is captured, not run.
    std::optional<uint64_t> capture;
    // Whether work may be enqueued on `stream` now: not while it (or, for
    // the legacy stream, any blocking stream) is being captured into a graph.
    bool canEnqueue = false;
  };
  virtual StreamCapture captureState(uint64_t stream) = 0;

  // The captures the recorder has seen begin and not end (the session's
  // callbacks keep it up to date).
  CaptureTracker& captures() { return captures_; }
  // captureState, asked only while a capture may be open: with none open,
  // no stream is being captured and every stream can take work.
  StreamCapture currentCapture(uint64_t stream) {
    return captures_.mayBeOpen() ? captureState(stream) : StreamCapture{std::nullopt, true};
  }
  bool canEnqueue(uint64_t stream) { return currentCapture(stream).canEnqueue; }

  // The nodes of a graph, its child graphs' included, as far as they can
  // touch device memory: each kernel node's function and parameters (as a
  // launch gives them, owned by the node: valid until the graph changes or
  // is destroyed), and the device addresses of each copy and set.
  struct GraphNodes {
    struct Kernel {
      uint64_t function = 0;  // CUfunction, or a CUkernel cast to one
      void** kernelParams = nullptr;
      void** extra = nullptr;
    };
    uint32_t count = 0;
    std::vector<Kernel> kernels;
    std::vector<uint64_t> addresses;
  };
  // False, with why in `error`, when a node may reach memory that neither
  // says: a node kind gpurr does not follow (batched memory operations,
  // conditional bodies), or a node the driver does not describe.
  virtual bool graphNodes(uint64_t graph, GraphNodes& out, std::string& error) {
    (void)graph, (void)out;
    error = "this device cannot read graphs";
    return false;
  }

  // Hashes `requests` on `stream` of `context` (the current context), after
  // all work already enqueued there. With `synchronous`, the device is
  // synchronised before and the digests are ready on return. Null (with
  // `error`) when nothing could be enqueued.
  virtual std::unique_ptr<PendingHashes> hash(uint64_t context, uint64_t stream,
                                              std::span<const kernels::HashRequest> requests, bool synchronous,
                                              std::string& error) = 0;

  // Whether a launch's output hashes may be held back and enqueued with
  // later ones (hash_deferral.h): a device whose hash() reads the bytes when
  // its work runs on the stream, as a GPU's does.
  virtual bool defersHashes() { return false; }

  // Copies `size` bytes at `address` to host memory on `stream` of `context`
  // (the current context), after all work already enqueued there, into
  // pinned staging memory. With `synchronous`, the copy is complete on
  // return. Null (with `error`) when nothing could be enqueued.
  virtual std::unique_ptr<PendingCopy> copyToHost(uint64_t context, uint64_t stream, uint64_t address, uint64_t size,
                                                  bool synchronous, std::string& error) {
    (void)context, (void)stream, (void)address, (void)size, (void)synchronous;
    error = "this device cannot copy buffers to the host";
    return nullptr;
  }

  // Runs `launch` `runs` times, each from the device state of the moment of
  // the call (saved once, restored after every run), and digests `outputs`
  // after each run: `digests[run][range]`. On return the device state is as
  // it was, so the program's own launch proceeds unchanged. False (with
  // `error`) when the state cannot be saved or restored, or a run fails.
  virtual bool rerunLaunch(uint64_t context, const Relaunch& launch, std::span<const kernels::HashRequest> outputs,
                           uint32_t runs, std::vector<std::vector<uint64_t>>& digests, std::string& error) {
    (void)context, (void)launch, (void)outputs, (void)runs, (void)digests;
    error = "this device cannot re-run launches";
    return false;
  }

  // Ordinal of the device of the current context (0 when unknown).
  virtual uint32_t currentDevice() { return 0; }

  // The context `stream` belongs to (the current one for the legacy and
  // per-thread streams); 0 when unknown.
  virtual uint64_t streamContext(uint64_t stream) {
    (void)stream;
    return 0;
  }

  // Memory is about to go away outside stream order (cuMemUnmap,
  // cuMemAddressFree, cuMemHostUnregister, cuIpcCloseMemHandle): waits
  // until every hash kernel enqueued so far has run, so that none reads it
  // afterwards (a bounded wait; false with `why` when one did not run).
  virtual bool awaitHashesInFlight(std::string& why) {
    (void)why;
    return true;
  }

  // Whether `stream` (not the legacy one) synchronizes with the legacy
  // stream: made without CU_STREAM_NON_BLOCKING. True when unknown.
  virtual bool blockingStream(uint64_t stream) {
    (void)stream;
    return true;
  }

  // The start and size of the allocation containing `address`
  // (cuMemGetAddressRange), for memory whose size the call that made it does
  // not give (IPC handles, imported pool allocations). False when unknown.
  virtual bool addressRange(uint64_t address, uint64_t& base, uint64_t& size) {
    (void)address, (void)base, (void)size;
    return false;
  }

  // GPUs, driver and library versions for the trace header.
  virtual void describeSystem(trace::Header& header) = 0;

  // The memory this device layer has held for the recorder, at most so far:
  // pinned host memory (hash rings, snapshot staging) and device memory.
  struct MemoryUse {
    uint64_t pinnedHostBytes = 0;
    uint64_t deviceBytes = 0;
  };
  virtual MemoryUse memoryUse() { return {}; }

  // `context` is about to be destroyed: release what the hasher holds in it.
  // Every pending hash of that context has been waited for.
  virtual void contextDestroying(uint64_t context) = 0;

 private:
  CaptureTracker captures_;
};

}  // namespace gpurr::recorder
