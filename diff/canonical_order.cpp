// Stage 2, the canonical order (canonical_order.h): Kahn's algorithm over
// each run's host threads, streams, CUDA events and data dependencies.
#include "diff/canonical_order.h"

#include <functional>
#include <queue>
#include <tuple>

#include "diff/summary.h"

namespace gpurr::diff {
using namespace gpurr::trace;

// Host threads race: two threads that enqueue work on different streams
// interleave their calls in any order, and the trace's order says which
// thread came first, not what the program did. The diff compares each run
// in the canonical order of its interleavings (the lexicographic normal form
// of a Mazurkiewicz trace): operations of one host thread keep their order,
// and so do operations on one stream (the GPU runs them in that order);
// a synchronisation keeps its place among its thread's and its stream's
// operations, and an event's record, waits and queries keep theirs (a wait
// orders its stream after the recording stream's work); of the operations
// free to go next, the one with the smallest identity goes first. Two runs
// whose operations differ only in such an interleaving then have the same
// sequence. A program of one host thread keeps the trace's order, and so
// does the start both runs agree on while each had one thread
// (agreedStart): it is the same in both.
//
// The data a host thread hands to another orders their operations too:
// thread 1 fills a buffer on its stream and synchronises it, then (through
// a queue, a flag: nothing the trace sees) thread 2 reads the buffer on its
// own stream. An operation therefore also stays after the operation of
// another thread and stream it depends on (DataDependencies): in a program
// without data races, the trace holds them in that order in every run. Two
// threads' operations that nothing orders (a race) stay free: the diff
// names the race where the data is read. A range that runs to its
// allocation's end, outside PyTorch's blocks, can make two operations look
// dependent that are not: they then keep the trace's order, and two runs
// that interleave them differently show a reordering.
//
// Kahn's algorithm over the lanes (a thread, a stream, a CUDA event) and
// those data dependencies: each operation or synchronisation waits for the
// one before it in each of its lanes, and for the operations it depends
// on. It holds 24 bytes per operation and up to 12 per dependency besides
// the operations, which are then put in that order in place. Operations
// before `start` keep their place.
void canonicalOrder(Run& run, uint64_t start) {
  std::vector<std::pair<uint32_t, uint32_t>> deps = takeDependencies(run);
  std::vector<Sync> syncs = std::move(run.syncs);
  run.syncs = {};
  if (!run.threads || start >= run.ops.size()) return;
  // Nothing was dropped from a run past the start both agree on (summariseBoth).
  const uint64_t n = run.ops.size() - start;
  const uint64_t firstSeq = run.ops[start].seq();
  const auto firstSync = std::ranges::lower_bound(syncs, firstSeq, {}, &Sync::seq) - syncs.begin();
  const uint64_t m = syncs.size() - static_cast<uint64_t>(firstSync);
  if (n + m >= UINT32_MAX) {
    throw TraceError(fmt::format("{}: too many operations to compare ({})", run.reader->path().string(), n));
  }
  auto opAt = [&](uint64_t w) -> Op& { return run.ops[start + w]; };
  auto syncAt = [&](uint64_t j) -> const Sync& { return syncs[static_cast<uint64_t>(firstSync) + j]; };
  // Waypoints: operation start + i is i, synchronisation firstSync + j is n + j.
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> nextOnThread(n + m, kNone), nextOnStream(n + m, kNone), nextOnEvent(m, kNone);
  // Lanes in which the waypoint before it has not gone yet, and operations
  // it depends on that have not.
  std::vector<uint32_t> waiting(n + m, 0);
  // Each operation's dependents: dependents[dependentsAt[o], dependentsAt[o + 1]).
  std::vector<uint32_t> dependentsAt(n + 1, 0), dependents;
  {
    // Those on operations before the start: they all go before it.
    std::erase_if(deps, [&](const auto& d) { return d.first < start; });
    for (auto& [from, to] : deps) {
      from -= static_cast<uint32_t>(start);
      to -= static_cast<uint32_t>(start);
      ++dependentsAt[from + 1];
      ++waiting[to];
    }
    for (uint64_t o = 0; o < n; ++o) dependentsAt[o + 1] += dependentsAt[o];
    dependents.resize(deps.size());
    std::vector<uint32_t> next(dependentsAt.begin(), dependentsAt.end() - 1);
    for (const auto& [from, to] : deps) dependents[next[from]++] = to;
    deps = {};
  }
  {
    // The last waypoint of each lane so far: threads and streams (16 bits),
    // CUDA events.
    std::vector<uint32_t> lastOnThread(uint32_t{1} << 16, kNone), lastOnStream(uint32_t{1} << 16, kNone);
    std::unordered_map<uint64_t, uint32_t> lastOnEvent;
    auto link = [&](uint32_t& last, uint32_t w, std::vector<uint32_t>& next, uint32_t base) {
      if (last != kNone) {
        next[last - base] = w;
        ++waiting[w];
      }
      last = w;
    };
    // In trace order: the operations and synchronisations merged by seq.
    for (uint64_t o = 0, y = 0; o < n || y < m;) {
      if (y < m && (o == n || syncAt(y).seq < opAt(o).seq())) {
        const Sync& s = syncAt(y);
        const auto w = static_cast<uint32_t>(n + y++);
        link(lastOnThread[s.thread], w, nextOnThread, 0);
        link(lastOnStream[s.stream], w, nextOnStream, 0);
        if (s.event != 0) {
          link(lastOnEvent.try_emplace(s.event, kNone).first->second, w, nextOnEvent, static_cast<uint32_t>(n));
        }
      } else {
        const Op& op = opAt(o);
        const auto w = static_cast<uint32_t>(o++);
        link(lastOnThread[op.thread], w, nextOnThread, 0);
        link(lastOnStream[op.stream], w, nextOnStream, 0);
      }
    }
  }
  // Of the waypoints free to go, the smallest identity (0 for a
  // synchronisation) first, then the earliest in the trace.
  using Ready = std::tuple<uint64_t, uint64_t, uint32_t>;  // identity, seq, waypoint
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  auto offer = [&](uint32_t w) {
    if (w < n) {
      ready.emplace(opAt(w).key, opAt(w).seq(), w);
    } else {
      ready.emplace(0, syncAt(w - n).seq, w);
    }
  };
  for (uint64_t w = 0; w < n + m; ++w) {
    if (waiting[w] == 0) offer(static_cast<uint32_t>(w));
  }
  std::vector<uint32_t> order;  // operations, by their position from the start
  order.reserve(n);
  while (!ready.empty()) {
    const uint32_t w = std::get<2>(ready.top());
    ready.pop();
    if (w < n) {
      order.push_back(w);
      for (uint32_t k = dependentsAt[w]; k < dependentsAt[w + 1]; ++k) {
        if (--waiting[dependents[k]] == 0) offer(dependents[k]);
      }
    }
    for (const uint32_t next : {nextOnThread[w], nextOnStream[w], w >= n ? nextOnEvent[w - n] : kNone}) {
      if (next != kNone && --waiting[next] == 0) offer(next);
    }
  }
  nextOnThread = {};
  nextOnStream = {};
  nextOnEvent = {};
  waiting = {};
  dependentsAt = {};
  dependents = {};
  syncs = {};
  // The recorder numbers launches in trace order (OpInfo::launchIndex):
  // the seqs of those from the start, before they move.
  run.reorderedFrom = start;
  run.reorderedLaunchSeqs.clear();
  for (uint64_t k = 0; k < n; ++k) {
    if (opAt(k).kind() == OpKind::kLaunch) run.reorderedLaunchSeqs.push_back(opAt(k).seq());
  }
  // ops[start + k] = old ops[start + order[k]], cycle by cycle.
  std::vector<bool> placed(n, false);
  for (uint64_t k = 0; k < n; ++k) {
    if (placed[k] || order[k] == k) continue;
    const Op first = opAt(k);
    uint64_t j = k;
    while (order[j] != k) {
      opAt(j) = opAt(order[j]);
      placed[j] = true;
      j = order[j];
    }
    opAt(j) = first;
    placed[j] = true;
  }
}

// Where the canonical order of both runs starts (canonicalOrder): after the
// operations both agree on from the start while neither had shown a second
// host thread, of which those dropped are a part (summariseBoth). How much
// was dropped then changes no order.
uint64_t agreedStart(const Run& a, const Run& b) {
  const uint64_t end = std::min({a.ops.size(), b.ops.size(), a.opsOfOneThread, b.opsOfOneThread});
  uint64_t i = a.ops.firstHeld();
  while (i < end && agree(a.ops[i], b.ops[i])) ++i;
  return i;
}

}  // namespace gpurr::diff
