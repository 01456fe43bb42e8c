// RNG states of a launch: the ones the recorder decoded (RngState
// annotations), and PyTorch's Philox state found inside structs passed by
// value.
#pragma once

#include <cstdint>
#include <vector>

#include "diff/model.h"

namespace gpurr::diff {

std::vector<const RngState*> rngStates(const KernelLaunch& k);

// An RNG state of the launch whose parameter bytes overlap [begin, end);
// nullptr when none does.
const RngState* rngStateIn(const KernelLaunch& k, uint64_t begin, uint64_t end);

// Adds to two corresponding launches whose parameters differ the Philox
// states inside their structs, as RngState annotations.
void addPhiloxInsideStructs(const Context& ctx, Event& ea, Event& eb);

}  // namespace gpurr::diff
