// The job's view across ranks as the reports show it (job.h): the text
// that `gpurr diff` prints after the processes' reports of a job, and its
// JSON (`job`).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "diff/wording.h"
#include "report/job.h"
#include "report/words.h"

namespace gpurr::report {
using namespace gpurr::trace;
using diff::FirstDivergence;
using diff::ProcessDiff;

namespace {
std::string opText(const diff::OpInfo& o) {
  std::string s = fmt::format("#{} {}", o.seq, o.name);
  if (o.origin) s += fmt::format(" {{op {}}}", describe(*o.origin, diff::originStep(o)));
  return s;
}

// Where a rank's first divergence is: its operation, or where the runs took
// other paths, each run's first there (a rank that issued another
// collective than in run A: both calls), or both where the runs issued it
// from other lines (issuedElsewhere).
std::string where(const FirstDivergence& d) {
  if ((d.path && d.stretch && !d.stretch->reordered && !d.stretch->aOps.empty() && !d.stretch->bOps.empty()) ||
      issuedElsewhere(d)) {
    return fmt::format("run A {}, run B {}", opText(d.a), opText(d.b));
  }
  return shownSide(d) + opText(firstShown(d));
}

Json collectiveJson(const SpreadStep& s) {
  Json j{{"communicator", fmt::format("{:016x}", s.communicator)},
         {"sequence", s.sequence},
         {"op", toString(s.op)},
         {"call", s.collective},
         {"file", s.origin ? s.origin->file : ""},
         {"line", s.origin ? s.origin->line : 0}};
  j["step"] = s.origin && s.origin->step >= 0 ? Json(s.origin->step) : Json(nullptr);
  return j;
}

}  // namespace

void printJob(std::ostream& os, const Style& st, const RunComparison& c, const JobView& job) {
  const size_t n = c.processes.size();
  os << '\n' << st.bold(fmt::format("== job: {} process{} ==", n, n == 1 ? "" : "es")) << '\n';
  if (job.sizes) os << st.red(sizesText(*job.sizes)) << '\n';
  for (const CollectiveMismatch& m : job.mismatches) {
    os << st.red(fmt::format("collective mismatch in {}: communicator {:016x}, {} differs between ranks", m.run,
                             m.communicator, mismatchedCall(m)))
       << '\n';
    for (const CollectiveCallSite& s : m.calls) {
      os << fmt::format("  rank {} ({}): {}{}", s.rank, s.process, s.call,
                        s.file.empty() ? "" : " at " + sourceLine(s.file, s.line))
         << '\n';
    }
  }
  // One line a rank, in rank order, except that receivers which the same
  // collective reached after as many collectives share one line, at the
  // place of the first of them: 63 receivers of a 64-rank job are one line.
  std::map<std::pair<size_t, uint64_t>, std::vector<int32_t>> together;  // (spread step, collectives before)
  std::vector<std::optional<std::pair<size_t, uint64_t>>> groupOf(job.ranks.size());
  std::set<std::pair<size_t, uint64_t>> printed;
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const RankVerdict& v = job.ranks[i];
    for (size_t k = 0; k < job.spread.size() && !v.origin; ++k) {
      const std::vector<int32_t>& to = job.spread[k].to;
      if (std::find(to.begin(), to.end(), v.rank) == to.end()) continue;
      groupOf[i] = std::pair{k, v.collectivesBefore};
      together[*groupOf[i]].push_back(v.rank);
      break;
    }
  }
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const RankVerdict& v = job.ranks[i];
    const auto after = fmt::format("after {} collective{}", v.collectivesBefore, v.collectivesBefore == 1 ? "" : "s");
    if (groupOf[i] && together.at(*groupOf[i]).size() > 1) {
      if (!printed.insert(*groupOf[i]).second) continue;  // with the first of them
      std::vector<int32_t> ranks = together.at(*groupOf[i]);
      std::sort(ranks.begin(), ranks.end());
      os << fmt::format("{}: {} {}, {}: {}", ranksText(ranks), ranks.size(),
                        v.fromUnrecorded ? "origins or receivers" : "receivers", after,
                        spreadCollectiveText(job.spread[groupOf[i]->first]))
         << '\n';
      continue;
    }
    // A receiver whose first divergence came after the collective that
    // carried it (one whose receipt has no digest): that collective first.
    const FirstDivergence& d = *c.processes[v.process].firstDivergence;
    const std::string through = groupOf[i] && v.carrier != seqInA(d)
                                    ? fmt::format("through {}; its first divergence ",
                                                  spreadCollectiveText(job.spread[groupOf[i]->first]))
                                    : "";
    os << fmt::format("rank {} ({}): {}, {}: {}{}", v.rank, c.processes[v.process].name, roleOf(v), after, through,
                      where(d))
       << '\n';
  }
  if (job.ranks.empty() && job.mismatches.empty() && !job.sizes) {
    os << fmt::format("no rank diverged{}", c.unknown() ? " in what was compared (see above)" : "") << '\n';
  }
  if (job.earliestOrigins.size() == 1) {
    const RankVerdict& v = job.ranks[job.earliestOrigins[0]];
    const FirstDivergence& d = *c.processes[v.process].firstDivergence;
    os << st.bold(fmt::format("earliest origin: rank {}, {}; cause: {}", v.rank, where(d), d.summary)) << '\n';
  } else if (!job.earliestOrigins.empty()) {
    std::vector<int32_t> tied;
    for (size_t i : job.earliestOrigins) tied.push_back(job.ranks[i].rank);
    const uint64_t before = job.ranks[job.earliestOrigins[0]].collectivesBefore;
    os << st.bold(job.sameCollective
                      ? fmt::format("earliest origins: {}, each after {} collective{}: they diverged before the same "
                                    "collective, independently",
                                    ranksText(tied), before, before == 1 ? "" : "s")
                      : fmt::format("earliest origins: {}: they diverged independently (no collective carried one's "
                                    "divergence to another before it diverged)",
                                    ranksText(tied)))
       << '\n';
    for (size_t i : job.earliestOrigins) {
      const RankVerdict& v = job.ranks[i];
      const FirstDivergence& d = *c.processes[v.process].firstDivergence;
      os << st.bold(fmt::format("  rank {}, {}; cause: {}", v.rank, where(d), d.summary)) << '\n';
    }
  } else if (!job.ranks.empty() && !job.cause) {
    os << st.yellow(noOriginText(job)) << '\n';
  }
  for (const SpreadStep& s : job.spread) {
    const std::string what =
        spreadCollectiveText(s) +
        (s.issuedDifferently ? " (its ranks issued it differently: the collective mismatch above; it may never have "
                               "completed)"
                             : "");
    if (!s.from.empty()) {
      os << fmt::format("spread: {} carried the divergence from {} to {}", what, ranksText(s.from), ranksText(s.to))
         << '\n';
      continue;
    }
    const std::string gave = s.receivedUnhashed ? fmt::format("may have given {} different data (what they "
                                                              "received was not hashed)",
                                                              ranksText(s.to))
                                                : fmt::format("gave {} different data", ranksText(s.to));
    if (s.issuedDifferently) {
      os << fmt::format("spread: {} is where {} first diverged", what, ranksText(s.to)) << '\n';
    } else if (s.everyRankSentIdentical) {
      os << fmt::format("spread: {} {}, although every rank sent it identical data", what, gave) << '\n';
    } else if (!s.divergedBefore.empty()) {
      os << fmt::format("spread: {} {}; what {} sent it was not hashed, and {} diverged before {} issued it: the "
                        "likely {}",
                        what, gave, ranksText(s.divergedBefore), s.divergedBefore.size() == 1 ? "it" : "they",
                        s.divergedBefore.size() == 1 ? "it" : "they",
                        s.divergedBefore.size() == 1 ? "sender" : "senders")
         << '\n';
    } else {
      os << fmt::format("spread: {} {}, and no rank recorded sent it other data (a rank not recorded in both runs, "
                        "or what it sent not hashed)",
                        what, gave)
         << '\n';
    }
  }
  if (job.cause) {
    const diff::CollectiveVerdict& v = *job.cause;
    os << st.bold(fmt::format("job cause: {}", v.summary)) << '\n';
    const std::vector<std::string> evidence = diff::sentences(v.evidence);
    for (size_t i = 0; i < evidence.size(); ++i) os << (i == 0 ? "  evidence " : "           ") << evidence[i] << '\n';
    os << "  fix      " << v.fix << '\n';
  }
}

