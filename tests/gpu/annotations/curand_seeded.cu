// cuRAND Philox with the seed given as argument: two recordings with
// different seeds must be told apart as RNG state, naming both seeds.
#include <curand.h>

#include <cstdlib>

#include "../programs/common.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: curand_seeded SEED\n");
    return 2;
  }
  requireGpu();
  const unsigned long long seed = std::strtoull(argv[1], nullptr, 10);
  const int n = 1 << 16;
  float* u = zeroedAlloc<float>(n);
  curandGenerator_t gen;
  if (curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10) != CURAND_STATUS_SUCCESS ||
      curandSetPseudoRandomGeneratorSeed(gen, seed) != CURAND_STATUS_SUCCESS ||
      curandGenerateUniform(gen, u, n) != CURAND_STATUS_SUCCESS) {
    std::fprintf(stderr, "curand_seeded: cuRAND failed\n");
    return 1;
  }
  float first = 0;
  CUDA_CHECK(cudaMemcpy(&first, u, sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("curand_seeded: seed %llu uniform[0] %.9g\n", seed, first);
  curandDestroyGenerator(gen);
  return 0;
}
