// Plain value types for everything a trace holds. The rest of gpurr works with
// these; only trace_format/codec.cpp maps them to and from Cap'n Proto
// (trace.capnp). Field meanings are specified in FORMAT.md.
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace gpurr::trace {

// Exact version of the container and schema this code writes. A reader
// accepts exactly this version, or an older one it still knows.
inline constexpr uint32_t kFormatVersion = 1;
// Forward-compatibility number: bumped when a change lets old readers still
// read new traces (new fields with defaults). Reported, never rejected.
// 2: KernelLaunch.captured, captureId; 3: Event.origin; 4: KernelLaunch.reads;
// 5: Memcpy, Memset and GraphLaunch .captured, .captureId; 6: Index.hostRegions;
// 7: Origin.inPlace; 8: Index.stoppedAfterStep; 9: EventsDropped,
// Index.recorderMemory, Collective events; 10: Index.layerSteps;
// 11: Origin.benchmarking; 12: ModuleLoad.digest; 13: the checksums file,
// KernelLaunch.number
inline constexpr uint32_t kCompatVersion = 14;

// Content address of a blob: XXH3-128 of its (decoded) bytes.
struct BlobId {
  uint64_t high = 0;
  uint64_t low = 0;
  bool operator==(const BlobId&) const = default;
  auto operator<=>(const BlobId&) const = default;
  bool empty() const { return high == 0 && low == 0; }
  std::string hex() const;  // 32 lowercase hex digits, high half first
  static std::optional<BlobId> fromHex(std::string_view hex);
};

// How a blob's bytes are stored on disk (before zstd).
enum class BlobEncoding : uint8_t {
  kRaw = 0,         // the bytes as they are
  kBytePlanes4 = 1, // 4-byte elements split into 4 byte planes (floats)
  kBytePlanes2 = 2, // 2-byte elements split into 2 byte planes (halves)
};

struct BlobRef {
  BlobId id;
  uint64_t size = 0;  // decoded size in bytes
  BlobEncoding encoding = BlobEncoding::kRaw;
  bool operator==(const BlobRef&) const = default;
};

struct KeyValue {
  std::string key;
  std::string value;
  bool operator==(const KeyValue&) const = default;
};

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  bool operator==(const Dim3&) const = default;
};

// ---------------------------------------------------------------- header

struct GpuInfo {
  uint32_t ordinal = 0;
  std::string name;
  std::string uuid;          // "GPU-xxxxxxxx-..."
  uint32_t smCount = 0;
  uint32_t ccMajor = 0, ccMinor = 0;
  uint64_t memoryBytes = 0;
  std::string pciBusId;
  bool operator==(const GpuInfo&) const = default;
};

struct RecordingOptions {
  bool hashInputs = true;
  bool hashOutputs = true;
  bool sync = false;               // serialised recording (--sync)
  bool captureHostData = false;    // host-to-device bytes kept as blobs
  bool full = false;               // everything needed for whole-stream replay
  uint64_t hashChunkBytes = 64 * 1024;
  std::string launchRange;         // --launches, as given ("" = all)
  std::string kernelRegex;         // --kernels, as given ("" = all)
  std::string snapshot;            // --snapshot selection ("" = none)
  uint32_t checkDeterminism = 0;   // re-runs per selected launch (0 = off)
  std::string steps;               // --steps, as given ("" = all)
  bool operator==(const RecordingOptions&) const = default;
};

// A range [start, end) of the recorded process's host address space that was
// mapped readable: parameter bytes whose value lies in one are host
// addresses, which differ between runs without meaning anything.
struct HostRegion {
  uint64_t start = 0;
  uint64_t end = 0;
  bool operator==(const HostRegion&) const = default;
};

