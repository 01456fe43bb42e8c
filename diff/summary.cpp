// Stage 1, the summary (summary.h): each run's trace read once, both runs at
// once, into 32 bytes an operation; allocations take identities by their
// first use, and the operations both runs agree on from the start are given
// up as the summary goes.
#include "diff/summary.h"

// Inline: the summary hashes a few dozen bytes several times per operation,
// where a call into the library costs as much as the hashing.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "diff/intervals.h"
#include "trace_format/hash_primitives.h"

namespace gpurr::diff {
using namespace gpurr::trace;

using hash::fmix;

uint64_t AllocationIds::first(uint32_t ordinal, uint64_t user, uint64_t operand, uint32_t thread) {
  if (ordinal == 0) return 0;
  grow(ordinal);
  const Allocation& a = allocations_[ordinal];
  const std::array<uint64_t, 5> what{a.size, static_cast<uint64_t>(a.kind), user, operand, thread};
  const uint64_t cls = XXH3_64bits(what.data(), sizeof what);
  ids_[ordinal] = fmix(cls + 0x9e3779b97f4a7c15ull * ++seen_[cls]) | 1;
  if (!renamed_.empty()) {
    if (const auto it = renamed_.find(ordinal); it != renamed_.end()) {
      ids_[ordinal] = it->second;
    } else if (renamedTo_.count(ids_[ordinal])) {
      ids_[ordinal] = fmix(ids_[ordinal] ^ 0x72656e616d6564ull) | 1;  // another than the one renamed to it
    }
  }
  allocations_[ordinal].usedBefore = used_++;
  allocations_[ordinal].firstUse = seq_;
  return ids_[ordinal];
}

void AllocationIds::rename(std::unordered_map<uint32_t, uint64_t> identities) {
  renamed_ = std::move(identities);
  renamedTo_.clear();
  for (const auto& [ordinal, id] : renamed_) renamedTo_.insert(id);
}

OrdinalMap::OrdinalMap(const AllocationIds& a, const AllocationIds& b) : mapped_(true) {
  std::unordered_map<uint64_t, uint32_t> ordinalOf;
  for (uint32_t o = 1; o < a.size(); ++o)
    if (a(o) != 0) ordinalOf.emplace(a(o), o);
  map_.resize(b.size(), 0);
  std::vector<bool> taken(a.size(), false);
  for (uint32_t o = 1; o < b.size(); ++o) {
    if (auto it = ordinalOf.find(b(o)); b(o) != 0 && it != ordinalOf.end()) {
      map_[o] = it->second;
      taken[it->second] = true;
    }
  }
  // Those left over, by size and kind, in the order of first use.
  using Left = std::map<std::pair<uint64_t, AllocationKind>, std::vector<std::pair<uint32_t, uint32_t>>>;
  auto left = [](const AllocationIds& ids, auto&& matched) {
    Left out;
    for (uint32_t o = 1; o < ids.size(); ++o) {
      if (ids(o) != 0 && !matched(o)) out[ids.what(o)].emplace_back(ids.usedBefore(o), o);
    }
    for (auto& [what, v] : out) std::sort(v.begin(), v.end());
    return out;
  };
  const Left leftA = left(a, [&](uint32_t o) { return taken[o]; });
  const Left leftB = left(b, [&](uint32_t o) { return map_[o] != 0; });
  for (const auto& [what, vb] : leftB) {
    const auto it = leftA.find(what);
    if (it == leftA.end() || it->second.size() != vb.size()) continue;
    for (size_t k = 0; k < vb.size(); ++k) map_[vb[k].second] = it->second[k].second;
  }
}

// The data dependencies between operations of different host threads and
// streams (canonicalOrder), found in trace order. An operation depends on
// the operation of another thread and stream that last wrote bytes it
// reads or writes, and on the last ones that read bytes it writes since
// they were written, where the host saw that operation finish before: a
// synchronisation of its stream or the context, of an event recorded after
// it, or a synchronous copy to the host after it on its stream (a
// synchronous copy from the host waits for the work before it).
class DataDependencies {
 public:
  // `allInputs`: the trace's hashInputs (forEachAccess).
  explicit DataDependencies(bool allInputs) : allInputs_(allInputs) {}

  // (from, to) by position in the trace, in the order of `to`.
  std::vector<std::pair<uint32_t, uint32_t>> found;

  // A synchronisation on `stream` (folded as Op's).
  void sync(const ScanEvent& e, uint16_t stream) {
    switch (e.syncKind) {
      case SyncKind::kContextSynchronize:
        finished_ = lastOnStream_;
        break;
      case SyncKind::kStreamSynchronize:
      case SyncKind::kStreamQuery:
        finished_[stream] = lastOnStream_[stream];
        break;
      case SyncKind::kEventRecord:
        events_[e.syncEvent] = {stream, lastOnStream_[stream]};
        break;
      case SyncKind::kEventSynchronize:
      case SyncKind::kEventQuery:
        if (const auto it = events_.find(e.syncEvent); it != events_.end()) {
          finished_[it->second.first] = std::max(finished_[it->second.first], it->second.second);
        }
        break;
      case SyncKind::kStreamWaitEvent:
        break;  // orders streams on the GPU: an event's lane
    }
  }

