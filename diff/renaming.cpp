// Allocations run B named otherwise than run A, found from the launches the
// alignment paired by shape (renaming.h).
#include "diff/renaming.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "trace_format/scan.h"

namespace gpurr::diff {
using namespace gpurr::trace;

namespace {

// Pairs whose pointers are read, at most: a pass over each run's trace from
// the first to the last of them reads them.
constexpr size_t kMaxPairs = size_t{1} << 18;

}  // namespace

const LaunchPointers::Map& LaunchPointers::of(const Run& run, const std::vector<uint64_t>& seqs) {
  Map& out = byTrace_[run.reader];
  std::vector<uint64_t> missing;
  for (uint64_t seq : seqs) {
    if (!out.contains(seq)) missing.push_back(seq);
  }
  if (missing.empty()) return out;
  out.reserve(out.size() + missing.size());
  // Each looked for is entered, found or not, so that no round reads it again.
  for (uint64_t seq : missing) out.try_emplace(seq);
  size_t next = 0;
  scanEvents(*run.reader, [&](const ScanEvent& e) {
    while (next < missing.size() && missing[next] < e.seq) ++next;
    if (next == missing.size()) return false;
    if (missing[next] == e.seq && e.kind == EventKind::kLaunch) {
      out[e.seq] = Launch{std::hash<std::string_view>{}(e.function) | 1, {e.pointers.begin(), e.pointers.end()}};
    }
    return true;
  }, missing.front(), run.decoders);
  return out;
}

std::optional<Renamings> renamings(const Context& ctx, const Alignment& alignment, LaunchPointers& read) {
  const Run& a = ctx.a;
  const Run& b = ctx.b;
  const uint64_t held = a.ops.firstHeld();
  // The launches the alignment paired by shape: matched, their identities
  // differing. Between its first edit and its last, the operations are
  // aligned again by shape alone: there the identities may have led the
  // alignment astray (an extra launch renames what later launches of its
  // kernel use first, and among repeated groups of launches, as an
  // optimizer's per-parameter updates, a group's renamed temporaries then
  // match the next group's).
  const auto edited = std::ranges::find_if(alignment.runs, [](const AlignedRun& r) { return !r.match; });
  const auto lastEdit = std::ranges::find_if(alignment.runs.rbegin(), alignment.runs.rend(),
                                             [](const AlignedRun& r) { return !r.match; });
  uint64_t fromA = UINT64_MAX, toA = 0, fromB = 0, toB = 0;
  if (edited != alignment.runs.end()) {
    fromA = std::max(edited->aBegin, held);
    fromB = std::max(edited->bBegin, held);
    toA = std::max(fromA, lastEdit->aBegin + lastEdit->aCount);
    toB = std::max(fromB, lastEdit->bBegin + lastEdit->bCount);
  }
  std::vector<std::pair<uint64_t, uint64_t>> pairs;  // (run A's seq, run B's seq)
  const auto pair = [&](uint64_t ia, uint64_t ib) {
    const Op& oa = a.ops[ia];
    const Op& ob = b.ops[ib];
    if (oa.key != ob.key && oa.kind() == OpKind::kLaunch && ob.kind() == OpKind::kLaunch && oa.shape == ob.shape) {
      pairs.emplace_back(oa.seq(), ob.seq());
    }
  };
  for (const AlignedRun& run : alignment.runs) {
    if (!run.match) continue;
    for (uint64_t k = run.aBegin < held ? held - run.aBegin : 0; k < run.aCount && pairs.size() < kMaxPairs; ++k) {
      if (run.aBegin + k < fromA || run.aBegin + k >= toA) pair(run.aBegin + k, run.bBegin + k);
    }
  }
  if (fromA < toA && fromB < toB) {
    std::vector<uint64_t> shapesA(toA - fromA), shapesB(toB - fromB);
    const auto shape = [](const Op& op) { return uint64_t{op.shape} << 8 | static_cast<uint64_t>(op.kind()); };
    for (uint64_t i = fromA; i < toA; ++i) shapesA[i - fromA] = shape(a.ops[i]);
    for (uint64_t i = fromB; i < toB; ++i) shapesB[i - fromB] = shape(b.ops[i]);
    for (const AlignedRun& run : align(Keys(shapesA), Keys(shapesB)).runs) {
      if (!run.match) continue;
      for (uint64_t k = 0; k < run.aCount && pairs.size() < kMaxPairs; ++k) {
        pair(fromA + run.aBegin + k, fromB + run.bBegin + k);
      }
    }
  }
  if (pairs.empty()) return std::nullopt;
  std::vector<uint64_t> seqsA, seqsB;
  for (const auto& [sa, sb] : pairs) seqsA.push_back(sa), seqsB.push_back(sb);
  std::ranges::sort(seqsA);
  std::ranges::sort(seqsB);
  const LaunchPointers::Map &inA = read.of(a, seqsA), &inB = read.of(b, seqsB);
  // votes[run B's ordinal][run A's ordinal]: pointers of those pairs at one
  // byte offset that point into them.
  std::map<uint32_t, std::map<uint32_t, uint32_t>> votes;
  bool elsewhere = false;  // some pair points an allocation elsewhere than OrdinalMap
  for (const auto& [sa, sb] : pairs) {
    const auto la = inA.find(sa), lb = inB.find(sb);
    if (la == inA.end() || lb == inB.end() || la->second.function == 0 ||
        la->second.function != lb->second.function)
      continue;
    for (const PointerParam& pb : lb->second.pointers) {
      for (const PointerParam& pa : la->second.pointers) {
        if (pa.byteOffset != pb.byteOffset || pa.allocation == 0 || pb.allocation == 0) continue;
        ++votes[pb.allocation][pa.allocation];
        elsewhere |= b.ordinals(pb.allocation) != pa.allocation;
      }
    }
  }
  if (!elsewhere) return std::nullopt;
  // Each allocation of run B that most pairs point elsewhere than where its
  // identity places it, to the one they point to most (strictly); each
  // allocation of run A to the allocation of run B with most votes for it.
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> claims;  // run A's ordinal: (votes, run B's ordinal)
  for (const auto& [ob, counts] : votes) {
    uint32_t best = 0, most = 0;
    bool tie = false;
    for (const auto& [oa, n] : counts) {
      if (n > most) {
        best = oa, most = n, tie = false;
      } else if (n == most) {
        tie = true;
      }
    }
    // Two thirds of its pointers at least, over the whole run (a pointer of
    // a pair whose identities agree agrees with where its identity places
    // it): a loop over buffers in another order (a set's), which the rest of
    // the program uses in one order, pairs some of their uses with other
    // buffers, up to half of them or so, without renaming any.
    if (tie || best == b.ordinals(ob) || uint64_t{most} * 3 < uint64_t{b.ids.pointers(ob)} * 2 || a.ids(best) == 0 ||
        b.ids(ob) == 0 || a.ids.what(best) != b.ids.what(ob)) {
      continue;
    }
    auto [claim, fresh] = claims.try_emplace(best, most, ob);
    if (!fresh && claim->second.first < most) {
      claim->second = {most, ob};
    } else if (!fresh && claim->second.first == most) {
      claim->second = {most, 0};  // claimed as strongly twice: neither
    }
  }
  // An allocation of run B first used before the first edit, whose identity
  // the runs agreed on there, may be that allocation of run A (an extra
  // operation on one buffer, whose output the next operation reads where
  // the other run's reads that buffer): a claim would take its counterpart
  // from it, or give it another's (the extra operation in run A), and the
  // operations that used it there would no longer match. Those claims are
  // left out of the guarded set.
  const uint64_t editB = edited != alignment.runs.end() && edited->bBegin >= b.ops.firstHeld() &&
                                 edited->bBegin < b.ops.size()
                             ? b.ops[edited->bBegin].seq()
                             : 0;
  std::unordered_set<uint64_t> vouched;  // the identities run B's allocations first used before editB hold
  if (editB != 0) {
    std::unordered_set<uint64_t> claimed;
    for (const auto& [oa, claim] : claims) claimed.insert(a.ids(oa));
    for (uint32_t ob = 1; ob < b.ids.size(); ++ob) {
      if (b.ids.firstUse(ob) < editB && claimed.count(b.ids(ob))) vouched.insert(b.ids(ob));
    }
  }
  Renamings out;
  for (const auto& [oa, claim] : claims) {
    if (claim.second == 0) continue;
    out.all.emplace(claim.second, a.ids(oa));
    if (!vouched.count(a.ids(oa)) && !(editB != 0 && b.ids.firstUse(claim.second) < editB)) {
      out.guarded.emplace(claim.second, a.ids(oa));
    }
  }
  if (out.all.empty()) return std::nullopt;
  return out;
}

uint64_t sameIdentities(const Run& a, const Run& b, const Alignment& alignment) {
  const uint64_t held = a.ops.firstHeld();
  uint64_t n = 0;
  for (const AlignedRun& run : alignment.runs) {
    if (!run.match) continue;
    const uint64_t from = run.aBegin < held ? std::min(held - run.aBegin, run.aCount) : 0;
    n += from;
    for (uint64_t k = from; k < run.aCount; ++k) n += a.ops[run.aBegin + k].key == b.ops[run.bBegin + k].key;
  }
  return n;
}

uint64_t agreeingPrefix(const Run& a, const Run& b, const Alignment& alignment) {
  uint64_t n = 0;
  for (const AlignedRun& run : alignment.runs) {
    if (!run.match || run.aBegin != n) return n;
    for (uint64_t k = 0; k < run.aCount; ++k, ++n) {
      if (run.aBegin + k >= a.ops.firstHeld() && a.ops[run.aBegin + k].key != b.ops[run.bBegin + k].key) return n;
    }
  }
  return n;
}

bool keepsAgreeing(const Run& a, const Run& b, const Alignment& alignment, uint64_t n) {
  uint64_t checked = 0;  // run A's operations before `n` matched with one of the same identity
  for (const AlignedRun& run : alignment.runs) {
    if (!run.match || run.aBegin >= n) continue;
    for (uint64_t k = 0; k < run.aCount && run.aBegin + k < n; ++k) {
      const uint64_t i = run.aBegin + k;
      if (i >= a.ops.firstHeld() && a.ops[i].key != b.ops[run.bBegin + k].key) return false;
      ++checked;
    }
  }
  return checked == n;
}

}  // namespace gpurr::diff
