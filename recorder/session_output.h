// SessionOutput: what a recording session writes. The trace is started on
// the first recorded call (its header described, its sink opened); every
// event is stamped (time, thread, framework origin) and handed to the sink;
// each warning is given once. It also holds the host memory bound of the
// snapshots waiting for the trace thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "recorder/device.h"
#include "recorder/options.h"
#include "recorder/snapshot.h"
#include "recorder/trace_sink.h"
#include "recorder/warn.h"

namespace gpurr::recorder {

class SessionOutput {
 public:
  // `openSink` is called once, on the first recorded call (never inside
  // cuInit, so the driver can be asked about its GPUs), with the header
  // filled in; it returns the sink to write to, or null after warning
  // (nothing is recorded then).
  using OpenSink = std::function<std::unique_ptr<TraceSink>(const trace::Header& header)>;

  SessionOutput(const RecorderOptions& options, Device& device, OpenSink openSink, WarnFn warn);

  // Starts the trace now if it has not started (normally on the first event).
  void ensureStarted() {
    if (startedFast_.load(std::memory_order_acquire)) return;
    start();
  }
  // Whether events are recorded: the trace started and its sink opened
  // (set once, then read-only).
  bool recording() const { return sink_ != nullptr; }
  // Writes everything pending and closes the trace.
  void close();
  // Writes everything pending to the trace, which stays open.
  void flush();

  // The event of a call on this thread: its time, thread and origin.
  trace::Event newEvent(trace::Payload payload);
  // As newEvent, for an event whose payload is already in place (a launch
  // built in its entry, which then moves no more: the ring takes its box).
  // An origin it holds already is overwritten in place (its storage kept).
  // `key`: the operation's framework::operationKey when the caller has it
  // (a launch's, kept with its function); else worked out here. `at`: the
  // time of the call, when the caller read the clock at its start already.
  // `keptOrigin`: as framework::currentOrigin's `kept` (a launch's entry).
  void stamp(trace::Event& ev, uint64_t key = 0) { stamp(ev, key, std::chrono::steady_clock::now()); }
  void stamp(trace::Event& ev, uint64_t key, std::chrono::steady_clock::time_point at,
             const trace::Origin** keptOrigin = nullptr);
  void emit(SinkEntry&& entry) {
    if (sink_) sink_->push(std::move(entry));
  }
  void emit(EntryBox entry) {
    if (sink_) sink_->push(std::move(entry));
  }
  void emitEvent(trace::Payload payload);

  void warnOnce(const std::string& key, const std::string& message);
  // --full: one warning per kind of call whose effect a whole-stream replay
  // cannot reproduce from the trace.
  void warnNotReplayable(const std::string& what, const std::string& missing);

  // The PyTorch version loaded at the start, from the header (set once).
  const std::optional<std::string>& torchVersion() const { return torchVersion_; }
  // Host memory taken by snapshots; declared before the sink, which holds
  // its leases until it is gone.
  SnapshotBudget& snapshotBudget() { return snapshotBudget_; }
  const SnapshotBudget& snapshotBudget() const { return snapshotBudget_; }

 private:
  void start();

  const RecorderOptions& options_;
  Device& device_;
  OpenSink openSink_;
  WarnFn warn_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  SnapshotBudget snapshotBudget_;

  std::mutex startMu_;
  bool started_ = false;
  std::atomic<bool> startedFast_{false};  // started_, readable without the lock
  std::unique_ptr<TraceSink> sink_;  // set once under startMu_, then read-only
  std::optional<std::string> torchVersion_;  // PyTorch loaded at the start; likewise
  std::atomic<uint32_t> nextThread_{0};

  std::mutex warnMu_;
  std::map<std::string, bool> warned_;  // under warnMu_
};

}  // namespace gpurr::recorder