  // Gives up what finding more takes, once the run is summarised.
  void finish() {
    writer_ = {};
    readers_ = {};
    accounted_ = {};
    lastOnStream_ = {};
    finished_ = {};
    events_ = {};
  }

  // Operation `index` of `ops`, summarised from `e`.
  void operation(const ScanEvent& e, const OpStore& ops, uint64_t index) {
    if (index > static_cast<uint64_t>(std::numeric_limits<int>::max())) overflow_ = true;  // (dependencies are held as 32-bit indices)
    if (overflow_) {
      found = {};  // ordered by threads and streams alone
      return;
    }
    const Op& op = ops[index];
    const bool syncCopy = e.kind == EventKind::kMemcpy && !e.async;
    if (syncCopy && e.memcpyKind == MemcpyKind::kHostToDevice) finished_[op.stream] = lastOnStream_[op.stream];
    lastOnStream_[op.stream] = e.seq + 1;
    if (syncCopy && e.memcpyKind == MemcpyKind::kDeviceToHost) finished_[op.stream] = lastOnStream_[op.stream];
    const int self = static_cast<int>(index);
    from_.clear();
    // Only an operation the host saw finish can have handed its data over;
    // false for one it has not seen finish yet (it may later: accounted_).
    auto other = [&](IntervalLabels::Label label) {
      const Op& x = ops[static_cast<uint64_t>(label)];
      if (x.thread == op.thread || x.stream == op.stream) return true;
      if (x.seq() >= finished_[x.stream]) return false;
      from_.push_back(static_cast<uint32_t>(label));
      return true;
    };
    auto dependOn = [&](const IntervalLabels& labels, const ScanRange& r) {
      labels.forEach(r.range.allocation, r.range.offset, r.range.offset + r.range.size, other);
    };
    auto label = [](IntervalLabels& labels, const ScanRange& r, IntervalLabels::Label value) {
      labels.assign(r.range.allocation, r.range.offset, r.range.offset + r.range.size, value);
    };
    // Past kMaxDependencies threads, an operation may keep only some of
    // what it depends on: nothing is accounted for from then on.
    readers_.try_emplace(op.thread);
    if (readers_.size() > kMaxDependencies) accounted_.clear();
    IntervalLabels* accounted = readers_.size() > kMaxDependencies ? nullptr : &accounted_[op.thread];
    // A read looks only at the bytes its thread has not accounted for, and
    // then has.
    auto readBytes = [&](const ScanRange& r) {
      if (!accounted) return dependOn(writer_, r);
      const uint32_t a = r.range.allocation;
      const uint64_t begin = r.range.offset, end = begin + r.range.size;
      unfinished_.clear();
      auto look = [&](uint64_t from, uint64_t to) {
        writer_.forEachSpan(a, from, to, [&](uint64_t b, uint64_t e, IntervalLabels::Label l) {
          if (other(l)) return;
          if (!unfinished_.empty() && unfinished_.back().second == std::max(b, from)) {
            unfinished_.back().second = std::min(e, to);  // one run of them
          } else {
            unfinished_.emplace_back(std::max(b, from), std::min(e, to));
          }
        });
      };
      uint64_t at = begin;
      accounted->forEachSpan(a, begin, end, [&](uint64_t b, uint64_t e, IntervalLabels::Label) {
        if (b > at) look(at, b);
        at = std::max(at, e);
      });
      if (at < end) look(at, end);
      // All of it but the bytes of writers not seen finish (in order).
      at = begin;
      for (const auto& [b, e] : unfinished_) {
        accounted->assign(a, at, b, 0);
        at = e;
      }
      accounted->assign(a, at, end, 0);
    };
    // What it depends on, then what it leaves (a launch reads what it writes).
    forEachAccess(e, allInputs_, readBytes, [&](const ScanRange& r) {
      dependOn(writer_, r);
      for (const auto& [thread, read] : readers_) {
        if (thread != op.thread) dependOn(read, r);
      }
    });
    IntervalLabels& mine = readers_[op.thread];
    forEachAccess(e, allInputs_, [&](const ScanRange& r) { label(mine, r, self); }, [&](const ScanRange& r) {
      label(writer_, r, self);
      for (auto& [thread, read] : readers_) label(read, r, -1);
      for (auto& [thread, bytes] : accounted_) label(bytes, r, thread == op.thread ? 0 : -1);
    });
    // Of each host thread, only the last it depends on: a thread's
    // operations keep their order (canonicalOrder), so the earlier ones go
    // before it anyway. Reading the buffers of N earlier launches made N
    // dependencies each, N x M for M such readers (2 GB for 12,000 of
    // each); now one for each thread, and kMaxDependencies at most.
    std::sort(from_.begin(), from_.end(), std::greater<>());
    threadsSeen_.clear();
    uint32_t kept = 0;
    for (size_t k = 0; k < from_.size() && kept < kMaxDependencies; ++k) {
      if (k > 0 && from_[k] == from_[k - 1]) continue;
      if (!threadsSeen_.insert(ops[from_[k]].thread).second) continue;
      found.emplace_back(from_[k], static_cast<uint32_t>(index));
      ++kept;
    }
  }

