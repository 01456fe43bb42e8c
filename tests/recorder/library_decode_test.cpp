// The text forms of library algorithm choices and generator state, from fixed
// values, and the cuBLASLt algorithm query against the real library (its
// config accessors are host functions that need no GPU), and the PyTorch
// version read for the header.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>

#include "recorder/library_call.h"
#include "recorder/library_decode.h"
#include "recorder/torch_version.h"

using namespace gpurr;
using namespace gpurr::recorder;

namespace {

std::string attr(const trace::AlgorithmChoice& a, const std::string& key) {
  for (const trace::KeyValue& kv : a.attributes)
    if (kv.key == key) return kv.value;
  return "<absent>";
}

// A fake cuDNN backend: descriptors are small structs whose attributes the
// test sets; getAttribute copies them out as cuDNN does.
struct FakeDescriptor {
  cudnnBackendDescriptorType_t type{};
  std::map<int, std::vector<int64_t>> ints;
  std::map<int, std::vector<FakeDescriptor*>> children;
};
std::vector<FakeDescriptor*> gCreated;
int gDestroyed = 0;
bool gFailKnobs = false;

cudnnStatus_t fakeCreate(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t* out) {
  auto* d = new FakeDescriptor{type, {}, {}};
  gCreated.push_back(d);
  *out = reinterpret_cast<cudnnBackendDescriptor_t>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t fakeDestroy(cudnnBackendDescriptor_t d) {
  ++gDestroyed;
  (void)d;  // freed with the test's fixtures
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t fakeGet(cudnnBackendDescriptor_t desc, cudnnBackendAttributeName_t name,
                      cudnnBackendAttributeType_t type, int64_t requested, int64_t* count, void* out) {
  auto* d = reinterpret_cast<FakeDescriptor*>(desc);
  if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    if (gFailKnobs && name == CUDNN_ATTR_ENGINECFG_KNOB_CHOICES) return CUDNN_STATUS_BAD_PARAM;
    auto it = d->children.find(name);
    if (it == d->children.end()) return CUDNN_STATUS_BAD_PARAM;
    auto** dst = static_cast<cudnnBackendDescriptor_t*>(out);
    *count = static_cast<int64_t>(it->second.size());
    for (int64_t i = 0; i < std::min<int64_t>(requested, *count); ++i) {
      auto* target = reinterpret_cast<FakeDescriptor*>(dst[i]);
      target->ints = it->second[i]->ints;
      target->children = it->second[i]->children;
    }
    return CUDNN_STATUS_SUCCESS;
  }
  auto it = d->ints.find(name);
  if (it == d->ints.end()) return CUDNN_STATUS_BAD_PARAM;
  *count = static_cast<int64_t>(it->second.size());
  for (int64_t i = 0; i < std::min<int64_t>(requested, *count); ++i) {
    if (type == CUDNN_TYPE_KNOB_TYPE)
      static_cast<cudnnBackendKnobType_t*>(out)[i] = static_cast<cudnnBackendKnobType_t>(it->second[i]);
    else
      static_cast<int64_t*>(out)[i] = it->second[i];
  }
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

TEST_CASE("cuDNN engine choices read the same whatever order the knobs come in") {
  CudnnPlanChoice a{12, {{CUDNN_KNOB_TYPE_TILE_SIZE, 3}, {CUDNN_KNOB_TYPE_SPLIT_K, 1}}, 4096};
  CudnnPlanChoice b{12, {{CUDNN_KNOB_TYPE_SPLIT_K, 1}, {CUDNN_KNOB_TYPE_TILE_SIZE, 3}}, 4096};
  CHECK(describeCudnnChoice(a) == "engine=12 knobs=SPLIT_K:1,TILE_SIZE:3");
  CHECK(describeCudnnChoice(a) == describeCudnnChoice(b));
  CHECK(describeCudnnChoice({7, {}, std::nullopt}) == "engine=7");
  CHECK(cudnnKnobName(9999) == "KNOB_9999");
  CHECK(cudnnKnobName(CUDNN_KNOB_TYPE_STAGES) == "STAGES");

  trace::AlgorithmChoice ann = cudnnExecuteAnnotation(a);
  CHECK(ann.library == "cudnn");
  CHECK(ann.call == "cudnnBackendExecute");
  CHECK(ann.algorithm == "engine=12 knobs=SPLIT_K:1,TILE_SIZE:3");
  CHECK(attr(ann, "workspace") == "4096");
  CHECK(cudnnExecuteAnnotation(std::nullopt).algorithm.starts_with("unknown"));
}

TEST_CASE("cuDNN plan query walks plan, engine config, engine and knob choices") {
  FakeDescriptor knob1{CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, {{CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, {CUDNN_KNOB_TYPE_STAGES}},
                                                              {CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, {4}}}, {}};
  FakeDescriptor knob2{CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, {{CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, {CUDNN_KNOB_TYPE_SWIZZLE}},
                                                              {CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, {2}}}, {}};
  FakeDescriptor engine{CUDNN_BACKEND_ENGINE_DESCRIPTOR, {{CUDNN_ATTR_ENGINE_GLOBAL_INDEX, {31}}}, {}};
  FakeDescriptor config{CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, {},
                        {{CUDNN_ATTR_ENGINECFG_ENGINE, {&engine}}, {CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, {&knob1, &knob2}}}};
  FakeDescriptor plan{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, {{CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, {1 << 20}}},
                      {{CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, {&config}}}};
  const CudnnBackendApi api{fakeGet, fakeCreate, fakeDestroy};
  gDestroyed = 0;
  gFailKnobs = false;
  auto choice = queryCudnnPlan(api, reinterpret_cast<cudnnBackendDescriptor_t>(&plan));
  REQUIRE(choice);
  CHECK(describeCudnnChoice(*choice) == "engine=31 knobs=SWIZZLE:2,STAGES:4");
  CHECK(choice->workspaceSize == (1 << 20));
  CHECK(gDestroyed == static_cast<int>(gCreated.size()));  // every descriptor it made, it destroyed

  SECTION("knobs the library will not give leave the engine") {
    gFailKnobs = true;
    auto partial = queryCudnnPlan(api, reinterpret_cast<cudnnBackendDescriptor_t>(&plan));
    REQUIRE(partial);
    CHECK(describeCudnnChoice(*partial) == "engine=31");
    gFailKnobs = false;
  }
  SECTION("a plan without an engine config is not decoded") {
    FakeDescriptor bare{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, {}, {}};
    CHECK_FALSE(queryCudnnPlan(api, reinterpret_cast<cudnnBackendDescriptor_t>(&bare)));
  }
  SECTION("no library, no query") {
    CHECK_FALSE(queryCudnnPlan(CudnnBackendApi{}, reinterpret_cast<cudnnBackendDescriptor_t>(&plan)));
  }
  for (FakeDescriptor* d : gCreated) delete d;
  gCreated.clear();
}

TEST_CASE("cuBLASLt algorithm text names every config field") {
  LtAlgoConfig c;
  c.id = 6;
  c.tile = 20;
  c.stages = 8;
  c.splitK = 4;
  c.reductionScheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  c.ctaSwizzling = 1;
  CHECK(describeLtAlgo(c) ==
        "algo=6 tile=20 stages=8 splitK=4 reduction=compute_type swizzle=1 custom=0 inner=0 cluster=0");
  CHECK(ltReductionName(0) == "none");
  CHECK(ltReductionName(99) == "scheme99");

  trace::AlgorithmChoice a = ltMatmulAnnotation(c, true, 1 << 22, {{"algo=1", 0.0f}});
  CHECK(a.library == "cublasLt");
  CHECK(a.algorithm == describeLtAlgo(c));
  CHECK(attr(a, "workspace") == "4194304");
  REQUIRE(a.candidates.size() == 1);
  CHECK(ltMatmulAnnotation(std::nullopt, false, 0, {}).algorithm.starts_with("heuristic"));
  CHECK(ltMatmulAnnotation(std::nullopt, true, 0, {}).algorithm.starts_with("unknown"));
}

TEST_CASE("cuBLASLt algorithm query reads what the library stored") {
  cublasLtMatmulAlgo_t algo;
  std::memset(&algo, 0, sizeof(algo));
  const uint32_t splitK = 4, reduction = CUBLASLT_REDUCTION_SCHEME_INPLACE, swizzle = 1, custom = 2;
  REQUIRE(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitK, sizeof splitK) ==
          CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction,
                                               sizeof reduction) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof swizzle) ==
          CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof custom) ==
          CUBLAS_STATUS_SUCCESS);
  auto c = queryLtAlgo(cublasLtMatmulAlgoConfigGetAttribute, algo);
  REQUIRE(c);
  CHECK(c->splitK == 4);
  CHECK(c->reductionScheme == CUBLASLT_REDUCTION_SCHEME_INPLACE);
  CHECK(c->ctaSwizzling == 1);
  CHECK(c->customOption == 2);
  CHECK_FALSE(queryLtAlgo(nullptr, algo));
}

