// Decoding of library algorithm choices and generator state into trace
// annotations: cuDNN execution plans (engine index and knobs), cuBLASLt
// matmul algorithms, cuBLAS GEMM parameters, cuRAND generators. The text forms
// are pure functions of the values, so two runs that chose alike compare
// equal; the queries take the library's getter as a function pointer, so
// tests feed them fixed values or real calls.
#pragma once

#include <cublasLt.h>
#include <cudnn.h>
#include <curand.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trace_format/events.h"

namespace gpurr::recorder {

// ---------------------------------------------------------------- cuDNN

struct CudnnKnob {
  int64_t type = 0;  // cudnnBackendKnobType_t
  int64_t value = 0;
};

struct CudnnPlanChoice {
  int64_t engineGlobalIndex = -1;
  std::vector<CudnnKnob> knobs;
  std::optional<int64_t> workspaceSize;
};

// "KNOB_NAME"; "KNOB_<n>" for types this build does not name.
std::string cudnnKnobName(int64_t type);
// "engine=12 knobs=SPLIT_K:1,TILE_SIZE:3" (knobs sorted by type, so the
// library's order does not matter).
std::string describeCudnnChoice(const CudnnPlanChoice& choice);

using CudnnGetAttributeFn = cudnnStatus_t (*)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                              cudnnBackendAttributeType_t, int64_t, int64_t*, void*);
using CudnnCreateDescriptorFn = cudnnStatus_t (*)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t*);
using CudnnDestroyDescriptorFn = cudnnStatus_t (*)(cudnnBackendDescriptor_t);
struct CudnnBackendApi {
  CudnnGetAttributeFn getAttribute = nullptr;
  CudnnCreateDescriptorFn createDescriptor = nullptr;
  CudnnDestroyDescriptorFn destroyDescriptor = nullptr;
};

// Reads the plan's engine config: engine global index, knob choices,
// workspace size. nullopt when the library refuses (the plan is then
// recorded without its engine).
std::optional<CudnnPlanChoice> queryCudnnPlan(const CudnnBackendApi& api, cudnnBackendDescriptor_t plan);

trace::AlgorithmChoice cudnnExecuteAnnotation(const std::optional<CudnnPlanChoice>& choice);

// ---------------------------------------------------------------- cuBLASLt

struct LtAlgoConfig {
  int32_t id = 0;
  uint32_t tile = 0;             // cublasLtMatmulTile_t
  uint32_t splitK = 1;
  uint32_t reductionScheme = 0;  // cublasLtReductionScheme_t
  uint32_t ctaSwizzling = 0;
  uint32_t customOption = 0;
  uint32_t stages = 0;           // cublasLtMatmulStages_t
  uint16_t innerShape = 0;       // cublasLtMatmulInnerShape_t
  uint16_t clusterShape = 0;     // cublasLtClusterShape_t
  bool operator==(const LtAlgoConfig&) const = default;
};

std::string ltReductionName(uint32_t scheme);
// "algo=6 tile=20 stages=8 splitK=1 reduction=none swizzle=0 custom=0 inner=0 cluster=0".
std::string describeLtAlgo(const LtAlgoConfig& algo);

using LtAlgoGetAttributeFn = cublasStatus_t (*)(const cublasLtMatmulAlgo_t*, cublasLtMatmulAlgoConfigAttributes_t,
                                               void*, size_t, size_t*);
// Reads every config attribute; an attribute the library does not know keeps
// its default. nullopt when even the id cannot be read.
std::optional<LtAlgoConfig> queryLtAlgo(LtAlgoGetAttributeFn get, const cublasLtMatmulAlgo_t& algo);

// The cublasLtMatmul annotation: the algorithm (or "heuristic" when the call
// passed none and the library chose), the workspace size, and the candidates
// a preceding cublasLtMatmulAlgoGetHeuristic offered for the same descriptor.
trace::AlgorithmChoice ltMatmulAnnotation(const std::optional<LtAlgoConfig>& algo, bool algoGiven,
                                          size_t workspaceBytes, std::vector<trace::AlgorithmCandidate> candidates);

// ---------------------------------------------------------------- cuBLAS

std::string cublasOpName(int op);            // cublasOperation_t: "N", "T", "C"
std::string cudaDataTypeName(int type);      // cudaDataType_t: "R_32F"...
std::string cublasComputeTypeName(int type);  // cublasComputeType_t: "COMPUTE_32F"...
std::string cublasGemmAlgoName(int algo);    // cublasGemmAlgo_t: "DEFAULT", "DEFAULT_TENSOR_OP", "ALGO3"...
std::string cublasMathModeName(unsigned mode);

struct GemmCall {
  std::string call;
  int transa = 0, transb = 0;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  std::optional<int> aType, bType, cType;  // cudaDataType_t, for the Ex calls
  std::optional<int> computeType;          // cublasComputeType_t
  std::optional<int> algo;                 // cublasGemmAlgo_t
  std::optional<unsigned> mathMode;        // from cublasGetMathMode
};
trace::AlgorithmChoice cublasGemmAnnotation(const GemmCall& call);

// ---------------------------------------------------------------- cuRAND

struct CurandGeneratorState {
  int type = 0;  // curandRngType_t
  uint64_t seed = 0;
  uint64_t offset = 0;
  int ordering = 0;  // curandOrdering_t; 0 = never set
  bool operator==(const CurandGeneratorState&) const = default;
};

std::string curandRngTypeName(int type);
std::string curandOrderingName(int ordering);
// RngState{source "curand", generator "PHILOX4_32_10 ordering=PSEUDO_DEFAULT", seed, offset}.
trace::RngState curandAnnotation(const CurandGeneratorState& state);

}  // namespace gpurr::recorder
