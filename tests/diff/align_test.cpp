// Unit tests of the diff library's pieces that need no trace: the alignment
// (against a brute-force LCS), the labelled interval map, the culprits file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include "diff/align.h"
#include "diff/culprits.h"
#include "diff/intervals.h"
#include "trace_format/scan.h"
#include "trace_format/trace.h"

using namespace gpurr::diff;

namespace {

// Checks that the runs cover both sequences in order and that matches match.
void checkCover(const Alignment& al, const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  uint64_t i = 0, j = 0, matched = 0;
  for (const AlignedRun& r : al.runs) {
    REQUIRE(r.aBegin == i);
    REQUIRE(r.bBegin == j);
    if (r.match) {
      REQUIRE(r.aCount == r.bCount);
      for (uint64_t k = 0; k < r.aCount; ++k) REQUIRE(a[i + k] == b[j + k]);
      matched += r.aCount;
    } else {
      REQUIRE(r.aCount + r.bCount > 0);
    }
    i += r.aCount;
    j += r.bCount;
  }
  REQUIRE(i == a.size());
  REQUIRE(j == b.size());
  REQUIRE(matched == al.matched);
}

uint64_t lcs(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  std::vector<std::vector<uint64_t>> t(a.size() + 1, std::vector<uint64_t>(b.size() + 1, 0));
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      t[i][j] = a[i - 1] == b[j - 1] ? t[i - 1][j - 1] + 1 : std::max(t[i - 1][j], t[i][j - 1]);
    }
  }
  return t[a.size()][b.size()];
}

}  // namespace

TEST_CASE("identical sequences align as one match") {
  const std::vector<uint64_t> a = {1, 2, 3, 4};
  const Alignment al = align(a, a);
  REQUIRE(al.runs.size() == 1);
  REQUIRE(al.runs[0].match);
  REQUIRE(al.matched == 4);
}

TEST_CASE("a replaced stretch is reported on both sides and re-synchronised") {
  // Run B took another algorithm: one kernel (9) became three (7, 8, 7).
  const std::vector<uint64_t> a = {1, 2, 9, 3, 4, 5};
  const std::vector<uint64_t> b = {1, 2, 7, 8, 7, 3, 4, 5};
  const Alignment al = align(a, b);
  checkCover(al, a, b);
  REQUIRE(al.runs.size() == 3);
  REQUIRE_FALSE(al.runs[1].match);
  REQUIRE(al.runs[1].aBegin == 2);
  REQUIRE(al.runs[1].aCount == 1);
  REQUIRE(al.runs[1].bBegin == 2);
  REQUIRE(al.runs[1].bCount == 3);
  REQUIRE(al.matched == 5);
}

TEST_CASE("insertions and deletions at the ends") {
  const std::vector<uint64_t> a = {5, 1, 2, 3};
  const std::vector<uint64_t> b = {1, 2, 3, 6, 6};
  const Alignment al = align(a, b);
  checkCover(al, a, b);
  REQUIRE(al.matched == 3);
  REQUIRE(al.runs.front().aCount == 1);
  REQUIRE(al.runs.front().bCount == 0);
  REQUIRE(al.runs.back().bCount == 2);
  REQUIRE(align({}, b).runs.size() == 1);
  REQUIRE(align(a, {}).matched == 0);
}

TEST_CASE("alignment is minimal on random sequences, windowed or not") {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 200; ++round) {
    std::vector<uint64_t> a(rng() % 60), b;
    for (auto& x : a) x = rng() % 5;
    b = a;
    for (int e = 0; e < 6; ++e) {
      const int kind = rng() % 3;
      if (kind == 0 && !b.empty()) b.erase(b.begin() + rng() % b.size());
      else if (kind == 1) b.insert(b.begin() + (b.empty() ? 0 : rng() % b.size()), rng() % 5);
      else if (!b.empty()) b[rng() % b.size()] = rng() % 5;
    }
    const Alignment full = align(a, b);
    checkCover(full, a, b);
    REQUIRE(full.matched == lcs(a, b));
    REQUIRE_FALSE(full.bounded);
    AlignOptions small;
    small.window = 8;
    const Alignment windowed = align(a, b, small);
    checkCover(windowed, a, b);
    REQUIRE(windowed.matched <= full.matched);
  }
}

