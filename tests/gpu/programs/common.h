// Shared by the GPU test programs: error checks that name the failing call,
// and the "no GPU here" exit (77, which ctest reads as skipped).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    const cudaError_t status_ = (call);                                               \
    if (status_ != cudaSuccess) {                                                     \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,       \
                   cudaGetErrorString(status_));                                      \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

// Exits 77 when there is no usable GPU, so that the test counts as skipped.
inline void requireGpu() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::fprintf(stderr, "no GPU (%s): skipped\n",
                 status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
    std::exit(77);
  }
}

// cudaMalloc, then zeroes: the recorder hashes what a kernel's buffers hold
// before it runs, and these programs should not depend on what fresh device
// memory happens to contain (except uninit_read, which is about exactly that).
template <class T>
T* zeroedAlloc(size_t count) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
  CUDA_CHECK(cudaMemset(p, 0, count * sizeof(T)));
  return static_cast<T*>(p);
}

// Fixed pseudo-random floats in [-1, 1) times a spread of magnitudes, so that
// the order of a float sum shows in its last bits.
inline std::vector<float> testData(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const float unit = static_cast<float>(static_cast<int32_t>(x >> 32)) / 2147483648.0f;
    const int exponent = static_cast<int>((x >> 24) & 15) - 8;
    v[i] = unit * static_cast<float>(1 << (exponent + 8)) / 256.0f;
  }
  return v;
}

// The bit pattern of a float, for printing results that must match exactly.
inline uint32_t bitsOf(float f) {
  uint32_t u;
  static_assert(sizeof u == sizeof f);
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
}
