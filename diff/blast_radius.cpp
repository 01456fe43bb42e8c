// Stage 6, the blast radius (blast_radius.h): taint propagated through
// allocations from the first divergence over the rest of the alignment, each
// run's ranges read as it goes (TailRanges).
#include "diff/blast_radius.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "diff/classify_matched.h"
#include "diff/compare.h"
#include "diff/decode.h"
#include "diff/intervals.h"
#include "diff/swaps.h"

namespace gpurr::diff {
using namespace gpurr::trace;

namespace {

// The ranges (in run A's ordinal numbering) of every operation of a run from
// `firstOp` on, inputs then outputs, for the blast radius. They are read as
// the blast radius walks forward, block by block, and those it has passed
// are given up: a first divergence early in a long run does not hold every
// range of the run at once. A run of several host threads is walked in
// canonical order, which moves operations only among concurrent ones: its
// ranges are held in trace order, found by seq, and given up once every
// operation before them in the trace has been passed.
class TailRanges {
 public:
  struct R {
    uint32_t allocation;
    uint64_t begin, end;
  };

  TailRanges(const Run& run, uint64_t firstOp)
      : run_(run), first_(firstOp), released_(firstOp), toRead_(run.ops.size() - std::min(firstOp, run.ops.size())) {
    if (firstOp >= run.ops.size()) return;
    uint64_t from = run.ops[firstOp].seq();
    if (run.threads) {
      for (uint64_t i = firstOp; i < run.ops.size(); ++i) from = std::min(from, run.ops[i].seq());
      // Operations before `firstOp` that the trace holds after `from`: never asked for.
      for (uint64_t i = run.ops.firstHeld(); i < firstOp; ++i) {
        if (run.ops[i].seq() > from) skip_.insert(run.ops[i].seq());
      }
    }
    scanner_ = std::make_unique<EventScanner>(*run.reader, from, run.decoders);
    visit_ = [this](const ScanEvent& e) {
      if (!isOperation(e) || (!skip_.empty() && skip_.erase(e.seq) != 0)) return true;
      add(e, entries_.emplace_back());
      return ++read_ < toRead_;
    };
  }

  std::span<const R> inputs(uint64_t op) {
    const Entry& e = entries_[index(op)];
    return {ranges_.data() + (e.begin - rangeBase_), e.inputs};
  }
  std::span<const R> outputs(uint64_t op) {
    const Entry& e = entries_[index(op)];
    return {ranges_.data() + (e.begin - rangeBase_) + e.inputs, e.outputs};
  }

  // Nothing before operation `op` will be asked for again.
  void release(uint64_t op) {
    if (!scanner_ || op <= released_) return;
    uint64_t drop = 0;  // entries at the front that will not be asked for again
    if (!run_.threads) {
      drop = std::min<uint64_t>(op - first_, entries_.size());
      released_ = op;
    } else {
      for (; released_ < op; ++released_) entries_[index(released_)].passed = true;
      while (passed_ < entries_.size() && entries_[passed_].passed) ++passed_;
      drop = passed_;
    }
    if (drop < 4096 || drop * 2 < entries_.size()) return;  // in bulk: a move of what is left
    const uint64_t keepFrom = drop < entries_.size() ? entries_[drop].begin : rangeBase_ + ranges_.size();
    ranges_.erase(ranges_.begin(), ranges_.begin() + static_cast<ptrdiff_t>(keepFrom - rangeBase_));
    rangeBase_ = keepFrom;
    entries_.erase(entries_.begin(), entries_.begin() + static_cast<ptrdiff_t>(drop));
    first_ += drop;
    if (run_.threads) {
      passed_ -= drop;
      hint_ = hint_ >= drop ? hint_ - drop : 0;
    }
  }

 private:
  struct Entry {
    uint64_t seq = 0;
    uint64_t begin = 0;  // index of its first range, counted from the first ever read
    uint32_t inputs = 0, outputs = 0;
    bool passed = false;  // the blast radius is past it (runs of several threads)
  };

