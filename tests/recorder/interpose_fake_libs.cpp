// Stand-ins for the library entry points the recorder wraps: each keeps the
// arguments it got and returns a status no wrapper would make up, so that the
// interposition test sees whether calls pass through unchanged.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <curand.h>

#define FAKE extern "C" __attribute__((visibility("default")))

extern "C" {
__attribute__((visibility("default"))) unsigned long long gFakeLastSeed = 0;
__attribute__((visibility("default"))) size_t gFakeLastCount = 0;
__attribute__((visibility("default"))) const void* gFakeLastPlan = nullptr;
__attribute__((visibility("default"))) int gFakeLastM = 0;
__attribute__((visibility("default"))) size_t gFakeLastWorkspace = 0;
}

FAKE curandStatus_t curandCreateGenerator(curandGenerator_t* gen, curandRngType_t) {
  static int storage;
  *gen = reinterpret_cast<curandGenerator_t>(&storage);
  return CURAND_STATUS_SUCCESS;
}
FAKE curandStatus_t curandSetPseudoRandomGeneratorSeed(curandGenerator_t, unsigned long long seed) {
  gFakeLastSeed = seed;
  return CURAND_STATUS_SUCCESS;
}
FAKE curandStatus_t curandGenerateUniform(curandGenerator_t, float* out, size_t n) {
  gFakeLastCount = n;
  if (out != nullptr) out[0] = 0.25f;
  return CURAND_STATUS_LAUNCH_FAILURE;
}
FAKE cudnnStatus_t cudnnBackendExecute(cudnnHandle_t, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t) {
  gFakeLastPlan = plan;
  return CUDNN_STATUS_EXECUTION_FAILED;
}
FAKE cublasStatus_t cublasSgemm_v2(cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int, int,
                                   const float*, const float*, int, const float*, int, const float*, float*, int) {
  gFakeLastM = m;
  return CUBLAS_STATUS_ARCH_MISMATCH;
}
FAKE cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*,
                                   cublasLtMatrixLayout_t, const void*, cublasLtMatrixLayout_t, const void*,
                                   const void*, cublasLtMatrixLayout_t, void*, cublasLtMatrixLayout_t,
                                   const cublasLtMatmulAlgo_t*, void*, size_t workspaceSize, cudaStream_t) {
  gFakeLastWorkspace = workspaceSize;
  return CUBLAS_STATUS_EXECUTION_FAILED;
}
