// The job's view across ranks (job.h): collectives the ranks issued
// differently, each rank's first divergence as an origin or a receiver, and
// the earliest origin in the job's collective order.
#include "report/job.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "diff/decode.h"
#include "trace_format/scan.h"
#include "trace_format/trace.h"

namespace gpurr::report {
using namespace gpurr::trace;
using diff::Cause;
using diff::FirstDivergence;
using diff::ProcessDiff;

namespace {

constexpr size_t kMismatchesShown = 3;

// What must agree across ranks at one sequence number of a communicator.
struct Issued {
  uint64_t seq = 0;  // the event
  CollectiveOp op = CollectiveOp::kOther;
  uint64_t count = 0;
  std::string dataType;
};

// (source, communicator, sequence) -> each process's collective there.
using Issues = std::map<std::tuple<int, uint64_t, uint64_t>, std::map<size_t, Issued>>;

bool agree(const Issued& x, const Issued& y) {
  // A send pairs with a recv.
  const bool pair = (x.op == CollectiveOp::kSend && y.op == CollectiveOp::kRecv) ||
                    (x.op == CollectiveOp::kRecv && y.op == CollectiveOp::kSend);
  return (x.op == y.op || pair) && x.count == y.count && x.dataType == y.dataType;
}

int32_t rankOf(const TraceReader& r, size_t process) {
  return r.header().rank >= 0 ? r.header().rank : static_cast<int32_t>(process);
}

// The collectives of one run, by process; whether any trace holds one.
bool collectIssues(const RunComparison& c, bool runB, Issues& issues, std::map<uint64_t, std::vector<size_t>>& members,
                   std::vector<int32_t>& ranks) {
  bool any = false;
  ranks.assign(c.processes.size(), -1);
  for (size_t p = 0; p < c.processes.size(); ++p) {
    const TraceReader reader(runB ? c.processes[p].pathB : c.processes[p].pathA);
    ranks[p] = rankOf(reader, p);
    scanEvents(reader, [&](const ScanEvent& e) {
      if (e.kind != EventKind::kCollective) return true;
      any = true;
      issues[{static_cast<int>(e.collectiveSource), e.communicator, e.collectiveSequence}][p] =
          Issued{e.seq, e.collectiveOp, e.count, std::string(e.dataType)};
      auto& m = members[e.communicator];
      if (std::find(m.begin(), m.end(), p) == m.end()) m.push_back(p);
      return true;
    });
  }
  return any;
}

void findMismatches(const RunComparison& c, bool runB, const Issues& issues,
                    const std::map<uint64_t, std::vector<size_t>>& members, const std::vector<int32_t>& ranks,
                    std::vector<CollectiveMismatch>& out) {
  size_t found = 0;
  for (const auto& [key, byProcess] : issues) {
    if (found == kMismatchesShown) break;
    const auto& [source, communicator, sequence] = key;
    if (communicator == 0) continue;  // communicators made before recording: not told apart
    const std::vector<size_t>& in = members.at(communicator);
    const Issued& first = byProcess.begin()->second;
    bool same = byProcess.size() == in.size();
    for (const auto& [p, issued] : byProcess) same = same && agree(first, issued);
    if (same) continue;
    ++found;
    CollectiveMismatch m{runB ? c.b : c.a, communicator, sequence, {}};
    for (size_t p : in) {
      CollectiveCallSite site{c.processes[p].name, ranks[p], "(none)", "", 0};
      if (auto it = byProcess.find(p); it != byProcess.end()) {
        const TraceReader reader(runB ? c.processes[p].pathB : c.processes[p].pathA);
        const Event e = diff::eventAt(reader, it->second.seq);
        if (const auto* col = std::get_if<Collective>(&e.payload)) site.call = describe(*col);
        if (e.origin) site.file = e.origin->file, site.line = e.origin->line;
      }
      m.calls.push_back(std::move(site));
    }
    out.push_back(std::move(m));
  }
}

// A rank whose first divergence is a collective to which it sent identical
// data: it received the divergence.
bool received(const FirstDivergence& d) { return !d.path && d.cause == Cause::kCollective && d.inputsIdentical; }

uint64_t collectivesBefore(const std::string& path, uint64_t seq) {
  const TraceReader reader(path);
  uint64_t n = 0;
  scanEvents(reader, [&](const ScanEvent& e) {
    if (e.seq >= seq) return false;
    n += e.kind == EventKind::kCollective;
    return true;
  });
  return n;
}

std::string where(const FirstDivergence& d) {
  const diff::OpInfo& o = d.a;
  std::string s = fmt::format("#{} {}", o.seq, o.name);
  if (o.origin) s += fmt::format(" {{op {}}}", describe(*o.origin, OriginStep::kOperation));
  return s;
}

}  // namespace

std::optional<JobView> jobView(const RunComparison& c) {
  if (c.processes.size() < 2 || c.processes.front().name.empty()) return std::nullopt;
  JobView job;
  bool any = false;
  std::vector<int32_t> ranks;
  for (bool runB : {false, true}) {
    Issues issues;
    std::map<uint64_t, std::vector<size_t>> members;
    any |= collectIssues(c, runB, issues, members, ranks);
    // Run B is read only when run A held collectives: a job without any is
    // read once more, not twice.
    if (!any) return std::nullopt;
    findMismatches(c, runB, issues, members, ranks, job.mismatches);
  }
  for (size_t p = 0; p < c.processes.size(); ++p) {
    const ProcessDiff& pd = c.processes[p];
    if (!pd.firstDivergence) continue;
    RankVerdict v{p, ranks[p], !received(*pd.firstDivergence),
                  collectivesBefore(pd.pathA, pd.firstDivergence->a.seq)};
    job.ranks.push_back(v);
  }
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const RankVerdict& v = job.ranks[i];
    if (!v.origin) continue;
    if (!job.earliestOrigin || std::tie(v.collectivesBefore, v.rank) <
                                   std::tie(job.ranks[*job.earliestOrigin].collectivesBefore,
                                            job.ranks[*job.earliestOrigin].rank))
      job.earliestOrigin = i;
  }
  return job;
}

