// An allocation is named by its first use (diff/model.h, AllocationIds): a
// benign difference at one buffer's first use may rename that buffer, never
// the later buffers of its size and kind. Property tests on random programs
// that allocate buffers of one size all along, each written first by a
// launch of one of a few kernels: run B holds a stale device address in one
// word at a buffer's first use, or launches it with another grid, or writes
// the second half of a fresh buffer before the first. The report names at
// most that one operation, and a real divergence planted after it is still
// found, alone, with its cause.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <variant>

#include "diff/diff.h"
#include "trace_format/hash_primitives.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSize = 16 << 10;

struct Alloc {
  int buffer;
};
struct Free {
  int buffer;
};
// A launch writing its output whole, or one half of it (half 1 or 2), from
// its inputs read whole.
struct Launch {
  int kernel;
  std::vector<int> inputs;
  int output;
  int half = 0;
  int staleTarget = -1;    // run B: word 1 of the functor points into this buffer
  bool otherGrid = false;  // run B: launched with another grid
  bool perturb = false;    // its output comes out different
};
using Step = std::variant<Alloc, Free, Launch>;

// Buffers allocated all along, each written first by a launch right after
// (in two halves, by launches of two kernels, one time in three), then read
// and written whole by others; now and then one is freed.
std::vector<Step> randomProgram(std::mt19937_64& rng) {
  std::vector<Step> steps;
  std::vector<int> live;
  int next = 0;
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  auto inputs = [&] {
    std::vector<int> in;
    for (size_t j = 0, n = 1 + pick(2); j < n; ++j) in.push_back(live[pick(live.size())]);
    return in;
  };
  auto fresh = [&] {
    const int b = next++;
    steps.push_back(Alloc{b});
    if (live.empty()) {
      steps.push_back(Launch{static_cast<int>(pick(3)), {}, b});
    } else if (pick(3) == 0) {
      const int k = static_cast<int>(pick(3));
      steps.push_back(Launch{k, inputs(), b, 1});
      steps.push_back(Launch{(k + 1 + static_cast<int>(pick(2))) % 3, inputs(), b, 2});
    } else {
      steps.push_back(Launch{static_cast<int>(pick(3)), inputs(), b});
    }
    live.push_back(b);
  };
  for (int i = 0; i < 3; ++i) fresh();
  for (int i = 0; i < 150; ++i) {
    const size_t what = pick(6);
    if (what == 0 || live.size() < 4) {
      fresh();
    } else if (what == 1 && live.size() > 6) {
      const size_t k = pick(live.size());
      steps.push_back(Free{live[k]});
      live.erase(live.begin() + static_cast<long>(k));
    } else {
      steps.push_back(Launch{static_cast<int>(pick(3)), inputs(), live[pick(live.size())]});
    }
  }
  return steps;
}

