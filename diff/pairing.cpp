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
  auto alone = [](const KernelLaunch& with, const KernelLaunch& without) {
    return std::ranges::count_if(with.pointers, [&](const PointerParam& p) {
      return std::ranges::none_of(without.pointers, [&](const PointerParam& q) { return q.byteOffset == p.byteOffset; });
    });
  };
  if (staleA.size() != static_cast<size_t>(alone(*a, *b)) || staleB.size() != static_cast<size_t>(alone(*b, *a)) ||
      (staleA.empty() && staleB.empty()))
    return false;
  for (const PointerParam& pa : a->pointers) {
    for (const PointerParam& pb : b->pointers) {
      if (pa.byteOffset == pb.byteOffset &&
          (ctx.a.ordinals(pa.allocation) != ctx.b.ordinals(pb.allocation) || pa.offset != pb.offset))
        return false;
    }
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

// How much of what two launches read and wrote agrees, by content alone:
// the inputs and outputs whose digests are equal, position by position.
// Allocation identities play no part: where a launch was paired wrongly,
// they are what is in doubt.
int agreement(const Run& a, const Run& b, uint64_t ia, uint64_t ib) {
  const Event ea = eventAt(*a.reader, a.ops[ia].seq()), eb = eventAt(*b.reader, b.ops[ib].seq());
  const auto* ka = std::get_if<KernelLaunch>(&ea.payload);
  const auto* kb = std::get_if<KernelLaunch>(&eb.payload);
  if (ka == nullptr || kb == nullptr) return 0;
  auto equal = [](const std::vector<RangeDigest>& x, const std::vector<RangeDigest>& y) {
    int n = 0;
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) n += x[i].digest == y[i].digest;
    return n;
  };
  return equal(ka->inputs, kb->inputs) + equal(ka->outputs, kb->outputs);
}

}  // namespace

void matchSameShape(Alignment& alignment, const Run& a, const Run& b) {
  std::vector<AlignedRun> out;
  out.reserve(alignment.runs.size());
  auto same = [&](uint64_t i, uint64_t j) {
    const Op& x = a.ops[i];
    const Op& y = b.ops[j];
    return x.kind() == OpKind::kLaunch && y.kind() == OpKind::kLaunch && x.shape == y.shape;
  };
  // Pairs of same shape from the start of a stretch, up to `limit` of them;
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
  // end compete are weighed by reading their events: up to so many pairs
  // of each, and so many pairs in all (each reads two events again).
  constexpr uint64_t kWeighedPairs = 16;
  uint64_t budget = uint64_t{1} << 14;
  for (const AlignedRun& r : alignment.runs) {
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
        int headScore = 0, tailScore = 0;
        for (uint64_t k = headAfter; k < std::min(head, headAfter + kWeighedPairs); ++k, --budget) {
          headScore += agreement(a, b, r.aBegin + k, r.bBegin + k);
        }
        for (uint64_t k = tail; k < std::min(tailFirst, tail + kWeighedPairs); ++k, --budget) {
          tailScore += agreement(a, b, r.aBegin + r.aCount - 1 - k, r.bBegin + r.bCount - 1 - k);
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
  auto note = [&](PairedDespite& p, const OpInfo& first) {
    if (p.count++ == 0) p.first = first;
    return true;
  };
  const Run& a = ctx_.a;
  const Run& b = ctx_.b;
  if (configurationOnly_.count(ia)) return note(launchConfiguration, info(a, ia));
  const Event ea = eventAt(*a.reader, a.ops[ia].seq()), eb = eventAt(*b.reader, b.ops[ib].seq());
  if (staleWordsOnly(ctx_, ea, eb)) return note(staleWords, info(a, ia, ea));
  return sameOperation(ctx_, ea, eb) && note(renamedAllocation, info(a, ia, ea));
}

}  // namespace gpurr::diff
