// A float sum by atomicAdd from every thread of many blocks: the order of the
// additions changes from run to run, and so do the last bits of the result.
// Known behaviour: two recordings match at every launch except the reduction,
// whose inputs are identical and whose output differs.
#include "common.h"

__global__ void fill_from_host_pattern(float* x, const float* pattern, size_t n, size_t period) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = pattern[i % period] * (1.0f + float(i / period) * 1e-3f);
}

__global__ void reduce_atomic(const float* x, size_t n, float* sum) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) atomicAdd(sum, x[i]);
}

int main() {
  requireGpu();
  const size_t n = size_t(1) << 24;  // 16 M additions into one float
  const size_t period = 1 << 16;
  const std::vector<float> pattern = testData(period, 7);
  float* x = zeroedAlloc<float>(n);
  float* p = zeroedAlloc<float>(period);
  float* sum = zeroedAlloc<float>(1);
  CUDA_CHECK(cudaMemcpy(p, pattern.data(), period * sizeof(float), cudaMemcpyHostToDevice));
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  fill_from_host_pattern<<<blocks, 256>>>(x, p, n, period);
  CUDA_CHECK(cudaGetLastError());
  reduce_atomic<<<blocks, 256>>>(x, n, sum);
  CUDA_CHECK(cudaGetLastError());
  float result = 0;
  CUDA_CHECK(cudaMemcpy(&result, sum, sizeof result, cudaMemcpyDeviceToHost));
  std::printf("atomic_reduce: sum %.9g (bits %08x)\n", result, bitsOf(result));
  CUDA_CHECK(cudaFree(x));
  CUDA_CHECK(cudaFree(p));
  CUDA_CHECK(cudaFree(sum));
  return 0;
}
