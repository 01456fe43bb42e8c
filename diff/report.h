// The result of comparing two runs of a process: plain data that the `gpurr
// diff` command prints as text or JSON (docs/DIFF.md documents both).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trace_format/events.h"

namespace gpurr::diff {

// Why the first divergent operation differs (docs/DIFF.md, "Causes").
enum class Cause : uint8_t {
  kNone,                    // the runs are identical
  kEnvironment,             // the headers differ in something that changes results
  kHostInput,               // bytes copied host-to-device differ
  kRngState,                // only an RNG seed/offset differs
  kScalarParameters,        // parameter bytes differ after pointer normalisation
  kAlgorithmChoice,         // a different kernel sequence at this point
  kReordered,               // the same operations, in another order
  kNondeterministicKernel,  // same kernel, parameters and inputs; different outputs
  kUninitialisedMemory,     // an input differs in bytes no recorded operation wrote
  kCollective,              // a collective received different data than this rank's inputs explain
  // A collective received different data although every rank sent identical
  // data in both runs: the order of its reduction changed (the job's view
  // only, report/job.h; each rank's own verdict there is kCollective).
  kCollectiveReductionOrder,
  kUnknown,                 // the traces hold too little to tell (said why)
};
const char* toString(Cause cause);  // "nondeterministic kernel"
const char* jsonName(Cause cause);  // "nondeterministicKernel"

// One header field that differs. An absent value (variable unset) is nullopt.
struct EnvDifference {
  std::string field;  // "env CUBLAS_WORKSPACE_CONFIG", "gpu 0", "cuDNN"...
  std::optional<std::string> a, b;
  bool affectsResults = true;  // false for fields shown only for context
};

enum class OpKind : uint8_t { kLaunch, kMemcpy, kMemset, kGraph, kCollective };
const char* toString(OpKind kind);

// One side's view of an operation.
struct OpInfo {
  uint64_t seq = 0;          // event number in its trace (gpurr dump --range)
  uint64_t index = 0;        // position among the run's operations, from 0
  // Position among the run's launches, as the recorder numbers them (record
  // --launches, --snapshot): those set aside as benchmarking count.
  uint64_t launchIndex = 0;
  uint32_t stream = 0;       // stream ordinal, in order of first use (0 = default)
  uint32_t thread = 0;       // host thread, numbered in order of first use
  OpKind kind = OpKind::kLaunch;
  std::string name;          // mangled kernel name, or "memcpy HtoD"...
  trace::Dim3 grid, block;
  std::vector<trace::Annotation> annotations;
  std::optional<trace::Origin> origin;  // the framework op behind it, when recorded
};

// The event of `o`, an operation of one side of a divergence: none where
// that side has no operation there (an empty OpInfo).
inline std::optional<uint64_t> eventOf(const OpInfo& o) {
  return o.name.empty() ? std::nullopt : std::optional<uint64_t>(o.seq);
}

// Whether the PyTorch layer did not observe `o`'s op: its origin holds
// neither op nor line, only its step and perhaps the module the layer's
// hooks saw (it ran where a step stopped matching the steps the layer had
// learnt, or in an op that began before the layer observed again).
inline bool opUnobserved(const OpInfo& o) {
  return o.origin && o.origin->op.empty() && o.origin->opStack.empty() && o.origin->file.empty() &&
         !o.origin->benchmarking;
}

// How a report says where `o` is in its step: a launch by its number in
// the step, a copy or a memset by the launches before it.
inline trace::OriginStep originStep(const OpInfo& o) {
  return o.kind == OpKind::kLaunch ? trace::OriginStep::kLaunch : trace::OriginStep::kOperation;
}

// Where one buffer differs.
struct RangeDifference {
  size_t index = 0;              // position in the op's input or output list (run B's for a range of run B alone)
  trace::DeviceRange a, b;       // each run's own range; size 0 on the side that has none
  uint64_t digestA = 0, digestB = 0;
  uint64_t chunkBytes = 0;       // 0 when chunk digests were not recorded
  uint64_t chunks = 0, differingChunks = 0;
  // Differing byte spans [begin, end) within the range, merged; from chunk
  // digests (chunk granularity) or snapshots (byte granularity).
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  // From snapshots of both sides, when recorded.
  struct Values {
    uint64_t differingBytes = 0;
    uint64_t floats = 0, differingFloats = 0;  // read as float32
    double maxAbsDiff = 0;
  };
  std::optional<Values> values;
  // Uninitialised-memory analysis: bytes of `spans` that no recorded
  // operation wrote before this one, in run A and run B.
  uint64_t unwrittenA = 0, unwrittenB = 0;
  bool writtenChecked = false;
  // The runs ended the range by different rules (RangeBound: a tensor's
  // block in one, the allocation's end in the other): its bytes are not
  // compared, and no span is given.
  bool boundsDiffer = false;
};

// What the bytes of a parameter difference hold, as far as the diff can tell
// (wording.h names each: "pointer", "philox seed/offset"...).
enum class ParamMeaning : uint8_t {
  kNone,           // nothing known: a value (a scalar, a struct's fields)
  kPointer,        // a pointer that points elsewhere in the other run, or is null there
  // A word inside a struct passed by value that points into an allocation in
  // one run and holds another value, no null pointer, in the other: most
  // often an unused part of the struct that holds a device address left on
  // the host stack (seen in PyTorch's OffsetCalculator), so it decides
  // nothing by itself: it counts as a differing byte, not as a pointer that
  // moved.
  kStaleAddress,
  // Every differing byte lies in 8-byte words that hold, in both runs, an
  // address no recorded allocation contains, in the range of host addresses
  // (4 GiB to 128 TiB) or in the host memory the trace says its process had
  // mapped readable: uninitialised parts of structs passed by value
  // (PyTorch's TensorInfo beyond its dimensions, padding), references to
  // host objects. Address-space randomisation changes them between runs; a
  // kernel cannot read through them, so they do not count as a difference.
  kHostAddresses,
  kRngState,       // an RNG state (rngSource's), and host addresses if any
  kMemsetValue,    // a memset's value
};

// A parameter byte range that differs after pointers are normalised.
struct ParamDifference {
  uint32_t offset = 0, size = 0;  // bytes in the parameter buffer
  int32_t param = -1;             // index in the layout, -1 when unknown
  std::string a, b;               // hex bytes, or "alloc#3+0x0" for pointers
  ParamMeaning meaning = ParamMeaning::kNone;
  std::string rngSource = {};     // kRngState: its RngState's source ("philox", "curand")
  // For a parameter over 16 bytes (a struct), what reports show instead of
  // its whole bytes: the 8-byte words that differ, pointers aside
  // ("+0xe0 A 0x001b2f5e07c4d9a3 B 0x000e61d4a8f9b207, ...").
  std::string words = {};
};

// Stretches that together hold the same operations on both sides, in
// another order: a reordering, not another path. One stretch of operations
// run B does elsewhere (a move), or several around operations that kept
// their place.
struct Reordering {
  uint64_t aBegin = 0, aEnd = 0;  // the region in run A, from its first stretch to the end of its last
  uint64_t bBegin = 0, bEnd = 0;  // ... and in run B
  uint64_t count = 0;             // operations reordered (in its stretches, on each side)
  // A move: the operations of run A it crossed, > 0 when run B does them
  // later, < 0 earlier; 0 for any other reordering.
  int64_t crossed = 0;
  // Where this stretch holds no operation on one side: the first few
  // reordered operations on that side, and how many there are.
  std::vector<OpInfo> otherOps;
  uint64_t otherCount = 0;
};

// A stretch of operations taken by one run only, or replaced by others.
struct PathDivergence {
  uint64_t aBegin = 0, aCount = 0;  // operation indices in run A
  uint64_t bBegin = 0, bCount = 0;
  // The event where each side's stretch is: its first operation's, or for a
  // side with none, that of its operation the other side's stretch comes
  // before (one past its last where there is none).
  uint64_t aSeq = 0, bSeq = 0;
  std::vector<OpInfo> aOps, bOps;   // the first few of each side
  bool readsTainted = false;        // explained by an earlier divergence
  std::optional<Reordering> reordered;
};

// Two operations swapped at a matched pair: where each run did what the
// other did there. Run A's operation `aIndex` is run B's at the pair, and run
// B's `bIndex` is run A's (operation indices); the events are theirs.
struct Swap {
  uint64_t aIndex = 0, bIndex = 0;
  uint64_t aSeq = 0, bSeq = 0;
};

// A known source of nondeterminism (data/known_culprits.json).
struct CulpritMatch {
  std::string id;
  std::string op;    // framework operation, e.g. "torch.Tensor.index_add_"
  std::string why;   // what makes it nondeterministic
  std::string fix;
  std::string source;
  std::string matchedBy;  // "framework op", "forward op", "kernel", "library", "environment"
  // Where the match was found in the program, when an origin was recorded:
  // "aten::index_add_, backward of aten::index_select at train.py:17".
  std::string matched;
  // The arguments that decide whether the op is nondeterministic
  // ("accumulate=True"), "" when none do: traces hold no scalar arguments.
  std::string argument;
};

// What a verdict rests on, as data: a kind and its values. The sentence a
// report prints for each is made in one place (diff/wording.h); no decision
// reads a sentence back. Per kind, the values it holds, in order (numbers,
// then texts: names and values as the trace recorded them). A parameter
// index is stored plus one (0: none).
enum class EvidenceKind : uint8_t {
  // Pointers (a pointer parameter that points elsewhere).
  kPointer,                  // param+1, offset, size, then each run's side (kind: 0 not a pointer, 1 outside
                             // every allocation, 2 in one of unknown size, 3 in one of known size; offset;
                             // allocation; its size), then the relation (PointerRelation) and its two values
  kAlsoParameter,            // param+1, offset, size, meaning (ParamMeaning); RNG source, A, B
  kInputsDifferWithPointers,
  kAnotherAddress,
  // Inputs.
  kOldOutputContents,        // the indices of the differing inputs
  kHostCopy,                 // size, digest A, digest B, destination allocation, address, offset; copy name
  kCapturedHostData,         // differing bytes, bytes, first differing byte
  kCapturedHostDataUnreadable,  // ; why
  kCaptureHostDataHint,
  kHostDataHint,
  kUnwrittenInput,           // input index, unwritten bytes in run A, in run B
  kUninitialisedHint,
  kInPlace,                  // ; the framework op
  kUnrecordedWrite,
  kOneSidedHashes,           // ranges
  kReadApart,                // event in run A, event in run B, allocation, address, offset
  kUndigestedWrites,         // ranges
  kReceivedAsynchronously,   // ranges, event in run A, event in run B; the collective
  // RNG state.
  kRngStates,                // whether run A has one, its seed, offset, then run B's; A's source, generator,
                             // B's source, generator
  kRngInParameters,
  kRngNotRecorded,           // the framework op (a random generator)
  kSeedHint,                 // whether cuRAND's
  // Parameters.
  kParameter,                // param+1, offset, size, meaning (ParamMeaning); RNG source, A, B, words
  kHostComputedValue,
  // The kernel.
  kHashInputsHint,
  kSameInputs,               // inputs vouched for, inputs hashed, parameters holding host addresses,
                             // outputs differing, outputs, stale words, inputs that differ only in an
                             // output buffer's old contents (kOldOutputContents)
  kStaleWords,               // stale words, ranges of one run alone hashed through them, whether the other
                             // run's word is 0 (1) in one of them
  kHostAddresses,
  kIntrinsic,
  kRecorderReran,            // runs, run (0: A, 1: B), distinct results
  kReexecuted,               // ; what was re-executed and what it gave
  kParametersDifferToo,
  kBeforeReexecutions,       // ; the verdict before
  kAtThisOperation,          // ; the verdict at the operation, before the environment's
  // Reorderings.
  kIssued,                   // operations reordered, crossed (0 or 1), operations kept, one stream (0 or
                             // 1), the stream, then the moved threads' count and threads, then
                             // (thread, kept, its own) of each thread with operations kept
  kOwnOrderChanged,          // the moved threads
  kThreadsRaced,             // one stream (0 or 1)
  kNoneTouch,                // operations reordered, crossed (0 or 1)
  kTouch,                    // operations reordered, crossed, count, then (event, host thread, whether an op
                             // is named) of each shown; (name, op) of each shown
  kSameBytesMoved,           // operations reordered
  kOtherBytesMoved,          // operations reordered, differing, compared
  kSwapped,                  // run B's event doing run A's operation, how far from the pair (operations), whether
                             // after it (1) or before (0); then run A's doing run B's, the same way
  kVisitedInAnotherOrder,
  // A collective.
  kCollectiveReceived,       // whether what this rank sent is identical, whether the job's report follows, whether
                             // it sends nothing; the collective
  kReductionOrder,           // ranks; the collective
  kNcclChose,
  kNcclSettings,             // ; (field, run A's value, run B's value) of each NCCL setting that differs
  // Another path.
  kAlgorithm,                // run (0: A, 1: B), candidates; library, call, algorithm
  kNoAlgorithm,
  kRunEnds,                  // the run whose trace ends (0: A, 1: B), the other's operations after it
  kOpRanAlone,               // the run (0: A, 1: B), its event; its framework op, described
  kByPlaceBefore,            // the run (0: A, 1: B), its first such launch's number, how many, the stretch's length
                             // and its first launch's number
  kOpRanAgain,               // the run (0: A, 1: B), its first event, how many; its framework op, described
  // Each side the same kernels in the same order, one or more launched with
  // another grid or block: how many; run A's first such kernel, then
  // grid x, y, z and block x, y, z of run A, of run B.
  kOtherConfiguration,
  // The same kernel name, another image: run A's module ordinal and its
  // digest, run B's.
  kOtherBinary,
};

// How the two runs' pointers of a kPointer relate.
enum class PointerRelation : uint8_t {
  kFurther,         // the same allocation, bytes further in run B (value: how many)
  kEarlier,         // ... earlier
  kUnmatched,       // another allocation, with no counterpart in run A (value: run B's)
  kCorresponds,     // another allocation (values: run B's, run A's counterpart)
  kOutside,         // one of them outside every known allocation
  kOneRunOnly,      // a pointer in one run only (value: 0 run A, 1 run B)
};

struct Evidence {
  EvidenceKind kind;
  std::vector<uint64_t> numbers = {};
  std::vector<std::string> texts = {};
};

struct FirstDivergence {
  bool path = false;  // a path divergence rather than one matched operation
  OpInfo a, b;        // the operations (for a path divergence, each side's first)
  std::optional<PathDivergence> stretch;
  std::optional<Swap> swap;  // a reordering at a matched pair (cause reordered)
  // A path divergence whose first operation the PyTorch layer did not
  // observe: the first operation of the same stretch later on, observed
  // (blast_radius.h, BlastResult::namedLater).
  std::optional<OpInfo> namedLater;
  bool inputsIdentical = true;
  size_t inputCount = 0;   // inputs compared (hashed in both runs)
  uint64_t inputBytes = 0;
  // Ranges not hashed before the launch (traces that hash inputs at first
  // use only): identical by the write history.
  size_t inputsVouched = 0;
  // Ranges of such traces that nothing vouches for and that were not hashed
  // in both runs: a hash in one run only, or an earlier write without a
  // digest. The inputs are then not known to be identical.
  size_t inputsUncompared = 0;
  // Of those, ranges a collective last wrote, received asynchronously (no
  // digest): data from the other ranks, first seen here.
  size_t inputsReceived = 0;
  bool paramsIdentical = true;
  std::vector<RangeDifference> inputs, outputs;  // differing ones only
  size_t outputCount = 0;
  std::vector<ParamDifference> params;
  Cause cause = Cause::kUnknown;
  Cause mechanism = Cause::kUnknown;  // what the operation shows, when cause is environment
  std::string summary;                // the cause in one line
  std::vector<Evidence> evidence;     // what the verdict rests on
  std::vector<CulpritMatch> known;
  std::optional<trace::DeterminismCheck> determinismA, determinismB;
};

// A divergence after the first that no earlier divergence explains.
struct IndependentDivergence {
  bool path = false;
  OpInfo a, b;
  std::string reason;
  // Later independent divergences like it, not listed on their own: the same
  // operation from the same op, module and line, for the same reason (the
  // optimizer's step over every parameter, a layer called in every step).
  // `last`: the last of them, by event number on each side (none where that
  // side has no operation there) and step (-1: none recorded).
  struct Last {
    std::optional<uint64_t> seqA, seqB;
    int64_t step = -1;
  };
  uint64_t more = 0;
  Last last;
};

struct BlastRadius {
  uint64_t laterOps = 0, taintedOps = 0;          // run A, after the first divergence
  uint64_t laterLaunches = 0, taintedLaunches = 0;
  uint64_t divergentOps = 0;                      // later matched ops with different outputs
  uint64_t explainedOps = 0;  // ... of which read data derived from an earlier divergence (any, not only the first)
  uint64_t independentCount = 0;
  // Those of them that are the first divergence's stretch again: as many
  // operations a side, the first of each issued from the same site as the
  // first's (a layer one run added, in each later step).
  uint64_t repeatsFirst = 0;
  std::vector<IndependentDivergence> independent;  // the first few
  // Those neither listed nor counted with a listed one.
  uint64_t unlisted() const {
    uint64_t alike = 0;
    for (const IndependentDivergence& i : independent) alike += i.more;
    return independentCount - std::min<uint64_t>(independentCount, independent.size() + alike);
  }
};

// A collective one run's process issued, as the job's view across ranks
// needs it (report/job.h): gathered in the summary's pass over the trace, so
// that the job's view reads no trace again.
struct CollectiveCall {
  trace::CollectiveSource source = trace::CollectiveSource::kNccl;
  uint64_t communicator = 0, sequence = 0;  // its place in the job
  uint64_t seq = 0;                         // the event
  trace::CollectiveOp op = trace::CollectiveOp::kOther;
  uint64_t count = 0;
  std::string dataType;
  std::string reduceOp;  // "sum", "max"...; "" for a collective without a reduction
  int32_t commSize = 0;
  int32_t rank = -1;  // this process's in the communicator; -1 unknown
  // A send or receive between known ranks: sender << 32 | receiver, and
  // `sequence` is its place among the calls between those two, as the
  // sequence numbers of the two ends' communicators count differently
  // (a pipeline's stages issue other numbers of calls); -1 otherwise.
  int64_t ends = -1;
  std::vector<uint64_t> sent;  // its inputs' digests
  // Something it receives has no digest (digest 0: an asynchronous call,
  // complete only at its wait()).
  bool receivedUnhashed = false;
};

// Operations paired despite one kind of benign difference: how many, and
// run A's first.
struct PairedDespite {
  uint64_t count = 0;
  std::optional<OpInfo> first;
};

struct ProcessDiff {
  std::string name;  // "" for a single pair, else the matched entry name
  std::string pathA, pathB;
  std::vector<std::string> warnings;
  std::vector<EnvDifference> environment;
  uint64_t opsA = 0, opsB = 0, matched = 0;
  // Operations of each run that wrote device bytes without their digest
  // (not hashed): only their parameters were compared.
  uint64_t undigestedA = 0, undigestedB = 0;
  // Operations of each run with an output range: where both are 0, no
  // outputs were compared at all (a trace of launches without buffers).
  uint64_t withOutputsA = 0, withOutputsB = 0;
  // No divergence among the operations compared. Where a run's recorder
  // dropped events, or its recording was cut short while the other run
  // went on (`gaps`, one line per run), only those before the gap were
  // compared: identical then says nothing of the rest.
  bool identical = true;
  std::vector<std::string> gaps;
  bool alignmentBounded = false;
  std::optional<FirstDivergence> firstDivergence;
  std::vector<PathDivergence> pathDivergences;  // all, in order (first few kept)
  uint64_t pathDivergenceCount = 0;
  BlastRadius blast;
  // Launches paired despite a benign difference, not divergences
  // (docs/DIFF.md): a word of their parameters that is a device address in
  // one run only (a stale word of a struct), or another launch configuration
  // of the same kernel (an autotuner's block size), or an allocation that
  // one run gave another identity (an operation moved before its first
  // use), every range both runs hashed agreeing.
  PairedDespite pairedDespiteStaleWords, pairedDespiteLaunchConfiguration, pairedDespiteRenamedAllocation;
  // Run B's allocations given run A's names, where the launches the
  // alignment paired by shape showed that run B named them otherwise (one
  // more launch of their first user's kernel before it: renaming.h).
  uint64_t allocationsRenamed = 0;
  // Operations of each run set aside, not compared: they ran while the
  // framework timed candidate kernels (an autotuner's benchmarking, whose
  // results it discards; trace::Origin::benchmarking).
  uint64_t benchmarkingA = 0, benchmarkingB = 0;
  // Each run's rank (the header's; -1 when it names none) and collectives,
  // in trace order, captured ones and those after a gap included.
  int32_t rankA = -1, rankB = -1;
  std::vector<CollectiveCall> collectivesA, collectivesB;
};

}  // namespace gpurr::diff
