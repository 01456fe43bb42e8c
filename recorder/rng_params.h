// Finds random-number-generator state among a kernel's parameters, so that a
// diff can say "same kernel, only the Philox seed/offset differ". PyTorch
// passes at::PhiloxCudaState by value in eager mode; its position follows
// from the demangled parameter list and the driver's parameter layout.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trace_format/events.h"

namespace gpurr::recorder {

// Top-level parameter types of a demangled function name ("f<a, b>(int, x::y)"
// -> {"int", "x::y"}); empty when it has none or cannot be parsed.
std::vector<std::string> demangledParameters(std::string_view demangled);

// Byte offsets (in the parameter buffer) of PhiloxCudaState parameters of the
// function with this mangled name and layout.
std::vector<uint32_t> philoxParamOffsets(const std::string& mangledName, std::span<const trace::ParamInfo> layout);

// Decodes the PhiloxCudaState at each offset of `params` (seed, offset; a
// state captured into a graph holds device pointers instead and says so).
std::vector<trace::RngState> decodePhilox(std::span<const uint8_t> params, std::span<const uint32_t> offsets);

}  // namespace gpurr::recorder
