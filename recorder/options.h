// The recorder's options (environment variables set by `gpurr record`), the
// choice of launches to hash, the determinism-relevant part of the
// environment, and the claiming of a per-process trace directory. Pure logic.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "common/job_rank.h"
#include "trace_format/events.h"

namespace gpurr::recorder {

// A --snapshot selection: launch numbers and ranges, and kernel name patterns.
struct LaunchSelection {
  std::vector<std::pair<uint64_t, uint64_t>> launches;  // [first, end)
  std::vector<std::regex> kernels;
  std::string text;  // as given
  bool empty() const { return launches.empty() && kernels.empty(); }
};

// Training steps whose launches are hashed (the PyTorch layer's step count):
// steps begin, begin + every, ... below end.
struct StepSelection {
  uint64_t begin = 0;
  uint64_t end = UINT64_MAX;
  uint64_t every = 1;
};

struct RecorderOptions {
  std::optional<std::filesystem::path> output;  // GPURR_OUTPUT; none = record nothing
  uint64_t launchBegin = 0;                     // GPURR_LAUNCHES=A:B, A included
  uint64_t launchEnd = UINT64_MAX;              // B excluded
  std::string launchesText;                     // as given
  std::optional<std::regex> kernels;            // GPURR_KERNELS
  std::string kernelsText;
  bool sync = false;                            // GPURR_SYNC=1
  bool hashInputs = false;                      // GPURR_HASH_INPUTS=1
  bool captureHostData = false;                 // GPURR_CAPTURE_HOST_DATA=1 (or GPURR_FULL=1)
  bool full = false;                            // GPURR_FULL=1
  LaunchSelection snapshot;                     // GPURR_SNAPSHOT
  uint64_t snapshotMemoryBytes = uint64_t{2048} << 20;  // GPURR_SNAPSHOT_MEMORY_MB
  uint64_t traceQueueBytes = uint64_t{64} << 20;  // GPURR_TRACE_QUEUE_MB: events waiting for the trace thread
  uint32_t flushIntervalMs = 1000;                // GPURR_FLUSH_MS: a block is closed at least this often
  bool deferHashes = true;                        // GPURR_DEFER_HASHES=0: each launch's outputs hashed at once
  uint32_t slowWriterUs = 0;                    // GPURR_TEST_SLOW_WRITER_US (tests: a trace thread that falls behind)
  uint32_t checkDeterminism = 0;                // GPURR_CHECK_DETERMINISM=N re-runs (0 = off)
  std::optional<StepSelection> steps;           // GPURR_STEPS=A:B[:N]
  std::string stepsText;                        // as given
  std::string toolVersion;                      // GPURR_TOOL_VERSION
  job::RankName rankName;                       // RANK, SLURM_PROCID or LOCAL_RANK with the node (common/job_rank.h)
  std::optional<int32_t> rank;                  // the job-wide rank: RANK or SLURM_PROCID
  bool timeParts = false;                       // GPURR_VERBOSE=1: time the parts of the launch callbacks
};

using GetEnv = std::function<const char*(const char*)>;

// Reads the options; each malformed value adds a message to `problems` (for a
// "gpurr: warning: " line) and is ignored.
RecorderOptions parseOptions(const GetEnv& getenv, std::vector<std::string>& problems);

// The options of a process that `gpurr record --start-gate FILE` holds at
// its start (GPURR_START_GATE=FILE): waits until FILE exists (gpurr bisect
// creates it once the run before has ended), then parseOptions. A line
// "snapshot SELECTION" in FILE stands for GPURR_SNAPSHOT; a line "cancel"
// ends the process at once (status 143, as SIGTERM would), as does its
// parent's end or that of `gpurr record` (GPURR_START_GATE_PARENT, its
// pid): a signal cannot end a program held here once it handles SIGTERM
// itself (Python runs its handler only when the thread held here
// returns). Without the variable, parseOptions at once.
RecorderOptions awaitOptions(const GetEnv& getenv, std::vector<std::string>& problems);

// Parses "A:B", "A:" or ":B" (decimal). Nothing when malformed or A > B.
std::optional<std::pair<uint64_t, uint64_t>> parseLaunchRange(std::string_view text);
// Parses a step selection as a Python slice of step numbers: "A:B", "A:B:N"
// (either end may be left out; N >= 1): "10:12", "::100". Nothing when
// malformed, A > B or N = 0.
std::optional<StepSelection> parseStepSelection(std::string_view text);

// Parses a --snapshot / GPURR_SNAPSHOT value: comma-separated items; an item
// of digits with at most one ':' is a launch number K or a range A:B, A:, :B
// (B excluded), anything else an ECMAScript regex on the kernel name.
// Nothing, with what is wrong in `error`, for an empty item, an empty range
// or a bad regex.
std::optional<LaunchSelection> parseLaunchSelection(std::string_view text, std::string& error);

// Whether launch `index` of kernel `mangledName` is selected.
bool launchSelected(const LaunchSelection& selection, uint64_t index, std::string_view mangledName);
// Whether any pattern of the selection matches the kernel name; launch
// numbers aside (cached per function by the session).
bool kernelNameSelected(const LaunchSelection& selection, std::string_view mangledName);
bool launchNumberSelected(const LaunchSelection& selection, uint64_t index);

// The default number of re-runs of --check-determinism.
constexpr uint32_t kDefaultDeterminismRuns = 10;
constexpr uint32_t kMaxDeterminismRuns = 1000;

// Whether launch `index` falls in the GPURR_LAUNCHES range.
bool launchInRange(const RecorderOptions& options, uint64_t index);
// Whether a launch in training step `step` (-1: unknown) is hashed under
// GPURR_STEPS; always without it.
bool stepSelected(const RecorderOptions& options, int64_t step);
// Whether a hashed launch hashes all its ranges before it runs: with
// GPURR_HASH_INPUTS, or when a selection (launches, kernels, steps) leaves
// launches unhashed, whose writes no digest then vouches for. Otherwise only
// the ranges holding bytes no recorded operation has touched (WriteHistory).
bool hashesAllInputs(const RecorderOptions& options);
// Whether a kernel name (mangled, or its demangled form) matches GPURR_KERNELS.
bool kernelSelected(const RecorderOptions& options, std::string_view mangledName);

// Whether an environment variable can change a run's numerics or kernel
// choice (CUBLAS_WORKSPACE_CONFIG, NCCL_*, TORCH_*...).
bool isDeterminismRelevant(std::string_view key);
// The relevant entries of `environ`-style "KEY=VALUE" strings, sorted by key.
std::vector<trace::KeyValue> determinismEnvironment(char* const* environ);

// Creates this process's trace directory under `output`: `name` when the
// environment names the process's rank ("rank3.gpurr"), else the first free
// "proc<N>.gpurr", claimed with mkdir so that concurrent processes never
// share one; a restarted job's rank first moves its earlier attempt's trace
// out of the way (job::keepEarlierAttempt). Returns nothing with a reason in
// `error` on failure.
std::optional<std::filesystem::path> claimTraceDirectory(const std::filesystem::path& output,
                                                         const job::RankName& name, std::string& error);

// The options as recorded in the trace header.
trace::RecordingOptions toRecordingOptions(const RecorderOptions& options);

}  // namespace gpurr::recorder
