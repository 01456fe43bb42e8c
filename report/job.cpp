// The job's view across ranks (job.h): collectives the ranks issued
// differently, each rank's first divergence as an origin or a receiver, the
// earliest origins in the job's collective order, the collectives that
// carried the divergence between ranks, and the job's cause at a collective
// that every rank sent identical data.
#include "report/job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <string_view>
#include <tuple>

#include "diff/decode.h"
#include "diff/environment.h"
#include "diff/wording.h"
#include "report/job_order.h"
#include "report/words.h"
#include "trace_format/trace.h"

namespace gpurr::report {
using namespace gpurr::trace;
using diff::Cause;
using diff::FirstDivergence;
using diff::ProcessDiff;

namespace {

constexpr size_t kMismatchesShown = 3;

// What must agree across ranks at one sequence number of a communicator,
// and what each rank sent there.
using Issued = diff::CollectiveCall;

// (source, communicator, sequence, ends): one collective of the job; for a
// point-to-point call, `ends` is its sender's rank << 32 | its receiver's,
// and `sequence` its place among the calls between those two (-1 ends: a
// collective, its place among its communicator's).
using Key = std::tuple<int, uint64_t, uint64_t, int64_t>;
// Each collective -> each process's call of it.
using Issues = std::map<Key, std::map<size_t, Issued>>;

// Each communicator's processes, in the order of their first collective,
// and each one's rank in it.
struct Members {
  std::map<uint64_t, std::vector<size_t>> of;
  std::map<std::pair<uint64_t, size_t>, int32_t> rank;

