// What ran while the framework timed candidates is set aside (FORMAT.md,
// Origin.benchmarking): Inductor's autotuner, at a kernel's first call,
// flushes the L2 cache, clones the buffers the kernel mutates and launches
// the kernel once per candidate configuration, on the program's tensors; a
// run that finds the choice in Inductor's cache launches none of it.
// Property tests on random programs: run A autotunes before some launches,
// run B before none (or before others, with other candidates); the runs are
// identical, each run's operations set aside are counted, and a divergence
// planted after the autotuning is found alone, at its index among the
// program's own operations. Unmarked, the same launches are a divergence.
// Each configuration's code is a module of its own, as Triton compiles it:
// a run that kept another configuration with the same grid and block ran
// another binary, which the diff names (FORMAT.md, ModuleLoad.digest).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "diff/culprits.h"
#include "diff/diff.h"
#include "diff/wording.h"
#include "trace_format/hash_primitives.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

struct Launch {
  int kernel;
  int input;
  int output;
  int candidates = 0;    // autotuned first, with this many candidate configurations
  bool perturb = false;  // its output comes out different
  uint32_t grid = 8;     // the configuration it runs with (the autotuner's choice)
  int binary = 0;        // and that configuration's code
};

constexpr int kBuffers = 8;
constexpr uint64_t kSize = 8 << 10;

std::vector<Launch> randomProgram(std::mt19937_64& rng) {
  std::vector<Launch> launches;
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  for (int i = 0; i < 80; ++i) launches.push_back({pick(4), pick(kBuffers), pick(kBuffers)});
  return launches;
}

// Writes a run: kBuffers allocations, then the launches. A launch autotuned
// first is preceded by what the autotuner does, each event's origin marked
// benchmarking unless `unmarked`: a memset that flushes the L2 cache (a
// buffer of its own), a clone of the output (an allocation and a copy), and
// a launch of the kernel per candidate with another grid, writing the clone
// (the candidates' bytes: differing ones). A kernel's code in a
// configuration is loaded as a module before its first launch, with its
// digest unless `noDigests` (an older trace).
fs::path write(const fs::path& dir, const std::vector<Launch>& launches, bool unmarked = false,
               bool noDigests = false) {
  fs::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0;
  uint32_t ordinals = 0;
  std::map<std::pair<int, int>, uint32_t> modules;  // (kernel, binary): ordinal, in load order
  auto moduleOf = [&](int kernel, int binary) {
    auto [it, fresh] = modules.try_emplace({kernel, binary}, static_cast<uint32_t>(modules.size() + 1));
    if (fresh) {
      const uint64_t digest = noDigests ? 0 : hash::fmix(0xc0de + static_cast<uint64_t>(kernel * 64 + binary));
      w.append(Event{seq++, seq, 0, ModuleLoad{it->second, BlobRef{}, 90, digest}, std::nullopt});
    }
    return it->second;
  };
  std::map<int, Allocation> live;
  std::map<int, uint64_t> content;
  auto allocate = [&](uint64_t size) {
    const uint32_t ordinal = ++ordinals;
    Allocation al{ordinal, 0x7f0000000000 + uint64_t{ordinal} * 0x100000, size, AllocationKind::kDevice, 0, 0};
    w.append(Event{seq++, seq, 0, al, std::nullopt});
    return al;
  };
  for (int b = 0; b < kBuffers; ++b) {
    live[b] = allocate(kSize);
    content[b] = hash::fmix(0x5eed + static_cast<uint64_t>(b));
  }
  std::optional<Origin> benchmarking;
  if (!unmarked) {
    benchmarking = Origin{"CachingAutotuner.benchmark_all_configs", {"CachingAutotuner.benchmark_all_configs"}};
    benchmarking->benchmarking = true;
  }
  const char* kernels[] = {"triton_red_fused_sum_0", "triton_poi_fused_add_1", "triton_per_fused_mean_2",
                           "triton_poi_fused_mul_3"};
  auto launch = [&](int kernel, int binary, const Allocation& in, uint64_t inDigest, const Allocation& out,
                    uint64_t outDigest, uint32_t grid, const std::optional<Origin>& origin) {
    KernelLaunch k;
    k.module = moduleOf(kernel, binary);
    k.function = kernels[kernel];
    k.grid = {grid, 1, 1};
    k.block = {128, 1, 1};
    appendPointerParam(k, out.address, out.ordinal, 0);
    appendPointerParam(k, in.address, in.ordinal, 0);
    k.inputs.push_back({DeviceRange{in.address, in.size, in.ordinal, 0}, inDigest, {}, std::nullopt});
    k.outputs.push_back({DeviceRange{out.address, out.size, out.ordinal, 0}, outDigest, {}, std::nullopt});
    w.append(Event{seq++, seq, 0, k, origin});
  };
  for (const Launch& l : launches) {
    const uint64_t out = hash::fmix(content.at(l.input) + static_cast<uint64_t>(l.kernel) + (l.perturb ? 1 : 0));
    if (l.candidates > 0) {
      const Allocation flush = allocate(kSize * 4);
      w.append(Event{seq++, seq, 0, Memset{0, false, {flush.address, flush.size, flush.ordinal, 0}, 0, 4, 7},
                     benchmarking});
      const Allocation clone = allocate(kSize);
      Memcpy copy;
      copy.kind = MemcpyKind::kDeviceToDevice;
      copy.size = kSize;
      copy.src = {live.at(l.output).address, kSize, live.at(l.output).ordinal, 0};
      copy.dst = {clone.address, kSize, clone.ordinal, 0};
      copy.digest = content.at(l.output);
      w.append(Event{seq++, seq, 0, copy, benchmarking});
      for (int c = 0; c < l.candidates; ++c) {
        launch(l.kernel, c + 1, live.at(l.input), content.at(l.input), clone, out ^ static_cast<uint64_t>(c * 7),
               8u << c, benchmarking);
      }
      w.append(Event{seq++, seq, 0, Free{clone.ordinal, clone.address}, std::nullopt});
      w.append(Event{seq++, seq, 0, Free{flush.ordinal, flush.address}, std::nullopt});
    }
    launch(l.kernel, l.binary, live.at(l.input), content.at(l.input), live.at(l.output), out, l.grid, std::nullopt);
    content[l.output] = out;
  }
  w.close();
  return dir;
}

