// The words every report of a diff uses for its facts (see words.h).
#include "report/words.h"

#include <fmt/format.h>

#include <algorithm>

#include "diff/wording.h"
#include "report/text.h"

namespace gpurr::report {
using namespace gpurr::diff;

std::string shortName(const std::string& name, size_t max) {
  std::string d = demangle(name);
  if (d.size() > max) d = d.substr(0, characterStart(d, max - 3)) + "...";
  return d;
}

std::string opTitle(const OpInfo& o) {
  if (o.kind == OpKind::kLaunch) return fmt::format("launch #{}", o.launchIndex);
  return fmt::format("{} (operation #{})", o.kind == OpKind::kGraph ? "graph launch" : toString(o.kind),
                     o.index);
}

std::string opTitleNamed(const OpInfo& o) {
  if (o.kind == OpKind::kLaunch) return opTitle(o);
  return fmt::format("{} (operation #{})", o.kind == OpKind::kGraph ? "graph launch" : o.name, o.index);
}

const OpInfo* shownOp(const FirstDivergence& d, bool a) {
  const bool oneSided = d.path && d.stretch && !d.stretch->reordered && (a ? d.stretch->aOps : d.stretch->bOps).empty();
  return oneSided ? nullptr : a ? &d.a : &d.b;
}

const OpInfo& firstShown(const FirstDivergence& d) { return shownOp(d, true) != nullptr ? d.a : d.b; }

const char* shownSide(const FirstDivergence& d) { return &firstShown(d) == &d.b ? "run B " : ""; }

bool issuedElsewhere(const FirstDivergence& d) {
  return !d.path && d.a.origin && d.b.origin &&
         (d.a.origin->file != d.b.origin->file || d.a.origin->line != d.b.origin->line);
}

uint64_t seqInA(const FirstDivergence& d) { return &firstShown(d) == &d.b ? d.stretch->aSeq : d.a.seq; }

bool opUnobserved(const FirstDivergence& d) {
  using diff::opUnobserved;
  if (!d.path) return opUnobserved(d.a) || opUnobserved(d.b);
  const PathDivergence& s = *d.stretch;
  return (!s.aOps.empty() && opUnobserved(s.aOps.front())) || (!s.bOps.empty() && opUnobserved(s.bOps.front()));
}

std::string unobservedText(const FirstDivergence& d) {
  constexpr std::string_view kUnobserved =
      "the PyTorch layer did not observe this operation's op (it ran where a step stopped matching the steps "
      "learnt before)";
  if (d.namedLater) {
    const OpInfo& o = *d.namedLater;
    const bool inA = d.stretch && !d.stretch->aOps.empty() && diff::opUnobserved(d.stretch->aOps.front());
    return fmt::format("{}; the same operations ran again later, observed: {} (run {} event #{}), probably this "
                       "one's op too",
                       kUnobserved, describe(*o.origin), inA ? 'A' : 'B', o.seq);
  }
  return fmt::format("{}: `gpurr bisect -- COMMAND` records with every op observed and names it (or record both runs "
                     "again with GPURR_FULL_ATTRIBUTION=1)",
                     kUnobserved);
}

std::string notHashed(const ProcessDiff& p) {
  if (p.withOutputsA == 0 && p.withOutputsB == 0) {
    return ", but no operation of either trace has outputs (no buffer was recorded): only their kernels, launch "
           "configurations and parameters were compared";
  }
  if (p.undigestedA == 0 && p.undigestedB == 0) return "";
  return fmt::format(", but {} not hashed (--steps, --kernels, --launches or a failed hash): only their parameters were "
                     "compared",
                     p.undigestedA == p.undigestedB
                         ? fmt::format("{} of them were", withCommas(p.undigestedA))
                         : fmt::format("{} of run A's and {} of run B's were", withCommas(p.undigestedA),
                                       withCommas(p.undigestedB)));
}

std::string repeatsFirst(const BlastRadius& b) {
  if (b.repeatsFirst == 0) return "";
  const std::string which = b.independentCount == 1                ? "it is"
                            : b.repeatsFirst == b.independentCount ? "all are"
                                                                   : withCommas(b.repeatsFirst) + " of them are";
  return fmt::format("; {} the first's stretch again (as many operations, from the same places), later on", which);
}

namespace {

std::string whereSeqs(std::optional<uint64_t> a, std::optional<uint64_t> b) {
  if (!a) return fmt::format("run B #{}", b.value_or(0));
  if (!b) return fmt::format("run A #{}", *a);
  return fmt::format("run A #{}, run B #{}", *a, *b);
}

}  // namespace

std::string moreLikeItText(const IndependentDivergence& i) {
  const IndependentDivergence::Last& l = i.last;
  const OpInfo& o = i.a.name.empty() ? i.b : i.a;
  return fmt::format("and {} more like it (the same {} and reason), the last {}({})", withCommas(i.more),
                     o.origin                     ? "op, line"
                     : o.kind == OpKind::kLaunch ? "kernel"
                                                 : "operation",
                     l.step < 0 ? std::string() : fmt::format("in step {} ", l.step), whereSeqs(l.seqA, l.seqB));
}

std::string whereBoth(const IndependentDivergence& i) {
  return whereSeqs(eventOf(i.a), eventOf(i.b));
}

std::string spansText(const RangeDifference& r, size_t shown) {
  std::string s;
  shown = std::min(r.spans.size(), shown);
  for (size_t i = 0; i < shown; ++i) {
    s += fmt::format("{}{:#x}-{:#x}", i ? ", " : "", r.spans[i].first, r.spans[i].second);
  }
  if (r.spans.size() > shown) s += fmt::format(" and {} more", r.spans.size() - shown);
  return s;
}

const std::string& causeSummary(const FirstDivergence& d) { return d.summary; }

std::vector<std::string> evidenceSentences(const FirstDivergence& d) { return sentences(d.evidence); }

std::vector<std::string> pairedDespiteLines(const ProcessDiff& p) {
  std::vector<std::string> out;
  for (const auto& [paired, what] :
       {std::pair{&p.pairedDespiteStaleWords, "a stale word (a device address in one run only inside a struct "
                                              "parameter, every range both runs hashed equal)"},
        std::pair{&p.pairedDespiteLaunchConfiguration, "another launch configuration (the same kernel, "
                                                       "parameters and ranges)"},
        std::pair{&p.pairedDespiteRenamedAllocation, "a renamed allocation (its first use differs; the same "
                                                     "kernel, parameters and ranges)"}}) {
    if (paired->count == 0) continue;
    const OpInfo& o = *paired->first;
    out.push_back(fmt::format("{} launch{} paired despite {}; the first: {} {} (run A #{})",
                              withCommas(paired->count), paired->count == 1 ? "" : "es", what, opTitle(o),
                              shortName(o.name, 60), o.seq));
  }
  if (p.allocationsRenamed > 0) {
    out.push_back(fmt::format("{} of run B's allocations named as run A's, as the launches paired by their shape "
                              "show (one more launch of the kernel that used {} first came before {} in run B)",
                              withCommas(p.allocationsRenamed), p.allocationsRenamed == 1 ? "it" : "each",
                              p.allocationsRenamed == 1 ? "it" : "them"));
  }
  return out;
}

std::optional<std::string> setAsideLine(const diff::ProcessDiff& p) {
  if (p.benchmarkingA == 0 && p.benchmarkingB == 0) return std::nullopt;
  auto count = [](uint64_t n) {
    return n == 0 ? std::string("none") : fmt::format("{} operation{}", withCommas(n), n == 1 ? "" : "s");
  };
  return fmt::format("set aside what ran while the framework timed candidate kernels (an autotuner, which keeps "
                     "only the fastest one's configuration): {} in run A, {} in run B; not compared",
                     count(p.benchmarkingA), count(p.benchmarkingB));
}

}  // namespace gpurr::report
