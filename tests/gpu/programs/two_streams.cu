// Two non-blocking streams, each running its own chain of kernels on its own
// buffers, joined by an event before a final kernel reads both. The host
// issues launches in a fixed order and no kernel races another, so two
// recordings match at every launch.
#include "common.h"

__global__ void seed(float* a, int n, float base) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = base + static_cast<float>(i % 1000) * 1e-3f;
}

__global__ void step(float* a, int n, float factor) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] * factor + 0.5f * sinf(a[i]);
}

__global__ void combine(float* out, const float* a, const float* b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] - b[i];
}

int main() {
  requireGpu();
  const int n = 1 << 20;
  const int blocks = (n + 255) / 256;
  float* a = zeroedAlloc<float>(n);
  float* b = zeroedAlloc<float>(n);
  float* out = zeroedAlloc<float>(n);
  cudaStream_t s1, s2;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t bDone;
  CUDA_CHECK(cudaEventCreateWithFlags(&bDone, cudaEventDisableTiming));
  seed<<<blocks, 256, 0, s1>>>(a, n, 1.0f);
  seed<<<blocks, 256, 0, s2>>>(b, n, 2.0f);
  for (int i = 0; i < 8; ++i) {
    step<<<blocks, 256, 0, s1>>>(a, n, 0.9f);
    step<<<blocks, 256, 0, s2>>>(b, n, 1.1f);
  }
  CUDA_CHECK(cudaEventRecord(bDone, s2));
  CUDA_CHECK(cudaStreamWaitEvent(s1, bDone, 0));
  combine<<<blocks, 256, 0, s1>>>(out, a, b, n);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(s1));
  float host[2];
  CUDA_CHECK(cudaMemcpy(&host[0], out, sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&host[1], out + n - 1, sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("two_streams: out[0] %.9g out[n-1] %.9g\n", host[0], host[1]);
  return 0;
}
