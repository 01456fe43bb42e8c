// Reorderings and stretches (reorder.h): which stretches of the alignment
// balance one another, and the operations a report shows of each.
#include "diff/reorder.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "diff/decode.h"

namespace gpurr::diff {
using namespace gpurr::trace;

namespace {

// The positions [begin, end) of `run.ops` in the order the trace holds
// them (the canonical order may differ), for a pass over the trace.
std::vector<uint64_t> inTraceOrder(const Run& run, uint64_t begin, uint64_t end) {
  std::vector<uint64_t> positions(end - begin);
  for (uint64_t i = begin; i < end; ++i) positions[i - begin] = i;
  std::sort(positions.begin(), positions.end(),
            [&](uint64_t x, uint64_t y) { return run.ops[x].seq() < run.ops[y].seq(); });
  return positions;
}

// The first `maxStretchOps` of `count` operations of `r` from `begin`, in one
// pass over their events.
std::vector<OpInfo> opsOf(const Context& ctx, const Run& r, uint64_t begin, uint64_t count) {
  std::vector<OpInfo> out;
  if (count == 0) return out;
  const uint64_t shown = std::min<uint64_t>(count, ctx.options.maxStretchOps);
  std::vector<uint64_t> positions = inTraceOrder(r, begin, begin + shown);
  size_t next = 0;
  r.reader->forEach([&](const Event& e) {
    if (e.seq == r.ops[positions[next]].seq()) out.push_back(info(r, positions[next++], e));
    return next < positions.size();
  }, r.ops[positions[0]].seq());
  std::sort(out.begin(), out.end(), [](const OpInfo& x, const OpInfo& y) { return x.index < y.index; });
  return out;
}

// Whether the first operations of a two-sided stretch of `g` carry an
// algorithm choice (cuDNN, cuBLAS).
bool choseAlgorithm(const Context& ctx, const std::vector<AlignedRun>& runs, Group g) {
  auto chose = [](const std::vector<OpInfo>& ops) {
    return std::any_of(ops.begin(), ops.end(), [](const OpInfo& o) {
      return std::any_of(o.annotations.begin(), o.annotations.end(),
                         [](const Annotation& x) { return std::holds_alternative<AlgorithmChoice>(x); });
    });
  };
  for (size_t r = g.first; r <= g.last; ++r) {
    const AlignedRun& s = runs[r];
    if (s.match || s.aCount == 0 || s.bCount == 0) continue;
    if (chose(opsOf(ctx, ctx.a, s.aBegin, s.aCount)) || chose(opsOf(ctx, ctx.b, s.bBegin, s.bCount))) return true;
  }
  return false;
}

// Groups of stretches that balance by `key` (an operation's, or nullopt
// where it has none: a group holding such an operation is not taken), into
// `group` where a stretch has none yet (reorderings).
template <typename Key>
void balancedGroups(const Context& ctx, const std::vector<AlignedRun>& runs, Key key, std::vector<Group>& group) {
  const Run& a = ctx.a;
  const Run& b = ctx.b;
  constexpr uint64_t kMaxReordered = 1 << 16;
  std::vector<Group> found;  // by their last stretch, increasing; disjoint
  std::unordered_map<uint64_t, size_t> seen{{0, 0}};  // running sum -> the run after which it was last
  uint64_t sum = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const AlignedRun& s = runs[r];
    if (s.match) continue;
    for (uint64_t i = 0; i < s.aCount; ++i) sum += key(a, s.aBegin + i).value_or(0);
    for (uint64_t i = 0; i < s.bCount; ++i) sum -= key(b, s.bBegin + i).value_or(0);
    const auto [it, fresh] = seen.try_emplace(sum, r + 1);
    if (fresh) continue;
    Group g{it->second, r};
    it->second = r + 1;
    while (!found.empty() && found.back().last >= g.first) {
      g.first = std::min(g.first, found.back().first);
      found.pop_back();
    }
    found.push_back(g);
  }
  for (Group& g : found) {
    while (runs[g.first].match) ++g.first;  // it starts after a stretch, or at the start
    uint64_t na = 0, nb = 0;
    bool twoSided = false, taken = false;
    for (size_t r = g.first; r <= g.last; ++r) {
      if (runs[r].match) continue;
      na += runs[r].aCount;
      nb += runs[r].bCount;
      twoSided |= runs[r].aCount > 0 && runs[r].bCount > 0;
      taken |= group[r].any();
    }
    if (taken || na != nb || na > kMaxReordered) continue;
    // Stretches where each run takes a path of its own and that balance
    // only together are two swapped operations, unless a library chose
    // them: an algorithm in one step of run A and in another step of run B
    // is another path.
    if (twoSided && g.first != g.last && choseAlgorithm(ctx, runs, g)) continue;
    std::vector<std::optional<uint64_t>> ka, kb;
    for (size_t r = g.first; r <= g.last; ++r) {
      if (runs[r].match) continue;
      for (uint64_t i = 0; i < runs[r].aCount; ++i) ka.push_back(key(a, runs[r].aBegin + i));
      for (uint64_t i = 0; i < runs[r].bCount; ++i) kb.push_back(key(b, runs[r].bBegin + i));
    }
    // One stretch of the same operations in the same order is not
    // reordered: they were issued from other places (a block called in
    // another's place).
    if (g.first == g.last && ka == kb) continue;
    std::sort(ka.begin(), ka.end());
    std::sort(kb.begin(), kb.end());
    if (ka != kb || std::find(ka.begin(), ka.end(), std::nullopt) != ka.end()) continue;
    for (size_t r = g.first; r <= g.last; ++r) {
      if (!runs[r].match) group[r] = g;
    }
  }
}

}  // namespace