TEST_CASE("cuBLAS GEMM calls are described by what the caller asked") {
  GemmCall g;
  g.call = "cublasGemmEx";
  g.transa = CUBLAS_OP_T;
  g.transb = CUBLAS_OP_N;
  g.m = 128;
  g.n = 64;
  g.k = 32;
  g.aType = CUDA_R_16BF;
  g.bType = CUDA_R_16BF;
  g.cType = CUDA_R_32F;
  g.computeType = CUBLAS_COMPUTE_32F_FAST_TF32;
  g.algo = CUBLAS_GEMM_DEFAULT_TENSOR_OP;
  g.mathMode = CUBLAS_TF32_TENSOR_OP_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  trace::AlgorithmChoice a = cublasGemmAnnotation(g);
  CHECK(a.library == "cublas");
  CHECK(a.call == "cublasGemmEx");
  CHECK(a.algorithm == "DEFAULT_TENSOR_OP");
  CHECK(attr(a, "op") == "TN");
  CHECK(attr(a, "mnk") == "128x64x32");
  CHECK(attr(a, "Atype") == "R_16BF");
  CHECK(attr(a, "Ctype") == "R_32F");
  CHECK(attr(a, "computeType") == "COMPUTE_32F_FAST_TF32");
  CHECK(attr(a, "mathMode") == "TF32_TENSOR_OP_MATH|DISALLOW_REDUCED_PRECISION_REDUCTION");
  CHECK(attr(a, "batch") == "<absent>");
  CHECK(cublasGemmAlgoName(CUBLAS_GEMM_ALGO3_TENSOR_OP) == "ALGO3_TENSOR_OP");
  CHECK(cublasGemmAlgoName(CUBLAS_GEMM_DEFAULT) == "DEFAULT");
  CHECK(cublasGemmAlgoName(5) == "ALGO5");
}

