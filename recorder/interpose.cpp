// Exported wrappers around the cuDNN, cuBLAS, cuBLASLt and cuRAND entry
// points that choose an algorithm or draw random numbers. `gpurr record`
// preloads this library (LD_PRELOAD), so a program's calls reach these first;
// each one describes the call, makes it the thread's current library call for
// the duration of the real function (found in the loaded library, however it
// was loaded: loaded_symbol.h), and the launch callback attaches that
// description to every kernel the call launches. Transparent by construction:
// the real function's result is returned unchanged, and without a recording
// session, or inside another wrapped call, the wrappers only forward.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <curand.h>

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "recorder/library_call.h"
#include "recorder/library_decode.h"
#include "recorder/real_function.h"

#define GPURR_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpurr::recorder {
namespace {

std::optional<unsigned> mathMode(cublasHandle_t handle) {
  static Real<cublasStatus_t (*)(cublasHandle_t, cublasMath_t*)> getMathMode{"cublasGetMathMode",
                                                                              WrappedLibrary::Cublas};
  const auto get = getMathMode.find();
  cublasMath_t mode{};
  if (get == nullptr || get(handle, &mode) != CUBLAS_STATUS_SUCCESS) return std::nullopt;
  return static_cast<unsigned>(mode);
}

std::vector<trace::Annotation> one(trace::Annotation a) {
  std::vector<trace::Annotation> v;
  v.push_back(std::move(a));
  return v;
}

// ---- cuBLASLt: the candidates the last heuristic query offered per matmul
// descriptor, attached to the matmuls that follow. An entry goes when the
// descriptor is destroyed (its address may be reused); queries made inside
// another library's call (cuBLAS's own descriptors) are not kept. Bounded: a
// program that creates descriptors without end keeps only the latest ones.
struct HeuristicCache {
  std::mutex mu;
  std::map<const void*, std::vector<trace::AlgorithmCandidate>> byDesc;
};
HeuristicCache& heuristics() {
  static auto* c = new HeuristicCache;  // never destroyed: wrappers may run during exit
  return *c;
}
constexpr size_t kMaxHeuristicDescs = 4096;

LtAlgoGetAttributeFn ltAlgoConfigGetAttribute() {
  static Real<LtAlgoGetAttributeFn> get{"cublasLtMatmulAlgoConfigGetAttribute", WrappedLibrary::CublasLt};
  return get.find();
}

template <typename T>
std::optional<T> ltAttr(cublasStatus_t (*get)(const void*, int, void*, size_t, size_t*), const void* desc, int attr) {
  T v{};
  size_t written = 0;
  if (get == nullptr || desc == nullptr || get(desc, attr, &v, sizeof(v), &written) != CUBLAS_STATUS_SUCCESS ||
      written != sizeof(v))
    return std::nullopt;
  return v;
}

void addLtShapes(trace::AlgorithmChoice& a, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t A,
                 cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t D) {
  using Get = cublasStatus_t (*)(const void*, int, void*, size_t, size_t*);
  static Real<Get> descGetAttribute{"cublasLtMatmulDescGetAttribute", WrappedLibrary::CublasLt};
  static Real<Get> layoutGetAttribute{"cublasLtMatrixLayoutGetAttribute", WrappedLibrary::CublasLt};
  const auto descGet = descGetAttribute.find();
  const auto layoutGet = layoutGetAttribute.find();
  if (auto ct = ltAttr<int32_t>(descGet, op, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE))
    a.attributes.push_back({"computeType", cublasComputeTypeName(*ct)});
  if (auto ta = ltAttr<int32_t>(descGet, op, CUBLASLT_MATMUL_DESC_TRANSA))
    if (auto tb = ltAttr<int32_t>(descGet, op, CUBLASLT_MATMUL_DESC_TRANSB))
      a.attributes.push_back({"op", cublasOpName(*ta) + cublasOpName(*tb)});
  const std::pair<const char*, cublasLtMatrixLayout_t> layouts[] = {{"A", A}, {"B", B}, {"D", D}};
  for (const auto& [name, layout] : layouts) {
    auto rows = ltAttr<uint64_t>(layoutGet, layout, CUBLASLT_MATRIX_LAYOUT_ROWS);
    auto cols = ltAttr<uint64_t>(layoutGet, layout, CUBLASLT_MATRIX_LAYOUT_COLS);
    auto type = ltAttr<uint32_t>(layoutGet, layout, CUBLASLT_MATRIX_LAYOUT_TYPE);
    auto batch = ltAttr<int32_t>(layoutGet, layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
    if (!rows || !cols || !type) continue;
    std::string text = fmt::format("{}x{} {}", *rows, *cols, cudaDataTypeName(*type));
    if (batch && *batch > 1) text += fmt::format(" batch {}", *batch);
    a.attributes.push_back({name, text});
  }
}

// ---- cuRAND: the state of every generator, as the program set it.
struct Generators {
  std::mutex mu;
  std::unordered_map<const void*, CurandGeneratorState> states;
};
Generators& generators() {
  static auto* g = new Generators;
  return *g;
}

template <typename Update>
void updateGenerator(curandGenerator_t gen, Update update) {
  Generators& g = generators();
  std::lock_guard lock(g.mu);
  update(g.states[gen]);
}

// Runs a generation call with the generator's state as the current call;
// advances the recorded offset by the values it drew, as cuRAND continues the
// sequence from where the previous call stopped.
template <typename Call>
curandStatus_t generate(curandGenerator_t gen, size_t values, Call call) {
  if (!libraryRecordingActive()) return call();
  CurandGeneratorState state;
  {
    Generators& g = generators();
    std::lock_guard lock(g.mu);
    state = g.states[gen];
  }
  curandStatus_t r;
  {
    LibraryCallScope scope(one(curandAnnotation(state)));
    r = call();
  }
  if (r == CURAND_STATUS_SUCCESS) updateGenerator(gen, [&](CurandGeneratorState& s) { s.offset += values; });
  return r;
}

}  // namespace
}  // namespace gpurr::recorder

