// Equally short alignments told apart by what the operations agree on
// (ties.h). A region is aligned again by the textbook dynamic programme for
// edit distance, a match allowed only between operations of one identity
// issued from one site (Op::sitedKey, as the alignment matches them),
// an edit costing more than all the pairs a region can hold whose origins
// disagree, and such a pair more than all those whose counts within their
// step disagree (which puts an extra operation among repeated ones last,
// as the extra iteration of a loop is).
#include "diff/ties.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>

namespace gpurr::diff {
namespace {

constexpr uint64_t kGap = 64;     // matched operations between the stretches of one region, at most
constexpr uint64_t kMargin = 64;  // matched operations taken into a region on either side, at most
constexpr uint64_t kMaxCells = uint64_t{1} << 22;  // (na + 1) * (nb + 1) of one region
constexpr uint64_t kOriginBudget = uint64_t{1} << 16;
constexpr int64_t kMaxShift = 16;  // operations a cut run's last region may end sooner or later

// Where a framework origin says an operation is in the program (its count
// within the step aside, which an extra operation shifts); 0 for none.
uint64_t siteOf(const std::optional<Origin>& o) {
  if (!o) return 0;
  return std::hash<std::string>()(fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", o->op,
                                              fmt::join(o->opStack, "\x1e"), static_cast<int>(o->phase),
                                              o->forwardOp, o->module, o->file, o->line, o->step)) |
         1;
}

// Appends a run, merged with the last where it continues it; empty ones
// are dropped.
void append(std::vector<AlignedRun>& out, const AlignedRun& r) {
  if (r.aCount == 0 && r.bCount == 0) return;
  if (!out.empty()) {
    AlignedRun& last = out.back();
    if (last.match == r.match && last.aBegin + last.aCount == r.aBegin && last.bBegin + last.bCount == r.bBegin) {
      last.aCount += r.aCount;
      last.bCount += r.bCount;
      return;
    }
  }
  out.push_back(r);
}

// The operations of each run that `runs` match.
uint64_t matchedIn(const std::vector<AlignedRun>& runs) {
  uint64_t n = 0;
  for (const AlignedRun& r : runs) n += r.match ? r.aCount : 0;
  return n;
}

// One region: run A's operations [a0, a0 + na) against run B's [b0, b0 + nb).
class Region {
 public:
  // `span`: at least na + nb; regions of one span have costs that compare.
  Region(const Run& a, const Run& b, uint64_t a0, uint64_t na, uint64_t b0, uint64_t nb, uint64_t span)
      : a_(a), b_(b), a0_(a0), b0_(b0), na_(na), nb_(nb), site_(span + 1), edit_(site_ * (span + 1)) {
    for (uint64_t i = 0; i < na; ++i) sitesA_.push_back(site(a, a0 + i));
    for (uint64_t j = 0; j < nb; ++j) sitesB_.push_back(site(b, b0 + j));
  }

  // The cost of `runs`, which cover the region exactly.
  uint64_t cost(const std::vector<AlignedRun>& runs) const {
    uint64_t c = 0;
    for (const AlignedRun& r : runs) {
      if (!r.match) {
        c += edit_ * (r.aCount + r.bCount);
        continue;
      }
      for (uint64_t k = 0; k < r.aCount; ++k) c += pair(r.aBegin - a0_ + k, r.bBegin - b0_ + k);
    }
    return c;
  }

