// diffTraces: the comparison behind `gpurr diff`.
//
// 1. Summary pass (trace_format/scan.h) over each run: one compact record per
//    operation (Op) with hashes of its identity and its outputs, with
//    allocations named by their identity
//    (AllocationIds: size, kind and first use), so that an extra allocation
//    in one run does not shift every later pointer. Run B's ordinals are
//    then mapped onto run A's by identity. Both runs are summarised at once,
//    each on a thread of its own (summariseBoth), and the operations both
//    agree on from the start are given up as they go.
// 2. Alignment of the identities (align.h).
// 3. The first divergence: the earliest stretch of different operations, or
//    matched pair with different outputs. Both events are then decoded in
//    full and classified (DESIGN.md §2).
// 4. Blast radius: taint propagated through allocations from the first
//    divergence over the rest of the alignment, each run's ranges read as
//    it goes (TailRanges).
#include "diff/diff.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
// Inline: the summary hashes a few dozen bytes several times per operation,
// where a call into the library costs as much as the hashing.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <exception>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "common/demangle.h"
#include "diff/intervals.h"
#include "trace_format/hash_primitives.h"
#include "trace_format/scan.h"

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
  }
  return "launch";
}

namespace {

// The meaning of a parameter difference whose differing bytes all lie in
// 8-byte words that hold, in both runs, an address no recorded allocation
// contains, in the range of host addresses (4 GiB to 128 TiB) or in the host
// memory the trace says its process had mapped readable: uninitialised
// parts of structs passed by value (PyTorch's TensorInfo beyond its
// dimensions, padding), references to host objects. Address-space
// randomisation changes them between runs; a kernel cannot read through
// them, so they do not count as a difference.
constexpr const char* kHostAddresses = "host addresses";

bool isHostParameter(const ParamDifference& p) { return p.meaning == kHostAddresses; }

// A pointer parameter that points elsewhere in the other run, or is null there.
constexpr const char* kPointer = "pointer";
bool isPointerParameter(const ParamDifference& p) { return p.meaning == kPointer; }
// A word inside a struct passed by value that points into an allocation in
// one run and holds another value, no null pointer, in the other: most often
// an unused part of the struct that holds a device address left on the host
// stack (seen in PyTorch's OffsetCalculator), so it decides nothing by
// itself: it counts as a differing byte, not as a pointer that moved.
constexpr const char* kStaleAddress = "device address in one run only";
// A parameter whose differing bytes hold an RNG state ("philox seed/offset"),
// and host addresses if any (compareParams).
constexpr const char* kRngSuffix = " seed/offset";
bool isRngParameter(const ParamDifference& p) { return p.meaning.ends_with(kRngSuffix); }

constexpr const char* kIntrinsicHint =
    "the kernel itself gives different results from identical state: floating-point atomics, split-K or other "
    "unordered reductions, races";

using hash::fmix;


// ------------------------------------------------------------ allocations

struct AllocInfo {
  uint32_t ordinal;
  uint64_t size;
  AllocationKind kind;
};

// What an allocation is, by what the program did with it rather than by when
// the allocator handed it out: its size and kind, the operation that first
// used it (that operation's shape: kernel, launch configuration and pointer
// positions, or the copy's or set's kind and size) and the operand it was
// there, its host thread, and how many allocations before it were all of
// that (counted per thread, so that threads interleaving their calls
// otherwise in the other run change no identity). Each run
// computes its own as it goes, and equal identities are the same allocation
// in both runs: an extra allocation in one run (the caching allocator's
// one more segment, a workspace of a common size) takes an identity of its
// own, or none while unused, and leaves the others' alone.
class AllocationIds {
 public:
  AllocationIds() : ids_(1, 0), allocations_(1) {}

  void allocate(uint32_t ordinal, uint64_t size, AllocationKind kind) {
    grow(ordinal);
    allocations_[ordinal] = {size, kind};
    ids_[ordinal] = 0;
  }

  // The identity of `ordinal` (0: no allocation), given at its first use, by
  // operation `user` of host thread `thread` at operand `operand`.
  [[gnu::always_inline]] uint64_t use(uint32_t ordinal, uint64_t user, uint64_t operand, uint32_t thread) {
    if (ordinal < ids_.size() && ids_[ordinal] != 0) [[likely]] return ids_[ordinal];
    return first(ordinal, user, operand, thread);
  }

  // The identity of `ordinal`, or 0 when nothing used it.
  uint64_t operator()(uint32_t ordinal) const { return ordinal < ids_.size() ? ids_[ordinal] : 0; }
  size_t size() const { return ids_.size(); }

 private:
  struct Allocation {
    uint64_t size = 0;
    AllocationKind kind = AllocationKind::kDevice;
  };

  void grow(uint32_t ordinal) {
    if (ordinal < ids_.size()) return;
    ids_.resize(ordinal + 1, 0);
    allocations_.resize(ordinal + 1);
  }

  [[gnu::noinline]] uint64_t first(uint32_t ordinal, uint64_t user, uint64_t operand, uint32_t thread) {
    if (ordinal == 0) return 0;
    grow(ordinal);
    const Allocation& a = allocations_[ordinal];
    const std::array<uint64_t, 5> what{a.size, static_cast<uint64_t>(a.kind), user, operand, thread};
    const uint64_t cls = XXH3_64bits(what.data(), sizeof what);
    ids_[ordinal] = fmix(cls + 0x9e3779b97f4a7c15ull * ++seen_[cls]) | 1;
    return ids_[ordinal];
  }

  std::vector<uint64_t> ids_;  // by ordinal; 0 until first used (ordinal 0: none, never used)
  std::vector<Allocation> allocations_;
  std::unordered_map<uint64_t, uint32_t> seen_;  // allocations per class so far
};

// Run B's allocation ordinals in run A's numbering: the ordinal of run A's
// allocation with the same identity; unmatched ones (kUnmatched set) keep
// their own.
class OrdinalMap {
 public:
  static constexpr uint32_t kUnmatched = 0x80000000u;

  // Identity mapping (run A).
  OrdinalMap() = default;
  OrdinalMap(const AllocationIds& a, const AllocationIds& b) : mapped_(true) {
    std::unordered_map<uint64_t, uint32_t> ordinalOf;
    for (uint32_t o = 1; o < a.size(); ++o)
      if (a(o) != 0) ordinalOf.emplace(a(o), o);
    map_.resize(b.size(), 0);
    for (uint32_t o = 1; o < b.size(); ++o) {
      if (auto it = ordinalOf.find(b(o)); b(o) != 0 && it != ordinalOf.end()) map_[o] = it->second;
    }
  }

  uint32_t operator()(uint32_t ordinal) const {
    if (!mapped_ || ordinal == 0) return ordinal;
    if (ordinal < map_.size() && map_[ordinal] != 0) return map_[ordinal];
    return kUnmatched | ordinal;
  }

 private:
  bool mapped_ = false;
  std::vector<uint32_t> map_;
};

// ------------------------------------------------------------ summary pass

// What the comparison keeps of an operation: 32 bytes, so that two runs of
// ten million launches each fit in well under a gigabyte. The rest (its
// parameters, its inputs) is read again from the trace for the few
// operations a report shows.
struct Op {
  uint64_t key;      // identity, for the alignment
  uint64_t outputs;  // output ranges and digests
  uint64_t word;     // seq << 3 | hashed << 2 | kind
  // Kernel, launch configuration and parameter size (matchSameShape): the
  // identity without where pointers point, nor which words are pointers (an
  // unwritten word of a struct passed by value may hold a stale device
  // address in one run only).
  uint32_t shape;
  // Host thread and stream ordinal, folded into 16 bits: they only order
  // the operations of a run of several threads (canonicalOrder), where two
  // folded together cost only a reordering not undone.
  uint16_t thread, stream;

  uint64_t seq() const { return word >> 3; }
  OpKind kind() const { return static_cast<OpKind>(word & 3); }
  bool hashed() const { return (word >> 2 & 1) != 0; }
};
static_assert(sizeof(Op) == 32);

uint16_t fold16(uint32_t v) { return static_cast<uint16_t>(v ^ v >> 16); }

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

  // The identities of the operations held, for the alignment; `chunks`
  // holds the table it reads and lives as long as it.
  Keys keys(std::vector<const uint64_t*>& chunks) const {
    chunks.assign(chunks_.size(), nullptr);
    for (size_t c = dropped_; c < chunks_.size(); ++c) chunks[c] = &chunks_[c][0].key;
    return Keys(chunks.data(), kShift, sizeof(Op) / sizeof(uint64_t), firstHeld(), size_ - firstHeld());
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
// inputs at first use only); a copy from the host reads no device bytes,
// one to the host writes none.
template <typename Read, typename Write>
void forEachAccess(const ScanEvent& e, Read&& read, Write&& write) {
  auto each = [](std::span<const ScanRange> rs, auto& f) {
    for (const ScanRange& r : rs) {
      if (r.range.allocation != 0) f(r);
    }
  };
  const bool hostSource = e.kind == 1 && (e.memcpyKind == MemcpyKind::kHostToDevice ||
                                          e.memcpyKind == MemcpyKind::kHostToHost);
  if (!hostSource) each(e.inputs, read);
  if (e.kind == 0 || e.kind == 7) each(e.outputs, read);
  if (e.kind == 0) each(e.reads, read);
  if (!(e.kind == 1 && e.memcpyKind == MemcpyKind::kDeviceToHost)) each(e.outputs, write);
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
    lastOnStream_ = {};
    finished_ = {};
    events_ = {};
  }

  // Operation `index` of `ops`, summarised from `e`.
  void operation(const ScanEvent& e, const OpStore& ops, uint64_t index) {
    if (index > static_cast<uint64_t>(std::numeric_limits<int>::max())) overflow_ = true;  // (labels are ints)
    if (overflow_) {
      found = {};  // ordered by threads and streams alone
      return;
    }
    const Op& op = ops[index];
    const bool syncCopy = e.kind == 1 && !e.async;
    if (syncCopy && e.memcpyKind == MemcpyKind::kHostToDevice) finished_[op.stream] = lastOnStream_[op.stream];
    lastOnStream_[op.stream] = e.seq + 1;
    if (syncCopy && e.memcpyKind == MemcpyKind::kDeviceToHost) finished_[op.stream] = lastOnStream_[op.stream];
    const int self = static_cast<int>(index);
    from_.clear();
    // Only an operation the host saw finish can have handed its data over.
    auto other = [&](int label) {
      const Op& x = ops[static_cast<uint64_t>(label)];
      if (x.thread != op.thread && x.stream != op.stream && x.seq() < finished_[x.stream]) {
        from_.push_back(static_cast<uint32_t>(label));
      }
    };
    auto dependOn = [&](const IntervalLabels& labels, const ScanRange& r) {
      labels.forEach(r.range.allocation, r.range.offset, r.range.offset + r.range.size, other);
    };
    auto label = [](IntervalLabels& labels, const ScanRange& r, int value) {
      labels.assign(r.range.allocation, r.range.offset, r.range.offset + r.range.size, value);
    };
    // What it depends on, then what it leaves (a launch reads what it writes).
    forEachAccess(e, [&](const ScanRange& r) { dependOn(writer_, r); }, [&](const ScanRange& r) {
      dependOn(writer_, r);
      for (const auto& [thread, read] : readers_) {
        if (thread != op.thread) dependOn(read, r);
      }
    });
    IntervalLabels& mine = readers_[op.thread];
    forEachAccess(e, [&](const ScanRange& r) { label(mine, r, self); }, [&](const ScanRange& r) {
      label(writer_, r, self);
      for (auto& [thread, read] : readers_) label(read, r, -1);
    });
    std::sort(from_.begin(), from_.end());
    from_.erase(std::unique(from_.begin(), from_.end()), from_.end());
    for (const uint32_t f : from_) found.emplace_back(f, static_cast<uint32_t>(index));
  }

 private:
  // The operation that last wrote the bytes; of each host thread, the one
  // that last read them since (those before it on its thread come before it).
  IntervalLabels writer_;
  std::unordered_map<uint16_t, IntervalLabels> readers_;
  // By stream (folded as Op's): the last operation enqueued, and the last
  // one the host has seen finish, as seq + 1 (0: none; an operation may be
  // event 0).
  std::vector<uint64_t> lastOnStream_ = std::vector<uint64_t>(uint32_t{1} << 16, 0);
  std::vector<uint64_t> finished_ = std::vector<uint64_t>(uint32_t{1} << 16, 0);
  std::unordered_map<uint64_t, std::pair<uint16_t, uint64_t>> events_;  // event -> stream, last operation before it
  std::vector<uint32_t> from_;
  bool overflow_ = false;
};

// A synchronisation: it orders the operations around it (canonicalOrder).
struct Sync {
  uint16_t thread, stream;  // folded as Op's
  uint64_t event;           // the CUDA event recorded, waited for or queried; 0 if none
  uint64_t seq;             // event number in the trace
};

struct Run {
  const TraceReader* reader = nullptr;
  OpStore ops;
  uint64_t droppedLaunches = 0;  // launches among the operations ops dropped
  std::vector<AllocInfo> allocs;
  AllocationIds ids;     // identities, for the summary's hashes
  OrdinalMap ordinals;   // in run A's numbering, once both runs are summarised
  std::unordered_map<uint64_t, uint32_t> streams;
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
  // The first operation of a first-use trace that wrote device bytes without
  // their digest (a launch or graph launch whose hash failed or was not
  // taken, a copy or set with digest 0); UINT64_MAX when none did.
  uint64_t firstUndigested = UINT64_MAX;
  // The blocks holding a launch whose kernel takes PyTorch's Philox state as
  // a parameter of its own, with annotations (the recorder's RngState), in
  // order: where the run's Philox seeds can be read (philoxSeedsNear).
  std::vector<size_t> philoxBlocks;
  // From the first operation that can have any (Summariser).
  std::optional<DataDependencies> dependencies;
};

// The ordinal of a stream the summary saw.
uint32_t knownStreamOrdinal(const Run& run, uint64_t stream) {
  const auto it = run.streams.find(stream);
  return it == run.streams.end() ? 0 : it->second;
}

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
    case 0: return !hashed;
    case 1: case 2: return !hashed && e.outputs[0].range.allocation != 0;
    case 7: return e.outputs.empty();
    default: return false;
  }
}

