// A cuBLAS SGEMM followed by a chain of elementwise kernels (bias, ReLU,
// scale, residual add): every launch is deterministic, so two recordings
// match at every launch.
#include <cublas_v2.h>

#include "common.h"

#define CUBLAS_CHECK(call)                                                     \
  do {                                                                         \
    const cublasStatus_t status_ = (call);                                     \
    if (status_ != CUBLAS_STATUS_SUCCESS) {                                    \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                   cublasGetStatusString(status_));                            \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

__global__ void init(float* a, int n, float scale, int seed) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u + static_cast<unsigned>(seed) * 40503u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    a[i] = (static_cast<float>(h & 0xffff) / 32768.0f - 1.0f) * scale;
  }
}

__global__ void add_bias(float* c, const float* bias, int rows, int cols) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * cols) c[i] += bias[i % rows];
}

__global__ void relu(float* c, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = fmaxf(c[i], 0.0f);
}

__global__ void scale_add(float* out, const float* c, const float* residual, float s, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = c[i] * s + residual[i];
}

int main() {
  requireGpu();
  const int m = 512, k = 384, n = 256;
  float* a = zeroedAlloc<float>(m * k);
  float* b = zeroedAlloc<float>(k * n);
  float* c = zeroedAlloc<float>(m * n);
  float* bias = zeroedAlloc<float>(m);
  float* out = zeroedAlloc<float>(m * n);  // the first residual
  init<<<(m * k + 255) / 256, 256>>>(a, m * k, 0.5f, 1);
  init<<<(k * n + 255) / 256, 256>>>(b, k * n, 0.25f, 2);
  init<<<(m + 255) / 256, 256>>>(bias, m, 0.1f, 3);
  CUDA_CHECK(cudaGetLastError());

  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  // Our own zeroed workspace rather than one cuBLAS allocates and leaves as
  // it finds it.
  const size_t workspaceBytes = size_t(32) << 20;
  CUBLAS_CHECK(cublasSetWorkspace(handle, zeroedAlloc<uint8_t>(workspaceBytes), workspaceBytes));
  const float alpha = 1.0f, beta = 0.0f;
  for (int step = 0; step < 3; ++step) {
    // c = a * b (column-major m x k times k x n)
    CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, m, b, k, &beta, c, m));
    add_bias<<<(m * n + 255) / 256, 256>>>(c, bias, m, n);
    relu<<<(m * n + 255) / 256, 256>>>(c, m * n);
    scale_add<<<(m * n + 255) / 256, 256>>>(out, c, out, 0.5f, m * n);
    CUDA_CHECK(cudaGetLastError());
  }
  std::vector<float> host(static_cast<size_t>(m) * n);
  CUDA_CHECK(cudaMemcpy(host.data(), out, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double checksum = 0;
  for (float v : host) checksum += v;
  std::printf("gemm_chain: checksum %.17g first %08x last %08x\n", checksum, bitsOf(host.front()),
              bitsOf(host.back()));
  CUBLAS_CHECK(cublasDestroy(handle));
  return 0;
}
