// One cuBLASLt GEMM with the algorithm the heuristic ranks first, passed
// explicitly: its launches must carry the decoded algorithm and the
// heuristic's candidates.
#include <cublasLt.h>

#include "../programs/common.h"

#define LT_CHECK(call)                                                                       \
  do {                                                                                       \
    const cublasStatus_t status_ = (call);                                                   \
    if (status_ != CUBLAS_STATUS_SUCCESS) {                                                  \
      std::fprintf(stderr, "%s:%d: %s failed: status %d\n", __FILE__, __LINE__, #call,      \
                   static_cast<int>(status_));                                               \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

int main() {
  requireGpu();
  const int m = 512, n = 256, k = 384;
  float* a = zeroedAlloc<float>(m * k);
  float* b = zeroedAlloc<float>(k * n);
  float* d = zeroedAlloc<float>(m * n);
  const size_t workspaceSize = 32 << 20;
  void* workspace = nullptr;
  CUDA_CHECK(cudaMalloc(&workspace, workspaceSize));
  cublasLtHandle_t lt;
  LT_CHECK(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t op;
  LT_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasLtMatrixLayout_t la, lb, ld;
  LT_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m));
  LT_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k));
  LT_CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
  cublasLtMatmulPreference_t pref;
  LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceSize,
                                                sizeof(workspaceSize)));
  cublasLtMatmulHeuristicResult_t results[4] = {};
  int returned = 0;
  LT_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 4, results, &returned));
  if (returned == 0) {
    std::fprintf(stderr, "lt_gemm: the heuristic offered no algorithm\n");
    return 1;
  }
  const float alpha = 1.0f, beta = 0.0f;
  LT_CHECK(cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &results[0].algo, workspace,
                          workspaceSize, nullptr));
  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("lt_gemm: %d candidates\n", returned);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(lt);
  return 0;
}