TEST_CASE("lone substitutions among distinct identities align minimally") {
  // As a stale word makes them: one launch in a few differs in identity
  // alone; now and then a launch more or less in one run.
  std::mt19937_64 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<uint64_t> a(1500), b;
    for (auto& x : a) x = rng() % 100000;
    b = a;
    const uint64_t every = 2 + rng() % 8;
    for (size_t i = rng() % every; i < b.size(); i += every) b[i] = 200000 + rng() % 100000;
    for (int e = 0; e < 4; ++e) {
      if (rng() % 2 == 0) b.erase(b.begin() + rng() % b.size());
      else b.insert(b.begin() + rng() % b.size(), 300000 + rng() % 100000);
    }
    for (const uint64_t window : {uint64_t{4096}, uint64_t{64}}) {
      AlignOptions options;
      options.window = window;
      const Alignment al = align(a, b, options);
      checkCover(al, a, b);
      if (window == 4096) REQUIRE(al.matched == lcs(a, b));
      REQUIRE_FALSE(al.bounded);
    }
  }
  // A substitution next to a repeated identity is not taken for one: the
  // extra operation before two equal ones is an insertion.
  const std::vector<uint64_t> a{1, 2, 7, 7, 9, 10, 11}, b{1, 2, 8, 7, 7, 9, 10, 11};
  const Alignment al = align(a, b);
  REQUIRE(al.matched == 7);
  REQUIRE(al.runs.size() == 3);
  CHECK(al.runs[1].aCount == 0);
  CHECK(al.runs[1].bCount == 1);
}

TEST_CASE("a substituted identity that occurs again a few operations on is left to Myers") {
  // Run B's four operations differ from run A's, then run B takes a stretch
  // of its own, then repeats run A's four: matching them there matches more.
  std::vector<uint64_t> a{0, 11, 12, 13, 14, 99, 50, 50, 50, 50, 50, 1};
  std::vector<uint64_t> b{0, 21, 22, 23, 24, 99, 31, 32, 33, 34, 35, 36, 37, 11, 12, 13, 14, 50, 50, 50, 50, 50, 2};
  const Alignment al = align(a, b);
  checkCover(al, a, b);
  CHECK(al.matched == lcs(a, b));
  CHECK(al.matched == 10);
}

TEST_CASE("a window with too few identities in common is one stretch at once") {
  // 100 operations each, 30 in common: at least 140 edits, beyond 100.
  std::vector<uint64_t> a(100), b(100);
  for (uint64_t i = 0; i < 100; ++i) a[i] = i, b[i] = i < 30 ? 29 - i : 1000 + i;
  AlignOptions options;
  options.maxEdits = 100;
  const Alignment beyond = align(a, b, options);
  checkCover(beyond, a, b);
  CHECK(beyond.bounded);
  CHECK(beyond.matched == 0);
  // 60 in common, in order: 80 edits, within the bound, and minimal.
  for (uint64_t i = 0; i < 60; ++i) b[i] = a[i];
  const Alignment within = align(a, b, options);
  checkCover(within, a, b);
  CHECK_FALSE(within.bounded);
  CHECK(within.matched == 60);
}

TEST_CASE("windows re-synchronise after a long stretch") {
  std::vector<uint64_t> a, b;
  for (uint64_t i = 0; i < 20000; ++i) a.push_back(i);
  b = a;
  // Run B has 300 extra operations in the middle, then goes on as run A.
  b.insert(b.begin() + 10000, 300, 999999);
  AlignOptions options;
  options.window = 256;
  const Alignment al = align(a, b, options);
  checkCover(al, a, b);
  REQUIRE(al.matched == a.size());
  REQUIRE(al.runs.size() == 3);
  REQUIRE(al.runs[1].bCount == 300);
}

TEST_CASE("the edit bound turns a hopeless window into one stretch") {
  std::vector<uint64_t> a(100), b(100);
  for (uint64_t i = 0; i < 100; ++i) a[i] = i, b[i] = 1000 + i;
  AlignOptions options;
  options.maxEdits = 10;
  const Alignment al = align(a, b, options);
  checkCover(al, a, b);
  REQUIRE(al.bounded);
  REQUIRE(al.matched == 0);
}

