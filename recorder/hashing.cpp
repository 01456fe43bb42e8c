// Hashing and first-use rules (see hashing.h): which ranges are hashed
// before and after an operation, the write history that vouches for the
// rest, snapshot copies, and determinism re-runs.
#include "recorder/hashing.h"

#include <algorithm>
#include <set>

#include "recorder/callback_data.h"
#include "recorder/framework_context.h"
#include "recorder/thread_local_ref.h"
#include "recorder/write_history.h"

namespace gpurr::recorder {

using trace::AllocationKind;

HashRules::HashRules(std::mutex& mu, const RecorderOptions& options, Device& device, SessionOutput& out,
                     MemoryRecorder& memory)
    : mu_(mu), options_(options), allInputs_(hashesAllInputs(options)), device_(device), out_(out),
      memory_(memory), deferral_(device, [this](std::span<const trace::DeviceRange> ranges, const std::string& error) {
        cannotHash(ranges, error);
      }) {}

void HashRules::cannotHash(std::span<const trace::DeviceRange> ranges, const std::string& error) {
  out_.warnOnce("hash", "cannot hash device buffers (" + error + "); events are recorded without digests, "
                        "each with a note saying why");
  forgotten(ranges);  // no digest vouches for them: their next reader hashes them
}

HashTicket HashRules::hashRanges(uint64_t context, uint64_t stream, std::vector<trace::DeviceRange> ranges,
                                 bool wait) {
  HashTicket t;
  if (ranges.empty()) return t;
  thread_local EndsWithThread<std::vector<kernels::HashRequest>> tlsRequests;  // this thread's, capacity kept
  std::vector<kernels::HashRequest>& requests = threadLocalRef(tlsRequests);
  requests.clear();
  for (const trace::DeviceRange& r : ranges) requests.push_back({r.address, r.size});
  std::string error;
  t.pending = device_.hash(context, stream, requests, options_.sync || wait, error);
  if (!t.pending) {
    cannotHash(ranges, error);
    t.error = error;
  }
  t.ranges = std::move(ranges);
  return t;
}

HashTicket HashRules::hashLaunchRanges(uint64_t context, uint64_t stream, std::vector<trace::DeviceRange> ranges,
                                       bool now, bool onlyRead) {
  if (!defers() || options_.sync) return hashRanges(context, stream, std::move(ranges));
  HashTicket t;
  if (ranges.empty()) {
    t.ranges = std::move(ranges);  // none, but its room goes back with the entry (takeLaunchEntry)
    return t;
  }
  std::string error;
  t.pending = deferral_.add(context, stream, ranges, now, onlyRead, error);
  if (!t.pending) t.error = error;  // reported, and its ranges forgotten, by cannotHash
  t.ranges = std::move(ranges);
  return t;
}

void HashRules::beforeLaunch(uint64_t context, uint64_t stream, const std::vector<trace::DeviceRange>& ranges,
                             const std::vector<OperandRole>& roles, bool unseen) {
  if (defers()) deferral_.beforeLaunch(context, stream, ranges, roles, unseen);
}


std::vector<trace::DeviceRange> HashRules::inputsToHash(const std::vector<trace::DeviceRange>& ranges,
                                                        const std::vector<OperandRole>& roles, uint64_t stream,
                                                        const std::vector<uint32_t>& blind) {
  std::vector<trace::DeviceRange> fresh;
  inputsToHash(ranges, roles, stream, blind, fresh);
  return fresh;
}

bool HashRules::inputsToHash(const std::vector<trace::DeviceRange>& ranges, const std::vector<OperandRole>& roles,
                             uint64_t stream, const std::vector<uint32_t>& blind,
                             std::vector<trace::DeviceRange>& fresh) {
  const auto onlyRead = [&](size_t i) { return !roles.empty() && roles[i] == OperandRole::kRead; };
  bool read = true;
  if (allInputs_) {
    fresh.assign(ranges.begin(), ranges.end());
    for (size_t i = 0; i < ranges.size(); ++i) read = read && onlyRead(i);
    return read;
  }
  fresh.clear();
  WriteHistory::Held history(writeHistory());
  for (size_t i = 0; i < ranges.size(); ++i) {
    const trace::DeviceRange& r = ranges[i];
    if (std::find(blind.begin(), blind.end(), r.allocation) != blind.end()) {
      fresh.push_back(r);
      read = read && onlyRead(i);
      continue;
    }
    const bool untouched = history.touch(r.address, r.address + r.size, streamIdentity(stream));
    // A tensor the op made: its old bytes are none of the op's business, and
    // its hash after the launch vouches for it from then on. (Most launches
    // of a training step write a tensor made in a block freed the step
    // before: hashing it first too would double their GPU work.)
    const bool made = !roles.empty() && roles[i] == OperandRole::kNotGiven;
    if (untouched && !made) {
      fresh.push_back(r);
      read = read && onlyRead(i);
    }
  }
  return read;
}


void HashRules::touched(const HashTicket& written, uint64_t stream) {
  if (allInputs_ || !written.pending) return;
  WriteHistory::Held history(writeHistory());
  for (const trace::DeviceRange& r : written.ranges)
    history.touch(r.address, r.address + r.size, streamIdentity(stream));
}


void HashRules::forgotten(std::span<const trace::DeviceRange> ranges) {
  for (const trace::DeviceRange& r : ranges) writeHistory().forget(r.address, r.address + r.size);
}


void HashRules::operandRolesOf(const std::vector<trace::DeviceRange>& ranges, std::span<const Block> blocks,
                               uint64_t key, std::span<const uint8_t> params,
                               std::span<const trace::PointerParam> pointers, std::vector<OperandRole>& roles) {
  roles.clear();
  if (framework::attribution() == framework::Attribution::kFollow) {
    // No op observed: the roles the launch at this place of the template had.
    thread_local EndsWithThread<std::vector<uint8_t>> tlsLearned;  // capacity kept
    std::vector<uint8_t>& learned = threadLocalRef(tlsLearned);
    if (framework::followedRoles(key, ranges.size(), learned, params, pointers))
      for (uint8_t r : learned) roles.push_back(static_cast<OperandRole>(r));
    return;
  }
  const auto operands = framework::innermostOpOperands();
  if (!operands || ranges.empty()) return;
  // Captured whole by reference: a std::function keeps one pointer without
  // an allocation.
  struct {
    HashRules& rules;
    const trace::DeviceRange* first;
    std::span<const Block> blocks;
    std::unique_lock<std::mutex> lock;  // for the allocation map, taken when a range needs it
  } c{*this, ranges.data(), blocks, std::unique_lock(mu_, std::defer_lock)};
  const TensorExtent extent = [&c](const trace::DeviceRange& r) -> std::optional<Block> {
    if (r.bound == trace::RangeBound::kBlock) {
      const auto i = static_cast<size_t>(&r - c.first);
      return i < c.blocks.size() ? std::optional(c.blocks[i]) : std::nullopt;
    }
    // PyTorch's cudaMallocAsync backend: one allocation per tensor.
    if (!c.lock.owns_lock()) c.lock.lock();
    const trace::Allocation* a = c.rules.memory_.allocations().at(r.address - r.offset);
    if (a != nullptr && a->kind == AllocationKind::kAsync) return std::pair{a->address, a->size};
    return std::nullopt;
  };
  operandRoles(ranges, *operands, extent, roles);
}


std::vector<SnapshotCopy> HashRules::snapshotRanges(uint64_t context, uint64_t stream,
                                                    const std::vector<trace::DeviceRange>& ranges) {
  // The snapshot memory bound may wait for the trace thread, which may wait
  // for a deferred hash.
  flushAll();
  std::vector<SnapshotCopy> out;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].size == 0) continue;
    SnapshotCopy c;
    c.range = i;
    const uint64_t overruns = out_.snapshotBudget().overruns();
    c.lease = out_.snapshotBudget().acquire(ranges[i].size);  // may wait for the trace thread
    if (out_.snapshotBudget().overruns() > overruns) {
      out_.warnOnce("snapshot memory",
                    "snapshots waited 10 s for host memory (GPURR_SNAPSHOT_MEMORY_MB) while the GPU "
                    "did not finish earlier copies; their bytes now take more than the limit");
    }
    std::string error;
    c.copy = device_.copyToHost(context, stream, ranges[i].address, ranges[i].size, options_.sync, error);
    if (!c.copy) {
      out_.warnOnce("snapshot", "cannot copy device buffers for --snapshot (" + error +
                                    "); the affected ranges are recorded without their bytes");
      continue;
    }
    out.push_back(std::move(c));
  }
  return out;
}