using namespace gpurr::recorder;
namespace trace = gpurr::trace;

// ---------------------------------------------------------------- cuDNN

namespace {

// The decoded choice of each executed cuDNN plan: querying a plan creates
// dozens of temporary descriptors, too costly to repeat on every execute.
struct PlanCache {
  std::mutex mu;
  std::unordered_map<cudnnBackendDescriptor_t, trace::AlgorithmChoice> plans;
};

PlanCache& planCache() {
  static PlanCache* cache = new PlanCache;  // never destroyed: wrappers may run during exit
  return *cache;
}

trace::AlgorithmChoice cudnnPlanAnnotation(cudnnBackendDescriptor_t plan) {
  PlanCache& c = planCache();
  {
    std::lock_guard lock(c.mu);
    if (auto it = c.plans.find(plan); it != c.plans.end()) return it->second;
  }
  static Real<CudnnGetAttributeFn> getAttribute{"cudnnBackendGetAttribute", WrappedLibrary::Cudnn};
  static Real<CudnnCreateDescriptorFn> createDescriptor{"cudnnBackendCreateDescriptor", WrappedLibrary::Cudnn};
  static Real<CudnnDestroyDescriptorFn> destroyDescriptor{"cudnnBackendDestroyDescriptor", WrappedLibrary::Cudnn};
  const CudnnBackendApi api{getAttribute.find(), createDescriptor.find(), destroyDescriptor.find()};
  trace::AlgorithmChoice choice = cudnnExecuteAnnotation(queryCudnnPlan(api, plan));
  std::lock_guard lock(c.mu);
  return c.plans.try_emplace(plan, std::move(choice)).first->second;
}

}  // namespace

GPURR_EXPORT cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                               cudnnBackendDescriptor_t variantPack) {
  GPURR_REAL(cudnnBackendExecute, Cudnn);
  if (!libraryRecordingActive() || libraryCallInProgress()) return real(handle, plan, variantPack);
  LibraryCallScope scope(one(cudnnPlanAnnotation(plan)));
  return real(handle, plan, variantPack);
}

// Plans are executed many times: forget a plan's decoding only when the
// program destroys the descriptor (its address may then be reused).
GPURR_EXPORT cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
  GPURR_REAL(cudnnBackendDestroyDescriptor, Cudnn);
  {
    PlanCache& c = planCache();
    std::lock_guard lock(c.mu);
    c.plans.erase(descriptor);
  }
  return real(descriptor);
}

