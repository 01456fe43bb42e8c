// LaunchRecorder: the launch path. A kernel launch is recorded through one
// seam, a pair the dispatcher (dispatch.cpp) calls: prepareLaunch on the
// launch call's ENTER callback describes the launch (function, parameters,
// RNG state, library call), scans its pointers, hashes its inputs (and
// copies or re-runs it when selected) and leaves a PendingLaunch in the
// callback's correlation data; processLaunch on its EXIT hashes its outputs
// and hands the event to the trace thread. Driver and runtime callbacks
// each have their pair; a driver callback nested in a runtime one is the
// same launch, recorded once (README.md, Launches).
#pragma once

#include <cupti.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "recorder/callback_table.h"
#include "recorder/device.h"
#include "recorder/hashing.h"
#include "recorder/launch_call.h"
#include "recorder/memory.h"
#include "recorder/modules.h"
#include "recorder/options.h"
#include "recorder/recycling.h"
#include "recorder/session_output.h"
#include "recorder/trace_sink.h"

namespace gpurr::recorder {

// State carried from a launch's ENTER callback to its EXIT (through
// CUpti_CallbackData::correlationData); a graph launch's too
// (GraphRecorder::prepareLaunch).
struct PendingLaunch : Pooled<PendingLaunch> {  // one per launch: its memory is reused
  EntryBox entry;  // built here, handed to the ring whole (takeLaunchEntry)
  uint64_t context = 0;
  uint64_t stream = 0;  // to enqueue on
  bool hashOutputs = false;
  bool snapshot = false;  // copy the outputs' bytes at EXIT too
  bool hashNow = false;   // its outputs' hashes are not held back (hash_deferral.h)
  // The recorder's cost so far: time in its callbacks, and the thread's
  // count of enqueued operations when the launch's ENTER began.
  std::chrono::nanoseconds spent{0};
  uint64_t opsBefore = 0;
};

class LaunchRecorder {
 public:
  // `mu`: the session's lock (session.h), which guards the launch counter
  // and is taken with the allocation map's scan.
  LaunchRecorder(std::mutex& mu, const RecorderOptions& options, Device& device, SessionOutput& out,
                 MemoryRecorder& memory, ModuleRecorder& modules, HashRules& hashing);

  // ENTER of a driver launch call (cuLaunchKernel, cuLaunchKernelEx,
  // cuLaunchCooperativeKernel), the trace started.
  void prepareLaunch(const HandlerEntry& e, const CUpti_CallbackData& cb);
  // EXIT of a driver launch call or graph launch: finishes the pending
  // launch when the call succeeded.
  void processLaunch(const CUpti_CallbackData& cb);
  // ENTER and EXIT of a runtime launch call (cudaLaunchKernel and its
  // family): recorded here when the function resolves, else left to a
  // nested driver callback, else listed bare at EXIT.
  void prepareLaunch(const RuntimeEntry& e, const CUpti_CallbackData& cb);
  void processLaunch(const RuntimeEntry& e, const CUpti_CallbackData& cb);

  // With options.timeParts: one line saying how the launch callbacks' time
  // divides among their parts, per launch (RecordSession::launchPartsText).
  std::string partsText() const;

 private:
  // The runtime call's launch, its host function resolved.
  LaunchCall runtimeCall(const RuntimeEntry& e, const CUpti_CallbackData& cb);
  // Records the launch up to the kernel (parameters, input digests); the
  // rest is done by finishLaunch once the launch call has returned. What
  // `call` set in its launch moves into the launch's entry.
  std::unique_ptr<PendingLaunch> startLaunch(LaunchCall& call, const CUpti_CallbackData& cb);
  // `began`: when the ENTER callback began (the event's time).
  std::unique_ptr<PendingLaunch> describeLaunch(LaunchCall& call, const CUpti_CallbackData& cb,
                                                std::chrono::steady_clock::time_point began);
  void finishLaunch(std::unique_ptr<PendingLaunch> pending);
  // A launch's EXIT: finished when its call succeeded; otherwise nothing ran
  // and nothing is recorded, and the first uses it hashed are first uses
  // still.
  void settleLaunch(std::unique_ptr<PendingLaunch> pending, bool succeeded);

  std::mutex& mu_;
  const RecorderOptions& options_;
  Device& device_;
  SessionOutput& out_;
  MemoryRecorder& memory_;
  ModuleRecorder& modules_;
  HashRules& hashing_;
  uint64_t nextLaunch_ = 0;  // under mu_
  // With options.timeParts: nanoseconds per part of the launch callbacks
  // (LaunchPart, launches.cpp), summed over the launches counted.
  static constexpr size_t kLaunchParts = 5;
  std::array<std::atomic<uint64_t>, kLaunchParts> partNs_{};
  std::atomic<uint64_t> timedLaunches_{0};
};

}  // namespace gpurr::recorder