TEST_CASE("cuRAND generator state becomes an RNG state annotation") {
  CurandGeneratorState s{CURAND_RNG_PSEUDO_PHILOX4_32_10, 1234, 56, CURAND_ORDERING_PSEUDO_LEGACY};
  trace::RngState r = curandAnnotation(s);
  CHECK(r.source == "curand");
  CHECK(r.generator == "PHILOX4_32_10 ordering=PSEUDO_LEGACY");
  CHECK(r.seed == 1234);
  CHECK(r.offset == 56);
  CHECK(curandAnnotation({CURAND_RNG_PSEUDO_DEFAULT, 0, 0, 0}).generator == "PSEUDO_DEFAULT ordering=default");
  CHECK(curandRngTypeName(77) == "rng77");
}

TEST_CASE("only the outermost library call on a thread annotates, and only while in progress") {
  std::vector<trace::Annotation> out;
  appendLibraryCallAnnotations(out);
  CHECK(out.empty());
  CHECK_FALSE(libraryCallInProgress());
  {
    LibraryCallScope outer({trace::Note{"outer"}});
    CHECK(libraryCallInProgress());
    {
      // A library calling another wrapped entry point (cuBLAS calling
      // cublasLtMatmul): the launches are the program's call's, described once.
      LibraryCallScope inner({trace::Note{"inner"}});
      appendLibraryCallAnnotations(out);
    }
    REQUIRE(out.size() == 1);
    CHECK(std::get<trace::Note>(out[0]).text == "outer");
    CHECK(libraryCallInProgress());
    out.clear();
    appendLibraryCallAnnotations(out);
    REQUIRE(out.size() == 1);
    CHECK(std::get<trace::Note>(out[0]).text == "outer");
  }
  CHECK_FALSE(libraryCallInProgress());
  out.clear();
  appendLibraryCallAnnotations(out);
  CHECK(out.empty());
}

TEST_CASE("the PyTorch version comes from torch/version.py") {
  CHECK(torchVersionFromVersionPy("from typing import Optional\n__version__ = '2.5.1+cu124'\ngit_version = 'abc'\n") ==
        "2.5.1+cu124");
  CHECK(torchVersionFromVersionPy("__version__ = \"2.6.0\"\n") == "2.6.0");
  CHECK_FALSE(torchVersionFromVersionPy("version = '1.0'\n"));
  CHECK_FALSE(loadedTorchVersion());  // no PyTorch in this test
}
