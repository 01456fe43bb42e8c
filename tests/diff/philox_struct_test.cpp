// PyTorch's Philox state inside a struct passed by value (the parameters of
// memory-efficient attention, bernoulli's functor): the recorder decodes it
// only where a kernel takes it as a parameter of its own, and the diff finds
// it inside a struct by the seed the run's own Philox launches take. The
// struct holds at::PhiloxCudaState as the installed torch wheel's header
// defines it (scripts/setup.sh installs 2.11), built by its own constructors.
#include <catch2/catch.hpp>

#ifdef GPURR_TORCH_INCLUDE
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include <ATen/cuda/detail/PhiloxCudaStateRaw.cuh>

#include "diff/diff.h"
#include "tests/diff/evidence_text.h"
#include "trace_format/trace.h"

using namespace gpurr;
using gpurr::testing::evidence;
using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kBase = 0x7f0000000000;

// fused_dropout_kernel_vec of torch 2.11's libtorch_cuda.so: it takes the
// state as its last parameter, and the recorder decodes it.
const char* kDropout =
    "_ZN2at6native43_GLOBAL__N__50f1b6c4_10_Dropout_cu_0e96ed3824fused_dropout_kernel_vecIffjLi1ELi4EhEEvNS_4cuda6detail"
    "10TensorInfoIKT_T1_EENS5_IS6_S8_EENS5_IT4_S8_EES8_T0_NS_15PhiloxCudaStateE";
// Memory-efficient attention's forward kernel in the same library: one
// struct parameter (kernel_forward.h's Params) holding pointers, sizes, the
// dropout probability and the state.
const char* kAttention =
    "_Z39fmha_cutlassF_f32_aligned_64x64_rf_sm80N22PyTorchMemEffAttention15AttentionKernelIfN7cutlass4arch4Sm80ELb1ELi64"
    "ELi64ELi64ELb1ELb1EE6ParamsE";

// The tail of that Params struct, from its dropout fields on.
struct AttentionParams {
  const float* query = nullptr;
  float* output = nullptr;
  int32_t numQueries = 64, numKeys = 64;
  bool useDropout = true;
  uint64_t dropoutBatchHeadRngOffset = 0;
  float dropoutProb = 0.1f;
  at::PhiloxCudaState rngEngineInputs;
  int64_t* extragraphOffset = nullptr;
  int64_t* seed = nullptr;
};

struct Run {
  at::PhiloxCudaState dropout{0, 0}, attention{0, 0};
  bool dropoutAnnotated = true;  // the recorder decoded the dropout's state
  uint64_t seedTensor = 0x0951d340;  // Params::seed: a host tensor, another place in each run
  uint64_t outDigest = 0x3333;
};

void writeRun(const fs::path& dir, const Run& r) {
  fs::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0;
  for (uint32_t o = 1; o <= 2; ++o) {
    w.append(Event{seq++, seq, 0, Allocation{o, kBase + o * 0x10000, 4096, AllocationKind::kDevice, 0, 0}, {}});
  }
  KernelLaunch drop;
  drop.function = kDropout;
  drop.grid = {4, 1, 1};
  drop.block = {256, 1, 1};
  const uint64_t stateAt = (16 + alignof(at::PhiloxCudaState) - 1) / alignof(at::PhiloxCudaState) *
                           alignof(at::PhiloxCudaState);
  appendPointerParam(drop, kBase + 0x10000, 1, 0);
  appendPointerParam(drop, kBase + 0x20000, 2, 0);
  appendParam(drop, &r.dropout, sizeof(r.dropout), alignof(at::PhiloxCudaState));
  REQUIRE(drop.paramLayout.back().offset == stateAt);
  if (r.dropoutAnnotated) {
    RngState s;
    s.source = "philox";
    s.seed = r.dropout.seed_.val;
    s.offset = r.dropout.offset_.val;
    s.paramOffset = static_cast<uint32_t>(stateAt);
    drop.annotations.push_back(s);
  }
  drop.outputs = {{{kBase + 0x20000, 4096, 2, 0}, 0x2222, {}, {}}};
  w.append(Event{seq++, seq, 0, drop, {}});

  KernelLaunch attn;
  attn.function = kAttention;
  attn.grid = {1, 8, 64};
  attn.block = {32, 4, 1};
  AttentionParams p;
  p.query = reinterpret_cast<const float*>(kBase + 0x20000);
  p.output = reinterpret_cast<float*>(kBase + 0x10000);
  p.rngEngineInputs = r.attention;
  p.seed = reinterpret_cast<int64_t*>(r.seedTensor);
  appendParam(attn, &p, sizeof(p), alignof(AttentionParams));
  attn.pointers = {{0, 2, 0}, {8, 1, 0}};
  attn.inputs = {{{kBase + 0x20000, 4096, 2, 0}, 0x2222, {}, {}}};
  attn.outputs = {{{kBase + 0x10000, 4096, 1, 0}, r.outDigest, {}, {}}};
  w.append(Event{seq++, seq, 0, attn, {}});
  w.setHostRegions({{0x00400000, 0x0c000000}});
  w.close();
}