TEST_CASE("runs with more than twice the operations in every step align within the bound in halved windows") {
  // A step of 10 operations in run A; run B's has 15 more of its own.
  std::vector<uint64_t> a, b;
  for (uint64_t step = 0; step < 600; ++step) {
    for (uint64_t k = 0; k < 10; ++k) a.push_back(k), b.push_back(k);
    for (uint64_t k = 0; k < 15; ++k) b.push_back(100 + k);
  }
  const Alignment al = align(a, b);
  checkCover(al, a, b);
  CHECK_FALSE(al.bounded);
  CHECK(al.matched == a.size());
  // Nothing in common: one stretch, as before.
  for (uint64_t& k : b) k += 1000;
  const Alignment none = align(a, b);
  checkCover(none, a, b);
  CHECK(none.bounded);
  CHECK(none.matched == 0);
}

TEST_CASE("interval labels: assign, overwrite, clear, query") {
  IntervalLabels m;
  m.assign(3, 0, 100, 0);
  REQUIRE(m.minLabel(3, 50, 60) == 0);
  REQUIRE_FALSE(m.minLabel(4, 0, 100));
  REQUIRE_FALSE(m.minLabel(3, 100, 200));
  m.assign(3, 40, 60, 2);
  REQUIRE(m.minLabel(3, 45, 50) == 2);
  REQUIRE(m.minLabel(3, 30, 50) == 0);
  REQUIRE(m.covered(3, 0, 200) == 100);
  m.assign(3, 20, 80, -1);  // identical outputs: no longer tainted
  REQUIRE(m.covered(3, 0, 200) == 40);
  REQUIRE_FALSE(m.minLabel(3, 20, 80));
  REQUIRE(m.minLabel(3, 79, 81) == 0);
  m.assign(3, 0, UINT64_MAX, -1);
  REQUIRE(m.empty());
}

TEST_CASE("the culprits file loads and matches") {
  const Culprits c = Culprits::load(std::filesystem::path(GPURR_SOURCE_DIR) / "data/known_culprits.json");
  REQUIRE(c.entries().size() > 10);
  FirstDivergence d;
  d.cause = Cause::kNondeterministicKernel;
  d.mechanism = d.cause;
  d.a.kind = OpKind::kLaunch;
  d.a.name = "_ZN2at6native19indexFuncLargeIndexIfEEvPfPKfPKll";
  d.b = d.a;
  const auto matches = c.match(d, {});
  REQUIRE(matches.size() == 1);
  REQUIRE(matches[0].id == "torch-index-add");
  REQUIRE(matches[0].matchedBy == "kernel");
  d.cause = Cause::kRngState;  // the entry does not explain an RNG difference
  d.mechanism = d.cause;
  REQUIRE(c.match(d, {}).empty());

}

TEST_CASE("names of hundreds of kilobytes are matched without overflowing the stack") {
  // A `.*` in a pattern used to recurse once per character it consumed: 30 KB
  // of name were enough to overflow the stack.
  const Culprits c = Culprits::load(std::filesystem::path(GPURR_SOURCE_DIR) / "data/known_culprits.json");
  FirstDivergence d;
  d.cause = d.mechanism = Cause::kNondeterministicKernel;
  d.a.kind = OpKind::kLaunch;
  const std::string name = "max_pool3d_with_indices_backward" + std::string(400000, 'x');
  d.a.name = "_Z" + std::to_string(name.size()) + name + "v";
  d.b = d.a;
  auto matches = c.match(d, {});  // by the kernel
  REQUIRE(matches.size() == 1);
  CHECK(matches[0].matchedBy == "kernel");
  d.a.origin = d.b.origin = gpurr::trace::Origin{"aten::embedding_bag" + std::string(400000, 'x') + "_backward", {}};
  d.a.name = d.b.name = "_Z6kernelPfS_i";
  matches = c.match(d, {});  // by the framework op
  REQUIRE(matches.size() == 1);
  CHECK(matches[0].matchedBy == "framework op");
}

