// Carrying out a replay plan on a GPU, with the CUDA driver API resolved at
// run time: reserve the recorded address ranges first, map memory, load the
// recorded image, restore the inputs, launch with the recorded parameter
// bytes, hash the outputs with the device hash kernel, and compare; N times.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "replayer/device_session.h"
#include "replayer/plan.h"
#include "replayer/verdict.h"

namespace gpurr::trace {
class TraceReader;
}
namespace gpurr::kernels {
struct DriverApi;
}

namespace gpurr::replay {

struct ReplayOptions {
  uint32_t repeat = 1;              // launches, each from freshly restored inputs
  bool forceRelocate = false;       // place every range away from its recorded address
  std::optional<ElementType> elementType;  // for element-wise comparisons; guessed when unset
  int device = -1;                  // CUDA device ordinal; -1: the first of the recorded architecture
  // Host copies of outputs kept for element-wise comparison, at most.
  uint64_t maxCompareBytes = uint64_t{1} << 30;
};

struct ReplayOutcome {
  MachineInfo machine;
  std::vector<Placement> placements;
  bool relocated = false;
  std::vector<std::string> warnings;          // the plan's, then execution's
  std::vector<std::vector<uint64_t>> runs;    // per run, one digest per plan output
  Verdict verdict;
  // The first run against the recording, over the outputs with a recorded
  // digest (elements compared where the recording holds a snapshot).
  std::optional<StateComparison> vsRecording;
  std::vector<size_t> vsRecordingOutputs;     // plan output index of each compared range
  // The first run against the first run that differs from it, element-wise
  // when both fitted in maxCompareBytes.
  std::optional<StateComparison> acrossRuns;
  uint32_t acrossRunsOther = 0;               // the run compared with the first
  std::vector<std::string> environment;       // recording vs this machine (environmentDifferences)
  // Timings, milliseconds.
  double setupMs = 0;                  // context, reservation, mapping, image load
  std::vector<double> restoreMs;       // per run: zeroing and input restoration
  std::vector<double> kernelMs;        // per run: the launch alone (CUDA events)
  std::vector<double> hashMs;          // per run: hashing the outputs
  uint64_t restoredBytes = 0;          // per run
  bool restoredFromDevice = false;     // from pristine device copies (else from host memory)
};

// Runs `plan` (made from `reader`'s trace). Throws ReplayError when there is no
// usable GPU or driver, the GPU's architecture differs from the recording's,
// or a driver call fails; the message says which and what to do.
ReplayOutcome executeReplay(const trace::TraceReader& reader, const ReplayPlan& plan, const ReplayOptions& options);

struct ReplayDriver;
// The same through driver tables the caller loaded (or filled with a fake
// driver, as the CPU tests do). cuInit is called through `api`.
ReplayOutcome executeReplay(const trace::TraceReader& reader, const ReplayPlan& plan, const ReplayOptions& options,
                            const kernels::DriverApi& api, const ReplayDriver& drv);

}  // namespace gpurr::replay