// Writes a run: each launch with a pointer to its output (at the half it
// writes), one to each input, then a 32-byte functor struct whose word 1 is
// never written: a host stack address, or in run B where staleTarget says,
// a device address into that buffer, which the recorder then also hashed.
fs::path write(const fs::path& dir, const std::vector<Step>& steps, bool runB) {
  fs::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0, address = 0x7f0000000000;
  uint32_t ordinals = 0;
  std::map<int, Allocation> live;
  std::map<int, std::pair<uint64_t, uint64_t>> content;  // digests of both halves
  auto whole = [&](int b) { return hash::fmix(content.at(b).first * 3 + content.at(b).second); };
  const char* kernels[] = {"_Z6reduceP8ReduceOp", "_Z3catP8CatArray", "_Z4fillPfS_"};
  for (const Step& s : steps) {
    if (const auto* a = std::get_if<Alloc>(&s)) {
      Allocation al{++ordinals, address, kSize, AllocationKind::kDevice, 0, 0};
      address += 0x100000;
      live[a->buffer] = al;
      content[a->buffer] = {hash::fmix(0x5eed + static_cast<uint64_t>(a->buffer)), 0};
      w.append(Event{seq++, seq, 0, al, std::nullopt});
      continue;
    }
    if (const auto* f = std::get_if<Free>(&s)) {
      const Allocation al = live.at(f->buffer);
      live.erase(f->buffer);
      w.append(Event{seq++, seq, 0, trace::Free{al.ordinal, al.address}, std::nullopt});
      continue;
    }
    const auto& l = std::get<Launch>(s);
    KernelLaunch k;
    k.function = kernels[l.kernel];
    k.grid = {runB && l.otherGrid ? 16u : 8u, 1, 1};
    k.block = {runB && l.otherGrid ? 64u : 128u, 1, 1};
    const Allocation& out = live.at(l.output);
    const uint64_t offset = l.half == 2 ? kSize / 2 : 0, size = l.half == 0 ? kSize : kSize / 2;
    appendPointerParam(k, out.address + offset, out.ordinal, offset);
    uint64_t digest = hash::fmix(static_cast<uint64_t>(l.kernel) + 1);
    for (int in : l.inputs) {
      const Allocation& al = live.at(in);
      appendPointerParam(k, al.address, al.ordinal, 0);
      k.inputs.push_back({{al.address, kSize, al.ordinal, 0}, whole(in), {}, std::nullopt});
      digest = hash::fmix(digest ^ whole(in));
    }
    uint64_t functor[4] = {0, 0x00007ffc1a9fdfd0, 0, 0};
    const bool stale = runB && l.staleTarget >= 0;
    if (stale) functor[1] = live.at(l.staleTarget).address + 0x100;
    const uint32_t at = appendParam(k, functor, sizeof functor, 8);
    if (l.perturb) digest ^= 1;
    auto& c = content[l.output];
    if (l.half == 0) c = {digest, digest};
    if (l.half == 1) c.first = digest;
    if (l.half == 2) c.second = digest;
    k.outputs.push_back({{out.address + offset, size, out.ordinal, offset}, digest, {}, std::nullopt});
    if (stale) {
      const Allocation& t = live.at(l.staleTarget);
      k.pointers.push_back({at + 8, t.ordinal, 0x100});
      // Hashed through the stale word: the buffer's bytes as they are.
      if (l.staleTarget != l.output) {
        k.outputs.push_back({{t.address, kSize, t.ordinal, 0}, whole(l.staleTarget), {}, std::nullopt});
      }
      std::sort(k.outputs.begin(), k.outputs.end(),
                [](const RangeDigest& x, const RangeDigest& y) { return x.range.address < y.range.address; });
    }
    w.append(Event{seq++, seq, 0, k, std::nullopt});
  }
  w.close();
  return dir;
}

struct Runs {
  fs::path root = fs::temp_directory_path() / ("gpurr-renamed-buffer-" + std::to_string(getpid()));
  ~Runs() { fs::remove_all(root); }
  diff::ProcessDiff diff(const std::vector<Step>& a, const std::vector<Step>& b,
                         const diff::DiffOptions& options = {}) {
    TraceReader ra(write(root / "a.gpurr", a, false)), rb(write(root / "b.gpurr", b, true));
    return diff::diffTraces(ra, rb, options, nullptr);
  }
};

size_t launchIndex(const std::vector<Step>& steps, size_t step) {
  size_t n = 0;
  for (size_t i = 0; i < step; ++i) n += std::holds_alternative<Launch>(steps[i]);
  return n;
}

// The steps before `limit` that are a buffer's first use, whole, by a launch
// that reads another buffer; one at random.
size_t firstUse(const std::vector<Step>& steps, std::mt19937_64& rng, size_t from, size_t limit) {
  std::vector<size_t> found;
  for (size_t i = from; i < limit; ++i) {
    const auto* l = std::get_if<Launch>(&steps[i]);
    if (l != nullptr && l->half == 0 && !l->inputs.empty() && std::holds_alternative<Alloc>(steps[i - 1])) {
      found.push_back(i);
    }
  }
  REQUIRE(!found.empty());
  return found[std::uniform_int_distribution<size_t>(0, found.size() - 1)(rng)];
}

// The first launch at or after step `from` that touches no buffer of
// `avoid`: what it reads and writes agrees in both runs up to it.
size_t launchAvoiding(const std::vector<Step>& steps, size_t from, const std::set<int>& avoid = {}) {
  for (size_t i = from; i < steps.size(); ++i) {
    const auto* l = std::get_if<Launch>(&steps[i]);
    if (l != nullptr && !avoid.count(l->output) &&
        std::none_of(l->inputs.begin(), l->inputs.end(), [&](int b) { return avoid.count(b) > 0; })) {
      return i;
    }
  }
  FAIL("no such launch");
  return 0;
}

