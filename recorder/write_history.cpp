// WriteHistory (write_history.h): the touched intervals of device memory, kept disjoint, by stream.
#include "recorder/write_history.h"

#include <iterator>

namespace gpurr::recorder {

bool WriteHistory::touch(uint64_t begin, uint64_t end, uint64_t stream) {
  if (begin >= end) return false;
  std::lock_guard lock(mu_);
  // The first interval that ends after `begin` (so may overlap).
  auto it = touched_.upper_bound(begin);
  if (it != touched_.begin() && std::prev(it)->second.end > begin) --it;
  bool fresh = false;
  uint64_t at = begin;
  for (; it != touched_.end() && it->first < end; ++it) {
    if (it->first > at || it->second.stream != stream) fresh = true;  // a gap, or another stream's bytes
    at = std::max(at, it->second.end);
  }
  if (at < end) fresh = true;
  cut(begin, end);
  // Joined with neighbours of the same stream that it abuts.
  uint64_t newBegin = begin, newEnd = end;
  auto next = touched_.lower_bound(end);
  if (next != touched_.end() && next->first == end && next->second.stream == stream) {
    newEnd = next->second.end;
    next = touched_.erase(next);
  }
  if (next != touched_.begin()) {
    auto prev = std::prev(next);
    if (prev->second.end == begin && prev->second.stream == stream) {
      newBegin = prev->first;
      touched_.erase(prev);
    }
  }
  touched_.emplace(newBegin, Touched{newEnd, stream});
  return fresh;
}

void WriteHistory::cut(uint64_t begin, uint64_t end) {
  auto it = touched_.upper_bound(begin);
  if (it != touched_.begin() && std::prev(it)->second.end > begin) --it;
  while (it != touched_.end() && it->first < end) {
    const uint64_t b = it->first;
    const Touched t = it->second;
    it = touched_.erase(it);
    if (b < begin) touched_.emplace(b, Touched{begin, t.stream});
    if (t.end > end) it = touched_.emplace(end, Touched{t.end, t.stream}).first;
  }
}

void WriteHistory::forget(uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  std::lock_guard lock(mu_);
  cut(begin, end);
}

void WriteHistory::clear() {
  std::lock_guard lock(mu_);
  touched_.clear();
}

size_t WriteHistory::intervals() const {
  std::lock_guard lock(mu_);
  return touched_.size();
}

WriteHistory& writeHistory() {
  static WriteHistory* history = new WriteHistory;  // never destroyed: used until the process ends
  return *history;
}

}  // namespace gpurr::recorder