TEST_CASE("uninitialised memory read in a PyTorch program matches torch.empty's entry and its fix") {
  const Culprits c = Culprits::load(std::filesystem::path(GPURR_SOURCE_DIR) / "data/known_culprits.json");
  FirstDivergence d;
  d.cause = d.mechanism = Cause::kUninitialisedMemory;
  d.a.kind = OpKind::kLaunch;
  d.a.name = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_14AddcmulFunctorIfEESt5arrayIPcLm3EEEEviT0_T1_";
  d.b = d.a;
  auto matches = c.match(d, {});  // no origin: by the kernel
  REQUIRE(matches.size() == 1);
  CHECK(matches[0].id == "torch-uninitialised-memory");
  CHECK(matches[0].matchedBy == "kernel");
  CHECK_THAT(matches[0].fix, Catch::Contains("fill_uninitialized_memory"));
  d.a.origin = d.b.origin = gpurr::trace::Origin{"aten::native_batch_norm", {"aten::native_batch_norm"}};
  matches = c.match(d, {});
  REQUIRE(matches.size() == 1);
  CHECK(matches[0].matchedBy == "framework op");
  // Another program's kernel, without a framework op: nothing known.
  d.a.origin = d.b.origin = std::nullopt;
  d.a.name = d.b.name = "_Z6kernelPfS_i";
  CHECK(c.match(d, {}).empty());
  // Not for another verdict.
  d.a.name = d.b.name = "_ZN2at6native18elementwise_kernelILi128ELi4EEEviT1_";
  d.cause = d.mechanism = Cause::kScalarParameters;
  CHECK(c.match(d, {}).empty());
}

TEST_CASE("host input in a PyTorch program is matched to its host generators and DataLoader") {
  const Culprits c = Culprits::load(std::filesystem::path(GPURR_SOURCE_DIR) / "data/known_culprits.json");
  FirstDivergence d;
  d.cause = d.mechanism = Cause::kHostInput;
  d.a.kind = OpKind::kMemcpy;
  d.a.name = "memcpy HtoD";
  d.b = d.a;
  CHECK(c.match(d, {}).empty());  // no framework op: not known to be PyTorch's
  // batch.to("cuda") at train.py:40
  d.a.origin = d.b.origin = gpurr::trace::Origin{"aten::copy_", {"aten::to", "aten::_to_copy", "aten::copy_"},
                                                 gpurr::trace::Phase::kForward, "", "", "/home/user/train.py", 40};
  const auto matches = c.match(d, {});
  REQUIRE(matches.size() == 1);
  CHECK(matches[0].id == "torch-host-data");
  CHECK(matches[0].matched == "aten::copy_ at train.py:40");
  CHECK_THAT(matches[0].fix, Catch::Contains("worker_init_fn") && Catch::Contains("torch.manual_seed"));
  d.cause = d.mechanism = Cause::kNondeterministicKernel;
  CHECK(c.match(d, {}).empty());
}

TEST_CASE("kernels torch.compile generated are known by their names: atomic scatters, autotuned reductions") {
  const Culprits c = Culprits::load(std::filesystem::path(GPURR_SOURCE_DIR) / "data/known_culprits.json");
  FirstDivergence d;
  d.cause = d.mechanism = Cause::kNondeterministicKernel;
  d.a.kind = OpKind::kLaunch;
  // Inside a compiled region: the launch's op is the region's.
  d.a.origin = gpurr::trace::Origin{"CompiledFunctionBackward",
                                    {"autograd::engine::evaluate_function: CompiledFunctionBackward",
                                     "CompiledFunctionBackward"},
                                    gpurr::trace::Phase::kBackward, "", "", "/home/user/train.py", 52, 0, 7};
  const auto knownAs = [&](const std::string& kernel) {
    d.a.name = kernel;
    d.b = d.a;
    std::vector<std::string> ids;
    for (const CulpritMatch& m : c.match(d, {})) ids.push_back(m.id + " by " + m.matchedBy);
    return ids;
  };
  const std::vector<std::string> atomic = {"inductor-atomic-accumulate by kernel"};
  d.a.name = "triton_poi_fused_embedding_dense_backward_3";
  d.b = d.a;
  CHECK(c.match(d, {}).at(0).matched == "CompiledFunctionBackward at train.py:52");
  CHECK(knownAs("triton_poi_fused_embedding_dense_backward_3") == atomic);
  CHECK(knownAs("triton_poi_fused_add_index_add_mul_0") == atomic);
  CHECK(knownAs("triton_poi_fused_scatter_add_zeros_1") == atomic);
  CHECK(knownAs("triton_red_fused__unsafe_index_put_sum_2") == atomic);
  CHECK(knownAs("triton_poi_fused_col2im_4") == atomic);
  CHECK(knownAs("cpp_fused_embedding_dense_backward_expand_0") == atomic);  // Inductor's CPU kernels
  // Its other kernels, the pointwise scatters among them, are not known.
  CHECK(knownAs("triton_poi_fused_add_mul_relu_0").empty());
  CHECK(knownAs("triton_poi_fused_select_scatter_slice_scatter_1").empty());
  CHECK(knownAs("triton_per_fused_native_layer_norm_2").empty());
  // Nor is an eager kernel: its op names it.
  CHECK(knownAs("_ZN2at6native19indexFuncLargeIndexIfEEvPfPKfPKll").empty());
  // Nor another verdict.
  d.cause = d.mechanism = Cause::kScalarParameters;
  CHECK(knownAs("triton_poi_fused_embedding_dense_backward_3").empty());
  // Two runs that autotuned a reduction to other configurations: the same
  // kernel with another grid, other bits (a path divergence). A pointwise
  // kernel's configuration changes no bits.
  d.cause = d.mechanism = Cause::kAlgorithmChoice;
  const std::vector<std::string> tuned = {"inductor-reduction-autotune by kernel"};
  CHECK(knownAs("triton_red_fused_sum_0") == tuned);
  CHECK(knownAs("triton_per_fused_native_layer_norm_2") == tuned);
  CHECK(knownAs("triton_poi_fused_add_mul_relu_0").empty());
  CHECK(knownAs("cpp_fused_sum_0").empty());
}

