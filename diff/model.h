// The data model the diff's stages share (internal to diff/): the compact
// record of each operation (Op) and where it is kept (OpStore), allocation
// identities (AllocationIds, OrdinalMap), and one run as the summary leaves
// it (Run), with the Context each later stage reads both runs through.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "diff/align.h"
#include "diff/diff.h"
#include "trace_format/scan.h"
#include "trace_format/trace.h"

namespace gpurr::diff {
// The stages work on trace_format's value types throughout.
using namespace gpurr::trace;

// ------------------------------------------------------------ allocations

struct AllocInfo {
  uint32_t ordinal;
  uint64_t size;
  AllocationKind kind;
};

// What an allocation is, by what the program did with it rather than by when
// the allocator handed it out: its size and kind, the operation that first
// used it and the operand it was there, and its host thread. The operation
// is named by what it is (a kernel by its name alone, a copy's or set's kind
// and size) and by how many such operations its host thread did before it:
// the 7th launch of this kernel on this thread, the operand at byte 16 of
// its parameters. Nothing in it counts other allocations, nor where the
// other pointers lie or how the kernel was launched, so a difference at one
// allocation's first use (an operation moved before it, a stale device
// address in one word, another launch configuration) renames that
// allocation at most, never the later ones; counting per thread, threads
// that interleave their calls otherwise in the other run change no
// identity. Allocations one operation uses first at one operand (ranges of
// its lists, of a graph launch) are told apart by the order they come in.
// Each run computes its own as it goes, and equal identities are the same
// allocation in both runs: an extra allocation in one run (the caching
// allocator's one more segment, a workspace of a common size) takes an
// identity of its own, or none while unused, and leaves the others' alone.
class AllocationIds {
 public:
  AllocationIds() : ids_(1, 0), allocations_(1) {}

  void allocate(uint32_t ordinal, uint64_t size, AllocationKind kind) {
    grow(ordinal);
    ++allocated_;
    allocations_[ordinal] = {size, kind};
    ids_[ordinal] = 0;
  }

  // The identity of `ordinal` (0: no allocation), given at its first use, by
  // operation `user` (what it is and how many such came before it) of host
  // thread `thread` at operand `operand`.
  [[gnu::always_inline]] uint64_t use(uint32_t ordinal, uint64_t user, uint64_t operand, uint32_t thread) {
    if (ordinal < ids_.size() && ids_[ordinal] != 0) [[likely]] return ids_[ordinal];
    return first(ordinal, user, operand, thread);
  }

  // A launch's pointer points into `ordinal`, which use() named.
  void pointedAt(uint32_t ordinal) { ++allocations_[ordinal].pointers; }
  uint32_t pointers(uint32_t ordinal) const { return ordinal < ids_.size() ? allocations_[ordinal].pointers : 0; }

  // The identity of `ordinal`, or 0 when nothing used it.
  uint64_t operator()(uint32_t ordinal) const { return ordinal < ids_.size() ? ids_[ordinal] : 0; }
  size_t size() const { return ids_.size(); }
  // Its size and kind, and how many allocations were used before it (for a
  // used one).
  std::pair<uint64_t, AllocationKind> what(uint32_t ordinal) const {
    return {allocations_[ordinal].size, allocations_[ordinal].kind};
  }
  uint32_t usedBefore(uint32_t ordinal) const { return allocations_[ordinal].usedBefore; }
  // The event of the operation being summarised: the first user of the
  // allocations that use() names now.
  void at(uint64_t seq) { seq_ = seq; }
  // The event that first used `ordinal` (UINT64_MAX: none).
  uint64_t firstUse(uint32_t ordinal) const {
    return ordinal < ids_.size() && ids_[ordinal] != 0 ? allocations_[ordinal].firstUse : UINT64_MAX;
  }

  // Gives the allocations of `identities` (by ordinal) the identity there
  // instead of their own, when they are first used; any other allocation
  // whose own identity is one of them takes another (renaming.h: run B
  // summarised again with the identities of the allocations run A's paired
  // operations used).
  void rename(std::unordered_map<uint32_t, uint64_t> identities);

 private:
  struct Allocation {
    uint64_t size = 0;
    AllocationKind kind = AllocationKind::kDevice;
    uint32_t usedBefore = 0;
    uint32_t pointers = 0;  // launches' pointers into it (pointedAt)
    uint64_t firstUse = UINT64_MAX;  // the event of its first user (at)
  };

