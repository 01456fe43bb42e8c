// WriteHistory (write_history.h): the touched intervals of device memory, kept disjoint, by stream.
#include "recorder/write_history.h"

#include <algorithm>

namespace gpurr::recorder {

size_t WriteHistory::firstEndingAfter(uint64_t at) const {
  // The first interval that starts after `at`, or the one before it when
  // that one reaches past `at`.
  auto it = std::upper_bound(touched_.begin(), touched_.end(), at,
                             [](uint64_t a, const Touched& t) { return a < t.begin; });
  if (it != touched_.begin() && std::prev(it)->end > at) --it;
  return static_cast<size_t>(it - touched_.begin());
}

void WriteHistory::replace(size_t lo, size_t hi, std::span<const Touched> with) {
  // In place where the counts allow: the common touch replaces one interval
  // by one, and nothing moves.
  const size_t common = std::min(hi - lo, with.size());
  std::copy_n(with.begin(), common, touched_.begin() + static_cast<std::ptrdiff_t>(lo));
  const auto at = touched_.begin() + static_cast<std::ptrdiff_t>(lo + common);
  if (hi - lo > common) {
    touched_.erase(at, touched_.begin() + static_cast<std::ptrdiff_t>(hi));
  } else {
    touched_.insert(at, with.begin() + static_cast<std::ptrdiff_t>(common), with.end());
  }
}

bool WriteHistory::touchLocked(uint64_t begin, uint64_t end, uint64_t stream) {
  if (begin >= end) return false;
  size_t lo = firstEndingAfter(begin), hi = lo;
  // Touched whole on this stream already (a launch's inputs, written by the
  // launches before it): nothing changes.
  if (lo < touched_.size() && touched_[lo].begin <= begin && touched_[lo].end >= end && touched_[lo].stream == stream)
    return false;
  bool fresh = false;
  uint64_t at = begin;
  for (; hi < touched_.size() && touched_[hi].begin < end; ++hi) {
    const Touched& t = touched_[hi];
    if (t.begin > at || t.stream != stream) fresh = true;  // a gap, or another stream's bytes
    at = std::max(at, t.end);
  }
  if (at < end) fresh = true;
  // What remains of the overlapped intervals outside [begin, end), and the
  // new one, joined with neighbours of the same stream that it abuts.
  Touched pieces[3];
  size_t n = 0;
  Touched mid{begin, end, stream};
  if (lo < hi && touched_[lo].begin < begin) {
    if (touched_[lo].stream == stream) {
      mid.begin = touched_[lo].begin;
    } else {
      pieces[n++] = {touched_[lo].begin, begin, touched_[lo].stream};
    }
  } else if (lo > 0 && touched_[lo - 1].end == begin && touched_[lo - 1].stream == stream) {
    mid.begin = touched_[--lo].begin;
  }
  pieces[n++] = mid;
  if (lo < hi && touched_[hi - 1].end > end) {
    if (touched_[hi - 1].stream == stream) {
      pieces[n - 1].end = touched_[hi - 1].end;
    } else {
      pieces[n++] = {end, touched_[hi - 1].end, touched_[hi - 1].stream};
    }
  } else if (hi < touched_.size() && touched_[hi].begin == end && touched_[hi].stream == stream) {
    pieces[n - 1].end = touched_[hi++].end;
  }
  replace(lo, hi, {pieces, n});
  return fresh;
}

void WriteHistory::forget(uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  std::lock_guard lock(mu_);
  size_t lo = firstEndingAfter(begin), hi = lo;
  while (hi < touched_.size() && touched_[hi].begin < end) ++hi;
  if (lo == hi) return;
  Touched pieces[2];
  size_t n = 0;
  if (touched_[lo].begin < begin) pieces[n++] = {touched_[lo].begin, begin, touched_[lo].stream};
  if (touched_[hi - 1].end > end) pieces[n++] = {end, touched_[hi - 1].end, touched_[hi - 1].stream};
  replace(lo, hi, {pieces, n});
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
