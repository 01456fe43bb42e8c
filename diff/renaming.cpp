// Allocations run B named otherwise than run A, found from the launches the
// alignment paired by shape (renaming.h).
#include "diff/renaming.h"

#include <map>

#include "diff/decode.h"

namespace gpurr::diff {
using namespace gpurr::trace;

namespace {

constexpr size_t kMaxPairs = 4096;

}  // namespace

std::optional<std::unordered_map<uint32_t, uint64_t>> renamings(const Context& ctx, const Alignment& alignment) {
  const Run& a = ctx.a;
  const Run& b = ctx.b;
  const uint64_t held = a.ops.firstHeld();
  // votes[run B's ordinal][run A's ordinal]: pairs whose pointers at one
  // byte offset point into them.
  std::map<uint32_t, std::map<uint32_t, uint32_t>> votes;
  bool elsewhere = false;  // some pair points an allocation elsewhere than OrdinalMap
  size_t read = 0;
  for (const AlignedRun& run : alignment.runs) {
    if (!run.match) continue;
    for (uint64_t k = run.aBegin < held ? held - run.aBegin : 0; k < run.aCount && read < kMaxPairs; ++k) {
      const Op& oa = a.ops[run.aBegin + k];
      const Op& ob = b.ops[run.bBegin + k];
      if (oa.key == ob.key || oa.kind() != OpKind::kLaunch || ob.kind() != OpKind::kLaunch || oa.shape != ob.shape) {
        continue;
      }
      ++read;
      const Event ea = eventAt(*a.reader, oa.seq()), eb = eventAt(*b.reader, ob.seq());
      const auto* la = std::get_if<KernelLaunch>(&ea.payload);
      const auto* lb = std::get_if<KernelLaunch>(&eb.payload);
      if (la == nullptr || lb == nullptr || la->function != lb->function) continue;
      for (const PointerParam& pb : lb->pointers) {
        for (const PointerParam& pa : la->pointers) {
          if (pa.byteOffset != pb.byteOffset || pa.allocation == 0 || pb.allocation == 0) continue;
          ++votes[pb.allocation][pa.allocation];
          elsewhere |= b.ordinals(pb.allocation) != pa.allocation;
        }
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
    // Most of its pointers, over the whole run (a pointer of a pair whose
    // identities agree agrees with where its identity places it).
    if (tie || best == b.ordinals(ob) || uint64_t{most} * 2 <= b.ids.pointers(ob) || a.ids(best) == 0 ||
        b.ids(ob) == 0 || a.ids.what(best) != b.ids.what(ob)) {
      continue;
    }
    if (const auto it = counts.find(b.ordinals(ob)); it != counts.end() && it->second >= most) continue;
    auto [claim, fresh] = claims.try_emplace(best, most, ob);
    if (!fresh && claim->second.first < most) {
      claim->second = {most, ob};
    } else if (!fresh && claim->second.first == most) {
      claim->second = {most, 0};  // claimed as strongly twice: neither
    }
  }
  std::unordered_map<uint32_t, uint64_t> out;
  for (const auto& [oa, claim] : claims) {
    if (claim.second != 0) out.emplace(claim.second, a.ids(oa));
  }
  if (out.empty()) return std::nullopt;
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

}  // namespace gpurr::diff