TEST_CASE("known culprits are matched by op first, then by the forward op of a backward launch, then by kernel") {
  const Culprits c = Culprits::load(std::filesystem::path(GPURR_SOURCE_DIR) / "data/known_culprits.json");
  FirstDivergence d;
  d.cause = d.mechanism = Cause::kNondeterministicKernel;
  d.a.kind = OpKind::kLaunch;
  d.a.name = "_ZN2at6native19indexFuncLargeIndexIfEEvPfPKfPKll";
  // index_add_ run by the backward of an index_select at train.py:17.
  d.a.origin = gpurr::trace::Origin{"aten::index_add_",
                                    {"autograd::engine::evaluate_function: IndexSelectBackward0", "aten::index_add_"},
                                    gpurr::trace::Phase::kBackward, "aten::index_select", "net.embed",
                                    "/home/user/train.py", 17, 0, 3};
  d.b = d.a;
  auto matches = c.match(d, {});
  REQUIRE(matches.size() == 1);
  CHECK(matches[0].id == "torch-index-add");
  CHECK(matches[0].matchedBy == "framework op");
  CHECK(matches[0].matched == "aten::index_add_, backward of aten::index_select at train.py:17");

  // An op the entry does not name, in the backward of index_select: the
  // forward op matches.
  d.a.origin->op = d.b.origin->op = "aten::zero_";
  matches = c.match(d, {});
  REQUIRE(matches.size() == 1);
  CHECK(matches[0].matchedBy == "forward op");
  CHECK(matches[0].matched == "backward of aten::index_select at train.py:17 (aten::zero_)");

  // In forward, an op the entry does not name: the kernel name does not
  // stand in for a known op.
  d.a.origin->phase = d.b.origin->phase = gpurr::trace::Phase::kForward;
  d.a.origin->forwardOp = d.b.origin->forwardOp = "";
  CHECK(c.match(d, {}).empty());

  // No origin, no annotation: the kernel name.
  d.a.origin.reset();
  d.b.origin.reset();
  matches = c.match(d, {});
  REQUIRE(matches.size() == 1);
  CHECK(matches[0].matchedBy == "kernel");
  CHECK(matches[0].matched.empty());

  // A FrameworkOp annotation (traces without origins) is the op.
  d.a.annotations = {gpurr::trace::FrameworkOp{"aten::index_add_"}};
  matches = c.match(d, {});
  REQUIRE(matches.size() == 1);
  CHECK(matches[0].matchedBy == "framework op");
  CHECK(matches[0].matched.empty());

  // An entry whose nondeterminism an argument decides says which (the trace
  // holds no scalar arguments); the others say nothing of arguments.
  d.a.annotations = {gpurr::trace::FrameworkOp{"aten::index_put_"}};
  matches = c.match(d, {});
  REQUIRE(!matches.empty());
  CHECK(matches[0].id == "torch-index-put-accumulate");
  CHECK(matches[0].argument.find("accumulate=") != std::string::npos);
  d.a.annotations = {gpurr::trace::FrameworkOp{"aten::index_add_"}};
  CHECK(c.match(d, {})[0].argument.empty());

  // Entries that name no op still match by kernel name when the op is known,
  // after those matched by op.
  d.cause = d.mechanism = Cause::kEnvironment;
  d.a.name = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x128x32_splitK_kernel__5x_cublas";
  d.a.annotations.clear();
  d.a.origin = gpurr::trace::Origin{"aten::mm", {"aten::mm"}, gpurr::trace::Phase::kForward, "", "net.fc", "", 0, 0, 1};
  d.b = d.a;
  matches = c.match(d, {{"env PYTHONHASHSEED", "0", std::nullopt, true}});
  REQUIRE(matches.size() == 2);
  CHECK(matches[0].id == "cublas-workspace");
  CHECK(matches[0].matchedBy == "kernel");
  CHECK(matches[1].id == "python-hash-seed");
  CHECK(matches[1].matchedBy == "environment");
}