struct Runs {
  fs::path root = fs::temp_directory_path() / ("gpurr-benchmarking-" + std::to_string(getpid()));
  ~Runs() { fs::remove_all(root); }
  diff::ProcessDiff diff(const std::vector<Launch>& a, const std::vector<Launch>& b, bool unmarked = false) {
    TraceReader ra(write(root / "a.gpurr", a, unmarked)), rb(write(root / "b.gpurr", b, unmarked));
    return diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
  }
};

// Autotunes up to four of the program's launches (each kernel at its first
// call, as Inductor does), with 2 to 4 candidates; returns the operations
// that adds (a memset, a copy and a launch per candidate each).
uint64_t autotune(std::vector<Launch>& launches, std::mt19937_64& rng) {
  std::set<int> tuned;
  uint64_t added = 0;
  for (Launch& l : launches) {
    if (!tuned.insert(l.kernel).second || std::uniform_int_distribution<int>(0, 3)(rng) == 0) continue;
    l.candidates = std::uniform_int_distribution<int>(2, 4)(rng);
    added += 2 + static_cast<uint64_t>(l.candidates);
  }
  return added;
}

}  // namespace

TEST_CASE("what one run launched while autotuning is set aside, not a divergence", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Launch> b = randomProgram(rng);  // warm: the choices from the cache
    std::vector<Launch> a = b;                          // cold: autotunes
    const uint64_t added = autotune(a, rng);
    if (added == 0) continue;
    INFO("seed " << seed << ", " << added << " operations of autotuning in run A");
    const diff::ProcessDiff d = runs.diff(a, b);
    INFO((d.firstDivergence ? d.firstDivergence->summary : std::string()));
    CHECK(d.identical);
    CHECK(d.pathDivergenceCount == 0);
    CHECK(d.benchmarkingA == added);
    CHECK(d.benchmarkingB == 0);
    CHECK(d.opsA == d.opsB);
    CHECK(d.opsA == a.size());
    // Unmarked (a recorder without the framework layer's mark), the same
    // runs take different paths.
    const diff::ProcessDiff u = runs.diff(a, b, true);
    CHECK_FALSE(u.identical);
    CHECK(u.benchmarkingA == 0);
  }
}

TEST_CASE("both runs autotuning other kernels, with other candidates, are identical", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 100; seed < 120; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<Launch> a = randomProgram(rng);
    std::vector<Launch> b = a;
    const uint64_t addedA = autotune(a, rng), addedB = autotune(b, rng);
    INFO("seed " << seed);
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.identical);
    CHECK(d.benchmarkingA == addedA);
    CHECK(d.benchmarkingB == addedB);
  }
}

