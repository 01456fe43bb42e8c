// Two operations swapped: a matched pair whose operations each run also
// issued nearby, the other way round (a set or dict iterated in another
// order, the same data visited in another order). The alignment pairs
// operations of one shape by their place, so that such a pair looks like one
// operation whose pointers point elsewhere; the operation each run issued
// there is found in the other run a few operations away.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "diff/model.h"

namespace gpurr::diff {

// The swap at run A's operation `ia` (event `ea`) and run B's `ib` (`eb`):
// for each, an operation of the other run within a few operations of the
// pair with the same kernel and launch configuration that reads the same
// ranges (by allocation identity) and writes the same bytes (wherever: a new
// tensor lies where the allocator put it). None where either has no such
// twin, or the two launches share their parameters.
std::optional<Swap> swapAt(const Context& ctx, uint64_t ia, uint64_t ib, const Event& ea, const Event& eb);

// "run B does this operation 2 operations later, and another in its place"
std::string swapText(uint64_t ib, const Swap& swap);

}  // namespace gpurr::diff
