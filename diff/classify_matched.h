// Stage 5, classification of a first divergence at a matched pair of
// operations: why the same operation gave different outputs (host input,
// uninitialised memory, RNG state, parameters, a nondeterministic kernel).
#pragma once

#include <cstdint>
#include <optional>

#include "diff/model.h"

namespace gpurr::diff {

// The first divergence at run A's operation `ia` and run B's `ib`, paired,
// with its cause and evidence.
FirstDivergence classifyMatched(const Context& ctx, uint64_t ia, uint64_t ib);

// Whether `origin`'s ATen op draws its output from the random generator's
// state, not from what it reads: the random fills (bernoulli_, normal_...)
// and those that make new tensors (randperm, rand, dropout...).
bool randomGenerator(const std::optional<trace::Origin>& origin);

// provenNondeterministic (diff.h), with the proof as evidence.
bool provenNondeterministic(FirstDivergence& d, Evidence proof);

}  // namespace gpurr::diff