TEST_CASE("a culprits file with bad entries is refused") {
  const auto bad = std::filesystem::path(GPURR_BINARY_DIR) / "bad_culprits.json";
  std::ofstream(bad) << R"({"entries": [{"id": "x", "op": "y", "fix": "z", "kernel": "(unclosed"}]})";
  REQUIRE_THROWS_WITH(Culprits::load(bad), Catch::Contains("invalid regular expression"));
  std::ofstream(bad) << R"({"entries": [{"id": "x", "op": "y", "fix": "z"}]})";
  REQUIRE_THROWS_WITH(Culprits::load(bad), Catch::Contains("needs one of"));
}

// The scan path behind the diff (trace_format/scan.h, with its wire-format
// fast path for launches) must see exactly what the full decoder sees.
TEST_CASE("scanEvents agrees with forEach on every golden trace") {
  using namespace gpurr::trace;
  namespace fs = std::filesystem;
  std::vector<fs::path> traces = {fs::path(GPURR_SOURCE_DIR) / "examples/synthetic.gpurr"};
  for (const auto& e : fs::recursive_directory_iterator(fs::path(GPURR_SOURCE_DIR) / "tests/diff/cases")) {
    if (e.is_directory() && e.path().extension() == ".gpurr") traces.push_back(e.path());
  }
  REQUIRE(traces.size() > 20);
  size_t launches = 0;
  for (const fs::path& t : traces) {
    INFO(t.string());
    ReadLimit limit;  // corrupt_block's run B: both read up to its corrupt block
    try {
      TraceReader(t).readAll();
    } catch (const CorruptBlock& e) {
      REQUIRE(e.narrowed(t, limit));
    }
    const TraceReader reader(t, limit);
    const std::vector<Event> events = reader.readAll();
    size_t i = 0;
    scanEvents(reader, [&](const ScanEvent& s) {
      REQUIRE(i < events.size());
      const Event& e = events[i++];
      REQUIRE(s.seq == e.seq);
      REQUIRE(static_cast<size_t>(s.kind) == e.payload.index());
      auto sameRanges = [](std::span<const ScanRange> a, const std::vector<RangeDigest>& b) {
        REQUIRE(a.size() == b.size());
        for (size_t k = 0; k < a.size(); ++k) {
          REQUIRE(a[k].range == b[k].range);
          REQUIRE(a[k].digest == b[k].digest);
          REQUIRE(a[k].hasChunkDigests == !b[k].chunkDigests.empty());
        }
      };
      if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) {
        ++launches;
        REQUIRE(s.function == k->function);
        REQUIRE(s.module == k->module);
        REQUIRE(s.stream == k->stream);
        REQUIRE(s.grid == k->grid);
        REQUIRE(s.block == k->block);
        REQUIRE(s.cluster == k->cluster);
        REQUIRE(s.sharedMemBytes == k->sharedMemBytes);
        REQUIRE(std::vector<uint8_t>(s.params.begin(), s.params.end()) == k->params);
        REQUIRE(std::vector<PointerParam>(s.pointers.begin(), s.pointers.end()) == k->pointers);
        REQUIRE(s.hashed == k->hashed);
        REQUIRE(s.hasAnnotations == !k->annotations.empty());
        sameRanges(s.inputs, k->inputs);
        sameRanges(s.outputs, k->outputs);
      } else if (const auto* g = std::get_if<GraphLaunch>(&e.payload)) {
        REQUIRE(s.nodeCount == g->nodeCount);
        sameRanges(s.inputs, g->inputs);
        sameRanges(s.outputs, g->outputs);
      } else if (const auto* m = std::get_if<Memcpy>(&e.payload)) {
        REQUIRE(s.memcpyKind == m->kind);
        REQUIRE(s.outputs[0].range == m->dst);
        REQUIRE(s.outputs[0].digest == m->digest);
      }
      return true;
    });
    REQUIRE(i == events.size());
  }
  REQUIRE(launches > 100);
}

