// Comparison of one pair of corresponding operations: their ranges (inputs or
// outputs, paired by allocation identity) and their parameters (pointers
// by allocation identity and offset).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "diff/model.h"

namespace gpurr::diff {

inline bool isHostParameter(const ParamDifference& p) { return p.meaning == ParamMeaning::kHostAddresses; }
inline bool isPointerParameter(const ParamDifference& p) { return p.meaning == ParamMeaning::kPointer; }
inline bool isRngParameter(const ParamDifference& p) { return p.meaning == ParamMeaning::kRngState; }
inline bool isStaleWord(const ParamDifference& p) { return p.meaning == ParamMeaning::kStaleAddress; }
// Parameter bytes that decide nothing by themselves: host addresses, stale
// device addresses of one run (docs/DIFF.md, "What a range of one run alone
// weighs").
inline bool weighsNothing(const ParamDifference& p) { return isHostParameter(p) || isStaleWord(p); }

// The 8-byte word at byte `at` of a launch's parameters (nullopt past their end).
std::optional<uint64_t> wordAt(const KernelLaunch& k, uint32_t at);

// Whether two ranges are the same bytes, by allocation identity, offset and size.
bool sameRange(const Context& ctx, const DeviceRange& a, const DeviceRange& b);

// Differing ranges of two lists, appended to `out`; true when all are
// identical.
bool compareRanges(const Context& ctx, const std::vector<RangeDigest>& a, const std::vector<RangeDigest>& b,
                   std::vector<RangeDifference>& out);

// Parameter differences after pointer normalisation, grouped by parameter.
std::vector<ParamDifference> compareParams(const Context& ctx, const KernelLaunch& a, const KernelLaunch& b);

// Whether two operations' parameters agree once pointers are compared by
// allocation identity and offset (a memset's value, for memsets).
bool sameParameters(const Context& ctx, const Event& a, const Event& b);

// The meaning of a pointer that `with` has at `at` and `without` has not:
// a stale address or a pointer.
ParamMeaning pointerMeaning(const KernelLaunch& with, const KernelLaunch& without, uint32_t at);

// A launch's pointers by byte offset (the last one at an offset, where a
// damaged trace lists several): looked up, not searched, so that a launch of
// a hundred thousand pointers costs no more than its reading.
std::unordered_map<uint32_t, const trace::PointerParam*> pointersByOffset(const trace::KernelLaunch& launch);

// The allocations into which the stale words of `with` point: its pointers
// that `without` lacks and that are device addresses in one run only; one
// for each such pointer, sorted.
std::vector<uint32_t> staleWordAllocations(const KernelLaunch& with, const KernelLaunch& without);

// Whether a range difference is a range of one run alone that lies in an
// allocation a stale word of that run points into: the recorder hashed it
// through the stale word, and it weighs nothing.
bool throughStaleWord(const RangeDifference& d, const std::vector<uint32_t>& staleA,
                      const std::vector<uint32_t>& staleB);

}  // namespace gpurr::diff