  // Ordinals number allocations 1, 2, 3... (FORMAT.md §4): one far beyond
  // twice the allocations seen (threads' events out of order, allocations
  // whose events were dropped) is no recorder's, and would size these
  // vectors by a damaged trace's word.
  static constexpr uint64_t kOrdinalSlack = uint64_t{1} << 20;
  void grow(uint32_t ordinal) {
    if (ordinal < ids_.size()) return;
    if (ordinal > 2 * allocated_ + kOrdinalSlack) {
      throw TraceError(fmt::format("allocation ordinal {} is far beyond the {} allocations the trace made: the "
                                   "trace is damaged",
                                   ordinal, allocated_));
    }
    ids_.resize(uint64_t{ordinal} + 1, 0);
    allocations_.resize(uint64_t{ordinal} + 1);
  }

  // The identity given at the first use (summary.cpp).
  [[gnu::noinline]] uint64_t first(uint32_t ordinal, uint64_t user, uint64_t operand, uint32_t thread);

  std::vector<uint64_t> ids_;  // by ordinal; 0 until first used (ordinal 0: none, never used)
  std::vector<Allocation> allocations_;
  std::unordered_map<uint64_t, uint32_t> seen_;  // allocations first used so far per user, operand and class
  uint32_t used_ = 0;                            // allocations used so far
  uint64_t seq_ = UINT64_MAX;                    // at()
  uint64_t allocated_ = 0;                       // allocation events seen so far
  std::unordered_map<uint32_t, uint64_t> renamed_;  // rename()
  std::unordered_set<uint64_t> renamedTo_;          // the identities renamed_ gives
};

// Run B's allocation ordinals in run A's numbering: the ordinal of run A's
// allocation with the same identity. A used allocation without one, where
// each run has as many of its size and kind left over, is the one that
// comes at the same place among them in the order of first use: an
// allocation one run renamed (an operation moved before its first use).
// Unmatched ones (kUnmatched set) keep their own.
class OrdinalMap {
 public:
  static constexpr uint32_t kUnmatched = 0x80000000u;

  // Identity mapping (run A).
  OrdinalMap() = default;
  OrdinalMap(const AllocationIds& a, const AllocationIds& b);

  uint32_t operator()(uint32_t ordinal) const {
    if (!mapped_ || ordinal == 0) return ordinal;
    if (ordinal < map_.size() && map_[ordinal] != 0) return map_[ordinal];
    return kUnmatched | ordinal;
  }

 private:
  bool mapped_ = false;
  std::vector<uint32_t> map_;
};

// What the comparison keeps of an operation: 32 bytes, so that two runs of
// ten million launches each fit in well under a gigabyte. The rest (its
// parameters, its inputs) is read again from the trace for the few
// operations a report shows.
struct Op {
  uint64_t key;      // identity, for the alignment
  uint64_t outputs;  // output ranges and digests
  uint64_t word;     // site tag << 48 | seq << 4 | hashed << 3 | kind
  // Kernel, launch configuration and parameter size (matchSameShape): the
  // identity without where pointers point, nor which words are pointers (an
  // unwritten word of a struct passed by value may hold a stale device
  // address in one run only).
  uint32_t shape;
  // Host thread and stream ordinal, folded into 16 bits: they only order
  // the operations of a run of several threads (canonicalOrder), where two
  // folded together cost only a reordering not undone.
  uint16_t thread, stream;

