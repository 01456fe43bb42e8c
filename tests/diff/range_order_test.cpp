// A launch's ranges are compared by allocation identity and offset, never by
// their place in the list: FORMAT.md lists them in address order, and when
// the caching allocator hands the same buffers out at other addresses in the
// other run, that order differs. Property tests on random programs whose run
// B places every buffer at another address (in reverse order), so that the
// launches' multi-range lists come out permuted: the runs are identical, and
// a real divergence planted after it is still found, alone, with its cause;
// the same where run B also allocates the buffers in another order (every
// ordinal another).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
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

struct Alloc {
  int buffer;
  uint64_t size;
};
// A launch reading some buffers and writing others (a batch norm writes its
// output, saved mean and saved inverse variance, and its running statistics).
struct Launch {
  int kernel;
  std::vector<int> inputs;
  std::vector<int> outputs;
  bool perturb = false;  // its first output comes out different
};
using Step = std::variant<Alloc, Launch>;

constexpr uint64_t kKiB = 1 << 10;

std::vector<Step> randomProgram(std::mt19937_64& rng) {
  std::vector<Step> steps;
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const uint64_t sizes[] = {2 * kKiB, 2 * kKiB, 8 * kKiB, 64 * kKiB};
  int buffers = 0;
  for (; buffers < 12; ++buffers) steps.push_back(Alloc{buffers, sizes[pick(4)]});
  for (int i = 0; i < 80; ++i) {
    Launch l;
    l.kernel = static_cast<int>(pick(3));
    std::vector<int> all(static_cast<size_t>(buffers));
    for (int b = 0; b < buffers; ++b) all[static_cast<size_t>(b)] = b;
    std::shuffle(all.begin(), all.end(), rng);
    const size_t inputs = 1 + pick(3), outputs = 1 + pick(4);
    l.inputs.assign(all.begin(), all.begin() + static_cast<long>(inputs));
    l.outputs.assign(all.begin() + static_cast<long>(inputs), all.begin() + static_cast<long>(inputs + outputs));
    steps.push_back(l);
  }
  return steps;
}

// Writes a run of `steps`. Ordinals follow allocation order in both runs;
// addresses rise with it, or fall (`reversed`): then every list of two or
// more ranges, kept in address order as FORMAT.md says, is in the other
// order. A launch's outputs depend on its kernel, its inputs and which
// output they are.
fs::path write(const fs::path& dir, const std::vector<Step>& steps, bool reversed) {
  fs::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0, address = reversed ? 0x7f4000000000 : 0x7f0000000000;
  uint32_t ordinals = 0;
  std::map<int, Allocation> live;
  std::map<int, uint64_t> content;
  const char* kernels[] = {"_Z9batchnormPfS_S_PKf", "_Z4convPfPKf", "_Z6linearPfPKf"};
  for (const Step& s : steps) {
    if (const auto* a = std::get_if<Alloc>(&s)) {
      if (reversed) address -= a->size + 0x10000;
      Allocation al{++ordinals, address, a->size, AllocationKind::kDevice, 0, 0};
      if (!reversed) address += a->size + 0x10000;
      live[a->buffer] = al;
      content[a->buffer] = hash::fmix(0x5eed + static_cast<uint64_t>(a->buffer));
      w.append(Event{seq++, seq, 0, al, std::nullopt});
      continue;
    }
    const auto& l = std::get<Launch>(s);
    KernelLaunch k;
    k.function = kernels[l.kernel];
    k.grid = {8, 1, 1};
    k.block = {128, 1, 1};
    auto range = [&](int buffer) {
      const Allocation& al = live.at(buffer);
      return DeviceRange{al.address, al.size, al.ordinal, 0};
    };
    uint64_t in = hash::fmix(static_cast<uint64_t>(l.kernel) + 1);
    for (int b : l.inputs) {
      appendPointerParam(k, live.at(b).address, live.at(b).ordinal, 0);
      k.inputs.push_back({range(b), content.at(b), {}, std::nullopt});
      in = hash::fmix(in ^ content.at(b));
    }
    for (size_t o = 0; o < l.outputs.size(); ++o) {
      const int b = l.outputs[o];
      appendPointerParam(k, live.at(b).address, live.at(b).ordinal, 0);
      uint64_t out = hash::fmix(in + o + 1);
      if (l.perturb && o == 0) out ^= 1;
      content[b] = out;
      k.outputs.push_back({range(b), out, {}, std::nullopt});
    }
    auto byAddress = [](const RangeDigest& x, const RangeDigest& y) { return x.range.address < y.range.address; };
    std::sort(k.inputs.begin(), k.inputs.end(), byAddress);
    std::sort(k.outputs.begin(), k.outputs.end(), byAddress);
    w.append(Event{seq++, seq, 0, k, std::nullopt});
  }
  w.close();
  return dir;
}

