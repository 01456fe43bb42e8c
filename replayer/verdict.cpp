// Verdicts over replay runs (see verdict.h).
#include "replayer/verdict.h"

#include <fmt/format.h>

#include <map>

namespace gpurr::replay {

const char* toString(VerdictKind kind) {
  switch (kind) {
    case VerdictKind::kEqual: return "deterministic, equal to the recording";
    case VerdictKind::kDifferent: return "deterministic, different from the recording";
    case VerdictKind::kNondeterministic: return "nondeterministic";
    case VerdictKind::kUnrecorded: return "deterministic (no recorded outputs to compare with)";
  }
  return "?";
}

const char* jsonName(VerdictKind kind) {
  switch (kind) {
    case VerdictKind::kEqual: return "equal";
    case VerdictKind::kDifferent: return "different";
    case VerdictKind::kNondeterministic: return "nondeterministic";
    case VerdictKind::kUnrecorded: return "unrecorded";
  }
  return "?";
}

int exitCode(VerdictKind kind) {
  return kind == VerdictKind::kEqual || kind == VerdictKind::kUnrecorded ? 0 : 1;
}

Verdict judge(std::span<const OutputCheck> outputs, std::span<const std::vector<uint64_t>> runs) {
  Verdict v;
  v.runs = static_cast<uint32_t>(runs.size());
  std::map<std::vector<uint64_t>, uint32_t> results;
  for (const std::vector<uint64_t>& digests : runs) {
    const auto [it, inserted] = results.try_emplace(digests, static_cast<uint32_t>(results.size()));
    if (inserted) v.runsPerResult.push_back(0);
    ++v.runsPerResult[it->second];
    v.resultOfRun.push_back(it->second);
    bool matches = true;
    for (size_t i = 0; i < outputs.size() && i < digests.size(); ++i) {
      if (outputs[i].recorded && outputs[i].digest != digests[i]) matches = false;
    }
    v.runsMatchingRecording += matches;
  }
  v.distinct = static_cast<uint32_t>(results.size());
  bool anyRecorded = false;
  for (size_t i = 0; i < outputs.size(); ++i) {
    anyRecorded |= outputs[i].recorded;
    bool varies = false;
    for (const std::vector<uint64_t>& digests : runs) {
      if (i < digests.size() && i < runs[0].size() && digests[i] != runs[0][i]) varies = true;
    }
    if (varies) v.varyingOutputs.push_back(i);
    if (outputs[i].recorded && !runs.empty() && i < runs[0].size() && runs[0][i] != outputs[i].digest) {
      v.differingOutputs.push_back(i);
    }
  }
  if (v.distinct > 1) {
    v.kind = VerdictKind::kNondeterministic;
  } else if (!anyRecorded) {
    v.kind = VerdictKind::kUnrecorded;
  } else {
    v.kind = v.differingOutputs.empty() ? VerdictKind::kEqual : VerdictKind::kDifferent;
  }
  return v;
}

std::string driverVersionText(uint32_t version) {
  if (version == 0) return "unknown";
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

std::vector<std::string> environmentDifferences(const trace::Header& header,
                                                const std::optional<trace::GpuInfo>& recorded,
                                                const MachineInfo& here) {
  std::vector<std::string> out;
  auto gpuText = [](const std::string& name, uint32_t major, uint32_t minor) {
    return fmt::format("{} (sm_{}{})", name.empty() ? "unknown GPU" : name, major, minor);
  };
  if (!recorded) {
    out.push_back(fmt::format("GPU: not described in the trace -> {}", gpuText(here.name, here.ccMajor, here.ccMinor)));
  } else {
    if (recorded->name != here.name || recorded->ccMajor != here.ccMajor || recorded->ccMinor != here.ccMinor) {
      out.push_back(fmt::format("GPU: {} -> {}", gpuText(recorded->name, recorded->ccMajor, recorded->ccMinor),
                                gpuText(here.name, here.ccMajor, here.ccMinor)));
    }
    if (recorded->smCount != 0 && recorded->smCount != here.smCount) {
      out.push_back(fmt::format("SM count: {} -> {}", recorded->smCount, here.smCount));
    }
    if (recorded->memoryBytes != 0 && recorded->memoryBytes != here.memoryBytes) {
      out.push_back(fmt::format("GPU memory: {} -> {}", humanBytes(recorded->memoryBytes), humanBytes(here.memoryBytes)));
    }
    if (!recorded->uuid.empty() && recorded->uuid != here.uuid) {
      out.push_back(fmt::format("GPU unit: {} -> {} (another physical GPU)", recorded->uuid, here.uuid));
    }
  }
  if (header.driverVersion != here.driverVersion) {
    out.push_back(fmt::format("driver: CUDA {} -> CUDA {}", driverVersionText(header.driverVersion),
                              driverVersionText(here.driverVersion)));
  }
  return out;
}

}  // namespace gpurr::replay