// Stretches that are a reordering rather than another path: consecutive
// stretches (with matched runs between them) whose run A sides hold the
// same operations as their run B sides. A running sum of the identities,
// run A's added and run B's subtracted, comes back to a value it had: the
// stretches since then balance. The latest such point is taken, so that an
// unbalanced stretch (an operation one run alone does) before them is left
// out, and groups that overlap are merged. Each group's balance is then
// checked on the identities themselves; groups of more than kMaxReordered
// operations a side are not looked at. Linear in the number of stretches.
// Then the same by site and shape, for operations that all have a site:
// swapped, they write their outputs into allocations made in the other
// order, and an allocation is named by its first user, so their identities
// differ where the program ran the same ops in another order. Then the same
// by place in the model (Op::placeTag) and shape: two statements swapped,
// their lines moved with them.
std::vector<Group> reorderings(const Context& ctx, const std::vector<AlignedRun>& runs) {
  std::vector<Group> group(runs.size());
  balancedGroups(ctx, runs, [](const Run& run, uint64_t i) { return std::optional<uint64_t>(run.ops[i].key); },
                 group);
  balancedGroups(ctx, runs, [](const Run& run, uint64_t i) -> std::optional<uint64_t> {
    const Op& op = run.ops[i];
    if (op.tag() == 0) return std::nullopt;
    return Keys::withTag(uint64_t{op.shape} * 0xff51afd7ed558ccdULL + 1, op.tag());
  }, group);
  balancedGroups(ctx, runs, [](const Run& run, uint64_t i) -> std::optional<uint64_t> {
    const Op& op = run.ops[i];
    if (op.placeTag() == 0) return std::nullopt;
    return Keys::withTag(uint64_t{op.shape} * 0xff51afd7ed558ccdULL + 1, op.placeTag());
  }, group);
  return group;
}

// Stretch `r` of the reordering `g` (reorderings).
Reordering reorderingOf(const Context& ctx, const std::vector<AlignedRun>& runs, size_t r, Group g) {
  const AlignedRun& s = runs[r];
  const AlignedRun& first = runs[g.first];
  const AlignedRun& last = runs[g.last];
  Reordering m;
  m.aBegin = first.aBegin;
  m.bBegin = first.bBegin;
  m.aEnd = last.aBegin + last.aCount;
  m.bEnd = last.bBegin + last.bCount;
  size_t stretches = 0;
  for (size_t i = g.first; i <= g.last; ++i) {
    if (runs[i].match) continue;
    m.count += runs[i].aCount;
    ++stretches;
  }
  // A move: two one-sided stretches with the same operations in the same order.
  const AlignedRun* inA = nullptr;  // their place in run A
  const AlignedRun* inB = nullptr;  // ... and in run B: before run A's inB->aBegin
  for (size_t i : {g.first, g.last}) {
    if (runs[i].bCount == 0) inA = &runs[i];
    if (runs[i].aCount == 0) inB = &runs[i];
  }
  if (stretches == 2 && inA && inB) {
    bool same = true;
    for (uint64_t i = 0; i < inA->aCount && same; ++i) {
      same = ctx.a.ops[inA->aBegin + i].key == ctx.b.ops[inB->bBegin + i].key;
    }
    if (same) {
      const uint64_t end = inA->aBegin + inA->aCount;
      m.crossed = inB->aBegin >= end ? static_cast<int64_t>(inB->aBegin - end)
                                     : -static_cast<int64_t>(inA->aBegin - inB->aBegin);
    }
  }
  // The other side's first reordered operations, for a one-sided stretch.
  if (s.aCount == 0 || s.bCount == 0) {
    const bool wantA = s.aCount == 0;
    for (size_t i = g.first; i <= g.last && m.otherCount == 0; ++i) {
      const AlignedRun& o = runs[i];
      if (o.match || i == r || (wantA ? o.aCount : o.bCount) == 0) continue;
      m.otherCount = wantA ? o.aCount : o.bCount;
      m.otherOps = wantA ? opsOf(ctx, ctx.a, o.aBegin, o.aCount) : opsOf(ctx, ctx.b, o.bBegin, o.bCount);
    }
  }
  return m;
}

// "run B does this operation 20 operations later"
std::string reorderingText(const Reordering& m) {
  if (m.crossed == 0) return fmt::format("the same {} in another order", plural(m.count, "operation"));
  const uint64_t n = static_cast<uint64_t>(m.crossed < 0 ? -m.crossed : m.crossed);
  return fmt::format("run B does {} {} {}", m.count == 1 ? "this operation" : fmt::format("these {} operations", m.count),
                     plural(n, "operation"), m.crossed > 0 ? "later" : "earlier");
}

PathDivergence stretchOf(const Context& ctx, const std::vector<AlignedRun>& runs, size_t r, Group g) {
  const AlignedRun& run = runs[r];
  PathDivergence p;
  p.aBegin = run.aBegin;
  p.aCount = run.aCount;
  p.bBegin = run.bBegin;
  p.bCount = run.bCount;
  p.aOps = opsOf(ctx, ctx.a, p.aBegin, p.aCount);
  p.bOps = opsOf(ctx, ctx.b, p.bBegin, p.bCount);
  auto seqAt = [](const Run& side, uint64_t index, const std::vector<OpInfo>& ops) {
    if (!ops.empty()) return ops.front().seq;
    if (index < side.ops.size()) return side.ops[index].seq();
    return side.ops.size() == 0 ? 0 : side.ops[side.ops.size() - 1].seq() + 1;
  };
  p.aSeq = seqAt(ctx.a, p.aBegin, p.aOps);
  p.bSeq = seqAt(ctx.b, p.bBegin, p.bOps);
  if (g.any()) p.reordered = reorderingOf(ctx, runs, r, g);
  return p;
}

}  // namespace gpurr::diff