  void add(const ScanEvent& e, Entry& entry) {
    entry.seq = e.seq;
    entry.begin = rangeBase_ + ranges_.size();
    auto add = [&](const ScanRange& r, uint32_t& count) {
      ranges_.push_back({run_.ordinals(r.range.allocation), r.range.offset, r.range.offset + r.range.size});
      ++count;
    };
    forEachAccess(e, run_.reader->header().options.hashInputs, [&](const ScanRange& r) { add(r, entry.inputs); },
                  [&](const ScanRange& r) { add(r, entry.outputs); });
  }

  // Where operation `op`'s ranges are in entries_, read on as far as needed.
  size_t index(uint64_t op) {
    if (!run_.threads) {
      while (op >= first_ + entries_.size()) readMore();
      return op - first_;
    }
    const uint64_t seq = run_.ops[op].seq();
    while (entries_.empty() || entries_.back().seq < seq) readMore();
    // Mostly the entry after the last one found: canonical order is close
    // to the trace's.
    for (const size_t k : {hint_, hint_ + 1}) {
      if (k < entries_.size() && entries_[k].seq == seq) return hint_ = k;
    }
    const auto it = std::lower_bound(entries_.begin(), entries_.end(), seq,
                                     [](const Entry& x, uint64_t s) { return x.seq < s; });
    if (it == entries_.end() || it->seq != seq) vanished();
    hint_ = static_cast<size_t>(it - entries_.begin());
    return hint_;
  }

  void readMore() {
    const size_t before = entries_.size();
    // false at the end, or once the last operation was read
    while (entries_.size() == before) {
      if (!scanner_ || !scanner_->next(visit_)) {
        if (entries_.size() == before) vanished();
      }
    }
  }

  [[noreturn]] void vanished() const {
    throw TraceError(fmt::format("{}: operations vanished between two reads", run_.reader->path().string()));
  }

  const Run& run_;
  uint64_t first_;     // trace order: the operation entries_[0] is (one host thread)
  uint64_t released_;  // operations before it were released
  const uint64_t toRead_;  // operations from `firstOp` on
  uint64_t read_ = 0;      // ... read so far
  size_t passed_ = 0;  // entries at the front the blast radius is past (several threads)
  size_t hint_ = 0;    // where the last operation was found (several threads)
  std::vector<Entry> entries_;
  std::vector<R> ranges_;
  uint64_t rangeBase_ = 0;  // ranges given up
  std::unordered_set<uint64_t> skip_;
  std::unique_ptr<EventScanner> scanner_;
  std::function<bool(const ScanEvent&)> visit_;
};

class Taint {
 public:
  using Label = IntervalLabels::Label;
  // Smallest label among the op's inputs, if any is tainted.
  std::optional<Label> reads(TailRanges& t, uint64_t op) const {
    std::optional<Label> out;
    for (const TailRanges::R& x : t.inputs(op)) {
      const auto l = labels_.minLabel(x.allocation, x.begin, x.end);
      if (l && (!out || *l < *out)) out = l;
    }
    return out;
  }
  void writes(TailRanges& t, uint64_t op, Label label) {
    for (const TailRanges::R& x : t.outputs(op)) labels_.assign(x.allocation, x.begin, x.end, label);
  }