// ---------------------------------------------------------------- cuBLASLt

GPURR_EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
    cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D, cublasLtMatmulPreference_t preference, int requested,
    cublasLtMatmulHeuristicResult_t results[], int* returned) {
  GPURR_REAL(cublasLtMatmulAlgoGetHeuristic, CublasLt);
  const cublasStatus_t r = real(handle, op, A, B, C, D, preference, requested, results, returned);
  if (!libraryRecordingActive() || libraryCallInProgress() || r != CUBLAS_STATUS_SUCCESS || returned == nullptr ||
      results == nullptr)
    return r;
  const auto get = ltAlgoConfigGetAttribute();
  std::vector<trace::AlgorithmCandidate> candidates;
  for (int i = 0; i < *returned && i < requested; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
    auto config = queryLtAlgo(get, results[i].algo);
    // The heuristic ranks, it does not time: timeMs stays 0, the order is the rank.
    candidates.push_back({config ? describeLtAlgo(*config) : "unknown", 0.0f});
  }
  HeuristicCache& h = heuristics();
  std::lock_guard lock(h.mu);
  if (h.byDesc.size() >= kMaxHeuristicDescs && !h.byDesc.count(op)) h.byDesc.clear();
  h.byDesc[op] = std::move(candidates);
  return r;
}

GPURR_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, const void* alpha,
                                           const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                                           cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                                           cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                                           const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSize,
                                           cudaStream_t stream) {
  GPURR_REAL(cublasLtMatmul, CublasLt);
  if (!libraryRecordingActive() || libraryCallInProgress())
    return real(handle, op, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace, workspaceSize,
                stream);
  const auto get = ltAlgoConfigGetAttribute();
  std::optional<LtAlgoConfig> config;
  if (algo != nullptr) config = queryLtAlgo(get, *algo);
  std::vector<trace::AlgorithmCandidate> candidates;
  {
    HeuristicCache& h = heuristics();
    std::lock_guard lock(h.mu);
    if (auto it = h.byDesc.find(op); it != h.byDesc.end()) candidates = it->second;
  }
  trace::AlgorithmChoice choice = ltMatmulAnnotation(config, algo != nullptr, workspaceSize, std::move(candidates));
  addLtShapes(choice, op, Adesc, Bdesc, Ddesc);
  LibraryCallScope scope(one(std::move(choice)));
  return real(handle, op, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace, workspaceSize,
              stream);
}

GPURR_EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  GPURR_REAL(cublasLtMatmulDescDestroy, CublasLt);
  {
    HeuristicCache& h = heuristics();
    std::lock_guard lock(h.mu);
    h.byDesc.erase(matmulDesc);
  }
  return real(matmulDesc);
}

// ---------------------------------------------------------------- cuBLAS

namespace {

GemmCall gemmCall(const char* name, int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
  GemmCall c;
  c.call = name;
  c.transa = ta;
  c.transb = tb;
  c.m = m;
  c.n = n;
  c.k = k;
  c.batch = batch;
  return c;
}

GemmCall gemmExCall(const char* name, int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t batch, int aType,
                    int bType, int cType, int computeType, int algo) {
  GemmCall c = gemmCall(name, ta, tb, m, n, k, batch);
  c.aType = aType;
  c.bType = bType;
  c.cType = cType;
  c.computeType = computeType;
  c.algo = algo;
  return c;
}

template <typename Call>
cublasStatus_t gemm(cublasHandle_t handle, GemmCall call, Call real) {
  if (!libraryRecordingActive() || libraryCallInProgress()) return real();
  call.mathMode = mathMode(handle);
  LibraryCallScope scope(one(cublasGemmAnnotation(call)));
  return real();
}

}  // namespace

GPURR_EXPORT cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
                                           int n, int k, const float* alpha, const float* A, int lda, const float* B,
                                           int ldb, const float* beta, float* C, int ldc) {
  GPURR_REAL(cublasSgemm_v2, Cublas);
  GemmCall c = gemmCall("cublasSgemm_v2", ta, tb, m, n, k);
  return gemm(handle, c, [&] { return real(handle, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); });
}

