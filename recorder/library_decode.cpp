// Library choices and generator state as stable text (see library_decode.h).
#include "recorder/library_decode.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpurr::recorder {

// ---------------------------------------------------------------- cuDNN

std::string cudnnKnobName(int64_t type) {
  switch (type) {
    case CUDNN_KNOB_TYPE_SPLIT_K: return "SPLIT_K";
    case CUDNN_KNOB_TYPE_SWIZZLE: return "SWIZZLE";
    case CUDNN_KNOB_TYPE_TILE_SIZE: return "TILE_SIZE";
    case CUDNN_KNOB_TYPE_EDGE: return "EDGE";
    case CUDNN_KNOB_TYPE_MULTIPLY: return "MULTIPLY";
    case CUDNN_KNOB_TYPE_SPLIT_K_BUF: return "SPLIT_K_BUF";
    case CUDNN_KNOB_TYPE_TILEK: return "TILEK";
    case CUDNN_KNOB_TYPE_STAGES: return "STAGES";
    case CUDNN_KNOB_TYPE_REDUCTION_MODE: return "REDUCTION_MODE";
    case CUDNN_KNOB_TYPE_SPLIT_K_SLC: return "SPLIT_K_SLC";
    case CUDNN_KNOB_TYPE_IDX_MODE: return "IDX_MODE";
    case CUDNN_KNOB_TYPE_SPECFILT: return "SPECFILT";
    case CUDNN_KNOB_TYPE_KERNEL_CFG: return "KERNEL_CFG";
    case CUDNN_KNOB_TYPE_WORKSPACE: return "WORKSPACE";
    case CUDNN_KNOB_TYPE_TILE_CGA_M: return "TILE_CGA_M";
    case CUDNN_KNOB_TYPE_TILE_CGA_N: return "TILE_CGA_N";
    case CUDNN_KNOB_TYPE_BLOCK_SIZE: return "BLOCK_SIZE";
    case CUDNN_KNOB_TYPE_OCCUPANCY: return "OCCUPANCY";
    case CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD: return "ARRAY_SIZE_PER_THREAD";
    case CUDNN_KNOB_TYPE_SPLIT_COLS: return "SPLIT_COLS";
    case CUDNN_KNOB_TYPE_TILE_ROWS: return "TILE_ROWS";
    case CUDNN_KNOB_TYPE_TILE_COLS: return "TILE_COLS";
    case CUDNN_KNOB_TYPE_LOAD_SIZE: return "LOAD_SIZE";
    case CUDNN_KNOB_TYPE_CTA_COUNT: return "CTA_COUNT";
    case CUDNN_KNOB_TYPE_STREAM_K: return "STREAM_K";
    case CUDNN_KNOB_TYPE_SPLIT_P_SLC: return "SPLIT_P_SLC";
    case CUDNN_KNOB_TYPE_TILE_M: return "TILE_M";
    case CUDNN_KNOB_TYPE_TILE_N: return "TILE_N";
    case CUDNN_KNOB_TYPE_WARP_SPEC_CFG: return "WARP_SPEC_CFG";
    case CUDNN_KNOB_TYPE_SWAP_AB: return "SWAP_AB";
    default: return fmt::format("KNOB_{}", type);
  }
}

std::string describeCudnnChoice(const CudnnPlanChoice& choice) {
  std::vector<CudnnKnob> knobs = choice.knobs;
  std::sort(knobs.begin(), knobs.end(),
            [](const CudnnKnob& a, const CudnnKnob& b) { return a.type < b.type; });
  std::string out = fmt::format("engine={}", choice.engineGlobalIndex);
  if (!knobs.empty()) {
    out += " knobs=";
    for (size_t i = 0; i < knobs.size(); ++i) {
      if (i > 0) out += ',';
      out += fmt::format("{}:{}", cudnnKnobName(knobs[i].type), knobs[i].value);
    }
  }
  return out;
}

namespace {

// Destroys the descriptors a query created, whatever path it leaves by.
struct CudnnDescriptors {
  const CudnnBackendApi& api;
  std::vector<cudnnBackendDescriptor_t> owned;
  ~CudnnDescriptors() {
    for (cudnnBackendDescriptor_t d : owned) api.destroyDescriptor(d);
  }
  cudnnBackendDescriptor_t create(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = nullptr;
    if (api.createDescriptor(type, &d) != CUDNN_STATUS_SUCCESS) return nullptr;
    owned.push_back(d);
    return d;
  }
};

// More knobs than any cuDNN 9 engine has; a config with more is cut here.
constexpr int64_t kMaxKnobs = 64;

}  // namespace

