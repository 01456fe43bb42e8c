// The weight a launch is given, among the framework's parameters (weights.h).
#include "recorder/weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace gpurr::recorder::framework {
namespace {

uint64_t wordAt(std::span<const uint8_t> params, size_t offset) {
  uint64_t word;
  std::memcpy(&word, params.data() + offset, sizeof(word));
  return word;
}

}  // namespace

void Weights::set(std::span<const uint64_t> ranges) {
  extents_.clear();
  for (size_t i = 0; i + 1 < ranges.size(); i += 2) {
    const uint64_t begin = ranges[i], end = ranges[i] + ranges[i + 1];
    if (end > begin) extents_.emplace_back(begin, end);  // (not empty, nor wrapping around)
  }
  std::sort(extents_.begin(), extents_.end());
  size_t kept = 0;
  for (const auto& r : extents_) {
    if (kept > 0 && r.first < extents_[kept - 1].second) {
      extents_[kept - 1].second = std::max(extents_[kept - 1].second, r.second);
    } else {
      extents_[kept++] = r;
    }
  }
  extents_.resize(kept);
}

const std::pair<uint64_t, uint64_t>* Weights::at(uint64_t address) const {
  auto it = std::upper_bound(extents_.begin(), extents_.end(), address,
                             [](uint64_t a, const auto& r) { return a < r.first; });
  return it != extents_.begin() && address < std::prev(it)->second ? &*std::prev(it) : nullptr;
}

std::optional<Weight> Weights::of(std::span<const uint8_t> params) const {
  for (size_t offset = 0; !extents_.empty() && offset + 8 <= params.size(); offset += 8) {
    if (const auto* p = at(wordAt(params, offset))) return Weight{static_cast<uint32_t>(offset), p->first, p->second};
  }
  return std::nullopt;
}

Weights::Fit Weights::fit(const Weight& w, std::span<const uint8_t> params) const {
  if (w.offset + 8 > params.size()) return Fit::kShort;
  const uint64_t word = wordAt(params, w.offset);
  if (word >= w.begin && word < w.end) return Fit::kSame;
  return at(word) == nullptr ? Fit::kNone : Fit::kOther;
}

std::string Weights::whyNot(const std::optional<Weight>& given, const LaunchWords& words) const {
  const std::span<const uint8_t> params = words.params;
  if (!given) {
    const std::optional<Weight> w = of(params);
    return fmt::format("matched no template: given a weight (its word at byte {} points into the parameter of {} "
                       "bytes at {:#x}) where the launch at its place in the step learned was given none",
                       w ? w->offset : 0, w ? w->end - w->begin : 0, w ? w->begin : 0);
  }
  const Weight& w = *given;
  switch (fit(w, params)) {
    case Fit::kShort:
      return fmt::format("matched no template: its parameters end before byte {}, where the launch at its place in "
                         "the step learned was given a weight",
                         w.offset);
    case Fit::kNone:
      if (words.operand(w.offset)) {
        return fmt::format("matched no template: its word at byte {} points at an operand in no parameter the "
                           "framework reported, where the launch at its place in the step learned was given one",
                           w.offset);
      }
      return fmt::format("matched no template: its word at byte {} points into no parameter the framework reported, "
                         "where the launch at its place in the step learned was given one, and no launch of this "
                         "step before it was given its place's weight (a model the layer has not seen)",
                         w.offset);
    case Fit::kSame:
    case Fit::kOther:
      break;
  }
  const auto* p = at(wordAt(params, w.offset));
  return fmt::format("matched no template: given another weight than the launch at its place in the step learned "
                     "(its word at byte {} points into the parameter of {} bytes at {:#x}, that launch's into the one "
                     "of {} bytes at {:#x})",
                     w.offset, p != nullptr ? p->second - p->first : 0, p != nullptr ? p->first : 0, w.end - w.begin,
                     w.begin);
}

}  // namespace gpurr::recorder::framework