// Whether a launch of `kernel` at or after step `from` is a buffer's first
// use (the launch right after its allocation).
bool usedFirstAfter(const std::vector<Step>& steps, size_t from, int kernel) {
  for (size_t i = std::max<size_t>(from, 1); i < steps.size(); ++i) {
    const auto* l = std::get_if<Launch>(&steps[i]);
    if (l != nullptr && l->kernel == kernel && std::holds_alternative<Alloc>(steps[i - 1])) return true;
  }
  return false;
}

// The buffers allocated and not freed before step `end`, in order.
std::vector<int> liveBefore(const std::vector<Step>& steps, size_t end) {
  std::set<int> live;
  for (size_t i = 0; i < end; ++i) {
    if (const auto* al = std::get_if<Alloc>(&steps[i])) live.insert(al->buffer);
    if (const auto* f = std::get_if<1>(&steps[i])) live.erase(f->buffer);  // a Free
  }
  return {live.begin(), live.end()};
}

}  // namespace

TEST_CASE("a stale device address at a buffer's first use renames no buffer", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Step> a = randomProgram(rng);
    std::vector<Step> b = a;
    const size_t planted = firstUse(b, rng, 10, b.size() / 2);
    // Into a buffer it reads (a freed block the allocator handed out again).
    Launch& l = std::get<Launch>(b[planted]);
    l.staleTarget = l.inputs.front();
    INFO("seed " << seed << ", a stale word at step " << planted);
    const diff::ProcessDiff same = runs.diff(a, b);
    CHECK(same.identical);
    CHECK(same.pathDivergenceCount == 0);
    CHECK(same.pairedDespiteStaleWords.count == 1);
    REQUIRE(same.pairedDespiteStaleWords.first.has_value());
    CHECK(same.pairedDespiteStaleWords.first->index == launchIndex(b, planted));
    const size_t perturbed = launchAvoiding(b, b.size() * 3 / 4);
    std::get<Launch>(b[perturbed]).perturb = true;
    INFO("perturbed step " << perturbed);
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.pathDivergenceCount == 0);
    REQUIRE(d.firstDivergence.has_value());
    CHECK_FALSE(d.firstDivergence->path);
    CHECK(d.firstDivergence->a.index == launchIndex(b, perturbed));
    CHECK(d.firstDivergence->cause == diff::Cause::kNondeterministicKernel);
    CHECK(d.blast.independentCount == 0);
  }
}

TEST_CASE("another launch configuration at a buffer's first use renames no buffer", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 100; seed < 130; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Step> a = randomProgram(rng);
    std::vector<Step> b = a;
    const size_t planted = firstUse(b, rng, 10, b.size() / 2);
    std::get<Launch>(b[planted]).otherGrid = true;
    INFO("seed " << seed << ", another grid at step " << planted);
    const diff::ProcessDiff same = runs.diff(a, b);
    CHECK(same.identical);
    CHECK(same.pathDivergenceCount == 0);
    CHECK(same.pairedDespiteLaunchConfiguration.count == 1);
    REQUIRE(same.pairedDespiteLaunchConfiguration.first.has_value());
    CHECK(same.pairedDespiteLaunchConfiguration.first->index == launchIndex(b, planted));
  }
}

