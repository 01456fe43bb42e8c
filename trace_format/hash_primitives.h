// The building blocks of gpurr's buffer hash, shared verbatim by the CPU
// reference (trace_format/hash.cpp) and the device kernel (kernels/), so the
// two cannot drift apart. Nothing here allocates or depends on CUDA; under
// nvcc the functions are also compiled for the device.
//
// The full definition of the hash is in trace_format/FORMAT.md ("Buffer hash").
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GPURR_HD __host__ __device__ __forceinline__
#else
#define GPURR_HD inline
#endif

namespace gpurr::hash {

inline constexpr uint64_t kChunkBytes = 64 * 1024;  // bytes per chunk
inline constexpr uint32_t kLanes = 256;             // lanes per chunk
inline constexpr uint32_t kWordBytes = 16;          // one load per lane step
inline constexpr uint32_t kWordsPerChunk = kChunkBytes / kWordBytes;  // 4096
inline constexpr uint32_t kLaneLevels = 8;          // log2(kLanes)

inline constexpr uint64_t kK0 = 0xa0761d6478bd642fULL;
inline constexpr uint64_t kK1 = 0xe7037ed1a0b428dbULL;
inline constexpr uint64_t kK2 = 0x8ebc6af09c88c6e3ULL;
inline constexpr uint64_t kK3 = 0x589965cc75374cc3ULL;

// 64x64 -> 128 bit multiply, folded: low half XOR high half.
GPURR_HD uint64_t mum(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#else
  unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
#endif
}

GPURR_HD uint64_t rotl(uint64_t x, unsigned r) { return (x << r) | (x >> (64 - r)); }

// MurmurHash3's 64-bit finaliser.
GPURR_HD uint64_t fmix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// Bytes [shift, shift + 16) of the 32 little-endian bytes a0 a1 a2 a3, as a
// word's halves (lo, hi); shift is 0 to 15. The device reads a word of a
// range that does not start on a 16-byte boundary from the two aligned
// 16-byte blocks that hold it.
GPURR_HD void shiftedWord(uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint32_t shift, uint64_t& lo,
                          uint64_t& hi) {
  if (shift >= 8) {
    a0 = a1, a1 = a2, a2 = a3;
    shift -= 8;
  }
  if (shift == 0) {
    lo = a0, hi = a1;
    return;
  }
  const uint32_t r = 8 * shift;
  lo = (a0 >> r) | (a1 << (64 - r));
  hi = (a1 >> r) | (a2 << (64 - r));
}

// Absorbs one 16-byte word (lo, hi) into state s. Not commutative: the order
// of the words matters, and the rotated state survives a zero product.
GPURR_HD uint64_t step(uint64_t s, uint64_t lo, uint64_t hi) {
  return mum(lo ^ kK1 ^ s, hi ^ kK2) ^ rotl(s, 29);
}

// Initial state of lane `lane` of chunk `chunk`: every chunk and lane is
// seeded differently, so equal data at different places hashes differently.
GPURR_HD uint64_t laneSeed(uint64_t chunk, uint32_t lane) {
  return fmix(kK0 ^ (chunk * kLanes + lane));
}

// Combines two neighbouring lane values at tree level `level` (0..7).
GPURR_HD uint64_t combineLanes(uint64_t left, uint64_t right, uint32_t level) {
  return step(left, right, kK3 + level);
}

// Final digest of a chunk from the root of its lane tree and its byte length.
GPURR_HD uint64_t finishChunk(uint64_t root, uint64_t chunkLength) {
  return fmix(root ^ chunkLength);
}

// Buffer digest: a sequential fold of the chunk digests, in chunk order.
GPURR_HD uint64_t bufferSeed(uint64_t totalLength) { return fmix(kK0 ^ totalLength); }
GPURR_HD uint64_t foldChunk(uint64_t state, uint64_t chunkDigest, uint64_t chunkIndex) {
  return step(state, chunkDigest, chunkIndex);
}
GPURR_HD uint64_t finishBuffer(uint64_t state) { return fmix(state); }

}  // namespace gpurr::hash
