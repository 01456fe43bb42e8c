// Pairs the identities tell apart that are one operation (pairing.h).
#include "diff/pairing.h"

#include <algorithm>

#include "diff/compare.h"
#include "diff/decode.h"

namespace gpurr::diff {
using namespace gpurr::trace;

namespace {

// Whether a pair of launches that matchSameShape paired (their pointers
// differ) differ only by stale words: every pointer both runs have points to
// the same place, each pointer one run alone has is a device address in one
// run only (an unwritten word of a struct passed by value), and every range
// both runs hashed agrees, the ranges of one run alone lying in allocations
// that its stale words point to (the recorder hashed through them). The
// kernel then read and wrote the same bytes in both runs: no divergence.
bool staleWordsOnly(const Context& ctx, const Event& ea, const Event& eb) {
  const auto* a = std::get_if<KernelLaunch>(&ea.payload);
  const auto* b = std::get_if<KernelLaunch>(&eb.payload);
  if (a == nullptr || b == nullptr || a->function != b->function) return false;
  // Every pointer of one run alone a stale word, and at least one.
  const std::vector<uint32_t> staleA = staleWordAllocations(*a, *b), staleB = staleWordAllocations(*b, *a);
  const auto atA = pointersByOffset(*a), atB = pointersByOffset(*b);
  auto alone = [](const KernelLaunch& with, const auto& without) {
    return std::ranges::count_if(with.pointers, [&](const PointerParam& p) { return !without.contains(p.byteOffset); });
  };
  if (staleA.size() != static_cast<size_t>(alone(*a, atB)) || staleB.size() != static_cast<size_t>(alone(*b, atA)) ||
      (staleA.empty() && staleB.empty()))
    return false;
  for (const PointerParam& pa : a->pointers) {
    const auto it = atB.find(pa.byteOffset);
    if (it != atB.end() &&
        (ctx.a.ordinals(pa.allocation) != ctx.b.ordinals(it->second->allocation) || pa.offset != it->second->offset))
      return false;
  }
  auto agree = [&](const std::vector<RangeDigest>& ra, const std::vector<RangeDigest>& rb) {
    std::vector<RangeDifference> differences;
    compareRanges(ctx, ra, rb, differences);
    return std::ranges::all_of(differences,
                               [&](const RangeDifference& d) { return throughStaleWord(d, staleA, staleB); });
  };
  return agree(a->inputs, b->inputs) && agree(a->outputs, b->outputs);
}

// Whether two launches the identities tell apart are the same operation:
// the same kernel and parameters (pointers by allocation, in run A's
// numbering, and offset; host addresses aside), every range both runs
// hashed agreeing. Then what tells them apart is the grid, block, cluster
// or shared memory (a stretch of one launch each), or an allocation's
// identity: one run renamed it (OrdinalMap pairs it by its place).
bool sameOperation(const Context& ctx, const Event& ea, const Event& eb) {
  const auto* a = std::get_if<KernelLaunch>(&ea.payload);
  const auto* b = std::get_if<KernelLaunch>(&eb.payload);
  if (a == nullptr || b == nullptr || a->function != b->function || a->params.size() != b->params.size()) return false;
  if (!std::ranges::all_of(compareParams(ctx, *a, *b), isHostParameter)) return false;
  std::vector<RangeDifference> differences;
  return compareRanges(ctx, a->inputs, b->inputs, differences) &&
         compareRanges(ctx, a->outputs, b->outputs, differences);
}

// How much of what two launches read and wrote agrees, by content: the
// inputs and outputs whose digests are equal, position by position, and
// whether all are; then, to break a tie, by the inputs read at the same
// place (allocations by their identities: those a launch reads were named
// before it, unlike the fresh outputs whose names are in doubt where a
// launch was paired wrongly).
struct Agreement {
  int equal = 0;
  bool full = false;
  int inputsAt = 0;
};
Agreement agreement(const Run& a, const Run& b, uint64_t ia, uint64_t ib) {
  const Event ea = eventAt(*a.reader, a.ops[ia].seq()), eb = eventAt(*b.reader, b.ops[ib].seq());
  const auto* ka = std::get_if<KernelLaunch>(&ea.payload);
  const auto* kb = std::get_if<KernelLaunch>(&eb.payload);
  if (ka == nullptr || kb == nullptr) return {};
  bool hashed = false;  // a digest of 0 is none
  auto equal = [&](const std::vector<RangeDigest>& x, const std::vector<RangeDigest>& y) {
    int n = 0;
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      n += x[i].digest == y[i].digest;
      hashed |= x[i].digest != 0;
    }
    return n;
  };
  Agreement out{equal(ka->inputs, kb->inputs) + equal(ka->outputs, kb->outputs)};
  out.full = hashed && ka->inputs.size() == kb->inputs.size() && ka->outputs.size() == kb->outputs.size() &&
             out.equal == static_cast<int>(ka->inputs.size() + ka->outputs.size());
  for (size_t i = 0; i < std::min(ka->inputs.size(), kb->inputs.size()); ++i) {
    const DeviceRange& x = ka->inputs[i].range;
    const DeviceRange& y = kb->inputs[i].range;
    out.inputsAt += x.offset == y.offset && a.ordinals(x.allocation) == b.ordinals(y.allocation);
  }
  return out;
}

// Stretches are weighed by reading their events: up to so many pairs of
// each, and so many pairs in a diff (each reads two events again).
constexpr uint64_t kWeighedPairs = 16;
constexpr uint64_t kWeighedInAll = uint64_t{1} << 14;

// One extra launch of a kernel in one run shifts by one the count that
// names the allocations its later launches use first (AllocationIds). A
// later launch of the other run then carries exactly the identity of the
// next such launch where both compute the same (the same kernel, inputs
// and outputs), and the alignment may match those two at a tie: a stretch
// with more operations of one run, L matched, a stretch with as many more
// of the other. Where the operations of the three, paired in order, are
// launches of the same shapes, and no fewer of those pairs than of the L
// matched ones agree in every input and output digest (hashed), they are
// one stretch: paired by shape below, and the allocations renamed by the
// pairs (renaming.h).
std::vector<AlignedRun> unshift(Alignment& alignment, const Run& a, const Run& b, uint64_t& budget) {
  const std::vector<AlignedRun>& runs = alignment.runs;
  std::vector<AlignedRun> out;
  out.reserve(runs.size());
  for (size_t r = 0; r < runs.size(); ++r) {
    const AlignedRun& first = runs[r];
    if (r + 2 < runs.size() && !first.match && first.aCount != first.bCount && runs[r + 1].match &&
        !runs[r + 2].match &&
        first.aCount + runs[r + 2].aCount == first.bCount + runs[r + 2].bCount) {
      const uint64_t n = first.aCount + runs[r + 1].aCount + runs[r + 2].aCount;
      bool shapes = n <= kWeighedPairs && budget >= 2 * n;
      for (uint64_t i = 0; shapes && i < n; ++i) {
        const Op& x = a.ops[first.aBegin + i];
        const Op& y = b.ops[first.bBegin + i];
        shapes = x.kind() == OpKind::kLaunch && y.kind() == OpKind::kLaunch && x.shape == y.shape;
      }
      if (shapes) {
        uint64_t inOrder = 0, matched = 0;
        const AlignedRun& m = runs[r + 1];
        for (uint64_t i = 0; i < n; ++i, --budget) inOrder += agreement(a, b, first.aBegin + i, first.bBegin + i).full;
        for (uint64_t i = 0; i < m.aCount; ++i, --budget) matched += agreement(a, b, m.aBegin + i, m.bBegin + i).full;
        if (inOrder >= matched) {
          out.push_back({false, first.aBegin, first.bBegin, n, n});
          alignment.matched -= m.aCount;
          r += 2;
          continue;
        }
      }
    }
    out.push_back(first);
  }
  return out;
}

}  // namespace