Json jobJson(const RunComparison& c, const JobView& job) {
  Json mismatches = Json::array();
  for (const CollectiveMismatch& m : job.mismatches) {
    Json calls = Json::array();
    for (const CollectiveCallSite& s : m.calls) {
      calls.push_back({{"process", s.process}, {"rank", s.rank}, {"call", s.call}, {"file", s.file},
                       {"line", s.line}});
    }
    mismatches.push_back({{"run", m.run}, {"communicator", fmt::format("{:016x}", m.communicator)},
                          {"sequence", m.sequence}, {"calls", calls}});
    if (m.ends >= 0) mismatches.back()["pointToPoint"] = {{"from", m.ends >> 32}, {"to", m.ends & 0xffffffff}};
  }
  Json ranks = Json::array();
  for (const RankVerdict& v : job.ranks) {
    const FirstDivergence& d = *c.processes[v.process].firstDivergence;
    ranks.push_back({{"process", c.processes[v.process].name},
                     {"rank", v.rank},
                     {"role", v.origin ? "origin" : v.fromUnrecorded ? "unknown" : "receiver"},
                     {"collectivesBefore", v.collectivesBefore},
                     {"seq", seqInA(d)},
                     {"carrier", v.origin ? Json(nullptr) : Json(v.carrier)},
                     {"cause", diff::jsonName(d.cause)}});
    const auto notes = job.notes.find(v.process);
    ranks.back()["notes"] = notes == job.notes.end() ? std::vector<std::string>{} : notes->second;
  }
  Json earliest = Json::array();
  for (size_t i : job.earliestOrigins) earliest.push_back(ranks[i]);
  Json spread = Json::array();
  for (const SpreadStep& s : job.spread) {
    Json step{{"collective", collectiveJson(s)}, {"from", s.from}, {"to", s.to}};
    step["step"] = collectiveJson(s)["step"];
    step["everyRankSentIdentical"] = s.everyRankSentIdentical;
    step["receivedUnhashed"] = s.receivedUnhashed;
    step["divergedBefore"] = s.divergedBefore;
    step["issuedDifferently"] = s.issuedDifferently;
    spread.push_back(std::move(step));
  }
  Json out{{"collectiveMismatches", mismatches}, {"ranks", ranks}, {"earliestOrigin", nullptr}};
  if (job.sizes) {
    out["sizes"] = {{"communicator", fmt::format("{:016x}", job.sizes->communicator)}, {"a", job.sizes->a},
                    {"b", job.sizes->b}};
  }
  if (!job.earliestOrigins.empty()) out["earliestOrigin"] = earliest[0];
  out["earliestOrigins"] = earliest;
  out["earliestBeforeSameCollective"] = job.earliestOrigins.size() > 1 && job.sameCollective;
  out["spread"] = spread;
  out["cause"] = nullptr;
  if (job.cause) {
    const diff::CollectiveVerdict& v = *job.cause;
    out["cause"] = {{"cause", diff::jsonName(v.cause)},
                    {"mechanism", diff::jsonName(v.mechanism)},
                    {"summary", v.summary},
                    {"evidence", diff::sentences(v.evidence)},
                    {"fix", v.fix},
                    {"collective", collectiveJson(job.spread[*job.reductionOrderAt])}};
  }
  return out;
}

}  // namespace gpurr::report
