// Kernel parameter bytes: packing them as the kernel receives them, finding
// the device pointers among them, and the device ranges a launch can touch.
// Pure logic, tested on the CPU.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "recorder/allocation_map.h"
#include "recorder/framework_context.h"
#include "trace_format/events.h"

namespace gpurr::recorder {

// The parameter buffer from cuLaunchKernel's `kernelParams` (one pointer per
// parameter) and the function's layout. Empty when the layout is empty.
std::vector<uint8_t> packParams(void* const* kernelParams, std::span<const trace::ParamInfo> layout);
// The same into `out` (its capacity reused).
void packParams(void* const* kernelParams, std::span<const trace::ParamInfo> layout, std::vector<uint8_t>& out);

// The parameter buffer from cuLaunchKernel's `extra` array
// (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE pairs); nothing when it holds none.
std::optional<std::vector<uint8_t>> paramsFromExtra(void* const* extra);

struct ScannedPointer {
  trace::PointerParam param;
  uint64_t address = 0;
  // From `address` to the end of what the launch's device can read there;
  // 0 when it cannot read it (host memory, another device's memory, a VMM
  // mapping without read access for it): such a pointer is not hashed.
  uint64_t readableBytes = 0;
  trace::AllocationKind kind = trace::AllocationKind::kDevice;
  uint32_t allocationDevice = 0;
};

// Every 8-byte-aligned word of `params` that points into a live allocation
// (so pointers inside by-value structs are found too), with what a kernel on
// `device` can read from it (AllocationMap::resolveFrom). Words that are not
// 8-byte aligned are never read as pointers.
std::vector<ScannedPointer> scanPointers(std::span<const uint8_t> params, const AllocationMap& map,
                                         uint32_t device);
// The same into `out` (cleared first, its capacity kept: the launch path
// scans into a buffer of its thread's).
void scanPointers(std::span<const uint8_t> params, const AllocationMap& map, uint32_t device,
                  std::vector<ScannedPointer>& out);

// A block of the framework's allocator: (base, size).
using Block = std::pair<uint64_t, uint64_t>;
// The block that holds an address.
using BlockLookup = std::function<std::optional<Block>(uint64_t address)>;

// The ranges a launch with these pointers can read or write (FORMAT.md):
// for a pointer into a block `blockAt` knows, from the lowest pointer into
// the block to the block's end (RangeBound::kBlock); otherwise, for each
// allocation, from the lowest readable pointer into it to the end of its
// readable extent. Further pointers already inside a range add nothing;
// pointers the device cannot read through give no range.
std::vector<trace::DeviceRange> referencedRanges(std::span<const ScannedPointer> pointers,
                                                 const BlockLookup& blockAt = {});
// The same into `out` (its capacity reused); with `blocks`, the block of
// each range bound by one into it ((0, 0) for the others), in out's order
// (the launch path looks each block up once).
void referencedRanges(std::span<const ScannedPointer> pointers, const BlockLookup& blockAt,
                      std::vector<trace::DeviceRange>& out, std::vector<Block>* blocks = nullptr);

// The extent of the one tensor a range lies in: the framework allocator's
// block, or an allocation that holds a single tensor; nothing when the range
// may hold several tensors.
using TensorExtent = std::function<std::optional<Block>(const trace::DeviceRange& range)>;

// What a launch's range is to the framework op it runs in, by the op's
// operands (its tensor arguments, and whether its schema writes each).
enum class OperandRole : uint8_t {
  kUnknown,   // no tensor extent: the range may hold several tensors
  kRead,      // its tensor is an operand the op reads, and none it writes
  kWritten,   // its tensor is an operand the op writes (and may read)
  kNotGiven,  // its tensor is no operand: made inside the op (a new output, a workspace)
};

// The role of each of a launch's `ranges` in its op, by the op's `operands`;
// every range kUnknown when there are none.
std::vector<OperandRole> operandRoles(std::span<const trace::DeviceRange> ranges,
                                      std::span<const framework::Operand> operands, const TensorExtent& extentOf);
// The same into `out` (its capacity reused).
void operandRoles(std::span<const trace::DeviceRange> ranges, std::span<const framework::Operand> operands,
                  const TensorExtent& extentOf, std::vector<OperandRole>& out);

}  // namespace gpurr::recorder
