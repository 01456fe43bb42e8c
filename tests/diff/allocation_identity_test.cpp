// Allocations are matched between runs by what they are (size, kind, first
// use), not by the order the allocator handed them out: property tests on
// random programs where one run allocates one more buffer, or one fewer, of
// a size the program uses all the time.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>
#include <variant>

#include "diff/diff.h"
#include "trace_format/hash_primitives.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

// A program as the framework sees it: buffers by name, not by ordinal.
struct Alloc {
  int buffer;
  uint64_t size;
};
struct Free {
  int buffer;
};
struct Launch {
  int kernel;
  std::vector<int> inputs;
  int output;
  bool perturb = false;  // the output comes out different (an atomic's order)
};
using Step = std::variant<Alloc, Free, Launch>;

constexpr uint64_t kMiB = 1 << 20;
const uint64_t kSizes[] = {2 * kMiB, 20 * kMiB, 2 * kMiB, 512};  // 2 MiB twice as often

std::vector<Step> randomProgram(std::mt19937_64& rng) {
  std::vector<Step> steps;
  std::vector<int> live;
  int next = 0;
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  for (int i = 0; i < 6; ++i) {
    steps.push_back(Alloc{next, kSizes[pick(4)]});
    live.push_back(next++);
  }
  for (int i = 0; i < 120; ++i) {
    const size_t what = pick(10);
    if (what == 0 || live.size() < 3) {
      steps.push_back(Alloc{next, kSizes[pick(4)]});
      live.push_back(next++);
    } else if (what == 1 && live.size() > 4) {
      const size_t k = pick(live.size());
      steps.push_back(Free{live[k]});
      live.erase(live.begin() + static_cast<long>(k));
    } else {
      Launch l;
      l.kernel = static_cast<int>(pick(3));
      const size_t inputs = 1 + pick(2);
      for (size_t j = 0; j < inputs; ++j) l.inputs.push_back(live[pick(live.size())]);
      l.output = live[pick(live.size())];
      steps.push_back(l);
    }
  }
  return steps;
}

// Writes a run of `steps`: ordinals and addresses in allocation order, every
// buffer's bytes modelled by a digest (a launch's output depends on its
// kernel and inputs).
fs::path write(const fs::path& dir, const std::vector<Step>& steps) {
  fs::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0, address = 0x7f0000000000;
  uint32_t ordinals = 0;
  std::map<int, Allocation> live;
  std::map<int, uint64_t> content;
  const char* kernels[] = {"_Z4convPfPKf", "_Z4reluPfPKf", "_Z6linearPfPKf"};
  for (const Step& s : steps) {
    if (const auto* a = std::get_if<Alloc>(&s)) {
      Allocation al{++ordinals, address, a->size, AllocationKind::kDevice, 0, 0};
      address += a->size + 0x200000;
      live[a->buffer] = al;
      content[a->buffer] = hash::fmix(0x5eed + static_cast<uint64_t>(a->buffer));
      w.append(Event{seq++, seq, 0, al});
    } else if (const auto* f = std::get_if<Free>(&s)) {
      const Allocation al = live.at(f->buffer);
      live.erase(f->buffer);
      w.append(Event{seq++, seq, 0, trace::Free{al.ordinal, al.address}});
    } else {
      const auto& l = std::get<Launch>(s);
      KernelLaunch k;
      k.function = kernels[l.kernel];
      k.grid = {8, 1, 1};
      k.block = {128, 1, 1};
      auto range = [&](int buffer) {
        const Allocation& al = live.at(buffer);
        return DeviceRange{al.address, al.size, al.ordinal, 0};
      };
      appendPointerParam(k, live.at(l.output).address, live.at(l.output).ordinal, 0);
      uint64_t out = hash::fmix(static_cast<uint64_t>(l.kernel) + 1);
      for (int in : l.inputs) {
        appendPointerParam(k, live.at(in).address, live.at(in).ordinal, 0);
        k.inputs.push_back({range(in), content.at(in), {}});
        out = hash::fmix(out ^ content.at(in));
      }
      if (l.perturb) out ^= 1;
      content[l.output] = out;
      k.outputs.push_back({range(l.output), out, {}});
      w.append(Event{seq++, seq, 0, k});
    }
  }
  w.close();
  return dir;
}

struct Runs {
  fs::path root = fs::temp_directory_path() / ("gpurr-alloc-identity-" + std::to_string(getpid()));
  ~Runs() { fs::remove_all(root); }
  diff::ProcessDiff diff(const std::vector<Step>& a, const std::vector<Step>& b) {
    TraceReader ra(write(root / "a.gpurr", a)), rb(write(root / "b.gpurr", b));
    return diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
  }
};

size_t launchIndex(const std::vector<Step>& steps, size_t step) {
  size_t n = 0;
  for (size_t i = 0; i < step; ++i) n += std::holds_alternative<Launch>(steps[i]);
  return n;
}

}  // namespace

TEST_CASE("an extra or missing allocation of a common size changes nothing in the report",
          "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<Step> a = randomProgram(rng);
    std::vector<Step> b = a;
    // One more buffer, of a size the program allocates all the time, that
    // nothing uses: in run B, or (one fewer in run B) in run A.
    const bool extra = seed % 2 == 1;
    std::vector<Step>& more = extra ? b : a;
    const size_t at = std::uniform_int_distribution<size_t>(0, more.size())(rng);
    more.insert(more.begin() + static_cast<long>(at), Alloc{100000, 2 * kMiB});
    INFO("seed " << seed << (extra ? ": one extra allocation in run B" : ": one allocation missing in run B"));
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.identical);
    CHECK(d.pathDivergenceCount == 0);
    CHECK_FALSE(d.firstDivergence.has_value());
  }
}

TEST_CASE("with an extra allocation in one run, the one launch that differs is named alone", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 100; seed < 140; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<Step> a = randomProgram(rng);
    std::vector<Step> b = a;
    const size_t at = std::uniform_int_distribution<size_t>(0, b.size() / 2)(rng);
    b.insert(b.begin() + static_cast<long>(at), Alloc{100000, 2 * kMiB});
    // A launch in the second half gives another output in run B.
    size_t perturbed = b.size();
    for (size_t i = b.size() / 2; i < b.size(); ++i) {
      if (auto* l = std::get_if<Launch>(&b[i])) {
        l->perturb = true;
        perturbed = i;
        break;
      }
    }
    REQUIRE(perturbed < b.size());
    INFO("seed " << seed);
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.pathDivergenceCount == 0);
    REQUIRE(d.firstDivergence.has_value());
    CHECK_FALSE(d.firstDivergence->path);
    CHECK(d.firstDivergence->a.index == launchIndex(b, perturbed));
    CHECK(d.firstDivergence->cause == diff::Cause::kNondeterministicKernel);
    CHECK(d.blast.independentCount == 0);
  }
}