TEST_CASE("a sequence cut short aligns as a prefix of the other") {
  // Steps of the same kernels; run B has one more in step 1 and was
  // stopped after step 44 of 200.
  const std::vector<uint64_t> step = {1, 2, 3, 3, 3, 4, 4, 4};
  std::vector<uint64_t> a, b;
  for (int s = 0; s < 200; ++s) a.insert(a.end(), step.begin(), step.end());
  for (int s = 0; s < 45; ++s) {
    b.insert(b.end(), step.begin(), step.end());
    if (s == 1) b.insert(b.begin() + 9, 3);
  }
  // Counting run A's rest as edits slides run B over later operations of
  // the same kinds.
  const Alignment whole = align(a, b);
  checkCover(whole, a, b);
  CHECK(whole.runs[1].aCount > 0);
  AlignOptions options;
  options.cut = AlignOptions::Cut::kB;
  for (uint64_t window : {uint64_t{4096}, uint64_t{64}}) {
    options.window = window;
    const Alignment al = align(a, b, options);
    checkCover(al, a, b);
    REQUIRE(al.runs.size() == 4);
    CHECK(al.runs[1].aBegin == 9);
    CHECK(al.runs[1].aCount == 0);
    CHECK(al.runs[1].bCount == 1);
    CHECK(al.runs[2].match);
    CHECK(al.runs[3].bCount == 0);
    CHECK(al.runs[3].aBegin == 45 * step.size());
  }
  // The same with the runs' roles swapped.
  options.cut = AlignOptions::Cut::kA;
  options.window = 4096;
  const Alignment swapped = align(b, a, options);
  checkCover(swapped, b, a);
  REQUIRE(swapped.runs.size() == 4);
  CHECK(swapped.runs[1].aCount == 1);
  CHECK(swapped.runs[1].bCount == 0);
  CHECK(swapped.runs[3].aCount == 0);
}

TEST_CASE("a cut sequence's alignment is minimal over the other's prefixes, on random sequences") {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<uint64_t> a(rng() % 60), b;
    for (auto& x : a) x = rng() % 4;
    b = a;
    for (int e = 0; e < 5; ++e) {
      const int kind = rng() % 3;
      if (kind == 0 && !b.empty()) b.erase(b.begin() + rng() % b.size());
      else if (kind == 1) b.insert(b.begin() + (b.empty() ? 0 : rng() % b.size()), rng() % 4);
      else if (!b.empty()) b[rng() % b.size()] = rng() % 4;
    }
    b.resize(b.size() - rng() % (b.size() + 1) / 2);  // cut short
    AlignOptions options;
    options.cut = AlignOptions::Cut::kB;
    const Alignment al = align(a, b, options);
    checkCover(al, a, b);
    // Its edits up to run B's end: what it left of A before then, and of B.
    uint64_t edits = 0, aUsed = 0;
    for (const AlignedRun& r : al.runs) {
      if (r.bBegin >= b.size() && !r.match) break;  // run A's rest
      if (!r.match) edits += r.aCount + r.bCount;
      aUsed = r.aBegin + r.aCount;
    }
    uint64_t best = UINT64_MAX;
    for (size_t i = 0; i <= a.size(); ++i) {
      const std::vector<uint64_t> prefix(a.begin(), a.begin() + static_cast<long>(i));
      best = std::min<uint64_t>(best, i + b.size() - 2 * lcs(prefix, b));
    }
    CHECK(edits == best);
    CHECK(aUsed <= a.size());
  }
}