void matchSameShape(Alignment& alignment, const Run& a, const Run& b) {
  uint64_t budget = kWeighedInAll;
  const std::vector<AlignedRun> runs = unshift(alignment, a, b, budget);
  std::vector<AlignedRun> out;
  out.reserve(alignment.runs.size());
  auto same = [&](uint64_t i, uint64_t j) {
    const Op& x = a.ops[i];
    const Op& y = b.ops[j];
    return x.kind() == OpKind::kLaunch && y.kind() == OpKind::kLaunch && x.shape == y.shape && x.sameSite(y);
  };
  // Pairs of same shape, issued where the other was, from the start of a stretch, up to `limit` of them;
  // from its end.
  auto fromHead = [&](const AlignedRun& r, uint64_t limit) {
    uint64_t n = 0;
    while (n < limit && same(r.aBegin + n, r.bBegin + n)) ++n;
    return n;
  };
  auto fromTail = [&](const AlignedRun& r, uint64_t limit) {
    uint64_t n = 0;
    while (n < limit && same(r.aBegin + r.aCount - 1 - n, r.bBegin + r.bCount - 1 - n)) ++n;
    return n;
  };
  // Stretches of unequal lengths whose pairs from the start and from the
  // end compete are weighed by reading their events.
  for (const AlignedRun& r : runs) {
    if (r.match) {
      out.push_back(r);
      continue;
    }
    const uint64_t shorter = std::min(r.aCount, r.bCount);
    uint64_t head = fromHead(r, shorter);
    uint64_t tail = fromTail(r, shorter - head);
    // With more operations on one side, the pairs from the start and those
    // from the end may pair one operation with different partners: an
    // extra launch of a kernel next to its real one. Where the pairs from
    // the end, taken first, agree more in what they read and wrote, they
    // are the operations that correspond.
    if (r.aCount != r.bCount && head > 0 && budget >= 2 * kWeighedPairs) {
      const uint64_t tailFirst = fromTail(r, shorter), headAfter = fromHead(r, shorter - tailFirst);
      if (tailFirst > tail) {
        // Digests first, where the inputs lie on a tie.
        std::pair<int, int> headScore, tailScore;
        auto add = [](std::pair<int, int>& score, const Agreement& agreed) {
          score.first += agreed.equal;
          score.second += agreed.inputsAt;
        };
        for (uint64_t k = headAfter; k < std::min(head, headAfter + kWeighedPairs); ++k, --budget) {
          add(headScore, agreement(a, b, r.aBegin + k, r.bBegin + k));
        }
        for (uint64_t k = tail; k < std::min(tailFirst, tail + kWeighedPairs); ++k, --budget) {
          add(tailScore, agreement(a, b, r.aBegin + r.aCount - 1 - k, r.bBegin + r.bCount - 1 - k));
        }
        if (tailScore > headScore) {
          head = headAfter;
          tail = tailFirst;
        }
      }
    }
    if (head > 0) out.push_back({true, r.aBegin, r.bBegin, head, head});
    const uint64_t restA = r.aCount - head - tail, restB = r.bCount - head - tail;
    if (restA > 0 || restB > 0) out.push_back({false, r.aBegin + head, r.bBegin + head, restA, restB});
    if (tail > 0) {
      out.push_back({true, r.aBegin + r.aCount - tail, r.bBegin + r.bCount - tail, tail, tail});
    }
    alignment.matched += head + tail;
  }
  alignment.runs = std::move(out);
}