std::optional<CudnnPlanChoice> queryCudnnPlan(const CudnnBackendApi& api, cudnnBackendDescriptor_t plan) {
  if (api.getAttribute == nullptr || api.createDescriptor == nullptr || api.destroyDescriptor == nullptr ||
      plan == nullptr)
    return std::nullopt;
  CudnnDescriptors ds{api, {}};
  CudnnPlanChoice choice;

  cudnnBackendDescriptor_t config = ds.create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  int64_t count = 0;
  if (config == nullptr ||
      api.getAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                       &config) != CUDNN_STATUS_SUCCESS ||
      count != 1)
    return std::nullopt;

  cudnnBackendDescriptor_t engine = ds.create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  if (engine == nullptr ||
      api.getAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine) !=
          CUDNN_STATUS_SUCCESS ||
      count != 1)
    return std::nullopt;
  int64_t index = -1;
  if (api.getAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &index) !=
          CUDNN_STATUS_SUCCESS ||
      count != 1)
    return std::nullopt;
  choice.engineGlobalIndex = index;

  std::vector<cudnnBackendDescriptor_t> knobs;
  for (int64_t i = 0; i < kMaxKnobs; ++i) {
    cudnnBackendDescriptor_t k = ds.create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    if (k == nullptr) return std::nullopt;
    knobs.push_back(k);
  }
  int64_t knobCount = 0;
  if (api.getAttribute(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, kMaxKnobs,
                       &knobCount, knobs.data()) == CUDNN_STATUS_SUCCESS) {
    for (int64_t i = 0; i < std::min(knobCount, kMaxKnobs); ++i) {
      CudnnKnob knob;
      int64_t n = 0;
      cudnnBackendKnobType_t type{};
      if (api.getAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &type) !=
              CUDNN_STATUS_SUCCESS ||
          api.getAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n, &knob.value) !=
              CUDNN_STATUS_SUCCESS)
        continue;
      knob.type = static_cast<int64_t>(type);
      choice.knobs.push_back(knob);
    }
  }
  int64_t workspace = 0;
  if (api.getAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count, &workspace) ==
          CUDNN_STATUS_SUCCESS &&
      count == 1)
    choice.workspaceSize = workspace;
  return choice;
}

trace::AlgorithmChoice cudnnExecuteAnnotation(const std::optional<CudnnPlanChoice>& choice) {
  trace::AlgorithmChoice a;
  a.library = "cudnn";
  a.call = "cudnnBackendExecute";
  if (!choice) {
    a.algorithm = "unknown (the execution plan's engine config could not be read)";
    return a;
  }
  a.algorithm = describeCudnnChoice(*choice);
  a.attributes.push_back({"engine", fmt::format("{}", choice->engineGlobalIndex)});
  if (choice->workspaceSize) a.attributes.push_back({"workspace", fmt::format("{}", *choice->workspaceSize)});
  return a;
}

// ---------------------------------------------------------------- cuBLASLt

std::string ltReductionName(uint32_t scheme) {
  switch (scheme) {
    case CUBLASLT_REDUCTION_SCHEME_NONE: return "none";
    case CUBLASLT_REDUCTION_SCHEME_INPLACE: return "inplace";
    case CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE: return "compute_type";
    case CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE: return "output_type";
    default: return fmt::format("scheme{}", scheme);
  }
}

std::string describeLtAlgo(const LtAlgoConfig& a) {
  return fmt::format("algo={} tile={} stages={} splitK={} reduction={} swizzle={} custom={} inner={} cluster={}",
                     a.id, a.tile, a.stages, a.splitK, ltReductionName(a.reductionScheme), a.ctaSwizzling,
                     a.customOption, a.innerShape, a.clusterShape);
}

namespace {

template <typename T>
bool readLt(LtAlgoGetAttributeFn get, const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr,
            T& out) {
  T value{};
  size_t written = 0;
  if (get(&algo, attr, &value, sizeof(value), &written) != CUBLAS_STATUS_SUCCESS || written != sizeof(value))
    return false;
  out = value;
  return true;
}

}  // namespace