void HashRules::checkDeterminism(uint64_t context, const Relaunch& launch,
                                 const std::vector<trace::DeviceRange>& outputs,
                                 std::vector<trace::Annotation>& annotations) {
  if (device_.captures().mayBeOpen()) {
    // The check synchronises the context, which would invalidate the capture.
    annotations.emplace_back(std::in_place_type<trace::Note>,
                             "determinism check skipped: a CUDA graph was being captured in the process");
    return;
  }
  flushAll();  // the re-runs change the outputs before restoring them
  std::vector<kernels::HashRequest> requests;
  requests.reserve(outputs.size());
  for (const trace::DeviceRange& r : outputs) requests.push_back({r.address, r.size});
  std::vector<std::vector<uint64_t>> digests;
  std::string error;
  if (!device_.rerunLaunch(context, launch, requests, options_.checkDeterminism, digests, error) ||
      digests.size() != options_.checkDeterminism) {
    if (error.empty()) error = "the device returned " + std::to_string(digests.size()) + " results";
    out_.warnOnce("determinism", "cannot re-run launches to check their determinism (" + error +
                                     "); launches are recorded without the check");
    return;
  }
  // One result is the digests of every output range together.
  const std::set<std::vector<uint64_t>> distinct(digests.begin(), digests.end());
  annotations.push_back(trace::DeterminismCheck{options_.checkDeterminism, static_cast<uint32_t>(distinct.size())});
}


}  // namespace gpurr::recorder
