// Carrying out a whole-stream replay plan on a GPU: address space at the
// recorded addresses, then every operation of the recorded stream in recorded
// order on one stream (the recorded API order is a valid serialisation of the
// program's streams), each checked launch's outputs hashed with the device
// hash kernel and compared with the recorded digests, stopping at the first
// mismatch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "replayer/device_session.h"
#include "replayer/stream_plan.h"
#include "replayer/verdict.h"

namespace gpurr::trace {
class TraceReader;
}
namespace gpurr::kernels {
struct DriverApi;
}

namespace gpurr::replay {

struct StreamReplayOptions {
  bool forceRelocate = false;              // place every range away from its recorded address
  std::optional<ElementType> elementType;  // for the element-wise comparison of a mismatch
  int device = -1;                         // CUDA device ordinal; -1: the first of the recorded architecture
};

// One output (or a copy's source) whose replayed digest differs from the recording's.
struct DigestMismatch {
  size_t output = 0;  // index among the launch's recorded outputs (inputs) (0 for a copy)
  trace::DeviceRange range;
  uint64_t recorded = 0;
  uint64_t replayed = 0;
};

// The first operation whose result differed from the recording.
struct StreamMismatch {
  uint64_t seq = 0;
  StreamOpKind kind = StreamOpKind::kLaunch;  // a launch, or a copy to host
  uint64_t launchIndex = 0;                   // launches replayed before it
  // A launch's number as the recorder counted it (what `gpurr record
  // --snapshot K` selects); launchIndex where the trace has none.
  uint64_t launchNumber = 0;
  std::string function;                       // launches
  std::vector<DigestMismatch> outputs;        // the differing ones
  uint64_t outputsChecked = 0;
  // Recording against replay over the differing ranges: chunks where the
  // recording kept chunk digests, elements where it kept a snapshot.
  std::optional<StateComparison> comparison;
  // A launch's inputs, after the stream was replayed again up to it: equal to
  // the recorded input digests (the kernel itself gave other outputs) or not
  // (the state had diverged where no check saw it).
  bool inputsChecked = false;
  uint64_t inputRanges = 0;                  // compared
  std::vector<DigestMismatch> inputs;        // the differing ones
  std::optional<uint64_t> rerunDifferedAt;   // the second replay differed earlier, here
};

enum class StreamVerdict : uint8_t {
  kEqual,      // every check matched, to the end of the trace (or --until)
  kDifferent,  // a check failed: `mismatch` says where
  kStopped,    // every check matched up to an event the replay cannot run
};
const char* jsonName(StreamVerdict verdict);  // "equal", "different", "stopped"
// gpurr replay --all's exit code: 0 equal, 1 different, 2 stopped.
int exitCode(StreamVerdict verdict);

struct StreamOutcome {
  MachineInfo machine;
  std::vector<Placement> placements;
  bool relocated = false;
  std::vector<std::string> warnings;  // the plan's, then execution's
  StreamVerdict verdict = StreamVerdict::kEqual;
  std::optional<StreamMismatch> mismatch;
  uint64_t operations = 0;         // carried out
  uint64_t launches = 0;           // replayed
  uint64_t checkedLaunches = 0;    // outputs compared (the mismatching one included)
  uint64_t matchingLaunches = 0;   // all outputs equal to the recording
  uint64_t unhashedLaunches = 0;   // run unchecked: the recording did not hash them
  uint64_t checkedCopiesToHost = 0, matchingCopiesToHost = 0;
  uint64_t bytesRestored = 0;      // copied to the device from recorded host bytes
  uint64_t lastSeq = 0;            // the last event carried out
  std::vector<std::string> environment;  // recording vs this machine (environmentDifferences)
  // Milliseconds.
  double setupMs = 0;   // context, reservation, mapping, zeroing
  double replayMs = 0;  // the operations, checks included
  double hashMs = 0;    // hashing and comparing, within replayMs
  double totalMs = 0;
};

// Runs `plan` (made from `reader`'s trace). Throws ReplayError when there is no
// usable GPU, the GPU's architecture differs from the recording's, or a driver
// call or a replayed kernel fails; the message says which and what to do.
StreamOutcome executeStreamReplay(const trace::TraceReader& reader, const StreamPlan& plan,
                                  const StreamReplayOptions& options);

struct ReplayDriver;
// The same through driver tables the caller loaded (or a fake driver's).
StreamOutcome executeStreamReplay(const trace::TraceReader& reader, const StreamPlan& plan,
                                  const StreamReplayOptions& options, const kernels::DriverApi& api,
                                  const ReplayDriver& drv);

}  // namespace gpurr::replay