std::optional<LtAlgoConfig> queryLtAlgo(LtAlgoGetAttributeFn get, const cublasLtMatmulAlgo_t& algo) {
  if (get == nullptr) return std::nullopt;
  LtAlgoConfig c;
  if (!readLt(get, algo, CUBLASLT_ALGO_CONFIG_ID, c.id)) return std::nullopt;
  readLt(get, algo, CUBLASLT_ALGO_CONFIG_TILE_ID, c.tile);
  readLt(get, algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, c.splitK);
  readLt(get, algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, c.reductionScheme);
  readLt(get, algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, c.ctaSwizzling);
  readLt(get, algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, c.customOption);
  readLt(get, algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, c.stages);
  readLt(get, algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, c.innerShape);
  readLt(get, algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, c.clusterShape);
  return c;
}

trace::AlgorithmChoice ltMatmulAnnotation(const std::optional<LtAlgoConfig>& algo, bool algoGiven,
                                          size_t workspaceBytes, std::vector<trace::AlgorithmCandidate> candidates) {
  trace::AlgorithmChoice a;
  a.library = "cublasLt";
  a.call = "cublasLtMatmul";
  if (!algoGiven) {
    a.algorithm = "heuristic (no algorithm passed: the library chose internally)";
  } else if (!algo) {
    a.algorithm = "unknown (the algorithm's config could not be read)";
  } else {
    a.algorithm = describeLtAlgo(*algo);
  }
  a.attributes.push_back({"workspace", fmt::format("{}", workspaceBytes)});
  a.candidates = std::move(candidates);
  return a;
}

// ---------------------------------------------------------------- cuBLAS

std::string cublasOpName(int op) {
  switch (op) {
    case CUBLAS_OP_N: return "N";
    case CUBLAS_OP_T: return "T";
    case CUBLAS_OP_C: return "C";
    default: return fmt::format("op{}", op);
  }
}

std::string cudaDataTypeName(int type) {
  switch (type) {
    case CUDA_R_16F: return "R_16F";
    case CUDA_R_16BF: return "R_16BF";
    case CUDA_R_32F: return "R_32F";
    case CUDA_R_64F: return "R_64F";
    case CUDA_C_32F: return "C_32F";
    case CUDA_C_64F: return "C_64F";
    case CUDA_R_8I: return "R_8I";
    case CUDA_R_32I: return "R_32I";
    case CUDA_R_8F_E4M3: return "R_8F_E4M3";
    case CUDA_R_8F_E5M2: return "R_8F_E5M2";
    default: return fmt::format("type{}", type);
  }
}

std::string cublasComputeTypeName(int type) {
  switch (type) {
    case CUBLAS_COMPUTE_16F: return "COMPUTE_16F";
    case CUBLAS_COMPUTE_16F_PEDANTIC: return "COMPUTE_16F_PEDANTIC";
    case CUBLAS_COMPUTE_32F: return "COMPUTE_32F";
    case CUBLAS_COMPUTE_32F_PEDANTIC: return "COMPUTE_32F_PEDANTIC";
    case CUBLAS_COMPUTE_32F_FAST_16F: return "COMPUTE_32F_FAST_16F";
    case CUBLAS_COMPUTE_32F_FAST_16BF: return "COMPUTE_32F_FAST_16BF";
    case CUBLAS_COMPUTE_32F_FAST_TF32: return "COMPUTE_32F_FAST_TF32";
    case CUBLAS_COMPUTE_64F: return "COMPUTE_64F";
    case CUBLAS_COMPUTE_64F_PEDANTIC: return "COMPUTE_64F_PEDANTIC";
    case CUBLAS_COMPUTE_32I: return "COMPUTE_32I";
    case CUBLAS_COMPUTE_32I_PEDANTIC: return "COMPUTE_32I_PEDANTIC";
    default: return fmt::format("compute{}", type);
  }
}

std::string cublasGemmAlgoName(int algo) {
  if (algo == CUBLAS_GEMM_DEFAULT) return "DEFAULT";
  if (algo == CUBLAS_GEMM_DEFAULT_TENSOR_OP) return "DEFAULT_TENSOR_OP";
  if (algo == CUBLAS_GEMM_AUTOTUNE) return "AUTOTUNE";
  if (algo >= CUBLAS_GEMM_ALGO0_TENSOR_OP && algo <= CUBLAS_GEMM_ALGO15_TENSOR_OP)
    return fmt::format("ALGO{}_TENSOR_OP", algo - CUBLAS_GEMM_ALGO0_TENSOR_OP);
  return fmt::format("ALGO{}", algo);
}

