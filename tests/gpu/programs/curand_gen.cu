// cuRAND with a fixed seed (Philox and XORWOW generators), then a kernel
// that maps the numbers: deterministic, so two recordings match at every
// launch, cuRAND's own kernels included.
#include <curand.h>

#include "common.h"

#define CURAND_CHECK(call)                                                          \
  do {                                                                              \
    const curandStatus_t status_ = (call);                                          \
    if (status_ != CURAND_STATUS_SUCCESS) {                                         \
      std::fprintf(stderr, "%s:%d: %s failed: status %d\n", __FILE__, __LINE__, #call, \
                   static_cast<int>(status_));                                      \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

__global__ void box(float* out, const float* u, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = u[i] < 0.5f ? -1.0f : 1.0f;
}

int main() {
  requireGpu();
  const int n = 1 << 20;
  float* u = zeroedAlloc<float>(n);
  float* g = zeroedAlloc<float>(n);
  float* out = zeroedAlloc<float>(n);
  curandGenerator_t philox, xorwow;
  CURAND_CHECK(curandCreateGenerator(&philox, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(philox, 1234));
  CURAND_CHECK(curandCreateGenerator(&xorwow, CURAND_RNG_PSEUDO_XORWOW));
  CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(xorwow, 5678));
  for (int step = 0; step < 2; ++step) {
    CURAND_CHECK(curandGenerateUniform(philox, u, n));
    CURAND_CHECK(curandGenerateNormal(xorwow, g, n, 0.0f, 1.0f));
    box<<<(n + 255) / 256, 256>>>(out, u, n);
    CUDA_CHECK(cudaGetLastError());
  }
  float first[2];
  CUDA_CHECK(cudaMemcpy(&first[0], u, sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&first[1], g, sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("curand_gen: uniform[0] %.9g normal[0] %.9g\n", first[0], first[1]);
  CURAND_CHECK(curandDestroyGenerator(philox));
  CURAND_CHECK(curandDestroyGenerator(xorwow));
  return 0;
}