// The memory the recorder held on the program's behalf, as it closed the
// trace (Index.recorderMemory): peaks, in bytes.
struct RecorderMemory {
  uint64_t hostBytes = 0;          // host memory: the three below together
  uint64_t queueBytes = 0;         // events waiting for the trace thread (--trace-queue)
  uint64_t snapshotBytes = 0;      // snapshots between their copy and the blob store (--snapshot-memory)
  uint64_t writerBytes = 0;        // blocks being compressed and written
  uint64_t pinnedHostBytes = 0;    // pinned host memory: hash rings, snapshot staging
  uint64_t deviceBytes = 0;        // GPU memory of its own (the hash kernel's counters)
  uint64_t eventsDropped = 0;      // events dropped because the queue was full
  bool operator==(const RecorderMemory&) const = default;
};

// How the framework layer attributed the training steps the program
// completed (Index.layerSteps; docs/RECORDING.md, "What the layer costs").
struct LayerSteps {
  uint64_t observed = 0;   // observed in full (learned, or every op observed)
  uint64_t followed = 0;   // followed from templates to their end
  uint64_t unmatched = 0;  // with an operation that matched no template: observed from there on
  uint64_t templates = 0;  // kinds of step learned, held when the recording ended
  uint64_t switches = 0;   // times another template was taken within a step
  bool operator==(const LayerSteps&) const = default;
};

struct Header {
  uint32_t formatVersion = kFormatVersion;
  uint32_t compatVersion = kCompatVersion;
  std::string toolVersion;
  std::vector<std::string> commandLine;
  std::string workingDirectory;
  std::vector<KeyValue> environment;  // determinism-relevant variables only
  std::string hostname;
  uint32_t pid = 0;
  int32_t rank = -1;                   // distributed rank, -1 when none
  uint64_t startTimeNs = 0;            // wall clock, ns since the Unix epoch
  std::vector<GpuInfo> gpus;
  uint32_t driverVersion = 0;          // as cuDriverGetVersion: 13000 = 13.0
  uint32_t cudaRuntimeVersion = 0;
  uint32_t cudnnVersion = 0;           // as cudnnGetVersion, 0 = not loaded
  uint32_t cublasVersion = 0;
  std::vector<KeyValue> libraries;     // other versions: NCCL, cuRAND, PyTorch
  RecordingOptions options;
  // Quirk flags (rr's idea): their default describes older recorders.
  bool pointersResolved = true;        // pointer params carry allocation ordinals
  bool operator==(const Header&) const = default;
};

// ---------------------------------------------------------------- events

// A device byte range, with the allocation it lies in. Ordinals are assigned
// by the recorder in allocation order and are comparable between two runs of
// the same program, unlike addresses.
// What ended a launch's range: the allocation's (readable) end, or the end of
// the block PyTorch's caching allocator gave the tensor (one allocation holds
// many blocks).
enum class RangeBound : uint8_t { kAllocation = 0, kBlock = 1 };

struct DeviceRange {
  uint64_t address = 0;
  uint64_t size = 0;
  uint32_t allocation = 0;  // ordinal; 0 = not inside a known allocation
  uint64_t offset = 0;      // from the allocation's start
  RangeBound bound = RangeBound::kAllocation;  // a launch's ranges only
  bool operator==(const DeviceRange&) const = default;
};

struct RangeDigest {
  DeviceRange range;
  uint64_t digest = 0;                  // buffer hash of the whole range
  std::vector<uint64_t> chunkDigests;   // optional: one per 64 KiB chunk
  std::optional<BlobRef> snapshot = std::nullopt;  // optional: the full bytes
  bool operator==(const RangeDigest&) const = default;
};

enum class AllocationKind : uint8_t {
  kDevice = 0,       // cuMemAlloc / cuMemAllocPitch
  kAsync = 1,        // cuMemAllocAsync / pools
  kVmm = 2,          // cuMemAddressReserve + cuMemCreate + cuMemMap
  kManaged = 3,      // cuMemAllocManaged
  kHostMapped = 4,   // cuMemHostAlloc(DEVICEMAP) / registered host memory
  kModuleGlobal = 5, // __device__ variables of a loaded module
  kOther = 6,        // another process's memory: IPC handle opened, pool allocation imported
};

