// The job's order of events across ranks (see job_order.h).
#include "report/job_order.h"

#include <algorithm>
#include <deque>

namespace gpurr::report {

CollectiveOrder::CollectiveOrder(std::vector<std::vector<uint32_t>> lists, uint32_t collectives)
    : lists_(std::move(lists)), members_(collectives), clock_(collectives, UINT64_MAX) {
  for (size_t p = 0; p < lists_.size(); ++p) {
    for (uint64_t i = 0; i < lists_[p].size(); ++i) members_[lists_[p][i]].push_back({static_cast<uint32_t>(p), i});
  }
  // Kahn's order: a collective is ready when each of its processes has
  // reached it, every collective before it on each of them done.
  std::vector<uint32_t> arrived(collectives, 0);
  std::deque<uint32_t> ready;
  auto arrive = [&](size_t p, uint64_t i) {
    if (i >= lists_[p].size()) return;
    const uint32_t id = lists_[p][i];
    if (++arrived[id] == members_[id].size()) ready.push_back(id);
  };
  for (size_t p = 0; p < lists_.size(); ++p) arrive(p, 0);
  while (!ready.empty()) {
    const uint32_t id = ready.front();
    ready.pop_front();
    uint64_t before = 0;
    for (const auto& [p, i] : members_[id]) {
      if (i > 0) before = std::max(before, clock_[lists_[p][i - 1]]);
    }
    clock_[id] = before + 1;
    for (const auto& [p, i] : members_[id]) arrive(p, i + 1);
  }
}

std::vector<uint64_t> CollectiveOrder::after(size_t p, uint64_t k) const {
  std::vector<uint64_t> first(lists_.size());
  for (size_t q = 0; q < lists_.size(); ++q) first[q] = lists_[q].size();
  std::vector<bool> seen(members_.size(), false);
  // Each process's collectives from where it was reached to where it had
  // been reached before: each is scanned once.
  std::vector<std::pair<size_t, uint64_t>> work;  // (process, scan up to)
  auto reach = [&](size_t q, uint64_t i) {
    if (i >= first[q]) return;
    work.push_back({q, first[q]});
    first[q] = i;
  };
  reach(p, k);
  while (!work.empty()) {
    const auto [q, end] = work.back();
    work.pop_back();
    for (uint64_t i = first[q]; i < end; ++i) {
      const uint32_t id = lists_[q][i];
      if (seen[id]) continue;
      seen[id] = true;
      for (const auto& [r, j] : members_[id]) reach(r, j);
    }
  }
  return first;
}

}  // namespace gpurr::report