  // The processes that take part in collective `key`: its communicator's,
  // or a point-to-point call's two ends.
  std::vector<size_t> in(const Key& key) const {
    const auto& [source, communicator, sequence, ends] = key;
    const std::vector<size_t>& all = of.at(communicator);
    if (ends < 0) return all;
    std::vector<size_t> out;
    for (size_t p : all) {
      const auto r = rank.find({communicator, p});
      if (r != rank.end() && (r->second == ends >> 32 || r->second == (ends & 0xffffffff))) out.push_back(p);
    }
    return out;
  }
};
// (process, event) of run A -> the collective it is.
using KeyOfEvent = std::map<std::pair<size_t, uint64_t>, Key>;

bool agree(const Issued& x, const Issued& y) {
  // A send pairs with a recv.
  const bool pair = (x.op == CollectiveOp::kSend && y.op == CollectiveOp::kRecv) ||
                    (x.op == CollectiveOp::kRecv && y.op == CollectiveOp::kSend);
  return (x.op == y.op || pair) && x.count == y.count && x.dataType == y.dataType && x.reduceOp == y.reduceOp;
}

// Whether every process issued what the first did (process -> its call).
bool allAgree(const std::map<size_t, Issued>& calls) {
  return std::all_of(calls.begin(), calls.end(), [&](const auto& c) { return agree(calls.begin()->second, c.second); });
}

// A process's rank: its header's, else its place among the processes.
int32_t rankOf(const ProcessDiff& p, size_t process) {
  return p.rankA >= 0 ? p.rankA : p.rankB >= 0 ? p.rankB : static_cast<int32_t>(process);
}

// Run B's communicator ids in run A's: an NCCL communicator's id is the hash
// of its ncclUniqueId, which NCCL draws anew in every run (the same in every
// rank of one run). Each process's communicators pair up in the order of
// their first collective in its trace; the first process to pair an id
// decides it. Ids not paired, and 0 (unknown), stay as they are.
std::map<uint64_t, uint64_t> communicatorsInA(const RunComparison& c) {
  auto firsts = [](const std::vector<diff::CollectiveCall>& calls) {
    std::vector<uint64_t> ids;
    for (const diff::CollectiveCall& call : calls) {
      if (call.communicator != 0 && std::find(ids.begin(), ids.end(), call.communicator) == ids.end()) {
        ids.push_back(call.communicator);
      }
    }
    return ids;
  };
  std::map<uint64_t, uint64_t> inA;
  for (const ProcessDiff& pd : c.processes) {
    const std::vector<uint64_t> a = firsts(pd.collectivesA), b = firsts(pd.collectivesB);
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) inA.try_emplace(b[i], a[i]);
  }
  return inA;
}

// The collectives of one run, by process, from what the diff's summary
// gathered (no trace is read again), run B's by run A's communicator ids
// (`inA`); whether any process issued one. For run A, `seqs` gets each
// process's collectives' events, in order.
bool collectIssues(const RunComparison& c, bool runB, const std::map<uint64_t, uint64_t>& inA, Issues& issues,
                   Members& members, KeyOfEvent& keyOf,
                   std::vector<std::vector<uint64_t>>& seqs) {
  bool any = false;
  if (!runB) seqs.assign(c.processes.size(), {});
  for (size_t p = 0; p < c.processes.size(); ++p) {
    const ProcessDiff& pd = c.processes[p];
    for (diff::CollectiveCall call : runB ? pd.collectivesB : pd.collectivesA) {
      any = true;
      if (const auto it = inA.find(call.communicator); runB && it != inA.end()) call.communicator = it->second;
      const Key key{static_cast<int>(call.source), call.communicator, call.sequence, call.ends};
      if (!runB) {
        keyOf[{p, call.seq}] = key;
        seqs[p].push_back(call.seq);
      }
      auto& m = members.of[call.communicator];
      if (std::find(m.begin(), m.end(), p) == m.end()) m.push_back(p);
      if (call.rank >= 0) members.rank.try_emplace({call.communicator, p}, call.rank);
      issues[key][p] = call;
    }
  }
  return any;
}

// The processes whose traces of run A (or B) were cut short: a killed or
// crashed rank, or one ended by its launcher when another died.
std::set<size_t> cutShort(const RunComparison& c, bool runB) {
  std::set<size_t> out;
  for (const IncompleteTrace& t : runB ? c.incompleteB : c.incompleteA) {
    for (size_t p = 0; p < c.processes.size(); ++p) {
      if (c.processes[p].name == t.name) out.insert(p);
    }
  }
  return out;
}

void findMismatches(const RunComparison& c, bool runB, const std::map<uint64_t, uint64_t>& inA, const Issues& issues,
                    const Members& members, const std::vector<int32_t>& ranks, std::vector<CollectiveMismatch>& out) {
  size_t found = 0;
  const std::set<size_t> cut = cutShort(c, runB);
  for (const auto& [key, byProcess] : issues) {
    if (found == kMismatchesShown) break;
    const auto& [source, communicator, sequence, ends] = key;
    if (communicator == 0) continue;  // communicators made before recording: not told apart
    const std::vector<size_t> in = members.in(key);
    // A rank that issued nothing here is a mismatch only where its trace
    // went on: one cut short may have issued it after its trace's end.
    bool same = allAgree(byProcess);
    for (size_t p : in) same = same && (byProcess.count(p) != 0 || cut.count(p) != 0);
    if (same) continue;
    ++found;
    CollectiveMismatch m{runB ? c.b : c.a, communicator, sequence, ends, {}};
    if (runB) {  // as run B's traces name it
      for (const auto& [b, a] : inA) {
        if (a == communicator) m.communicator = b;
      }
    }
    for (size_t p : in) {
      CollectiveCallSite site{c.processes[p].name, ranks[p],
                              cut.count(p) != 0 ? "(its trace ends before it: cut short)" : "(none)", "", 0};
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
// data: it received the divergence. (One whose first divergence is a launch
// that reads what such a collective received asynchronously, cause
// collective too, is a receiver only if the job finds who sent it other
// data: unhashedCarrier.)
bool received(const FirstDivergence& d) {
  return !d.path && d.a.kind == diff::OpKind::kCollective && d.cause == Cause::kCollective && d.inputsIdentical;
}

// Whether what a rank sent to a collective is known: every input hashed
// (none at all for a rank that sends nothing, as a broadcast's receivers).
bool sentKnown(const Issued& x) { return std::find(x.sent.begin(), x.sent.end(), 0) == x.sent.end(); }

// The ranks of collective `key`'s communicator not recorded with it, what
// they sent hashed, in both runs (missing from a run's directory,
// unreadable, cut short before it, or not hashed): any of them may have
// sent it other data. 0 where the communicator's size is not known.
int32_t unseenRanks(const Key& key, const Issues (&issues)[2]) {
  const std::map<size_t, Issued>& inA = issues[0].at(key);
  const auto inB = issues[1].find(key);
  int32_t seen = 0;
  for (const auto& [q, a] : inA) {
    if (inB == issues[1].end()) break;
    const auto b = inB->second.find(q);
    seen += b != inB->second.end() && sentKnown(a) && sentKnown(b->second);
  }
  const int32_t taking = std::get<3>(key) >= 0 ? 2 : inA.begin()->second.commSize;  // a send and its receive
  return std::max(0, taking - seen);
}

// The processes that may have sent collective `key` other data unseen, each
// with why: "rank2.gpurr (cut short before it in run B)".
std::vector<std::string> unseenProcesses(const RunComparison& c, const Key& key, const Issues (&issues)[2]) {
  std::vector<std::string> out;
  const std::set<size_t> cut[2] = {cutShort(c, false), cutShort(c, true)};
  for (size_t p = 0; p < c.processes.size(); ++p) {
    for (const bool runB : {false, true}) {
      const Issued* mine = nullptr;
      if (const auto it = issues[runB].find(key); it != issues[runB].end()) {
        if (const auto m = it->second.find(p); m != it->second.end()) mine = &m->second;
      }
      if (mine != nullptr && sentKnown(*mine)) continue;
      out.push_back(fmt::format("{} ({} in run {})", c.processes[p].name,
                                mine != nullptr       ? "what it sent not hashed"
                                : cut[runB].count(p) ? "cut short before it"
                                                      : "not issued",
                                runB ? 'B' : 'A'));
      break;
    }
  }
  for (const std::string& name : c.onlyA) out.push_back(name + " (missing in run B)");
  for (const std::string& name : c.onlyB) out.push_back(name + " (missing in run A)");
  for (const IncompleteTrace& t : c.unreadable) out.push_back(t.name + " (unreadable)");
  return out;
}

// The ranks other than process `p`'s whose own first divergence (run A's
// event, by process: `firstInA`) came before they issued collective `key`,
// what they sent not hashed (an object collective's pickled bytes): the
// likely senders of what differed.
std::vector<int32_t> divergedBefore(const Key& key, size_t p, const Issues (&issues)[2],
                                    const std::vector<uint64_t>& firstInA, const std::vector<int32_t>& ranks) {
  std::vector<int32_t> out;
  for (const auto& [q, a] : issues[0].at(key)) {
    if (q != p && !sentKnown(a) && firstInA[q] < a.seq) out.push_back(ranks[q]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// For process `p` whose first divergence, run A's event `first`, is not a
// collective it received: the earliest collective before it whose receipt
// has no digest, to which `p` sent identical data in both runs and another
// process other data, or which another process issued after its own first
// divergence, what it sent not hashed (divergedBefore). It carried the
// divergence to `p`. Where none did, `maybe` gets those to which no rank
// recorded sent other data but some ranks were not recorded (they may
// have), in order.
std::optional<uint64_t> unhashedCarrier(size_t p, uint64_t first, const Issues (&issues)[2], const KeyOfEvent& keyOf,
                                        const std::vector<uint64_t>& seqs, const std::vector<uint64_t>& firstInA,
                                        std::vector<uint64_t>& maybe) {
  for (const uint64_t seq : seqs) {
    if (seq >= first) break;
    const Key& key = keyOf.at({p, seq});
    const std::map<size_t, Issued>& inA = issues[0].at(key);
    const auto inB = issues[1].find(key);
    if (!inA.at(p).receivedUnhashed || inB == issues[1].end()) continue;
    const auto mine = inB->second.find(p);
    if (mine == inB->second.end() || mine->second.sent != inA.at(p).sent) continue;
    for (const auto& [q, a] : inA) {
      const auto b = inB->second.find(q);
      if (q != p && b != inB->second.end() && b->second.sent != a.sent) return seq;
      if (q != p && !sentKnown(a) && firstInA[q] < a.seq) return seq;
    }
    if (unseenRanks(key, issues) > 0) maybe.push_back(seq);
  }
  return std::nullopt;
}

// Of the collectives that may have brought a rank the divergence from
// ranks not recorded (`maybe`, in order), the last before its divergence
// that another rank of its communicator did not see through: one whose
// divergence came later through a known sender received that collective's
// data unchanged, as every rank of a collective that shares its result did.
std::optional<uint64_t> unrecordedCarrier(size_t p, const std::vector<uint64_t>& maybe, const JobView& job,
                                          const KeyOfEvent& keyOf) {
  for (auto it = maybe.rbegin(); it != maybe.rend(); ++it) {
    const auto& [source, communicator, sequence, ends] = keyOf.at({p, *it});
    const bool passed = std::any_of(job.ranks.begin(), job.ranks.end(), [&](const RankVerdict& v) {
      if (v.origin || v.fromUnrecorded) return false;
      const auto known = keyOf.find({v.process, v.carrier});
      return known != keyOf.end() && std::get<1>(known->second) == communicator &&
             std::get<2>(known->second) > sequence;
    });
    if (!passed) return *it;
  }
  return std::nullopt;
}

// The ranks other than process `p`'s that sent collective `key` other data in
// run B than in run A (recorded in both runs, what they sent hashed).
std::vector<int32_t> sentOther(const Key& key, size_t p, const Issues (&issues)[2], const std::vector<int32_t>& ranks) {
  std::vector<int32_t> out;
  const auto inA = issues[0].find(key), inB = issues[1].find(key);
  if (inA == issues[0].end() || inB == issues[1].end()) return out;
  for (const auto& [q, a] : inA->second) {
    const auto b = inB->second.find(q);
    if (q != p && b != inB->second.end() && !a.sent.empty() && !b->second.sent.empty() && a.sent != b->second.sent) {
      out.push_back(ranks[q]);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// For process `p` whose first divergence `d` (run A's event `first`) is an
// operation just before a collective, issued from the same line in the
// same step or writing what the collective received (run A's ranges): that
// collective, where `p` sent it identical data in both runs and another
// rank other data. The operation ran inside the call: gloo's reduce_scatter
// and all_gather copy what they received into the output, on a thread of
// their own, before c10d's call returns, and the call is recorded as it
// returns.
std::optional<uint64_t> enclosingCarrier(const ProcessDiff& pd, size_t p, const FirstDivergence& d, uint64_t first,
                                         const Issues (&issues)[2], const KeyOfEvent& keyOf,
                                         const std::vector<uint64_t>& seqs, const std::vector<int32_t>& ranks) {
  const auto next = std::upper_bound(seqs.begin(), seqs.end(), first);
  if (d.path || next == seqs.end()) return std::nullopt;
  const Key& key = keyOf.at({p, *next});
  const auto inB = issues[1].find(key);
  if (inB == issues[1].end() || !inB->second.count(p)) return std::nullopt;
  const Issued& a = issues[0].at(key).at(p);
  if (a.sent.empty() || !sentKnown(a) || a.sent != inB->second.at(p).sent) return std::nullopt;
  if (sentOther(key, p, issues, ranks).empty()) return std::nullopt;
  const Event e = diff::eventAt(TraceReader(pd.pathA), *next);
  const std::optional<Origin>& o = d.a.origin;
  const bool sameLine = o && !o->file.empty() && e.origin && e.origin->file == o->file && e.origin->line == o->line &&
                        e.origin->step == o->step;
  const auto* col = std::get_if<Collective>(&e.payload);
  const auto writesReceived = [&](const diff::RangeDifference& r) {
    return col && std::any_of(col->outputs.begin(), col->outputs.end(), [&](const RangeDigest& out) {
             return r.a.allocation != 0 && r.a.allocation == out.range.allocation &&
                    r.a.offset < out.range.offset + out.range.size && out.range.offset < r.a.offset + r.a.size;
           });
  };
  if (!sameLine && std::none_of(d.outputs.begin(), d.outputs.end(), writesReceived)) return std::nullopt;
  return *next;
}

// The notes of job.h's JobView::notes for process `p`; without `events`,
// those of JobView::notesAlike (no run A event numbers).
std::vector<std::string> notesOf(const ProcessDiff& pd, size_t p, const RankVerdict& v, const Issues (&issues)[2],
                                 const KeyOfEvent& keyOf, const std::vector<int32_t>& ranks,
                                 const std::vector<uint64_t>& firstInA, bool events) {
  auto event = [&](uint64_t seq) { return events ? fmt::format(" (run A #{})", seq) : std::string(); };
  std::vector<std::string> out;
  if (v.fromUnrecorded) {
    const int32_t unseen = unseenRanks(keyOf.at({p, v.carrier}), issues);
    out.push_back(fmt::format("perhaps a receiver: its first divergence follows a collective whose receipt has no "
                              "digest{}, to which it sent identical data, and {} of its communicator's ranks {} not "
                              "recorded with it in both runs (missing, unreadable, cut short, or what {} sent not "
                              "hashed): the divergence may have begun there",
                              event(v.carrier), unseen, unseen == 1 ? "was" : "were", unseen == 1 ? "it" : "they"));
  } else if (!v.origin) {
    if (const auto key = keyOf.find({p, v.carrier}); key != keyOf.end()) {
      const std::vector<int32_t> from = sentOther(key->second, p, issues, ranks);
      const std::vector<int32_t> likely = divergedBefore(key->second, p, issues, firstInA, ranks);
      if (!from.empty()) {
        out.push_back(fmt::format("a receiver: {} sent other data to the collective that brought the divergence "
                                  "here{}; it began there",
                                  ranksText(from), event(v.carrier)));
      } else if (!likely.empty()) {
        out.push_back(fmt::format("a receiver: {} diverged before {} issued the collective that brought the "
                                  "divergence here{}, what {} sent not hashed; it began there",
                                  ranksText(likely), likely.size() == 1 ? "it" : "they", event(v.carrier),
                                  likely.size() == 1 ? "it" : "they"));
      }
    }
  }
  for (const diff::IndependentDivergence& i : pd.blast.independent) {
    if (i.path || i.a.kind != diff::OpKind::kCollective) continue;
    const auto key = keyOf.find({p, i.a.seq});
    if (key == keyOf.end()) continue;
    const std::vector<int32_t> from = sentOther(key->second, p, issues, ranks);
    if (from.empty()) continue;
    out.push_back(fmt::format("not independent: {} sent other data to the collective listed above{} too; that "
                              "is why it received other data",
                              ranksText(from), event(i.a.seq)));
  }
  return out;
}

// Collectives a process completed in run A before event `seq`: `seqs` holds
// its collectives' events, in order.
uint64_t collectivesBefore(const std::vector<uint64_t>& seqs, uint64_t seq) {
  return static_cast<uint64_t>(std::lower_bound(seqs.begin(), seqs.end(), seq) - seqs.begin());
}

// Run A's collectives in the job's order (job_order.h), by key.
struct JobOrder {
  std::map<Key, uint32_t> ids;
  CollectiveOrder order;

  uint64_t clockOf(const Key& key) const {
    const auto it = ids.find(key);
    return it == ids.end() ? UINT64_MAX : order.clock(it->second);
  }
};

// Each process's collectives as ids, one for each collective of the job;
// those of communicators made before recording (0, not told apart) each an
// id of its own, ordering nothing.
JobOrder jobOrder(const KeyOfEvent& keyOf, const std::vector<std::vector<uint64_t>>& seqs) {
  std::map<Key, uint32_t> ids;
  std::vector<std::vector<uint32_t>> lists(seqs.size());
  uint32_t next = 0;
  for (size_t p = 0; p < seqs.size(); ++p) {
    for (const uint64_t seq : seqs[p]) {
      const Key& key = keyOf.at({p, seq});
      if (std::get<1>(key) == 0) {
        lists[p].push_back(next++);
        continue;
      }
      const auto [it, fresh] = ids.try_emplace(key, next);
      next += fresh;
      lists[p].push_back(it->second);
    }
  }
  return {std::move(ids), CollectiveOrder(std::move(lists), next)};
}

// The origins of `job` (indices into its ranks) that no other origin's
// divergence happened before: it had not reached them through collectives
// when they diverged. In rank order; `sameCollective`: whether each of them
// diverged just before the same collective.
std::vector<size_t> earliestOrigins(const JobView& job, const CollectiveOrder& order, bool& sameCollective) {
  std::vector<size_t> origins;
  std::vector<std::vector<uint64_t>> reached;  // each origin's: CollectiveOrder::after
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    if (!job.ranks[i].origin) continue;
    origins.push_back(i);
    reached.push_back(order.after(job.ranks[i].process, job.ranks[i].collectivesBefore));
  }
  std::vector<size_t> out;
  for (size_t x = 0; x < origins.size(); ++x) {
    const RankVerdict& v = job.ranks[origins[x]];
    bool after = false;
    for (size_t y = 0; y < origins.size() && !after; ++y) after = y != x && reached[y][v.process] < v.collectivesBefore;
    if (!after) out.push_back(origins[x]);
  }
  std::sort(out.begin(), out.end(), [&](size_t x, size_t y) { return job.ranks[x].rank < job.ranks[y].rank; });
  sameCollective = true;
  std::optional<uint32_t> next;
  for (const size_t i : out) {
    const std::vector<uint32_t>& list = order.list(job.ranks[i].process);
    const uint64_t k = job.ranks[i].collectivesBefore;
    sameCollective = sameCollective && k < list.size() && next.value_or(list[k]) == list[k];
    if (k < list.size()) next = list[k];
  }
  return out;
}

// A collective as the job sees it, without one rank's place in it.
std::string collectiveText(const Collective& c) {
  std::string s = c.call.empty() ? toString(c.op) : c.call;
  if (!c.reduceOp.empty()) s += " " + c.reduceOp;
  s += fmt::format(" {} {}", c.count, c.dataType.empty() ? "elements" : c.dataType);
  if (c.peer >= 0) {
    s += fmt::format(" {} {}", c.op == CollectiveOp::kSend || c.op == CollectiveOp::kRecv ? "peer" : "root", c.peer);
  }
  s += " (";
  if (!c.processGroup.empty()) s += fmt::format("process group {}, ", c.processGroup);
  return s + fmt::format("communicator {:016x}, #{})", c.communicator, c.sequence);
}

// The collectives that carried the divergence: each receiver's first
// divergent collective, with the ranks that sent it other data than in run
// A, in the job's collective order.
std::vector<SpreadStep> spreadOf(const RunComparison& c, const JobView& job, const Issues (&issues)[2],
                                 const Members& members, const std::vector<int32_t>& ranks, const KeyOfEvent& keyOf,
                                 const JobOrder& order, const std::vector<uint64_t>& firstInA) {
  std::map<Key, std::vector<const RankVerdict*>> receiversAt;
  for (const RankVerdict& v : job.ranks) {
    if (v.origin) continue;
    if (auto it = keyOf.find({v.process, v.carrier}); it != keyOf.end()) {
      receiversAt[it->second].push_back(&v);
    }
  }
  std::vector<std::pair<std::pair<uint64_t, uint64_t>, SpreadStep>> steps;  // ((clock, collectives before it), step)
  for (const auto& [key, receivers] : receiversAt) {
    const auto& [source, communicator, sequence, ends] = key;
    const std::map<size_t, Issued>& inA = issues[0].at(key);
    const auto inB = issues[1].find(key);
    std::vector<size_t> in;  // the ranks that take part
    if (communicator != 0) {
      in = members.in(key);
    } else {
      for (const auto& [p, issued] : inA) in.push_back(p);
    }
    SpreadStep s;
    s.communicator = communicator;
    s.sequence = sequence;
    const int32_t size = inA.begin()->second.commSize;
    s.reduces = !inA.begin()->second.reduceOp.empty();
    // Every rank seen, in both runs, with what it sent hashed.
    bool seen = communicator != 0 && (size <= 0 || in.size() == static_cast<size_t>(size));
    for (size_t p : in) {
      const auto a = inA.find(p);
      const Issued* b = nullptr;
      if (inB != issues[1].end()) {
        if (const auto it = inB->second.find(p); it != inB->second.end()) b = &it->second;
      }
      if (a == inA.end() || !b) {
        seen = false;  // not recorded there in both runs
        continue;
      }
      seen = seen && !a->second.sent.empty() && !b->sent.empty() && sentKnown(a->second) && sentKnown(*b) &&
             a->second.commSize == b->commSize && agree(a->second, *b);
      if (a->second.sent != b->sent) s.from.push_back(ranks[p]);
    }
    s.everyRankSentIdentical = seen && s.from.empty();
    s.issuedDifferently = !allAgree(inA) || (inB != issues[1].end() && !allAgree(inB->second));
    uint64_t before = UINT64_MAX;
    s.receivedUnhashed = true;
    for (const RankVerdict* v : receivers) {
      s.to.push_back(v->rank);
      before = std::min(before, v->collectivesBefore);
      s.receivedUnhashed = s.receivedUnhashed && inA.count(v->process) != 0 && inA.at(v->process).receivedUnhashed;
    }
    std::sort(s.from.begin(), s.from.end());
    std::sort(s.to.begin(), s.to.end());
    s.divergedBefore = divergedBefore(key, receivers.front()->process, issues, firstInA, ranks);
    std::erase_if(s.divergedBefore, [&](int32_t r) { return std::binary_search(s.to.begin(), s.to.end(), r); });
    const ProcessDiff& first = c.processes[receivers.front()->process];
    const Event e = diff::eventAt(TraceReader(first.pathA), receivers.front()->carrier);
    if (const auto* col = std::get_if<Collective>(&e.payload)) {
      s.collective = collectiveText(*col);
      s.op = col->op;
    }
    s.origin = e.origin;
    steps.push_back({{order.clockOf(key), before}, std::move(s)});
  }
  std::stable_sort(steps.begin(), steps.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<SpreadStep> out;
  for (auto& [when, s] : steps) out.push_back(std::move(s));
  return out;
}

// The NCCL settings that differ between the runs, in any process, once each.
std::vector<diff::EnvDifference> ncclSettings(const RunComparison& c) {
  std::vector<diff::EnvDifference> out;
  for (const ProcessDiff& p : c.processes) {
    for (const diff::EnvDifference& e : diff::ncclDifferences(p.environment)) {
      if (std::none_of(out.begin(), out.end(), [&](const diff::EnvDifference& x) { return x.field == e.field; })) {
        out.push_back(e);
      }
    }
  }
  return out;
}

}  // namespace

namespace {

// Whether a rank may have received the divergence from ranks not recorded.
bool fromUnrecorded(const JobView& job) {
  return std::any_of(job.ranks.begin(), job.ranks.end(), [](const RankVerdict& v) { return v.fromUnrecorded; });
}

// Why a job whose ranks diverged has no origin.
std::string noOriginWhy(const JobView& job) {
  if (job.sizes) return "the jobs differ in size (above): their collectives are not the same";
  if (!job.mismatches.empty()) {
    return "the collective mismatch above is where the ranks parted: a rank issued another collective there, or none";
  }
  const bool unrecorded = fromUnrecorded(job);
  if (unrecorded && !job.unseen.empty()) {
    return fmt::format("it may have begun on a rank not recorded in both runs: {}", fmt::join(job.unseen, ", "));
  }
  return unrecorded ? "it may have begun on a rank not recorded in both runs, or one whose data was not hashed"
                    : "a collective's reduction that is not deterministic, or a rank not recorded";
}

}  // namespace

std::string noOriginText(const JobView& job) {
  const bool unrecorded = fromUnrecorded(job);
  return fmt::format("no origin{}: every rank that diverged received its divergence through a collective{} ({})",
                     unrecorded ? " among the ranks recorded" : "", unrecorded ? ", or may have" : "",
                     noOriginWhy(job));
}

std::string sizesText(const JobView::Sizes& s) {
  return fmt::format("the jobs differ in size: communicator {:016x} has {} ranks in run A and {} in run B "
                     "(another WORLD_SIZE or process group): compare runs of the same size",
                     s.communicator, s.a, s.b);
}

std::string roleOf(const RankVerdict& v) {
  return v.origin ? "origin" : v.fromUnrecorded ? "origin or receiver" : "receiver";
}

std::string rankList(const std::vector<int32_t>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (s.empty() ? "" : ", ") + (j >= i + 2 ? fmt::format("{}-{}", ranks[i], ranks[j]) : std::to_string(ranks[i]));
    if (j == i + 1) s += fmt::format(", {}", ranks[j]);
    i = j + 1;
  }
  return s;
}

std::string ranksText(const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return "no rank";
  return (ranks.size() == 1 ? "rank " : "ranks ") + rankList(ranks);
}

std::string withOwnRankAs(std::string text, int32_t rank, std::string_view with) {
  if (rank < 0) return text;
  const std::string own = fmt::format("rank {} of ", rank);
  for (size_t at = 0; (at = text.find(own, at)) != std::string::npos; at += with.size()) text.replace(at, own.size(), with);
  return text;
}

std::vector<size_t> processOrder(const RunComparison& c, const JobView* job) {
  std::vector<size_t> order;
  if (job) {
    for (const size_t r : job->earliestOrigins) order.push_back(job->ranks[r].process);
    for (const RankVerdict& v : job->ranks) {
      if (v.origin && std::find(order.begin(), order.end(), v.process) == order.end()) order.push_back(v.process);
    }
  }
  for (size_t i = 0; i < c.processes.size(); ++i) {
    if (std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
  }
  return order;
}

const diff::ProcessDiff* leadProcess(const RunComparison& c, const JobView* job) {
  for (const size_t i : processOrder(c, job)) {
    if (c.processes[i].firstDivergence) return &c.processes[i];
  }
  return nullptr;
}

namespace {

// `text` with the host and device addresses and the digests it gives (each
// rank's own buffers, and the data each rank sent) written "…".
std::string withoutAddressesAndDigests(const std::string& text) {
  static const std::regex hex(R"(\b0x[0-9a-f]{4,}\b|\b[0-9a-f]{16}\b)");
  return std::regex_replace(text, hex, "…");
}

}  // namespace

std::vector<std::vector<size_t>> alikeReports(const std::vector<std::string>& reports,
                                              const std::vector<int32_t>& ranks, const std::vector<size_t>& order) {
  std::vector<std::vector<size_t>> with(reports.size());
  std::map<std::string, size_t> first;  // a report without its rank -> the first process shown with it
  for (const size_t i : order) {
    const auto [it, added] =
        first.emplace(withoutAddressesAndDigests(withOwnRankAs(reports[i], ranks[i], "rank # of ")), i);
    if (!added) with[it->second].push_back(i);
  }
  return with;
}

std::string alikeText(const std::vector<std::string>& reports, const std::vector<int32_t>& ranks, size_t i,
                      const std::vector<size_t>& with) {
  const std::string mine = withOwnRankAs(reports[i], ranks[i], "rank # of ");
  const bool exact = std::all_of(with.begin(), with.end(), [&](size_t k) {
    return withOwnRankAs(reports[k], ranks[k], "rank # of ") == mine;
  });
  const bool ranked = ranks[i] >= 0 || std::any_of(with.begin(), with.end(), [&](size_t k) { return ranks[k] >= 0; });
  if (!ranked) return exact ? "" : ", but for their addresses and digests (--json gives them)";
  return exact ? ", each with its own rank" : ", each with its own rank, addresses and digests (--json gives them)";
}

std::string processesText(const std::vector<size_t>& group, const std::vector<int32_t>& ranks,
                          const std::vector<std::string>& names) {
  std::vector<int32_t> known;
  for (size_t i : group) {
    if (ranks[i] >= 0) known.push_back(ranks[i]);
  }
  std::sort(known.begin(), known.end());
  if (known.size() == group.size() && std::adjacent_find(known.begin(), known.end()) == known.end()) {
    return ranksText(known);
  }
  constexpr size_t kNamed = 8;
  std::string out;
  for (size_t n = 0; n < group.size() && n < kNamed; ++n) out += (n ? ", " : "") + names[group[n]];
  if (group.size() > kNamed) out += fmt::format(" and {} more", group.size() - kNamed);
  return out;
}

std::string mismatchedCall(const CollectiveMismatch& m) {
  if (m.ends < 0) return fmt::format("collective #{}", m.sequence);
  return fmt::format("send/receive #{} from rank {} to rank {} (the calls between those two, counted from 0)",
                     m.sequence, m.ends >> 32, m.ends & 0xffffffff);
}

std::string spreadCollectiveText(const SpreadStep& s) {
  std::string out = s.collective;
  if (s.origin && !s.origin->file.empty()) out += " at " + trace::sourceLine(*s.origin);
  if (s.origin && s.origin->step >= 0) out += fmt::format(", step {}", s.origin->step);
  return out;
}

std::optional<JobView> jobView(const RunComparison& c) {
  // Several processes in either run (one of them perhaps missing from the
  // other, or unreadable).
  if (c.processes.empty() || c.processes.front().name.empty() ||
      c.processes.size() + c.onlyA.size() + c.onlyB.size() + c.unreadable.size() < 2) {
    return std::nullopt;
  }
  JobView job;
  bool any = false;
  std::vector<int32_t> ranks(c.processes.size());
  for (size_t p = 0; p < c.processes.size(); ++p) ranks[p] = rankOf(c.processes[p], p);
  Issues issues[2];
  Members members[2];
  KeyOfEvent keyOf;
  std::vector<std::vector<uint64_t>> seqs;  // run A's collectives' events, by process
  const std::map<uint64_t, uint64_t> inA = communicatorsInA(c);
  for (bool runB : {false, true}) {
    any |= collectIssues(c, runB, inA, issues[runB], members[runB], keyOf, seqs);
    if (!any) return std::nullopt;  // run A issued no collective
    findMismatches(c, runB, inA, issues[runB], members[runB], ranks, job.mismatches);
  }
  job.processRanks = ranks;
  std::vector<uint64_t> firstInA(c.processes.size(), UINT64_MAX);  // each process's first divergence, run A's event
  for (size_t p = 0; p < c.processes.size(); ++p) {
    if (c.processes[p].firstDivergence) firstInA[p] = seqInA(*c.processes[p].firstDivergence);
  }
  std::map<size_t, std::vector<uint64_t>> maybe;  // by process: unhashedCarrier's
  for (size_t p = 0; p < c.processes.size(); ++p) {
    const ProcessDiff& pd = c.processes[p];
    if (!pd.firstDivergence) continue;
    const uint64_t first = seqInA(*pd.firstDivergence);
    std::vector<uint64_t>& may = maybe[p];
    std::optional<uint64_t> carrier =
        received(*pd.firstDivergence) ? first : unhashedCarrier(p, first, issues, keyOf, seqs[p], firstInA, may);
    if (!carrier) carrier = enclosingCarrier(pd, p, *pd.firstDivergence, first, issues, keyOf, seqs[p], ranks);
    job.ranks.push_back(
        {p, ranks[p], !carrier, carrier.value_or(0), collectivesBefore(seqs[p], carrier.value_or(first))});
  }
  // Origins that may have received the divergence from ranks not recorded.
  for (RankVerdict& v : job.ranks) {
    if (const auto carrier = v.origin ? unrecordedCarrier(v.process, maybe[v.process], job, keyOf) : std::nullopt) {
      v.origin = false;
      v.fromUnrecorded = true;
      v.carrier = *carrier;
      v.collectivesBefore = collectivesBefore(seqs[v.process], *carrier);
    }
  }
  // Receivers of a collective that no rank recorded sent other data, nor
  // had diverged before it, some of its ranks not recorded with it in both
  // runs: those may have.
  for (RankVerdict& v : job.ranks) {
    const auto key = v.origin || v.fromUnrecorded ? keyOf.end() : keyOf.find({v.process, v.carrier});
    if (key != keyOf.end() && sentOther(key->second, v.process, issues, ranks).empty() &&
        divergedBefore(key->second, v.process, issues, firstInA, ranks).empty() &&
        unseenRanks(key->second, issues) > 0) {
      v.fromUnrecorded = true;
    }
  }
  for (const RankVerdict& v : job.ranks) {
    if (v.fromUnrecorded) {
      job.unseen = unseenProcesses(c, keyOf.at({v.process, v.carrier}), issues);
      break;
    }
  }
  // A communicator of another size in each run: jobs of different sizes.
  for (const auto& [key, inA] : issues[0]) {
    const auto inB = issues[1].find(key);
    if (job.sizes || inB == issues[1].end()) continue;
    for (const auto& [p, a] : inA) {
      const auto b = inB->second.find(p);
      if (b != inB->second.end() && a.commSize > 0 && b->second.commSize > 0 && a.commSize != b->second.commSize) {
        job.sizes = JobView::Sizes{std::get<1>(key), a.commSize, b->second.commSize};
        break;
      }
    }
  }
  for (const RankVerdict& v : job.ranks) {
    std::vector<std::string> notes =
        notesOf(c.processes[v.process], v.process, v, issues, keyOf, ranks, firstInA, true);
    if (notes.empty()) continue;
    job.notes[v.process] = std::move(notes);
    job.notesAlike[v.process] = notesOf(c.processes[v.process], v.process, v, issues, keyOf, ranks, firstInA, false);
  }
  const JobOrder order = jobOrder(keyOf, seqs);
  job.earliestOrigins = earliestOrigins(job, order.order, job.sameCollective);
  job.spread = spreadOf(c, job, issues, members[0], ranks, keyOf, order, firstInA);
  for (size_t i = 0; i < job.spread.size(); ++i) {
    const SpreadStep& s = job.spread[i];
    // Not where its ranks issued other collectives: it may never have completed.
    if (!s.everyRankSentIdentical || !s.reduces || s.issuedDifferently) continue;
    job.reductionOrderAt = i;
    job.cause = diff::reductionOrderVerdict(s.collective, members[0].of.at(s.communicator).size(), ncclSettings(c));
    break;
  }
  return job;
}

}  // namespace gpurr::report