// Two launches that write the two halves of a fresh buffer, in the other
// order in run B: the second half's writer is the buffer's first use there.
// One stretch (the two launches: the buffer they write takes another
// identity in run B), and nothing else: the later launches that use that
// buffer are paired despite it.
TEST_CASE("an operation moved before a buffer's first use renames that buffer alone", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 200; seed < 240; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Step> a = randomProgram(rng);
    std::vector<Step> b = a;
    std::vector<size_t> halves;
    for (size_t i = 10; i < b.size() / 2; ++i) {
      if (const auto* l = std::get_if<Launch>(&b[i]); l != nullptr && l->half == 1) halves.push_back(i);
    }
    if (halves.empty()) continue;
    const size_t moved = halves[std::uniform_int_distribution<size_t>(0, halves.size() - 1)(rng)];
    std::swap(b[moved], b[moved + 1]);
    INFO("seed " << seed << ", steps " << moved << " and " << moved + 1 << " swapped");
    const diff::ProcessDiff same = runs.diff(a, b);
    REQUIRE(same.firstDivergence.has_value());
    CHECK(same.pathDivergenceCount <= 1);
    CHECK(same.firstDivergence->a.index == launchIndex(a, moved));
    CHECK(same.blast.independentCount == 0);
    // Said in one line, where a later launch uses that buffer.
    const int renamed = std::get<Launch>(a[moved]).output;
    const bool usedLater = std::any_of(b.begin() + static_cast<long>(moved) + 2, b.end(), [&](const Step& s) {
      const auto* l = std::get_if<Launch>(&s);
      return l != nullptr && (l->output == renamed || std::count(l->inputs.begin(), l->inputs.end(), renamed) > 0);
    });
    CHECK((same.pairedDespiteRenamedAllocation.count > 0) == usedLater);
    // A launch after it that touches not the buffer they wrote gives
    // another output: the one independent divergence, its cause said.
    const size_t perturbed = launchAvoiding(b, b.size() * 3 / 4, {renamed});
    std::get<Launch>(b[perturbed]).perturb = true;
    INFO("perturbed step " << perturbed);
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.pathDivergenceCount <= 1);
    REQUIRE(d.firstDivergence.has_value());
    CHECK(d.firstDivergence->a.index == launchIndex(a, moved));
    REQUIRE(d.blast.independentCount == 1);
    CHECK(d.blast.independent.at(0).a.index == launchIndex(b, perturbed));
    CHECK(d.blast.independent.at(0).reason ==
          "outputs differ from identical inputs and parameters");
  }
}

// Run B launches one kernel once more, early, into a buffer of its own that
// nothing reads: an extra workspace's fill. Later launches of that kernel
// count one more before them in run B, so the buffers they use first take
// the identity their predecessors have in run A; the diff pairs them anew
// by the operations the alignment pairs. One stretch (the extra buffer and
// its launch), and nothing else.
TEST_CASE("an extra launch of a kernel renames none of the buffers its later launches use first",
          "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 300; seed < 3300; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Step> a = randomProgram(rng);
    std::vector<Step> b = a;
    size_t at = std::uniform_int_distribution<size_t>(10, b.size() / 4)(rng);
    if (std::holds_alternative<Alloc>(b[at - 1])) --at;  // not between a buffer and its first use
    const int kernel = static_cast<int>(std::uniform_int_distribution<size_t>(0, 2)(rng));
    const std::vector<int> live = liveBefore(b, at);  // it reads one of them
    const std::vector<int> reads{live[rng() % live.size()]};
    b.insert(b.begin() + static_cast<long>(at), {Alloc{100000}, Launch{kernel, reads, 100000}});
    INFO("seed " << seed << ", an extra launch of kernel " << kernel << " at step " << at);
    const diff::ProcessDiff same = runs.diff(a, b);
    REQUIRE(same.firstDivergence.has_value());
    CHECK(same.firstDivergence->path);
    CHECK(same.pathDivergenceCount == 1);
    CHECK(same.blast.independentCount == 0);
    CHECK((same.allocationsRenamed > 0) == usedFirstAfter(b, at + 2, kernel));
    const size_t perturbed = launchAvoiding(b, b.size() * 3 / 4);
    std::get<Launch>(b[perturbed]).perturb = true;
    INFO("perturbed step " << perturbed);
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.pathDivergenceCount == 1);
    REQUIRE(d.blast.independentCount == 1);
    CHECK(d.blast.independent.at(0).a.index == launchIndex(b, perturbed) - 1);
  }
}

// The same with a buffer that thousands of later launches read: each of
// them is a pair the alignment makes by shape, and most of the buffer's
// pointers must be read for it to be renamed.
TEST_CASE("an extra launch of a kernel renames no buffer that thousands of launches read", "[diff][property]") {
  Runs runs;
  std::mt19937_64 rng(400);
  std::vector<Step> a = randomProgram(rng);
  a.resize(40);
  const std::vector<int> some = liveBefore(a, a.size());
  const size_t at = a.size();
  a.push_back(Alloc{200000});
  a.push_back(Launch{2, {some.front()}, 200000});
  for (int i = 0; i < 10000; ++i) a.push_back(Launch{i % 3, {200000}, some[static_cast<size_t>(i) % some.size()]});
  std::vector<Step> b = a;
  b.insert(b.begin() + static_cast<long>(at), {Alloc{100000}, Launch{2, {some.back()}, 100000}});
  const diff::ProcessDiff same = runs.diff(a, b);
  REQUIRE(same.firstDivergence.has_value());
  CHECK(same.firstDivergence->path);
  CHECK(same.pathDivergenceCount == 1);
  CHECK(same.blast.independentCount == 0);
  CHECK(same.allocationsRenamed >= 1);  // and any buffer of the prefix that the loop uses first
}

