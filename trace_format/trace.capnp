# Schema of a gpurr trace. FORMAT.md says how these messages are laid out in
# the files of a trace directory.
#
# Rules for changing this file: never renumber or retype a field, never reuse
# a removed number; add fields at the end with defaults that describe what
# older recorders did; add new kinds of events as new union members. Bump
# kCompatVersion (events.h) for additions old readers can skip, and
# kFormatVersion only for changes they cannot.

@0xe1a4aa4f6da9b516;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("gpurr::capnp_schema");

# ------------------------------------------------------------ framing

# Precedes every block of the events file. Encoded as an ordinary single-
# segment message (8-byte segment table, then the struct).
struct BlockHeader {
  magic @0 :UInt64;            # 0x4b4c425252555047, "GPURRBLK" little-endian
  compressedSize @1 :UInt32;   # bytes of the zstd frame that follows
  uncompressedSize @2 :UInt32; # bytes of the frames once decompressed
  firstSeq @3 :UInt64;         # seq of the block's first event
  eventCount @4 :UInt32;       # events in the block (function defs excluded)
  launchCount @5 :UInt32;      # kernel launches among them
  firstTimeNs @6 :UInt64;
  lastTimeNs @7 :UInt64;
}

# The optional `index` file, written when the recorder closes the trace.
struct Index {
  blocks @0 :List(IndexEntry);
  hostRegions @1 :List(HostRegion);  # readable host memory when the recording ended (compatVersion 6)
  # The recorder stopped the program after this training step (gpurr record
  # --until-step); -1 when the program ended by itself (compatVersion 8).
  stoppedAfterStep @2 :Int64 = -1;
  # The memory the recorder held on the program's behalf; null when not
  # reported (compatVersion 9).
  recorderMemory @3 :RecorderMemory;
  # How gpurr's framework layer attributed the training steps; null when no
  # step was completed (compatVersion 10).
  layerSteps @4 :LayerSteps;
}

# Training steps by how they were attributed (FORMAT.md §5).
struct LayerSteps {
  observed @0 :UInt64;   # observed in full
  followed @1 :UInt64;   # followed from templates to their end
  unmatched @2 :UInt64;  # with an operation that matched no template
  templates @3 :UInt64;  # kinds of step learned, held at the end
  switches @4 :UInt64;   # times another template was taken within a step
}

# Peaks, in bytes (FORMAT.md §5).
struct RecorderMemory {
  hostBytes @0 :UInt64;        # host memory: the next three together
  queueBytes @1 :UInt64;       # events waiting for the trace thread
  snapshotBytes @2 :UInt64;    # snapshots between their copy and the blob store
  writerBytes @3 :UInt64;      # blocks being compressed and written
  pinnedHostBytes @4 :UInt64;  # pinned host memory: hash rings, snapshot staging
  deviceBytes @5 :UInt64;      # GPU memory of the recorder's own
  eventsDropped @6 :UInt64;    # events dropped because the queue was full
}

# A range of the recorded process's host address space that was mapped
# readable: [start, end).
struct HostRegion {
  start @0 :UInt64;
  end @1 :UInt64;
}

struct IndexEntry {
  fileOffset @0 :UInt64;       # of the block header in `events`
  firstSeq @1 :UInt64;
  eventCount @2 :UInt32;
  launchCount @3 :UInt32;
  firstTimeNs @4 :UInt64;
  lastTimeNs @5 :UInt64;
  compressedSize @6 :UInt32;
  uncompressedSize @7 :UInt32;
}

# One message in a decompressed block.
struct Frame {
  union {
    event @0 :Event;
    # Declares a block-local function id used by later launches of the same
    # block. Every block declares the functions it uses, so blocks decode
    # independently.
    function @1 :FunctionDef;
  }
}

struct FunctionDef {
  id @0 :UInt32;               # block-local, from 0
  module @1 :UInt32;           # ModuleLoad ordinal, 0 = unknown
  name @2 :Text;               # mangled name
}

# ------------------------------------------------------------ header

struct KeyValue {
  key @0 :Text;
  value @1 :Text;
}

