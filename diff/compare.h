// Comparison of one pair of corresponding operations: their ranges (inputs or
// outputs, paired by allocation identity) and their parameters (pointers
// by allocation identity and offset).
#pragma once

#include <cstdint>
#include <vector>

#include "diff/model.h"

namespace gpurr::diff {

// The meaning of a parameter difference whose differing bytes all lie in
// 8-byte words that hold, in both runs, an address no recorded allocation
// contains, in the range of host addresses (4 GiB to 128 TiB) or in the host
// memory the trace says its process had mapped readable: uninitialised
// parts of structs passed by value (PyTorch's TensorInfo beyond its
// dimensions, padding), references to host objects. Address-space
// randomisation changes them between runs; a kernel cannot read through
// them, so they do not count as a difference.
inline constexpr const char* kHostAddresses = "host addresses";

inline bool isHostParameter(const ParamDifference& p) { return p.meaning == kHostAddresses; }

// A pointer parameter that points elsewhere in the other run, or is null there.
inline constexpr const char* kPointer = "pointer";
inline bool isPointerParameter(const ParamDifference& p) { return p.meaning == kPointer; }
// A word inside a struct passed by value that points into an allocation in
// one run and holds another value, no null pointer, in the other: most often
// an unused part of the struct that holds a device address left on the host
// stack (seen in PyTorch's OffsetCalculator), so it decides nothing by
// itself: it counts as a differing byte, not as a pointer that moved.
inline constexpr const char* kStaleAddress = "device address in one run only";
// A parameter whose differing bytes hold an RNG state ("philox seed/offset"),
// and host addresses if any (compareParams).
inline constexpr const char* kRngSuffix = " seed/offset";
inline bool isRngParameter(const ParamDifference& p) { return p.meaning.ends_with(kRngSuffix); }

// Whether two ranges are the same bytes, by allocation identity, offset and size.
bool sameRange(const Context& ctx, const DeviceRange& a, const DeviceRange& b);

// Differing ranges of two lists, appended to `out`; true when all are
// identical.
bool compareRanges(const Context& ctx, const std::vector<RangeDigest>& a, const std::vector<RangeDigest>& b,
                   std::vector<RangeDifference>& out);

// Parameter differences after pointer normalisation, grouped by parameter.
std::vector<ParamDifference> compareParams(const Context& ctx, const KernelLaunch& a, const KernelLaunch& b);

// The meaning of a pointer that `with` has at `at` and `without` has not:
// kStaleAddress or kPointer.
const char* pointerMeaning(const KernelLaunch& with, const KernelLaunch& without, uint32_t at);

}  // namespace gpurr::diff
