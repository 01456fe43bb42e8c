// Collective operations recorded as operations (see collectives.h): the
// communicators' ids and sequence numbers, the send and receive buffers'
// hashes, groups.
#include "recorder/collectives.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>

#include "recorder/framework_context.h"
#include "recorder/reentrancy.h"
#include "recorder/thread_local_ref.h"
#include "trace_format/hash.h"

namespace gpurr::recorder {
namespace {

std::atomic<CollectiveRecorder*> gActive{nullptr};

// The thread's ncclGroupStart/End nesting, its group's number and the
// collectives waiting for its end.
struct GroupState {
  int depth = 0;
  uint64_t number = 0;
  std::vector<std::unique_ptr<PendingCollective>> waiting;
};
thread_local EndsWithThread<GroupState> tGroup;
thread_local int tObjects = 0;  // objectsOnThisThread's depth

// A collective's origin. Outside a backward node's scope no phase is
// claimed: autograd's hooks run there too (DistributedDataParallel issues
// its buckets' all-reduces from them), outside every node's scope.
std::optional<trace::Origin> collectiveOrigin() {
  std::optional<trace::Origin> o = framework::originOutsideTemplate();
  if (o && o->phase == trace::Phase::kForward) o->phase = trace::Phase::kUnknown;
  return o;
}

// Ids are never 0 (0: unknown).
uint64_t nonZero(uint64_t id) { return id == 0 ? 1 : id; }

// A tagged id of numbers (the tag keeps ids of different kinds apart).
uint64_t idOfNumbers(char tag, std::span<const int64_t> numbers) {
  std::vector<uint8_t> bytes(1 + numbers.size() * 8);
  bytes[0] = static_cast<uint8_t>(tag);
  std::memcpy(bytes.data() + 1, numbers.data(), numbers.size() * 8);
  return nonZero(hash::hashBuffer(bytes));
}

}  // namespace

CollectiveRecorder* activeCollectives() { return gActive.load(std::memory_order_acquire); }
void setActiveCollectives(CollectiveRecorder* recorder) { gActive.store(recorder, std::memory_order_release); }

uint64_t communicatorIdFromUniqueId(std::span<const uint8_t> uniqueId) { return nonZero(hash::hashBuffer(uniqueId)); }

uint64_t communicatorIdFromSplit(uint64_t parent, int color, uint64_t split) {
  uint8_t bytes[24];
  const int64_t c = color;
  std::memcpy(bytes, &parent, 8);
  std::memcpy(bytes + 8, &c, 8);
  std::memcpy(bytes + 16, &split, 8);
  return nonZero(hash::hashBuffer(bytes));
}

uint64_t communicatorIdFromShrink(uint64_t parent, std::span<const int> excluded, uint64_t shrink) {
  std::vector<int64_t> numbers{static_cast<int64_t>(parent), static_cast<int64_t>(shrink)};
  const size_t head = numbers.size();
  numbers.insert(numbers.end(), excluded.begin(), excluded.end());
  std::sort(numbers.begin() + static_cast<std::ptrdiff_t>(head), numbers.end());
  return idOfNumbers('S', numbers);
}

uint64_t communicatorIdFromDevices(std::span<const int> devices, uint64_t call) {
  std::vector<int64_t> numbers{static_cast<int64_t>(call)};
  numbers.insert(numbers.end(), devices.begin(), devices.end());
  return idOfNumbers('D', numbers);
}

CollectiveRecorder::CollectiveRecorder(Device& device, SessionOutput& out, MemoryRecorder& memory, HashRules& hashing)
    : device_(device), out_(out), memory_(memory), hashing_(hashing) {}

void CollectiveRecorder::communicatorCreated(uint64_t comm, uint64_t id, int32_t rank, int32_t size) {
  std::lock_guard lock(mu_);
  communicators_[comm] = Communicator{id, rank, size, 0, 0, {}};
}

void CollectiveRecorder::communicatorDestroyed(uint64_t comm) {
  std::lock_guard lock(mu_);
  communicators_.erase(comm);
}

uint64_t CollectiveRecorder::communicatorId(uint64_t comm) {
  std::lock_guard lock(mu_);
  auto it = communicators_.find(comm);
  return it == communicators_.end() ? 0 : it->second.id;
}

uint64_t CollectiveRecorder::nextSplit(uint64_t comm) {
  std::lock_guard lock(mu_);
  return ++communicators_[comm].splits;
}

uint64_t CollectiveRecorder::nextShrink(uint64_t comm, std::span<const int> excluded) {
  const uint64_t key = communicatorIdFromShrink(0, excluded, 0);  // the ranks, in any order
  std::lock_guard lock(mu_);
  return ++communicators_[comm].shrinks[key];
}

uint64_t CollectiveRecorder::nextWholeCommunicator() {
  std::lock_guard lock(mu_);
  return ++wholeCommunicators_;
}

bool CollectiveRecorder::rankAndSize(uint64_t comm, int32_t& rank, int32_t& size) {
  std::lock_guard lock(mu_);
  auto it = communicators_.find(comm);
  if (it == communicators_.end()) return false;
  rank = it->second.rank, size = it->second.size;
  return true;
}

void CollectiveRecorder::communicatorSized(uint64_t comm, int32_t rank, int32_t size) {
  if (size <= 0) return;
  std::lock_guard lock(mu_);
  if (auto it = communicators_.find(comm); it != communicators_.end()) it->second.rank = rank, it->second.size = size;
}

void CollectiveRecorder::communicatorPromised(uint64_t slot, uint64_t id) {
  std::lock_guard lock(mu_);
  if (promises_.size() == kPromises) promises_.pop_front();
  promises_.emplace_back(slot, id);
}

uint64_t CollectiveRecorder::promisedId(uint64_t comm, const std::function<bool(uint64_t, uint64_t&)>& read) {
  std::lock_guard lock(mu_);
  for (auto it = promises_.rbegin(); it != promises_.rend(); ++it) {
    uint64_t value = 0;
    if (read(it->first, value) && value == comm) {
      const uint64_t id = it->second;
      promises_.erase(std::next(it).base());
      return id;
    }
  }
  return 0;
}

std::unique_ptr<PendingCollective> CollectiveRecorder::before(CollectiveCall call) {
  ReentrancyGuard guard;  // the hash's own driver calls are not recorded
  out_.ensureStarted();
  auto p = std::make_unique<PendingCollective>();
  trace::Collective& c = call.event;
  {
    std::lock_guard lock(mu_);
    Communicator& comm = communicators_[call.comm];
    c.communicator = comm.id;
    c.rank = comm.rank;
    c.size = comm.size;
    c.sequence = comm.nextSequence++;
  }
  c.group = tGroup.depth > 0 ? tGroup.number : 0;
  p->context = device_.streamContext(c.stream);
  p->canEnqueue = device_.canEnqueue(c.stream);
  // NCCL's kernels reach the buffers through NCCL's own structures, which no
  // scanned pointer shows: every held-back output hash goes out first.
  hashing_.flushAll();
  p->objects = tObjects > 0;
  if (p->canEnqueue && !p->objects && call.send != 0 && call.sendBytes > 0) {
    const trace::DeviceRange sent = memory_.deviceRange(call.send, call.sendBytes);
    if (memory_.readableIn(p->context, sent)) p->entry.before = hashing_.hashRanges(p->context, c.stream, {sent});
  }
  p->call = std::move(call);
  return p;
}

void CollectiveRecorder::after(std::unique_ptr<PendingCollective> pending, bool ok, bool inProgress) {
  if (pending == nullptr || !ok) return;
  pending->inProgress = inProgress;
  if (tGroup.depth > 0) {
    tGroup.waiting.push_back(std::move(pending));
    return;
  }
  complete(*pending);
}

void CollectiveRecorder::complete(PendingCollective& p) {
  ReentrancyGuard guard;
  const CollectiveCall& call = p.call;
  const uint64_t stream = call.event.stream;
  if (call.recv != 0 && call.recvBytes > 0) {
    const trace::DeviceRange received = memory_.deviceRange(call.recv, call.recvBytes);
    if (p.canEnqueue && !p.inProgress && !p.objects && memory_.readableIn(p.context, received)) {
      p.entry.after = hashing_.hashRanges(p.context, stream, {received});
      hashing_.touched(p.entry.after, stream);
    }
    if (!p.entry.after.pending) hashing_.forgotten({received});  // written without a digest
  }
  p.entry.event = out_.newEvent(std::move(p.call.event));
  p.entry.event.origin = collectiveOrigin();
  out_.emit(std::move(p.entry));
}

void CollectiveRecorder::objectsOnThisThread(int delta) { tObjects = std::max(0, tObjects + delta); }

void CollectiveRecorder::groupStart() {
  if (tGroup.depth++ == 0) {
    std::lock_guard lock(mu_);
    tGroup.number = ++groups_;
  }
}

void CollectiveRecorder::groupEnd(bool ok, bool inProgress) {
  if (tGroup.depth == 0) return;
  if (--tGroup.depth > 0) return;
  std::vector<std::unique_ptr<PendingCollective>> waiting = std::move(tGroup.waiting);
  tGroup.waiting.clear();
  if (!ok) return;
  for (auto& p : waiting) {
    p->inProgress = p->inProgress || inProgress;
    complete(*p);
  }
}

uint64_t CollectiveRecorder::hashFrameworkTensors(uint64_t stream,
                                                  std::span<const std::pair<uint64_t, uint64_t>> tensors) {
  ReentrancyGuard guard;
  out_.ensureStarted();
  if (!device_.canEnqueue(stream)) return 0;
  const uint64_t context = device_.streamContext(stream);
  std::vector<trace::DeviceRange> ranges;
  for (const auto& [address, size] : tensors) {
    if (address == 0 || size == 0) continue;
    const trace::DeviceRange r = memory_.deviceRange(address, size);
    if (memory_.readableIn(context, r)) ranges.push_back(r);
  }
  if (ranges.empty()) return 0;
  // As before an NCCL call: the backend's own work reaches these tensors
  // unseen, so every held-back hash goes out first.
  hashing_.flushAll();
  HashTicket ticket = hashing_.hashRanges(context, stream, std::move(ranges));
  if (!ticket.pending) return 0;
  std::lock_guard lock(mu_);
  frameworkHashes_.emplace(++nextHandle_, std::pair{std::move(ticket), stream});
  return nextHandle_;
}

void CollectiveRecorder::dropFrameworkHashes(uint64_t handle) { takeFrameworkHashes(handle); }

std::pair<HashTicket, uint64_t> CollectiveRecorder::takeFrameworkHashes(uint64_t handle) {
  std::lock_guard lock(mu_);
  auto it = frameworkHashes_.find(handle);
  if (it == frameworkHashes_.end()) return {};
  std::pair<HashTicket, uint64_t> t = std::move(it->second);
  frameworkHashes_.erase(it);
  return t;
}

void CollectiveRecorder::frameworkCollective(trace::Collective event, const char* file, uint32_t line, uint64_t sent,
                                             uint64_t received) {
  emitFramework(std::move(event), collectiveOrigin(), file, line, sent, received);
}

uint64_t CollectiveRecorder::frameworkPending(trace::Collective event, const char* file, uint32_t line,
                                              uint64_t sent) {
  KeptCall call{std::move(event), collectiveOrigin(), file != nullptr ? file : "", line, sent};
  std::lock_guard lock(mu_);
  kept_.emplace(++nextKept_, std::move(call));
  return nextKept_;
}

bool CollectiveRecorder::frameworkDone(uint64_t ticket) {
  std::lock_guard lock(mu_);
  return kept_.erase(ticket) > 0;
}

void CollectiveRecorder::emitPending() {
  std::map<uint64_t, KeptCall> kept;
  {
    std::lock_guard lock(mu_);
    kept.swap(kept_);
  }
  for (auto& [ticket, call] : kept) {
    emitFramework(std::move(call.event), std::move(call.origin), call.file.empty() ? nullptr : call.file.c_str(),
                  call.line, call.sent, 0);
  }
}

void CollectiveRecorder::emitFramework(trace::Collective event, std::optional<trace::Origin> origin, const char* file,
                                       uint32_t line, uint64_t sent, uint64_t received) {
  out_.ensureStarted();
  {
    std::lock_guard lock(mu_);
    event.sequence = frameworkSequences_[event.communicator]++;
  }
  // Tensors the layer listed: those in device memory (a CUDA tensor an
  // asynchronous call receives) take their allocation, as a launch's ranges.
  for (auto* list : {&event.inputs, &event.outputs}) {
    for (trace::RangeDigest& r : *list) {
      if (r.range.allocation == 0) r.range = memory_.deviceRange(r.range.address, r.range.size);
    }
  }
  std::string call = event.call;
  SinkEntry entry;
  // Device tensors: the event is on the stream they were hashed on.
  for (auto [ticket, handle] : {std::pair{&entry.before, sent}, std::pair{&entry.after, received}}) {
    auto [hashes, stream] = takeFrameworkHashes(handle);
    if (!hashes.pending) continue;
    *ticket = std::move(hashes);
    event.stream = stream;
  }
  if (entry.after.pending) hashing_.touched(entry.after, event.stream);
  entry.event = out_.newEvent(std::move(event));
  trace::Origin& o = *(entry.event.origin = std::move(origin).value_or(trace::Origin{}));
  if (o.op.empty()) o.op = call, o.opStack = {call};
  if (file != nullptr) o.file = file, o.line = line;
  out_.emit(std::move(entry));
}

}  // namespace gpurr::recorder
