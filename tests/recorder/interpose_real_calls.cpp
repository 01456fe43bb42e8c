// A library that needs the real cuBLAS, cuBLASLt, cuDNN and cuRAND (linked,
// as PyTorch's libtorch_cuda.so is), and calls the entry points the recorder
// wraps with arguments every library refuses without touching a GPU. The
// drivers (interpose_real_check.cpp, interpose_ctypes_check.py) load it with
// dlopen / ctypes the way PyTorch loads its CUDA libraries, once with the
// recorder preloaded and once without, and compare what it reports.
//
// For each call it reports the status and, for cuBLAS and cuBLASLt, whether
// the library's own API log saw the call: without a GPU cuBLAS answers
// NOT_INITIALIZED to a null handle, the same status a wrapper that never
// reached it used to make up, so only the log shows that the call arrived.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <curand.h>
#include <dlfcn.h>

#include <cstring>
#include <string>

namespace {

int ltLogged = 0;    // cuBLASLt API log lines since the last reset
int blasLogged = 0;  // cuBLAS API log entries ("I! ... function ...")

void onLtLog(int, const char*, const char*) { ++ltLogged; }
void onBlasLog(const char* message) {
  if (message != nullptr && std::strncmp(message, "I!", 2) == 0) ++blasLogged;
}

std::string report;

template <typename Status>
void line(const char* name, Status status, const int* logged = nullptr) {
  report += name;
  report += " status=" + std::to_string(static_cast<int>(status));
  if (logged != nullptr) report += " logged=" + std::to_string(*logged);
  report += '\n';
}

const char* objectOf(const void* fn) {
  Dl_info info{};
  if (dladdr(fn, &info) == 0 || info.dli_fname == nullptr) return "?";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash != nullptr ? slash + 1 : info.dli_fname;
}

}  // namespace

// One line per call: "<function> status=<n>[ logged=<n>]".
extern "C" __attribute__((visibility("default"))) const char* gpurrInterposeCalls() {
  report.clear();
  // API logs to the callbacks only (nothing on stdout or stderr).
  cublasLoggerConfigure(1, 0, 0, nullptr);
  cublasSetLoggerCallback(onBlasLog);
  cublasLtLoggerOpenFile("/dev/null");  // it also writes to stdout otherwise
  cublasLtLoggerSetCallback(onLtLog);
  cublasLtLoggerSetLevel(5);  // API trace

  line("cudnnBackendDestroyDescriptor", cudnnBackendDestroyDescriptor(nullptr));
  line("cudnnBackendExecute", cudnnBackendExecute(nullptr, nullptr, nullptr));

  blasLogged = 0;
  line("cublasGemmEx",
       cublasGemmEx(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, nullptr, CUDA_R_32F, 1, nullptr, CUDA_R_32F, 1,
                    nullptr, nullptr, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
       &blasLogged);
  blasLogged = 0;
  line("cublasSgemm_v2",
       cublasSgemm_v2(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, nullptr, 1, nullptr, 1, nullptr, nullptr, 1),
       &blasLogged);
  blasLogged = 0;
  line("cublasDgemm_v2",
       cublasDgemm_v2(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, nullptr, 1, nullptr, 1, nullptr, nullptr, 1),
       &blasLogged);
  blasLogged = 0;
  line("cublasSgemmStridedBatched",
       cublasSgemmStridedBatched(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, nullptr, 1, 0, nullptr, 1, 0,
                                 nullptr, nullptr, 1, 0, 1),
       &blasLogged);

  ltLogged = 0;
  line("cublasLtMatmul",
       cublasLtMatmul(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                      nullptr, nullptr, nullptr, 0, nullptr),
       &ltLogged);
  // A real descriptor and layouts (created without a GPU): the heuristic
  // dereferences them, and refuses the null handle.
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  if (cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 4, 4, 4) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulPreferenceCreate(&preference) == CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulHeuristicResult_t results[1] = {};
    int returned = 0;
    ltLogged = 0;
    line("cublasLtMatmulAlgoGetHeuristic",
         cublasLtMatmulAlgoGetHeuristic(nullptr, desc, layout, layout, layout, layout, preference, 1, results,
                                        &returned),
         &ltLogged);
  } else {
    report += "cublasLtMatmulAlgoGetHeuristic not called: descriptors could not be created\n";
  }
  if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
  if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout);
  ltLogged = 0;
  line("cublasLtMatmulDescDestroy", desc != nullptr ? cublasLtMatmulDescDestroy(desc) : CUBLAS_STATUS_INVALID_VALUE,
       &ltLogged);
  cublasLtLoggerSetLevel(0);
  cublasLtLoggerSetCallback(nullptr);
  cublasSetLoggerCallback(nullptr);
  cublasLoggerConfigure(0, 0, 0, nullptr);

  line("curandSetGeneratorOffset", curandSetGeneratorOffset(nullptr, 1));
  line("curandSetPseudoRandomGeneratorSeed", curandSetPseudoRandomGeneratorSeed(nullptr, 1));
  line("curandGenerateUniform", curandGenerateUniform(nullptr, nullptr, 0));
  curandGenerator_t gen = nullptr;
  const curandStatus_t created = curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10);
  line("curandCreateGenerator", created);
  if (created == CURAND_STATUS_SUCCESS) line("curandDestroyGenerator", curandDestroyGenerator(gen));
  return report.c_str();
}

// The object each call above binds to: the recorder when it is preloaded,
// the libraries otherwise.
extern "C" __attribute__((visibility("default"))) const char* gpurrInterposeBinding() {
  static std::string binding;
  binding.clear();
  const std::pair<const char*, const void*> fns[] = {
      {"cudnnBackendExecute", reinterpret_cast<const void*>(&cudnnBackendExecute)},
      {"cublasSgemm_v2", reinterpret_cast<const void*>(&cublasSgemm_v2)},
      {"cublasLtMatmul", reinterpret_cast<const void*>(&cublasLtMatmul)},
      {"curandSetGeneratorOffset", reinterpret_cast<const void*>(&curandSetGeneratorOffset)}};
  for (const auto& [name, fn] : fns) binding += std::string(name) + " " + objectOf(fn) + "\n";
  return binding.c_str();
}