struct Gpu {
  ordinal @0 :UInt32;
  name @1 :Text;
  uuid @2 :Text;
  smCount @3 :UInt32;
  ccMajor @4 :UInt32;
  ccMinor @5 :UInt32;
  memoryBytes @6 :UInt64;
  pciBusId @7 :Text;
}

struct RecordingOptions {
  hashInputs @0 :Bool = true;
  hashOutputs @1 :Bool = true;
  sync @2 :Bool;
  captureHostData @3 :Bool;
  full @4 :Bool;
  hashChunkBytes @5 :UInt64 = 65536;
  launchRange @6 :Text;
  kernelRegex @7 :Text;
  snapshot @8 :Text;
  checkDeterminism @9 :UInt32;
  steps @10 :Text;             # training steps hashed, A:B[:N] (compatVersion 3)
}

struct Header {
  formatVersion @0 :UInt32;    # exact; must equal the `version` file
  compatVersion @1 :UInt32;    # forward-compatibility number
  toolVersion @2 :Text;
  commandLine @3 :List(Text);
  workingDirectory @4 :Text;
  environment @5 :List(KeyValue);
  hostname @6 :Text;
  pid @7 :UInt32;
  rank @8 :Int32 = -1;
  startTimeNs @9 :UInt64;
  gpus @10 :List(Gpu);
  driverVersion @11 :UInt32;
  cudaRuntimeVersion @12 :UInt32;
  cudnnVersion @13 :UInt32;
  cublasVersion @14 :UInt32;
  libraries @15 :List(KeyValue);
  options @16 :RecordingOptions;
  # Quirk flags: the default describes older recorders.
  pointersResolved @17 :Bool = true;
}

# ------------------------------------------------------------ events

struct BlobRef {
  idHigh @0 :UInt64;           # XXH3-128 of the decoded bytes
  idLow @1 :UInt64;
  size @2 :UInt64;             # decoded size
  encoding @3 :BlobEncoding;
}

enum BlobEncoding {
  raw @0;
  bytePlanes4 @1;
  bytePlanes2 @2;
}

struct Dim3 {
  x @0 :UInt32 = 1;
  y @1 :UInt32 = 1;
  z @2 :UInt32 = 1;
}

struct RangeDigest {
  address @0 :UInt64;
  size @1 :UInt64;
  allocation @2 :UInt32;       # ordinal, 0 = unknown
  offset @3 :UInt64;           # within the allocation
  digest @4 :UInt64;
  chunkDigests @5 :List(UInt64);
  snapshot @6 :BlobRef;        # null when absent
  bound @7 :RangeBound;        # what ends the range (compatVersion 3)
}

# What ended a launch's range (FORMAT.md, launch inputs/outputs).
enum RangeBound {
  allocation @0;               # the allocation's (readable) end: older recorders
  block @1;                    # the end of the framework allocator's block (a tensor's storage)
}

struct DeviceRange {
  address @0 :UInt64;
  size @1 :UInt64;
  allocation @2 :UInt32;
  offset @3 :UInt64;
}

enum AllocationKind {
  device @0;
  async @1;
  vmm @2;
  managed @3;
  hostMapped @4;
  moduleGlobal @5;
  other @6;
}

struct Allocation {
  ordinal @0 :UInt32;
  address @1 :UInt64;
  size @2 :UInt64;
  kind @3 :AllocationKind;
  device @4 :UInt32;
  stream @5 :UInt64;
}

struct Free {
  ordinal @0 :UInt32;
  address @1 :UInt64;
}

struct ModuleLoad {
  ordinal @0 :UInt32;
  cubin @1 :BlobRef;
  arch @2 :UInt32;
  digest @3 :UInt64;           # buffer hash of the image (compatVersion 12); 0 = none
}

enum LaunchApi {
  launchKernel @0;
  launchKernelEx @1;
  launchCooperative @2;
  launchKernelPtsz @3;
  launchKernelExPtsz @4;
  launchCooperativePtsz @5;
  launchHost @6;
}

struct ParamInfo {
  offset @0 :UInt32;
  size @1 :UInt32;
}

struct PointerParam {
  byteOffset @0 :UInt32;
  allocation @1 :UInt32;
  offset @2 :UInt64;
}

