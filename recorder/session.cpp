// The recording session (see session.h): its recorders wired together, and
// its end.
#include "recorder/session.h"

#include <utility>

#include "recorder/reentrancy.h"

namespace gpurr::recorder {

RecordSession::RecordSession(RecorderOptions options, std::unique_ptr<Device> device, OpenSink openSink,
                             WarnFn warn)
    : options_(std::move(options)), device_(std::move(device)),
      out_(options_, *device_, std::move(openSink), std::move(warn)) {}

RecordSession::~RecordSession() { finish(); }

void RecordSession::flush() {
  if (abandoned_.load()) return;
  if (finished_.load()) {
    std::lock_guard lock(finishMu_);  // a finish() under way: the trace is closed once it ends
    return;
  }
  // The deferred hashes' launches are the recorder's own: not recorded
  // (finish() has its callbacks ignored by then).
  ReentrancyGuard guard;
  collectives_.emitPending();  // a collective the program waits in (a rank that issued another)
  hashing_.flushAll();
  out_.flush();
}

void RecordSession::finish() {
  // A forked child's (finishMu_ may be held forever there), or a call from
  // inside the close itself.
  if (abandoned_.load() || closing_.load() == std::this_thread::get_id()) return;
  std::lock_guard lock(finishMu_);  // one under way on another thread: returns once the trace is closed
  if (finished_.exchange(true)) return;
  closing_.store(std::this_thread::get_id());
  if (activeCollectives() == &collectives_) setActiveCollectives(nullptr);
  collectives_.emitPending();  // none kept after the line above
  hashing_.closeDeferral();  // the trace thread waits for every deferred hash
  out_.close();
  closing_.store(std::thread::id());
}

}  // namespace gpurr::recorder
