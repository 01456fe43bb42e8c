// The device side of gpurr's buffer hash: one 256-thread block per 64 KiB
// chunk, thread = lane, so it computes exactly the chunk digests of
// trace_format/hash.cpp with the same primitives (hash_primitives.h). It is
// compiled to a fatbin and embedded in the host code (see CMakeLists.txt),
// then loaded with the driver API inside the recorded program's own context.
#include <cstdint>

#include "kernels/hash_layout.h"
#include "trace_format/hash_primitives.h"

using gpurr::kernels::DeviceHashRange;
namespace h = gpurr::hash;

static_assert(gpurr::kernels::kHashBlockThreads == h::kLanes);

namespace {

__device__ __forceinline__ uint64_t minU64(uint64_t a, uint64_t b) { return a < b ? a : b; }

constexpr uint32_t kWordsPerLane = h::kWordsPerChunk / h::kLanes;  // 16

// Index of the range that owns chunk slot `slot`: the last one whose
// firstSlot <= slot.
__device__ uint32_t findRange(const DeviceHashRange* ranges, uint32_t count, uint64_t slot) {
  uint32_t lo = 0, hi = count;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (ranges[mid].firstSlot <= slot) lo = mid; else hi = mid;
  }
  return lo;  // the planner leaves zero-length ranges out of the array
}

// Word `w` of a chunk starting at `p` with `len` bytes, through byte loads:
// for the last, partial word.
__device__ void loadBytes(const uint8_t* p, uint64_t len, uint32_t w, uint64_t& lo, uint64_t& hi) {
  const uint64_t begin = uint64_t{w} * h::kWordBytes;
  const uint32_t n = static_cast<uint32_t>(minU64(h::kWordBytes, len - begin));
  lo = 0;
  hi = 0;
  // Two explicit halves, not an indexed array: keeps it out of local memory.
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t b = p[begin + i];
    if (i < 8) lo |= b << (8 * i); else hi |= b << (8 * (i - 8));
  }
}

}  // namespace

// With `doneWord` (null: nothing is signalled), the last block to finish
// resets `blocksDone` (device memory, zero on entry) for the next batch and
// writes `ticket` to `doneWord` (pinned host memory): the host reads the
// digests once it sees the ticket, with no event and no copy.
extern "C" __global__ void __launch_bounds__(256)
gpurr_hash_chunks(const DeviceHashRange* __restrict__ ranges, uint32_t rangeCount,
                  uint64_t totalSlots, uint64_t* __restrict__ chunkDigests,
                  uint32_t* blocksDone, uint64_t* doneWord, uint64_t ticket) {
  __shared__ uint64_t warpRoots[h::kLanes / 32];
  const uint32_t lane = threadIdx.x;

  for (uint64_t slot = blockIdx.x; slot < totalSlots; slot += gridDim.x) {
    const DeviceHashRange r = ranges[findRange(ranges, rangeCount, slot)];
    const uint64_t chunk = slot - r.firstSlot;
    const uint64_t chunkStart = chunk * h::kChunkBytes;
    const uint64_t len = minU64(h::kChunkBytes, r.length - chunkStart);
    const uint8_t* p = reinterpret_cast<const uint8_t*>(r.address + chunkStart);

    uint64_t s = h::laneSeed(chunk, lane);
    if (len == h::kChunkBytes && (reinterpret_cast<uintptr_t>(p) % 16) == 0) {
      // Fast path: a full, aligned chunk. All 16 loads are issued before the
      // first use so that each thread keeps 256 bytes in flight; word index
      // lane + 256 k makes every warp load 512 contiguous bytes.
      const uint4* q = reinterpret_cast<const uint4*>(p);
      uint4 v[kWordsPerLane];
#pragma unroll
      for (uint32_t k = 0; k < kWordsPerLane; ++k) v[k] = __ldcs(q + lane + h::kLanes * k);
#pragma unroll
      for (uint32_t k = 0; k < kWordsPerLane; ++k) {
        const uint64_t lo = (uint64_t{v[k].y} << 32) | v[k].x;
        const uint64_t hi = (uint64_t{v[k].w} << 32) | v[k].z;
        s = h::step(s, lo, hi);
      }
    } else {
      // A full word of a start that is not 16-byte aligned comes from the two
      // aligned 16-byte blocks that hold it: each holds bytes of the range,
      // so neither crosses into a page the range does not touch.
      const uint32_t shift = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p) % 16);
      const uint4* q = reinterpret_cast<const uint4*>(p - shift);
      const uint64_t fullWords = len / h::kWordBytes;
      const uint64_t words = (len + h::kWordBytes - 1) / h::kWordBytes;
      for (uint32_t w = lane; w < words; w += h::kLanes) {
        uint64_t lo, hi;
        if (w >= fullWords) {
          loadBytes(p, len, w, lo, hi);
        } else if (shift == 0) {
          const uint4 v = __ldcs(q + w);
          lo = (uint64_t{v.y} << 32) | v.x;
          hi = (uint64_t{v.w} << 32) | v.z;
        } else {
          // Plain loads: the next lane reads the second block again, from L1.
          const uint4 v = q[w], u = q[w + 1];
          h::shiftedWord((uint64_t{v.y} << 32) | v.x, (uint64_t{v.w} << 32) | v.z, (uint64_t{u.y} << 32) | u.x,
                         (uint64_t{u.w} << 32) | u.z, shift, lo, hi);
        }
        s = h::step(s, lo, hi);
      }
    }

    // Lane tree, levels 0..4 inside each warp: at level L the node values sit
    // on threads that are multiples of 2^L; each left node takes its right
    // neighbour from 2^L threads up.
#pragma unroll
    for (uint32_t level = 0; level < 5; ++level) {
      const uint32_t stride = 1u << level;
      const uint64_t right = __shfl_down_sync(0xffffffffu, s, stride);
      if ((lane & (2 * stride - 1)) == 0) s = h::combineLanes(s, right, level);
    }
    if ((lane & 31) == 0) warpRoots[lane / 32] = s;
    __syncthreads();
    if (lane < 32) {
      // Levels 5..7 over the 8 warp roots, in the first warp.
      uint64_t t = lane < 8 ? warpRoots[lane] : 0;
#pragma unroll
      for (uint32_t level = 5; level < h::kLaneLevels; ++level) {
        const uint32_t stride = 1u << (level - 5);
        const uint64_t right = __shfl_down_sync(0xffffffffu, t, stride);
        if ((lane & (2 * stride - 1)) == 0) t = h::combineLanes(t, right, level);
      }
      if (lane == 0) chunkDigests[slot] = h::finishChunk(t, len);
    }
    __syncthreads();  // warpRoots is reused by the next chunk
  }

  // Thread 0 wrote this block's chunk digests: they reach the host before
  // the count that tells the last block, which then raises the ticket.
  if (doneWord != nullptr && threadIdx.x == 0) {
    __threadfence_system();
    if (atomicAdd(blocksDone, 1u) == gridDim.x - 1) {
      *blocksDone = 0;
      __threadfence_system();
      *reinterpret_cast<volatile uint64_t*>(doneWord) = ticket;
    }
  }
}