 private:
  // The operation that last wrote the bytes; of each host thread, the one
  // that last read them since (those before it on its thread come before it).
  IntervalLabels writer_;
  std::unordered_map<uint16_t, IntervalLabels> readers_;
  // Of each host thread, the bytes whose last writer goes before the
  // thread's next operation whatever that one depends on: the writer is of
  // the thread, or an operation of the thread has read the bytes since and
  // then either depended on that writer or on a later one of the writer's
  // thread, or needed no dependency (the writer was of its stream). A read
  // looks only at the other bytes, not at every span of a buffer each time
  // (thousands of small writes read whole by each of thousands of
  // launches, N x M); the dependencies it leaves out would change no
  // operation's place in the canonical order (Kahn's algorithm frees an
  // operation at the same point with or without them).
  std::unordered_map<uint16_t, IntervalLabels> accounted_;
  std::vector<std::pair<uint64_t, uint64_t>> unfinished_;  // operation()'s
  // By stream (folded as Op's): the last operation enqueued, and the last
  // one the host has seen finish, as seq + 1 (0: none; an operation may be
  // event 0).
  std::vector<uint64_t> lastOnStream_ = std::vector<uint64_t>(uint32_t{1} << 16, 0);
  std::vector<uint64_t> finished_ = std::vector<uint64_t>(uint32_t{1} << 16, 0);
  std::unordered_map<uint64_t, std::pair<uint16_t, uint64_t>> events_;  // event -> stream, last operation before it
  std::vector<uint32_t> from_;
  std::unordered_set<uint16_t> threadsSeen_;  // operation()'s
  // An operation's dependencies at most (one on each host thread): beyond
  // them, its latest ones (a damaged trace of thousands of threads).
  static constexpr uint32_t kMaxDependencies = 256;
  bool overflow_ = false;
  bool allInputs_;
};

Run::Run() = default;
Run::~Run() = default;

std::vector<std::pair<uint32_t, uint32_t>> takeDependencies(Run& run) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  if (run.dependencies) out = std::move(run.dependencies->found);
  run.dependencies.reset();
  return out;
}

namespace {

uint32_t streamOrdinal(Run& run, uint64_t stream) {
  if (stream == 0) return 0;
  if (stream == run.lastStream) return run.lastStreamOrdinal;
  auto [it, inserted] = run.streams.try_emplace(stream, static_cast<uint32_t>(run.streams.size() + 1));
  run.lastStream = stream;
  run.lastStreamOrdinal = it->second;
  return it->second;
}

// Words to be hashed in one go: cheaper than mixing each value in. Fixed
// capacity on the stack; what does not fit is folded in by hashing. The
// hash is wyhash's (public domain): two words per 64x64->128-bit multiply,
// inline, a few nanoseconds for the handful of words an operation has,
// where a general-purpose hash spends as much again choosing its path.
class Words {
 public:
  void clear() { n_ = 0; }
  [[gnu::always_inline]] Words& add(uint64_t v) {
    if (n_ == kCapacity) [[unlikely]] fold();
    w_[n_++] = v;
    return *this;
  }
  Words& add(const Dim3& d) { return add(uint64_t{d.x} << 32 | d.y).add(d.z); }
  // Two lanes of two words each per step, so that the multiplies overlap.
  [[gnu::always_inline]] uint64_t hash() const {
    uint64_t s0 = kP0 ^ n_, s1 = kP3 ^ n_;
    size_t i = 0;
    for (; i + 4 <= n_; i += 4) {
      s0 = mum(w_[i] ^ kP1, w_[i + 1] ^ s0);
      s1 = mum(w_[i + 2] ^ kP2, w_[i + 3] ^ s1);
    }
    uint64_t a = 0, b = 0, c = 0;
    switch (n_ - i) {
      case 3: c = w_[i + 2]; [[fallthrough]];
      case 2: b = w_[i + 1]; [[fallthrough]];
      case 1: a = w_[i]; break;
      default: break;
    }
    s0 = mum(a ^ kP1, b ^ s0);
    s1 = mum(c ^ kP2, s1 ^ kP3);
    return mum(s0 ^ kP1, s1 ^ kP0);
  }