void printJob(std::ostream& os, const Style& st, const RunComparison& c, const JobView& job) {
  os << '\n' << st.bold(fmt::format("== job: {} processes ==", c.processes.size())) << '\n';
  for (const CollectiveMismatch& m : job.mismatches) {
    os << st.red(fmt::format("collective mismatch in {}: communicator {:016x}, collective #{} differs between ranks",
                             m.run, m.communicator, m.sequence))
       << '\n';
    for (const CollectiveCallSite& s : m.calls) {
      os << fmt::format("  rank {} ({}): {}{}", s.rank, s.process, s.call,
                        s.file.empty() ? "" : fmt::format(" at {}:{}", s.file, s.line))
         << '\n';
    }
  }
  for (const RankVerdict& v : job.ranks) {
    const FirstDivergence& d = *c.processes[v.process].firstDivergence;
    os << fmt::format("rank {} ({}): {}, after {} collective{}: {}", v.rank, c.processes[v.process].name,
                      v.origin ? "origin" : "receiver", v.collectivesBefore, v.collectivesBefore == 1 ? "" : "s",
                      where(d))
       << '\n';
  }
  if (job.earliestOrigin) {
    const RankVerdict& v = job.ranks[*job.earliestOrigin];
    const FirstDivergence& d = *c.processes[v.process].firstDivergence;
    os << st.bold(fmt::format("earliest origin: rank {}, {}; cause: {}", v.rank, where(d), d.summary)) << '\n';
  } else if (!job.ranks.empty()) {
    os << st.yellow("no origin: every rank that diverged received its divergence through a collective (a "
                    "collective's reduction that is not deterministic, or a rank not recorded)")
       << '\n';
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
  }
  Json ranks = Json::array();
  for (const RankVerdict& v : job.ranks) {
    const FirstDivergence& d = *c.processes[v.process].firstDivergence;
    ranks.push_back({{"process", c.processes[v.process].name},
                     {"rank", v.rank},
                     {"role", v.origin ? "origin" : "receiver"},
                     {"collectivesBefore", v.collectivesBefore},
                     {"seq", d.a.seq},
                     {"cause", diff::jsonName(d.cause)}});
  }
  Json out{{"collectiveMismatches", mismatches}, {"ranks", ranks}, {"earliestOrigin", nullptr}};
  if (job.earliestOrigin) out["earliestOrigin"] = ranks[*job.earliestOrigin];
  return out;
}

}  // namespace gpurr::report
