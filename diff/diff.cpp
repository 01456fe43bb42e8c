// diffTraces: the comparison behind `gpurr diff`, as a pipeline of stages,
// one file each (README.md follows one diff through them):
//
// 1. Summary (summary.cpp): one pass over each run, both at once, keeps one
//    compact record per operation (Op, model.h) with hashes of its identity
//    and its outputs, allocations named by their identity (AllocationIds),
//    so that an extra allocation in one run does not shift every later
//    pointer. Run B's ordinals are then mapped onto run A's by identity.
// 2. Canonical order (canonical_order.cpp) of each run's host threads.
// 3. Alignment of the identities with the sites that issued them
//    (align.cpp; refineBySite below), its ties broken by what the
//    operations agree on (ties.cpp), then the pairs the identities tell
//    apart that are one operation (pairing.cpp). Where those pairs
//    show allocations run B named otherwise (renaming.cpp), stages 1 to 3
//    again with run A's names for them.
// 4. The first divergence: the earliest stretch of different operations, or
//    matched pair with different outputs.
// 5. Its classification (docs/DIFF.md, "Causes"): at a matched pair
//    (classify_matched.cpp, with compare.cpp, first_use.cpp, philox.cpp) or
//    at a stretch (classify_path.cpp, reorder.cpp); the runs' environments
//    (environment.cpp) may outrank it.
// 6. Blast radius (blast_radius.cpp): taint propagated through allocations
//    from the first divergence over the rest of the alignment. Of the
//    divergences that read nothing of each other, the first is the one that
//    happened first in run A (with several host threads, not always the
//    first in alignment order): classified as in 5.
#include "diff/diff.h"

#include <fmt/format.h>

#include "diff/blast_radius.h"
#include "diff/canonical_order.h"
#include "diff/classify_matched.h"
#include "diff/classify_path.h"
#include "diff/environment.h"
#include "diff/model.h"
#include "diff/pairing.h"
#include "diff/renaming.h"
#include "diff/reorder.h"
#include "diff/summary.h"
#include "diff/ties.h"