GPURR_EXPORT cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
                                           int n, int k, const double* alpha, const double* A, int lda,
                                           const double* B, int ldb, const double* beta, double* C, int ldc) {
  GPURR_REAL(cublasDgemm_v2, Cublas);
  GemmCall c = gemmCall("cublasDgemm_v2", ta, tb, m, n, k);
  return gemm(handle, c, [&] { return real(handle, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); });
}

GPURR_EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
                                         int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
                                         const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
                                         cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                         cublasGemmAlgo_t algo) {
  static Real<cublasStatus_t (*)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*, cudaDataType,
      int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int, cublasComputeType_t,
      cublasGemmAlgo_t)> realOf_cublasGemmEx{"cublasGemmEx", WrappedLibrary::Cublas};
  const auto real = realOf_cublasGemmEx.get();
  GemmCall c = gemmExCall("cublasGemmEx", ta, tb, m, n, k, 1, Atype, Btype, Ctype, computeType, algo);
  return gemm(handle, c, [&] {
    return real(handle, ta, tb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType, algo);
  });
}

GPURR_EXPORT cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta,
                                                      cublasOperation_t tb, int m, int n, int k, const float* alpha,
                                                      const float* A, int lda, long long strideA, const float* B,
                                                      int ldb, long long strideB, const float* beta, float* C,
                                                      int ldc, long long strideC, int batch) {
  GPURR_REAL(cublasSgemmStridedBatched, Cublas);
  GemmCall c = gemmCall("cublasSgemmStridedBatched", ta, tb, m, n, k, batch);
  return gemm(handle, c, [&] {
    return real(handle, ta, tb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch);
  });
}

GPURR_EXPORT cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta,
                                                      cublasOperation_t tb, int m, int n, int k, const double* alpha,
                                                      const double* A, int lda, long long strideA, const double* B,
                                                      int ldb, long long strideB, const double* beta, double* C,
                                                      int ldc, long long strideC, int batch) {
  GPURR_REAL(cublasDgemmStridedBatched, Cublas);
  GemmCall c = gemmCall("cublasDgemmStridedBatched", ta, tb, m, n, k, batch);
  return gemm(handle, c, [&] {
    return real(handle, ta, tb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch);
  });
}

GPURR_EXPORT cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* alpha,
    const void* A, cudaDataType Atype, int lda, long long strideA, const void* B, cudaDataType Btype, int ldb,
    long long strideB, const void* beta, void* C, cudaDataType Ctype, int ldc, long long strideC, int batch,
    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  // Overloaded in C++ (an older computeType form): name the C signature.
  static Real<cublasStatus_t (*)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*, cudaDataType,
      int, long long, const void*, cudaDataType, int, long long, const void*, void*, cudaDataType, int, long long,
      int, cublasComputeType_t, cublasGemmAlgo_t)>
      realOf_cublasGemmStridedBatchedEx{"cublasGemmStridedBatchedEx", WrappedLibrary::Cublas};
  const auto real = realOf_cublasGemmStridedBatchedEx.get();
  GemmCall c =
      gemmExCall("cublasGemmStridedBatchedEx", ta, tb, m, n, k, batch, Atype, Btype, Ctype, computeType, algo);
  return gemm(handle, c, [&] {
    return real(handle, ta, tb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc,
                strideC, batch, computeType, algo);
  });
}

// ---------------------------------------------------------------- cuRAND

GPURR_EXPORT curandStatus_t curandCreateGenerator(curandGenerator_t* gen, curandRngType_t type) {
  GPURR_REAL(curandCreateGenerator, Curand);
  const curandStatus_t r = real(gen, type);
  if (r == CURAND_STATUS_SUCCESS && gen != nullptr) {
    updateGenerator(*gen, [&](CurandGeneratorState& s) { s = CurandGeneratorState{static_cast<int>(type)}; });
  }
  return r;
}

GPURR_EXPORT curandStatus_t curandDestroyGenerator(curandGenerator_t gen) {
  GPURR_REAL(curandDestroyGenerator, Curand);
  const curandStatus_t r = real(gen);
  if (r == CURAND_STATUS_SUCCESS) {
    Generators& g = generators();
    std::lock_guard lock(g.mu);
    g.states.erase(gen);
  }
  return r;
}

