// A kernel's name and parameter layout, kept once for the life of the process
// (one copy for each distinct pair): a launch's entry points at its kernel's,
// and the trace thread copies them into the event it writes, so that the
// program's thread copies no name or layout for a launch.
#pragma once

#include <string>
#include <vector>

#include "trace_format/trace.h"

namespace gpurr::recorder {

struct KernelText {
  std::string name;                      // mangled
  std::vector<trace::ParamInfo> layout;  // empty when unknown
};

// The kept copy of `name` and `layout`, made on the first call with them;
// never freed, so a pointer to it stays good after its module unloads and
// the session ends. Thread-safe.
const KernelText* keptKernelText(const std::string& name, const std::vector<trace::ParamInfo>& layout);

// How many distinct names and layouts are kept (tests, memory accounting).
size_t keptKernelTexts();

}  // namespace gpurr::recorder
