// RecordSession: one recording. The CUPTI-facing code (injection.cpp) only
// forwards callbacks to onCallback(); the dispatcher (dispatch.cpp) hands
// each to the recorder of its kind, and everything works on the callback
// data alone, so tests drive it with hand-made CUpti_CallbackData. The
// session owns the options, the device, its output (session_output.h) and
// one recorder per kind of call:
//   memory.h    allocations, frees, mappings (the map of live allocations)
//   modules.h   modules and functions
//   hashing.h   what is hashed before and after an operation
//   launches.h  the launch path: ENTER (prepareLaunch) to EXIT (processLaunch)
//   graphs.h    executable graphs and their launches
//   copies.h    copies, sets, synchronisations
//   collectives.h  collectives (NCCL's wrappers, the framework layer)
//
// Locking: `mu_`, the session's lock, guards the recorders' tables (each
// says which) and the launch counter. Handlers copy what they need under it
// and call the driver (through Device) and the sink unlocked, because driver
// calls raise further callbacks (ignored on this thread by the re-entrancy
// guard, but taken on other threads, which then want `mu_`).
#pragma once

#include <cupti.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "recorder/collectives.h"
#include "recorder/copies.h"
#include "recorder/device.h"
#include "recorder/graphs.h"
#include "recorder/hashing.h"
#include "recorder/launches.h"
#include "recorder/memory.h"
#include "recorder/modules.h"
#include "recorder/options.h"
#include "recorder/session_output.h"
#include "recorder/snapshot.h"
#include "recorder/warn.h"

namespace gpurr::recorder {

class RecordSession {
 public:
  // `openSink` is called once, on the first recorded call (never inside
  // cuInit, so the driver can be asked about its GPUs), with the header
  // filled in; it returns the sink to write to, or null after warning
  // (nothing is recorded then).
  using OpenSink = SessionOutput::OpenSink;

  RecordSession(RecorderOptions options, std::unique_ptr<Device> device, OpenSink openSink, WarnFn warn);
  ~RecordSession();

  // Entry point of every CUPTI callback (domain, cbid, cbdata as CUPTI gives
  // them). Ignores calls made by the recorder itself.
  void onCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata);

  // Writes everything pending and closes the trace (process exit).
  // Idempotent; where another thread's is under way, returns once it ends.
  void finish();
  // Writes everything pending, every deferred hash waited for, to the
  // trace, which stays open (a program about to die of a signal). Where
  // finish() is under way, waits for it to end instead.
  void flush();

  // With options.timeParts: one line saying how the launch callbacks' time
  // divides among their parts, per launch (empty without it or before the
  // first launch).
  std::string launchPartsText() const { return launches_.partsText(); }

  // Starts the trace now if it has not started (normally on the first event).
  void ensureStarted() { out_.ensureStarted(); }

  // In a child made by fork(): the trace thread does not exist there and the
  // trace belongs to the parent, so the child records nothing and finish()
  // does nothing. Async-signal-safe.
  void abandonInForkedChild() {
    abandoned_.store(true);
    finished_.store(true);
    if (activeCollectives() == &collectives_) setActiveCollectives(nullptr);
  }

  const RecorderOptions& options() const { return options_; }
  // The collectives' recorder (setActiveCollectives makes it the one the
  // NCCL wrappers and the framework layer reach).
  CollectiveRecorder& collectives() { return collectives_; }
  // Host memory taken by snapshots (tests, benchmarks).
  const SnapshotBudget& snapshotBudget() const { return out_.snapshotBudget(); }

 private:
  // The dispatcher (dispatch.cpp): each domain's callbacks to their recorder.
  void onDriver(CUpti_CallbackId cbid, const CUpti_CallbackData& cb);
  void onRuntime(CUpti_CallbackId cbid, const CUpti_CallbackData& cb);
  void onResource(CUpti_CallbackId cbid, const void* cbdata);
  // A callback on a thread whose thread_locals are being destroyed
  // (ThreadFlags::ended): only memory it frees is hashed first.
  void afterThreadEnded(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData& cb,
                        bool& inside);
  // EXIT of a call that begins or ends a graph capture (either domain;
  // `ok`: it succeeded): whether its stream may still be capturing.
  void captureSettled(Handler h, bool perThread, const CUpti_CallbackData& cb, bool ok);

  RecorderOptions options_;
  std::unique_ptr<Device> device_;
  SessionOutput out_;  // after the device, which outlives the sink
  std::atomic<bool> finished_{false};
  std::mutex finishMu_;  // held by finish() from before finished_ is set to its end
  std::atomic<bool> abandoned_{false};  // a forked child's (finishMu_ may be held forever there)
  std::atomic<std::thread::id> closing_{};  // the thread in finish()'s close, while it runs

  std::mutex mu_;  // the session's lock (above)
  MemoryRecorder memory_{mu_, options_, *device_, out_};
  ModuleRecorder modules_{mu_, options_, *device_, out_};
  HashRules hashing_{mu_, options_, *device_, out_, memory_};
  LaunchRecorder launches_{mu_, options_, *device_, out_, memory_, modules_, hashing_};
  GraphRecorder graphs_{mu_, *device_, out_, memory_, modules_, hashing_};
  CopyRecorder copies_{options_, *device_, out_, memory_, hashing_};
  CollectiveRecorder collectives_{*device_, out_, memory_, hashing_};
};

}  // namespace gpurr::recorder
