// CaptureTracker (capture_tracker.h): the streams that may be capturing, by
// the begin and end calls the recorder's callbacks see.
#include "recorder/capture_tracker.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace gpurr::recorder {

void CaptureTracker::beginning(uint64_t stream) {
  {
    std::lock_guard lock(mu_);
    if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) streams_.push_back(stream);
    open_.store(streams_.size());
  }
  // A section that saw no capture open may be between its check and the
  // driver calls it makes on that account: let it finish first. Sections are
  // one callback's work, microseconds long; one that waits for the GPU is
  // not waited for past kSectionWait (that GPU work may wait for this
  // thread's).
  const auto until = std::chrono::steady_clock::now() + kSectionWait;
  while (sections_.load() != 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

void CaptureTracker::settled(uint64_t stream, bool capturing) {
  std::lock_guard lock(mu_);
  const auto it = std::find(streams_.begin(), streams_.end(), stream);
  if (capturing && it == streams_.end()) streams_.push_back(stream);
  if (!capturing && it != streams_.end()) streams_.erase(it);
  open_.store(streams_.size());
}

}  // namespace gpurr::recorder
