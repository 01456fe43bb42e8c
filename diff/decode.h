// Full events: the few operations a report shows, read again from the trace
// and decoded in full (the summary keeps 32 bytes of each), and what the
// report says of each (OpInfo).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "diff/model.h"

namespace gpurr::diff {

// Event `seq` of `reader`, decoded. Throws trace::TraceError when it is gone.
Event eventAt(const TraceReader& reader, uint64_t seq);

// Inputs, outputs and annotations of an operation, whatever its kind.
struct OpView {
  std::vector<RangeDigest> inputs, outputs;
  size_t reads = 0;  // ranges a launch only reads, not in `outputs`
  const KernelLaunch* launch = nullptr;
  const Memcpy* memcpy = nullptr;
  const Memset* memset = nullptr;
  const Collective* collective = nullptr;
};
OpView view(const Event& e);

// "memcpy HtoD", a kernel's mangled name...
std::string opName(const Event& e);

// What a report shows of operation `index` of `run`, decoded from `e` (or
// read from the trace).
OpInfo info(const Run& run, uint64_t index, const Event& e);
OpInfo info(const Run& run, uint64_t index);

// The index in the layout of the parameter holding byte `offset`; -1 when
// there is none.
int32_t parameterAt(const KernelLaunch& k, uint64_t offset);

// "alloc#3+0x40", or the address of a range outside every allocation.
std::string rangeText(const DeviceRange& r);

}  // namespace gpurr::diff