// An optimizer's step: per parameter, a fresh temporary written by one
// kernel (a scalar made a tensor), read by another that updates the
// parameter and by a third (its momentum); the temporary freed. Run B
// scales a parameter before them (a hook), writing a temporary and
// updating the parameter as a group does: every later temporary takes the
// identity of the one before it in run A, and group g's in run B match
// group g + 1's in run A. The groups pair with their own all the same: one
// divergence where run B scaled it, one path divergence, and what follows
// from the scaled parameter explained by them.
TEST_CASE("an extra launch of kernels repeated in groups after it pairs each group with its own", "[diff]") {
  Runs runs;
  constexpr int kParams = 12;
  std::vector<Step> a;
  for (int p = 0; p < 2 * kParams; ++p) {
    a.push_back(Alloc{p});
    a.push_back(Launch{2, {}, p});
  }
  auto scale = [](std::vector<Step>& steps, int temp, int param) {
    steps.push_back(Alloc{temp});
    steps.push_back(Launch{1, {}, temp});
    steps.push_back(Launch{0, {temp, param}, param});
  };
  std::vector<Step> b = a;
  scale(b, 1000, 3);  // run B alone
  b.push_back(Step(std::in_place_index<1>, 1000));  // its Free
  for (int step = 0; step < 2; ++step) {
    for (int p = 0; p < kParams; ++p) {
      for (std::vector<Step>* steps : {&a, &b}) {
        const int temp = 100 + step * kParams + p;
        scale(*steps, temp, p);
        steps->push_back(Launch{2, {temp, kParams + p}, kParams + p});
        steps->push_back(Step(std::in_place_index<1>, temp));
      }
    }
  }
  const diff::ProcessDiff d = runs.diff(a, b);
  REQUIRE(d.firstDivergence.has_value());
  INFO("first divergence: run A #" << d.firstDivergence->a.seq << ", run B #" << d.firstDivergence->b.seq << ": "
                                   << d.firstDivergence->summary);
  // At run B's extra launches (events #49 and #50), as a path or as the
  // launch that updates another parameter than run A's first group.
  CHECK((d.firstDivergence->b.seq == 49 || d.firstDivergence->b.seq == 50));
  CHECK(d.pathDivergenceCount == 1);
  CHECK(d.blast.independentCount == 0);
  CHECK(d.allocationsRenamed > 0);
}

// Later independent divergences of one kernel (no origin recorded) are
// counted with the first listed of them; another kernel's is listed on its
// own; beyond the list's length, they are counted as unlisted.
TEST_CASE("independent divergences like a listed one are counted with it", "[diff]") {
  Runs runs;
  std::vector<Step> a;
  for (int buffer = 0; buffer < 6; ++buffer) a.push_back(Alloc{buffer});
  // Buffer 0 first (the first divergence), then four by kernel 1, one by kernel 2.
  for (int buffer = 0; buffer < 6; ++buffer) a.push_back(Launch{buffer == 0 ? 0 : buffer < 5 ? 1 : 2, {}, buffer});
  std::vector<Step> b = a;
  for (Step& s : b) {
    if (auto* l = std::get_if<Launch>(&s)) l->perturb = true;
  }
  const diff::ProcessDiff d = runs.diff(a, b);
  REQUIRE(d.firstDivergence.has_value());
  CHECK(d.firstDivergence->a.index == 0);
  REQUIRE(d.blast.independentCount == 5);
  REQUIRE(d.blast.independent.size() == 2);
  const diff::IndependentDivergence& ones = d.blast.independent[0];
  CHECK(ones.a.index == 1);
  CHECK(ones.reason == "outputs differ from identical inputs and parameters");
  CHECK(ones.more == 3);
  CHECK(ones.last.seqA == std::optional<uint64_t>(10));  // the sixth allocation is event #5
  CHECK(ones.last.seqB == std::optional<uint64_t>(10));
  CHECK(ones.last.step == -1);
  CHECK(d.blast.independent[1].a.index == 5);
  CHECK(d.blast.independent[1].more == 0);
  CHECK(d.blast.unlisted() == 0);

  diff::DiffOptions one;
  one.maxIndependent = 1;
  const diff::ProcessDiff listedOne = runs.diff(a, b, one);
  REQUIRE(listedOne.blast.independent.size() == 1);
  CHECK(listedOne.blast.independent[0].more == 3);
  CHECK(listedOne.blast.unlisted() == 1);
}