// The same range of one run: allocation, offset and size.
bool sameExtent(const DeviceRange& a, const DeviceRange& b) {
  return a.allocation == b.allocation && a.offset == b.offset && a.size == b.size;
}

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

// The allocations of ranges an operation reads take their identities, as
// hashRanges's do.
void useRanges(std::span<const ScanRange> ranges, AllocationIds& ids, uint64_t user, uint32_t thread) {
  for (const ScanRange& r : ranges) {
    if (r.range.allocation != 0) ids.use(r.range.allocation, user, 0, thread);
  }
}

// Builds a run's summary one event at a time, in trace order.
class Summariser {
 public:
  explicit Summariser(Run& run) : run_(run), firstUse_(!run.reader->header().options.hashInputs) {}

  void add(const ScanEvent& e) {
    Run& run = run_;
    if (e.captured) return;  // not run then: its graph's launch is the operation
    if (!firstThread_) firstThread_ = e.thread;
    if (!run.threads && e.thread != *firstThread_) {
      run.threads = true;
      run.opsOfOneThread = run.ops.size();
    }
    switch (e.kind) {
      case 0: case 1: case 2: case 7:
        break;  // an operation
      case 3:  // allocation
        run.allocs.push_back({e.ordinal, e.size, e.allocationKind});
        run.ids.allocate(e.ordinal, e.size, e.allocationKind);
        return;
      case 6: {  // synchronisation: orders the operations around it (canonicalOrder)
        const uint16_t stream = fold16(streamOrdinal(run, e.stream));
        run.syncs.push_back({fold16(e.thread), stream, e.syncEvent, e.seq});
        if (run.dependencies) run.dependencies->sync(e, stream);
        return;
      }
      default:
        return;
    }
    OpKind kind = OpKind::kLaunch;
    uint64_t shape = 0;
    // A launch's shape without its pointers' positions (Op::shape).
    uint64_t pairing = 0;
    bool hashed = true;
    bool pointerTargets = false;
    key_.clear();
    out_.clear();
    switch (e.kind) {
      case 0: {  // launch
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
        // The identity adds where each pointer points, to the shape.
        key_.clear();
        key_.add(shape);
        for (size_t i = 0; i < e.pointers.size(); ++i) {
          const PointerParam& p = e.pointers[i];
          key_.add(run.ids.use(p.allocation, shape, i, e.thread)).add(p.offset);
        }
        pointerTargets = true;
        hashed = e.hashed;
        if (f.philox < 0) f.philox = e.function.find("PhiloxCudaState") != std::string_view::npos;
        if (f.philox > 0 && e.hasAnnotations && (run.philoxBlocks.empty() || run.philoxBlocks.back() != e.blockIndex))
          run.philoxBlocks.push_back(e.blockIndex);
        break;
      }
      case 1:  // memcpy
        kind = OpKind::kMemcpy;
        hashed = recordedDigest(e);
        key_.add(uint64_t{1}).add(static_cast<uint64_t>(e.memcpyKind)).add(e.size);
        shape = key_.hash();
        for (uint64_t i : {0, 1}) {
          const ScanRange& r = i == 0 ? e.outputs[0] : e.inputs[0];
          if (r.range.allocation != 0) {
            key_.add(run.ids.use(r.range.allocation, shape, i, e.thread)).add(r.range.offset);
          }
        }
        break;
      case 2:  // memset
        kind = OpKind::kMemset;
        hashed = recordedDigest(e);
        key_.add(uint64_t{2}).add(e.outputs[0].range.size).add(e.elementSize);
        shape = key_.hash();
        if (e.outputs[0].range.allocation != 0) {
          key_.add(run.ids.use(e.outputs[0].range.allocation, shape, 0, e.thread)).add(e.outputs[0].range.offset);
        }
        break;
      case 7:  // graph launch
        kind = OpKind::kGraph;
        key_.add(uint64_t{7}).add(e.nodeCount);
        shape = key_.hash();
        break;
    }
    // The inputs' allocations take their identities at their first use;
    // their digests are compared only where a report shows them.
    if (kind == OpKind::kMemcpy) {
      // Host-to-device copies read host memory: nothing of the device.
      const bool deviceSource = e.memcpyKind == MemcpyKind::kDeviceToDevice ||
                                e.memcpyKind == MemcpyKind::kPeer ||
                                e.memcpyKind == MemcpyKind::kDeviceToHost;
      if (deviceSource) useRanges(e.inputs, run.ids, shape, e.thread);
    } else {
      // A graph launch's ranges (its nodes' allocations, or every
      // allocation), in address order: as one operand, told apart by the
      // order of their first use.
      useRanges(e.inputs, run.ids, shape, e.thread);
    }
    hashRanges(out_, e.outputs, run.ids, shape, 0, e.thread);
    if (firstUse_ && kind == OpKind::kLaunch && !e.reads.empty() && !e.inputs.empty()) noteFirstReads(e);
    if (firstUse_ && run.firstUndigested == UINT64_MAX && writesUndigested(e, hashed)) run.firstUndigested = e.seq;
    // Filled in where it is kept: a copy from the stack would read back
    // narrow stores with wide loads.
    Op& op = run.ops.emplace();
    op.key = key_.hash();
    op.outputs = out_.hash();
    op.word = e.seq << 3 | uint64_t{hashed} << 2 | static_cast<uint64_t>(kind);
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
    DataDependencies& d = run.dependencies.emplace();
    uint64_t o = run.ops.firstHeld();
    if (o < index) {
      scanEvents(*run.reader, [&](const ScanEvent& p) {
        if (p.seq >= e.seq) return false;
        if (p.captured) return true;
        if (p.kind == 6) d.sync(p, fold16(knownStreamOrdinal(run, p.stream)));
        if (!isOperation(p)) return true;
        while (o < index && run.ops[o].seq() < p.seq) ++o;
        if (run.ops[o].seq() == p.seq) d.operation(p, run.ops, o);
        return true;
      }, run.ops[o].seq());
    }
    d.operation(e, run.ops, index);
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

  Run& run_;
  const bool firstUse_;
  Words key_, out_;
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

// Where two runs agree at one position: the same identity, and the same
// outputs where both hashed them. A prefix of such pairs holds no divergence
// and starts the alignment (align's common prefix).
bool agree(const Op& a, const Op& b) {
  return a.key == b.key && !(a.hashed() && b.hashed() && a.outputs != b.outputs);
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
  if (threads <= 1) {
    EventScanner sa(*a.reader, 0, 0), sb(*b.reader, 0, 0);
    Summariser ca(a), cb(b);
    const std::function<bool(const ScanEvent&)> va = [&](const ScanEvent& e) { ca.add(e); return true; };
    const std::function<bool(const ScanEvent&)> vb = [&](const ScanEvent& e) { cb.add(e); return true; };
    uint64_t agreed = 0;
    bool moreA = true, moreB = true;
    while (moreA || moreB) {
      if (moreA) moreA = sa.next(va);
      if (moreB) moreB = sb.next(vb);
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
    uint64_t agreed = 0;
    bool dropping = true;
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
  std::vector<std::pair<uint32_t, uint32_t>> deps;
  if (run.dependencies) deps = std::move(run.dependencies->found);
  run.dependencies.reset();
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

// ------------------------------------------------------------ full events

Event eventAt(const TraceReader& reader, uint64_t seq) {
  Event out;
  bool found = false;
  reader.forEach([&](const Event& e) {
    if (e.seq == seq) {
      out = e;
      found = true;
    }
    return false;
  }, seq);
  if (!found) throw TraceError(fmt::format("{}: event #{} vanished between two reads",
                                           reader.path().string(), seq));
  return out;
}

// Inputs, outputs and annotations of an operation, whatever its kind.
struct OpView {
  std::vector<RangeDigest> inputs, outputs;
  size_t reads = 0;  // ranges a launch only reads, not in `outputs`
  const KernelLaunch* launch = nullptr;
  const Memcpy* memcpy = nullptr;
  const Memset* memset = nullptr;
};

OpView view(const Event& e) {
  OpView v;
  if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) {
    v.launch = k;
    v.inputs = k->inputs;
    v.outputs = k->outputs;
    v.reads = k->reads.size();
  } else if (const auto* m = std::get_if<Memcpy>(&e.payload)) {
    v.memcpy = m;
    v.outputs = {{m->dst, m->digest, {}, {}}};
    if (m->kind == MemcpyKind::kDeviceToDevice || m->kind == MemcpyKind::kPeer ||
        m->kind == MemcpyKind::kDeviceToHost) {
      v.inputs = {{m->src, m->digest, {}, {}}};
    }
  } else if (const auto* s = std::get_if<Memset>(&e.payload)) {
    v.memset = s;
    v.outputs = {{s->dst, s->digest, {}, {}}};
  } else if (const auto* g = std::get_if<GraphLaunch>(&e.payload)) {
    v.inputs = g->inputs;
    v.outputs = g->outputs;
  }
  return v;
}

std::string opName(const Event& e) {
  if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) return k->function;
  if (const auto* m = std::get_if<Memcpy>(&e.payload)) {
    switch (m->kind) {
      case MemcpyKind::kHostToDevice: return "memcpy HtoD";
      case MemcpyKind::kDeviceToHost: return "memcpy DtoH";
      case MemcpyKind::kDeviceToDevice: return "memcpy DtoD";
      case MemcpyKind::kHostToHost: return "memcpy HtoH";
      case MemcpyKind::kPeer: return "memcpy peer";
      case MemcpyKind::kUnknown: return "memcpy";
    }
  }
  if (std::holds_alternative<Memset>(e.payload)) return "memset";
  if (const auto* g = std::get_if<GraphLaunch>(&e.payload)) {
    return describe(*g);
  }
  return trace::kindName(e.payload);
}

uint64_t streamOf(const Event& e) {
  if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) return k->stream;
  if (const auto* m = std::get_if<Memcpy>(&e.payload)) return m->stream;
  if (const auto* s = std::get_if<Memset>(&e.payload)) return s->stream;
  if (const auto* g = std::get_if<GraphLaunch>(&e.payload)) return g->stream;
  return 0;
}

OpInfo info(const Run& run, uint64_t index, const Event& e) {
  const Op& op = run.ops[index];
  OpInfo out;
  out.seq = op.seq();
  out.index = index;
  out.launchIndex = run.droppedLaunches + run.ops.launchesBefore(index);
  out.kind = op.kind();
  out.name = opName(e);
  out.stream = knownStreamOrdinal(run, streamOf(e));
  out.thread = e.thread;
  out.origin = e.origin;
  if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) {
    out.grid = k->grid;
    out.block = k->block;
    out.annotations = k->annotations;
  }
  return out;
}

OpInfo info(const Run& run, uint64_t index) {
  return info(run, index, eventAt(*run.reader, run.ops[index].seq()));
}

// ------------------------------------------------------------ headers

std::optional<std::string> lookup(const std::vector<KeyValue>& kvs, const std::string& key) {
  for (const KeyValue& kv : kvs) {
    if (kv.key == key) return kv.value;
  }
  return std::nullopt;
}

void compareKeyValues(const std::vector<KeyValue>& a, const std::vector<KeyValue>& b,
                      const std::string& prefix, std::vector<EnvDifference>& out) {
  std::vector<std::string> keys;
  for (const auto* kvs : {&a, &b}) {
    for (const KeyValue& kv : *kvs) {
      if (std::find(keys.begin(), keys.end(), kv.key) == keys.end()) keys.push_back(kv.key);
    }
  }
  std::sort(keys.begin(), keys.end());
  for (const std::string& k : keys) {
    auto va = lookup(a, k), vb = lookup(b, k);
    if (va != vb) out.push_back({prefix + k, va, vb, true});
  }
}

std::string gpuText(const GpuInfo& g) {
  return fmt::format("{} (sm_{}{}, {} SMs)", g.name, g.ccMajor, g.ccMinor, g.smCount);
}

std::string versionText(uint32_t v, bool cuda) {
  if (v == 0) return cuda ? "unknown" : "not loaded";
  if (cuda) return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

// ------------------------------------------------------------ comparisons

std::string hexBytes(std::span<const uint8_t> bytes) {
  std::string out;
  for (uint8_t b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

std::string rangeText(const DeviceRange& r) {
  if (r.allocation == 0) return fmt::format("{:#x}", r.address);
  return fmt::format("alloc#{}+{:#x}", r.allocation, r.offset);
}

// Merges [begin, end) into sorted `spans`.
void addSpan(std::vector<std::pair<uint64_t, uint64_t>>& spans, uint64_t begin, uint64_t end) {
  if (!spans.empty() && spans.back().second >= begin) {
    spans.back().second = std::max(spans.back().second, end);
  } else {
    spans.emplace_back(begin, end);
  }
}

struct Context {
  const DiffOptions& options;
  Run& a;
  Run& b;
  uint64_t chunkBytes;
};

// Where two corresponding ranges differ, from chunk digests or snapshots.
RangeDifference compareRange(const Context& ctx, size_t index, const RangeDigest& ra,
                             const RangeDigest& rb) {
  RangeDifference d;
  d.index = index;
  d.a = ra.range;
  d.b = rb.range;
  d.digestA = ra.digest;
  d.digestB = rb.digest;
  if (ra.range.bound != rb.range.bound) {
    d.boundsDiffer = true;  // different bytes by construction: nothing to locate
    return d;
  }
  const uint64_t size = std::min(ra.range.size, rb.range.size);
  if (!ra.chunkDigests.empty() && ra.chunkDigests.size() == rb.chunkDigests.size() &&
      ctx.chunkBytes > 0) {
    d.chunkBytes = ctx.chunkBytes;
    d.chunks = ra.chunkDigests.size();
    for (size_t c = 0; c < ra.chunkDigests.size(); ++c) {
      if (ra.chunkDigests[c] == rb.chunkDigests[c]) continue;
      ++d.differingChunks;
      addSpan(d.spans, c * ctx.chunkBytes, std::min<uint64_t>((c + 1) * ctx.chunkBytes, size));
    }
  }
  if (ra.snapshot && rb.snapshot && ra.snapshot->size == rb.snapshot->size &&
      ra.snapshot->size <= (uint64_t{1} << 30)) {
    try {
      const auto ba = ctx.a.reader->readBlob(*ra.snapshot);
      const auto bb = ctx.b.reader->readBlob(*rb.snapshot);
      RangeDifference::Values v;
      std::vector<std::pair<uint64_t, uint64_t>> spans;
      for (size_t i = 0; i < ba.size(); ++i) {
        if (ba[i] != bb[i]) {
          ++v.differingBytes;
          addSpan(spans, i, i + 1);
        }
      }
      v.floats = ba.size() / 4;
      for (size_t i = 0; i + 4 <= ba.size(); i += 4) {
        if (std::memcmp(&ba[i], &bb[i], 4) == 0) continue;
        ++v.differingFloats;
        float fa, fb;
        std::memcpy(&fa, &ba[i], 4);
        std::memcpy(&fb, &bb[i], 4);
        const double diff = std::fabs(static_cast<double>(fa) - static_cast<double>(fb));
        if (std::isfinite(diff)) v.maxAbsDiff = std::max(v.maxAbsDiff, diff);
      }
      d.values = v;
      d.spans = std::move(spans);
    } catch (const TraceError&) {
      // A missing snapshot only costs detail; the digests still decide.
    }
  }
  if (d.spans.empty()) d.spans.emplace_back(0, size);
  return d;
}

uint64_t normalisedOrdinal(const Run& run, uint32_t ordinal) { return run.ordinals(ordinal); }

bool sameRange(const Context& ctx, const DeviceRange& a, const DeviceRange& b) {
  if (a.size != b.size) return false;
  if (a.allocation == 0 || b.allocation == 0) return a.allocation == b.allocation;
  return normalisedOrdinal(ctx.a, a.allocation) == normalisedOrdinal(ctx.b, b.allocation) &&
         a.offset == b.offset;
}

// Differing ranges of two lists; true when all are identical. Ranges pair by
// allocation identity and offset wherever they sit in the lists (FORMAT.md
// lists them in address order, which differs between runs when the
// allocator hands the same buffers out at other addresses). Those left
// over pair by their place among the left-over ones when the lists are of
// one length (a range that moved to another allocation is compared with
// its counterpart); in lists of different lengths (a pointer seen in one
// run only) each is one run's alone (RangeDifference::a or ::b empty).
bool compareRanges(const Context& ctx, const std::vector<RangeDigest>& a,
                   const std::vector<RangeDigest>& b, std::vector<RangeDifference>& out) {
  std::vector<size_t> pairOfA(a.size(), b.size());
  std::vector<bool> pairedB(b.size(), false);
  for (size_t i = 0; i < a.size(); ++i) {
    // Most lists are in the same order in both runs: look at the same place
    // first.
    for (size_t k = 0; k < b.size(); ++k) {
      const size_t j = (i + k) % b.size();
      if (pairedB[j] || !sameRange(ctx, a[i].range, b[j].range)) continue;
      pairOfA[i] = j;
      pairedB[j] = true;
      break;
    }
  }
  if (a.size() == b.size()) {
    size_t j = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      if (pairOfA[i] != b.size()) continue;
      while (pairedB[j]) ++j;
      pairOfA[i] = j;
      pairedB[j] = true;
    }
  }
  bool same = a.size() == b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    const size_t j = pairOfA[i];
    if (j == b.size()) {
      RangeDifference d;
      d.index = i;
      d.a = a[i].range, d.digestA = a[i].digest;
      out.push_back(d);
      continue;
    }
    if (a[i].digest == b[j].digest && sameRange(ctx, a[i].range, b[j].range)) continue;
    same = false;
    out.push_back(compareRange(ctx, i, a[i], b[j]));
  }
  for (size_t j = 0; j < b.size(); ++j) {
    if (pairedB[j]) continue;
    RangeDifference d;
    d.index = j;
    d.b = b[j].range, d.digestB = b[j].digest;
    out.push_back(d);
  }
  return same;
}

std::vector<const RngState*> rngStates(const KernelLaunch& k) {
  std::vector<const RngState*> out;
  for (const Annotation& a : k.annotations) {
    if (const auto* r = std::get_if<RngState>(&a)) out.push_back(r);
  }
  return out;
}

// The parameter bytes an RngState annotation covers: its parameter in the
// layout when that is a PhiloxCudaState (24 or 32 bytes), else the 16 bytes
// of its (seed, offset) pair, inside a struct or without a layout; all of
// them for a cuRAND call.
std::pair<uint32_t, uint32_t> rngWindow(const KernelLaunch& k, const RngState& r) {
  // cuRAND does not publish where its kernels take the generator's state:
  // any parameter of a launch a curandGenerate* call made may hold it.
  if (r.source == "curand") return {0, static_cast<uint32_t>(k.params.size())};
  for (const ParamInfo& p : k.paramLayout) {
    if (r.paramOffset >= p.offset && r.paramOffset < p.offset + p.size && p.size <= 32) {
      return {p.offset, p.offset + p.size};
    }
  }
  return {r.paramOffset, r.paramOffset + 16};
}

// ParamDifference::words: the 8-byte words of two parameters that differ
// outside pointers (by byte: pointer[at + j]), as little-endian values, the
// first few.
std::string differingWords(std::span<const uint8_t> a, std::span<const uint8_t> b, const std::vector<bool>& pointer,
                           size_t at) {
  constexpr size_t kShown = 6;
  std::string out;
  size_t count = 0;
  for (size_t w = 0; w < a.size(); w += 8) {
    const size_t n = std::min<size_t>(8, a.size() - w);
    bool differs = false;
    for (size_t j = w; j < w + n; ++j) differs |= !pointer[at + j] && a[j] != b[j];
    if (!differs || ++count > kShown) continue;
    uint64_t x = 0, y = 0;
    std::memcpy(&x, a.data() + w, n);
    std::memcpy(&y, b.data() + w, n);
    out += fmt::format("{}+{:#x} A {:#0{}x} B {:#0{}x}", out.empty() ? "" : ", ", w, x, 2 + 2 * n, y, 2 + 2 * n);
  }
  if (count > kShown) out += fmt::format(" and {} more word{}", count - kShown, count - kShown == 1 ? "" : "s");
  return out;
}

// An RNG state of the launch whose bytes (rngWindow) overlap [begin, end);
// nullptr when none does.
const RngState* rngStateIn(const KernelLaunch& k, uint64_t begin, uint64_t end) {
  for (const RngState* r : rngStates(k)) {
    const auto [from, to] = rngWindow(k, *r);
    if (begin < to && end > from) return r;
  }
  return nullptr;
}

// The index in the layout of the parameter holding byte `offset`; -1 when
// there is none.
int32_t parameterAt(const KernelLaunch& k, uint64_t offset) {
  for (size_t i = 0; i < k.paramLayout.size(); ++i) {
    if (offset >= k.paramLayout[i].offset && offset < uint64_t{k.paramLayout[i].offset} + k.paramLayout[i].size)
      return static_cast<int32_t>(i);
  }
  return -1;
}

// The word at `at` of a launch's parameters, where the other run's launch has
// a pointer and this one none.
std::optional<uint64_t> wordAt(const KernelLaunch& k, uint32_t at) {
  if (uint64_t{at} + 8 > k.params.size()) return std::nullopt;
  uint64_t u;
  std::memcpy(&u, k.params.data() + at, 8);
  return u;
}

std::string notAPointer(const KernelLaunch& k, uint32_t at) {
  const std::optional<uint64_t> u = wordAt(k, at);
  return u ? fmt::format("{:#018x} (not a pointer)", *u) : "not a pointer";
}

// The meaning of a pointer that `with` has at `at` and `without` has not:
// kStaleAddress inside a parameter passed by value that is no pointer itself
// (a struct), where the other run's word is no null pointer either; else a
// pointer that points elsewhere.
const char* pointerMeaning(const KernelLaunch& with, const KernelLaunch& without, uint32_t at) {
  const int32_t p = parameterAt(with, at);
  const std::optional<uint64_t> other = wordAt(without, at);
  const bool inStruct = p >= 0 && with.paramLayout[p].size > 8;
  return inStruct && other && *other != 0 ? kStaleAddress : kPointer;
}

// Parameter differences after pointer normalisation, grouped by parameter.
std::vector<ParamDifference> compareParams(const Context& ctx, const KernelLaunch& a,
                                           const KernelLaunch& b) {
  std::vector<ParamDifference> out;
  // Pointers: compared as (allocation, offset).
  std::vector<bool> isPointer(std::max(a.params.size(), b.params.size()), false);
  for (const PointerParam& pa : a.pointers) {
    const PointerParam* pb = nullptr;
    for (const PointerParam& p : b.pointers) {
      if (p.byteOffset == pa.byteOffset) pb = &p;
    }
    for (uint32_t i = pa.byteOffset; i < pa.byteOffset + 8 && i < isPointer.size(); ++i) isPointer[i] = true;
    const bool same = pb && ctx.a.ordinals(pa.allocation) == ctx.b.ordinals(pb->allocation) &&
                      pa.offset == pb->offset;
    if (same) continue;
    ParamDifference d;
    d.offset = pa.byteOffset;
    d.size = 8;
    d.param = parameterAt(a, pa.byteOffset);
    d.a = fmt::format("alloc#{}+{:#x}", pa.allocation, pa.offset);
    d.b = pb ? fmt::format("alloc#{}+{:#x}", pb->allocation, pb->offset) : notAPointer(b, pa.byteOffset);
    d.meaning = pb ? kPointer : pointerMeaning(a, b, pa.byteOffset);
    out.push_back(d);
  }
  for (const PointerParam& pb : b.pointers) {
    bool inA = false;
    for (const PointerParam& p : a.pointers) inA = inA || p.byteOffset == pb.byteOffset;
    if (inA) continue;
    for (uint32_t i = pb.byteOffset; i < pb.byteOffset + 8 && i < isPointer.size(); ++i) isPointer[i] = true;
    out.push_back({pb.byteOffset, 8, parameterAt(a, pb.byteOffset), notAPointer(a, pb.byteOffset),
                   fmt::format("alloc#{}+{:#x}", pb.allocation, pb.offset), pointerMeaning(b, a, pb.byteOffset),
                   ""});
  }
  // Other bytes: each differing parameter of the layout, or each run of
  // differing bytes when there is no layout.
  const size_t n = std::max(a.params.size(), b.params.size());
  // The type of parameter p as the kernel's demangled name says ("" when
  // its list does not match the layout), read at the first need.
  std::optional<std::vector<std::string>> types;
  auto parameterType = [&](int32_t p) -> std::string_view {
    if (!types) {
      types = demangledParameters(demangled(a.function));
      if (types->size() != a.paramLayout.size()) types->clear();
    }
    return static_cast<size_t>(p) < types->size() ? std::string_view((*types)[p]) : std::string_view();
  };
  auto byteAt = [](const std::vector<uint8_t>& v, size_t i) -> int { return i < v.size() ? v[i] : -1; };
  // The source of an RNG state whose bytes hold byte `at` (rngWindow), on
  // either side; nullptr when none does.
  auto rngSourceAt = [&](size_t at) -> const std::string* {
    for (const KernelLaunch* k : {&a, &b}) {
      if (const RngState* r = rngStateIn(*k, at, at + 1)) return &r->source;
    }
    return nullptr;
  };
  // The aligned word at `at` of `run`'s launch holds a host address
  // (kHostAddresses): a value from 4 GiB up to the top of user space, or one
  // in the host memory the process had mapped readable (the trace's host
  // regions: a heap below 4 GiB, as a non-PIE Python's is).
  auto hostAddress = [](const Run& run, const std::vector<uint8_t>& v, size_t at) {
    uint64_t u = 0;
    if (at + 8 > v.size()) return false;
    std::memcpy(&u, v.data() + at, 8);
    if (u >= (1ULL << 32) && u < (1ULL << 47)) return true;
    if (run.reader == nullptr) return false;
    const std::vector<HostRegion>& regions = run.reader->hostRegions();
    auto next = std::upper_bound(regions.begin(), regions.end(), u,
                                 [](uint64_t x, const HostRegion& r) { return x < r.start; });
    return next != regions.begin() && u < std::prev(next)->end;
  };
  size_t i = 0;
  while (i < n) {
    if (isPointer[i] || byteAt(a.params, i) == byteAt(b.params, i)) {
      ++i;
      continue;
    }
    const int32_t p = parameterAt(a, i);
    size_t begin = i, end = i + 1;
    if (p >= 0) {
      begin = a.paramLayout[p].offset;
      end = begin + a.paramLayout[p].size;
    } else {
      while (end < n && !isPointer[end] && byteAt(a.params, end) != byteAt(b.params, end)) ++end;
    }
    auto slice = [&](const std::vector<uint8_t>& v) {
      if (begin >= v.size()) return std::string("(absent)");
      const size_t n = std::min(end, v.size()) - begin;
      // A scalar is shown as its value read both ways a kernel might use it.
      if (n == 4) {
        uint32_t u;
        float f;
        std::memcpy(&u, v.data() + begin, 4);
        std::memcpy(&f, v.data() + begin, 4);
        return fmt::format("{:#010x} (int {}, float {:g})", u, static_cast<int32_t>(u), f);
      }
      if (n == 8) {
        uint64_t u;
        std::memcpy(&u, v.data() + begin, 8);
        return fmt::format("{:#018x} (int {})", u, static_cast<int64_t>(u));
      }
      return hexBytes(std::span<const uint8_t>(v).subspan(begin, n));
    };
    // Is every differing byte in an RNG state's bytes (whatever they read
    // as: a 53-bit seed may lie where host addresses do) or in a word that
    // holds host addresses on both sides? A parameter of the layout holds
    // one only in a whole word of its own (a 4-byte int beside another makes
    // a word that may read as an address), and never when the kernel's
    // signature types it as a number. The RNG state then, if any byte is
    // its, else host addresses.
    const bool mayHoldAddresses = p < 0 || !arithmeticType(parameterType(p));
    bool other = false;
    const std::string* rng = nullptr;
    for (size_t j = begin; j < end && !other; ++j) {
      if (isPointer[j] || byteAt(a.params, j) == byteAt(b.params, j)) continue;
      if (const std::string* source = rngSourceAt(j)) {
        rng = source;
        continue;
      }
      const size_t w = j & ~size_t{7};
      other = !(mayHoldAddresses && (p < 0 || (w >= begin && w + 8 <= end)) && hostAddress(ctx.a, a.params, w) &&
                hostAddress(ctx.b, b.params, w));
    }
    ParamDifference& d = out.emplace_back(ParamDifference{
        static_cast<uint32_t>(begin), static_cast<uint32_t>(end - begin), p, slice(a.params), slice(b.params),
        other ? "" : rng != nullptr ? *rng + kRngSuffix : kHostAddresses, ""});
    if (end - begin > 16 && end <= std::min(a.params.size(), b.params.size())) {
      d.words = differingWords(std::span(a.params).subspan(begin, end - begin),
                               std::span(b.params).subspan(begin, end - begin),
                               isPointer, begin);
    }
    i = end;
  }
  std::sort(out.begin(), out.end(),
            [](const ParamDifference& x, const ParamDifference& y) { return x.offset < y.offset; });
  return out;
}

// Whether two corresponding operations read the same device bytes, by
// position, allocation identity and digest.
bool sameInputs(const Context& ctx, const Event& a, const Event& b) {
  std::vector<RangeDifference> differences;
  return compareRanges(ctx, view(a).inputs, view(b).inputs, differences);
}

// Whether a pair of launches that matchSameShape paired (their pointers
// differ) differ only by stale words: every pointer both runs have points to
// the same place, each pointer one run alone has is a device address in one
// run only (an unwritten word of a struct passed by value), and every range
// both runs hashed agrees, the ranges of one run alone lying in allocations
// that its stale words point to (the recorder hashed through them). The
// kernel then read and wrote the same bytes in both runs: no divergence.
bool staleWordsOnly(const Context& ctx, const Event& ea, const Event& eb) {
  const auto* a = std::get_if<KernelLaunch>(&ea.payload);
  const auto* b = std::get_if<KernelLaunch>(&eb.payload);
  if (a == nullptr || b == nullptr || a->function != b->function) return false;
  std::vector<uint32_t> staleA, staleB;  // allocations a stale word of each run points into
  auto stale = [](const KernelLaunch& with, const KernelLaunch& without, std::vector<uint32_t>& out) {
    for (const PointerParam& p : with.pointers) {
      if (std::ranges::any_of(without.pointers, [&](const PointerParam& q) { return q.byteOffset == p.byteOffset; }))
        continue;
      if (pointerMeaning(with, without, p.byteOffset) != kStaleAddress) return false;
      out.push_back(p.allocation);
    }
    return true;
  };
  if (!stale(*a, *b, staleA) || !stale(*b, *a, staleB) || (staleA.empty() && staleB.empty())) return false;
  for (const PointerParam& pa : a->pointers) {
    for (const PointerParam& pb : b->pointers) {
      if (pa.byteOffset == pb.byteOffset &&
          (ctx.a.ordinals(pa.allocation) != ctx.b.ordinals(pb.allocation) || pa.offset != pb.offset))
        return false;
    }
  }
  auto agree = [&](const std::vector<RangeDigest>& ra, const std::vector<RangeDigest>& rb) {
    std::vector<RangeDifference> differences;
    compareRanges(ctx, ra, rb, differences);
    return std::ranges::all_of(differences, [&](const RangeDifference& d) {
      if (d.a.size != 0 && d.b.size != 0) return false;
      const DeviceRange& alone = d.a.size != 0 ? d.a : d.b;
      const std::vector<uint32_t>& through = d.a.size != 0 ? staleA : staleB;
      return alone.allocation != 0 && std::ranges::find(through, alone.allocation) != through.end();
    });
  };
  return agree(a->inputs, b->inputs) && agree(a->outputs, b->outputs);
}

// Whether two launches are the same operation launched with another
// configuration: the same kernel and parameters (pointers by identity,
// host addresses aside), every range both runs hashed agreeing, the grid,
// block, cluster or shared memory different.
bool launchConfigurationOnly(const Context& ctx, const Event& ea, const Event& eb) {
  const auto* a = std::get_if<KernelLaunch>(&ea.payload);
  const auto* b = std::get_if<KernelLaunch>(&eb.payload);
  if (a == nullptr || b == nullptr || a->function != b->function || a->params.size() != b->params.size()) return false;
  if (!std::ranges::all_of(compareParams(ctx, *a, *b), isHostParameter)) return false;
  std::vector<RangeDifference> differences;
  return compareRanges(ctx, a->inputs, b->inputs, differences) &&
         compareRanges(ctx, a->outputs, b->outputs, differences);
}

// Whether their parameters agree once pointers are compared by allocation
// identity and offset (a set's value, for sets).
bool sameParameters(const Context& ctx, const Event& a, const Event& b) {
  const auto* ka = std::get_if<KernelLaunch>(&a.payload);
  const auto* kb = std::get_if<KernelLaunch>(&b.payload);
  if (ka && kb) return std::ranges::all_of(compareParams(ctx, *ka, *kb), isHostParameter);
  const auto* sa = std::get_if<Memset>(&a.payload);
  const auto* sb = std::get_if<Memset>(&b.payload);
  return !(sa && sb) || sa->value == sb->value;
}

template <typename T>
std::optional<T> annotation(const std::vector<Annotation>& annotations) {
  for (const Annotation& a : annotations) {
    if (const auto* t = std::get_if<T>(&a)) return *t;
  }
  return std::nullopt;
}

// One run's write history before its divergent operation: what the run's
// recorded operations before event `seq` last did to the bytes of the
// allocations that operation touches. Unlabelled: never written since
// allocated; 0: written without a digest (writesUndigested: a launch not
// hashed counts as writing from each pointer to the end of its allocation, a
// graph launch without outputs as writing everything); 1: written with one.
// The run is scanned from its start, once, on first need: only for the first
// divergence.
class WritesBefore {
 public:
  WritesBefore(const Run& run, uint64_t seq, const OpView& v) : run_(run), seq_(seq) {
    auto add = [&](const std::vector<RangeDigest>& rs) {
      for (const RangeDigest& r : rs) {
        if (r.range.allocation != 0) ordinals_.push_back(r.range.allocation);
      }
    };
    add(v.inputs);
    add(v.outputs);
    if (v.launch) add(v.launch->reads);
    std::sort(ordinals_.begin(), ordinals_.end());
    ordinals_.erase(std::unique(ordinals_.begin(), ordinals_.end()), ordinals_.end());
  }

  // Bytes of [begin, end) of `allocation` that some operation wrote.
  uint64_t written(uint32_t allocation, uint64_t begin, uint64_t end) {
    return labels().covered(allocation, begin, end);
  }

  // Whether the last write of any byte of `r` left no digest.
  bool undigested(const DeviceRange& r) {
    if (run_.firstUndigested >= seq_ || r.allocation == 0) return false;  // no such write: nothing to scan
    return labels().minLabel(r.allocation, r.offset, r.offset + r.size) == 0;
  }

 private:
  const IntervalLabels& labels() {
    if (!labels_) labels_ = scan();
    return *labels_;
  }

  IntervalLabels scan() const {
    IntervalLabels out;
    if (ordinals_.empty()) return out;
    auto want = [&](uint32_t o) { return std::binary_search(ordinals_.begin(), ordinals_.end(), o); };
    scanEvents(*run_.reader, [&](const ScanEvent& e) {
      if (e.seq >= seq_) return false;
      if (e.kind == 3) {
        if (want(e.ordinal)) out.assign(e.ordinal, 0, UINT64_MAX, -1);  // a new allocation starts unwritten
        return true;
      }
      if (!isOperation(e) || (e.kind == 1 && e.memcpyKind == MemcpyKind::kDeviceToHost)) return true;
      if (e.kind == 0 && !e.hashed) {
        for (const PointerParam& p : e.pointers) {
          if (want(p.allocation)) out.assign(p.allocation, p.offset, UINT64_MAX, 0);
        }
      } else if (e.kind == 7 && e.outputs.empty()) {
        for (uint32_t o : ordinals_) out.assign(o, 0, UINT64_MAX, 0);
      } else {
        for (const ScanRange& r : e.outputs) {
          if (r.range.allocation != 0 && want(r.range.allocation)) {
            out.assign(r.range.allocation, r.range.offset, r.range.offset + r.range.size, r.digest != 0);
          }
        }
      }
      return true;
    }, 0, run_.decoders);
    return out;
  }

  const Run& run_;
  uint64_t seq_;
  std::vector<uint32_t> ordinals_;
  std::optional<IntervalLabels> labels_;
};

// Counts the bytes of each difference's spans that no recorded operation of
// its run wrote before the divergence.
void checkWritten(WritesBefore& history, std::vector<RangeDifference>& diffs, bool sideA) {
  for (RangeDifference& d : diffs) {
    const DeviceRange& r = sideA ? d.a : d.b;
    if (r.allocation == 0) continue;
    uint64_t unwritten = 0;
    for (const auto& [begin, end] : d.spans) {
      const uint64_t b = r.offset + begin, e = r.offset + end;
      unwritten += (e - b) - history.written(r.allocation, b, e);
    }
    (sideA ? d.unwrittenA : d.unwrittenB) = unwritten;
    d.writtenChecked = true;
  }
}

std::string plural(uint64_t n, const char* word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// ------------------------------------------------------------ classification

bool environmentMatters(const std::vector<EnvDifference>& env) {
  for (const EnvDifference& e : env) {
    if (e.affectsResults) return true;
  }
  return false;
}

std::string envSummary(const std::vector<EnvDifference>& env) {
  std::string out;
  size_t n = 0;
  for (const EnvDifference& e : env) {
    if (!e.affectsResults) continue;
    if (n++ < 3) out += (out.empty() ? "" : ", ") + e.field;
  }
  if (n > 3) out += fmt::format(" and {} more", n - 3);
  return out;
}

// "alloc#3 (4.0 KiB)" of `run`, with its size when the run allocated it.
std::string allocationText(const Run& run, uint32_t ordinal) {
  for (const AllocInfo& a : run.allocs) {
    if (a.ordinal == ordinal) return fmt::format("alloc#{} ({} bytes)", ordinal, a.size);
  }
  return fmt::format("alloc#{}", ordinal);
}

// Where a pointer parameter points in each run, and how the two relate.
std::string pointerEvidence(const Context& ctx, const KernelLaunch& ka, const KernelLaunch& kb,
                            const ParamDifference& p) {
  auto find = [&](const KernelLaunch& k) -> const PointerParam* {
    for (const PointerParam& q : k.pointers) {
      if (q.byteOffset == p.offset) return &q;
    }
    return nullptr;
  };
  const PointerParam* pa = find(ka);
  const PointerParam* pb = find(kb);
  auto side = [&](const Run& run, const PointerParam* q) {
    if (!q) return std::string("not a pointer");
    if (q->allocation == 0) return fmt::format("{:#x}, outside every known allocation", q->offset);
    return fmt::format("offset {:#x} of {}", q->offset, allocationText(run, q->allocation));
  };
  std::string relation;
  if (pa && pb && pa->allocation != 0 && pb->allocation != 0) {
    const uint32_t oa = ctx.a.ordinals(pa->allocation), ob = ctx.b.ordinals(pb->allocation);
    if (oa == ob) {
      const uint64_t delta = pa->offset > pb->offset ? pa->offset - pb->offset : pb->offset - pa->offset;
      relation = fmt::format("the same allocation, {} byte{} {} in run B", delta, delta == 1 ? "" : "s",
                             pb->offset > pa->offset ? "further" : "earlier");
    } else if ((ob & OrdinalMap::kUnmatched) != 0) {
      relation = fmt::format("another allocation: run B's alloc#{} has no counterpart in run A",
                             pb->allocation);
    } else {
      relation = fmt::format("another allocation: run B's alloc#{} corresponds to run A's alloc#{}",
                             pb->allocation, ob);
    }
  } else if (pa && pb) {
    relation = "one of them lies outside every known allocation";
  } else {
    relation = fmt::format("a pointer in run {} only", pa ? 'A' : 'B');
  }
  return fmt::format("{} (bytes {:#x}-{:#x}): run A {}; run B {}: {}",
                     p.param >= 0 ? fmt::format("pointer parameter {}", p.param) : "pointer",
                     p.offset, p.offset + p.size, side(ctx.a, pa), side(ctx.b, pb), relation);
}

// Same kernel and launch configuration; a pointer parameter points elsewhere.
// Filed under scalar parameters (docs/DIFF.md), with evidence of its own.
void classifyPointers(const Context& ctx, const KernelLaunch& ka, const KernelLaunch& kb,
                      FirstDivergence& d) {
  d.cause = Cause::kScalarParameters;
  d.mechanism = d.cause;
  std::vector<const ParamDifference*> pointers, scalars;
  for (const ParamDifference& p : d.params) (isPointerParameter(p) ? pointers : scalars).push_back(&p);
  const ParamDifference& first = *pointers.front();
  d.summary = fmt::format(
      "scalar parameters: same kernel and launch configuration; {}",
      pointers.size() == 1
          ? fmt::format("{} points elsewhere",
                        first.param >= 0 ? fmt::format("pointer parameter {}", first.param)
                                         : fmt::format("the pointer at bytes {:#x}", first.offset))
          : fmt::format("{} point elsewhere", plural(pointers.size(), "pointer parameter")));
  for (const ParamDifference* p : pointers) d.evidence.push_back(pointerEvidence(ctx, ka, kb, *p));
  for (const ParamDifference* q : scalars) {
    d.evidence.push_back(fmt::format("also {} (bytes {:#x}-{:#x}{}): run A {}, run B {}",
                                     q->param >= 0 ? fmt::format("parameter {}", q->param) : "bytes",
                                     q->offset, q->offset + q->size,
                                     q->meaning.empty() ? "" : ", " + q->meaning, q->a, q->b));
  }
  if (!d.inputsIdentical) {
    d.evidence.push_back("the inputs differ with it: a launch's input ranges are recorded from "
                         "its pointers");
  }
  d.evidence.push_back("the program passed another address: a view or slice at another offset, "
                       "another buffer or workspace, or a tensor placed elsewhere");
}

// Whether either run hashed a launch's ranges before it ran only where their
// bytes had not been touched by a recorded operation (FORMAT.md, hashInputs).
bool firstUseInputs(const Context& ctx) {
  return !ctx.a.reader->header().options.hashInputs || !ctx.b.reader->header().options.hashInputs;
}

// The last first-use hash of `range` by a launch of `run` that only read it,
// before `seq` (Run::firstReads).
const Run::FirstRead* lastFirstRead(const Run& run, uint64_t seq, const DeviceRange& range) {
  const Run::FirstRead* last = nullptr;
  for (const Run::FirstRead& f : run.firstReads) {
    if (f.seq >= seq) break;
    if (sameExtent(f.range, range)) last = &f;
  }
  return last;
}

// A launch's ranges its run did not hash before it: vouched for by the
// run's write history, if anything.
std::vector<DeviceRange> unhashedRanges(const OpView& v) {
  std::vector<DeviceRange> out;
  auto hashed = [&](const DeviceRange& r) {
    return std::any_of(v.inputs.begin(), v.inputs.end(),
                       [&](const RangeDigest& in) { return sameExtent(in.range, r); });
  };
  for (const RangeDigest& o : v.outputs) {
    if (!hashed(o.range)) out.push_back(o.range);
  }
  if (v.launch) {
    for (const RangeDigest& r : v.launch->reads) {
      if (!hashed(r.range)) out.push_back(r.range);
    }
  }
  return out;
}

// A launch of first-use traces: the inputs both runs hashed are compared, by
// range; every other range the launch touches (its outputs and reads) held
// bytes that earlier recorded operations last touched, and all of those gave
// identical outputs, since this is the first divergence: the write history
// vouches for them. Except:
// - a range one first-use run hashed and the other did not: their histories
//   disagree (a hash dropped, bytes another stream wrote first in one run);
// - a range an earlier launch that only read it hashed at its first use with
//   different bytes in the two runs.
// Those are not compared, and nothing vouches for them.
void compareFirstUseInputs(const Context& ctx, const OpView& va, const OpView& vb, WritesBefore& historyA,
                           WritesBefore& historyB, FirstDivergence& d) {
  std::vector<RangeDigest> a, b;
  std::vector<size_t> index;
  std::vector<bool> matchedB(vb.inputs.size(), false);
  for (size_t i = 0; i < va.inputs.size(); ++i) {
    for (size_t j = 0; j < vb.inputs.size(); ++j) {
      if (matchedB[j] || !sameRange(ctx, va.inputs[i].range, vb.inputs[j].range)) continue;
      matchedB[j] = true;
      a.push_back(va.inputs[i]);
      b.push_back(vb.inputs[j]);
      index.push_back(i);
      d.inputBytes += vb.inputs[j].range.size;
      break;
    }
  }
  d.inputCount = a.size();
  d.inputsIdentical = compareRanges(ctx, a, b, d.inputs);
  for (RangeDifference& r : d.inputs) r.index = index[r.index];

  // A run that hashes every range (hashInputs) has no history to disagree with.
  const bool firstUseA = !ctx.a.reader->header().options.hashInputs;
  const bool firstUseB = !ctx.b.reader->header().options.hashInputs;
  size_t oneSided = 0;
  if (firstUseA) oneSided += va.inputs.size() - a.size();
  if (firstUseB) oneSided += std::count(matchedB.begin(), matchedB.end(), false);
  if (oneSided > 0) {
    d.evidence.push_back(fmt::format(
        "{} hashed before the launch in one run only: the runs' histories of those bytes differ (a hash "
        "dropped, or another stream wrote them first in one run: a race between streams), so they are not "
        "compared and nothing vouches for them",
        plural(oneSided, "range")));
  }
  // A range the history vouches for in both runs, but which an earlier
  // launch that only read it hashed at its first use with different bytes
  // (the runs' memory differed there, nothing had written it, though that
  // launch's outputs did not show it), or whose last write before the launch
  // left no digest in either run (a hash that failed on the GPU, a graph
  // launch not hashed): nothing vouches for it.
  size_t readApart = 0, undigested = 0;
  if (firstUseA && firstUseB) {
    const std::vector<DeviceRange> trustedA = unhashedRanges(va), trustedB = unhashedRanges(vb);
    for (size_t i = 0; i < trustedA.size(); ++i) {
      const DeviceRange& ra = trustedA[i];
      const auto rb = std::find_if(trustedB.begin(), trustedB.end(),
                                   [&](const DeviceRange& r) { return sameRange(ctx, ra, r); });
      if (rb == trustedB.end()) continue;
      const Run::FirstRead* fa = lastFirstRead(ctx.a, d.a.seq, ra);
      const Run::FirstRead* fb = lastFirstRead(ctx.b, d.b.seq, *rb);
      if (fa != nullptr && fb != nullptr && fa->digest != fb->digest) {
        ++readApart;
        d.evidence.push_back(fmt::format(
            "{} was read at its first use with different bytes in the two runs (run A event #{}, run B event "
            "#{}), and those launches' outputs did not show it: nothing vouches for it",
            rangeText(ra), fa->seq, fb->seq));
      } else if (historyA.undigested(ra) || historyB.undigested(*rb)) {
        ++undigested;
      }
    }
    if (undigested > 0) {
      d.evidence.push_back(fmt::format(
          "{} last written before the launch without a digest (a hash that failed, or an operation not "
          "hashed): nothing vouches for {}",
          undigested == 1 ? "1 range was" : fmt::format("{} ranges were", undigested),
          undigested == 1 ? "it" : "them"));
    }
  }
  d.inputsUncompared = oneSided + readApart + undigested;
  const size_t touched = va.outputs.size() + va.reads;
  d.inputsVouched = touched > a.size() + d.inputsUncompared ? touched - a.size() - d.inputsUncompared : 0;
}

// The PyTorch op of a launch reads the old contents of what it writes: it
// updates an argument in place (Origin.inPlace, from its schema: aten::add_'s
// `Tensor(a!) self`, batch norm's running statistics; in older traces, an
// ATen name that ends in '_': aten::addcmul_, aten::masked_fill_), except
// the ops that overwrite all of it (fills, copies, random generators).
// Partial writers count too: what they leave passes to the output.
bool inPlaceOp(const std::optional<Origin>& origin) {
  if (!origin || origin->inPlace == InPlace::kNo) return false;
  const std::string& op = origin->op;
  static const std::set<std::string_view> overwrite = {
      "aten::fill_",    "aten::zero_",        "aten::copy_",     "aten::normal_",
      "aten::uniform_", "aten::random_",      "aten::bernoulli_", "aten::exponential_",
      "aten::geometric_", "aten::cauchy_",    "aten::log_normal_"};
  if (overwrite.contains(op)) return false;
  if (origin->inPlace == InPlace::kYes) return true;
  return op.starts_with("aten::") && op.ends_with("_") && !op.ends_with("__");
}

// Whether every input that differs is an output buffer's old contents: in a
// range the launch also writes (hashed before the launch at its first use,
// FORMAT.md hashInputs, though the kernel may overwrite it unread), its
// differing spans hold bytes no recorded operation wrote, in both runs,
// while the parameters or the RNG state differ and explain the outputs.
// The spans are whole chunks when only digests were recorded, so they may
// also hold written bytes; those were written by earlier operations whose
// outputs were identical, so the difference lies in the unwritten ones.
// Then the classification goes on with the parameters, and the evidence
// says why. Not for an in-place op, which reads what it writes (inPlaceOp).
bool oldOutputContents(const OpView& va, const OpView& vb, const std::optional<Origin>& origin,
                       FirstDivergence& d) {
  if (!va.launch || !vb.launch || inPlaceOp(origin)) return false;
  const auto rngA = rngStates(*va.launch), rngB = rngStates(*vb.launch);
  bool rngDiffers = rngA.size() != rngB.size();
  for (size_t i = 0; !rngDiffers && i < rngA.size(); ++i) {
    rngDiffers = rngA[i]->seed != rngB[i]->seed || rngA[i]->offset != rngB[i]->offset;
  }
  if (d.params.empty() && !rngDiffers) return false;
  std::string which;
  for (const RangeDifference& r : d.inputs) {
    const bool written = std::any_of(va.outputs.begin(), va.outputs.end(), [&](const RangeDigest& o) {
      return o.range.allocation == r.a.allocation && o.range.offset == r.a.offset &&
             o.range.size == r.a.size;
    });
    if (!written || !r.writtenChecked || r.boundsDiffer || r.unwrittenA == 0 || r.unwrittenB == 0) return false;
    which += fmt::format("{}{}", which.empty() ? "" : ", ", r.index);
  }
  d.evidence.push_back(fmt::format(
      "input{} {} differ{} where no recorded operation wrote, in ranges the launch also writes: an "
      "output buffer's old contents, hashed at its first use, not what the kernel read",
      d.inputs.size() == 1 ? "" : "s", which, d.inputs.size() == 1 ? "s" : ""));
  return true;
}

// PyTorch's Philox state inside a struct passed by value (the parameters of
// memory-efficient and flash attention, the functors of bernoulli with a
// tensor p, gamma and poisson): the recorder decodes the state only where
// the kernel takes it as a parameter of its own (recorder/rng_params.h).
// Inside a struct it is found by its seed, which the run's own Philox
// launches show: at::PhiloxCudaState outside a graph capture is the seed,
// the offset (a multiple of 4), then an intragraph offset of 0 and
// captured_ false, whose first five bytes are zero in either layout (before
// and since PyTorch 2.10).

// The seeds of `run`'s Philox launches (RngState annotations decoded from a
// parameter of their own, not captured into a graph) in the blocks nearest
// to event `seq`: the last at or before its block and the first after it. A
// seed the program set in between and used only inside structs is missed.
std::vector<uint64_t> philoxSeedsNear(const Run& run, uint64_t seq) {
  std::vector<uint64_t> seeds;
  const std::vector<size_t>& blocks = run.philoxBlocks;
  const auto after = std::upper_bound(blocks.begin(), blocks.end(), run.reader->blockOf(seq));
  std::vector<Event> events;
  for (auto it = after == blocks.begin() ? after : std::prev(after); it != blocks.end() && it <= after; ++it) {
    try {
      run.reader->readBlock(*it, events);
    } catch (const TraceError&) {
      continue;  // the summary read it: only fewer seeds, never a failed diff
    }
    for (const Event& e : events) {
      const auto* k = std::get_if<KernelLaunch>(&e.payload);
      if (k == nullptr) continue;
      for (const RngState* r : rngStates(*k)) {
        if (r->source == "philox" && !r->generator.starts_with("captured") &&
            std::ranges::find(seeds, r->seed) == seeds.end())
          seeds.push_back(r->seed);
      }
    }
  }
  return seeds;
}

// Adds to two corresponding launches whose parameters differ the Philox
// states inside their structs, as RngState annotations at the bytes they
// lie in: an aligned word, within one parameter and in no state already
// decoded, that holds one of its run's seeds on each side, followed by an
// offset and the five zero bytes (above), where the seed or the offset
// differs. An equal seed counts only from 2^32 up: a small one
// (torch.manual_seed(0)) is a common value of any field. PyTorch draws an
// unset seed at random, 53 bits wide.
void addPhiloxInsideStructs(const Context& ctx, Event& ea, Event& eb) {
  auto* ka = std::get_if<KernelLaunch>(&ea.payload);
  auto* kb = std::get_if<KernelLaunch>(&eb.payload);
  if (ka == nullptr || kb == nullptr || ka->params.size() != kb->params.size() || ka->params == kb->params) return;
  auto word = [](const KernelLaunch& k, size_t at) {
    uint64_t u;
    std::memcpy(&u, k.params.data() + at, 8);
    return u;
  };
  auto stateAt = [&](const KernelLaunch& k, size_t at) {
    return word(k, at + 8) % 4 == 0 && (word(k, at + 16) & 0xff'ffff'ffffULL) == 0;
  };
  auto decoded = [&](const KernelLaunch& k, size_t at) { return rngStateIn(k, at, at + 21) != nullptr; };
  auto withinOneParameter = [&](size_t at) {
    return ka->paramLayout.empty() || (parameterAt(*ka, at) >= 0 && parameterAt(*ka, at) == parameterAt(*ka, at + 20));
  };
  std::optional<std::vector<uint64_t>> seedsA, seedsB;  // read at the first need
  std::vector<std::pair<uint32_t, int32_t>> found;       // byte, parameter
  for (size_t at = 0; at + 24 <= ka->params.size(); at += 8) {
    const uint64_t seedA = word(*ka, at), seedB = word(*kb, at);
    if ((seedA == seedB && (seedA < (uint64_t{1} << 32) || word(*ka, at + 8) == word(*kb, at + 8))) ||
        !stateAt(*ka, at) || !stateAt(*kb, at) || !withinOneParameter(at) || decoded(*ka, at) || decoded(*kb, at))
      continue;
    if (!seedsA) {
      seedsA = philoxSeedsNear(ctx.a, ea.seq);
      seedsB = philoxSeedsNear(ctx.b, eb.seq);
    }
    if (std::ranges::find(*seedsA, seedA) == seedsA->end() || std::ranges::find(*seedsB, seedB) == seedsB->end())
      continue;
    found.emplace_back(static_cast<uint32_t>(at), parameterAt(*ka, at));
    at += 16;  // the state's offset and intragraph words
  }
  for (const auto& [at, param] : found) {
    for (KernelLaunch* k : {ka, kb}) {
      RngState r;
      r.source = "philox";
      r.generator = fmt::format("(inside {}, bytes {:#x}-{:#x}: found by the seed of the run's Philox launches)",
                                param >= 0 ? fmt::format("parameter {}", param) : "the parameters", at, at + 16);
      r.seed = word(*k, at);
      r.offset = word(*k, at + 8);
      r.paramOffset = at;
      k->annotations.emplace_back(std::in_place_type<RngState>, std::move(r));
    }
  }
}

void classifyMatched(const Context& ctx, uint64_t ia, uint64_t ib, FirstDivergence& d) {
  Event ea = eventAt(*ctx.a.reader, ctx.a.ops[ia].seq());
  Event eb = eventAt(*ctx.b.reader, ctx.b.ops[ib].seq());
  addPhiloxInsideStructs(ctx, ea, eb);
  d.a = info(ctx.a, ia, ea);
  d.b = info(ctx.b, ib, eb);
  const OpView va = view(ea), vb = view(eb);
  WritesBefore historyA(ctx.a, d.a.seq, va), historyB(ctx.b, d.b.seq, vb);
  d.outputCount = va.outputs.size();
  if ((va.launch || std::holds_alternative<GraphLaunch>(ea.payload)) && firstUseInputs(ctx)) {
    compareFirstUseInputs(ctx, va, vb, historyA, historyB, d);
  } else {
    d.inputCount = va.inputs.size();
    for (const RangeDigest& r : va.inputs) d.inputBytes += r.range.size;
    d.inputsIdentical = compareRanges(ctx, va.inputs, vb.inputs, d.inputs);
  }
  compareRanges(ctx, va.outputs, vb.outputs, d.outputs);
  if (va.launch && vb.launch) {
    d.params = compareParams(ctx, *va.launch, *vb.launch);
    d.paramsIdentical = d.params.empty();
    d.determinismA = annotation<DeterminismCheck>(va.launch->annotations);
    d.determinismB = annotation<DeterminismCheck>(vb.launch->annotations);
  } else if (va.memset && vb.memset) {
    if (va.memset->value != vb.memset->value || va.memset->elementSize != vb.memset->elementSize) {
      d.paramsIdentical = false;
      d.params.push_back({0, va.memset->elementSize, -1, fmt::format("{:#x}", va.memset->value),
                          fmt::format("{:#x}", vb.memset->value), "memset value", ""});
    }
  }

  // A pointer parameter that points elsewhere (a pair matchSameShape made).
  if (va.launch && vb.launch && std::any_of(d.params.begin(), d.params.end(), isPointerParameter)) {
    classifyPointers(ctx, *va.launch, *vb.launch, d);
    return;
  }

  // Host input: a host-to-device copy wrote different bytes.
  if (va.memcpy && va.memcpy->kind == MemcpyKind::kHostToDevice) {
    d.cause = Cause::kHostInput;
    d.summary = "host input: the bytes copied host-to-device differ";
    d.evidence.push_back(fmt::format("{} of {} bytes into {}: digest {:016x} in run A, {:016x} in run B",
                                     opName(ea), va.memcpy->size, rangeText(va.memcpy->dst),
                                     va.memcpy->digest, vb.memcpy->digest));
    if (va.memcpy->data && vb.memcpy->data) {
      try {
        const auto ba = ctx.a.reader->readBlob(*va.memcpy->data);
        const auto bb = ctx.b.reader->readBlob(*vb.memcpy->data);
        uint64_t differing = 0, first = UINT64_MAX;
        for (size_t i = 0; i < std::min(ba.size(), bb.size()); ++i) {
          if (ba[i] != bb[i]) {
            ++differing;
            first = std::min<uint64_t>(first, i);
          }
        }
        d.evidence.push_back(fmt::format("captured host data: {} of {} bytes differ, the first at "
                                         "byte {:#x}",
                                         differing, ba.size(), first == UINT64_MAX ? 0 : first));
      } catch (const TraceError& e) {
        d.evidence.push_back(fmt::format("captured host data unreadable: {}", e.what()));
      }
    } else {
      d.evidence.push_back("record with --capture-host-data to see which bytes differ");
    }
    d.evidence.push_back("the program fed the GPU different data: data order, CPU-side "
                         "augmentation, unseeded Python/NumPy RNG, DataLoader workers");
    d.mechanism = d.cause;
    return;
  }

  if (!d.inputsIdentical) {
    checkWritten(historyA, d.inputs, true);
    checkWritten(historyB, d.inputs, false);
  }
  if (!d.inputsIdentical && !oldOutputContents(va, vb, ea.origin, d)) {
    const RangeDifference* unwritten = nullptr;
    for (const RangeDifference& r : d.inputs) {
      if (r.writtenChecked && (r.unwrittenA > 0 || r.unwrittenB > 0)) {
        unwritten = &r;
        break;
      }
    }
    if (unwritten) {
      d.cause = Cause::kUninitialisedMemory;
      d.summary = fmt::format("uninitialised memory: input {} ({}) differs in bytes that no "
                              "recorded operation wrote",
                              unwritten->index, rangeText(unwritten->a));
      d.evidence.push_back(fmt::format(
          "input {} differs; of its differing bytes, {} in run A and {} in run B were never "
          "written by a recorded copy, memset or kernel output since allocation",
          unwritten->index, unwritten->unwrittenA, unwritten->unwrittenB));
      d.evidence.push_back("every earlier operation produced identical outputs, so the "
                           "difference comes from what the memory held before: read of "
                           "uninitialised memory (torch.empty, cudaMalloc without a memset)");
      if (inPlaceOp(ea.origin)) {
        d.evidence.push_back(fmt::format("{} works in place: it reads the old contents of what it writes",
                                         ea.origin->op));
      }
    } else {
      d.cause = Cause::kUnknown;
      d.summary = "unknown: an input differs although every recorded writer of its bytes "
                  "produced identical outputs";
      d.evidence.push_back("a write gpurr did not record (another process, host-mapped "
                           "memory written by the CPU, a launch recorded without hashing) "
                           "or a race between streams changed the input");
    }
    d.mechanism = d.cause;
    return;
  }

  // Same inputs. Parameters? (Host addresses do not count.)
  const size_t hostParams = std::ranges::count_if(d.params, isHostParameter);
  const size_t differing = d.params.size() - hostParams;
  if (va.launch && vb.launch) {
    const auto rngA = rngStates(*va.launch), rngB = rngStates(*vb.launch);
    bool rngDiffers = rngA.size() != rngB.size();
    for (size_t i = 0; !rngDiffers && i < rngA.size(); ++i) {
      rngDiffers = rngA[i]->seed != rngB[i]->seed || rngA[i]->offset != rngB[i]->offset;
    }
    const bool allInRng =
        differing > 0 && std::ranges::all_of(d.params, [](const ParamDifference& p) {
          return isHostParameter(p) || isRngParameter(p);
        });
    if (allInRng || (differing == 0 && rngDiffers)) {
      d.cause = Cause::kRngState;
      d.mechanism = d.cause;
      d.summary = "RNG state: same kernel and inputs; only the random generator's seed/offset differs";
      for (size_t i = 0; i < std::max(rngA.size(), rngB.size()); ++i) {
        auto side = [](const std::vector<const RngState*>& v, size_t i) {
          return i < v.size() ? fmt::format("{} {} seed={} offset={}", v[i]->source,
                                            v[i]->generator, v[i]->seed, v[i]->offset)
                              : std::string("none");
        };
        d.evidence.push_back(fmt::format("run A: {}; run B: {}", side(rngA, i), side(rngB, i)));
      }
      if (rngA.empty() && rngB.empty()) {
        d.evidence.push_back("the differing parameter bytes hold the RNG state");
      }
      const bool curand = std::any_of(rngA.begin(), rngA.end(),
                                      [](const RngState* r) { return r->source == "curand"; });
      d.evidence.push_back(curand ? "seed every run's generator identically (curandSetPseudoRandomGeneratorSeed, "
                                    "curandSetGeneratorOffset) and keep the sequence of random operations the same"
                                  : "seed every run identically (torch.manual_seed) and keep the "
                                    "sequence of random operations the same");
      return;
    }
  }
  if (differing > 0) {
    d.cause = Cause::kScalarParameters;
    d.mechanism = d.cause;
    const ParamDifference& p = *std::ranges::find_if_not(d.params, isHostParameter);
    d.summary = fmt::format("scalar parameters: same kernel and inputs; {} differ{}",
                            differing == 1 ? (p.param >= 0 ? fmt::format("parameter {}", p.param)
                                                           : fmt::format("parameter bytes {:#x}", p.offset))
                                           : plural(differing, "parameter"),
                            differing == 1 ? "s" : "");
    for (const ParamDifference& q : d.params) {
      d.evidence.push_back(fmt::format("{} (bytes {:#x}-{:#x}{}): {}",
                                       q.param >= 0 ? fmt::format("parameter {}", q.param) : "bytes",
                                       q.offset, q.offset + q.size, q.meaning.empty() ? "" : ", " + q.meaning,
                                       q.words.empty() ? fmt::format("run A {}, run B {}", q.a, q.b)
                                                       : "differs in words " + q.words));
    }
    d.evidence.push_back("a value computed on the host differs: a learning rate or step "
                         "count, a size, a clock- or counter-derived value");
    return;
  }
  // Inputs nothing vouches for: no claim about the kernel can rest on them.
  if (d.inputsUncompared > 0) {
    d.cause = Cause::kUnknown;
    d.mechanism = d.cause;
    d.summary = fmt::format("unknown: same parameters, different outputs, and {} of the launch could not be "
                            "compared",
                            plural(d.inputsUncompared, "input"));
    d.evidence.push_back("record with --hash-inputs to hash every input before every launch");
    return;
  }
  d.cause = Cause::kNondeterministicKernel;
  d.mechanism = d.cause;
  d.summary = "nondeterministic kernel: same inputs and parameters, different outputs";
  std::string inputs;
  if (d.inputsVouched == 0) {
    inputs = d.inputCount == 1 ? "the input is identical (digests equal)"
                               : fmt::format("all {} inputs are identical (digests equal)", d.inputCount);
  } else {
    inputs = fmt::format("inputs identical: {}{} vouched for by the write history (the earlier operations that "
                         "touched them gave identical outputs)",
                         d.inputCount == 0 ? "" : plural(d.inputCount, "input") + " hashed at first use, ",
                         plural(d.inputsVouched, "input"));
  }
  d.evidence.push_back(fmt::format("{}, parameters identical after "
                                   "pointer normalisation{}; {} of {} output{} differ{}",
                                   inputs,
                                   hostParams == 0 ? "" : fmt::format(" but for host addresses in {}",
                                                                      plural(hostParams, "parameter")),
                                   d.outputs.size(), d.outputCount, d.outputCount == 1 ? "" : "s",
                                   d.outputs.size() == 1 ? "s" : ""));
  if (hostParams > 0) {
    d.evidence.push_back("the parameter bytes that differ hold, in both runs, host addresses in no recorded "
                         "allocation: the unused parts of structs passed by value, references to host objects; "
                         "address-space randomisation changes them from run to run (gpurr record turns it off "
                         "unless --aslr), and a kernel cannot read through them");
  }
  d.evidence.push_back(kIntrinsicHint);
}

// The positions [begin, end) of `run.ops` in the order the trace holds
// them (the canonical order may differ), for a pass over the trace.
std::vector<uint64_t> inTraceOrder(const Run& run, uint64_t begin, uint64_t end) {
  std::vector<uint64_t> positions(end - begin);
  for (uint64_t i = begin; i < end; ++i) positions[i - begin] = i;
  std::sort(positions.begin(), positions.end(),
            [&](uint64_t x, uint64_t y) { return run.ops[x].seq() < run.ops[y].seq(); });
  return positions;
}

// The first `maxStretchOps` of `count` operations of `r` from `begin`, in one
// pass over their events.
std::vector<OpInfo> opsOf(const Context& ctx, const Run& r, uint64_t begin, uint64_t count) {
  std::vector<OpInfo> out;
  if (count == 0) return out;
  const uint64_t shown = std::min<uint64_t>(count, ctx.options.maxStretchOps);
  std::vector<uint64_t> positions = inTraceOrder(r, begin, begin + shown);
  size_t next = 0;
  r.reader->forEach([&](const Event& e) {
    if (e.seq == r.ops[positions[next]].seq()) out.push_back(info(r, positions[next++], e));
    return next < positions.size();
  }, r.ops[positions[0]].seq());
  std::sort(out.begin(), out.end(), [](const OpInfo& x, const OpInfo& y) { return x.index < y.index; });
  return out;
}

// ------------------------------------------------------------ reorderings

// The stretches of a reordering: runs [first, last] of the alignment.
struct Group {
  size_t first = SIZE_MAX, last = SIZE_MAX;
  bool any() const { return first != SIZE_MAX; }
};

void appendKeys(const Run& r, uint64_t begin, uint64_t count, std::vector<uint64_t>& keys) {
  for (uint64_t i = 0; i < count; ++i) keys.push_back(r.ops[begin + i].key);
}

// Whether the first operations of a two-sided stretch of `g` carry an
// algorithm choice (cuDNN, cuBLAS).
bool choseAlgorithm(const Context& ctx, const std::vector<AlignedRun>& runs, Group g) {
  auto chose = [](const std::vector<OpInfo>& ops) {
    return std::any_of(ops.begin(), ops.end(), [](const OpInfo& o) {
      return std::any_of(o.annotations.begin(), o.annotations.end(),
                         [](const Annotation& x) { return std::holds_alternative<AlgorithmChoice>(x); });
    });
  };
  for (size_t r = g.first; r <= g.last; ++r) {
    const AlignedRun& s = runs[r];
    if (s.match || s.aCount == 0 || s.bCount == 0) continue;
    if (chose(opsOf(ctx, ctx.a, s.aBegin, s.aCount)) || chose(opsOf(ctx, ctx.b, s.bBegin, s.bCount))) return true;
  }
  return false;
}

// Stretches that are a reordering rather than another path: consecutive
// stretches (with matched runs between them) whose run A sides hold the
// same operations as their run B sides. A running sum of the identities,
// run A's added and run B's subtracted, comes back to a value it had: the
// stretches since then balance. The latest such point is taken, so that an
// unbalanced stretch (an operation one run alone does) before them is left
// out, and groups that overlap are merged. Each group's balance is then
// checked on the identities themselves; groups of more than kMaxReordered
// operations a side are not looked at. Linear in the number of stretches.
std::vector<Group> reorderings(const Context& ctx, const std::vector<AlignedRun>& runs) {
  const Run& a = ctx.a;
  const Run& b = ctx.b;
  constexpr uint64_t kMaxReordered = 1 << 16;
  std::vector<Group> group(runs.size());
  std::vector<Group> found;  // by their last stretch, increasing; disjoint
  std::unordered_map<uint64_t, size_t> seen{{0, 0}};  // running sum -> the run after which it was last
  uint64_t sum = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const AlignedRun& s = runs[r];
    if (s.match) continue;
    for (uint64_t i = 0; i < s.aCount; ++i) sum += a.ops[s.aBegin + i].key;
    for (uint64_t i = 0; i < s.bCount; ++i) sum -= b.ops[s.bBegin + i].key;
    const auto [it, fresh] = seen.try_emplace(sum, r + 1);
    if (fresh) continue;
    Group g{it->second, r};
    it->second = r + 1;
    while (!found.empty() && found.back().last >= g.first) {
      g.first = std::min(g.first, found.back().first);
      found.pop_back();
    }
    found.push_back(g);
  }
  for (Group& g : found) {
    while (runs[g.first].match) ++g.first;  // it starts after a stretch, or at the start
    uint64_t na = 0, nb = 0;
    bool twoSided = false;
    for (size_t r = g.first; r <= g.last; ++r) {
      if (runs[r].match) continue;
      na += runs[r].aCount;
      nb += runs[r].bCount;
      twoSided |= runs[r].aCount > 0 && runs[r].bCount > 0;
    }
    if (na != nb || na > kMaxReordered) continue;
    // Stretches where each run takes a path of its own and that balance
    // only together are two swapped operations, unless a library chose
    // them: an algorithm in one step of run A and in another step of run B
    // is another path.
    if (twoSided && g.first != g.last && choseAlgorithm(ctx, runs, g)) continue;
    std::vector<uint64_t> ka, kb;
    for (size_t r = g.first; r <= g.last; ++r) {
      if (runs[r].match) continue;
      appendKeys(a, runs[r].aBegin, runs[r].aCount, ka);
      appendKeys(b, runs[r].bBegin, runs[r].bCount, kb);
    }
    std::sort(ka.begin(), ka.end());
    std::sort(kb.begin(), kb.end());
    if (ka != kb) continue;
    for (size_t r = g.first; r <= g.last; ++r) {
      if (!runs[r].match) group[r] = g;
    }
  }
  return group;
}

// Stretch `r` of the reordering `g` (reorderings).
Reordering reorderingOf(const Context& ctx, const std::vector<AlignedRun>& runs, size_t r, Group g) {
  const AlignedRun& s = runs[r];
  const AlignedRun& first = runs[g.first];
  const AlignedRun& last = runs[g.last];
  Reordering m;
  m.aBegin = first.aBegin;
  m.bBegin = first.bBegin;
  m.aEnd = last.aBegin + last.aCount;
  m.bEnd = last.bBegin + last.bCount;
  size_t stretches = 0;
  for (size_t i = g.first; i <= g.last; ++i) {
    if (runs[i].match) continue;
    m.count += runs[i].aCount;
    ++stretches;
  }
  // A move: two one-sided stretches with the same operations in the same order.
  const AlignedRun* inA = nullptr;  // their place in run A
  const AlignedRun* inB = nullptr;  // ... and in run B: before run A's inB->aBegin
  for (size_t i : {g.first, g.last}) {
    if (runs[i].bCount == 0) inA = &runs[i];
    if (runs[i].aCount == 0) inB = &runs[i];
  }
  if (stretches == 2 && inA && inB) {
    bool same = true;
    for (uint64_t i = 0; i < inA->aCount && same; ++i) {
      same = ctx.a.ops[inA->aBegin + i].key == ctx.b.ops[inB->bBegin + i].key;
    }
    if (same) {
      const uint64_t end = inA->aBegin + inA->aCount;
      m.crossed = inB->aBegin >= end ? static_cast<int64_t>(inB->aBegin - end)
                                     : -static_cast<int64_t>(inA->aBegin - inB->aBegin);
    }
  }
  // The other side's first reordered operations, for a one-sided stretch.
  if (s.aCount == 0 || s.bCount == 0) {
    const bool wantA = s.aCount == 0;
    for (size_t i = g.first; i <= g.last && m.otherCount == 0; ++i) {
      const AlignedRun& o = runs[i];
      if (o.match || i == r || (wantA ? o.aCount : o.bCount) == 0) continue;
      m.otherCount = wantA ? o.aCount : o.bCount;
      m.otherOps = wantA ? opsOf(ctx, ctx.a, o.aBegin, o.aCount) : opsOf(ctx, ctx.b, o.bBegin, o.bCount);
    }
  }
  return m;
}

// "run B does this operation 20 operations later"
std::string reorderingText(const Reordering& m) {
  if (m.crossed == 0) return fmt::format("the same {} in another order", plural(m.count, "operation"));
  const uint64_t n = static_cast<uint64_t>(m.crossed < 0 ? -m.crossed : m.crossed);
  return fmt::format("run B does {} {} {}", m.count == 1 ? "this operation" : fmt::format("these {} operations", m.count),
                     plural(n, "operation"), m.crossed > 0 ? "later" : "earlier");
}

PathDivergence stretchOf(const Context& ctx, const std::vector<AlignedRun>& runs, size_t r, Group g) {
  const AlignedRun& run = runs[r];
  PathDivergence p;
  p.aBegin = run.aBegin;
  p.aCount = run.aCount;
  p.bBegin = run.bBegin;
  p.bCount = run.bCount;
  p.aOps = opsOf(ctx, ctx.a, p.aBegin, p.aCount);
  p.bOps = opsOf(ctx, ctx.b, p.bBegin, p.bCount);
  if (g.any()) p.reordered = reorderingOf(ctx, runs, r, g);
  return p;
}

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
  scanEvents(*a.reader, [&](const ScanEvent& e) {
    if (e.seq > to) return false;
    if (!isOperation(e)) return true;
    if (moved.count(e.seq) != 0) {
      auto mark = [](IntervalLabels& l, const ScanRange& r) {
        l.assign(r.range.allocation, r.range.offset, r.range.offset + r.range.size, 1);
      };
      forEachAccess(e, [&](const ScanRange& r) { mark(reads, r); }, [&](const ScanRange& r) { mark(writes, r); });
    } else if (const auto it = kept.find(e.seq); it != kept.end()) {
      forEachAccess(e, [&](const ScanRange& r) { accesses.push_back({it->second, r.range, false}); },
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
  auto threads = [](const std::vector<uint16_t>& t) {
    return fmt::format("host thread{} {}", t.size() == 1 ? "" : "s", fmt::join(t, ", "));
  };
  const bool ownKept = std::any_of(moved.begin(), moved.end(), [&](uint16_t t) { return kept.count(t) > 0; });
  std::vector<std::string> parts;
  for (const auto& [t, n] : kept) {
    parts.push_back(fmt::format("{} of host thread {}{}", n, t,
                                std::binary_search(moved.begin(), moved.end(), t) ? " (its own)" : ""));
  }
  const char* they = m.count == 1 ? "it" : "they";
  const std::string onStream = oneStream && stream ? fmt::format(", all on one stream (stream {})", *stream) : "";
  if (m.crossed != 0) {
    d.evidence.push_back(fmt::format("{} issued {}; in run B {} crossed {}: {}{}", threads(moved),
                                     m.count == 1 ? "it" : "them", they, plural(keptCount, "operation"),
                                     fmt::join(parts, ", "), onStream));
  } else if (keptCount > 0) {
    d.evidence.push_back(fmt::format("{} issued them; {} between them kept their place: {}{}", threads(moved),
                                     plural(keptCount, "operation"), fmt::join(parts, ", "), onStream));
  } else {
    d.evidence.push_back(fmt::format("{} issued them{}", threads(moved), onStream));
  }
  if (ownKept || (keptCount == 0 && moved.size() == 1)) {
    d.evidence.push_back(fmt::format("{} issued its own operations in another order: the program's order "
                                     "changed (iteration over a set or dict, a data-dependent branch, another "
                                     "data order)",
                                     threads(moved)));
  } else {
    d.evidence.push_back(fmt::format("each host thread kept its own order: nothing in the program orders these "
                                     "threads' launches{} (a race between host threads; a lock, an event or a "
                                     "join would fix the order)",
                                     oneStream ? " onto one stream" : ""));
  }
  // Which of the operations that kept their place touch their data: where
  // the order matters.
  const auto touched = keptCount > 0 ? touching(a, runs, g, 3) : std::nullopt;
  if (touched) {
    const auto& [shown, count] = *touched;
    const char* their = m.count == 1 ? "its" : "their";
    const std::string where = m.crossed != 0 ? fmt::format("{} crossed", they) : std::string("between them");
    if (count == 0) {
      d.evidence.push_back(fmt::format("none of the operations {} touches {} bytes, by the recorded ranges",
                                       where, their));
    } else {
      std::vector<std::string> named;
      for (const uint64_t p : shown) {
        const OpInfo o = info(a, p);
        std::string name = o.kind == OpKind::kLaunch ? demangled(o.name) : o.name;
        if (name.size() > 60) name = name.substr(0, 57) + "...";
        named.push_back(fmt::format("#{} {}{} on host thread {}", o.seq, name,
                                    o.origin ? fmt::format(" {{op {}}}", describe(*o.origin, OriginStep::kNone)) : "",
                                    o.thread));
      }
      d.evidence.push_back(fmt::format("{} of the operations {} {} {} bytes: {}{}", count, where,
                                       count == 1 ? "touches" : "touch", their, fmt::join(named, "; "),
                                       count > shown.size() ? fmt::format("; {} more", count - shown.size()) : ""));
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
      d.evidence.push_back(fmt::format("{} the same bytes in both places: what differs is what the operations "
                                       "{} crossed read or write",
                                       m.count == 1 ? "it writes" : "they write", they));
    } else if (differ > 0) {
      d.evidence.push_back(fmt::format("in its new place {} other bytes ({} of {} compared differ): {} other data",
                                       m.count == 1 ? "it writes" : "they write", differ, compared,
                                       m.count == 1 ? "it reads" : "they read"));
    }
  }
}

void classifyPath(const Context& ctx, const std::vector<AlignedRun>& runs, size_t r, Group g, FirstDivergence& d) {
  d.path = true;
  d.stretch = stretchOf(ctx, runs, r, g);
  const PathDivergence& s = *d.stretch;
  if (!s.aOps.empty()) d.a = s.aOps.front();
  if (!s.bOps.empty()) d.b = s.bOps.front();
  if (s.reordered) return classifyReordering(ctx, runs, g, d);
  d.cause = Cause::kAlgorithmChoice;
  d.mechanism = d.cause;
  d.summary = fmt::format("algorithm choice: the runs take different paths here ({} in run A, "
                          "{} in run B)",
                          plural(s.aCount, "operation"), plural(s.bCount, "operation"));
  auto algos = [&](const std::vector<OpInfo>& ops, const char* side) {
    bool any = false;
    for (const OpInfo& o : ops) {
      for (const Annotation& a : o.annotations) {
        if (const auto* g = std::get_if<AlgorithmChoice>(&a)) {
          d.evidence.push_back(fmt::format("run {}: {} {} chose {}{}", side, g->library, g->call,
                                           g->algorithm,
                                           g->candidates.empty()
                                               ? ""
                                               : fmt::format(" (autotuned among {})",
                                                             plural(g->candidates.size(), "candidate"))));
          any = true;
        }
      }
    }
    return any;
  };
  const bool anyA = algos(s.aOps, "A"), anyB = algos(s.bOps, "B");
  if (!anyA && !anyB) {
    d.evidence.push_back("no algorithm choice was recorded for these operations; a library "
                         "(cuDNN, cuBLAS) or the program picked a different sequence of kernels");
  }
}

// ------------------------------------------------------------ blast radius

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
    forEachAccess(e, [&](const ScanRange& r) { add(r, entry.inputs); },
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

// The identity includes where pointer parameters point, so a launch whose
// pointer points elsewhere (into another allocation, or at another offset)
// is no match for its counterpart: the alignment makes a stretch of it. Pairs
// of launches at the start (or the end) of a stretch that have the same shape
// (kernel, launch configuration, parameter size) are the same operation with
// its pointers moved, or with a pointer seen on one side only: they are
// matched here, so that the diff compares their parameters instead of
// reporting a different path.
void matchSameShape(Alignment& alignment, const Run& a, const Run& b) {
  std::vector<AlignedRun> out;
  out.reserve(alignment.runs.size());
  auto same = [&](uint64_t i, uint64_t j) {
    const Op& x = a.ops[i];
    const Op& y = b.ops[j];
    return x.kind() == OpKind::kLaunch && y.kind() == OpKind::kLaunch && x.shape == y.shape;
  };
  for (const AlignedRun& r : alignment.runs) {
    if (r.match) {
      out.push_back(r);
      continue;
    }
    uint64_t head = 0, tail = 0;
    while (head < r.aCount && head < r.bCount && same(r.aBegin + head, r.bBegin + head)) ++head;
    while (tail < r.aCount - head && tail < r.bCount - head &&
           same(r.aBegin + r.aCount - 1 - tail, r.bBegin + r.bCount - 1 - tail)) {
      ++tail;
    }
    if (head > 0) out.push_back({true, r.aBegin, r.bBegin, head, head});
    const uint64_t restA = r.aCount - head - tail, restB = r.bCount - head - tail;
    if (restA > 0 || restB > 0) out.push_back({false, r.aBegin + head, r.bBegin + head, restA, restB});
    if (tail > 0) {
      out.push_back({true, r.aBegin + r.aCount - tail, r.bBegin + r.bCount - tail, tail, tail});
    }
    alignment.matched += head + tail;
  }
  alignment.runs = std::move(out);
}

class Taint {
 public:
  // Smallest label among the op's inputs, if any is tainted.
  std::optional<int> reads(TailRanges& t, uint64_t op) const {
    std::optional<int> out;
    for (const TailRanges::R& x : t.inputs(op)) {
      const auto l = labels_.minLabel(x.allocation, x.begin, x.end);
      if (l && (!out || *l < *out)) out = l;
    }
    return out;
  }
  void writes(TailRanges& t, uint64_t op, int label) {
    for (const TailRanges::R& x : t.outputs(op)) labels_.assign(x.allocation, x.begin, x.end, label);
  }

 private:
  IntervalLabels labels_;
};

}  // namespace

// ------------------------------------------------------------ public

bool provenNondeterministic(FirstDivergence& d, const std::string& proof) {
  const bool byParams = d.cause == Cause::kScalarParameters && !d.params.empty() &&
                        std::none_of(d.params.begin(), d.params.end(), isPointerParameter);
  if (d.path || d.a.kind != OpKind::kLaunch || !(byParams || d.cause == Cause::kUnknown)) return false;
  std::vector<std::string> evidence{proof};
  if (byParams) {
    evidence.push_back("the runs' parameters differ too, but every re-execution used the same ones: parameter "
                       "bytes can hold whatever the host left there (the unused parts of structs passed by "
                       "value, host addresses)");
    // The per-parameter lines; not the guess about host-computed values.
    for (const std::string& e : d.evidence) {
      if (!e.starts_with("a value computed on the host")) evidence.push_back(e);
    }
  } else {
    evidence.push_back("before the re-executions: " + d.summary);
  }
  evidence.push_back(kIntrinsicHint);
  d.cause = Cause::kNondeterministicKernel;
  d.mechanism = d.cause;
  d.summary = "nondeterministic kernel: re-executed from the same recorded state, it gives different results";
  d.evidence = std::move(evidence);
  return true;
}

std::vector<EnvDifference> compareHeaders(const Header& a, const Header& b) {
  std::vector<EnvDifference> out;
  compareKeyValues(a.environment, b.environment, "env ", out);
  for (size_t i = 0; i < std::max(a.gpus.size(), b.gpus.size()); ++i) {
    std::optional<std::string> ga, gb;
    if (i < a.gpus.size()) ga = gpuText(a.gpus[i]);
    if (i < b.gpus.size()) gb = gpuText(b.gpus[i]);
    if (ga != gb) out.push_back({fmt::format("gpu {}", i), ga, gb, true});
  }
  auto version = [&](const char* field, uint32_t va, uint32_t vb, bool cuda) {
    if (va != vb) out.push_back({field, versionText(va, cuda), versionText(vb, cuda), true});
  };
  version("driver", a.driverVersion, b.driverVersion, true);
  version("CUDA runtime", a.cudaRuntimeVersion, b.cudaRuntimeVersion, true);
  version("cuDNN", a.cudnnVersion, b.cudnnVersion, false);
  version("cuBLAS", a.cublasVersion, b.cublasVersion, false);
  compareKeyValues(a.libraries, b.libraries, "library ", out);
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
    return s;
  };
  if (a.commandLine != b.commandLine) {
    out.push_back({"command line", join(a.commandLine), join(b.commandLine), false});
  }
  if (a.options.hashChunkBytes != b.options.hashChunkBytes) {
    out.push_back({"hash chunk bytes", std::to_string(a.options.hashChunkBytes),
                   std::to_string(b.options.hashChunkBytes), false});
  }
  return out;
}

ProcessDiff diffTraces(const TraceReader& ta, const TraceReader& tb, const DiffOptions& options,
                       const Culprits* culprits) {
  ProcessDiff out;
  out.pathA = ta.path().string();
  out.pathB = tb.path().string();
  out.environment = compareHeaders(ta.header(), tb.header());
  for (const auto* r : {&ta, &tb}) {
    if (r->damage().unclosed) {
      out.warnings.push_back(fmt::format("{}: {}; compared up to its last complete block",
                                         r->path().string(), r->damage().detail));
    }
  }
  if (ta.header().compatVersion != tb.header().compatVersion) {
    out.warnings.push_back(fmt::format("the traces were written by different gpurr versions "
                                       "(compatibility {} and {}); fields only one of them "
                                       "records are ignored",
                                       ta.header().compatVersion, tb.header().compatVersion));
  }

  Run a, b;
  const unsigned threads = scanThreads(options.threads);
  a.reader = &ta;
  b.reader = &tb;
  a.decoders = b.decoders = threads <= 1 ? 0 : threads;
  summariseBoth(a, b, threads, options.dropAgreed);
  b.ordinals = OrdinalMap(a.ids, b.ids);
  const uint64_t start = agreedStart(a, b);
  canonicalOrder(a, start);
  canonicalOrder(b, start);
  a.ops.countLaunches();
  b.ops.countLaunches();
  out.opsA = a.ops.size();
  out.opsB = b.ops.size();
  // The operations both runs agreed on from the start, if dropped, are the
  // start of the alignment's common prefix: the rest is aligned and shifted.
  const uint64_t held = a.ops.firstHeld();
  std::vector<const uint64_t*> chunksA, chunksB;
  Alignment alignment = align(a.ops.keys(chunksA), b.ops.keys(chunksB), options.align);
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
  matchSameShape(alignment, a, b);
  const Context ctx{options, a, b, ta.header().options.hashChunkBytes};
  // A stretch of one launch in each run, the same kernel with the same
  // parameters, inputs and outputs launched with another configuration: one
  // operation (an autotuner timed block sizes and kept another). Paired, and
  // counted where the divergences are looked for. Checked for the first
  // 4096 such stretches: each reads both events again.
  std::unordered_set<uint64_t> configurationOnly;  // run A's index of each
  for (size_t r = 0, checked = 0; r < alignment.runs.size() && checked < 4096; ++r) {
    AlignedRun& run = alignment.runs[r];
    if (run.match || run.aCount != 1 || run.bCount != 1 || a.ops[run.aBegin].kind() != OpKind::kLaunch ||
        b.ops[run.bBegin].kind() != OpKind::kLaunch)
      continue;
    ++checked;
    if (!launchConfigurationOnly(ctx, eventAt(ta, a.ops[run.aBegin].seq()), eventAt(tb, b.ops[run.bBegin].seq())))
      continue;
    run.match = true;
    ++alignment.matched;
    configurationOnly.insert(run.aBegin);
  }
  out.matched = alignment.matched;
  out.alignmentBounded = alignment.bounded;
  if (alignment.bounded) {
    out.warnings.push_back(fmt::format("the runs differ too much to align minimally (more than "
                                       "{} edits in a window of {} operations); stretches are "
                                       "reported coarsely",
                                       options.align.maxEdits, options.align.window));
  }
  // A trace cut short: what the other run did afterwards was not compared.
  if (!alignment.runs.empty() && !alignment.runs.back().match) {
    const AlignedRun& last = alignment.runs.back();
    const bool aEnds = last.aCount == 0 && ta.damage().unclosed;
    const bool bEnds = last.bCount == 0 && tb.damage().unclosed;
    if (aEnds || bEnds) {
      out.warnings.push_back(fmt::format("run {} goes on for {} after run {}'s trace ends; not compared",
                                         aEnds ? 'B' : 'A',
                                         plural(aEnds ? last.bCount : last.aCount, "operation"),
                                         aEnds ? 'A' : 'B'));
      alignment.runs.pop_back();
    }
  }
  const std::vector<Group> groups = reorderings(ctx, alignment.runs);
  // A matched pair whose identities differ (its pointers, or its launch
  // configuration) by a benign difference alone is counted, its first kept,
  // and not taken for a divergence.
  auto absorbBenign = [&](uint64_t ia, uint64_t ib) {
    auto note = [&](PairedDespite& p, const OpInfo& first) {
      if (p.count++ == 0) p.first = first;
      return true;
    };
    if (configurationOnly.count(ia)) return note(out.pairedDespiteLaunchConfiguration, info(a, ia));
    const Event ea = eventAt(ta, a.ops[ia].seq()), eb = eventAt(tb, b.ops[ib].seq());
    return staleWordsOnly(ctx, ea, eb) && note(out.pairedDespiteStaleWords, info(a, ia, ea));
  };

  // The first divergence, in alignment order.
  size_t firstRun = alignment.runs.size();
  uint64_t firstOffset = 0;  // within a matched run
  for (size_t r = 0; r < alignment.runs.size() && firstRun == alignment.runs.size(); ++r) {
    const AlignedRun& run = alignment.runs[r];
    if (!run.match) {
      firstRun = r;
      break;
    }
    // Operations dropped as agreed hold no divergence.
    for (uint64_t k = run.aBegin < held ? held - run.aBegin : 0; k < run.aCount; ++k) {
      const Op& oa = a.ops[run.aBegin + k];
      const Op& ob = b.ops[run.bBegin + k];
      // A pointer that points elsewhere (matchSameShape) diverges whatever
      // the outputs, unless it is a benign difference and nothing else
      // differs.
      if ((oa.hashed() && ob.hashed() && oa.outputs != ob.outputs) || oa.key != ob.key) {
        if (oa.key != ob.key && absorbBenign(run.aBegin + k, run.bBegin + k)) continue;
        firstRun = r;
        firstOffset = k;
        break;
      }
    }
  }
  for (const AlignedRun& run : alignment.runs) {
    if (run.match) continue;
    ++out.pathDivergenceCount;
  }
  if (firstRun == alignment.runs.size()) {
    // Header differences alone do not make the runs' results differ.
    out.identical = out.pathDivergenceCount == 0;
    return out;
  }
  out.identical = false;

  FirstDivergence d;
  const AlignedRun& first = alignment.runs[firstRun];
  if (first.match) {
    classifyMatched(ctx, first.aBegin + firstOffset, first.bBegin + firstOffset, d);
  } else {
    classifyPath(ctx, alignment.runs, firstRun, groups[firstRun], d);
  }
  for (const auto& [check, run] : {std::pair{&d.determinismA, 'A'}, std::pair{&d.determinismB, 'B'}}) {
    if (*check && (*check)->distinctResults > 1 &&
        provenNondeterministic(d, fmt::format("the recorder re-ran it {} times from run {}'s state: {} distinct "
                                              "results",
                                              (*check)->runs, run, (*check)->distinctResults))) {
      break;
    }
  }
  if (environmentMatters(out.environment) &&
      (d.cause == Cause::kNondeterministicKernel || d.cause == Cause::kAlgorithmChoice ||
       d.cause == Cause::kUnknown)) {
    d.mechanism = d.cause;
    d.cause = Cause::kEnvironment;
    d.evidence.insert(d.evidence.begin(),
                      fmt::format("at this operation: {}", d.summary));
    d.summary = fmt::format("environment: the runs were recorded in different environments ({})",
                            envSummary(out.environment));
  }
  if (culprits) d.known = culprits->match(d, out.environment);

  // Blast radius and later divergences, over the rest of the alignment.
  const uint64_t startA = first.aBegin + (first.match ? firstOffset : 0);
  const uint64_t startB = first.bBegin + (first.match ? firstOffset : 0);
  TailRanges tailA(a, startA);
  TailRanges tailB(b, startB);
  Taint taint;
  int nextLabel = 1;
  std::unordered_map<size_t, int> labelOf;  // the first stretch of each reordering: its label
  BlastRadius& blast = out.blast;
  auto countA = [&](uint64_t ia, bool tainted0) {
    ++blast.laterOps;
    const bool launch = a.ops[ia].kind() == OpKind::kLaunch;
    if (launch) ++blast.laterLaunches;
    if (tainted0) {
      ++blast.taintedOps;
      if (launch) ++blast.taintedLaunches;
    }
  };
  for (size_t r = firstRun; r < alignment.runs.size(); ++r) {
    const AlignedRun& run = alignment.runs[r];
    if (!run.match) {
      // A stretch: everything it writes differs between the runs.
      std::optional<int> reads;
      for (uint64_t k = 0; k < run.aCount; ++k) {
        const auto l = taint.reads(tailA, run.aBegin + k);
        if (l && (!reads || *l < *reads)) reads = l;
      }
      for (uint64_t k = 0; k < run.bCount; ++k) {
        const auto l = taint.reads(tailB, run.bBegin + k);
        if (l && (!reads || *l < *reads)) reads = l;
      }
      const bool isFirst = r == firstRun;
      // A later stretch of a reordering: what its first wrote, written elsewhere.
      const Group group = groups[r];
      const bool later = group.any() && group.first < r;
      int label = isFirst ? 0 : later ? labelOf[group.first] : (reads ? *reads : nextLabel++);
      if (group.any() && group.first == r) labelOf[r] = label;
      if (!isFirst) {
        for (uint64_t k = 0; k < run.aCount; ++k) countA(run.aBegin + k, reads && *reads == 0);
      }
      std::optional<PathDivergence> listed;
      if (out.pathDivergences.size() < options.maxPathDivergences) {
        listed = isFirst && d.stretch ? *d.stretch : stretchOf(ctx, alignment.runs, r, group);
        listed->readsTainted = reads.has_value() || later;
      }
      if (!isFirst && !reads && !later) {
        ++blast.independentCount;
        if (blast.independent.size() < options.maxIndependent) {
          IndependentDivergence ind;
          ind.path = true;
          if (run.aCount > 0) ind.a = info(a, run.aBegin);
          if (run.bCount > 0) ind.b = info(b, run.bBegin);
          if (group.any()) {
            const Reordering m = listed && listed->reordered ? *listed->reordered
                                                             : reorderingOf(ctx, alignment.runs, r, group);
            if (run.aCount == 0 && !m.otherOps.empty()) ind.a = m.otherOps.front();
            if (run.bCount == 0 && !m.otherOps.empty()) ind.b = m.otherOps.front();
            ind.reason = fmt::format("reordered: {}, reading no data derived from an earlier divergence",
                                     reorderingText(m));
          } else {
            ind.reason = fmt::format("different path ({} in run A, {} in run B) reading no "
                                     "data derived from an earlier divergence",
                                     plural(run.aCount, "operation"), plural(run.bCount, "operation"));
          }
          blast.independent.push_back(std::move(ind));
        }
      }
      if (listed) out.pathDivergences.push_back(std::move(*listed));
      for (uint64_t k = 0; k < run.aCount; ++k) taint.writes(tailA, run.aBegin + k, label);
      for (uint64_t k = 0; k < run.bCount; ++k) taint.writes(tailB, run.bBegin + k, label);
      tailA.release(run.aBegin + run.aCount);
      tailB.release(run.bBegin + run.bCount);
      continue;
    }
    const uint64_t from = r == firstRun ? firstOffset : 0;
    for (uint64_t k = from; k < run.aCount; ++k) {
      const uint64_t ia = run.aBegin + k, ib = run.bBegin + k;
      const Op& oa = a.ops[ia];
      const Op& ob = b.ops[ib];
      if (r == firstRun && k == firstOffset) {
        taint.writes(tailA, ia, 0);
        taint.writes(tailB, ib, 0);
        continue;
      }
      const auto reads = taint.reads(tailA, ia);
      countA(ia, reads && *reads == 0);
      const bool comparable = oa.hashed() && ob.hashed();
      const bool benign = oa.key != ob.key && absorbBenign(ia, ib);
      const bool differs = comparable && oa.outputs != ob.outputs && !benign;
      if (differs) {
        ++blast.divergentOps;
        if (reads) {
          ++blast.explainedOps;
          taint.writes(tailA, ia, *reads);
          taint.writes(tailB, ib, *reads);
        } else {
          ++blast.independentCount;
          const int label = nextLabel++;
          if (blast.independent.size() < options.maxIndependent) {
            const Event ea = eventAt(ta, oa.seq()), eb = eventAt(tb, ob.seq());
            IndependentDivergence ind;
            ind.a = info(a, ia, ea);
            ind.b = info(b, ib, eb);
            const bool sameIn = sameInputs(ctx, ea, eb), sameParams = sameParameters(ctx, ea, eb);
            ind.reason = fmt::format(
                "outputs differ; reads no data derived from an earlier divergence ({}{})",
                sameIn ? "inputs identical" : "inputs differ",
                sameParams ? ", parameters identical" : ", parameters differ");
            blast.independent.push_back(std::move(ind));
          }
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
  out.firstDivergence = std::move(d);
  return out;
}

}  // namespace gpurr::diff