struct Allocation {
  uint32_t ordinal = 0;  // 1, 2, 3... in allocation order
  uint64_t address = 0;
  uint64_t size = 0;
  AllocationKind kind = AllocationKind::kDevice;
  uint32_t device = 0;
  uint64_t stream = 0;   // for stream-ordered allocations
  bool operator==(const Allocation&) const = default;
};

struct Free {
  uint32_t ordinal = 0;
  uint64_t address = 0;
  bool operator==(const Free&) const = default;
};

struct ModuleLoad {
  uint32_t ordinal = 0;   // 1, 2, 3... in load order
  BlobRef cubin;          // the image as loaded (cubin, fatbin or PTX)
  uint32_t arch = 0;      // SM architecture of the image, e.g. 90; 0 = unknown
  uint64_t digest = 0;    // buffer hash (hash::hashBuffer) of the image; 0 = not given
  bool operator==(const ModuleLoad&) const = default;
};

enum class LaunchApi : uint8_t {
  kLaunchKernel = 0,
  kLaunchKernelEx = 1,
  kLaunchCooperative = 2,
  kLaunchKernelPtsz = 3,
  kLaunchKernelExPtsz = 4,
  kLaunchCooperativePtsz = 5,
  kLaunchHost = 6,
};

struct ParamInfo {
  uint32_t offset = 0;
  uint32_t size = 0;
  bool operator==(const ParamInfo&) const = default;
};

// An 8-byte parameter word that held a device pointer.
struct PointerParam {
  uint32_t byteOffset = 0;  // in the parameter buffer
  uint32_t allocation = 0;  // ordinal of the allocation it points into
  uint64_t offset = 0;      // from that allocation's start
  bool operator==(const PointerParam&) const = default;
};

struct LaunchAttribute {
  uint32_t id = 0;             // CUlaunchAttributeID
  std::vector<uint8_t> value;  // raw bytes of CUlaunchAttributeValue
  bool operator==(const LaunchAttribute&) const = default;
};

struct AlgorithmCandidate {
  std::string algorithm;
  float timeMs = 0;
  bool operator==(const AlgorithmCandidate&) const = default;
};

// A library call that chose an algorithm (cuDNN engine, cuBLASLt algo...).
struct AlgorithmChoice {
  std::string library;     // "cudnn", "cublasLt", "cublas"
  std::string call;        // "cudnnBackendExecute", "cublasLtMatmul"...
  std::string algorithm;   // the choice, in a stable text form
  std::vector<KeyValue> attributes;  // shapes, types, knobs, workspace...
  std::vector<AlgorithmCandidate> candidates;  // when the program autotuned
  bool operator==(const AlgorithmChoice&) const = default;
};

struct RngState {
  std::string source;   // "philox" (PyTorch), "curand"
  std::string generator;
  uint64_t seed = 0;
  uint64_t offset = 0;
  uint32_t paramOffset = 0;  // where in the parameter bytes it was found
  bool operator==(const RngState&) const = default;
};

struct FrameworkOp {
  std::string name;  // e.g. "aten::index_add_"
  bool operator==(const FrameworkOp&) const = default;
};

struct Note {
  std::string text;
  bool operator==(const Note&) const = default;
};

// Whether the recorder re-ran the launch in process and got equal outputs.
struct DeterminismCheck {
  uint32_t runs = 0;
  uint32_t distinctResults = 0;
  bool operator==(const DeterminismCheck&) const = default;
};

using Annotation = std::variant<AlgorithmChoice, RngState, FrameworkOp, Note, DeterminismCheck>;

inline constexpr uint64_t kNoLaunchNumber = UINT64_MAX;

