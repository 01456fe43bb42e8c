// Finds random-number-generator state among a kernel's parameters, so that a
// diff can say "same kernel, only the Philox seed/offset differ". PyTorch
// passes at::PhiloxCudaState by value in eager mode; its position follows
// from the demangled parameter list and the driver's parameter layout, its
// layout from the PyTorch version loaded in the process.
//
// Only a top-level PhiloxCudaState parameter is found. Kernels that carry it
// inside a functor or a struct (bernoulli with a tensor `p`, gamma, poisson
// and binomial through kernelPointwiseApply, memory-efficient and flash
// attention through their parameter structs) are not labelled: their seed and
// offset are parameter bytes like any other (docs/RECORDING.md).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/demangle.h"
#include "trace_format/events.h"

namespace gpurr::recorder {

// at::PhiloxCudaState as one range of PyTorch versions lays it out:
// {uint64 seed_ | int64* ptr; uint64 offset_ | int64* ptr;
//  offset_intragraph_; bool captured_}.
struct PhiloxLayout {
  uint32_t size;             // sizeof(at::PhiloxCudaState)
  uint32_t intragraphBytes;  // offset_intragraph_, at byte 16: uint32 before 2.10, uint64 since
  uint32_t capturedByte;     // offset of captured_
  bool operator==(const PhiloxLayout&) const = default;
};

// The layout of the PyTorch version `torchVersion` ("2.11.0+cu130"), if the
// parameter's `size` agrees with it; without a version, the layout of that
// size. nullopt when neither fits: the parameter is then not decoded.
std::optional<PhiloxLayout> philoxLayout(const std::optional<std::string>& torchVersion, uint32_t size);

// A PhiloxCudaState parameter: where it sits in the parameter buffer, and how
// it is laid out.
struct PhiloxParam {
  uint32_t offset;
  PhiloxLayout layout;
  bool operator==(const PhiloxParam&) const = default;
};

// The PhiloxCudaState parameters of the function with this mangled name and
// parameter layout, in a process that loaded PyTorch `torchVersion`.
std::vector<PhiloxParam> philoxParams(const std::string& mangledName, std::span<const trace::ParamInfo> layout,
                                      const std::optional<std::string>& torchVersion);

// Decodes each PhiloxCudaState parameter of `params` (seed, offset; a state
// captured into a graph holds device pointers instead and says so).
std::vector<trace::RngState> decodePhilox(std::span<const uint8_t> params, std::span<const PhiloxParam> found);

}  // namespace gpurr::recorder