  // The cheapest alignment of the region, and its cost.
  std::pair<std::vector<AlignedRun>, uint64_t> best() const {
    enum : uint8_t { kMatch, kDeleteA, kInsertB };
    const uint64_t width = nb_ + 1;
    std::vector<uint8_t> from((na_ + 1) * width);
    std::vector<uint64_t> prev(width), cur(width);
    for (uint64_t j = 0; j < width; ++j) prev[j] = j * edit_, from[j] = kInsertB;
    for (uint64_t i = 1; i <= na_; ++i) {
      cur[0] = i * edit_;
      from[i * width] = kDeleteA;
      const uint64_t key = a_.ops[a0_ + i - 1].sitedKey();
      for (uint64_t j = 1; j <= nb_; ++j) {
        uint64_t c = prev[j] + edit_;
        uint8_t f = kDeleteA;
        if (cur[j - 1] + edit_ < c) c = cur[j - 1] + edit_, f = kInsertB;
        if (key == b_.ops[b0_ + j - 1].sitedKey()) {
          const uint64_t m = prev[j - 1] + pair(i - 1, j - 1);
          if (m <= c) c = m, f = kMatch;
        }
        cur[j] = c;
        from[i * width + j] = f;
      }
      std::swap(prev, cur);
    }
    std::vector<uint8_t> steps;
    for (uint64_t i = na_, j = nb_; i > 0 || j > 0;) {
      const uint8_t f = from[i * width + j];
      steps.push_back(f);
      if (f != kInsertB) --i;
      if (f != kDeleteA) --j;
    }
    std::vector<AlignedRun> runs;
    uint64_t i = a0_, j = b0_;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      const bool match = *it == kMatch, da = *it != kInsertB, db = *it != kDeleteA;
      append(runs, AlignedRun{match, i, j, da ? 1u : 0u, db ? 1u : 0u});
      i += da, j += db;
    }
    return {std::move(runs), prev[nb_]};
  }

 private:
  struct Site {
    uint64_t where = 0;      // siteOf
    uint64_t stepLaunch = 0;  // Origin::stepLaunch
  };
  static Site site(const Run& run, uint64_t index) {
    const auto e = run.reader->event(run.ops[index].seq());
    if (!e) return {};
    return {siteOf(e->origin), e->origin ? e->origin->stepLaunch : 0};
  }
  uint64_t pair(uint64_t i, uint64_t j) const {
    return (sitesA_[i].where != sitesB_[j].where ? site_ : 0) + (sitesA_[i].stepLaunch != sitesB_[j].stepLaunch);
  }

  const Run& a_;
  const Run& b_;
  uint64_t a0_, b0_, na_, nb_;
  uint64_t site_, edit_;  // the cost of a pair whose origins disagree, of an edit
  std::vector<Site> sitesA_, sitesB_;
};

// Whether run A's `count` operations from `a0` have the identities of run
// B's from `b0`, each shifted by `da` and `db`.
bool shiftedMatch(const Run& a, const Run& b, uint64_t a0, uint64_t b0, uint64_t count, int64_t da, int64_t db) {
  if (a0 + da + count > a.ops.size() || b0 + db + count > b.ops.size()) return false;
  for (uint64_t k = 0; k < count; ++k) {
    if (a.ops[a0 + da + k].sitedKey() != b.ops[b0 + db + k].sitedKey()) return false;
  }
  return true;
}

}  // namespace

