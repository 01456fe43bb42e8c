#include "recorder/write_history.h"

#include <iterator>

namespace gpurr::recorder {

bool WriteHistory::touch(uint64_t begin, uint64_t end) {
  if (begin >= end) return false;
  std::lock_guard lock(mu_);
  // The first interval that ends at or after `begin` (so may touch or overlap).
  auto it = touched_.upper_bound(begin);
  if (it != touched_.begin() && std::prev(it)->second >= begin) --it;
  bool fresh = false;
  uint64_t at = begin, newBegin = begin, newEnd = end;
  while (it != touched_.end() && it->first <= end) {
    if (it->first > at) fresh = true;  // a gap before this interval
    at = std::max(at, it->second);
    newBegin = std::min(newBegin, it->first);
    newEnd = std::max(newEnd, it->second);
    it = touched_.erase(it);
  }
  if (at < end) fresh = true;
  touched_.emplace(newBegin, newEnd);
  return fresh;
}

void WriteHistory::cut(uint64_t begin, uint64_t end) {
  auto it = touched_.upper_bound(begin);
  if (it != touched_.begin() && std::prev(it)->second > begin) --it;
  while (it != touched_.end() && it->first < end) {
    const uint64_t b = it->first, e = it->second;
    it = touched_.erase(it);
    if (b < begin) touched_.emplace(b, begin);
    if (e > end) it = touched_.emplace(end, e).first;
  }
}

void WriteHistory::forget(uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  std::lock_guard lock(mu_);
  cut(begin, end);
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
