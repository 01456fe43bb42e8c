// Two operations swapped: a loop over parameters in another order (a set of
// names iterated in an order PYTHONHASHSEED decides) launches the same
// kernel with the same launch configuration for each, so the alignment
// pairs them by their place, each with another parameter's. The diff must
// find each run's operation in the other run and say reordered, count the
// loop's other pairs as part of it, and still call a pair whose operation
// the other run never did a pointer that points elsewhere.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "diff/diff.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kParam = 0x7f0000000000, kTemp = 0x7f0001000000, kSum = 0x7f0002000000;

struct Loop {
  std::vector<uint32_t> order;  // the parameters (0, 1, 2) in the order visited, per step
  uint64_t skewed = 99;         // the parameter whose absolute value this run computes otherwise
};

// Three 1 KiB parameters, initialised; per step, a forward pass that reads
// each in one order, then abs() of each in `order` into a new
// tensor, then a sum of the three into a fourth. The new tensors are
// allocated in the order visited, so they take their places in that order.
fs::path writeRun(const fs::path& dir, const std::vector<Loop>& steps) {
  fs::remove_all(dir);
  Header h;
  h.options.hashInputs = true;
  TraceWriter w(dir, h);
  uint64_t seq = 0;
  uint32_t ordinal = 1;
  // A launch of `function` given parameter `p` (its first pointer).
  auto onParameter = [](const char* function, uint32_t grid, uint32_t block, uint32_t p) {
    KernelLaunch k;
    k.function = function;
    k.grid = {grid, 1, 1};
    k.block = {block, 1, 1};
    appendPointerParam(k, kParam + p * 0x1000, p + 1, 0);
    return k;
  };
  const auto parameter = [](uint32_t p) { return RangeDigest{{kParam + p * 0x1000, 1024, p + 1, 0}, 0xa0 + p, {}}; };
  // The parameters, allocated and initialised in one order in both runs.
  for (uint32_t p = 0; p < 3; ++p) {
    w.append(Event{seq++, seq, 0, Allocation{ordinal++, kParam + p * 0x1000, 1024, AllocationKind::kDevice, 0, 0}});
    KernelLaunch init = onParameter("_Z4initPf", 1, 256, p);
    init.outputs = {parameter(p)};
    w.append(Event{seq++, seq, 0, init});
  }
  auto origin = [](const char* op, uint32_t line, int64_t step) {
    Origin o;
    o.op = op;
    o.opStack = {op};
    o.file = "train.py";
    o.line = line;
    o.step = step;
    return o;
  };
  int64_t step = 0;
  for (const Loop& loop : steps) {
    // The forward pass reads each parameter, in one order in both runs.
    for (uint32_t p = 0; p < 3; ++p) {
      KernelLaunch k = onParameter("_Z6linearPKf", 2, 128, p);
      k.inputs = {parameter(p)};
      w.append(Event{seq++, seq, 0, k, origin("aten::linear", 20, step)});
    }
    std::vector<std::pair<uint64_t, uint32_t>> temps;
    for (size_t i = 0; i < loop.order.size(); ++i) {
      const uint32_t p = loop.order[i];
      const uint64_t temp = kTemp + (step * 3 + i) * 0x1000;
      const uint32_t t = ordinal++;
      w.append(Event{seq++, seq, 0, Allocation{t, temp, 1024, AllocationKind::kDevice, 0, 0}});
      KernelLaunch k = onParameter("_Z10abs_kernelPKfPf", 1, 256, p);
      appendPointerParam(k, temp, t, 0);
      k.inputs = {parameter(p)};
      k.outputs = {{{temp, 1024, t, 0}, (p == loop.skewed ? 0xdd0 : 0xb0) + p + 16 * static_cast<uint64_t>(step), {}}};
      w.append(Event{seq++, seq, 0, k, origin("aten::abs", 29, step)});
      temps.emplace_back(temp, t);
    }
    const uint32_t s = ordinal++;
    w.append(Event{seq++, seq, 0, Allocation{s, kSum + step * 0x1000, 4, AllocationKind::kDevice, 0, 0}});
    KernelLaunch sum;
    sum.function = "_Z7sum_allPKfS0_S0_Pf";
    sum.grid = {1, 1, 1};
    sum.block = {32, 1, 1};
    for (const auto& [address, t] : temps) {
      appendPointerParam(sum, address, t, 0);
      sum.inputs.push_back({{address, 1024, t, 0}, 0, {}});
    }
    appendPointerParam(sum, kSum + step * 0x1000, s, 0);
    sum.outputs = {{{kSum + step * 0x1000, 4, s, 0}, 0xc0 + static_cast<uint64_t>(step), {}}};
    w.append(Event{seq++, seq, 0, sum, origin("aten::add", 30, step)});
    ++step;
  }
  w.close();
  return dir;
}

diff::ProcessDiff diffOf(const std::vector<Loop>& a, const std::vector<Loop>& b) {
  const fs::path root = fs::temp_directory_path() / ("gpurr-swaps-" + std::to_string(getpid()));
  TraceReader ta(writeRun(root / "a.gpurr", a)), tb(writeRun(root / "b.gpurr", b));
  diff::ProcessDiff d = diff::diffTraces(ta, tb, diff::DiffOptions{}, nullptr);
  fs::remove_all(root);
  REQUIRE(d.firstDivergence.has_value());
  return d;
}

}  // namespace

TEST_CASE("a loop over parameters in another order: two operations swapped, reordered") {
  SECTION("one step: the first pair is a swap, the loop's last pair its other end") {
    const diff::ProcessDiff d = diffOf({{{0, 1, 2}}}, {{{2, 1, 0}}});
    const diff::FirstDivergence& f = *d.firstDivergence;
    CHECK(f.cause == diff::Cause::kReordered);
    CHECK_FALSE(f.path);
    CHECK_THAT(f.summary, Catch::StartsWith("reordered: run B does this operation 2 operations later, and another in "
                                            "its place"));
    REQUIRE(f.swap.has_value());
    CHECK(f.swap->aIndex == 8);
    CHECK(f.swap->bIndex == 8);
    CHECK(d.blast.independentCount == 0);
  }
  SECTION("the loop rotated: every swapped pair is part of the first") {
    const diff::ProcessDiff d = diffOf({{{0, 1, 2}}, {{0, 1, 2}}}, {{{1, 2, 0}}, {{0, 1, 2}}});
    CHECK(d.firstDivergence->cause == diff::Cause::kReordered);
    CHECK(d.blast.independentCount == 0);
  }
  SECTION("each step's loop in another order: a later step's is an independent reordering") {
    const diff::ProcessDiff d = diffOf({{{0, 1, 2}}, {{0, 1, 2}}}, {{{2, 1, 0}}, {{2, 1, 0}}});
    CHECK(d.firstDivergence->cause == diff::Cause::kReordered);
    REQUIRE(d.blast.independent.size() == 1);
    CHECK_THAT(d.blast.independent[0].reason,
               Catch::StartsWith("reordered: run B does this operation 2 operations later, and another in its place, "
                                 "reading no data derived from an earlier divergence"));
  }
  SECTION("run B computes one of them otherwise: no swap, a pointer that points elsewhere") {
    Loop b{{2, 1, 0}};
    b.skewed = 0;
    const diff::ProcessDiff d = diffOf({{{0, 1, 2}}}, {b});
    CHECK(d.firstDivergence->cause == diff::Cause::kScalarParameters);
    CHECK_FALSE(d.firstDivergence->swap.has_value());
  }
}