struct KernelLaunch {
  LaunchApi api = LaunchApi::kLaunchKernel;
  uint64_t context = 0;
  uint64_t stream = 0;
  uint32_t module = 0;      // ModuleLoad ordinal; 0 = unknown
  std::string function;     // mangled name
  Dim3 grid, block, cluster{0, 0, 0};  // cluster 0,0,0 = none
  uint32_t sharedMemBytes = 0;         // dynamic shared memory
  std::vector<LaunchAttribute> attributes;
  std::vector<uint8_t> params;         // packed as the kernel receives them
  std::vector<ParamInfo> paramLayout;
  std::vector<PointerParam> pointers;
  std::vector<RangeDigest> inputs;     // digests taken before the launch
  std::vector<RangeDigest> outputs;    // digests taken after it
  // Ranges the launch only reads (its framework op's schema says so): not in
  // `outputs`, never hashed after it; `digest` is 0.
  std::vector<RangeDigest> reads;
  std::vector<Annotation> annotations;
  bool hashed = true;                  // false when selection skipped hashing
  // Enqueued on a stream being captured into a CUDA graph: the kernel did
  // not run then (the graph's launch runs it), so nothing was hashed.
  bool captured = false;
  uint64_t captureId = 0;  // cuStreamGetCaptureInfo's id of that capture
  // The recorder's cost for this launch: time the program's thread spent in
  // its callbacks (ns; 0 = not measured) and GPU operations it enqueued.
  uint32_t recorderNs = 0;
  uint16_t recorderOps = 0;
  // The recorder's number for it, as --launches and --snapshot count;
  // kNoLaunchNumber when it has none (captured, or an older trace).
  uint64_t number = kNoLaunchNumber;
  bool operator==(const KernelLaunch&) const = default;
};

// Appends a parameter of `size` bytes to `launch.params` at the next offset
// aligned to `align` (as the CUDA ABI lays parameters out), records it in
// `paramLayout` and returns its offset. For programs that build launches:
// trace generators, tests, benchmarks.
uint32_t appendParam(KernelLaunch& launch, const void* bytes, uint32_t size, uint32_t align);

// Appends the 8-byte device pointer `address`, recorded as a PointerParam
// into allocation `ordinal` at `offset`; returns its offset.
uint32_t appendPointerParam(KernelLaunch& launch, uint64_t address, uint32_t ordinal,
                            uint64_t offset);

enum class MemcpyKind : uint8_t {
  kHostToDevice = 0,
  kDeviceToHost = 1,
  kDeviceToDevice = 2,
  kHostToHost = 3,
  kPeer = 4,
  kUnknown = 5,
};

struct Memcpy {
  MemcpyKind kind = MemcpyKind::kUnknown;
  uint64_t stream = 0;
  bool async = false;
  uint64_t size = 0;
  DeviceRange dst;   // device side (address only for host memory)
  DeviceRange src;
  uint64_t digest = 0;              // buffer hash of the bytes written
  std::optional<BlobRef> data;      // the bytes, with --capture-host-data
  // As KernelLaunch::captured: enqueued on a stream being captured into a
  // CUDA graph, so it did not run then and nothing was hashed.
  bool captured = false;
  uint64_t captureId = 0;
  bool operator==(const Memcpy&) const = default;
};

struct Memset {
  uint64_t stream = 0;
  bool async = false;
  DeviceRange dst;
  uint32_t value = 0;
  uint32_t elementSize = 1;  // 1, 2 or 4
  uint64_t digest = 0;       // buffer hash of the range after the set
  bool captured = false;     // as Memcpy::captured
  uint64_t captureId = 0;
  bool operator==(const Memset&) const = default;
};

enum class SyncKind : uint8_t {
  kContextSynchronize = 0,
  kStreamSynchronize = 1,
  kEventRecord = 2,
  kEventSynchronize = 3,
  kStreamWaitEvent = 4,
  kStreamQuery = 5,
  kEventQuery = 6,
};

struct Sync {
  SyncKind kind = SyncKind::kContextSynchronize;
  uint64_t stream = 0;
  uint64_t event = 0;
  bool operator==(const Sync&) const = default;
};

struct GraphLaunch {
  uint64_t graphExec = 0;
  uint64_t stream = 0;
  uint32_t nodeCount = 0;
  std::vector<RangeDigest> inputs;
  std::vector<RangeDigest> outputs;
  bool captured = false;  // as Memcpy::captured: launched into a capture, a node of another graph
  uint64_t captureId = 0;
  bool operator==(const GraphLaunch&) const = default;
};