struct LaunchAttribute {
  id @0 :UInt32;
  value @1 :Data;
}

struct AlgorithmCandidate {
  algorithm @0 :Text;
  timeMs @1 :Float32;
}

struct Annotation {
  union {
    algorithm :group {
      library @0 :Text;
      call @1 :Text;
      choice @2 :Text;
      attributes @3 :List(KeyValue);
      candidates @4 :List(AlgorithmCandidate);
    }
    rng :group {
      source @5 :Text;
      generator @6 :Text;
      seed @7 :UInt64;
      offset @8 :UInt64;
      paramOffset @9 :UInt32;
    }
    frameworkOp @10 :Text;
    note @11 :Text;
    determinism :group {
      runs @12 :UInt32;
      distinctResults @13 :UInt32;
    }
  }
}

struct KernelLaunch {
  api @0 :LaunchApi;
  context @1 :UInt64;
  stream @2 :UInt64;
  function @3 :UInt32;         # block-local FunctionDef id
  grid @4 :Dim3;
  block @5 :Dim3;
  cluster @6 :Dim3;            # null = no cluster
  sharedMemBytes @7 :UInt32;
  attributes @8 :List(LaunchAttribute);
  params @9 :Data;
  paramLayout @10 :List(ParamInfo);
  pointers @11 :List(PointerParam);
  inputs @12 :List(RangeDigest);
  outputs @13 :List(RangeDigest);
  annotations @14 :List(Annotation);
  notHashed @15 :Bool;         # selection skipped hashing this launch
  captured @16 :Bool;          # enqueued on a stream being captured into a CUDA graph: not run now (compatVersion 2)
  captureId @17 :UInt64;       # the capture's id (cuStreamGetCaptureInfo), when captured
  recorderNs @18 :UInt32;      # time the program's thread spent in the recorder for it (0 = not measured)
  recorderOps @19 :UInt16;     # GPU operations the recorder enqueued for it
  reads @20 :List(RangeDigest); # ranges it only reads, by its framework op's schema: never hashed after it, digest 0 (compatVersion 4)
  # The recorder's number for it, as --launches and --snapshot count (from 0
  # in the process); all ones when it has none (captured, or an older trace)
  # (compatVersion 13).
  number @21 :UInt64 = 0xffffffffffffffff;
}

enum MemcpyKind {
  hostToDevice @0;
  deviceToHost @1;
  deviceToDevice @2;
  hostToHost @3;
  peer @4;
  unknown @5;
}

struct Memcpy {
  kind @0 :MemcpyKind;
  stream @1 :UInt64;
  async @2 :Bool;
  size @3 :UInt64;
  dst @4 :DeviceRange;
  src @5 :DeviceRange;
  digest @6 :UInt64;
  data @7 :BlobRef;            # null when not captured
  captured @8 :Bool;           # enqueued on a stream being captured into a CUDA graph: not run now (compatVersion 5)
  captureId @9 :UInt64;        # the capture's id, when captured
}

struct Memset {
  stream @0 :UInt64;
  async @1 :Bool;
  dst @2 :DeviceRange;
  value @3 :UInt32;
  elementSize @4 :UInt32 = 1;
  digest @5 :UInt64;
  captured @6 :Bool;           # as Memcpy.captured (compatVersion 5)
  captureId @7 :UInt64;
}

enum SyncKind {
  contextSynchronize @0;
  streamSynchronize @1;
  eventRecord @2;
  eventSynchronize @3;
  streamWaitEvent @4;
  streamQuery @5;
  eventQuery @6;
}

struct Sync {
  kind @0 :SyncKind;
  stream @1 :UInt64;
  event @2 :UInt64;
}

struct GraphLaunch {
  graphExec @0 :UInt64;
  stream @1 :UInt64;
  nodeCount @2 :UInt32;
  inputs @3 :List(RangeDigest);
  outputs @4 :List(RangeDigest);
  captured @5 :Bool;           # as Memcpy.captured (compatVersion 5)
  captureId @6 :UInt64;
}

