// What recording cost the program, from the launches' own measurements
// (KernelLaunch::recorderNs, recorderOps): the time its threads spent in the
// recorder's callbacks and the GPU operations the recorder enqueued, per
// launch. `gpurr info` and `gpurr record --verbose` print it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/event_json.h"
#include "trace_format/events.h"

namespace gpurr::cli {

using report::Json;

class RecorderCost {
 public:
  void add(const trace::KernelLaunch& launch);

  struct Summary {
    uint64_t launches = 0;             // measured
    uint64_t medianNs = 0, p99Ns = 0, totalNs = 0;
    uint64_t medianOps = 0, maxOps = 0;
    double meanOps = 0;
  };
  // Nothing when no launch carries a measurement (older recorders, stand-ins).
  std::optional<Summary> summary() const;
  // "2.1 us per launch in callbacks (median; 99th percentile 8.0 us; 1.2 s
  // in all over 1,000 launches), 1 GPU operation per launch (median; 1.40 on
  // average, at most 2)"
  std::string line() const;
  Json json() const;

 private:
  static constexpr size_t kMaxSamples = 4'000'000;  // beyond: totals only
  std::vector<uint32_t> ns_;
  std::vector<uint16_t> ops_;
  uint64_t launches_ = 0, totalNs_ = 0, totalOps_ = 0, maxOps_ = 0;
};

}  // namespace gpurr::cli