void breakTies(Alignment& alignment, const Run& a, const Run& b, bool cutLast) {
  std::vector<AlignedRun>& runs = alignment.runs;
  const uint64_t held = std::max(a.ops.firstHeld(), b.ops.firstHeld());
  // Runs from `last` on are left as they are.
  const size_t last = cutLast && !runs.empty() && !runs.back().match ? runs.size() - 1 : runs.size();
  uint64_t budget = kOriginBudget;
  std::vector<AlignedRun> out;
  for (size_t i = 0; i < runs.size();) {
    if (i >= last) {
      out.push_back(runs[i++]);  // kept apart, even from a stretch of the same run before it
      continue;
    }
    if (runs[i].match) {
      append(out, runs[i++]);
      continue;
    }
    // Stretches i to j, a few matched operations apart, and the matched
    // operations either side, at most kMargin each. A change that recurs in
    // every step of a loop makes stretches a few operations apart for as
    // long as the loop runs: a region ends before it would exceed
    // kMaxCells, and the next begins there.
    const auto within = [&](size_t k) {
      const uint64_t na = runs[k].aBegin + runs[k].aCount + 2 * kMargin - runs[i].aBegin;
      const uint64_t nb = runs[k].bBegin + runs[k].bCount + 2 * kMargin - runs[i].bBegin;
      return (na + 1) * (nb + 1) <= kMaxCells;
    };
    size_t j = i;
    while (j + 2 < last && runs[j + 1].match && runs[j + 1].aCount <= kGap && !runs[j + 2].match && within(j + 2)) {
      j += 2;
    }
    uint64_t before = 0, after = 0;
    if (!out.empty() && out.back().match) {
      const AlignedRun& m = out.back();
      before = std::min({m.aCount, kMargin, m.aBegin + m.aCount - std::min(m.aBegin + m.aCount, held),
                         m.bBegin + m.bCount - std::min(m.bBegin + m.bCount, held)});
    }
    if (j + 1 < runs.size() && runs[j + 1].match) after = std::min(runs[j + 1].aCount, kMargin);
    const uint64_t a0 = runs[i].aBegin - before, b0 = runs[i].bBegin - before;
    const uint64_t na = runs[j].aBegin + runs[j].aCount + after - a0;
    const uint64_t nb = runs[j].bBegin + runs[j].bCount + after - b0;
    if ((na + 1) * (nb + 1) > kMaxCells || na + nb > budget) {
      while (i <= j) append(out, runs[i++]);
      continue;
    }
    budget -= na + nb;
    std::vector<AlignedRun> had;
    append(had, AlignedRun{true, a0, b0, before, before});
    for (size_t k = i; k <= j; ++k) append(had, runs[k]);
    append(had, AlignedRun{true, runs[j].aBegin + runs[j].aCount, runs[j].bBegin + runs[j].bCount, after, after});
    // The last region before a cut run's rest, all matched after it: the
    // other run may end the region sooner or later (its operations after
    // the cut are not edits), where the operations after it still match:
    // by up to twice as many operations as the region has edits (those of
    // one run moved to the other).
    const bool free = last < runs.size() && j + 2 == last && runs[j + 1].match;
    const int64_t reach =
        free ? std::min<int64_t>(kMaxShift, 2 * static_cast<int64_t>(na + nb - 2 * matchedIn(had))) : 0;
    const uint64_t span = na + nb + static_cast<uint64_t>(reach);
    const Region region(a, b, a0, na, b0, nb, span);
    auto [better, cost] = region.best();
    int64_t shift = 0;
    if (free) {
      const bool restB = runs[last].aCount == 0;  // run B goes on after A's end
      const AlignedRun& next = runs[j + 1];
      const uint64_t remaining = next.aCount - after;
      for (int64_t d = -reach; d <= reach; ++d) {
        const uint64_t nFree = restB ? nb : na;
        if (d == 0 || (d < 0 && static_cast<uint64_t>(-d) > nFree) ||
            (d > 0 && static_cast<uint64_t>(d) > (restB ? runs[last].bCount : runs[last].aCount)) ||
            (restB ? (na + 1) * (nb + d + 1) : (na + d + 1) * (nb + 1)) > kMaxCells || na + nb + d > budget ||
            !shiftedMatch(a, b, next.aBegin + after, next.bBegin + after, remaining, restB ? 0 : d, restB ? d : 0)) {
          continue;
        }
        budget -= na + nb + d;
        const Region shifted(a, b, a0, restB ? na : na + d, b0, restB ? nb + d : nb, span);
        auto [runsThere, costThere] = shifted.best();
        if (costThere < cost) better = std::move(runsThere), cost = costThere, shift = d;
      }
    }
    if (cost < region.cost(had)) {
      if (before > 0) {
        out.back().aCount -= before;
        out.back().bCount -= before;
        if (out.back().aCount == 0) out.pop_back();
      }
      for (const AlignedRun& r : better) append(out, r);
      if (after > 0 || shift != 0) {
        AlignedRun& next = runs[j + 1];
        AlignedRun& rest = runs[last];
        const bool restB = rest.aCount == 0;
        next.aBegin += after, next.bBegin += after;
        next.aCount -= after, next.bCount -= after;
        (restB ? next.bBegin : next.aBegin) += shift;
        (restB ? rest.bBegin : rest.aBegin) += shift;
        (restB ? rest.bCount : rest.aCount) -= shift;
      }
    } else {
      for (size_t k = i; k <= j; ++k) append(out, runs[k]);
    }
    i = j + 1;
  }
  runs = std::move(out);
  alignment.matched = matchedIn(runs);
}

}  // namespace gpurr::diff
