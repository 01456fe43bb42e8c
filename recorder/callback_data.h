// Reading one CUPTI callback's data, for every handler: the call's
// parameters, whether it succeeded, the stream it enqueues on, and whether
// that stream is being captured into a CUDA graph.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <atomic>
#include <cstdint>

#include "recorder/device.h"

namespace gpurr::recorder {

inline uint64_t u64(const void* p) { return reinterpret_cast<uint64_t>(p); }

// Stream handle to enqueue on: in a per-thread-default-stream call, 0 means
// the calling thread's default stream.
inline uint64_t enqueueStream(uint64_t stream, bool perThread) {
  return (perThread && stream == 0) ? u64(CU_STREAM_PER_THREAD) : stream;
}

// A stream's identity across threads: the per-thread default stream is one
// per host thread.
inline uint64_t streamIdentity(uint64_t stream) {
  if (stream != u64(CU_STREAM_PER_THREAD)) return stream;
  static std::atomic<uint64_t> threads{0};
  thread_local const uint64_t thread = ++threads;
  return stream ^ thread << 32;
}

inline bool succeeded(const CUpti_CallbackData& cb) {
  return cb.functionReturnValue != nullptr && *static_cast<const CUresult*>(cb.functionReturnValue) == CUDA_SUCCESS;
}

template <typename T>
const T& params(const CUpti_CallbackData& cb) {
  return *static_cast<const T*>(cb.functionParams);
}

// Marks `op` (a launch, copy, set or graph launch) captured when `stream`
// is being captured into a CUDA graph: it does not run now (the graph's
// launch runs it), so nothing of it is hashed and it writes nothing yet.
// Returns the stream's capture state, from one driver query while a capture
// may be open (none otherwise).
template <typename Op>
Device::StreamCapture markCaptured(Device& device, Op& op, uint64_t stream) {
  const Device::StreamCapture state = device.currentCapture(stream);
  if (state.capture) {
    op.captured = true;
    op.captureId = *state.capture;
  }
  return state;
}

}  // namespace gpurr::recorder
