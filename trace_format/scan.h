// A lighter read path for whole-trace passes (gpurr diff): decodes only what a
// comparison of two runs needs, with no per-event allocation, into views that
// stay valid during the callback only. Chunk digests, snapshots, annotations,
// launch attributes and blob references are skipped (flags say whether they
// exist); TraceReader::forEach decodes everything when a pass needs it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "trace_format/events.h"
#include "trace_format/trace.h"

namespace gpurr::trace {

struct ScanRange {
  DeviceRange range;
  uint64_t digest = 0;
  bool hasChunkDigests = false;
};

// What an event is: the index of its alternative in Payload (kindName()).
enum class EventKind : uint8_t {
  kLaunch = 0,
  kMemcpy = 1,
  kMemset = 2,
  kAllocation = 3,
  kFree = 4,
  kModuleLoad = 5,
  kSync = 6,
  kGraphLaunch = 7,
  kCollective = 8,
  kEventsDropped = 9,
};
static_assert(static_cast<size_t>(EventKind::kEventsDropped) + 1 == std::variant_size_v<Payload>);

// One event, summarised. Which fields mean something depends on `kind`.
struct ScanEvent {
  uint64_t seq = 0;
  EventKind kind = EventKind::kLaunch;
  uint32_t thread = 0;  // Event::thread
  uint64_t stream = 0;  // launch, memcpy, memset, sync, graph
  // Launch.
  std::string_view function;  // mangled name
  // The function's block-local id and the block's index: equal pairs name
  // the same function, so a pass can cache per-function work.
  uint32_t functionId = 0;
  size_t blockIndex = 0;
  uint32_t module = 0;
  Dim3 grid, block, cluster{0, 0, 0};
  uint32_t sharedMemBytes = 0;
  std::span<const uint8_t> params;
  std::span<const PointerParam> pointers;
  bool hashed = true;
  // Launch, memcpy, memset, graph: enqueued into a CUDA graph's capture,
  // so it did not run then (KernelLaunch::captured).
  bool captured = false;
  // Launch, memcpy, memset: its origin says that it ran while the framework
  // timed candidates (Origin::benchmarking).
  bool benchmarking = false;
  // Where its origin says the program issued it (originSite); 0 without
  // an origin.
  uint64_t site = 0;
  // The training steps its origin says were completed before it; -1
  // unknown or without an origin.
  int64_t step = -1;
  bool hasAnnotations = false;
  // Launch, graph and collective: digests before and after; memcpy and memset: `outputs`
  // holds the written range with its digest, memcpy's `inputs` its source.
  std::span<const ScanRange> inputs, outputs;
  // Launch: the ranges it only reads (KernelLaunch::reads; digest 0).
  std::span<const ScanRange> reads;
  // Memcpy.
  MemcpyKind memcpyKind = MemcpyKind::kUnknown;
  bool hasData = false;
  bool async = false;  // cuMemcpy*Async: the host did not wait for it
  // Memset.
  uint32_t value = 0, elementSize = 1;
  // Sync: what kind, and the CUDA event recorded, waited for or queried
  // (0: none).
  SyncKind syncKind = SyncKind::kContextSynchronize;
  uint64_t syncEvent = 0;
  // Allocation, free and module load.
  uint32_t ordinal = 0;
  uint64_t imageDigest = 0;  // module load: ModuleLoad::digest
  uint64_t address = 0, size = 0;  // events dropped: size is how many (EventsDropped::total)
  AllocationKind allocationKind = AllocationKind::kDevice;
  // Graph.
  uint32_t nodeCount = 0;
  // Collective (also `stream`; `inputs` the send buffer before, `outputs`
  // the receive buffer after).
  CollectiveSource collectiveSource = CollectiveSource::kNccl;
  CollectiveOp collectiveOp = CollectiveOp::kOther;
  std::string_view call, dataType, reduceOp, processGroup;
  uint64_t communicator = 0, collectiveSequence = 0, count = 0;
  int32_t rank = -1, commSize = 0, peer = -1;
};

// An operation that ran when recorded: a launch, copy, set or graph launch
// of the device's command stream, not one captured into a graph nor run
// while the framework timed candidates (an autotuner's, whose results it
// discards); or a collective (what this rank sent, what it received). The
// diff aligns these; the report numbers them alike.
inline bool isOperation(const ScanEvent& e) {
  return (e.kind == EventKind::kLaunch || e.kind == EventKind::kMemcpy || e.kind == EventKind::kMemset ||
          e.kind == EventKind::kGraphLaunch || e.kind == EventKind::kCollective) &&
         !e.captured && !e.benchmarking;
}

// Where an origin says the program issued an operation, never 0: its high
// 32 bits a hash of its op, phase, forward op, module, source file and line;
// its low 32 bits a hash of the same without file and line (where in the
// model, whatever line an edit moved it to), or 0 where the origin names no
// op (the layer did not observe it). Not its step nor its place in the
// step: the same operation of the same program has the same site in every
// step of every run, whatever ran before it.
uint64_t originSite(std::string_view op, Phase phase, std::string_view forwardOp, std::string_view module,
                    std::string_view file, uint32_t line);

// Whether a copy of this kind reads device memory (its source is in an
// allocation of the device, a peer's included): the one answer the diff's
// summary, its ranges and blast radius, and the report's timeline share.
// A copy of unknown kind reads none.
inline bool readsDeviceMemory(MemcpyKind kind) {
  return kind == MemcpyKind::kDeviceToDevice || kind == MemcpyKind::kPeer || kind == MemcpyKind::kDeviceToHost;
}

// `requested`, or when it is 0 the number of cores
// (std::thread::hardware_concurrency).
unsigned scanThreads(unsigned requested);

// The events of a trace block by block, in order, from the block holding
// `fromSeq` (events before `fromSeq` are skipped). With `decoders` > 0 that
// many threads decompress and decode the next blocks (FORMAT.md §4: each
// block stands alone) while the caller visits the current one, with no more
// than 2 * decoders + 2 blocks ahead; with 0 the caller's thread decodes
// each block as it visits it. The caller sees the same events in the same
// order, and the same errors at the same point, either way. A view stays
// valid during its callback only.
class EventScanner {
 public:
  explicit EventScanner(const TraceReader& reader, uint64_t fromSeq = 0, unsigned decoders = 0);
  ~EventScanner();
  EventScanner(const EventScanner&) = delete;
  EventScanner& operator=(const EventScanner&) = delete;

  // Visits the events of the next block; false when every block has been
  // visited (nothing was visited then) or `visit` returned false. Throws
  // TraceError on a corrupt block, after visiting the events before the
  // damage.
  bool next(const std::function<bool(const ScanEvent&)>& visit);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Calls `visit` for every event with seq >= `fromSeq`, in order; stops when
// it returns false. Throws TraceError on a corrupt block, as forEach does.
// `decoders` as EventScanner's.
void scanEvents(const TraceReader& reader, const std::function<bool(const ScanEvent&)>& visit,
                uint64_t fromSeq = 0, unsigned decoders = 0);

// Decompresses every block of the events file and discards the result;
// returns the number of bytes produced. A yardstick for benchmarks: no pass
// over a trace can be faster than this.
uint64_t decompressAll(const TraceReader& reader);

}  // namespace gpurr::trace
