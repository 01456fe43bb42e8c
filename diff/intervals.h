// Labelled byte intervals per allocation: which bytes were written (the
// uninitialised-memory check), which hold data derived from a divergence
// (taint), which operation last wrote or read them (the canonical order).
// Ranges are in allocation-ordinal space.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>

namespace gpurr::diff {

class IntervalLabels {
 public:
  using Label = int64_t;

  // Labels [begin, end) of `allocation` with `label`, replacing what was
  // there; a negative label clears the bytes.
  void assign(uint32_t allocation, uint64_t begin, uint64_t end, Label label) {
    if (begin >= end) return;
    // Clearing bytes of an allocation never labelled adds nothing (a
    // thread's readers cleared at every write of any other thread).
    if (label < 0 && !map_.contains(allocation)) return;
    auto& m = map_[allocation];
    auto it = m.lower_bound(begin);
    // The common case: a buffer written again whole (spans never overlap,
    // so this one is all there is of [begin, end)).
    if (it != m.end() && it->first == begin && it->second.end == end) {
      if (label >= 0) {
        it->second.label = label;
      } else {
        m.erase(it);
      }
      return;
    }
    if (it != m.begin()) {
      auto prev = std::prev(it);
      if (prev->second.end > begin) {
        const Span tail = prev->second;
        prev->second.end = begin;
        if (tail.end > end) m.emplace(end, Span{tail.end, tail.label});
      }
    }
    it = m.lower_bound(begin);
    while (it != m.end() && it->first < end) {
      if (it->second.end > end) {
        const Span tail = it->second;
        m.erase(it);
        m.emplace(end, tail);
        break;
      }
      it = m.erase(it);
    }
    if (label >= 0) m.emplace(begin, Span{end, label});
  }

  // Calls f(label) for each labelled span that holds bytes of [begin, end).
  template <typename F>
  void forEach(uint32_t allocation, uint64_t begin, uint64_t end, F&& f) const {
    forEachSpan(allocation, begin, end, [&](uint64_t, uint64_t, Label label) { f(label); });
  }

  // Calls f(spanBegin, spanEnd, label) for each labelled span that holds
  // bytes of [begin, end), in order of its bytes.
  template <typename F>
  void forEachSpan(uint32_t allocation, uint64_t begin, uint64_t end, F&& f) const {
    auto found = map_.find(allocation);
    if (found == map_.end() || begin >= end) return;
    const auto& m = found->second;
    auto it = m.upper_bound(begin);
    if (it != m.begin()) --it;
    for (; it != m.end() && it->first < end; ++it) {
      if (it->second.end > begin) f(it->first, it->second.end, it->second.label);
    }
  }

  // Smallest label among the bytes of [begin, end), if any is labelled.
  std::optional<Label> minLabel(uint32_t allocation, uint64_t begin, uint64_t end) const {
    std::optional<Label> out;
    forEach(allocation, begin, end, [&](Label label) {
      if (!out || label < *out) out = label;
    });
    return out;
  }

  // Bytes of [begin, end) that carry a label.
  uint64_t covered(uint32_t allocation, uint64_t begin, uint64_t end) const {
    auto found = map_.find(allocation);
    if (found == map_.end() || begin >= end) return 0;
    const auto& m = found->second;
    uint64_t bytes = 0;
    auto it = m.upper_bound(begin);
    if (it != m.begin()) --it;
    for (; it != m.end() && it->first < end; ++it) {
      const uint64_t b = std::max(begin, it->first), e = std::min(end, it->second.end);
      if (e > b) bytes += e - b;
    }
    return bytes;
  }

  bool empty() const {
    for (const auto& [a, m] : map_) {
      if (!m.empty()) return false;
    }
    return true;
  }

 private:
  struct Span {
    uint64_t end;
    Label label;
  };
  std::unordered_map<uint32_t, std::map<uint64_t, Span>> map_;
};

}  // namespace gpurr::diff