// What a collective does (NCCL's operations; c10d's map onto them).
enum class CollectiveOp : uint8_t {
  kOther = 0,
  kAllReduce = 1,
  kReduceScatter = 2,
  kAllGather = 3,
  kBroadcast = 4,
  kReduce = 5,
  kSend = 6,
  kRecv = 7,
  kAllToAll = 8,
  kGather = 9,
  kScatter = 10,
  kBarrier = 11,
};

// Who saw the collective: the NCCL API (the recorder's wrappers), or a
// framework's own view of it (PyTorch's c10d, whatever its backend).
enum class CollectiveSource : uint8_t { kNccl = 0, kFramework = 1 };

// One collective operation of a communicator, an operation whose inputs are
// what this rank sends and whose outputs are what it receives.
struct Collective {
  CollectiveSource source = CollectiveSource::kNccl;
  std::string call;               // "ncclAllReduce", "allreduce_"
  CollectiveOp op = CollectiveOp::kOther;
  uint64_t communicator = 0;      // stable id (FORMAT.md): equal in every rank and run
  int32_t rank = -1;              // this process's rank in it; -1 unknown
  int32_t size = 0;               // ranks in it; 0 unknown
  std::string dataType;           // "float32"...
  uint64_t count = 0;             // elements, as the call counts them
  std::string reduceOp;           // "sum"...; empty when nothing is reduced
  int32_t peer = -1;              // root or peer; -1 none
  uint64_t stream = 0;
  uint64_t sequence = 0;          // this communicator's collectives before it (same source)
  uint64_t group = 0;             // 0: alone; else its group's number
  std::vector<RangeDigest> inputs;   // send buffer, before
  std::vector<RangeDigest> outputs;  // receive buffer, after (after the group ends)
  std::string processGroup;       // framework: the process group's name
  int64_t frameworkSequence = -1; // framework: its own sequence number; -1 none
  bool operator==(const Collective&) const = default;
};

// Events the recorder made but could not keep: its trace thread fell behind
// and the memory for events waiting for it was full. The marker takes their
// place in the sequence: they came after the event before it and before the
// one after it, between `firstTimeNs` and `lastTimeNs`.
struct EventsDropped {
  // How many of each kind, indexed as Payload's alternatives (launch,
  // memcpy, memset, alloc, free, module, sync, graph, collective).
  std::array<uint64_t, 9> byKind{};
  uint64_t firstTimeNs = 0, lastTimeNs = 0;
  uint64_t total() const {
    uint64_t n = 0;
    for (uint64_t c : byKind) n += c;
    return n;
  }
  bool operator==(const EventsDropped&) const = default;
};

using Payload = std::variant<KernelLaunch, Memcpy, Memset, Allocation, Free, ModuleLoad,
                             Sync, GraphLaunch, Collective, EventsDropped>;

enum class Phase : uint8_t { kUnknown = 0, kForward = 1, kBackward = 2 };

// Whether an op updates one of its arguments in place, reading what it
// writes (its schema's `Tensor(a!) self`), or writes only its outputs.
enum class InPlace : uint8_t { kUnknown = 0, kNo = 1, kYes = 2 };

// Where an operation came from in the program's framework (PyTorch, through
// gpurr's framework layer): the op that issued it, its module, the source
// line and the training step.
struct Origin {
  std::string op;                    // innermost op ("aten::index_add_"), or a user range
  std::vector<std::string> opStack;  // outermost first, ending with op
  Phase phase = Phase::kUnknown;
  std::string forwardOp = {};        // backward: the forward op it differentiates
  std::string module = {};           // "model.encoder.layers.3"; in backward, the forward op's
  std::string file = {};             // the program's line that issued the (forward) op
  uint32_t line = 0;
  int64_t step = -1;                 // training steps completed before it; -1 unknown
  uint64_t stepLaunch = 0;           // kernel launches of the same step before it
  InPlace inPlace = InPlace::kUnknown;  // whether `op` updates an argument in place
  // It ran while the framework timed candidate implementations (Inductor's
  // autotuner): not one of the program's computations, its results discarded.
  bool benchmarking = false;
  // Its op, module and line are those of the operation at its place in a
  // step the framework layer observed earlier (it followed that step's
  // template, FORMAT.md): exact for a step that runs the same ops in the
  // same order, the same modules' included.
  bool byPlace = false;
  bool operator==(const Origin&) const = default;
};