 private:
  [[gnu::noinline]] void fold() {
    w_[0] = hash();
    n_ = 1;
  }
  static uint64_t mum(uint64_t a, uint64_t b) {
    const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
    return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
  }
  // wyhash's secret.
  static constexpr uint64_t kP0 = 0xa0761d6478bd642full, kP1 = 0xe7037ed1a0b428dbull,
                            kP2 = 0x8ebc6af09c88c6e3ull, kP3 = 0x589965cc75374cc3ull;
  static constexpr uint32_t kCapacity = 64;
  uint64_t w_[kCapacity];
  uint32_t n_ = 0;  // not a uint64_t: a store into w_ cannot change it
};

// Whether a copy or set carries the digest of what it wrote: 0 is none
// (FORMAT.md), which is compared with nothing.
bool recordedDigest(const ScanEvent& e) {
  return e.outputs.empty() || e.outputs[0].range.size == 0 || e.outputs[0].digest != 0;
}

// Whether operation `e` wrote device bytes without their digest: a launch
// not hashed, a graph launch without its outputs, a copy or set into device
// memory with digest 0 (`hashed`: recordedDigest's answer for those).
bool writesUndigested(const ScanEvent& e, bool hashed) {
  switch (e.kind) {
    case EventKind::kLaunch: return !hashed;
    case EventKind::kMemcpy: case EventKind::kMemset: return !hashed && e.outputs[0].range.allocation != 0;
    case EventKind::kGraphLaunch: return e.outputs.empty();
    default: return false;
  }
}

// Whether collective `e` received into device bytes without their digest:
// an asynchronous call, complete only at its wait(). It is compared by what
// it sent (and is no operation left out of the comparison: Run::undigested),
// but what it wrote vouches for nothing.
bool receivesUndigested(const ScanEvent& e) {
  return e.kind == EventKind::kCollective &&
         std::ranges::any_of(e.outputs, [](const ScanRange& r) { return r.range.allocation != 0 && r.digest == 0; });
}

// The operand a range of an operation's lists is, to an allocation it is the
// first use of (a pointer's is its byte offset, a copy's its side).
constexpr uint64_t kRangeOperand = UINT64_MAX;

// Ranges by allocation identity, offset, size and digest, as a set: a
// trace lists them in address order, which differs between runs where the
// allocator placed the same buffers elsewhere. An allocation a range is the
// first use of takes `user`'s identity.
void hashRanges(Words& h, std::span<const ScanRange> ranges, AllocationIds& ids, uint64_t user, uint64_t operand,
                uint32_t thread) {
  constexpr uint64_t kP1 = 0xe7037ed1a0b428dbull, kP2 = 0x8ebc6af09c88c6e3ull, kP3 = 0x589965cc75374cc3ull;
  uint64_t set = 0;  // a sum of one mix per range: the same in any order
  for (const ScanRange& r : ranges) {
    const uint64_t id = r.range.allocation != 0 ? ids.use(r.range.allocation, user, operand, thread) : 0;
    set += hash::mum(hash::mum(id ^ kP1, r.range.offset ^ kP2) ^ r.range.size, r.digest ^ kP3);
  }
  h.add(ranges.size()).add(set);
}

// Ranges' sizes and digests, in any order.
uint64_t digestSet(std::span<const ScanRange> ranges) {
  uint64_t set = 0;
  for (const ScanRange& r : ranges) set += hash::mum(r.range.size ^ 0xe7037ed1a0b428dbull, r.digest);
  return set;
}

// The allocations of ranges an operation reads take their identities, as
// hashRanges's do.
void useRanges(std::span<const ScanRange> ranges, AllocationIds& ids, uint64_t user, uint32_t thread) {
  for (const ScanRange& r : ranges) {
    if (r.range.allocation != 0) ids.use(r.range.allocation, user, kRangeOperand, thread);
  }
}

// Builds a run's summary one event at a time, in trace order.
class Summariser {
 public:
  explicit Summariser(Run& run)
      : run_(run), firstUse_(!run.reader->header().options.hashInputs),
        stoppedAfter_(run.reader->damage().incomplete() ? -1 : run.reader->stoppedAfterStep()) {}

