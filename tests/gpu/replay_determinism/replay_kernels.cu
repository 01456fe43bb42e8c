// Kernels for the replay GPU tests, compiled to a fatbin that the tests embed
// and record as their module image. extern "C" keeps their names as the
// trace records them (a C++ kernel's would be its mangled name).

// Float atomicAdd into 16 sums: the order of additions, and so the rounding,
// depends on scheduling: nondeterministic.
extern "C" __global__ void atomic_sum(const float* x, float* out, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    atomicAdd(&out[i % 16], x[i]);
  }
}

// Passed by value: its pointers sit inside the parameter buffer at offsets
// 8 and 16 (after `n`), where replay must find and relocate them.
struct AxpyParams {
  const float* x;
  float* y;
  float a;
};

constexpr unsigned kChunk = 16384;  // floats per block: 64 KiB of dynamic shared memory

// y = a * reverse-within-chunk(x) + y, in place, staged through 64 KiB of
// dynamic shared memory (above the 48 KiB default: needs the opt-in
// attribute). Deterministic; in place, so every replay must restore y.
extern "C" __global__ void staged_axpy(unsigned n, AxpyParams p) {
  extern __shared__ float stage[];
  const unsigned base = blockIdx.x * kChunk;
  const unsigned len = min(kChunk, n - base);
  for (unsigned j = threadIdx.x; j < len; j += blockDim.x) stage[j] = p.x[base + j];
  __syncthreads();
  for (unsigned j = threadIdx.x; j < len; j += blockDim.x) {
    p.y[base + j] = p.a * stage[len - 1 - j] + p.y[base + j];
  }
}
