// Replay planning: from a trace and a launch's event number, everything a
// replay of that one launch needs, as plain data (rr's idea: a replay plan is
// data, computed without a GPU and tested on the CPU). Execution (execute.h)
// carries a plan out on a GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/text.h"
#include "compare/compare.h"
#include "trace_format/events.h"

namespace gpurr::trace {
class TraceReader;
}

namespace gpurr::replay {

// Why a replay cannot be planned or carried out. The message is meant for the
// user as it is: it names the trace and launch and says what to do next.
class ReplayError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A device address range that must exist, with its recorded contents' place,
// for the launch to run as recorded.
struct ReservedRange {
  uint32_t allocation = 0;  // ordinal; 0 = a recorded range outside every known allocation
  uint64_t address = 0;     // recorded start
  uint64_t size = 0;
  // Recorded start of the whole allocation. A VMM reservation (PyTorch's
  // expandable segments reserve far more than they map) is planned as the
  // parts the launch's recorded ranges cover, so one allocation may give
  // several ranges.
  uint64_t allocationAddress = 0;
  trace::AllocationKind kind = trace::AllocationKind::kDevice;
  bool freedBeforeLaunch = false;  // referenced, but freed before the launch (use after free)
  bool restored = false;           // some recorded input snapshot covers part of it
};

// Recorded bytes to copy into a range before each launch.
struct InputRestore {
  trace::DeviceRange range;
  trace::BlobRef snapshot;
  uint64_t digest = 0;  // recorded buffer hash of these bytes
};

// A range whose contents after the launch are compared with the recording.
struct OutputCheck {
  trace::DeviceRange range;
  bool recorded = true;                    // false: no recorded digest (only runs are compared)
  uint64_t digest = 0;                     // recorded buffer hash after the launch
  std::vector<uint64_t> chunkDigests;      // recorded, when present
  std::optional<trace::BlobRef> snapshot;  // recorded bytes, when present
};

struct ModuleImage {
  uint32_t ordinal = 0;
  trace::BlobRef image;
  uint32_t arch = 0;  // SM architecture the image was recorded as, 0 = unknown
};

struct ReplayPlan {
  std::string tracePath;
  uint64_t seq = 0;          // the launch's event number
  uint64_t launchIndex = 0;  // its position among the trace's launches, from 0
  trace::KernelLaunch launch;  // as recorded (params hold the recorded addresses)
  std::optional<trace::Origin> origin;  // the framework op behind it, when recorded
  ModuleImage module;
  std::vector<ReservedRange> ranges;  // sorted by address, non-overlapping allocations
  std::vector<InputRestore> inputs;   // in recorded order (later ones win on overlap)
  std::vector<OutputCheck> outputs;
  // The GPU the launch ran on: its ordinal in the recording, the header's
  // description of it (when the header lists it), and its SM architecture
  // (major * 10 + minor, from the header or else the image; 0 = unknown).
  uint32_t recordedDevice = 0;
  std::optional<trace::GpuInfo> recordedGpu;
  uint32_t recordedArch = 0;
  trace::Header header;
  std::vector<std::string> warnings;
};

// Plans the replay of the launch at event number `seq` of `reader`'s trace.
// Throws ReplayError when there is no such event, it is not a kernel launch,
// its image or an input snapshot is missing, or the trace contradicts itself.
ReplayPlan planReplay(const trace::TraceReader& reader, uint64_t seq);

// The same from events already in memory (`events` in seq order, as written;
// `hasBlob` says whether the trace's blob store holds a blob). For tests and
// callers that already read the trace.
ReplayPlan planReplay(std::span<const trace::Event> events, const trace::Header& header,
                      const std::string& tracePath, uint64_t seq,
                      const std::function<bool(const trace::BlobId&)>& hasBlob);

// [start, end) intervals sorted, with overlapping or touching ones merged.
std::vector<std::pair<uint64_t, uint64_t>> mergeIntervals(std::vector<std::pair<uint64_t, uint64_t>> intervals);

// A reserved stretch of address space: whole granules covering one or more
// ReservedRanges, reserved and mapped as one unit (so that ranges sharing a
// granule, as small cuMemAlloc allocations do, keep their relative places).
struct Region {
  uint64_t start = 0;  // recorded, aligned down to the granularity
  uint64_t size = 0;   // a multiple of the granularity
  std::vector<size_t> members;  // indices into ReplayPlan::ranges
};

// Groups `ranges` into granule-aligned regions; ranges whose granules overlap
// or touch share a region. `granularity` is a power of two.
std::vector<Region> groupIntoRegions(std::span<const ReservedRange> ranges, uint64_t granularity);

// Where each region ended up on this machine: recorded start -> new start.
// An address inside a region moves with it; any other address stays.
class AddressMap {
 public:
  void place(uint64_t recordedStart, uint64_t size, uint64_t newStart);
  uint64_t translate(uint64_t recorded) const;
  bool moved() const;  // whether any region is not at its recorded place
  // Whether `recorded` lies in a region placed elsewhere.
  bool relocated(uint64_t recorded) const;