  void add(const ScanEvent& e) {
    Run& run = run_;
    if (e.kind == EventKind::kCollective) noteCollective(e);
    if (run.gapSeq != UINT64_MAX) return;  // after a gap: not compared (docs/DIFF.md)
    if (e.kind == EventKind::kEventsDropped) {
      run.gapSeq = e.seq;
      run.gapEvents = e.size;
      return;
    }
    if (e.kind == EventKind::kModuleLoad) {  // an autotuner's candidates' code too
      if (e.imageDigest != 0) run.moduleDigests[e.ordinal] = e.imageDigest;
      return;
    }
    if (e.captured) return;  // not run then: its graph's launch is the operation
    if (e.benchmarking) {    // not the program's computation: set aside (docs/DIFF.md)
      ++run.benchmarking;
      if (e.kind == EventKind::kLaunch) run.benchmarkingLaunches.push_back(e.seq);
      return;
    }
    // Where gpurr stopped the program after a step, what it ran of the next
    // before the stop took effect (the next batch's copy) is not compared,
    // nor anything after it (docs/DIFF.md).
    if (stoppedAfter_ >= 0 && isOperation(e) && e.step > stoppedAfter_) pastStop_ = true;
    if (isOperation(e)) run.lastStep = std::max(run.lastStep, e.step);
    if (pastStop_) {
      run.pastStop += isOperation(e) ? 1 : 0;
      return;
    }
    if (!firstThread_) firstThread_ = e.thread;
    if (!run.threads && e.thread != *firstThread_) {
      run.threads = true;
      run.opsOfOneThread = run.ops.size();
    }
    switch (e.kind) {
      case EventKind::kLaunch: case EventKind::kMemcpy: case EventKind::kMemset: case EventKind::kGraphLaunch:
      case EventKind::kCollective:
        break;  // an operation
      case EventKind::kAllocation:
        run.allocs.push_back({e.ordinal, e.size, e.allocationKind});
        run.ids.allocate(e.ordinal, e.size, e.allocationKind);
        return;
      case EventKind::kSync: {  // orders the operations around it (canonicalOrder)
        const uint16_t stream = fold16(streamOrdinal(run, e.stream));
        run.syncs.push_back({fold16(e.thread), stream, e.syncEvent, e.seq});
        if (run.dependencies) run.dependencies->sync(e, stream);
        return;
      }
      default:
        return;
    }
    run.ids.at(e.seq);
    OpKind kind = OpKind::kLaunch;
    uint64_t shape = 0;
    uint64_t user = 0;  // the operation as the first user of an allocation (AllocationIds)
    // A launch's shape without its pointers' positions (Op::shape).
    uint64_t pairing = 0;
    bool hashed = true;
    bool pointerTargets = false;
    key_.clear();
    out_.clear();
    switch (e.kind) {
      case EventKind::kLaunch: {
        if (e.blockIndex != functionBlock_) {
          functionHashes_.clear();
          functionBlock_ = e.blockIndex;
        }
        if (e.functionId >= functionHashes_.size()) functionHashes_.resize(e.functionId + 1);
        Function& f = functionHashes_[e.functionId];
        // A function is launched the same way again and again: its last
        // launch's shape is kept, and compared field by field.
        if (f.shape != 0 && f.sameShape(e)) {
          shape = f.shape;
          pairing = f.pairing;
        } else {
          if (f.name == 0) f.name = XXH3_64bits(e.function.data(), e.function.size()) | 1;
          key_.add(uint64_t{0}).add(f.name);
          key_.add(e.grid).add(e.block).add(e.cluster);
          key_.add(e.sharedMemBytes).add(e.params.size());
          pairing = key_.hash();
          key_.add(e.pointers.size());
          for (const PointerParam& p : e.pointers) key_.add(p.byteOffset);
          shape = key_.hash();
          f.keep(e, shape, pairing);
        }
        // This launch among its kernel's on its host thread: the first
        // user of the allocations it uses first.
        if (f.launches == nullptr || f.thread != e.thread) {
          f.launches = &operations_[f.name ^ fmix(uint64_t{e.thread} + 1)];
          f.thread = e.thread;
        }
        user = nthUser(f.name, ++*f.launches);
        // The identity adds where each pointer points, to the shape; each
        // pointer is the operand at its byte offset.
        key_.clear();
        key_.add(shape);
        for (const PointerParam& p : e.pointers) {
          key_.add(run.ids.use(p.allocation, user, p.byteOffset, e.thread)).add(p.offset);
          if (p.allocation != 0) run.ids.pointedAt(p.allocation);
        }
        pointerTargets = true;
        hashed = e.hashed;
        if (f.philox < 0) f.philox = e.function.find("PhiloxCudaState") != std::string_view::npos;
        if (f.philox > 0 && e.hasAnnotations && (run.philoxBlocks.empty() || run.philoxBlocks.back() != e.blockIndex))
          run.philoxBlocks.push_back(e.blockIndex);
        break;
      }
      case EventKind::kMemcpy:
        kind = OpKind::kMemcpy;
        hashed = recordedDigest(e);
        key_.add(uint64_t{1}).add(static_cast<uint64_t>(e.memcpyKind)).add(e.size);
        shape = key_.hash();
        user = nthOf(shape, e.thread);
        for (uint64_t i : {0, 1}) {
          const ScanRange& r = i == 0 ? e.outputs[0] : e.inputs[0];
          if (r.range.allocation != 0) {
            key_.add(run.ids.use(r.range.allocation, user, i, e.thread)).add(r.range.offset);
          }
        }
        break;
      case EventKind::kMemset:
        kind = OpKind::kMemset;
        hashed = recordedDigest(e);
        key_.add(uint64_t{2}).add(e.outputs[0].range.size).add(e.elementSize);
        shape = key_.hash();
        user = nthOf(shape, e.thread);
        if (e.outputs[0].range.allocation != 0) {
          key_.add(run.ids.use(e.outputs[0].range.allocation, user, 0, e.thread)).add(e.outputs[0].range.offset);
        }
        break;
      case EventKind::kGraphLaunch:
        kind = OpKind::kGraph;
        key_.add(uint64_t{7}).add(e.nodeCount);
        shape = key_.hash();
        user = nthOf(shape, e.thread);
        break;
      case EventKind::kCollective:
        // What it does and with whom: its communicator (by the order of its
        // first collective: its id differs between runs), operation,
        // element count and type, reduction and peer (its sequence number
        // is its place in the alignment).
        kind = OpKind::kCollective;
        key_.add(uint64_t{8}).add(run.communicators.try_emplace(e.communicator, run.communicators.size()).first->second);
        key_.add(static_cast<uint64_t>(e.collectiveOp)).add(e.count);
        key_.add(static_cast<uint64_t>(static_cast<uint32_t>(e.peer)));
        key_.add(std::hash<std::string_view>()(e.dataType)).add(std::hash<std::string_view>()(e.reduceOp));
        shape = key_.hash();
        break;
      default:
        break;  // not an operation: returned above
    }
    // The inputs' allocations take their identities at their first use;
    // their digests are compared only where a report shows them.
    if (kind == OpKind::kMemcpy) {
      // Host-to-device copies read host memory: nothing of the device.
      if (readsDeviceMemory(e.memcpyKind)) useRanges(e.inputs, run.ids, user, e.thread);
    } else {
      // A graph launch's ranges (its nodes' allocations, or every
      // allocation), in address order: as one operand, told apart by the
      // order of their first use.
      useRanges(e.inputs, run.ids, user, e.thread);
    }
    if (kind == OpKind::kCollective) {
      // A collective's result is what it received, not where: an
      // asynchronous call's has no digest yet (digest 0, in both runs), and
      // a buffer that is another allocation in one run is no divergence.
      useRanges(e.outputs, run.ids, user, e.thread);
      out_.add(e.outputs.size()).add(digestSet(e.outputs));
      // What it sends is its part of the other ranks' results: a rank that
      // sends other data has diverged, also where nothing before was hashed
      // (gloo's host tensors) or what it received has no digest.
      for (const ScanRange& r : e.inputs) out_.add(r.digest);
    } else {
      hashRanges(out_, e.outputs, run.ids, user, kRangeOperand, e.thread);
    }
    if (firstUse_ && kind == OpKind::kLaunch && !e.reads.empty() && !e.inputs.empty()) noteFirstReads(e);
    run.withOutputs += !e.outputs.empty();
    const bool undigested = writesUndigested(e, hashed);
    run.undigested += undigested;
    if ((undigested || receivesUndigested(e)) && run.firstUndigested == UINT64_MAX) {
      run.firstUndigested = e.seq;
    }
    // Filled in where it is kept: a copy from the stack would read back
    // narrow stores with wide loads.
    Op& op = run.ops.emplace();
    op.key = key_.hash();
    op.outputs = out_.hash();
    // A collective is told by its communicator, operation and count, not by
    // where the program issued it: c10d's calls made on a backend's own
    // thread (gloo's) or in autograd's hooks (FSDP's) are attributed to an
    // op and module that may differ from run to run.
    const uint64_t tag = kind == OpKind::kCollective ? 0 : Op::tagOf(e.site);
    op.word = tag << Op::kTagShift | e.seq << 4 | uint64_t{hashed} << 3 | static_cast<uint64_t>(kind);
    if (!pointerTargets) pairing = op.key;
    op.shape = static_cast<uint32_t>(pairing ^ pairing >> 32);
    op.thread = fold16(e.thread);
    op.stream = fold16(streamOrdinal(run, e.stream));
    const uint64_t index = run.ops.size() - 1;
    if (run.dependencies) {
      run.dependencies->operation(e, run.ops, index);
    } else if (onStreamsOfTheirOwn(op)) {
      startDependencies(e, index);
    }
  }