struct Pair {
  fs::path root = fs::temp_directory_path() / ("gpurr-philox-struct-" + std::to_string(getpid()));
  ~Pair() { fs::remove_all(root); }
  diff::FirstDivergence first(const Run& a, const Run& b) {
    writeRun(root / "a.gpurr", a);
    writeRun(root / "b.gpurr", b);
    TraceReader ra(root / "a.gpurr"), rb(root / "b.gpurr");
    const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
    REQUIRE(d.firstDivergence);
    return *d.firstDivergence;
  }
};

// Unset, PyTorch draws its CUDA generator's seed at random, 53 bits wide.
constexpr uint64_t kSeedA = 0x1b2f5e07c4d9a3, kSeedB = 0x0e61d4a8f9b207;

}  // namespace

TEST_CASE("Philox state inside a struct parameter is the RNG state when its seed is the run's",
          "[diff][rng][torch]") {
  INFO("torch " << GPURR_TORCH_VERSION << ": sizeof(at::PhiloxCudaState) = " << sizeof(at::PhiloxCudaState));
  Pair pair;
  Run a, b;
  a.dropout = at::PhiloxCudaState(kSeedA, 0);
  a.attention = at::PhiloxCudaState(kSeedA, 16);
  b.dropout = at::PhiloxCudaState(kSeedB, 0);
  b.attention = at::PhiloxCudaState(kSeedB, 16);
  b.seedTensor = 0x0951cf80;
  b.outDigest = 0x4444;
  // The dropout's outputs are equal here: the attention launch diverges first.
  diff::FirstDivergence f = pair.first(a, b);
  REQUIRE(f.a.index == 1);
  CHECK(f.cause == diff::Cause::kRngState);
  REQUIRE(f.params.size() == 1);
  CHECK(f.params[0].param == 0);
  CHECK(f.params[0].meaning == diff::ParamMeaning::kRngState);  // and host addresses: Params::seed
  CHECK(f.params[0].rngSource == "philox");
  const uint64_t at = offsetof(AttentionParams, rngEngineInputs);
  char bytes[64];
  std::snprintf(bytes, sizeof bytes, "inside parameter 0, bytes %#zx-%#zx", static_cast<size_t>(at),
                static_cast<size_t>(at + 16));
  CHECK_THAT(evidence(f), Catch::Contains(bytes) &&
                              Catch::Contains("seed=" + std::to_string(kSeedA) + " offset=16") &&
                              Catch::Contains("seed=" + std::to_string(kSeedB) + " offset=16"));

  SECTION("the same seed, another offset") {
    b.dropout = a.dropout;
    b.attention = at::PhiloxCudaState(kSeedA, 20);
    CHECK(pair.first(a, b).cause == diff::Cause::kRngState);
  }
  SECTION("a seed the run's Philox launches never took is a value like any other") {
    b.dropout = at::PhiloxCudaState(kSeedB + 1, 0);
    CHECK(pair.first(a, b).cause == diff::Cause::kScalarParameters);
  }
  SECTION("without the recorder's decoding of the dropout's state, nothing shows the seed") {
    a.dropoutAnnotated = b.dropoutAnnotated = false;
    CHECK(pair.first(a, b).cause == diff::Cause::kScalarParameters);
  }
  SECTION("a small seed both runs share does not make another field an offset") {
    a.dropout = b.dropout = at::PhiloxCudaState(42, 0);
    a.attention = at::PhiloxCudaState(42, 16);
    b.attention = at::PhiloxCudaState(42, 20);
    CHECK(pair.first(a, b).cause == diff::Cause::kScalarParameters);
  }
  SECTION("seeds that read as host addresses in both runs are still the seed") {
    // 1 in 64 of PyTorch's 53-bit seeds lies between 4 GiB and 128 TiB.
    constexpr uint64_t kLowA = 0x1b2f5e07c4d9, kLowB = 0x0e61d4a8f9b2;
    a.dropout = at::PhiloxCudaState(kLowA, 0);
    a.attention = at::PhiloxCudaState(kLowA, 16);
    b.dropout = at::PhiloxCudaState(kLowB, 0);
    b.attention = at::PhiloxCudaState(kLowB, 16);
    f = pair.first(a, b);
    CHECK(f.cause == diff::Cause::kRngState);
    REQUIRE(f.params.size() == 1);
    CHECK(f.params[0].meaning == diff::ParamMeaning::kRngState);
    CHECK(f.params[0].rngSource == "philox");
  }
  SECTION("a state captured into a CUDA graph holds device pointers, not a seed") {
    static int64_t seed = 0, offset = 0;
    a.attention = at::PhiloxCudaState(&seed, &offset, 16);
    b.attention = at::PhiloxCudaState(&seed + 1, &offset, 16);
    CHECK(pair.first(a, b).cause != diff::Cause::kRngState);
  }
}
#endif
