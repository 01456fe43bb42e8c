// The runs' environments: the header fields that differ (compareHeaders, in
// diff.h), and whether any of them can change results.
#pragma once

#include <string>
#include <vector>

#include "diff/report.h"

namespace gpurr::diff {

// A command line as it decides what runs: a Python interpreter's spelling
// (python, python3, /venv/bin/python3: torchrun starts each process with
// sys.executable where the user typed python) and its `-u` (unbuffered
// output, which torchrun adds) set aside, and a file named relative to the
// working directory (an argument ending in .py or holding a '/') as its
// absolute path. The library versions in the header tell interpreters
// apart where it matters.
std::vector<std::string> programOf(const std::vector<std::string>& command, const std::string& workingDirectory);
inline std::vector<std::string> programOf(const trace::Header& h) { return programOf(h.commandLine, h.workingDirectory); }

// Whether a field that changes results differs.
bool environmentMatters(const std::vector<EnvDifference>& env);

// The first few fields that change results: "env CUBLAS_WORKSPACE_CONFIG, cuDNN".
std::string envSummary(const std::vector<EnvDifference>& env);

// The fields that set what NCCL does: its variables (`env NCCL_*`) and its
// version (`library nccl`).
std::vector<EnvDifference> ncclDifferences(const std::vector<EnvDifference>& env);

// The fields that change results that may have changed an operation's:
// NCCL's only where it is NCCL's (a collective, or a kernel of NCCL's).
std::vector<EnvDifference> differencesFor(const std::vector<EnvDifference>& env, bool ncclOperation);

}  // namespace gpurr::diff