 private:
  // Whether the operations so far hold two that differ in both host thread
  // and stream: only then can there be data dependencies (not where
  // PyTorch's main and autograd threads share one stream). Each operation
  // shares the thread or the stream of the first, else it is such a pair
  // with it; then one that shares only the thread and one that shares only
  // the stream are such a pair.
  bool onStreamsOfTheirOwn(const Op& op) {
    if (!firstOp_) {
      firstOp_ = {op.thread, op.stream};
      return false;
    }
    const bool thread = op.thread != firstOp_->first, stream = op.stream != firstOp_->second;
    otherThread_ |= thread;
    otherStream_ |= stream;
    return (thread && stream) || (otherThread_ && otherStream_);
  }

  // Starts the run's data dependencies at operation `index`, summarised
  // from `e`: those of the operations held before it are found by reading
  // the trace again up to it (in a program whose threads take streams of
  // their own from the start, little of it).
  void startDependencies(const ScanEvent& e, uint64_t index) {
    Run& run = run_;
    run.dependencies = std::make_unique<DataDependencies>(run.reader->header().options.hashInputs);
    DataDependencies& d = *run.dependencies;
    uint64_t o = run.ops.firstHeld();
    if (o < index) {
      scanEvents(*run.reader, [&](const ScanEvent& p) {
        if (p.seq >= e.seq) return false;
        if (p.captured) return true;
        if (p.kind == EventKind::kSync) d.sync(p, fold16(knownStreamOrdinal(run, p.stream)));
        if (!isOperation(p)) return true;
        while (o < index && run.ops[o].seq() < p.seq) ++o;
        if (run.ops[o].seq() == p.seq) d.operation(p, run.ops, o);
        return true;
      }, run.ops[o].seq());
    }
    d.operation(e, run.ops, index);
  }

  // A collective as the job's view needs it (Run::collectives).
  void noteCollective(const ScanEvent& e) {
    CollectiveCall& c = run_.collectives.emplace_back();
    c.source = e.collectiveSource;
    c.communicator = e.communicator;
    c.sequence = e.collectiveSequence;
    c.seq = e.seq;
    c.op = e.collectiveOp;
    c.count = e.count;
    c.dataType = e.dataType;
    c.commSize = e.commSize;
    c.rank = e.rank;
    const bool send = e.collectiveOp == CollectiveOp::kSend;
    if ((send || e.collectiveOp == CollectiveOp::kRecv) && e.rank >= 0 && e.peer >= 0) {
      c.ends = int64_t{send ? e.rank : e.peer} << 32 | (send ? e.peer : e.rank);
      c.sequence = pointToPoint_[{e.communicator, c.ends}]++;
    }
    c.reduceOp = e.reduceOp;
    for (const ScanRange& r : e.inputs) c.sent.push_back(r.digest);
    for (const ScanRange& r : e.outputs) c.receivedUnhashed = c.receivedUnhashed || r.digest == 0;
  }