 private:
  IntervalLabels labels_;
};

// A divergence's label: when it happened in run A, twice the event number
// of its earliest operation plus one; a stretch of run B's operations alone
// just before run A's operation after it. Data derived from several
// divergences carries the earliest one's label (Taint::reads).
Taint::Label labelOf(const Run& a, const AlignedRun& run, uint64_t offset) {
  if (run.match) return static_cast<Taint::Label>(2 * a.ops[run.aBegin + offset].seq() + 1);
  if (run.aCount == 0) {
    return run.aBegin < a.ops.size() ? static_cast<Taint::Label>(2 * a.ops[run.aBegin].seq())
                                     : std::numeric_limits<Taint::Label>::max();
  }
  uint64_t seq = UINT64_MAX;
  for (uint64_t k = 0; k < run.aCount; ++k) seq = std::min(seq, a.ops[run.aBegin + k].seq());
  return static_cast<Taint::Label>(2 * seq + 1);
}

// A stretch that reads no data derived from an earlier divergence, as an
// independent divergence. `listed`: its stretch, where the pass lists it.
IndependentDivergence independentStretch(const Context& ctx, const std::vector<AlignedRun>& runs, size_t r,
                                         Group group, const PathDivergence* listed) {
  const AlignedRun& run = runs[r];
  IndependentDivergence ind;
  ind.path = true;
  if (run.aCount > 0) ind.a = info(ctx.a, run.aBegin);
  if (run.bCount > 0) ind.b = info(ctx.b, run.bBegin);
  if (group.any()) {
    const Reordering m = listed && listed->reordered ? *listed->reordered : reorderingOf(ctx, runs, r, group);
    if (run.aCount == 0 && !m.otherOps.empty()) ind.a = m.otherOps.front();
    if (run.bCount == 0 && !m.otherOps.empty()) ind.b = m.otherOps.front();
    ind.reason =
        fmt::format("reordered: {}, reading no data derived from an earlier divergence", reorderingText(m));
  } else {
    ind.reason = fmt::format("different path ({} in run A, {} in run B) reading no "
                             "data derived from an earlier divergence",
                             plural(run.aCount, "operation"), plural(run.bCount, "operation"));
  }
  return ind;
}

// A matched pair whose outputs differ and which reads no data derived from
// an earlier divergence, as an independent divergence; `swap`: where it is
// two operations swapped (swaps.h).
IndependentDivergence independentPair(const Context& ctx, uint64_t ia, uint64_t ib, const std::optional<Swap>& swap) {
  const Event ea = eventAt(*ctx.a.reader, ctx.a.ops[ia].seq()), eb = eventAt(*ctx.b.reader, ctx.b.ops[ib].seq());
  IndependentDivergence ind;
  ind.a = info(ctx.a, ia, ea);
  ind.b = info(ctx.b, ib, eb);
  if (swap) {
    ind.reason = fmt::format("reordered: {}, reading no data derived from an earlier divergence", swapText(ib, *swap));
    return ind;
  }
  std::vector<RangeDifference> inputs;  // by position, allocation identity and digest
  const bool sameIn = compareRanges(ctx, view(ea).inputs, view(eb).inputs, inputs);
  const bool sameParams = sameParameters(ctx, ea, eb);
  // Its inputs are not derived from an earlier divergence: identical, or
  // written where no recorded operation of the comparison diverged. Traces
  // that hash a launch's inputs at their first use only (FORMAT.md,
  // hashInputs) hold those whose bytes no recorded operation had written
  // since their memory was handed out, or that another stream wrote last:
  // where both runs hashed each differing one.
  const bool firstUse = !ctx.a.reader->header().options.hashInputs && !ctx.b.reader->header().options.hashInputs &&
                        std::ranges::all_of(inputs, [](const RangeDifference& d) {
                          return d.a.size > 0 && d.b.size > 0 && d.digestA != 0 && d.digestB != 0;
                        });
  // A random op whose differing inputs are all ranges it writes (its output
  // buffers' old contents, hashed at their first use): the generator's state
  // differs, as the first divergence at such an op says.
  const std::vector<RangeDigest>& written = view(ea).outputs;
  const bool drawn = !sameIn && randomGenerator(ea.origin) && std::ranges::all_of(inputs, [&](const RangeDifference& d) {
    return std::ranges::any_of(written, [&](const RangeDigest& o) {
      return o.range.allocation == d.a.allocation && o.range.offset == d.a.offset && o.range.size == d.a.size;
    });
  });
  ind.reason = sameIn && sameParams ? "outputs differ from identical inputs and parameters"
               : sameIn             ? "outputs differ; its parameters differ, its inputs are identical"
               : drawn ? fmt::format("outputs differ; {} draws them from the random generator, whose state differs "
                                     "(its inputs differ only in its output buffers' old contents); its parameters {}",
                                     ea.origin->op, sameParams ? "are identical" : "differ too")
               : firstUse ? fmt::format("outputs differ; its inputs differ in bytes it read at their first use, "
                                        "which no recorded operation had written (uninitialised memory) or another "
                                        "stream wrote last; its parameters {}",
                                        sameParams ? "are identical" : "differ too")
                          : fmt::format("outputs differ; its inputs differ too, though no earlier divergent operation "
                                        "wrote them; its parameters {}",
                                        sameParams ? "are identical" : "differ too");
  return ind;
}

// What a report shows of an independent divergence but its step and event
// numbers, and whether its origin was given by place: a later one alike is
// counted with it (IndependentDivergence::more).
std::string siteKey(const IndependentDivergence& i) {
  const OpInfo& o = i.a.name.empty() ? i.b : i.a;
  std::string origin;
  if (o.origin) {
    Origin same = *o.origin;
    same.byPlace = false;
    origin = describe(same, OriginStep::kNone);
  }
  return fmt::format("{}\n{}\n{}\n{}\n{}", i.path, static_cast<int>(o.kind), o.name, origin, i.reason);
}

// Events read at most to tell whether a later independent divergence is
// like a listed one; beyond it, later ones are only counted.
constexpr size_t kMaxLikenessReads = 4096;
// Later stretches read at most to name an unobserved first divergence, and
// the operations of each side compared by shape.
constexpr size_t kMaxNamingReads = 8;
constexpr uint64_t kMaxNamingShapes = 64;
// Matched pairs at most at which two operations swapped are looked for.
constexpr size_t kMaxSwapSearches = 256;

}  // namespace

BlastResult blastRadius(const Context& ctx, const std::vector<AlignedRun>& runs, const std::vector<Group>& groups,
                        AlignmentAt first, const FirstDivergence& firstDivergence, BenignPairs& benign) {
  const Run& a = ctx.a;
  const Run& b = ctx.b;
  const AlignedRun& firstStretch = runs[first.run];
  const uint64_t startA = firstStretch.aBegin + (firstStretch.match ? first.offset : 0);
  const uint64_t startB = firstStretch.bBegin + (firstStretch.match ? first.offset : 0);
  TailRanges tailA(a, startA);
  TailRanges tailB(b, startB);
  Taint taint;
  std::unordered_map<size_t, Taint::Label> groupLabel;  // the first stretch of each reordering: its label
  BlastResult out;
  BlastRadius& blast = out.blast;
  // The divergences that read no data derived from an earlier one, the
  // first in alignment order first, each with the operations of run A
  // counted up to it and where it is listed among the independent ones.
  struct Root {
    AlignmentAt at;
    Taint::Label label;
    uint64_t ops = 0, launches = 0;
    std::optional<size_t> listed, alike;  // alike: counted with that listed one
  };
  std::vector<Root> roots{{first, labelOf(a, firstStretch, first.offset), 0, 0, {}, {}}};
  struct Count {
    uint64_t ops = 0, launches = 0;
  };
  Count later;                                         // operations of run A after the first
  std::unordered_map<Taint::Label, Count> taintedBy;   // ... reading data derived from a divergence, by its label
  auto countA = [&](uint64_t ia, std::optional<Taint::Label> reads) {
    const bool launch = a.ops[ia].kind() == OpKind::kLaunch;
    ++later.ops;
    later.launches += launch;
    if (reads) {
      Count& c = taintedBy[*reads];
      ++c.ops;
      c.launches += launch;
    }
  };
  // Whether stretch `s` is `f` again: as many operations a side, the first
  // of each from the same site (and with one).
  auto sameStretch = [&](const AlignedRun& f, const AlignedRun& s) {
    if (f.match || s.aCount != f.aCount || s.bCount != f.bCount) return false;
    auto same = [](const Run& run, uint64_t x, uint64_t y, uint64_t count) {
      return count == 0 || (run.ops[x].tag() != 0 && run.ops[x].tag() == run.ops[y].tag() &&
                            run.ops[x].shape == run.ops[y].shape);
    };
    return same(a, f.aBegin, s.aBegin, f.aCount) && same(b, f.bBegin, s.bBegin, f.bCount);
  };
  // Whether stretch `s` holds the same operations as `f` by their shapes:
  // as many a side, of the same kernels and launch configurations in order
  // (the first kMaxNamingShapes of each side).
  auto sameShapes = [&](const AlignedRun& f, const AlignedRun& s) {
    if (f.match || s.aCount != f.aCount || s.bCount != f.bCount) return false;
    auto same = [](const Run& run, uint64_t x, uint64_t y, uint64_t count) {
      for (uint64_t k = 0; k < std::min(count, kMaxNamingShapes); ++k) {
        if (run.ops[x + k].shape != run.ops[y + k].shape) return false;
      }
      return true;
    };
    return same(a, f.aBegin, s.aBegin, f.aCount) && same(b, f.bBegin, s.bBegin, f.bCount);
  };
  // A path divergence first whose first operation the layer did not observe
  // (BlastResult::namedLater), and the later stretches read to name it: in
  // another step, at the same place in it (its launches before it).
  const PathDivergence* fs = firstDivergence.stretch ? &*firstDivergence.stretch : nullptr;
  const OpInfo* unnamed = !fs                                                         ? nullptr
                          : !fs->aOps.empty() && opUnobserved(fs->aOps.front()) ? &fs->aOps.front()
                          : !fs->bOps.empty() && opUnobserved(fs->bOps.front()) ? &fs->bOps.front()
                                                                                   : nullptr;
  const bool unnamedInA = unnamed && !fs->aOps.empty() && unnamed == &fs->aOps.front();
  size_t namingReads = 0;
  // The listed independent divergences' first operations' shape and site
  // tag (so that a later one unlike them needs no event read), and siteKey.
  struct Listed {
    uint32_t shape;
    uint64_t tag;
    std::string key;
  };
  std::vector<Listed> listedSites;
  size_t likenessReads = 0;
  // An independent divergence at `at`, whose first operation is `op`: made
  // by `make`, counted with a listed one it is like, or listed among the
  // first few.
  auto addRoot = [&](AlignmentAt at, Taint::Label label, const Op& op, auto&& make) {
    ++blast.independentCount;
    Root& root = roots.emplace_back(Root{at, label, later.ops, later.launches, {}, {}});
    std::optional<IndependentDivergence> made;
    for (size_t i = 0; i < listedSites.size(); ++i) {
      if (listedSites[i].shape != op.shape || listedSites[i].tag != op.tag()) continue;
      if (!made) {
        if (likenessReads == kMaxLikenessReads) break;
        ++likenessReads;
        made = make();
      }
      if (siteKey(*made) != listedSites[i].key) continue;
      IndependentDivergence& like = blast.independent[i];
      const OpInfo& o = made->a.name.empty() ? made->b : made->a;
      ++like.more;
      like.last = {eventOf(made->a), eventOf(made->b), o.origin ? o.origin->step : -1};
      root.alike = i;
      return;
    }
    if (blast.independent.size() < ctx.options.maxIndependent) {
      root.listed = blast.independent.size();
      blast.independent.push_back(made ? std::move(*made) : make());
      listedSites.push_back({op.shape, op.tag(), siteKey(blast.independent.back())});
    }
  };
  // Two operations swapped (swaps.h) at a divergence, the first or an
  // independent one: the pairs up to the farther of the two operations, in
  // run A's order, that are swaps too are part of it (a loop over several
  // tensors in another order swaps many pairs), its other end included.
  struct SwapRegion {
    Swap swap;
    uint64_t end;
    Taint::Label label;
  };
  std::vector<SwapRegion> swapRegions;
  auto addSwap = [&](uint64_t ia, uint64_t ib, const Swap& s, Taint::Label label) {
    swapRegions.push_back({s, std::max(s.aIndex, ia + (std::max(s.bIndex, ib) - ib)), label});
  };
  if (firstDivergence.swap) addSwap(startA, startB, *firstDivergence.swap, roots.front().label);
  size_t swapSearches = 0;
  // The swap at a pair whose outputs and identities differ, looked for
  // kMaxSwapSearches times at most.
  auto swapOf = [&](uint64_t ia, uint64_t ib) -> std::optional<Swap> {
    const Op &oa = a.ops[ia], &ob = b.ops[ib];
    if (!oa.hashed() || !ob.hashed() || oa.outputs == ob.outputs || oa.key == ob.key || oa.shape != ob.shape ||
        swapSearches++ >= kMaxSwapSearches) {
      return std::nullopt;
    }
    return swapAt(ctx, ia, ib, eventAt(*a.reader, oa.seq()), eventAt(*b.reader, ob.seq()));
  };
  // The label of the swap a pair belongs to, if any.
  auto swapped = [&](uint64_t ia, uint64_t ib) -> std::optional<Taint::Label> {
    std::erase_if(swapRegions, [&](const SwapRegion& r) { return r.end < ia; });
    for (const SwapRegion& r : swapRegions) {
      if (ia == r.swap.aIndex || ib == r.swap.bIndex) return r.label;
    }
    if (!swapRegions.empty() && swapOf(ia, ib)) return swapRegions.front().label;
    return std::nullopt;
  };
  for (size_t r = first.run; r < runs.size(); ++r) {
    const AlignedRun& run = runs[r];
    if (!run.match) {
      // A stretch: everything it writes differs between the runs.
      std::optional<Taint::Label> reads;
      for (uint64_t k = 0; k < run.aCount; ++k) {
        const auto l = taint.reads(tailA, run.aBegin + k);
        if (l && (!reads || *l < *reads)) reads = l;
      }
      for (uint64_t k = 0; k < run.bCount; ++k) {
        const auto l = taint.reads(tailB, run.bBegin + k);
        if (l && (!reads || *l < *reads)) reads = l;
      }
      const bool isFirst = r == first.run;
      // A later stretch of a reordering: what its first wrote, written elsewhere.
      const Group group = groups[r];
      const bool laterEnd = group.any() && group.first < r;
      const Taint::Label label = isFirst    ? roots.front().label
                                 : laterEnd ? groupLabel[group.first]
                                 : reads    ? *reads
                                            : labelOf(a, run, 0);
      if (group.any() && group.first == r) groupLabel[r] = label;
      if (!isFirst) {
        for (uint64_t k = 0; k < run.aCount; ++k) countA(run.aBegin + k, reads);
      }
      std::optional<PathDivergence> listed;
      if (out.pathDivergences.size() < ctx.options.maxPathDivergences) {
        listed = isFirst && firstDivergence.stretch ? *firstDivergence.stretch : stretchOf(ctx, runs, r, group);
        listed->readsTainted = reads.has_value() || laterEnd;
      }
      if (!isFirst && unnamed && !out.namedLater && namingReads < kMaxNamingReads && sameShapes(firstStretch, run)) {
        ++namingReads;
        OpInfo o = listed ? (unnamedInA ? listed->aOps.front() : listed->bOps.front())
                          : (unnamedInA ? info(a, run.aBegin) : info(b, run.bBegin));
        if (o.origin && !opUnobserved(o) && o.origin->step != unnamed->origin->step &&
            o.origin->stepLaunch == unnamed->origin->stepLaunch) {
          out.namedLater = std::move(o);
        }
      }
      if (!isFirst && !reads && !laterEnd) {
        blast.repeatsFirst += sameStretch(firstStretch, run);
        addRoot({r, 0}, label, run.aCount > 0 ? a.ops[run.aBegin] : b.ops[run.bBegin],
                [&] { return independentStretch(ctx, runs, r, group, listed ? &*listed : nullptr); });
      }
      if (listed) out.pathDivergences.push_back(std::move(*listed));
      for (uint64_t k = 0; k < run.aCount; ++k) taint.writes(tailA, run.aBegin + k, label);
      for (uint64_t k = 0; k < run.bCount; ++k) taint.writes(tailB, run.bBegin + k, label);
      tailA.release(run.aBegin + run.aCount);
      tailB.release(run.bBegin + run.bCount);
      continue;
    }
    const uint64_t from = r == first.run ? first.offset : 0;
    for (uint64_t k = from; k < run.aCount; ++k) {
      const uint64_t ia = run.aBegin + k, ib = run.bBegin + k;
      const Op& oa = a.ops[ia];
      const Op& ob = b.ops[ib];
      if (r == first.run && k == first.offset) {
        taint.writes(tailA, ia, roots.front().label);
        taint.writes(tailB, ib, roots.front().label);
        continue;
      }
      // A pair of a swap found earlier: that divergence's.
      std::optional<Taint::Label> reads = swapped(ia, ib);
      if (!reads) reads = taint.reads(tailA, ia);
      countA(ia, reads);
      const bool comparable = oa.hashed() && ob.hashed();
      const bool absorbed = oa.key != ob.key && benign.absorb(ia, ib);
      const bool differs = comparable && oa.outputs != ob.outputs && !absorbed;
      if (differs) {
        ++blast.divergentOps;
        if (reads) {
          ++blast.explainedOps;
          taint.writes(tailA, ia, *reads);
          taint.writes(tailB, ib, *reads);
        } else {
          const Taint::Label label = labelOf(a, run, k);
          const std::optional<Swap> swap = swapOf(ia, ib);
          if (swap) addSwap(ia, ib, *swap, label);
          addRoot({r, k}, label, oa, [&] { return independentPair(ctx, ia, ib, swap); });
          taint.writes(tailA, ia, label);
          taint.writes(tailB, ib, label);
        }
      } else if (comparable) {
        taint.writes(tailA, ia, -1);  // identical outputs: these bytes agree again
      } else if (reads) {
        taint.writes(tailA, ia, *reads);  // not hashed: assume the worst
      }
      tailA.release(ia + 1);
      tailB.release(ib + 1);
    }
  }
  // The first divergence is the one that happened first in run A: on one
  // host thread, the first in alignment order; with several, the canonical
  // order puts operations that nothing orders in any order, and a later
  // one's divergence may come before an earlier one that reads nothing of
  // it. Data derived from both carries the earlier one's label.
  const Root& root = *std::ranges::min_element(roots, {}, &Root::label);
  const Count tainted = taintedBy[root.label];
  blast.laterOps = later.ops - root.ops;
  blast.laterLaunches = later.launches - root.launches;
  blast.taintedOps = tainted.ops;
  blast.taintedLaunches = tainted.launches;
  if (&root != &roots.front()) {
    out.earliest = root.at;
    // Those the walk met before it come before it in the launch numbers too.
    constexpr std::string_view kBefore =
        "; it happened after the first divergence in run A, though the host threads' canonical order puts it first";
    for (const Root* r = &roots[1]; r < &root; ++r) {
      if (r->listed) blast.independent[*r->listed].reason += kBefore;
    }
    // Listed, it leaves the list (those counted with it are then among the
    // unlisted); counted with a listed one, it leaves that one's count.
    if (root.listed) blast.independent.erase(blast.independent.begin() + static_cast<ptrdiff_t>(*root.listed));
    if (root.alike) --blast.independent[*root.alike].more;
    const AlignedRun& at = runs[first.run];
    IndependentDivergence demoted =
        at.match ? independentPair(ctx, at.aBegin + first.offset, at.bBegin + first.offset, firstDivergence.swap)
                 : independentStretch(ctx, runs, first.run, groups[first.run],
                                      firstDivergence.stretch ? &*firstDivergence.stretch : nullptr);
    demoted.reason += kBefore;
    blast.independent.insert(blast.independent.begin(), std::move(demoted));
    if (blast.independent.size() > ctx.options.maxIndependent) blast.independent.pop_back();
  }
  return out;
}

}  // namespace gpurr::diff
