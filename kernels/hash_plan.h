// Packing buffers into one hash batch, and folding the batch's chunk digests
// back into buffer digests. Pure host code (no CUDA), tested on the CPU; the
// device kernel and the recorder share it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/hash_layout.h"

namespace gpurr::kernels {

// A buffer to hash: `length` bytes at device address `address`.
struct HashRequest {
  uint64_t address = 0;
  uint64_t length = 0;
};

// Number of 64 KiB chunks (= chunk slots) of a buffer of `length` bytes.
uint64_t chunkCount(uint64_t length);

// Where each request's chunk digests land in the batch's digest array.
struct HashPlan {
  std::vector<DeviceHashRange> ranges;  // non-empty requests, sorted by firstSlot
  std::vector<uint64_t> firstSlot;      // per request, in request order
  uint64_t totalSlots = 0;              // size of the digest array
};

// Assigns consecutive chunk slots to the requests, in order. Zero-length
// requests own no slot and are left out of `ranges` (their digest is the
// digest of the empty buffer).
HashPlan planHashBatch(std::span<const HashRequest> requests);
// The same into `plan`, reusing its vectors' capacity.
void planHashBatch(std::span<const HashRequest> requests, HashPlan& plan);

// Digest of request `index` from the batch's chunk digests (hash::foldChunks
// over its slots).
uint64_t foldRequest(const HashPlan& plan, std::span<const HashRequest> requests, size_t index,
                     std::span<const uint64_t> chunkDigests);

}  // namespace gpurr::kernels