  static constexpr unsigned kTagShift = 48;  // events of a trace: fewer than 2^44
  // Where the program issued it (ScanEvent::site), folded into 16 bits; 0:
  // no origin. The alignment adds it to the identity (OpStore::keys). The
  // high 8 bits fold the whole site (never 0 for an origin), the low 8 its
  // place in the model (placeTag).
  static uint64_t tagOf(uint64_t site) {
    const auto fold8 = [](uint32_t v) { return (v ^ v >> 8 ^ v >> 16 ^ v >> 24) & 0xff; };
    if (site == 0) return 0;
    const uint32_t whole = fold8(static_cast<uint32_t>(site >> 32)), place = fold8(static_cast<uint32_t>(site));
    return (whole != 0 ? whole : 1) << 8 | (place != 0 || static_cast<uint32_t>(site) == 0 ? place : 1);
  }
  uint64_t seq() const { return word >> 4 & ((uint64_t{1} << (kTagShift - 4)) - 1); }
  // Whether it may have been issued where `other` was: the same site tag,
  // or one of the two without.
  bool sameSite(const Op& other) const { return tag() == other.tag() || tag() == 0 || other.tag() == 0; }
  uint64_t tag() const { return word >> kTagShift; }
  // Its op, phase, forward op and module, folded into 8 bits: where in the
  // model the program issued it, whatever line an edit moved it to; 0
  // without an origin or where the layer did not observe its op.
  uint64_t placeTag() const { return tag() & 0xff; }
  // Its identity with its site tag mixed in (OpStore::keys).
  uint64_t sitedKey() const { return Keys::withTag(key, tag()); }
  OpKind kind() const { return static_cast<OpKind>(word & 7); }
  bool hashed() const { return (word >> 3 & 1) != 0; }
};
static_assert(sizeof(Op) == 32);
static_assert(Op::kTagShift == 48, "Keys reads the site tag from the top 16 bits of Op::word");

inline uint16_t fold16(uint32_t v) { return static_cast<uint16_t>(v ^ v >> 16); }

// The operations of a run, in fixed-size chunks, of which a prefix can be
// given up: where both runs agree up to a point (same identities, same
// outputs), nothing before it is looked at again, and its chunks are reused
// for the operations that follow, so two long runs that agree for most of
// their length are compared in little memory (summariseBoth).
class OpStore {
 public:
  static constexpr unsigned kShift = 10;  // 1,024 operations (32 KiB) a chunk: reused, they stay in cache
  static constexpr uint64_t kChunk = uint64_t{1} << kShift;

  uint64_t size() const { return size_; }
  // The first operation still held: those before it were dropped.
  uint64_t firstHeld() const { return dropped_ << kShift; }
  const Op& operator[](uint64_t i) const { return chunks_[i >> kShift][i & (kChunk - 1)]; }
  Op& operator[](uint64_t i) { return chunks_[i >> kShift][i & (kChunk - 1)]; }

  // The identities of the operations held with their site tags mixed in
  // (Op::sitedKey), for the alignment; `chunks` holds the table it reads
  // and lives as long as it.
  Keys keys(std::vector<const uint64_t*>& chunks) const {
    chunks.assign(chunks_.size(), nullptr);
    for (size_t c = dropped_; c < chunks_.size(); ++c) chunks[c] = &chunks_[c][0].key;
    constexpr unsigned kTagWord = (offsetof(Op, word) - offsetof(Op, key)) / sizeof(uint64_t);
    return Keys(chunks.data(), kShift, sizeof(Op) / sizeof(uint64_t), firstHeld(), size_ - firstHeld(),
                kTagWord);
  }

  // A new operation at the end, to be filled in.
  Op& emplace() {
    if ((size_ & (kChunk - 1)) == 0) {
      if (spare_.empty()) {
        chunks_.push_back(std::make_unique_for_overwrite<Op[]>(kChunk));
      } else {
        chunks_.push_back(std::move(spare_.back()));
        spare_.pop_back();
      }
    }
    return chunks_.back()[size_++ & (kChunk - 1)];
  }

  // Gives up the chunks wholly before operation `end`; `count(op)` is called
  // on each operation given up.
  template <typename F>
  void dropBefore(uint64_t end, F&& count) {
    while (((dropped_ + 1) << kShift) <= end && ((dropped_ + 1) << kShift) <= size_) {
      std::unique_ptr<Op[]>& c = chunks_[dropped_++];
      for (uint64_t k = 0; k < kChunk; ++k) count(c[k]);
      spare_.push_back(std::move(c));
    }
  }

  // Launches among the operations held before `index`: counted chunk by
  // chunk by countLaunches(), once they are all in place.
  void countLaunches() {
    launchesBefore_.assign(chunks_.size() + 1, 0);
    for (size_t c = dropped_; c < chunks_.size(); ++c) {
      uint64_t n = 0;
      for (uint64_t i = c << kShift; i < std::min(size_, (c + 1) << kShift); ++i) {
        n += (*this)[i].kind() == OpKind::kLaunch;
      }
      launchesBefore_[c + 1] = launchesBefore_[c] + n;
    }
  }
  uint64_t launchesBefore(uint64_t index) const {
    uint64_t n = launchesBefore_.at(index >> kShift);
    for (uint64_t i = index & ~(kChunk - 1); i < index; ++i) n += (*this)[i].kind() == OpKind::kLaunch;
    return n;
  }

