// What N re-executions of a launch say: deterministic and equal to the
// recording, deterministic but different from it, or nondeterministic. Pure
// logic over digests (no GPU), so it is tested on the CPU.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "replayer/plan.h"
#include "trace_format/events.h"

namespace gpurr::replay {

// The GPU and driver a replay ran on.
struct MachineInfo {
  uint32_t ordinal = 0;
  std::string name;
  std::string uuid;
  uint32_t ccMajor = 0, ccMinor = 0;
  uint32_t smCount = 0;
  uint64_t memoryBytes = 0;
  std::string pciBusId;
  uint32_t driverVersion = 0;  // as cuDriverGetVersion
};

enum class VerdictKind : uint8_t {
  kEqual,             // every run gave the recorded outputs
  kDifferent,         // every run gave the same outputs, not the recorded ones
  kNondeterministic,  // the runs disagree with each other
  kUnrecorded,        // the runs agree; the trace holds no outputs to compare with
};
const char* toString(VerdictKind kind);  // "deterministic, equal to the recording"...
const char* jsonName(VerdictKind kind);  // "equal", "different", "nondeterministic", "unrecorded"

// gpurr replay's exit code: 0 for kEqual and kUnrecorded, 1 otherwise.
int exitCode(VerdictKind kind);

struct Verdict {
  VerdictKind kind = VerdictKind::kEqual;
  uint32_t runs = 0;
  uint32_t distinct = 0;                  // distinct results among the runs
  std::vector<uint32_t> resultOfRun;      // run -> result number (0 = the first run's)
  std::vector<uint32_t> runsPerResult;    // result number -> how many runs gave it
  uint32_t runsMatchingRecording = 0;     // runs equal to the recording on every recorded output
  std::vector<size_t> varyingOutputs;     // outputs whose digest differs between runs
  std::vector<size_t> differingOutputs;   // recorded outputs the first run got differently
};

// Judges `runs` (per run, one digest per output in `outputs` order).
// Precondition: at least one run, each with outputs.size() digests.
Verdict judge(std::span<const OutputCheck> outputs, std::span<const std::vector<uint64_t>> runs);

// The header fields that differ between the recording's GPU and driver and
// this machine's, one line each ("GPU: NVIDIA H100 80GB HBM3 (sm_90) -> NVIDIA
// H200 (sm_90)", "driver: 13.0 -> 13.1"). Empty when they agree.
std::vector<std::string> environmentDifferences(const trace::Header& header,
                                                const std::optional<trace::GpuInfo>& recorded,
                                                const MachineInfo& here);

// "13.0" from 13000.
std::string driverVersionText(uint32_t version);

}  // namespace gpurr::replay
