// What recording cost the program, from the launches' own measurements (see
// recorder_cost.h).
#include "cli/recorder_cost.h"

#include <fmt/format.h>

#include <algorithm>

#include "report/text.h"

namespace gpurr::cli {
using namespace gpurr::report;

void RecorderCost::add(const trace::KernelLaunch& launch) {
  if (launch.recorderNs == 0 || launch.captured) return;
  ++launches_;
  totalNs_ += launch.recorderNs;
  totalOps_ += launch.recorderOps;
  maxOps_ = std::max<uint64_t>(maxOps_, launch.recorderOps);
  if (ns_.size() < kMaxSamples) {
    ns_.push_back(launch.recorderNs);
    ops_.push_back(launch.recorderOps);
  }
}

std::optional<RecorderCost::Summary> RecorderCost::summary() const {
  if (launches_ == 0) return std::nullopt;
  auto quantile = [](auto values, double q) -> uint64_t {
    const size_t at = std::min(values.size() - 1, static_cast<size_t>(q * static_cast<double>(values.size())));
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(at), values.end());
    return values[at];
  };
  Summary s;
  s.launches = launches_;
  s.totalNs = totalNs_;
  s.medianNs = quantile(ns_, 0.5);
  s.p99Ns = quantile(ns_, 0.99);
  s.medianOps = quantile(ops_, 0.5);
  s.maxOps = maxOps_;
  s.meanOps = static_cast<double>(totalOps_) / static_cast<double>(launches_);
  return s;
}

std::string RecorderCost::line() const {
  const std::optional<Summary> s = summary();
  if (!s) return "not measured (a recorder before this gpurr, or a trace written by another tool)";
  auto us = [](uint64_t ns) { return fmt::format("{:.1f} us", static_cast<double>(ns) / 1e3); };
  return fmt::format("{} per launch in its callbacks (median; 99th percentile {}; {:.3f} s in all over {} "
                     "launches), {} GPU operation{} per launch (median; {:.2f} on average, at most {})",
                     us(s->medianNs), us(s->p99Ns), static_cast<double>(s->totalNs) / 1e9,
                     withCommas(s->launches), s->medianOps, s->medianOps == 1 ? "" : "s", s->meanOps, s->maxOps);
}

Json RecorderCost::json() const {
  const std::optional<Summary> s = summary();
  if (!s) return nullptr;
  return {{"launches", s->launches}, {"medianNs", s->medianNs}, {"p99Ns", s->p99Ns}, {"totalNs", s->totalNs},
          {"medianGpuOps", s->medianOps}, {"meanGpuOps", s->meanOps}, {"maxGpuOps", s->maxOps}};
}

}  // namespace gpurr::cli
