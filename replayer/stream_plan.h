// Whole-stream replay planning: from a --full trace, everything needed to
// re-run the recorded GPU command stream without the original program, as
// plain data computed without a GPU (the one-launch plan's idea, plan.h):
// address space for every allocation ever live, the module images the
// launches need, the operations in recorded order and where replay must stop.
// stream_execute.h carries a plan out on a GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "replayer/plan.h"
#include "trace_format/events.h"

namespace gpurr::trace {
class TraceReader;
}

namespace gpurr::replay {

enum class StreamOpKind : uint8_t {
  kCopyToDevice,  // host-to-device copy, from the recorded bytes (Memcpy.data)
  kCopyOnDevice,  // device-to-device copy
  kCopyToHost,    // device-to-host copy: nothing to do, its source's digest is checked
  kMemset,        // value and element size over a contiguous range
  kLaunch,        // a kernel, its outputs checked against the recorded digests
};
const char* toString(StreamOpKind kind);  // "copy to device", ...

// One operation of the replayed stream, in recorded order.
struct StreamOp {
  StreamOpKind kind = StreamOpKind::kLaunch;
  uint64_t seq = 0;
  trace::DeviceRange dst;                // copies to device and on device, sets
  trace::DeviceRange src;                // copies on device and to host
  std::optional<trace::BlobRef> data;    // copies to device
  uint64_t digest = 0;                   // copies to host: recorded digest of the source, 0 = none
  uint32_t value = 0, elementSize = 1;   // sets
  // Launches: the recorded launch, valid while the event it came from is
  // (planning previews keep `function` and `module` only).
  const trace::KernelLaunch* launch = nullptr;
  std::string function;
  uint32_t module = 0;
  bool checked = false;  // launches: hashed with output digests; copies to host: a digest to check
};

// What whole-stream replay does for one event: an operation, nothing
// (allocations, frees, module loads, synchronisation, host-to-host copies,
// host functions), or stop there because the trace cannot say what the event
// did (`stop` says why and what to do). Pure: blobs are not looked at.
struct StreamStep {
  std::optional<StreamOp> op;
  std::optional<std::string> stop;
};
StreamStep streamStep(const trace::Event& event);

struct StreamPlanOptions {
  std::optional<uint64_t> until;  // replay events up to this seq, included
  size_t previewOps = 12;         // operations kept in StreamPlan::preview
};

struct StreamPlan {
  std::string tracePath;
  trace::Header header;
  std::optional<uint64_t> until;
  // Address space: every allocation ever live (a VMM reservation: the parts
  // the stream's ranges touch), ranges outside every allocation, sorted by
  // address. A range freed and reused later appears once per allocation;
  // overlapping ones share a region when placed.
  std::vector<ReservedRange> ranges;
  std::unordered_map<uint32_t, uint64_t> allocationStarts;  // ordinal -> recorded start
  std::map<uint32_t, ModuleImage> modules;  // images of the replayed launches, by ordinal
  std::vector<StreamOp> preview;            // the first operations
  // Counts over the replayed part.
  uint64_t events = 0;          // events replayed (up to the stop, --until or the end)
  uint64_t operations = 0;
  uint64_t launches = 0;        // kernel launches
  uint64_t checkedLaunches = 0; // with recorded output digests
  uint64_t hostFunctions = 0;   // host functions enqueued on streams: nothing to do on the GPU
  uint64_t copiesToDevice = 0, bytesToDevice = 0;
  uint64_t copiesOnDevice = 0, copiesToHost = 0, checkedCopiesToHost = 0;
  uint64_t memsets = 0;
  uint64_t firstSeq = 0, lastSeq = 0;  // of the replayed events
  uint64_t traceEvents = 0;             // in the whole trace
  // Where replay stops before the end: the event it cannot replay, and why.
  std::optional<uint64_t> stopSeq;
  std::string stopReason;
  uint32_t recordedDevice = 0;
  std::optional<trace::GpuInfo> recordedGpu;
  uint32_t recordedArch = 0;
  std::vector<std::string> warnings;
};

// Plans the whole-stream replay of `reader`'s trace. Throws ReplayError when
// the trace was not recorded with --full (the message says how to record
// one), the blob of a host-to-device copy's bytes or of a launched image is
// missing, the trace used several GPUs, or it contradicts itself.
StreamPlan planStreamReplay(const trace::TraceReader& reader, const StreamPlanOptions& options = {});

// The same from events in memory (`events` in seq order; `hasBlob` says
// whether the trace's blob store holds a blob). For tests.
StreamPlan planStreamReplay(std::span<const trace::Event> events, const trace::Header& header,
                            const std::string& tracePath, const StreamPlanOptions& options,
                            const std::function<bool(const trace::BlobId&)>& hasBlob);

}  // namespace gpurr::replay
