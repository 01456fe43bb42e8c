// Comparison of one pair of corresponding operations: their ranges (inputs or
// outputs, paired by allocation identity) and their parameters (pointers
// by allocation identity and offset).
#pragma once

#include <cstdint>
#include <vector>

#include "diff/model.h"

namespace gpurr::diff {

inline bool isHostParameter(const ParamDifference& p) { return p.meaning == ParamMeaning::kHostAddresses; }
inline bool isPointerParameter(const ParamDifference& p) { return p.meaning == ParamMeaning::kPointer; }
inline bool isRngParameter(const ParamDifference& p) { return p.meaning == ParamMeaning::kRngState; }

// Whether two ranges are the same bytes, by allocation identity, offset and size.
bool sameRange(const Context& ctx, const DeviceRange& a, const DeviceRange& b);

// Differing ranges of two lists, appended to `out`; true when all are
// identical.
bool compareRanges(const Context& ctx, const std::vector<RangeDigest>& a, const std::vector<RangeDigest>& b,
                   std::vector<RangeDifference>& out);

// Parameter differences after pointer normalisation, grouped by parameter.
std::vector<ParamDifference> compareParams(const Context& ctx, const KernelLaunch& a, const KernelLaunch& b);

// The meaning of a pointer that `with` has at `at` and `without` has not:
// a stale address or a pointer.
ParamMeaning pointerMeaning(const KernelLaunch& with, const KernelLaunch& without, uint32_t at);

}  // namespace gpurr::diff
