// HashRules: hashing and first-use rules. Which of an operation's ranges are
// hashed before it runs (first uses: bytes no recorded operation has touched
// since they were handed out, by the write history) and after it (all it
// may write, less what its framework op only reads); the hashes enqueued on
// the device; the bytes copied for --snapshot; the re-runs of
// --check-determinism.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "recorder/device.h"
#include "recorder/hash_deferral.h"
#include "recorder/memory.h"
#include "recorder/options.h"
#include "recorder/params.h"
#include "recorder/session_output.h"
#include "recorder/trace_sink.h"

namespace gpurr::recorder {

// Memory that writers other than the recorded device operations reach: the
// CPU (managed memory), another process (IPC, imported pools), a kernel by
// its symbol (module globals). No write history vouches for it.
inline bool historyBlind(trace::AllocationKind kind) {
  return kind == trace::AllocationKind::kManaged || kind == trace::AllocationKind::kOther ||
         kind == trace::AllocationKind::kModuleGlobal;
}

// The allocations of `scanned` no write history vouches for.
inline std::vector<uint32_t> blindAllocations(const std::vector<ScannedPointer>& scanned) {
  std::vector<uint32_t> out;
  for (const ScannedPointer& p : scanned)
    if (historyBlind(p.kind)) out.push_back(p.param.allocation);
  return out;
}

class HashRules {
 public:
  // `mu`: the session's lock (session.h), taken to read `memory`'s map.
  HashRules(std::mutex& mu, const RecorderOptions& options, Device& device, SessionOutput& out,
            MemoryRecorder& memory);

  // Hashes `ranges` on `stream` when allowed; the ticket is empty otherwise,
  // and the ranges are forgotten by the write history. `wait`: the hash is
  // complete on return (as with --sync).
  HashTicket hashRanges(uint64_t context, uint64_t stream, std::vector<trace::DeviceRange> ranges,
                        bool wait = false);
  // A launch's hashes, through its stream's batch of deferred hashes when
  // the device allows them (hash_deferral.h): its inputs (`now`: the batch
  // is enqueued before the launch, with the outputs of the launches before
  // it that it holds) or its outputs (held back unless `now`). `onlyRead`:
  // inputs the launch only reads, held back (HashDeferral::add).
  HashTicket hashLaunchRanges(uint64_t context, uint64_t stream, std::vector<trace::DeviceRange> ranges, bool now,
                              bool onlyRead = false);
  // A launch on `stream` is about to be enqueued, reaching `ranges` (roles
  // as operandRolesOf gives them; `unseen`: it may reach memory no scanned
  // pointer shows): the deferred hashes it may disturb are enqueued first.
  void beforeLaunch(uint64_t context, uint64_t stream, const std::vector<trace::DeviceRange>& ranges,
                    const std::vector<OperandRole>& roles, bool unseen);
  // Enqueues the deferred hashes another stream may be ordered after by an
  // event recorded on `stream` (HashDeferral::beforeEventRecord); those of
  // every stream; of every stream when the trace thread waits for one.
  void beforeEventRecord(uint64_t context, uint64_t stream) {
    if (defers()) deferral_.beforeEventRecord(context, stream);
  }
  void flushAll() {
    if (defers()) deferral_.flushAll();
  }
  // The recorder closes: nothing is held back from now on (HashDeferral::close).
  void closeDeferral() {
    if (defers()) deferral_.close();
  }
  void flushIfAsked() { deferral_.flushIfAsked(); }
  // The ranges a launch hashes before it runs: all of them with
  // hashesAllInputs, else those holding bytes no recorded operation has
  // touched, or last touched on another stream (marking them touched on
  // `stream`).
  // `blind`: allocations no write history vouches for (historyBlind),
  // hashed every time.
  // A range its op was given no tensor in (`roles`, OperandRole::kNotGiven: a
  // new output, a workspace) is left out: the op only writes it.
  std::vector<trace::DeviceRange> inputsToHash(const std::vector<trace::DeviceRange>& ranges,
                                               const std::vector<OperandRole>& roles, uint64_t stream,
                                               const std::vector<uint32_t>& blind);
  // The same into `out` (its capacity reused); returns whether the op only
  // reads every range in `out` (by `roles`; false when `roles` is empty):
  // then their digests may wait in the stream's batch (hashLaunchRanges).
  bool inputsToHash(const std::vector<trace::DeviceRange>& ranges, const std::vector<OperandRole>& roles,
                    uint64_t stream, const std::vector<uint32_t>& blind, std::vector<trace::DeviceRange>& out);
  // What each of a launch's ranges is to the framework op it runs in
  // (operandRoles); empty when no op reported its operands. While the
  // framework layer follows its template (framework_context.h), those the
  // launch at the same place in the template had, when its function's key
  // (framework::launchKey) is `key` and its parameter bytes `params` point at
  // the same framework parameters (`pointers`: its words that point into
  // live memory). Into `roles` (its capacity reused).
  // `blocks`: the block of each range bound by one, as referencedRanges
  // gives them.
  void operandRolesOf(const std::vector<trace::DeviceRange>& ranges, std::span<const Block> blocks, uint64_t key,
                      std::span<const uint8_t> params, std::span<const trace::PointerParam> pointers,
                      std::vector<OperandRole>& roles);
  // A copy or set wrote these hashed ranges on `stream`.
  void touched(const HashTicket& written, uint64_t stream);
  // These ranges were written without a digest, or their first use was not
  // recorded: the next reader hashes them.
  void forgotten(const std::vector<trace::DeviceRange>& ranges) { forgotten(std::span(ranges)); }
  void forgotten(std::span<const trace::DeviceRange> ranges);
  // Copies the full bytes of `ranges` to the host on `stream` (--snapshot),
  // waiting for the trace thread when the snapshot memory bound is reached.
  std::vector<SnapshotCopy> snapshotRanges(uint64_t context, uint64_t stream,
                                           const std::vector<trace::DeviceRange>& ranges);
  // Re-runs a launch in process (--check-determinism): how many distinct
  // output states the re-runs gave, added to `annotations` (nothing, after
  // warning, when the device cannot re-run it). Skipped while a graph
  // capture may be open in any thread: the check synchronises the context.
  __attribute__((noinline)) void checkDeterminism(uint64_t context, const Relaunch& launch,
                                                  const std::vector<trace::DeviceRange>& outputs,
                                                  std::vector<trace::Annotation>& annotations);

 private:
  // Hashes of `ranges` could not be enqueued: warns once, and their next
  // reader hashes them.
  void cannotHash(std::span<const trace::DeviceRange> ranges, const std::string& error);
  // Output hashes are held back: the device can, and GPURR_DEFER_HASHES is not 0.
  bool defers() const { return options_.deferHashes && device_.defersHashes(); }

  std::mutex& mu_;
  const RecorderOptions& options_;
  const bool allInputs_;  // hashesAllInputs(options)
  Device& device_;
  SessionOutput& out_;
  MemoryRecorder& memory_;
  HashDeferral deferral_;
};

}  // namespace gpurr::recorder
