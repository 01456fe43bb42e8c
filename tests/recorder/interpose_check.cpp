// Run with the recorder preloaded (LD_PRELOAD): library calls reach its
// wrappers first, which must forward them unchanged to the library linked
// here (the stand-ins of interpose_fake_libs.cpp) and return its status.
// With "absent LIBCURAND" as arguments, calls wrappers whose library is not
// loaded: the wrapper loads the library, warns, and returns the library's own
// status, never one of its own; a library loaded later (RTLD_LOCAL) is found
// by the same wrapper.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <curand.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>

extern "C" unsigned long long gFakeLastSeed;
extern "C" size_t gFakeLastCount;
extern "C" const void* gFakeLastPlan;
extern "C" int gFakeLastM;
extern "C" size_t gFakeLastWorkspace;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++failures;
  }
}

// Runs `call` in a child process; its exit status (-1 when it did not exit)
// and what it wrote to stderr.
template <typename Call>
std::pair<int, std::string> inChild(Call call) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, ""};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    call();
    _exit(0);
  }
  close(fds[1]);
  std::string err;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) err.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, err};
}

using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using SetOffsetFn = curandStatus_t (*)(curandGenerator_t, unsigned long long);

int absent(const char* libcurand) {
  // Entry points of libraries this program does not load: found by name,
  // only the recorder's exports answer.
  auto gemmEx = reinterpret_cast<GemmExFn>(dlsym(RTLD_DEFAULT, "cublasGemmEx"));
  auto setOffset = reinterpret_cast<SetOffsetFn>(dlsym(RTLD_DEFAULT, "curandSetGeneratorOffset"));
  check(gemmEx != nullptr && setOffset != nullptr, "the recorder exports cublasGemmEx and curandSetGeneratorOffset");
  if (gemmEx == nullptr || setOffset == nullptr) return 1;

  // Found by name while no library defines it: the wrapper loads the library
  // (saying so) and returns the library's own status, never one of its own.
  auto [status, err] = inChild([&] {
    const cublasStatus_t got = gemmEx(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, nullptr, CUDA_R_32F, 1,
                                      nullptr, CUDA_R_32F, 1, nullptr, nullptr, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT);
    void* lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_NOLOAD);
    auto real = lib != nullptr ? reinterpret_cast<GemmExFn>(dlsym(lib, "cublasGemmEx")) : nullptr;
    _exit(real != nullptr && real(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, nullptr, CUDA_R_32F, 1, nullptr,
                                  CUDA_R_32F, 1, nullptr, nullptr, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT) == got
              ? 0
              : 1);
  });
  std::fprintf(stderr, "cublasGemmEx without cuBLAS loaded: status %d, stderr: %s", status, err.c_str());
  check(status == 0, "cublasGemmEx without cuBLAS loaded: the wrapper loads cuBLAS and returns cuBLAS's own status");
  check(err.find("gpurr: warning: cublasGemmEx") != std::string::npos && err.find("libcublas.so.13") != std::string::npos,
        "the warning names cublasGemmEx and the library loaded for it");

  // Loaded later, as Python loads it (RTLD_LOCAL): the wrapper finds it and
  // returns its status.
  void* curand = dlopen(libcurand, RTLD_NOW | RTLD_LOCAL);
  check(curand != nullptr, std::string("dlopen ") + libcurand);
  if (curand == nullptr) return 1;
  auto realSetOffset = reinterpret_cast<SetOffsetFn>(dlsym(curand, "curandSetGeneratorOffset"));
  check(realSetOffset != nullptr && realSetOffset != setOffset, "cuRAND defines curandSetGeneratorOffset");
  if (realSetOffset == nullptr) return 1;
  const curandStatus_t expected = realSetOffset(nullptr, 1);
  std::tie(status, err) = inChild([&] { _exit(setOffset(nullptr, 1) == expected ? 0 : 1); });
  check(status == 0 && err.empty(),
        "curandSetGeneratorOffset, once cuRAND is loaded RTLD_LOCAL, returns cuRAND's own status");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // The wrappers must be the definitions calls resolve to, or nothing here
  // tests them.
  Dl_info info{};
  check(dladdr(reinterpret_cast<void*>(&curandGenerateUniform), &info) != 0 && info.dli_fname != nullptr &&
            std::strstr(info.dli_fname, "libgpurr_recorder") != nullptr,
        "curandGenerateUniform resolves to the recorder's wrapper (is it preloaded?)");

  if (argc > 2 && std::strcmp(argv[1], "absent") == 0) return absent(argv[2]);

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
