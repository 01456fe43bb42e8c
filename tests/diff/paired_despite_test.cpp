// Benign differences the diff pairs launches despite, when the kernel read
// and wrote the same bytes in both runs:
// - a word of a struct passed by value that holds a device address in one
//   run only (bytes PyTorch never writes: the host stack's last value),
//   also where the recorder hashed a range through it in that run;
// - another launch configuration of the same kernel (Inductor times block
//   sizes at a kernel's first call and keeps the fastest).
// Property tests on random programs: one of run B's launches carries such a
// difference; the runs are identical, the report says which launch was
// paired despite it, and a real divergence planted after it is still found,
// alone, with its cause.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "diff/diff.h"
#include "trace_format/hash_primitives.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

struct Launch {
  int kernel;
  std::vector<int> inputs;
  int output;
  int staleTarget = -1;     // run B: word 1 of the functor points into this buffer
  bool nullWord = false;   // word 1 of the functor holds 0 (in run A, and in run B without staleTarget)
  bool otherGrid = false;  // run B: launched with another grid
  bool perturb = false;    // its output comes out different
  bool secondStale = false;  // run B, with staleTarget: word 3 points into the same buffer too
};

constexpr int kBuffers = 10;
constexpr int kUnused = kBuffers;  // one more allocation of the same size, which no launch uses
constexpr uint64_t kSize = 16 << 10;

std::vector<Launch> randomProgram(std::mt19937_64& rng) {
  std::vector<Launch> launches;
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  for (int i = 0; i < 100; ++i) {
    Launch l;
    l.kernel = pick(3);
    for (int j = 0, n = 1 + pick(2); j < n; ++j) l.inputs.push_back(pick(kBuffers));
    l.output = pick(kBuffers);
    launches.push_back(l);
  }
  return launches;
}

// Writes a run: kBuffers allocations, then the launches, each with its
// pointers, then a 32-byte functor struct whose word 1 is never written: a
// host stack address, or in run B where staleTarget says, a device address
// into that buffer, which the recorder then also hashed as an output.
fs::path write(const fs::path& dir, const std::vector<Launch>& launches, bool runB) {
  fs::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0;
  std::map<int, Allocation> live;
  std::map<int, uint64_t> content;
  for (int b = 0; b <= kUnused; ++b) {
    Allocation al{static_cast<uint32_t>(b + 1), 0x7f0000000000 + static_cast<uint64_t>(b) * 0x100000, kSize,
                  AllocationKind::kDevice, 0, 0};
    live[b] = al;
    content[b] = hash::fmix(0x5eed + static_cast<uint64_t>(b));
    w.append(Event{seq++, seq, 0, al, std::nullopt});
  }
  const char* kernels[] = {"_Z6reduceP8ReduceOp", "_Z3catP8CatArray", "_Z4fillPfS_"};
  for (const Launch& l : launches) {
    KernelLaunch k;
    k.function = kernels[l.kernel];
    k.grid = {runB && l.otherGrid ? 16u : 8u, 1, 1};
    k.block = {runB && l.otherGrid ? 64u : 128u, 1, 1};
    auto range = [&](int b) { return DeviceRange{live.at(b).address, kSize, live.at(b).ordinal, 0}; };
    appendPointerParam(k, live.at(l.output).address, live.at(l.output).ordinal, 0);
    uint64_t out = hash::fmix(static_cast<uint64_t>(l.kernel) + 1);
    for (int in : l.inputs) {
      appendPointerParam(k, live.at(in).address, live.at(in).ordinal, 0);
      k.inputs.push_back({range(in), content.at(in), {}, std::nullopt});
      out = hash::fmix(out ^ content.at(in));
    }
    uint64_t functor[4] = {0, l.nullWord ? 0 : uint64_t{0x00007ffc1a9fdfd0}, 0, 0};
    const bool stale = runB && l.staleTarget >= 0;
    if (stale) functor[1] = live.at(l.staleTarget).address + 0x100;
    if (stale && l.secondStale) functor[3] = live.at(l.staleTarget).address + 0x200;
    const uint32_t at = appendParam(k, functor, sizeof functor, 8);
    if (l.perturb) out ^= 1;
    content[l.output] = out;
    k.outputs.push_back({range(l.output), out, {}, std::nullopt});
    if (stale) {
      k.pointers.push_back({at + 8, live.at(l.staleTarget).ordinal, 0x100});
      if (l.secondStale) k.pointers.push_back({at + 24, live.at(l.staleTarget).ordinal, 0x200});
      // Hashed through the stale word: the buffer's bytes as they are.
      if (l.staleTarget != l.output) k.outputs.push_back({range(l.staleTarget), content.at(l.staleTarget), {}, std::nullopt});
      std::sort(k.outputs.begin(), k.outputs.end(),
                [](const RangeDigest& x, const RangeDigest& y) { return x.range.address < y.range.address; });
    }
    w.append(Event{seq++, seq, 0, k, std::nullopt});
  }
  w.close();
  return dir;
}