  // A launch's read-only ranges it hashed before it ran (Run::firstReads).
  void noteFirstReads(const ScanEvent& e) {
    for (const ScanRange& r : e.reads) {
      for (const ScanRange& in : e.inputs) {
        if (sameExtent(in.range, r.range)) {
          run_.firstReads.push_back({e.seq, in.range, in.digest});
          break;
        }
      }
    }
  }

  // Operation `n` (1, 2, ...) of those that are `what` on one host thread
  // (mixed where it names an allocation: AllocationIds::first).
  static uint64_t nthUser(uint64_t what, uint64_t n) { return what + 0x9e3779b97f4a7c15ull * n; }
  // The next operation that is `what` on host thread `thread`.
  uint64_t nthOf(uint64_t what, uint32_t thread) {
    return nthUser(what, ++operations_[what ^ fmix(uint64_t{thread} + 1)]);
  }

  Run& run_;
  const bool firstUse_;
  // The step gpurr stopped the program after (-1: not stopped), and whether
  // an operation of a later step has been seen.
  const int64_t stoppedAfter_;
  bool pastStop_ = false;
  Words key_, out_;
  // Operations so far by what they are (a kernel by its name, a copy, set
  // or graph launch by its shape) and host thread.
  std::unordered_map<uint64_t, uint64_t> operations_;
  // Sends and receives so far, by communicator and ends (CollectiveCall::ends).
  std::map<std::pair<uint64_t, int64_t>, uint64_t> pointToPoint_;
  // Each function of the current block, by block-local id: the hash of its
  // name, and its last launch's shape with that shape's hash.
  struct Function {
    static constexpr uint32_t kPointers = 16;
    uint64_t name = 0;
    uint64_t shape = 0;  // 0: none kept
    uint64_t pairing = 0;  // the shape without the pointers' positions
    Dim3 grid, block, cluster;
    uint32_t sharedMemBytes = 0, paramBytes = 0, pointers = 0;
    uint32_t byteOffsets[kPointers];
    int8_t philox = -1;  // whether its name holds PhiloxCudaState; -1: not looked yet
    uint64_t* launches = nullptr;  // its launches so far on host thread `thread` (operations_)
    uint32_t thread = 0;

    bool sameShape(const ScanEvent& e) const {
      if (!(e.grid == grid && e.block == block && e.cluster == cluster && e.sharedMemBytes == sharedMemBytes &&
            e.params.size() == paramBytes && e.pointers.size() == pointers)) {
        return false;
      }
      uint32_t differ = 0;
      for (uint32_t k = 0; k < pointers; ++k) differ |= e.pointers[k].byteOffset ^ byteOffsets[k];
      return differ == 0;
    }
    void keep(const ScanEvent& e, uint64_t s, uint64_t p) {
      shape = 0;
      if (e.pointers.size() > kPointers) return;
      shape = s;
      pairing = p;
      grid = e.grid, block = e.block, cluster = e.cluster;
      sharedMemBytes = e.sharedMemBytes;
      paramBytes = static_cast<uint32_t>(e.params.size());
      pointers = static_cast<uint32_t>(e.pointers.size());
      for (uint32_t k = 0; k < pointers; ++k) byteOffsets[k] = e.pointers[k].byteOffset;
    }
  };
  std::vector<Function> functionHashes_;
  size_t functionBlock_ = SIZE_MAX;
  std::optional<uint32_t> firstThread_;
  std::optional<std::pair<uint16_t, uint16_t>> firstOp_;  // thread and stream, folded
  bool otherThread_ = false, otherStream_ = false;
};

}  // namespace

// Where two runs agree at one position: the same identity issued from the
// same site, and the same outputs where both hashed them. A prefix of such
// pairs holds no divergence and starts the alignment (align's common
// prefix).
bool agree(const Op& a, const Op& b) {
  return a.key == b.key && a.tag() == b.tag() &&
         !(a.hashed() && b.hashed() && a.outputs != b.outputs);
}