// An asynchronous collective (c10d's broadcast under DDP) records no digest
// of what it received. In run B, a launch of its own (the first divergence)
// wrote the buffer first, so that the buffer's identity, by its first use,
// differs. Where the collective wrote is no later divergence. What it sent,
// changed, still is one. In `d` its origin names a module, in run A none.
TEST_CASE("a collective whose undigested result is in a renamed allocation, or whose origin differs, does not diverge",
          "[diff]") {
  const fs::path root = fs::temp_directory_path() / ("gpurr-renamed-collective-" + std::to_string(getpid()));
  auto write = [&](const std::string& name, bool extra, uint64_t sent, const std::string& module = "") {
    const fs::path dir = root / name;
    fs::remove_all(dir);
    TraceWriter w(dir, Header{});
    uint64_t seq = 0;
    const Allocation other{1, 0x7f0000000000, kSize, AllocationKind::kDevice, 0, 0};
    const Allocation buffer{2, 0x7f0000100000, kSize, AllocationKind::kDevice, 0, 0};
    w.append(Event{seq++, seq, 0, other, std::nullopt});
    w.append(Event{seq++, seq, 0, buffer, std::nullopt});
    if (extra) {
      KernelLaunch k;
      k.function = "_Z4fillPfS_";
      k.grid = {8, 1, 1};
      k.block = {128, 1, 1};
      appendPointerParam(k, buffer.address, buffer.ordinal, 0);
      k.outputs = {{{buffer.address, kSize, buffer.ordinal, 0}, 0x5eed, {}, std::nullopt}};
      w.append(Event{seq++, seq, 0, k, std::nullopt});
    }
    Collective c;
    c.source = CollectiveSource::kFramework;
    c.call = "broadcast_";
    c.op = CollectiveOp::kBroadcast;
    c.communicator = 0xd81181be0a8b1004;
    c.rank = 1;
    c.size = 2;
    c.dataType = "int32";
    c.count = 29;
    c.peer = 0;
    c.inputs = {{{buffer.address, 116, buffer.ordinal, 0}, sent, {}, std::nullopt}};
    c.outputs = {{{buffer.address, 116, buffer.ordinal, 0}, 0, {}, std::nullopt}};
    const Origin origin{"c10d::broadcast_", {"c10d::broadcast_"}, Phase::kForward, "", module, "train.py", 37, 0, 0};
    w.append(Event{seq++, seq, 0, c, origin});
    w.close();
    return dir;
  };
  const fs::path a = write("a.gpurr", false, 7), b = write("b.gpurr", true, 7), sentOther = write("c.gpurr", false, 8);
  TraceReader ra(a), rb(b), rc(sentOther);
  // The same call attributed to a module in one run only (made on a
  // backend's thread, or in an autograd hook): no divergence.
  TraceReader attributed(write("d.gpurr", false, 7, "DistributedDataParallel"));
  CHECK(diff::diffTraces(ra, attributed, diff::DiffOptions{}, nullptr).identical);
  const diff::ProcessDiff moved = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
  REQUIRE(moved.firstDivergence.has_value());
  CHECK(moved.firstDivergence->b.name == "_Z4fillPfS_");
  CHECK(moved.blast.divergentOps == 0);
  CHECK(moved.blast.independentCount == 0);
  const diff::ProcessDiff other = diff::diffTraces(ra, rc, diff::DiffOptions{}, nullptr);
  REQUIRE(other.firstDivergence.has_value());
  CHECK(other.firstDivergence->a.kind == diff::OpKind::kCollective);
  fs::remove_all(root);
}