 private:
  struct Placed {
    uint64_t size = 0;
    uint64_t newStart = 0;
  };
  std::map<uint64_t, Placed> regions_;  // by recorded start
};

// The launch's parameter bytes with every recorded pointer word
// (PointerParam, at any offset, inside by-value structs too) rewritten to
// where its allocation now lies: new base of allocation + recorded offset.
// Throws ReplayError when a pointer word lies outside the parameter bytes.
std::vector<uint8_t> relocateParams(const ReplayPlan& plan, const AddressMap& map);

// The same for any launch: `bases` gives the recorded start of each
// allocation by ordinal (pointer words into other allocations are passed as
// recorded). Throws ReplayError naming launch `seq` for a word outside the
// parameter bytes.
std::vector<uint8_t> relocateParams(const trace::KernelLaunch& launch, uint64_t seq,
                                    const std::unordered_map<uint32_t, uint64_t>& bases, const AddressMap& map);

// A recorded range's address on this machine.
trace::DeviceRange relocateRange(const trace::DeviceRange& range, const AddressMap& map);

// 8-byte-aligned words in `bytes` (the recorded contents of `range`) whose
// value lies in a relocated region: pointers stored in device memory, which
// relocation cannot rewrite.
struct StoredPointers {
  trace::DeviceRange range;
  uint64_t count = 0;
  uint64_t firstOffset = 0;  // of the first such word, from the range's start
};
std::optional<StoredPointers> findStoredPointers(const trace::DeviceRange& range,
                                                 std::span<const uint8_t> bytes, const AddressMap& map);

// Whether a recorded launch attribute can be passed to this process's launch:
// event handles (programmatic and completion events) belong to the recorded
// process, and graph-only attributes do not apply to a plain launch.
bool replayableAttribute(uint32_t id);

// The recorded command line, quoted as a shell would need it ("PROGRAM..."
// when the header has none), for messages that say how to record again.
std::string commandLineOf(const trace::Header& header);

// The header's description of recorded GPU `device` (or of the only GPU it
// lists), and its SM architecture (major * 10 + minor; `imageArch`, the
// architecture of a recorded image, when the header does not say; 0 = unknown).
std::optional<trace::GpuInfo> recordedGpuOf(const trace::Header& header, uint32_t device);
uint32_t recordedArchOf(const std::optional<trace::GpuInfo>& gpu, uint32_t imageArch);

// The comparison of buffer states the replayer shares with the diff
// (compare/compare.h), under the replayer's names.
using compare::compareElements;
using compare::describeRange;
using compare::ElementDiff;
using compare::ElementType;
using compare::guessElementType;
using compare::parseElementType;
using compare::RangeComparison;
using compare::RangeState;
using compare::StateComparison;
using text::humanBytes;

}  // namespace gpurr::replay