  // Room for the chunks of `ops` operations, so that the chunk table does
  // not move while they are appended.
  void reserveFor(uint64_t ops) { chunks_.reserve(ops / kChunk + 1); }

 private:
  std::vector<std::unique_ptr<Op[]>> chunks_;  // null once dropped
  std::vector<std::unique_ptr<Op[]>> spare_;
  uint64_t size_ = 0, dropped_ = 0;
  std::vector<uint64_t> launchesBefore_;  // by chunk (countLaunches)
};

// The device ranges an operation reads, then those it writes, as the blast
// radius and the canonical order see them: a launch reads what it touches
// (the ranges of its outputs and reads, also where the trace hashed its
// inputs at first use only), except, in a trace that hashes every range a
// launch may read before it (`allInputs`: the header's hashInputs), an
// output that no input of the hashed launch overlaps: the writer knew the
// launch only writes it (FORMAT.md §3). A copy reads device bytes only where
// its kind says so (readsDeviceMemory: not from the host), one to the host
// writes none.
template <typename Read, typename Write>
void forEachAccess(const ScanEvent& e, bool allInputs, Read&& read, Write&& write) {
  auto each = [](std::span<const ScanRange> rs, auto& f) {
    for (const ScanRange& r : rs) {
      if (r.range.allocation != 0) f(r);
    }
  };
  // Inputs by allocation and offset, each with the largest end of its
  // allocation's inputs up to it: an output's overlap is then found by a
  // binary search, not a pass over every input (a launch of thousands of
  // ranges). Built only for that many.
  struct Sorted {
    uint64_t allocation, offset, maxEnd;
  };
  std::vector<Sorted> sorted;
  const bool checkInputs = allInputs && e.hashed;
  if (checkInputs && e.inputs.size() > 32 && (e.kind == EventKind::kLaunch || e.kind == EventKind::kGraphLaunch)) {
    sorted.reserve(e.inputs.size());
    for (const ScanRange& in : e.inputs) sorted.push_back({in.range.allocation, in.range.offset, in.range.offset + in.range.size});
    std::ranges::sort(sorted, {}, [](const Sorted& x) { return std::pair(x.allocation, x.offset); });
    for (size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i].allocation == sorted[i - 1].allocation) sorted[i].maxEnd = std::max(sorted[i].maxEnd, sorted[i - 1].maxEnd);
  }
  auto readByInputs = [&](const ScanRange& r) {
    if (!checkInputs) return true;
    const uint64_t end = r.range.offset + r.range.size;
    if (sorted.empty()) {
      return std::ranges::any_of(e.inputs, [&](const ScanRange& in) {
        return in.range.allocation == r.range.allocation && in.range.offset < end &&
               r.range.offset < in.range.offset + in.range.size;
      });
    }
    // The last input of the allocation that begins before the output ends.
    auto at = std::ranges::lower_bound(sorted, std::pair(uint64_t{r.range.allocation}, end), {},
                                       [](const Sorted& x) { return std::pair(x.allocation, x.offset); });
    if (at == sorted.begin()) return false;
    --at;
    return at->allocation == r.range.allocation && at->maxEnd > r.range.offset;
  };
  const bool copy = e.kind == EventKind::kMemcpy;
  if (!copy || readsDeviceMemory(e.memcpyKind)) each(e.inputs, read);
  if (e.kind == EventKind::kLaunch || e.kind == EventKind::kGraphLaunch) {
    for (const ScanRange& r : e.outputs) {
      if (r.range.allocation != 0 && readByInputs(r)) read(r);
    }
  }
  if (e.kind == EventKind::kLaunch) each(e.reads, read);
  if (!(copy && e.memcpyKind == MemcpyKind::kDeviceToHost)) each(e.outputs, write);
}

// A synchronisation: it orders the operations around it (canonicalOrder).
struct Sync {
  uint16_t thread, stream;  // folded as Op's
  uint64_t event;           // the CUDA event recorded, waited for or queried; 0 if none
  uint64_t seq;             // event number in the trace
};

// Found during the summary, read by the canonical order (summary.cpp).
class DataDependencies;

