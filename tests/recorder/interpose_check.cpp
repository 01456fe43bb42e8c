// Run with the recorder preloaded (LD_PRELOAD): library calls reach its
// wrappers first, which must forward them unchanged to the library linked
// here (the stand-ins of interpose_fake_libs.cpp) and return its status.
// With "absent" as argument, asks the wrappers for entry points that no
// loaded library defines: they must fail cleanly, not crash.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <curand.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

extern "C" unsigned long long gFakeLastSeed;
extern "C" size_t gFakeLastCount;
extern "C" const void* gFakeLastPlan;
extern "C" int gFakeLastM;
extern "C" size_t gFakeLastWorkspace;

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The wrappers must be the definitions calls resolve to, or nothing here
  // tests them.
  Dl_info info{};
  check(dladdr(reinterpret_cast<void*>(&curandGenerateUniform), &info) != 0 && info.dli_fname != nullptr &&
            std::strstr(info.dli_fname, "libgpurr_recorder") != nullptr,
        "curandGenerateUniform resolves to the recorder's wrapper (is it preloaded?)");

  if (argc > 1 && std::strcmp(argv[1], "absent") == 0) {
    // Entry points of libraries this program does not load: RTLD_NEXT finds none.
    auto gemmEx = reinterpret_cast<cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                                      int, const void*, const void*, cudaDataType, int, const void*,
                                                      cudaDataType, int, const void*, void*, cudaDataType, int,
                                                      cublasComputeType_t, cublasGemmAlgo_t)>(
        dlsym(RTLD_DEFAULT, "cublasGemmEx"));
    check(gemmEx != nullptr, "the recorder exports cublasGemmEx");
    if (gemmEx != nullptr)
      check(gemmEx(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, nullptr, CUDA_R_32F, 1, nullptr, CUDA_R_32F, 1,
                   nullptr, nullptr, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) ==
                CUBLAS_STATUS_NOT_INITIALIZED,
            "cublasGemmEx without cuBLAS fails with NOT_INITIALIZED");
    auto seed = reinterpret_cast<curandStatus_t (*)(curandGenerator_t, unsigned long long)>(
        dlsym(RTLD_DEFAULT, "curandSetGeneratorOffset"));
    check(seed != nullptr && seed(nullptr, 1) == CURAND_STATUS_INITIALIZATION_FAILED,
          "curandSetGeneratorOffset without cuRAND fails with INITIALIZATION_FAILED");
    return failures == 0 ? 0 : 1;
  }

  curandGenerator_t gen = nullptr;
  check(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10) == CURAND_STATUS_SUCCESS && gen != nullptr,
        "curandCreateGenerator forwards and fills the generator");
  check(curandSetPseudoRandomGeneratorSeed(gen, 0x1234567890ull) == CURAND_STATUS_SUCCESS &&
            gFakeLastSeed == 0x1234567890ull,
        "the seed reaches cuRAND");
  float out[4] = {};
  check(curandGenerateUniform(gen, out, 4) == CURAND_STATUS_LAUNCH_FAILURE && gFakeLastCount == 4 && out[0] == 0.25f,
        "curandGenerateUniform forwards arguments and its status");
  int plan = 0;
  check(cudnnBackendExecute(nullptr, reinterpret_cast<cudnnBackendDescriptor_t>(&plan), nullptr) ==
                CUDNN_STATUS_EXECUTION_FAILED &&
            gFakeLastPlan == &plan,
        "cudnnBackendExecute forwards the plan and its status");
  check(cublasSgemm_v2(nullptr, CUBLAS_OP_N, CUBLAS_OP_T, 17, 2, 3, nullptr, nullptr, 1, nullptr, 1, nullptr, nullptr,
                       1) == CUBLAS_STATUS_ARCH_MISMATCH &&
            gFakeLastM == 17,
        "cublasSgemm_v2 forwards arguments and its status");
  check(cublasLtMatmul(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                       nullptr, nullptr, nullptr, nullptr, 12345, nullptr) == CUBLAS_STATUS_EXECUTION_FAILED &&
            gFakeLastWorkspace == 12345,
        "cublasLtMatmul forwards arguments and its status");
  return failures == 0 ? 0 : 1;
}