struct Runs {
  fs::path root = fs::temp_directory_path() / ("gpurr-stale-word-" + std::to_string(getpid()));
  ~Runs() { fs::remove_all(root); }
  diff::ProcessDiff diff(const std::vector<Launch>& a, const std::vector<Launch>& b) {
    TraceReader ra(write(root / "a.gpurr", a, false)), rb(write(root / "b.gpurr", b, true));
    return diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
  }
};

// The launches before `limit` after the first, and the buffers they use in
// order (a stale word or another grid at a buffer's first use renames
// nothing: an allocation's identity names its first user by its kernel and
// each pointer by its byte offset).
std::vector<size_t> laterLaunches(const std::vector<Launch>& launches, size_t limit,
                                  std::vector<int>* used = nullptr) {
  std::vector<int> seen;
  std::vector<size_t> out;
  for (size_t i = 0; i < limit; ++i) {
    const Launch& l = launches[i];
    if (i > 0) out.push_back(i);
    for (int b : l.inputs) seen.push_back(b);
    seen.push_back(l.output);
  }
  if (used != nullptr) *used = seen;
  REQUIRE(!out.empty());
  return out;
}

size_t pick(const std::vector<size_t>& from, std::mt19937_64& rng) {
  return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
}

// Plants one stale word before launch `limit`, into any launch but the
// first (the first use of its buffers or not), pointing into a buffer an
// earlier launch used (a freed block the caching allocator handed out
// again, as in a training step on a GPU); returns where.
size_t plantStaleWord(std::vector<Launch>& launches, std::mt19937_64& rng, size_t limit) {
  std::vector<int> used;
  const size_t at = pick(laterLaunches(launches, limit, &used), rng);
  launches[at].staleTarget = used[std::uniform_int_distribution<size_t>(0, at)(rng)];
  return at;
}

}  // namespace

TEST_CASE("stale device addresses in one run's struct parameters are no divergence", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Launch> a = randomProgram(rng);
    std::vector<Launch> b = a;
    const size_t planted = plantStaleWord(b, rng, b.size());
    INFO("seed " << seed << ", a stale word in launch " << planted);
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.identical);
    CHECK(d.pathDivergenceCount == 0);
    CHECK_FALSE(d.firstDivergence.has_value());
    INFO((d.firstDivergence ? d.firstDivergence->summary : std::string()));
    CHECK(d.pairedDespiteStaleWords.count == 1);
    REQUIRE(d.pairedDespiteStaleWords.first.has_value());
    CHECK(d.pairedDespiteStaleWords.first->index == planted);
  }
}