// Summarises both runs. While neither run has shown a second host thread,
// the operations both runs agree on from the start are dropped as the
// summary goes: they are the alignment's common prefix, hold no
// divergence, and keep their place in the canonical order (agreedStart).
//
// With `threads` 1, on the calling thread, a block of run A then one of run
// B. With more, each run is summarised on a thread of its own, with
// (threads - 2) / 2 more threads decoding its blocks ahead; the two meet
// after each block to advance the agreed start, and each gives up its own
// chunks. The result is the same: only how much is dropped, and when,
// depends on the timing, and dropping changes no result.
void summariseBoth(Run& a, Run& b, unsigned threads, bool drop) {
  // The first position where the runs differ, found as they are summarised:
  // from there on each trace keeps its last blocks (a run that agrees with
  // the other keeps none, and pays nothing for it).
  auto keepFrom = [&](uint64_t& same, uint64_t n, bool& keeping) {
    if (keeping) return;
    while (same < n && agree(a.ops[same], b.ops[same])) ++same;
    if (same == n) return;
    a.reader->keepRecentBlocks(kKeptFrameBytes);
    b.reader->keepRecentBlocks(kKeptFrameBytes);
    keeping = true;
  };
  if (threads <= 1) {
    EventScanner sa(*a.reader, 0, 0), sb(*b.reader, 0, 0);
    Summariser ca(a), cb(b);
    const std::function<bool(const ScanEvent&)> va = [&](const ScanEvent& e) { ca.add(e); return true; };
    const std::function<bool(const ScanEvent&)> vb = [&](const ScanEvent& e) { cb.add(e); return true; };
    uint64_t agreed = 0, same = 0;
    bool moreA = true, moreB = true, keeping = false;
    while (moreA || moreB) {
      if (moreA) moreA = sa.next(va);
      if (moreB) moreB = sb.next(vb);
      keepFrom(same, std::min(a.ops.size(), b.ops.size()), keeping);
      if (!drop) continue;
      if (a.threads || b.threads) {
        drop = false;
        continue;
      }
      const uint64_t n = std::min(a.ops.size(), b.ops.size());
      while (agreed < n && agree(a.ops[agreed], b.ops[agreed])) ++agreed;
      if (agreed < n) drop = false;  // they differ here: everything from here on is kept
      a.ops.dropBefore(agreed, [&](const Op& op) { a.droppedLaunches += op.kind() == OpKind::kLaunch; });
      b.ops.dropBefore(agreed, [&](const Op& op) { b.droppedLaunches += op.kind() == OpKind::kLaunch; });
    }
    for (Run* r : {&a, &b}) {
      if (r->dependencies) r->dependencies->finish();
    }
    return;
  }

  const unsigned decoders = threads >= 4 ? (threads - 2) / 2 : 0;
  // Each run's chunk table never moves: the other thread reads the
  // operations this one has published while it appends more. A frame takes
  // at least 16 bytes (its segment table and root pointer), so no block,
  // even a corrupt one, yields more events than this.
  a.ops.reserveFor(a.reader->uncompressedBytes() / 16 + 1);
  b.ops.reserveFor(b.reader->uncompressedBytes() / 16 + 1);
  struct Shared {
    std::mutex mu;
    uint64_t published[2] = {0, 0};  // operations each run has summarised, readable by the other
    bool multi[2] = {false, false};  // ... and whether they came from more than one host thread
    uint64_t agreed = 0, same = 0;
    bool dropping = true, keeping = false;
    // The first failure as the one-thread path meets them: by block (-1:
    // opening the trace), run A's first.
    std::exception_ptr error;
    int64_t errorBlock = INT64_MAX;
    int errorSide = 2;
  } sh;
  sh.dropping = drop;
  Run* runs[2] = {&a, &b};
  auto body = [&](int side) {
    Run& run = *runs[side];
    int64_t block = -1;
    auto stopped = [&] {  // under the lock
      return sh.error && (block > sh.errorBlock || (block == sh.errorBlock && side > sh.errorSide));
    };
    try {
      EventScanner scanner(*run.reader, 0, decoders);
      Summariser c(run);
      const std::function<bool(const ScanEvent&)> visit = [&](const ScanEvent& e) { c.add(e); return true; };
      for (block = 0;; ++block) {
        const bool more = scanner.next(visit);
        uint64_t upTo = 0;
        {
          std::lock_guard lock(sh.mu);
          if (stopped()) return;
          sh.published[side] = run.ops.size();
          sh.multi[side] = run.threads;
          keepFrom(sh.same, std::min(sh.published[0], sh.published[1]), sh.keeping);
          if (sh.dropping) {
            if (sh.multi[0] || sh.multi[1]) {
              sh.dropping = false;
            } else {
              const uint64_t n = std::min(sh.published[0], sh.published[1]);
              while (sh.agreed < n && agree(a.ops[sh.agreed], b.ops[sh.agreed])) ++sh.agreed;
              if (sh.agreed < n) sh.dropping = false;
            }
          }
          upTo = sh.agreed;
        }
        // (Not while its data dependencies may refer to what it holds.)
        if (!run.dependencies) {
          run.ops.dropBefore(upTo, [&](const Op& op) { run.droppedLaunches += op.kind() == OpKind::kLaunch; });
        }
        if (!more) {
          if (run.dependencies) run.dependencies->finish();
          return;
        }
      }
    } catch (...) {
      std::lock_guard lock(sh.mu);
      if (block < sh.errorBlock || (block == sh.errorBlock && side < sh.errorSide)) {
        sh.error = std::current_exception();
        sh.errorBlock = block;
        sh.errorSide = side;
      }
    }
  };
  std::thread other([&] { body(1); });
  body(0);
  other.join();
  if (sh.error) std::rethrow_exception(sh.error);
  // Both runs give up the same start (each dropped up to the agreed point
  // it last saw).
  for (Run* r : runs) {
    r->ops.dropBefore(sh.agreed, [&](const Op& op) { r->droppedLaunches += op.kind() == OpKind::kLaunch; });
  }
}

}  // namespace gpurr::diff
