// CaptureTracker: whether a CUDA graph capture may be open in the process,
// from the recorder's own callbacks of every call that begins or ends one
// (runtime and driver). While none may be open, the launch path asks the
// driver nothing about captures and leaves the thread's capture mode alone;
// while one may be, it does both as before (docs/RECORDING.md, Graph capture).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gpurr::recorder {

class CaptureTracker {
 public:
  // One callback's work. A begin waits for the sections in flight on other
  // threads, so that none is still acting on a "no capture open" it read
  // once the driver begins the capture (sequentially consistent: a section
  // either reads the begin's count or is waited for).
  class Section {
   public:
    explicit Section(CaptureTracker& t) : t_(t) { t_.sections_.fetch_add(1); }
    ~Section() { t_.sections_.fetch_sub(1); }
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;

   private:
    CaptureTracker& t_;
  };

  // False only when the recorder has seen no capture begin that has not
  // ended since: no stream in the process is being captured.
  bool mayBeOpen() const { return open_.load() != 0; }

  // ENTER of a call that begins a capture of `stream` (its identity: the
  // per-thread default stream is one per host thread, streamIdentity). The
  // capture counts as open from now on; waits for the sections of other
  // threads (at most kSectionWait). Not inside a Section of this thread.
  void beginning(uint64_t stream);
  // EXIT of a call that begins or ends a capture of `stream`: `capturing`
  // false when the driver says the stream captures no more (a begin that
  // failed, an end); true when it captures or the recorder cannot tell.
  void settled(uint64_t stream, bool capturing);

  // Streams that may be capturing (tests).
  size_t openCount() const { return open_.load(); }

  static constexpr std::chrono::milliseconds kSectionWait{500};

 private:
  std::mutex mu_;
  std::vector<uint64_t> streams_;  // under mu_: streams that may be capturing, each once
  std::atomic<size_t> open_{0};    // streams_.size()
  std::atomic<int> sections_{0};  // callbacks in flight
};

}  // namespace gpurr::recorder