// A stale word is an allocation's first use in run B alone: into a buffer
// that a later launch uses first, and into one that no launch uses (so that
// run B has one more used allocation of that size than run A, and the
// buffers left over without a partner do not pair by place). The launch
// that really uses the buffer first is paired by its shape, and where its
// pointers point says which buffer is which (renaming.h).
TEST_CASE("a stale word into a buffer not used yet, or never, renames no buffer", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 500; seed < 530; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Launch> a = randomProgram(rng);
    std::map<int, size_t> firstUse;
    for (size_t i = 0; i < a.size(); ++i) {
      for (int b : a[i].inputs) firstUse.emplace(b, i);
      firstUse.emplace(a[i].output, i);
    }
    const auto last = std::ranges::max_element(firstUse, {}, [](const auto& kv) { return kv.second; });
    if (last->second < 2) continue;
    std::vector<Launch> b = a;
    const size_t early = std::uniform_int_distribution<size_t>(1, last->second - 1)(rng);
    const size_t never = std::uniform_int_distribution<size_t>(1, b.size() - 1)(rng);
    b[early].staleTarget = last->first;
    if (never != early) b[never].staleTarget = kUnused;
    INFO("seed " << seed << ": buffer " << last->first << " first used by launch " << last->second
                 << ", by a stale word in launch " << early << " of run B; the unused buffer in launch " << never);
    const diff::ProcessDiff d = runs.diff(a, b);
    INFO((d.firstDivergence ? d.firstDivergence->summary : std::string()));
    CHECK(d.identical);
    CHECK(d.pathDivergenceCount == 0);
    CHECK(d.pairedDespiteStaleWords.count == (never != early ? 2u : 1u));
  }
}

TEST_CASE("two stale words into one allocation are no divergence", "[diff][property]") {
  // One caching-allocator segment holds many tensors: two stale words of a
  // struct may point into the same allocation.
  Runs runs;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Launch> a = randomProgram(rng);
    std::vector<Launch> b = a;
    const size_t planted = plantStaleWord(b, rng, b.size());
    b[planted].secondStale = true;
    INFO("seed " << seed << ", two stale words in launch " << planted);
    const diff::ProcessDiff d = runs.diff(a, b);
    INFO((d.firstDivergence ? d.firstDivergence->summary : std::string()));
    CHECK(d.identical);
    CHECK(d.pairedDespiteStaleWords.count == 1);
  }
}

TEST_CASE("after stale words, the one launch that differs is named alone", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 100; seed < 130; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Launch> a = randomProgram(rng);
    std::vector<Launch> b = a;
    const size_t perturbed = 60 + std::uniform_int_distribution<size_t>(0, 30)(rng);
    plantStaleWord(b, rng, perturbed);
    b[perturbed].perturb = true;
    INFO("seed " << seed << ", launch " << perturbed);
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.pathDivergenceCount == 0);
    REQUIRE(d.firstDivergence.has_value());
    CHECK_FALSE(d.firstDivergence->path);
    CHECK(d.firstDivergence->a.index == perturbed);
    CHECK(d.firstDivergence->cause == diff::Cause::kNondeterministicKernel);
    CHECK(d.blast.independentCount == 0);
  }
}

TEST_CASE("a stale device address where the other run holds 0 is no divergence either", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 300; seed < 320; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<Launch> a = randomProgram(rng);
    for (Launch& l : a) l.nullWord = true;
    std::vector<Launch> b = a;
    const size_t planted = plantStaleWord(b, rng, b.size());
    INFO("seed " << seed << ", a stale word over 0 in launch " << planted);
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.identical);
    CHECK(d.pathDivergenceCount == 0);
    CHECK(d.pairedDespiteStaleWords.count == 1);
  }
}

// The stale word sits in the launch whose output differs: the other evidence
// (same inputs, different outputs) decides, over 0 or over a host address.
TEST_CASE("a stale word at the divergent launch leaves the cause to the other evidence", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 400; seed < 440; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<Launch> a = randomProgram(rng);
    const size_t perturbed = 60 + std::uniform_int_distribution<size_t>(0, 30)(rng);
    a[perturbed].nullWord = seed % 2 == 0;
    std::vector<Launch> b = a;
    std::vector<int> used;
    laterLaunches(b, perturbed, &used);
    b[perturbed].staleTarget = used[std::uniform_int_distribution<size_t>(0, used.size() - 1)(rng)];
    b[perturbed].perturb = true;
    INFO("seed " << seed << ", launch " << perturbed << (a[perturbed].nullWord ? ", over 0" : ""));
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.pathDivergenceCount == 0);
    REQUIRE(d.firstDivergence.has_value());
    INFO(d.firstDivergence->summary);
    CHECK_FALSE(d.firstDivergence->path);
    CHECK(d.firstDivergence->a.index == perturbed);
    CHECK(d.firstDivergence->cause == diff::Cause::kNondeterministicKernel);
    CHECK(d.firstDivergence->inputsUncompared == 0);
    CHECK(std::ranges::any_of(d.firstDivergence->evidence,
                              [](const diff::Evidence& e) { return e.kind == diff::EvidenceKind::kStaleWords; }));
    CHECK(d.blast.independentCount == 0);
  }
}