struct Run {
  const TraceReader* reader = nullptr;
  OpStore ops;
  uint64_t droppedLaunches = 0;  // launches among the operations ops dropped
  std::vector<AllocInfo> allocs;
  AllocationIds ids;     // identities, for the summary's hashes
  OrdinalMap ordinals;   // in run A's numbering, once both runs are summarised
  std::unordered_map<uint64_t, uint32_t> streams;
  // Communicators, by id: the order of their first collective in the trace.
  // An NCCL communicator's id is the hash of the ncclUniqueId it was made
  // from, which NCCL draws anew in every run.
  std::unordered_map<uint64_t, uint32_t> communicators;
  std::vector<Sync> syncs;          // in trace order
  bool threads = false;             // more than one host thread
  uint64_t opsOfOneThread = UINT64_MAX;  // operations before the first event of a second host thread
  unsigned decoders = 0;            // threads decoding its blocks in a one-trace pass
  uint64_t lastStream = 0;
  uint32_t lastStreamOrdinal = 0;
  // Ranges a launch of a first-use trace (FORMAT.md, hashInputs) only
  // reads and hashed before it, at their first use (or last written on
  // another stream): in trace order. Few (uninitialised or cross-stream
  // reads).
  struct FirstRead {
    uint64_t seq;
    DeviceRange range;
    uint64_t digest;
  };
  std::vector<FirstRead> firstReads;
  // The first operation of the trace that wrote device bytes without
  // their digest (a launch or graph launch whose hash failed or was not
  // taken, a copy or set with digest 0, a collective that received into
  // them asynchronously); UINT64_MAX when none did.
  uint64_t firstUndigested = UINT64_MAX;
  // Operations that wrote device bytes without their digest (a launch not
  // hashed, --kernels or --launches leaving it out): their outputs are not
  // compared.
  uint64_t undigested = 0;
  // Operations with an output range (hashed or not).
  uint64_t withOutputs = 0;
  // The blocks holding a launch whose kernel takes PyTorch's Philox state as
  // a parameter of its own, with annotations (the recorder's RngState), in
  // order: where the run's Philox seeds can be read (philoxSeedsNear).
  std::vector<size_t> philoxBlocks;
  // From the first operation that can have any (Summariser).
  std::unique_ptr<DataDependencies> dependencies;
  // The first EventsDropped marker (the recorder lost events there): its seq
  // and how many events it stands for. Nothing from it on is summarised.
  uint64_t gapSeq = UINT64_MAX;
  uint64_t gapEvents = 0;
  // Its trace ends before the other run's does (cut short, or stopped at an
  // earlier step): the other's operations after its end are not compared.
  bool endsEarly = false;
  // The latest training step an operation's origin names (-1: none).
  int64_t lastStep = -1;
  // Snapshots that could not be read while classifying (damaged or
  // missing), each once: said as warnings, since they only cost detail.
  std::vector<std::string> unreadableBlobs;
  // Operations that ran while the framework timed candidates (an
  // autotuner's; trace::Origin::benchmarking): set aside, not summarised;
  // the launches among them by seq, which the recorder numbered with the
  // rest (a launch's number, OpInfo::launchIndex, counts them).
  uint64_t benchmarking = 0;
  std::vector<uint64_t> benchmarkingLaunches;
  // Of a run gpurr stopped after a training step: operations it ran after
  // that step, before the stop took effect (an evaluation, the next batch's
  // data), not summarised.
  uint64_t pastStop = 0;
  // Where the canonical order moved operations (canonicalOrder; UINT64_MAX
  // when it moved none), and the seqs of the launches from there on, in
  // trace order: a launch's number is its place in trace order.
  uint64_t reorderedFrom = UINT64_MAX;
  std::vector<uint64_t> reorderedLaunchSeqs;
  std::vector<CollectiveCall> collectives;  // every one, in trace order (ProcessDiff)
  // Each loaded module's image digest by ordinal (trace::ModuleLoad::digest;
  // those without one are left out): which code a launch ran.
  std::unordered_map<uint32_t, uint64_t> moduleDigests;

  Run();
  ~Run();
};

// The ordinal of a stream the summary saw.
inline uint32_t knownStreamOrdinal(const Run& run, uint64_t stream) {
  const auto it = run.streams.find(stream);
  return it == run.streams.end() ? 0 : it->second;
}

// The same range of one run: allocation, offset and size.
inline bool sameExtent(const DeviceRange& a, const DeviceRange& b) {
  return a.allocation == b.allocation && a.offset == b.offset && a.size == b.size;
}

struct Context {
  const DiffOptions& options;
  Run& a;
  Run& b;
  uint64_t chunkBytes;
};

// "1 operation", "4,500 operations" (wording.cpp).
std::string plural(uint64_t n, const char* word);

}  // namespace gpurr::diff