std::string cublasMathModeName(unsigned mode) {
  std::string out;
  switch (mode & 0xf) {
    case CUBLAS_DEFAULT_MATH: out = "DEFAULT_MATH"; break;
    case CUBLAS_TENSOR_OP_MATH: out = "TENSOR_OP_MATH"; break;
    case CUBLAS_PEDANTIC_MATH: out = "PEDANTIC_MATH"; break;
    case CUBLAS_TF32_TENSOR_OP_MATH: out = "TF32_TENSOR_OP_MATH"; break;
    default: out = fmt::format("MATH{}", mode & 0xf);
  }
  if (mode & CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) out += "|DISALLOW_REDUCED_PRECISION_REDUCTION";
  if (unsigned rest = mode & ~(0xfu | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) out += fmt::format("|{:#x}", rest);
  return out;
}

trace::AlgorithmChoice cublasGemmAnnotation(const GemmCall& c) {
  trace::AlgorithmChoice a;
  a.library = "cublas";
  a.call = c.call;
  // cuBLAS does not say which kernel the heuristic picked; the launched
  // kernel's name does. The algorithm is what the caller asked for.
  a.algorithm = c.algo ? cublasGemmAlgoName(*c.algo) : "DEFAULT";
  a.attributes.push_back({"op", cublasOpName(c.transa) + cublasOpName(c.transb)});
  a.attributes.push_back({"mnk", fmt::format("{}x{}x{}", c.m, c.n, c.k)});
  if (c.batch != 1) a.attributes.push_back({"batch", fmt::format("{}", c.batch)});
  if (c.aType) a.attributes.push_back({"Atype", cudaDataTypeName(*c.aType)});
  if (c.bType) a.attributes.push_back({"Btype", cudaDataTypeName(*c.bType)});
  if (c.cType) a.attributes.push_back({"Ctype", cudaDataTypeName(*c.cType)});
  if (c.computeType) a.attributes.push_back({"computeType", cublasComputeTypeName(*c.computeType)});
  if (c.mathMode) a.attributes.push_back({"mathMode", cublasMathModeName(*c.mathMode)});
  return a;
}

// ---------------------------------------------------------------- cuRAND

std::string curandRngTypeName(int type) {
  switch (type) {
    case CURAND_RNG_TEST: return "TEST";
    case CURAND_RNG_PSEUDO_DEFAULT: return "PSEUDO_DEFAULT";
    case CURAND_RNG_PSEUDO_XORWOW: return "XORWOW";
    case CURAND_RNG_PSEUDO_MRG32K3A: return "MRG32K3A";
    case CURAND_RNG_PSEUDO_MTGP32: return "MTGP32";
    case CURAND_RNG_PSEUDO_MT19937: return "MT19937";
    case CURAND_RNG_PSEUDO_PHILOX4_32_10: return "PHILOX4_32_10";
    case CURAND_RNG_QUASI_DEFAULT: return "QUASI_DEFAULT";
    case CURAND_RNG_QUASI_SOBOL32: return "SOBOL32";
    case CURAND_RNG_QUASI_SCRAMBLED_SOBOL32: return "SCRAMBLED_SOBOL32";
    case CURAND_RNG_QUASI_SOBOL64: return "SOBOL64";
    case CURAND_RNG_QUASI_SCRAMBLED_SOBOL64: return "SCRAMBLED_SOBOL64";
    default: return fmt::format("rng{}", type);
  }
}

std::string curandOrderingName(int ordering) {
  switch (ordering) {
    case 0: return "default";  // never set: the generator's default
    case CURAND_ORDERING_PSEUDO_BEST: return "PSEUDO_BEST";
    case CURAND_ORDERING_PSEUDO_DEFAULT: return "PSEUDO_DEFAULT";
    case CURAND_ORDERING_PSEUDO_SEEDED: return "PSEUDO_SEEDED";
    case CURAND_ORDERING_PSEUDO_LEGACY: return "PSEUDO_LEGACY";
    case CURAND_ORDERING_PSEUDO_DYNAMIC: return "PSEUDO_DYNAMIC";
    case CURAND_ORDERING_QUASI_DEFAULT: return "QUASI_DEFAULT";
    default: return fmt::format("ordering{}", ordering);
  }
}

trace::RngState curandAnnotation(const CurandGeneratorState& s) {
  trace::RngState r;
  r.source = "curand";
  r.generator = fmt::format("{} ordering={}", curandRngTypeName(s.type), curandOrderingName(s.ordering));
  r.seed = s.seed;
  r.offset = s.offset;
  return r;
}

}  // namespace gpurr::recorder