namespace gpurr::diff {
using namespace gpurr::trace;

const char* toString(Cause cause) {
  switch (cause) {
    case Cause::kNone: return "none";
    case Cause::kEnvironment: return "environment";
    case Cause::kHostInput: return "host input";
    case Cause::kRngState: return "RNG state";
    case Cause::kScalarParameters: return "scalar parameters";
    case Cause::kAlgorithmChoice: return "algorithm choice";
    case Cause::kReordered: return "reordered";
    case Cause::kNondeterministicKernel: return "nondeterministic kernel";
    case Cause::kUninitialisedMemory: return "uninitialised memory";
    case Cause::kCollective: return "collective";
    case Cause::kCollectiveReductionOrder: return "collective reduction order";
    case Cause::kUnknown: return "unknown";
  }
  return "unknown";
}

const char* jsonName(Cause cause) {
  switch (cause) {
    case Cause::kNone: return "none";
    case Cause::kEnvironment: return "environment";
    case Cause::kHostInput: return "hostInput";
    case Cause::kRngState: return "rngState";
    case Cause::kScalarParameters: return "scalarParameters";
    case Cause::kAlgorithmChoice: return "algorithmChoice";
    case Cause::kReordered: return "reordered";
    case Cause::kNondeterministicKernel: return "nondeterministicKernel";
    case Cause::kUninitialisedMemory: return "uninitialisedMemory";
    case Cause::kCollective: return "collective";
    case Cause::kCollectiveReductionOrder: return "collectiveReductionOrder";
    case Cause::kUnknown: return "unknown";
  }
  return "unknown";
}

const char* toString(OpKind kind) {
  switch (kind) {
    case OpKind::kLaunch: return "launch";
    case OpKind::kMemcpy: return "memcpy";
    case OpKind::kMemset: return "memset";
    case OpKind::kGraph: return "graph";
    case OpKind::kCollective: return "collective";
  }
  return "launch";
}

namespace {

// Warnings about the traces themselves: one cut short, two gpurr versions.
std::vector<std::string> traceWarnings(const TraceReader& ta, const TraceReader& tb) {
  std::vector<std::string> out;
  for (const auto* r : {&ta, &tb}) {
    if (r->damage().incomplete()) {
      out.push_back(fmt::format("{}: {}; compared up to {}", r->path().string(), r->damage().detail,
                                r->damage().readsTo()));
    } else if (!r->damage().detail.empty()) {  // a damaged index alone
      out.push_back(fmt::format("{}: {}; every block was read", r->path().string(), r->damage().detail));
    }
  }
  if (ta.header().compatVersion != tb.header().compatVersion) {
    out.push_back(fmt::format("the traces were written by different gpurr versions "
                              "(compatibility {} and {}); fields only one of them "
                              "records are ignored",
                              ta.header().compatVersion, tb.header().compatVersion));
  }
  return out;
}

// Appends a run, merged with the last where both are matches that follow
// on: a stretch is never merged, so that one run's rest after the other's
// cut end stays a run of its own.
void keep(Alignment& out, const AlignedRun& r) {
  if (r.match) out.matched += r.aCount;
  if (r.match && !out.runs.empty()) {
    AlignedRun& last = out.runs.back();
    if (last.match && last.aBegin + last.aCount == r.aBegin && last.bBegin + last.bCount == r.bBegin) {
      last.aCount += r.aCount;
      last.bCount += r.bCount;
      return;
    }
  }
  out.runs.push_back(r);
}

// Each stretch of both runs of an alignment by sited identities, aligned
// again: an operation by its identity and its place in the model
// (Op::placeTag) where the other run's part of the stretch has no launch of
// its shape issued from its site, and by its identity alone where the other
// run's part has a launch of its shape whose op the layer did not observe.
// The same operation issued from a line that an edit between the two runs
// moved (onto another operation's line, maybe) is then matched, and one
// issued from another module is not (a block called in another's place,
// two statements swapped); an added layer's first launch still is not
// matched with the final norm's, whose weights one run renamed (Op::key:
// the first added layer's norm weights take the identity the other run's
// final norm weights have), as the final norm's launch has that shape and
// site in both. (Operations of one sited identity are never in a stretch of
// both runs of a minimal alignment: they would have been matched.)
Alignment refineBySite(const Alignment& sited, const Run& a, const Run& b, const AlignOptions& options) {
  Alignment out;
  AlignOptions within = options;
  within.cut = AlignOptions::Cut::kNeither;
  bool unrefined = false;  // a stretch of both runs without origins, as the sited alignment had it
  std::vector<uint64_t> placesA, placesB, ka, kb;
  // A launch's shape and site tag: where it was issued, and what; and its
  // shape alone, tagged 0 (no op observed there).
  const auto place = [](const Op& op) { return uint64_t{op.shape} << 16 | op.tag(); };
  const auto unobserved = [](const Op& op) { return uint64_t{op.shape} << 16; };
  // The places of `count` operations of `run` from `begin`, with the
  // unobserved ones' shapes, sorted; false when none has a site.
  const auto places = [&](const Run& run, uint64_t begin, uint64_t count, std::vector<uint64_t>& out) {
    out.clear();
    bool any = false;
    for (uint64_t i = 0; i < count; ++i) {
      const Op& op = run.ops[begin + i];
      out.push_back(place(op));
      if (op.placeTag() == 0) out.push_back(unobserved(op));
      any = any || op.tag() != 0;
    }
    std::ranges::sort(out);
    return any;
  };
  // Their identities to align again by, the other run's places `other`
  // (the place tag marked apart from a whole tag, whose high byte is never
  // 0).
  const auto keys = [&](const Run& run, uint64_t begin, uint64_t count, const std::vector<uint64_t>& other,
                        std::vector<uint64_t>& out) {
    out.resize(count);
    for (uint64_t i = 0; i < count; ++i) {
      const Op& op = run.ops[begin + i];
      if (op.tag() != 0 && std::ranges::binary_search(other, place(op))) {
        out[i] = op.sitedKey();
      } else if (op.placeTag() != 0 && !std::ranges::binary_search(other, unobserved(op))) {
        out[i] = Keys::withTag(op.key, op.placeTag());
      } else {
        out[i] = op.key;
      }
    }
  };
  for (const AlignedRun& r : sited.runs) {
    if (r.match || r.aCount == 0 || r.bCount == 0) {
      keep(out, r);
      continue;
    }
    const bool sitesA = places(a, r.aBegin, r.aCount, placesA), sitesB = places(b, r.bBegin, r.bCount, placesB);
    if (!sitesA && !sitesB) {
      unrefined = true;  // no origins: aligned by the identities alone already
      keep(out, r);
      continue;
    }
    keys(a, r.aBegin, r.aCount, placesB, ka);
    keys(b, r.bBegin, r.bCount, placesA, kb);
    const Alignment again = align(Keys(ka), Keys(kb), within);
    out.bounded = out.bounded || again.bounded;
    for (AlignedRun sub : again.runs) {
      sub.aBegin += r.aBegin;
      sub.bBegin += r.bBegin;
      keep(out, sub);
    }
  }
  out.bounded = out.bounded || (sited.bounded && unrefined);
  return out;
}

// The alignment of both runs' operations (by identity and site, then
// refineBySite), of run A's first `sizeA` operations and run B's first
// `sizeB`. The operations both runs agreed on from the start, if dropped,
// are the start of the alignment's common prefix: the rest is aligned and
// shifted.
Alignment alignRuns(const Run& a, const Run& b, const AlignOptions& options, uint64_t sizeA = UINT64_MAX,
                    uint64_t sizeB = UINT64_MAX) {
  const uint64_t held = a.ops.firstHeld();
  std::vector<const uint64_t*> chunksA, chunksB;
  const Keys keysA = a.ops.keys(chunksA), keysB = b.ops.keys(chunksB);
  Alignment alignment = align(keysA.subspan(0, std::min(sizeA, a.ops.size()) - held),
                              keysB.subspan(0, std::min(sizeB, b.ops.size()) - held), options);
  if (held > 0) {
    for (AlignedRun& r : alignment.runs) {
      r.aBegin += held;
      r.bBegin += held;
    }
    if (!alignment.runs.empty() && alignment.runs.front().match && alignment.runs.front().aBegin == held &&
        alignment.runs.front().bBegin == held) {
      alignment.runs.front().aBegin = alignment.runs.front().bBegin = 0;
      alignment.runs.front().aCount += held;
      alignment.runs.front().bCount += held;
    } else {
      alignment.runs.insert(alignment.runs.begin(), AlignedRun{true, 0, 0, held, held});
    }
    alignment.matched += held;
  }
  return refineBySite(alignment, a, b, options);
}

// Why a trace's events end early, after "run A's trace ends (...)": as
// Damage::cause() says it (a job's ranks lines too).
std::string whyEndsEarly(const TraceReader& t) {
  const trace::Damage& d = t.damage();
  return d.corruptBlock || d.indexDamaged ? d.cause() : "its recording did not end cleanly";
}

// Whether gpurr stopped the run of trace `t` after a training step
// (--until-step, --stop-file), which it then finished.
bool stoppedByGpurr(const TraceReader& t) { return !t.damage().incomplete() && t.stoppedAfterStep() >= 0; }

// The training step an operation's origin gives; -1 where none does.
int64_t stepOf(const Run& run, uint64_t index) {
  const std::optional<Event> e = run.reader->event(run.ops[index].seq());
  return e && e->origin ? e->origin->step : -1;
}

// Where the operations of `run` whose origins put them in training steps up
// to `step` end, near `near` (where an alignment as a prefix left them):
// looked for up to 2^16 operations either way.
uint64_t endOfStep(const Run& run, uint64_t near, int64_t step) {
  constexpr uint64_t kReach = 1 << 16;
  uint64_t end = near;
  const uint64_t held = run.ops.firstHeld();
  while (end > held && near - end < kReach) {
    const int64_t s = stepOf(run, end - 1);
    if (s < 0 || s <= step) break;
    --end;
  }
  if (end < near) return end;  // the operations before `near` are of later steps
  end = near;
  while (end < run.ops.size() && end - near < kReach) {
    const int64_t s = stepOf(run, end);
    if (s < 0 || s > step) break;
    ++end;
  }
  return end;
}

// The alignment of all of run A (`wholeA`) or B with the other's first
// `end` operations; the other's operations after them, if any, are its
// last run, a stretch of that run alone.
Alignment alignUpTo(const Run& a, const Run& b, const AlignOptions& options, bool wholeA, uint64_t end) {
  Alignment alignment = alignRuns(a, b, options, wholeA ? UINT64_MAX : end, wholeA ? end : UINT64_MAX);
  const uint64_t count = (wholeA ? b : a).ops.size() - end;
  if (count > 0) {
    alignment.runs.push_back(wholeA ? AlignedRun{false, a.ops.size(), end, 0, count}
                                    : AlignedRun{false, end, b.ops.size(), count, 0});
  }
  return alignment;
}

// The alignment of a run cut short, as a prefix of the other; `rest`: its
// last run is what the other did after the cut. Where gpurr stopped it
// after training step N, it did all of that step: the other run's
// operations of steps up to N are aligned with it whole, as edits where it
// did not do them, and only those after are the other's rest.
Alignment alignCut(const Run& a, const Run& b, const TraceReader& cut, const AlignOptions& options, bool& rest) {
  const bool aCut = options.cut == AlignOptions::Cut::kA;
  Alignment alignment = alignRuns(a, b, options);
  rest = !alignment.runs.empty() && !alignment.runs.back().match &&
         (aCut ? alignment.runs.back().aCount : alignment.runs.back().bCount) == 0;
  if (!stoppedByGpurr(cut)) return alignment;
  const Run& other = aCut ? b : a;
  const uint64_t near = rest ? (aCut ? alignment.runs.back().bBegin : alignment.runs.back().aBegin) : other.ops.size();
  const uint64_t end = endOfStep(other, near, cut.stoppedAfterStep());
  if (end == near) return alignment;
  AlignOptions whole = options;
  whole.cut = AlignOptions::Cut::kNeither;
  rest = end < other.ops.size();
  return alignUpTo(a, b, whole, aCut, end);
}

// Runs that both ended cleanly, one after fewer training steps than the
// other (fewer given, an early stop of the program's own): the shorter
// run's steps are the other's of the same numbers, so it is aligned with
// the other's operations up to the end of its last step, and the other's
// later ones are their own stretch, where the shorter run ends. Aligned
// whole, the other's later operations would be edits, which among a loop's
// repeated steps Myers may place anywhere, before a change in the shorter
// run's last steps as well. None where either run's first or last
// operation has no step, where they begin in different steps (steps
// numbered otherwise), or where both end in the same step.
std::optional<Alignment> alignByLastStep(const Run& a, const Run& b, const AlignOptions& options) {
  if (a.ops.size() <= a.ops.firstHeld() || b.ops.size() <= b.ops.firstHeld()) return std::nullopt;
  const int64_t firstA = stepOf(a, a.ops.firstHeld()), firstB = stepOf(b, b.ops.firstHeld());
  const int64_t lastA = stepOf(a, a.ops.size() - 1), lastB = stepOf(b, b.ops.size() - 1);
  if (firstA < 0 || firstA != firstB || lastA < 0 || lastB < 0 || lastA == lastB) return std::nullopt;
  const bool aShorter = lastA < lastB;
  const Run& shorter = aShorter ? a : b;
  const Run& other = aShorter ? b : a;
  const uint64_t end = endOfStep(other, std::min(shorter.ops.size(), other.ops.size()), aShorter ? lastA : lastB);
  if (end >= other.ops.size()) return std::nullopt;
  return alignUpTo(a, b, options, aShorter, end);
}

// The operations an alignment leaves without a counterpart, but for its
// last run where that is one run's rest after the other's trace ends.
uint64_t edits(const Alignment& alignment, bool rest) {
  uint64_t n = 0;
  for (const AlignedRun& r : alignment.runs) {
    if (!r.match) n += r.aCount + r.bCount;
  }
  if (rest) n -= alignment.runs.back().aCount + alignment.runs.back().bCount;
  return n;
}

// Whether trace `t` (summarised into `r`) ends before the other run's does:
// its process crashed or was killed, its recorder dropped events, or gpurr
// stopped it (--until-step, --stop-file) after an earlier training step
// than the other run's.
bool endsEarly(const TraceReader& t, const Run& r, const TraceReader& other) {
  const int64_t stopped = t.stoppedAfterStep(), otherStopped = other.stoppedAfterStep();
  const bool stoppedEarlier = stopped >= 0 && (otherStopped < 0 || otherStopped > stopped);
  return t.damage().incomplete() || r.gapSeq != UINT64_MAX || stoppedEarlier;
}

// Where the first divergence is in alignment order: a stretch, or a pair of
// a matched stretch; `run` is runs.size() when there is none.
AlignmentAt findFirstDivergence(const Context& ctx, const std::vector<AlignedRun>& runs, BenignPairs& benign) {
  const Run& a = ctx.a;
  const Run& b = ctx.b;
  const uint64_t held = a.ops.firstHeld();
  for (size_t r = 0; r < runs.size(); ++r) {
    const AlignedRun& run = runs[r];
    if (!run.match) return {r, 0};
    // Operations dropped as agreed hold no divergence.
    for (uint64_t k = run.aBegin < held ? held - run.aBegin : 0; k < run.aCount; ++k) {
      const Op& oa = a.ops[run.aBegin + k];
      const Op& ob = b.ops[run.bBegin + k];
      // A pointer that points elsewhere (matchSameShape) diverges whatever
      // the outputs, unless it is a benign difference and nothing else
      // differs.
      if ((oa.hashed() && ob.hashed() && oa.outputs != ob.outputs) || oa.key != ob.key) {
        if (oa.key != ob.key && benign.absorb(run.aBegin + k, run.bBegin + k)) continue;
        return {r, k};
      }
    }
  }
  return {runs.size(), 0};
}

// Summaries made again with allocations renamed (renaming.h), at most.
constexpr int kRenamingRounds = 3;

// Stages 1 to 3 of one pair of runs: summarised, put in canonical order,
// aligned, and the pairs the identities told apart paired.
struct Pass {
  Run a, b;
  Alignment alignment;
  bool aCut = false, bCut = false;
  bool rest = false;  // the alignment's last run is what one run did after the other's trace ends
  std::unordered_set<uint64_t> configurationOnly;  // pairLaunchConfigurations
};

// `renamed`: run B's allocations to summarise with run A's identities
// (renaming.h).
std::unique_ptr<Pass> summariseAndAlign(const TraceReader& ta, const TraceReader& tb, const DiffOptions& options,
                                        std::unordered_map<uint32_t, uint64_t> renamed) {
  auto pass = std::make_unique<Pass>();
  Run& a = pass->a;
  Run& b = pass->b;
  // 1. Summary.
  const unsigned threads = scanThreads(options.threads);
  a.reader = &ta;
  b.reader = &tb;
  a.decoders = b.decoders = threads <= 1 ? 0 : threads;
  if (!renamed.empty()) b.ids.rename(std::move(renamed));
  summariseBoth(a, b, threads, options.dropAgreed);
  b.ordinals = OrdinalMap(a.ids, b.ids);
  // 2. Canonical order.
  const uint64_t start = agreedStart(a, b);
  canonicalOrder(a, start);
  canonicalOrder(b, start);
  a.ops.countLaunches();
  b.ops.countLaunches();
  // 3. Alignment, and the pairs it left apart that are one operation.
  // A run whose trace ends before the other's is aligned as a prefix of it.
  AlignOptions alignOptions = options.align;
  bool endsByStep = false;
  a.endsEarly = pass->aCut = endsEarly(ta, a, tb);
  b.endsEarly = pass->bCut = endsEarly(tb, b, ta);
  if (pass->aCut && pass->bCut) {
    // Both cut short: what either did after the other's end is not known.
    // One of them is aligned whole as a prefix of the other, whichever
    // takes fewer edits (the other's operations after it are not edits).
    alignOptions.cut = AlignOptions::Cut::kA;
    pass->alignment = alignCut(a, b, ta, alignOptions, pass->rest);
    bool rest = false;
    alignOptions.cut = AlignOptions::Cut::kB;
    Alignment other = alignCut(a, b, tb, alignOptions, rest);
    if (edits(other, rest) < edits(pass->alignment, pass->rest)) {
      pass->alignment = std::move(other);
      pass->rest = rest;
    }
  } else if (pass->aCut || pass->bCut) {
    alignOptions.cut = pass->aCut ? AlignOptions::Cut::kA : AlignOptions::Cut::kB;
    pass->alignment = alignCut(a, b, pass->aCut ? ta : tb, alignOptions, pass->rest);
  } else {
    pass->alignment = alignRuns(a, b, alignOptions);
    // Not taken where the whole runs aligned leave fewer edits than the
    // other run's later steps hold: the shorter run did all their work, its
    // steps counted otherwise (an optimizer step skipped, and the layer
    // counts steps by the optimizer's), and did not end early.
    if (std::optional<Alignment> bySteps = alignByLastStep(a, b, alignOptions);
        bySteps && edits(pass->alignment, false) >= bySteps->runs.back().aCount + bySteps->runs.back().bCount) {
      pass->alignment = std::move(*bySteps);
      endsByStep = true;
    }
  }
  // (The other run's steps after the shorter's are left apart, as a cut
  // run's rest is.)
  breakTies(pass->alignment, a, b, pass->rest || endsByStep);
  matchSameShape(pass->alignment, a, b);
  const Context ctx{options, a, b, ta.header().options.hashChunkBytes};
  pass->configurationOnly = pairLaunchConfigurations(ctx, pass->alignment);
  return pass;
}

}  // namespace

ProcessDiff diffTraces(const TraceReader& ta, const TraceReader& tb, const DiffOptions& options,
                       const Culprits* culprits) {
  ProcessDiff out;
  out.pathA = ta.path().string();
  out.pathB = tb.path().string();
  out.environment = compareHeaders(ta.header(), tb.header());
  out.warnings = traceWarnings(ta, tb);

  // The blocks the summary kept of each trace (summariseBoth), given back
  // at the end.
  struct KeptBlocks {
    const TraceReader& t;
    ~KeptBlocks() { t.keepRecentBlocks(0); }
  } keptA{ta}, keptB{tb};
  // 1 to 3; again where run B named allocations otherwise, with run A's
  // names for them, while more pairs then agree on their identities. One
  // summary is held at a time: where the new one is no better, the best is
  // made again.
  std::unique_ptr<Pass> pass = summariseAndAlign(ta, tb, options, {});
  std::unordered_map<uint32_t, uint64_t> renamed;
  uint64_t agreeing = sameIdentities(pass->a, pass->b, pass->alignment);
  LaunchPointers read;  // across the rounds; given back after them
  for (int round = 0; round < kRenamingRounds; ++round) {
    const Context ctx{options, pass->a, pass->b, ta.header().options.hashChunkBytes};
    const auto more = renamings(ctx, pass->alignment, read);
    if (!more) break;
    // The renamings before, but for those to an identity now given to
    // another allocation, and the new ones.
    const auto withRenamings = [&](const std::unordered_map<uint32_t, uint64_t>& these) {
      std::unordered_set<uint64_t> given;
      for (const auto& [ordinal, id] : these) given.insert(id);
      std::unordered_map<uint32_t, uint64_t> next = renamed;
      std::erase_if(next, [&](const auto& r) { return given.count(r.second) > 0; });
      for (const auto& [ordinal, id] : these) next[ordinal] = id;
      return next;
    };
    const uint64_t prefix = agreeingPrefix(pass->a, pass->b, pass->alignment);
    std::unordered_map<uint32_t, uint64_t> next = withRenamings(more->all);
    pass.reset();
    pass = summariseAndAlign(ta, tb, options, next);
    if (!keepsAgreeing(pass->a, pass->b, pass->alignment, prefix) && more->guarded.size() < more->all.size()) {
      // Where the runs agreed, operations now differ: without the renamings
      // that took an identity from an allocation first used there.
      pass.reset();
      if (more->guarded.empty()) {
        pass = summariseAndAlign(ta, tb, options, renamed);
        break;
      }
      next = withRenamings(more->guarded);
      pass = summariseAndAlign(ta, tb, options, next);
    }
    const uint64_t now = sameIdentities(pass->a, pass->b, pass->alignment);
    if (now <= agreeing) {
      pass.reset();
      pass = summariseAndAlign(ta, tb, options, renamed);
      break;
    }
    agreeing = now;
    renamed = std::move(next);
  }
  read = {};
  Run& a = pass->a;
  Run& b = pass->b;
  Alignment& alignment = pass->alignment;
  const bool aCut = pass->aCut, bCut = pass->bCut;
  out.rankA = ta.header().rank;
  out.rankB = tb.header().rank;
  out.benchmarkingA = a.benchmarking;
  out.benchmarkingB = b.benchmarking;
  out.collectivesA = std::move(a.collectives);
  out.collectivesB = std::move(b.collectives);
  for (const auto& [run, side, t] : {std::tuple{&a, 'A', &ta}, std::tuple{&b, 'B', &tb}}) {
    if (run->pastStop == 0) continue;
    out.warnings.push_back(fmt::format("run {} ran {} after training step {}, before gpurr stopped it (an evaluation "
                                       "or the next batch's data): not compared",
                                       side, plural(run->pastStop, "operation"), t->stoppedAfterStep()));
  }
  for (const auto& [run, side] : {std::pair{&a, 'A'}, std::pair{&b, 'B'}}) {
    if (run->gapSeq == UINT64_MAX) continue;
    out.gaps.push_back(fmt::format("run {}'s recorder dropped {} at event #{} (its trace thread fell behind)", side,
                                   plural(run->gapEvents, "event"), run->gapSeq));
    out.warnings.push_back(out.gaps.back() + "; compared up to there, nothing after it");
  }
  out.allocationsRenamed = renamed.size();
  out.opsA = a.ops.size();
  out.opsB = b.ops.size();
  out.undigestedA = a.undigested;
  out.undigestedB = b.undigested;
  out.withOutputsA = a.withOutputs;
  out.withOutputsB = b.withOutputs;
  const Context ctx{options, a, b, ta.header().options.hashChunkBytes};
  BenignPairs benign(ctx, std::move(pass->configurationOnly));
  out.matched = alignment.matched;
  out.alignmentBounded = alignment.bounded;
  if (alignment.bounded) {
    out.warnings.push_back(fmt::format("the runs differ too much to align minimally (more than "
                                       "{} edits in a window of {} operations); stretches are "
                                       "reported coarsely",
                                       options.align.maxEdits, options.align.window));
  }
  // A trace cut short: what the other run did afterwards was not compared.
  char wentOn = 0;  // the run that went on past the other's end, if any
  if (pass->rest && !alignment.runs.back().match &&
      ((alignment.runs.back().aCount == 0 && aCut) || (alignment.runs.back().bCount == 0 && bCut))) {
    const AlignedRun& last = alignment.runs.back();
    const bool aEnds = last.aCount == 0 && aCut;
    const TraceReader& cut = aEnds ? ta : tb;
    const uint64_t after = aEnds ? last.bCount : last.aCount;
    const char goesOn = aEnds ? 'B' : 'A', ends = aEnds ? 'A' : 'B';
    wentOn = goesOn;
    out.warnings.push_back(fmt::format("run {} goes on for {} after run {}'s trace ends{}; not compared", goesOn,
                                       plural(after, "operation"), ends,
                                       stoppedByGpurr(cut) ? fmt::format(" (gpurr stopped it after training step {})",
                                                                         cut.stoppedAfterStep())
                                                           : ""));
    // A recording cut short (killed, crashed, a full disk) is not known
    // to agree with what the other run did after it, as after a gap.
    if (cut.damage().incomplete() && (aEnds ? a : b).gapSeq == UINT64_MAX) {
      out.gaps.push_back(fmt::format("run {}'s trace ends ({}) and run {} goes on for {}", ends, whyEndsEarly(cut),
                                     goesOn, plural(after, "operation")));
    }
    alignment.runs.pop_back();
  }
  // Both cut short at one place: neither is known to have ended there. Not
  // where the one cut short goes on past the other's clean end: that end
  // is a divergence.
  const auto goesOnPast = [&](bool aShort) {
    if (alignment.runs.empty() || alignment.runs.back().match) return false;
    const AlignedRun& last = alignment.runs.back();
    return aShort ? last.aCount > 0 && last.bCount == 0 && !tb.damage().incomplete()
                  : last.bCount > 0 && last.aCount == 0 && !ta.damage().incomplete();
  };
  // A run that went on past the other's end was not cut short where they
  // were compared, whatever ended it later.
  const bool aShort = ta.damage().incomplete() && wentOn != 'A';
  const bool bShort = tb.damage().incomplete() && wentOn != 'B';
  if (out.gaps.empty() && (aShort || bShort) && !goesOnPast(aShort)) {
    out.gaps.push_back(fmt::format("run {}'s trace ends ({}) where the other's does: what it did after is not known",
                                   aShort ? 'A' : 'B', whyEndsEarly(aShort ? ta : tb)));
  }
  const std::vector<Group> groups = reorderings(ctx, alignment.runs);

  // 4. The first divergence.
  const AlignmentAt first = findFirstDivergence(ctx, alignment.runs, benign);
  for (const AlignedRun& run : alignment.runs) {
    if (run.match) continue;
    ++out.pathDivergenceCount;
  }
  if (first.run == alignment.runs.size()) {
    // Header differences alone do not make the runs' results differ.
    out.identical = out.pathDivergenceCount == 0;
    out.pairedDespiteStaleWords = benign.staleWords;
    out.pairedDespiteLaunchConfiguration = benign.launchConfiguration;
    out.pairedDespiteRenamedAllocation = benign.renamedAllocation;
    return out;
  }
  out.identical = false;

  // 5. Its classification.
  auto classifyAt = [&](AlignmentAt where) {
    const AlignedRun& at = alignment.runs[where.run];
    return at.match ? classifyMatched(ctx, at.aBegin + where.offset, at.bBegin + where.offset)
                    : classifyPath(ctx, alignment.runs, where.run, groups[where.run]);
  };
  FirstDivergence d = classifyAt(first);

  // 6. Blast radius and later divergences, over the rest of the alignment.
  // Where a divergence found later in alignment order happened first
  // (several host threads), it is the first divergence: classified instead.
  BlastResult blast = blastRadius(ctx, alignment.runs, groups, first, d, benign);
  if (blast.earliest) {
    d = classifyAt(*blast.earliest);
  } else {
    d.namedLater = std::move(blast.namedLater);
  }
  for (const auto& [check, run] : {std::pair{&d.determinismA, 'A'}, std::pair{&d.determinismB, 'B'}}) {
    if (*check && (*check)->distinctResults > 1 &&
        provenNondeterministic(d, Evidence{EvidenceKind::kRecorderReran,
                                   {(*check)->runs, run == 'A' ? 0u : 1u, (*check)->distinctResults}})) {
      break;
    }
  }
  // NCCL's settings change what NCCL runs only: its collectives and kernels.
  const auto ncclOp = [](const OpInfo& o) {
    return o.kind == OpKind::kCollective || o.name.find("nccl") != std::string::npos;
  };
  const std::vector<EnvDifference> weighed = differencesFor(out.environment, ncclOp(d.a) || ncclOp(d.b));
  if (environmentMatters(weighed) &&
      (d.cause == Cause::kNondeterministicKernel || d.cause == Cause::kAlgorithmChoice ||
       d.cause == Cause::kUnknown)) {
    d.mechanism = d.cause;
    d.cause = Cause::kEnvironment;
    d.evidence.insert(d.evidence.begin(), Evidence{EvidenceKind::kAtThisOperation, {}, {d.summary}});
    d.summary = fmt::format("environment: the runs were recorded in different environments ({})",
                            envSummary(weighed));
  }
  if (culprits) d.known = culprits->match(d, out.environment);
  out.blast = std::move(blast.blast);
  out.pathDivergences = std::move(blast.pathDivergences);
  out.pairedDespiteStaleWords = benign.staleWords;
  out.pairedDespiteLaunchConfiguration = benign.launchConfiguration;
  out.pairedDespiteRenamedAllocation = benign.renamedAllocation;
  // A program that stepped no torch.optim optimizer completed no training
  // step gpurr counts: every operation is said to be in step 0 (origins
  // that name no later step, and an index without the layer's steps).
  std::vector<char> stepless;
  for (const auto& [t, run, side] : {std::tuple{&ta, &a, 'A'}, std::tuple{&tb, &b, 'B'}}) {
    if (run->lastStep == 0 && !t->layerSteps() && t->header().compatVersion >= 10 && !t->damage().incomplete()) {
      stepless.push_back(side);
    }
  }
  if (!stepless.empty()) {
    out.warnings.push_back(fmt::format("{} completed no training step that gpurr counts ({} no torch.optim "
                                       "optimizer, docs/RECORDING.md): every operation is said to be in step 0",
                                       stepless.size() == 2 ? "runs A and B" : fmt::format("run {}", stepless[0]),
                                       stepless.size() == 2 ? "they stepped" : "it stepped"));
  }
  out.firstDivergence = std::move(d);
  for (const Run* run : {&a, &b}) {
    for (const std::string& error : run->unreadableBlobs) {
      out.warnings.push_back(error + "; the bytes and values of that range are not compared, its digests are");
    }
  }
  return out;
}

}  // namespace gpurr::diff