struct Runs {
  fs::path root = fs::temp_directory_path() / ("gpurr-range-order-" + std::to_string(getpid()));
  ~Runs() { fs::remove_all(root); }
  diff::ProcessDiff diff(const std::vector<Step>& a, const std::vector<Step>& b) {
    TraceReader ra(write(root / "a.gpurr", a, false)), rb(write(root / "b.gpurr", b, true));
    return diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
  }
};

}  // namespace

TEST_CASE("ranges listed in another order in the other run are compared by identity", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Step> a = randomProgram(rng);
    INFO("seed " << seed);
    const diff::ProcessDiff d = runs.diff(a, a);
    CHECK(d.identical);
    CHECK(d.pathDivergenceCount == 0);
    CHECK_FALSE(d.firstDivergence.has_value());
  }
}

TEST_CASE("with the ranges in another order, the one launch that differs is named alone", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 100; seed < 130; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Step> a = randomProgram(rng);
    std::vector<Step> b = a;
    // A launch in the second half with several outputs writes another first
    // output in run B.
    size_t perturbed = b.size(), launches = 0, index = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      auto* l = std::get_if<Launch>(&b[i]);
      if (l == nullptr) continue;
      if (i >= b.size() / 2 && l->outputs.size() > 1 && perturbed == b.size()) {
        l->perturb = true;
        perturbed = i;
        index = launches;
      }
      ++launches;
    }
    REQUIRE(perturbed < b.size());
    INFO("seed " << seed);
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.pathDivergenceCount == 0);
    REQUIRE(d.firstDivergence.has_value());
    CHECK_FALSE(d.firstDivergence->path);
    CHECK(d.firstDivergence->a.index == index);
    CHECK(d.firstDivergence->cause == diff::Cause::kNondeterministicKernel);
    // Only the perturbed output differs, wherever it sits in either list.
    CHECK(d.firstDivergence->outputs.size() == 1);
    CHECK(d.blast.independentCount == 0);
  }
}

TEST_CASE("buffers allocated in another order in the other run are paired by what they are", "[diff][property]") {
  Runs runs;
  for (uint64_t seed = 200; seed < 230; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<Step> a = randomProgram(rng);
    std::vector<Step> b = a;
    const auto launches =
        std::find_if(b.begin(), b.end(), [](const Step& s) { return std::holds_alternative<Launch>(s); });
    std::shuffle(b.begin(), launches, rng);
    INFO("seed " << seed);
    const diff::ProcessDiff same = runs.diff(a, b);
    CHECK(same.identical);
    CHECK(same.pathDivergenceCount == 0);
    size_t index = 0;
    for (auto it = launches + static_cast<long>(std::distance(launches, b.end()) / 2); it != b.end(); ++it) {
      if (auto* l = std::get_if<Launch>(&*it)) {
        l->perturb = true;
        index = static_cast<size_t>(std::distance(launches, it));
        break;
      }
    }
    const diff::ProcessDiff d = runs.diff(a, b);
    CHECK(d.pathDivergenceCount == 0);
    REQUIRE(d.firstDivergence.has_value());
    CHECK(d.firstDivergence->a.index == index);
    CHECK(d.firstDivergence->cause == diff::Cause::kNondeterministicKernel);
    CHECK(d.blast.independentCount == 0);
  }
}