struct Event {
  uint64_t seq = 0;          // global order of the recorded API calls, from 0
  uint64_t timeNs = 0;       // host time of the call, ns since recording began
  uint32_t thread = 0;       // host thread, numbered in order of first call
  Payload payload;
  std::optional<Origin> origin = std::nullopt;  // absent when no framework layer ran
  bool operator==(const Event&) const = default;
};


// Short names of the event kinds, in the order of Payload's alternatives.
inline constexpr const char* kEventKindNames[] = {"launch", "memcpy", "memset",     "alloc",  "free",
                                                  "module", "sync",   "graph",      "collective", "dropped"};
static_assert(std::size(kEventKindNames) == std::variant_size_v<Payload>);
inline const char* kindName(const Payload& payload) { return kEventKindNames[payload.index()]; }

// Whether an event's payload is of an operation that ran when recorded (not
// captured into a graph); isOperation(Event) also sets aside what ran while
// the framework timed candidates.
inline bool ranWhenRecorded(const Payload& p) {
  if (const auto* k = std::get_if<KernelLaunch>(&p)) return !k->captured;
  if (const auto* m = std::get_if<Memcpy>(&p)) return !m->captured;
  if (const auto* m = std::get_if<Memset>(&p)) return !m->captured;
  if (const auto* g = std::get_if<GraphLaunch>(&p)) return !g->captured;
  return std::holds_alternative<Collective>(p);
}
// As isOperation(ScanEvent) (scan.h), for a decoded event.
inline bool isOperation(const Event& e) {
  return ranWhenRecorded(e.payload) && !(e.origin && e.origin->benchmarking);
}
// "graph launch (12 nodes)"; "graph launch" where the recorder did not read
// its nodes (nodeCount 0).
std::string describe(const GraphLaunch& graph);
// "12 events dropped (10 launches, 2 memcpys)".
std::string describe(const EventsDropped& dropped);
// "ncclAllReduce sum 1024 float32 (rank 0 of 2, communicator 9f3a..., #3)".
std::string describe(const Collective& collective);
// The framework op of an event: its origin's, else a FrameworkOp annotation's
// (traces written without a framework layer); empty when neither says.
std::string frameworkOpOf(const Event& event);
// How describe() places an operation in its step: a launch by its number
// ("step 0 (launch 4 of the step)"), a copy or memset by the launches before
// it ("step 0 (after 3 launches of the step)"), or not at all.
enum class OriginStep : uint8_t { kLaunch, kOperation, kNone };
// "aten::index_add_ (backward of aten::index_select) in model.embed, train.py:42, step 3 (launch 37 of the step)"
std::string describe(const Origin& origin, OriginStep step = OriginStep::kLaunch);
// An origin's source line as the text forms show it: the program's file by
// its name ("train.py:17"), a library's from its package
// ("lightning/pytorch/loops/fit_loop.py:43"); "" when none was recorded.
std::string sourceLine(const Origin& origin);
std::string sourceLine(std::string_view file, uint32_t line);
const char* toString(Phase phase);
const char* toString(InPlace inPlace);
const char* toString(RangeBound bound);
const char* toString(AllocationKind kind);
const char* toString(LaunchApi api);
const char* toString(MemcpyKind kind);
const char* toString(SyncKind kind);
const char* toString(CollectiveOp op);
const char* toString(CollectiveSource source);
const char* toString(BlobEncoding encoding);

}  // namespace gpurr::trace
