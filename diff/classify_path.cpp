// Stage 5, classification at a stretch (classify_path.h).
#include "diff/classify_path.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "common/demangle.h"
#include "diff/decode.h"
#include "diff/intervals.h"

namespace gpurr::diff {
using namespace gpurr::trace;

namespace {

// In run A, the operations of reordering `g` that kept their place and
// touch the data of those reordered (read what they write, or write what
// they read or write), by position: the first `limit` of them, and how
// many; nullopt for a region of more than kMaxScanned operations, not
// looked at.
std::optional<std::pair<std::vector<uint64_t>, uint64_t>> touching(const Run& a, const std::vector<AlignedRun>& runs,
                                                                   Group g, size_t limit) {
  constexpr uint64_t kMaxScanned = 1 << 16;
  std::unordered_set<uint64_t> moved;           // by seq
  std::unordered_map<uint64_t, uint64_t> kept;  // seq -> position
  uint64_t from = UINT64_MAX, to = 0;
  for (size_t r = g.first; r <= g.last; ++r) {
    const AlignedRun& x = runs[r];
    if (x.aCount > kMaxScanned || moved.size() + kept.size() > kMaxScanned) return std::nullopt;
    for (uint64_t i = x.aBegin; i < x.aBegin + x.aCount; ++i) {
      const uint64_t seq = a.ops[i].seq();
      if (x.match) {
        kept.emplace(seq, i);
      } else {
        moved.insert(seq);
      }
      from = std::min(from, seq);
      to = std::max(to, seq);
    }
  }
  IntervalLabels reads, writes;  // of the reordered operations
  struct Access {
    uint64_t position;
    DeviceRange range;
    bool write;
  };
  std::vector<Access> accesses;  // of the others
  const bool allInputs = a.reader->header().options.hashInputs;
  scanEvents(*a.reader, [&](const ScanEvent& e) {
    if (e.seq > to) return false;
    if (!isOperation(e)) return true;
    if (moved.count(e.seq) != 0) {
      auto mark = [](IntervalLabels& l, const ScanRange& r) {
        l.assign(r.range.allocation, r.range.offset, r.range.offset + r.range.size, 1);
      };
      forEachAccess(e, allInputs, [&](const ScanRange& r) { mark(reads, r); },
                    [&](const ScanRange& r) { mark(writes, r); });
    } else if (const auto it = kept.find(e.seq); it != kept.end()) {
      forEachAccess(e, allInputs, [&](const ScanRange& r) { accesses.push_back({it->second, r.range, false}); },
                    [&](const ScanRange& r) { accesses.push_back({it->second, r.range, true}); });
    }
    return true;
  }, from, a.decoders);
  std::stable_sort(accesses.begin(), accesses.end(),
                   [](const Access& x, const Access& y) { return x.position < y.position; });
  std::vector<uint64_t> out;
  uint64_t count = 0;
  std::optional<uint64_t> counted;  // the last position counted
  for (const Access& x : accesses) {
    if (counted == x.position) continue;
    const uint64_t end = x.range.offset + x.range.size;
    const bool touches = writes.minLabel(x.range.allocation, x.range.offset, end).has_value() ||
                         (x.write && reads.minLabel(x.range.allocation, x.range.offset, end).has_value());
    if (!touches) continue;
    counted = x.position;
    ++count;
    if (out.size() < limit) out.push_back(x.position);
  }
  return std::pair{out, count};
}

// A reordering's first divergence: who issued the operations reordered and
// those between them that kept their place (threads racing to one stream,
// or one thread in another order), which of those touch their data, and,
// for a move, whether they write the same bytes in both places.
void classifyReordering(const Context& ctx, const std::vector<AlignedRun>& runs, Group g, FirstDivergence& d) {
  const PathDivergence& s = *d.stretch;
  const Reordering& m = *s.reordered;
  if (s.aOps.empty() && !m.otherOps.empty()) d.a = m.otherOps.front();
  if (s.bOps.empty() && !m.otherOps.empty()) d.b = m.otherOps.front();
  d.cause = Cause::kReordered;
  d.mechanism = d.cause;
  d.summary = fmt::format("reordered: {}", reorderingText(m));
  if (m.crossed != 0) d.summary += " (the same operations, in another order)";

  // In run A: the host threads of the operations reordered, and, by host
  // thread, the operations between them that kept their place.
  const Run& a = ctx.a;
  std::vector<uint16_t> moved;
  std::map<uint16_t, uint64_t> kept;
  std::optional<uint16_t> stream;
  bool oneStream = true;
  uint64_t keptCount = 0;
  for (size_t r = g.first; r <= g.last; ++r) {
    const AlignedRun& x = runs[r];
    for (uint64_t i = x.aBegin; i < x.aBegin + x.aCount; ++i) {
      const Op& op = a.ops[i];
      oneStream &= op.stream == stream.value_or(op.stream);
      stream = op.stream;
      if (x.match) {
        ++kept[op.thread];
        ++keptCount;
      } else if (std::find(moved.begin(), moved.end(), op.thread) == moved.end()) {
        moved.push_back(op.thread);
      }
    }
  }
  std::sort(moved.begin(), moved.end());
  const bool ownKept = std::any_of(moved.begin(), moved.end(), [&](uint16_t t) { return kept.count(t) > 0; });
  const bool crossed = m.crossed != 0;
  Evidence issued{EvidenceKind::kIssued, {m.count, crossed, keptCount, oneStream && stream, stream.value_or(0),
                                          moved.size()}};
  issued.numbers.insert(issued.numbers.end(), moved.begin(), moved.end());
  for (const auto& [t, n] : kept) {
    issued.numbers.insert(issued.numbers.end(), {t, n, std::binary_search(moved.begin(), moved.end(), t)});
  }
  d.evidence.push_back(std::move(issued));
  if (ownKept || (keptCount == 0 && moved.size() == 1)) {
    d.evidence.push_back({EvidenceKind::kOwnOrderChanged, std::vector<uint64_t>(moved.begin(), moved.end())});
  } else {
    d.evidence.push_back({EvidenceKind::kThreadsRaced, {oneStream}});
  }
  // Which of the operations that kept their place touch their data: where
  // the order matters.
  const auto touched = keptCount > 0 ? touching(a, runs, g, 3) : std::nullopt;
  if (touched) {
    const auto& [shown, count] = *touched;
    if (count == 0) {
      d.evidence.push_back({EvidenceKind::kNoneTouch, {m.count, crossed}});
    } else {
      Evidence touch{EvidenceKind::kTouch, {m.count, crossed, count}};
      for (const uint64_t p : shown) {
        const OpInfo o = info(a, p);
        std::string name = o.kind == OpKind::kLaunch ? demangled(o.name) : o.name;
        if (name.size() > 60) name = name.substr(0, 57) + "...";
        touch.numbers.insert(touch.numbers.end(), {o.seq, o.thread, o.origin.has_value()});
        touch.texts.push_back(std::move(name));
        touch.texts.push_back(o.origin ? describe(*o.origin, OriginStep::kNone) : "");
      }
      d.evidence.push_back(std::move(touch));
    }
  }
  // A move: whether the operations write the same bytes in both places.
  if (m.crossed != 0) {
    const uint64_t inA = m.crossed > 0 ? m.aBegin : m.aEnd - m.count;
    const uint64_t inB = m.crossed > 0 ? m.bEnd - m.count : m.bBegin;
    uint64_t compared = 0, differ = 0;
    for (uint64_t i = 0; i < m.count; ++i) {
      const Op& x = a.ops[inA + i];
      const Op& y = ctx.b.ops[inB + i];
      if (x.key != y.key || !x.hashed() || !y.hashed()) continue;
      ++compared;
      differ += x.outputs != y.outputs;
    }
    if (compared > 0 && differ == 0) {
      d.evidence.push_back({EvidenceKind::kSameBytesMoved, {m.count}});
    } else if (differ > 0) {
      d.evidence.push_back({EvidenceKind::kOtherBytesMoved, {m.count, differ, compared}});
    }
  }
}

// A stretch whose sides launch the same kernels in the same order, some
// with another grid or block: the evidence says so, with run A's first such
// kernel and both configurations. False for any other stretch (or one
// whose operations the report did not keep).
bool otherConfiguration(const PathDivergence& s, FirstDivergence& d) {
  if (s.aOps.empty() || s.aOps.size() != s.bOps.size() || s.aOps.size() != s.aCount || s.aCount != s.bCount) {
    return false;
  }
  const OpInfo* first = nullptr;
  const OpInfo* firstB = nullptr;
  uint64_t count = 0;
  for (size_t i = 0; i < s.aOps.size(); ++i) {
    const OpInfo& x = s.aOps[i];
    const OpInfo& y = s.bOps[i];
    if (x.kind != OpKind::kLaunch || y.kind != OpKind::kLaunch || x.name != y.name) return false;
    if (x.grid == y.grid && x.block == y.block) continue;
    if (count++ == 0) first = &x, firstB = &y;
  }
  if (count == 0) return false;
  const trace::Dim3 &ga = first->grid, &ba = first->block, &gb = firstB->grid, &bb = firstB->block;
  std::string name = demangled(first->name);
  if (name.size() > 60) name = name.substr(0, 57) + "...";
  d.evidence.push_back({EvidenceKind::kOtherConfiguration,
                        {count, ga.x, ga.y, ga.z, ba.x, ba.y, ba.z, gb.x, gb.y, gb.z, bb.x, bb.y, bb.z},
                        {std::move(name)}});
  return true;
}

// Where a framework op is in the program: what one run's stretch shares
// with the other's operations around the same place, if the program took
// the same path (another kernel sequence within one op).
std::string site(const Origin& o) {
  return fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", o.op, static_cast<int>(o.phase), o.module, o.file,
                     o.line, o.step);
}

// Operations of a stretch whose framework op sites ranAlone reads: beyond
// them, the other side's ops are not known to be absent.
constexpr uint64_t kAloneSites = 256;

// An operation of the stretch whose framework op neither the other run's
// stretch (its first kAloneSites operations, not only those shown) nor its
// operations either side of it ran: the program itself ran another op
// there. (0: run A's, 1: run B's.)
std::optional<std::pair<int, OpInfo>> ranAlone(const Context& ctx, const PathDivergence& s) {
  const std::vector<OpInfo>* sides[2] = {&s.aOps, &s.bOps};
  const Run* runs[2] = {&ctx.a, &ctx.b};
  const uint64_t begin[2] = {s.aBegin, s.bBegin}, count[2] = {s.aCount, s.bCount};
  std::unordered_set<std::string> sites[2];
  for (int side = 0; side < 2; ++side) {
    const Run& run = *runs[side];
    auto add = [&](uint64_t i) {
      const OpInfo o = info(run, i);
      if (o.origin && !o.origin->op.empty()) sites[side].insert(site(*o.origin));
    };
    const uint64_t from = begin[side] > run.ops.firstHeld() ? begin[side] - 1 : begin[side];
    const uint64_t to = std::min<uint64_t>(begin[side] + std::min(count[side], kAloneSites) + 1, run.ops.size());
    for (uint64_t i = from; i < to; ++i) add(i);
  }
  for (int side = 0; side < 2; ++side) {
    if (sites[1 - side].empty()) continue;  // the other run's ops are unknown here
    for (const OpInfo& o : *sides[side]) {
      if (o.origin && !o.origin->op.empty() && sites[1 - side].count(site(*o.origin)) == 0) return std::pair{side, o};
    }
  }
  return std::nullopt;
}

// A stretch of one run alone, each of whose operations launched a kernel
// that the other run's operation just before or after the same place
// launched from the same framework op site: the program ran that op more
// times there (a loop's extra iteration, a call repeated), or the op
// launched its kernel more times in one call; no op call is numbered, so
// the traces cannot tell which. No library chose other kernels. The run
// (0: A, 1: B) and its first operation.
std::optional<std::pair<int, OpInfo>> ranAgain(const Context& ctx, const PathDivergence& s) {
  if ((s.aCount == 0) == (s.bCount == 0)) return std::nullopt;
  const int side = s.aCount == 0 ? 1 : 0;
  const std::vector<OpInfo>& ops = side == 0 ? s.aOps : s.bOps;
  if (ops.size() != (side == 0 ? s.aCount : s.bCount)) return std::nullopt;  // not all kept: not all known
  const Run& other = side == 0 ? ctx.b : ctx.a;
  const uint64_t at = side == 0 ? s.bBegin : s.aBegin;
  std::unordered_set<std::string> around;  // site and kernel
  for (uint64_t i : {at - 1, at}) {
    if (i < other.ops.firstHeld() || i >= other.ops.size()) continue;  // (at - 1 wraps where at is 0)
    const OpInfo o = info(other, i);
    if (o.kind == OpKind::kLaunch && o.origin && !o.origin->op.empty()) {
      around.insert(site(*o.origin) + '\x1e' + o.name);
    }
  }
  for (const OpInfo& o : ops) {
    if (o.kind != OpKind::kLaunch || !o.origin || o.origin->op.empty() ||
        around.count(site(*o.origin) + '\x1e' + o.name) == 0) {
      return std::nullopt;
    }
  }
  return std::pair{side, ops.front()};
}

// Whether the stretch holds a launch the PyTorch layer did not observe (it
// ran where a step stopped matching the steps it had learnt, so its op is
// not known): whether the program or a library changed the path there
// cannot be told from these traces.
bool unobserved(const PathDivergence& s) {
  auto any = [](const std::vector<OpInfo>& ops) {
    return std::any_of(ops.begin(), ops.end(),
                       [](const OpInfo& o) { return o.kind == OpKind::kLaunch && opUnobserved(o); });
  };
  return any(s.aOps) || any(s.bOps);
}

// Where the stretch of one run alone starts at a launch the layer did not
// observe: the launches just before it that repeat the stretch's kernels
// (each the same kernel and configuration as the one as many later) and
// took their origins by their place in a learnt step. The program may have
// added its operations at any of them. The run (0: A, 1: B), the first
// such launch and how many.
std::optional<std::tuple<int, OpInfo, uint64_t>> byPlaceBefore(const Context& ctx, const PathDivergence& s) {
  constexpr uint64_t kMaxLook = 4096;
  if ((s.aCount == 0) == (s.bCount == 0)) return std::nullopt;
  const int side = s.aCount == 0 ? 1 : 0;
  const Run& run = side == 0 ? ctx.a : ctx.b;
  const uint64_t begin = side == 0 ? s.aBegin : s.bBegin, count = side == 0 ? s.aCount : s.bCount;
  uint64_t k = begin;
  while (k > run.ops.firstHeld() && begin - k < kMaxLook && run.ops[k - 1].kind() == OpKind::kLaunch &&
         run.ops[k - 1].shape == run.ops[k - 1 + count].shape) {
    const OpInfo o = info(run, k - 1);
    if (!o.origin || !o.origin->byPlace) break;
    --k;
  }
  if (k == begin) return std::nullopt;
  return std::tuple{side, info(run, k), begin - k};
}

bool choseAlgorithm(const PathDivergence& s) {
  auto any = [](const std::vector<OpInfo>& ops) {
    return std::any_of(ops.begin(), ops.end(), [](const OpInfo& o) {
      return std::any_of(o.annotations.begin(), o.annotations.end(),
                         [](const Annotation& a) { return std::holds_alternative<AlgorithmChoice>(a); });
    });
  };
  return any(s.aOps) || any(s.bOps);
}

void classify(const Context& ctx, const std::vector<AlignedRun>& runs, size_t r, Group g, FirstDivergence& d) {
  d.path = true;
  d.stretch = stretchOf(ctx, runs, r, g);
  const PathDivergence& s = *d.stretch;
  if (!s.aOps.empty()) d.a = s.aOps.front();
  if (!s.bOps.empty()) d.b = s.bOps.front();
  if (s.reordered) return classifyReordering(ctx, runs, g, d);
  // The end of one run: the other goes on. What stopped it is not in the
  // traces. (Where the other's trace ends early, what this one did after
  // its end was not compared: this one does not end here. Where gpurr
  // stopped this one after a step, the other's operations left are of that
  // step, which this one finished without them.)
  if (r + 1 == runs.size() && (s.aCount == 0) != (s.bCount == 0) && !ctx.a.endsEarly && !ctx.b.endsEarly) {
    const bool aEnds = s.aCount == 0;
    d.cause = Cause::kUnknown;
    d.mechanism = d.cause;
    d.summary = fmt::format("unknown: run {} ends here, and run {} goes on for {}", aEnds ? 'A' : 'B',
                            aEnds ? 'B' : 'A', plural(aEnds ? s.bCount : s.aCount, "operation"));
    d.evidence.push_back({EvidenceKind::kRunEnds, {aEnds ? 0u : 1u, aEnds ? s.bCount : s.aCount}});
    return;
  }
  // Collectives one run issued and the other did not, or others in their
  // place: the program's own path, which no library chose (where the ranks
  // disagree, the job's report lists the mismatch first).
  auto collective = [](const OpInfo& o) { return o.kind == OpKind::kCollective; };
  if (std::any_of(s.aOps.begin(), s.aOps.end(), collective) ||
      std::any_of(s.bOps.begin(), s.bOps.end(), collective)) {
    d.cause = Cause::kUnknown;
    d.mechanism = d.cause;
    d.summary = fmt::format("unknown: the program issued other collectives here ({} in run A, {} in run B): "
                            "it took another path",
                            plural(s.aCount, "operation"), plural(s.bCount, "operation"));
    return;
  }
  // The program ran an op here that the other run did not: its own path.
  if (const auto alone = ranAlone(ctx, s)) {
    const char side = alone->first == 0 ? 'A' : 'B', other = alone->first == 0 ? 'B' : 'A';
    const Origin& o = *alone->second.origin;
    d.cause = Cause::kUnknown;
    d.mechanism = d.cause;
    // What the other run ran in its place, where the layer observed it.
    const std::vector<OpInfo>& others = alone->first == 0 ? s.bOps : s.aOps;
    const auto instead = std::find_if(others.begin(), others.end(),
                                      [](const OpInfo& x) { return x.origin && !x.origin->op.empty(); });
    // Operations before it in the stretch, where the layer observed none.
    const std::vector<OpInfo>& mine = alone->first == 0 ? s.aOps : s.bOps;
    const auto at = std::find_if(mine.begin(), mine.end(), [&](const OpInfo& x) { return x.seq == alone->second.seq; });
    const bool unseen =
        std::all_of(mine.begin(), at, [](const OpInfo& x) { return !x.origin || x.origin->op.empty(); });
    const std::string after = at == mine.begin() || !unseen ? std::string()
        : fmt::format(" (after {} whose op the layer did not observe)", plural(at - mine.begin(), "operation"));
    // Op and module; with the line where both runs' are the same op in the
    // same module.
    const bool sameName = instead != others.end() && instead->origin->op == o.op && instead->origin->module == o.module;
    const auto name = [&](const Origin& x) {
      return x.op + (x.module.empty() ? "" : " in " + x.module) +
             (sameName && !x.file.empty() ? fmt::format(" ({}:{})", x.file, x.line) : "");
    };
    d.summary = fmt::format("unknown: run {} ran {} here{}{}: the program took another path", side, name(o), after,
                            instead == others.end()
                                ? fmt::format(" and run {} did not", other)
                                : fmt::format(", where run {} ran {}", other, name(*instead->origin)));
    d.evidence.push_back({EvidenceKind::kOpRanAlone, {static_cast<uint64_t>(alone->first), alone->second.seq},
                          {describe(o, originStep(alone->second))}});
    return;
  }
  const bool algorithm = choseAlgorithm(s);
  // The program ran an op here more times than the other run did.
  if (const auto again = algorithm ? std::nullopt : ranAgain(ctx, s)) {
    const char side = again->first == 0 ? 'A' : 'B', other = again->first == 0 ? 'B' : 'A';
    const Origin& o = *again->second.origin;
    const uint64_t count = again->first == 0 ? s.aCount : s.bCount;
    d.cause = Cause::kUnknown;
    d.mechanism = d.cause;
    d.summary = fmt::format("unknown: run {} ran {}{} here {} more than run {}: the program called it again (a "
                            "loop's extra turn), or it launched again within a call",
                            side, o.op, o.module.empty() ? "" : " in " + o.module,
                            count == 1 ? std::string("once") : fmt::format("{} times", count), other);
    d.evidence.push_back({EvidenceKind::kOpRanAgain, {static_cast<uint64_t>(again->first), again->second.seq, count},
                          {describe(o, originStep(again->second))}});
    return;
  }
  // Ops the layer did not observe: the program's path or a library's.
  const bool unknown = !algorithm && unobserved(s);
  d.cause = unknown ? Cause::kUnknown : Cause::kAlgorithmChoice;
  d.mechanism = d.cause;
  d.summary = fmt::format("{}: the runs take different paths here ({} in run A, {} in run B){}",
                          unknown ? "unknown" : "algorithm choice", plural(s.aCount, "operation"),
                          plural(s.bCount, "operation"),
                          unknown ? ", at ops the PyTorch layer did not observe: the program's own path or a "
                                    "library's choice of kernels"
                                  : "");
  for (const auto* ops : {&s.aOps, &s.bOps}) {
    const uint64_t side = ops == &s.aOps ? 0 : 1;
    for (const OpInfo& o : *ops) {
      for (const Annotation& a : o.annotations) {
        if (const auto* c = std::get_if<AlgorithmChoice>(&a)) {
          d.evidence.push_back(
              {EvidenceKind::kAlgorithm, {side, c->candidates.size()}, {c->library, c->call, c->algorithm}});
        }
      }
    }
  }
  if (!algorithm && !otherConfiguration(s, d)) {
    d.evidence.push_back({EvidenceKind::kNoAlgorithm});
  }
  if (const auto before = unknown ? byPlaceBefore(ctx, s) : std::nullopt) {
    const auto& [side, first, n] = *before;
    d.evidence.push_back({EvidenceKind::kByPlaceBefore,
                          {static_cast<uint64_t>(side), first.launchIndex, n, side == 0 ? s.aCount : s.bCount,
                           (side == 0 ? s.aOps : s.bOps).front().launchIndex}});
  }
}

}  // namespace

FirstDivergence classifyPath(const Context& ctx, const std::vector<AlignedRun>& runs, size_t r, Group g) {
  FirstDivergence d;
  classify(ctx, runs, r, g, d);
  return d;
}

}  // namespace gpurr::diff