TEST_CASE("after autotuning, the one launch that differs is named alone, at its place in the program",
          "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 200; seed < 230; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Launch> program = randomProgram(rng);
    std::vector<Launch> a = program, b = program;
    autotune(a, rng);
    const size_t perturbed = 50 + std::uniform_int_distribution<size_t>(0, 25)(rng);
    b[perturbed].perturb = true;
    INFO("seed " << seed << ", launch " << perturbed);
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.pathDivergenceCount == 0);
    REQUIRE(d.firstDivergence.has_value());
    CHECK_FALSE(d.firstDivergence->path);
    CHECK(d.firstDivergence->a.index == perturbed);
    CHECK(d.firstDivergence->b.index == perturbed);
    // Its launch number is the recorder's, which counts the candidates'.
    uint64_t candidates = 0;
    for (size_t i = 0; i < perturbed; ++i) candidates += static_cast<uint64_t>(a[i].candidates);
    CHECK(d.firstDivergence->a.launchIndex == perturbed + candidates);
    CHECK(d.firstDivergence->b.launchIndex == perturbed);
    CHECK(d.firstDivergence->cause == diff::Cause::kNondeterministicKernel);
    CHECK(d.blast.independentCount == 0);
  }
}

namespace {

// Random programs that both runs autotune, run B keeping another
// configuration for the reduction from its first launch on, which adds in
// another order: another grid, or (`sameGrid`) another binary launched with
// the same grid and block. Each pair, diffed with the known culprits, is an
// algorithm choice at the first reduction, with the culprit for autotuned
// reductions; `check` sees what else the diff said, and the programs.
template <typename Check>
void reconfiguredReduction(uint64_t firstSeed, bool sameGrid, Check check) {
  Runs runs;
  const diff::Culprits culprits =
      diff::Culprits::load(std::filesystem::path(GPURR_SOURCE_DIR) / "data/known_culprits.json");
  for (uint64_t seed = firstSeed; seed < firstSeed + 20; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Launch> program = randomProgram(rng);
    std::vector<Launch> a = program, b = program;
    autotune(a, rng);
    autotune(b, rng);
    size_t first = a.size();
    for (size_t i = 0; i < b.size(); ++i) {
      if (b[i].kernel != 0) continue;
      first = std::min(first, i);
      if (sameGrid) {
        b[i].binary = 5;  // a loop's block size, say
      } else {
        b[i].grid = 32;
      }
      b[i].perturb = true;
    }
    if (first == a.size()) continue;
    INFO("seed " << seed << ", first reduction at launch " << first);
    TraceReader ra(write(runs.root / "a.gpurr", a)), rb(write(runs.root / "b.gpurr", b));
    const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, &culprits);
    REQUIRE(d.firstDivergence.has_value());
    const diff::FirstDivergence& f = *d.firstDivergence;
    CHECK(f.path == !sameGrid);
    CHECK(f.cause == diff::Cause::kAlgorithmChoice);
    CHECK(f.a.index == first);
    CHECK(f.a.name == "triton_red_fused_sum_0");
    REQUIRE(f.known.size() == 1);
    CHECK(f.known[0].id == "inductor-reduction-autotune");
    check(runs, culprits, f, first, a, b);
  }
}

bool says(const diff::FirstDivergence& f, const std::string& words) {
  const std::vector<std::string> said = diff::sentences(f.evidence);
  return std::any_of(said.begin(), said.end(), [&](const std::string& s) { return s.find(words) != std::string::npos; });
}

}  // namespace

TEST_CASE("two runs that autotuned a reduction to other configurations, computing other bits, are an algorithm "
          "choice there, named", "[diff][property]") {
  reconfiguredReduction(300, false, [](Runs&, const diff::Culprits&, const diff::FirstDivergence& f, size_t,
                                       const std::vector<Launch>&, const std::vector<Launch>&) {
    CHECK(says(f, "launched with another configuration: triton_red_fused_sum_0 grid (8,1,1) block (128,1,1) in run "
                  "A, grid (32,1,1) block (128,1,1) in run B"));
  });
}

TEST_CASE("two runs that kept configurations of a reduction with the same grid and block, computing other bits, "
          "ran other binaries: an algorithm choice there, named", "[diff][property]") {
  reconfiguredReduction(400, true, [](Runs& runs, const diff::Culprits& culprits, const diff::FirstDivergence& f,
                                      size_t first, const std::vector<Launch>& a, const std::vector<Launch>& b) {
    CHECK(says(f, "the kernel's code differs between the runs: run A launched it from module #"));
    // Without the modules' digests nothing tells the code apart: the same
    // kernel on the same inputs wrote other bytes.
    TraceReader oa(write(runs.root / "oa.gpurr", a, false, true)), ob(write(runs.root / "ob.gpurr", b, false, true));
    const diff::ProcessDiff old = diff::diffTraces(oa, ob, diff::DiffOptions{}, &culprits);
    REQUIRE(old.firstDivergence.has_value());
    CHECK(old.firstDivergence->a.index == first);
    CHECK(old.firstDivergence->cause == diff::Cause::kNondeterministicKernel);
  });
}
