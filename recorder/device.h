// What the recording logic needs from the GPU, as an interface: the CUDA
// implementation (cuda_device.cpp) talks to the driver; CPU tests substitute
// a fake that hashes host memory. Keeps RecordSession testable without a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/device_hasher.h"
#include "kernels/hash_plan.h"
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

class Device {
 public:
  virtual ~Device() = default;

  // Name, module and parameter layout of a launched function (a CUfunction,
  // or a CUkernel cast to one). False when the driver knows nothing of it.
  virtual bool describeFunction(uint64_t function, FunctionInfo& out) = 0;

  // Whether work may be enqueued on `stream` now: false while it (or, for
  // the legacy stream, any blocking stream) is being captured into a graph.
  virtual bool canEnqueue(uint64_t stream) = 0;

  // Hashes `requests` on `stream` of `context` (the current context), after
  // all work already enqueued there. With `synchronous`, the device is
  // synchronised before and the digests are ready on return. Null (with
  // `error`) when nothing could be enqueued.
  virtual std::unique_ptr<PendingHashes> hash(uint64_t context, uint64_t stream,
                                              std::span<const kernels::HashRequest> requests, bool synchronous,
                                              std::string& error) = 0;

  // Ordinal of the device of the current context (0 when unknown).
  virtual uint32_t currentDevice() { return 0; }

  // GPUs, driver and library versions for the trace header.
  virtual void describeSystem(trace::Header& header) = 0;

  // `context` is about to be destroyed: release what the hasher holds in it.
  // Every pending hash of that context has been waited for.
  virtual void contextDestroying(uint64_t context) = 0;
};

}  // namespace gpurr::recorder