TEST_CASE("a stale word beside a range that differs is still a divergence", "[diff]") {
  Runs runs;
  std::mt19937_64 rng(7);
  const std::vector<Launch> a = randomProgram(rng);
  std::vector<Launch> b = a;
  b[50].staleTarget = b[10].output;
  b[50].perturb = true;
  const diff::ProcessDiff d = runs.diff(a, b);
  REQUIRE(d.firstDivergence.has_value());
  CHECK(d.firstDivergence->a.index == 50);
  CHECK(d.pairedDespiteStaleWords.count == 0);
}

TEST_CASE("a launch with another configuration of the same kernel, its ranges equal, is no divergence",
          "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 200; seed < 230; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Launch> a = randomProgram(rng);
    std::vector<Launch> b = a;
    const size_t regridded = pick(laterLaunches(b, 60), rng);
    b[regridded].otherGrid = true;
    const size_t perturbed = 60 + std::uniform_int_distribution<size_t>(0, 30)(rng);
    INFO("seed " << seed << ", launch " << regridded << " with another grid");
    const diff::ProcessDiff same = runs.diff(a, b);
    CHECK(same.identical);
    CHECK(same.pathDivergenceCount == 0);
    CHECK(same.pairedDespiteLaunchConfiguration.count == 1);
    REQUIRE(same.pairedDespiteLaunchConfiguration.first.has_value());
    CHECK(same.pairedDespiteLaunchConfiguration.first->index == regridded);
    b[perturbed].perturb = true;
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.pathDivergenceCount == 0);
    REQUIRE(d.firstDivergence.has_value());
    CHECK(d.firstDivergence->a.index == perturbed);
    CHECK(d.firstDivergence->cause == diff::Cause::kNondeterministicKernel);
    CHECK(d.blast.independentCount == 0);
  }
}

// An autotuner kept another block size for one kernel in run B: every
// launch of it, all run long, is a launch with another configuration and
// equal ranges. Thousands of them (a long run) are all paired, and a real
// divergence after them is still found, alone.
TEST_CASE("every launch of a kernel autotuned otherwise in a long run is no divergence", "[diff]") {
  Runs runs;
  std::mt19937_64 rng(17);
  std::vector<Launch> a;
  for (int i = 0; i < 30000; ++i) {
    a.push_back(Launch{i % 5 == 0 ? 0 : 1 + i % 2, {static_cast<int>(rng() % kBuffers)}, static_cast<int>(rng() % kBuffers)});
  }
  std::vector<Launch> b = a;
  for (size_t i = 0; i < b.size(); i += 5) b[i].otherGrid = true;
  const diff::ProcessDiff same = runs.diff(a, b);
  CHECK(same.identical);
  CHECK(same.pathDivergenceCount == 0);
  CHECK(same.pairedDespiteLaunchConfiguration.count == 6000);
  b[29001].perturb = true;
  const diff::ProcessDiff d = runs.diff(a, b);
  CHECK(d.pathDivergenceCount == 0);
  REQUIRE(d.firstDivergence.has_value());
  CHECK(d.firstDivergence->a.index == 29001);
  CHECK(d.blast.independentCount == 0);
}

TEST_CASE("another launch configuration whose output differs is still a divergence", "[diff]") {
  Runs runs;
  std::mt19937_64 rng(9);
  const std::vector<Launch> a = randomProgram(rng);
  std::vector<Launch> b = a;
  b[40].otherGrid = true;
  b[40].perturb = true;
  const diff::ProcessDiff d = runs.diff(a, b);
  REQUIRE(d.firstDivergence.has_value());
  CHECK(d.firstDivergence->path);
  CHECK(d.firstDivergence->a.index == 40);
  CHECK(d.pairedDespiteLaunchConfiguration.count == 0);
}