GPURR_EXPORT curandStatus_t curandSetPseudoRandomGeneratorSeed(curandGenerator_t gen, unsigned long long seed) {
  GPURR_REAL(curandSetPseudoRandomGeneratorSeed, Curand);
  const curandStatus_t r = real(gen, seed);
  // Setting the seed restarts the sequence at the generator's offset.
  if (r == CURAND_STATUS_SUCCESS) updateGenerator(gen, [&](CurandGeneratorState& s) { s.seed = seed; });
  return r;
}

GPURR_EXPORT curandStatus_t curandSetGeneratorOffset(curandGenerator_t gen, unsigned long long offset) {
  GPURR_REAL(curandSetGeneratorOffset, Curand);
  const curandStatus_t r = real(gen, offset);
  if (r == CURAND_STATUS_SUCCESS) updateGenerator(gen, [&](CurandGeneratorState& s) { s.offset = offset; });
  return r;
}

GPURR_EXPORT curandStatus_t curandSetGeneratorOrdering(curandGenerator_t gen, curandOrdering_t order) {
  GPURR_REAL(curandSetGeneratorOrdering, Curand);
  const curandStatus_t r = real(gen, order);
  if (r == CURAND_STATUS_SUCCESS)
    updateGenerator(gen, [&](CurandGeneratorState& s) { s.ordering = static_cast<int>(order); });
  return r;
}

GPURR_EXPORT curandStatus_t curandGenerate(curandGenerator_t gen, unsigned int* out, size_t n) {
  GPURR_REAL(curandGenerate, Curand);
  return generate(gen, n, [&] { return real(gen, out, n); });
}

GPURR_EXPORT curandStatus_t curandGenerateLongLong(curandGenerator_t gen, unsigned long long* out, size_t n) {
  GPURR_REAL(curandGenerateLongLong, Curand);
  return generate(gen, n, [&] { return real(gen, out, n); });
}

GPURR_EXPORT curandStatus_t curandGenerateUniform(curandGenerator_t gen, float* out, size_t n) {
  GPURR_REAL(curandGenerateUniform, Curand);
  return generate(gen, n, [&] { return real(gen, out, n); });
}

GPURR_EXPORT curandStatus_t curandGenerateUniformDouble(curandGenerator_t gen, double* out, size_t n) {
  GPURR_REAL(curandGenerateUniformDouble, Curand);
  return generate(gen, n, [&] { return real(gen, out, n); });
}

GPURR_EXPORT curandStatus_t curandGenerateNormal(curandGenerator_t gen, float* out, size_t n, float mean,
                                                 float stddev) {
  GPURR_REAL(curandGenerateNormal, Curand);
  return generate(gen, n, [&] { return real(gen, out, n, mean, stddev); });
}

GPURR_EXPORT curandStatus_t curandGenerateNormalDouble(curandGenerator_t gen, double* out, size_t n, double mean,
                                                       double stddev) {
  GPURR_REAL(curandGenerateNormalDouble, Curand);
  return generate(gen, n, [&] { return real(gen, out, n, mean, stddev); });
}

GPURR_EXPORT curandStatus_t curandGenerateLogNormal(curandGenerator_t gen, float* out, size_t n, float mean,
                                                    float stddev) {
  GPURR_REAL(curandGenerateLogNormal, Curand);
  return generate(gen, n, [&] { return real(gen, out, n, mean, stddev); });
}

GPURR_EXPORT curandStatus_t curandGenerateLogNormalDouble(curandGenerator_t gen, double* out, size_t n, double mean,
                                                          double stddev) {
  GPURR_REAL(curandGenerateLogNormalDouble, Curand);
  return generate(gen, n, [&] { return real(gen, out, n, mean, stddev); });
}

GPURR_EXPORT curandStatus_t curandGeneratePoisson(curandGenerator_t gen, unsigned int* out, size_t n, double lambda) {
  GPURR_REAL(curandGeneratePoisson, Curand);
  return generate(gen, n, [&] { return real(gen, out, n, lambda); });
}