std::unordered_set<uint64_t> pairLaunchConfigurations(const Context& ctx, Alignment& alignment) {
  std::unordered_set<uint64_t> configurationOnly;  // run A's index of each
  const Run& a = ctx.a;
  const Run& b = ctx.b;
  // Each check reads both events again (in trace order, a few microseconds
  // each): at most so many, and none after so many in a row that were no
  // such pair (then the runs differ otherwise).
  constexpr size_t kMaxChecked = size_t{1} << 18, kMaxFailedInARow = 4096;
  for (size_t r = 0, checked = 0, failed = 0;
       r < alignment.runs.size() && checked < kMaxChecked && failed < kMaxFailedInARow; ++r) {
    AlignedRun& run = alignment.runs[r];
    if (run.match || run.aCount != 1 || run.bCount != 1 || a.ops[run.aBegin].kind() != OpKind::kLaunch ||
        b.ops[run.bBegin].kind() != OpKind::kLaunch)
      continue;
    ++checked;
    if (!sameOperation(ctx, eventAt(*a.reader, a.ops[run.aBegin].seq()), eventAt(*b.reader, b.ops[run.bBegin].seq()))) {
      ++failed;
      continue;
    }
    failed = 0;
    run.match = true;
    ++alignment.matched;
    configurationOnly.insert(run.aBegin);
  }
  return configurationOnly;
}

bool BenignPairs::absorb(uint64_t ia, uint64_t ib) {
  const Run& a = ctx_.a;
  const Run& b = ctx_.b;
  // The first of each kind is described (`describe`), the rest counted.
  auto note = [&](PairedDespite& p, const auto& describe) {
    if (p.count++ == 0) p.first = describe();
    return true;
  };
  if (configurationOnly_.count(ia)) return note(launchConfiguration, [&] { return info(a, ia); });
  const Event ea = eventAt(*a.reader, a.ops[ia].seq()), eb = eventAt(*b.reader, b.ops[ib].seq());
  const auto described = [&] { return info(a, ia, ea); };
  if (staleWordsOnly(ctx_, ea, eb)) return note(staleWords, described);
  return sameOperation(ctx_, ea, eb) && note(renamedAllocation, described);
}

}  // namespace gpurr::diff
