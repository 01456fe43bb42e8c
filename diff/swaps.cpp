// Two operations swapped (swaps.h): each side of a matched pair found in the
// other run, nearby.
#include "diff/swaps.h"

#include <fmt/format.h>

#include <algorithm>

#include "diff/compare.h"
#include "diff/decode.h"

namespace gpurr::diff {

namespace {

// How far from the pair a twin is looked for, in operations each way (a
// loop over a model's parameters in another order moves its operations by
// a few hundred), and how many of the other run's operations of its shape
// are read at most (nearby: from the one or two blocks the reader holds).
constexpr uint64_t kWindow = 512;
constexpr size_t kMaxReads = 64;

// The ranges an operation reads and does not write: what it computes from.
// A range it also writes was hashed before it as its output buffer's old
// contents (FORMAT.md, hashInputs), which a new tensor's place decides.
std::vector<RangeDigest> readOnly(const OpView& v) {
  std::vector<RangeDigest> out;
  for (const RangeDigest& r : v.inputs) {
    if (std::ranges::none_of(v.outputs, [&](const RangeDigest& o) { return o.range == r.range; })) out.push_back(r);
  }
  return out;
}

// Whether `x` of run A (of run B, !xInA) reads what `y` of the other run
// reads: the same ranges, by allocation identity, with the same digests
// where both have one (a trace that hashes inputs at their first use only
// leaves the later reads without).
bool sameInputs(const Context& ctx, bool xInA, const OpView& x, const OpView& y) {
  std::vector<RangeDifference> differ;
  const std::vector<RangeDigest> rx = readOnly(x), ry = readOnly(y);
  xInA ? compareRanges(ctx, rx, ry, differ) : compareRanges(ctx, ry, rx, differ);
  return std::ranges::all_of(differ, [](const RangeDifference& d) {
    return d.a.size > 0 && d.b.size > 0 && (d.digestA == 0 || d.digestB == 0);
  });
}

// Whether `x` and `y` write the same bytes, wherever they write them: the
// same sizes and digests, in any order (an operation's new tensors lie where
// the allocator put them, elsewhere when the order changed).
bool sameOutputBytes(const OpView& x, const OpView& y) {
  const auto written = [](const OpView& v) {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (const RangeDigest& r : v.outputs) out.emplace_back(r.range.size, r.digest);
    std::ranges::sort(out);
    return out;
  };
  const auto wx = written(x);
  return !wx.empty() && std::ranges::none_of(wx, [](const auto& w) { return w.second == 0; }) && wx == written(y);
}

// The operation of `run` (the other run) within kWindow of `near` (the
// pair's, which is not it) that does what `op` of `own` (event `e`) does:
// the same shape, inputs and output bytes, and the same training step where
// both were recorded with one (a step that repeats the last does the same
// operations); the nearest first.
std::optional<uint64_t> twinOf(const Context& ctx, const Run& own, uint64_t op, const Event& e, const Run& run,
                               uint64_t near) {
  const OpView v = view(e);
  if (!v.launch) return std::nullopt;
  const uint32_t shape = own.ops[op].shape;
  const uint64_t lowest = std::max(run.ops.firstHeld(), near > kWindow ? near - kWindow : 0);
  const uint64_t end = std::min<uint64_t>(run.ops.size(), near + kWindow + 1);
  size_t reads = 0;
  for (uint64_t d = 1; d <= kWindow; ++d) {
    for (const bool after : {true, false}) {
      if (!after && d > near) continue;
      const uint64_t j = after ? near + d : near - d;
      if (j < lowest || j >= end) continue;
      const Op& candidate = run.ops[j];
      if (candidate.kind() != OpKind::kLaunch || candidate.shape != shape || !candidate.hashed()) continue;
      if (++reads > kMaxReads) return std::nullopt;
      const Event c = eventAt(*run.reader, candidate.seq());
      if (e.origin && c.origin && e.origin->step != c.origin->step) continue;  // a step that repeats it
      if (sameInputs(ctx, &own == &ctx.a, v, view(c)) && sameOutputBytes(v, view(c))) return j;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<Swap> swapAt(const Context& ctx, uint64_t ia, uint64_t ib, const Event& ea, const Event& eb) {
  if (sameParameters(ctx, ea, eb)) return std::nullopt;
  const auto inB = twinOf(ctx, ctx.a, ia, ea, ctx.b, ib);
  if (!inB) return std::nullopt;
  const auto inA = twinOf(ctx, ctx.b, ib, eb, ctx.a, ia);
  if (!inA) return std::nullopt;
  return Swap{*inA, *inB, ctx.a.ops[*inA].seq(), ctx.b.ops[*inB].seq()};
}

std::string swapText(uint64_t ib, const Swap& swap) {
  const bool later = swap.bIndex > ib;
  return fmt::format("run B does this operation {} {}, and another in its place",
                     plural(later ? swap.bIndex - ib : ib - swap.bIndex, "operation"), later ? "later" : "earlier");
}

}  // namespace gpurr::diff
