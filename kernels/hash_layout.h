// The data layout shared by the device hash kernel (hash_kernel.cu) and the
// host code that launches it: one entry per range of a batch. Plain C layout,
// compiled by both nvcc and the host compiler, so it must not change silently.
#pragma once

#include <cstdint>

namespace gpurr::kernels {

// One buffer of a hash batch. Its chunks occupy the chunk slots
// [firstSlot, firstSlot + chunkCount(length)) of the batch's digest array;
// entries are sorted by firstSlot (the kernel finds a block's range by binary
// search). Zero-length ranges own no slot and are never passed in.
struct DeviceHashRange {
  uint64_t address;    // device address of the first byte (any alignment)
  uint64_t length;     // bytes
  uint64_t firstSlot;  // index of its first chunk digest in the output
};
static_assert(sizeof(DeviceHashRange) == 24);

// Name of the kernel in the embedded fatbin (extern "C", so unmangled):
//   hashChunks(const DeviceHashRange* ranges, uint32_t rangeCount,
//              uint64_t totalSlots, uint64_t* chunkDigests,
//              uint32_t* blocksDone, uint64_t* doneWord, uint64_t ticket)
// (doneWord null: no completion signal; see hash_kernel.cu)
inline constexpr const char* kHashKernelName = "gpurr_hash_chunks";
inline constexpr unsigned kHashBlockThreads = 256;  // = hash::kLanes

}  // namespace gpurr::kernels