# Where a launch, copy or set came from in the program's framework (PyTorch
# through gpurr's framework layer); absent when no framework layer ran
# (compatVersion 3).
enum Phase {
  unknown @0;
  forward @1;
  backward @2;
}

enum InPlace {
  unknown @0;
  no @1;
  yes @2;
}

struct Origin {
  op @0 :Text;                 # innermost framework op ("aten::index_add_"), or range
  opStack @1 :List(Text);      # outermost first, ending with op
  phase @2 :Phase;
  forwardOp @3 :Text;          # backward: the forward op it differentiates
  module @4 :Text;             # nn.Module path; in backward, the forward op's
  file @5 :Text;               # the program's source line that issued the (forward) op
  line @6 :UInt32;
  step @7 :Int64 = -1;         # training steps completed before it; -1 unknown
  stepLaunch @8 :UInt64;       # kernel launches of the same step before it
  inPlace @9 :InPlace;         # op's schema: it updates an argument it reads (compatVersion 7)
  benchmarking @10 :Bool;      # ran while the framework timed candidates (an autotuner) (compatVersion 11)
  byPlace @11 :Bool;           # op, module and line those at its place in a step observed earlier (compatVersion 14)
}

# A collective operation of a communicator (FORMAT.md, collective): seen
# through the NCCL API, or through a framework's view of it (PyTorch's c10d,
# any backend) (compatVersion 9).
enum CollectiveOp {
  other @0;
  allReduce @1;
  reduceScatter @2;
  allGather @3;
  broadcast @4;
  reduce @5;
  send @6;
  recv @7;
  allToAll @8;
  gather @9;
  scatter @10;
  barrier @11;
}

enum CollectiveSource {
  nccl @0;
  framework @1;
}

struct Collective {
  source @0 :CollectiveSource;
  call @1 :Text;               # as the source names it: "ncclAllReduce", "allreduce_"
  op @2 :CollectiveOp;
  communicator @3 :UInt64;     # stable id: the same communicator in every rank and run
  rank @4 :Int32 = -1;         # this process's rank in it; -1 unknown
  size @5 :Int32;              # its ranks; 0 unknown
  dataType @6 :Text;           # "float32", "bfloat16", "int64"...
  count @7 :UInt64;            # elements, as the call counts them
  reduceOp @8 :Text;           # "sum", "max"...; empty when the op reduces nothing
  peer @9 :Int32 = -1;         # root (broadcast, reduce, gather, scatter) or peer (send, recv); -1 none
  stream @10 :UInt64;
  sequence @11 :UInt64;        # collectives of this communicator (and source) before it
  group @12 :UInt64;           # 0 alone; else the number of its ncclGroupStart/End group
  inputs @13 :List(RangeDigest);   # the send buffer before it runs
  outputs @14 :List(RangeDigest);  # the receive buffer after it (after the group's end)
  processGroup @15 :Text;      # framework: the process group's name
  frameworkSequence @16 :Int64 = -1;  # framework: its own sequence number (c10d's); -1 none
}

struct Event {
  seq @0 :UInt64;
  timeNs @1 :UInt64;
  thread @2 :UInt32;
  origin @11 :Origin;          # null when unknown (compatVersion 3)
  union {
    launch @3 :KernelLaunch;
    memcpy @4 :Memcpy;
    memset @5 :Memset;
    alloc @6 :Allocation;
    free @7 :Free;
    module @8 :ModuleLoad;
    sync @9 :Sync;
    graph @10 :GraphLaunch;
    collective @12 :Collective;  # compatVersion 9
    dropped @13 :EventsDropped;  # compatVersion 9
  }
}

# Events the recorder made but could not keep (its trace thread fell behind
# and the memory for events waiting for it was full), in their place in the
# sequence (compatVersion 9).
struct EventsDropped {
  launches @0 :UInt64;
  memcpys @1 :UInt64;
  memsets @2 :UInt64;
  allocs @3 :UInt64;
  frees @4 :UInt64;
  modules @5 :UInt64;
  syncs @6 :UInt64;
  graphs @7 :UInt64;
  firstTimeNs @8 :UInt64;      # of the first dropped event
  lastTimeNs @9 :UInt64;       # of the last
  collectives @10 :UInt64;
}
