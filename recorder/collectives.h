// CollectiveRecorder: collective operations of communicators (NCCL's, seen
// by the wrappers of nccl_interpose.cpp; a framework's, reported by its layer)
// recorded as operations: the send buffer hashed on the call's stream before
// the call, the receive buffer after it (after ncclGroupEnd inside a group),
// each with its communicator's id (the same in every rank of one run),
// rank, size and sequence number.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "recorder/device.h"
#include "recorder/hashing.h"
#include "recorder/memory.h"
#include "recorder/session_output.h"

namespace gpurr::recorder {

// What a wrapper knows of one collective call: the event's description (call,
// op, data type, count, reduction, peer, stream) and its buffers.
struct CollectiveCall {
  trace::Collective event;
  uint64_t comm = 0;  // the library's communicator handle
  uint64_t send = 0, sendBytes = 0;
  uint64_t recv = 0, recvBytes = 0;
};

// A call between its before and its after half.
struct PendingCollective {
  CollectiveCall call;
  uint64_t context = 0;
  bool canEnqueue = false;
  SinkEntry entry;
  // Returned ncclInProgress (a non-blocking communicator): NCCL may enqueue
  // its work later, from a thread of its own, so nothing enqueued now is
  // ordered after it; the receive buffer is not hashed.
  bool inProgress = false;
  // Its buffers hold serialised objects (CollectiveRecorder::objectsOnThisThread):
  // neither is hashed.
  bool objects = false;
};

// The id of a communicator made from a unique id (ncclCommInitRank*): every
// rank passes the same bytes (which NCCL draws anew in every run).
uint64_t communicatorIdFromUniqueId(std::span<const uint8_t> uniqueId);
// ... made by splitting `parent` (ncclCommSplit): the ranks that pass the same
// color to the same split of the same parent share it. `split` numbers the
// parent's splits, in the order each rank makes them (collective calls, so
// the same in every rank).
uint64_t communicatorIdFromSplit(uint64_t parent, int color, uint64_t split);
// ... made by shrinking `parent` (ncclCommShrink): the ranks left pass the
// same excluded ranks (in any order); `shrink` numbers the parent's shrinks
// of those ranks (nextShrink).
uint64_t communicatorIdFromShrink(uint64_t parent, std::span<const int> excluded, uint64_t shrink);
// ... made with every one of its ranks in this process (ncclCommInitAll,
// one rank a device): the process's `call`th such call, over `devices`.
uint64_t communicatorIdFromDevices(std::span<const int> devices, uint64_t call);

class CollectiveRecorder {
 public:
  CollectiveRecorder(Device& device, SessionOutput& out, MemoryRecorder& memory, HashRules& hashing);

  // A communicator handle now stands for (id, rank, size).
  void communicatorCreated(uint64_t comm, uint64_t id, int32_t rank, int32_t size);
  void communicatorDestroyed(uint64_t comm);
  // The id of the communicator `comm` stands for (0 when unknown), and the
  // number of splits made of it so far (counting this one).
  uint64_t communicatorId(uint64_t comm);
  uint64_t nextSplit(uint64_t comm);
  // The number of shrinks of it that excluded the ranks `excluded` (in any
  // order) so far, counting this one: only the ranks left make them.
  uint64_t nextShrink(uint64_t comm, std::span<const int> excluded);
  // The number of communicators made whole in this process so far (counting
  // this one; ncclCommInitAll).
  uint64_t nextWholeCommunicator();
  // The rank and size `comm` was registered with; false when it is not
  // known (a wrapper asks the library for those of one made before
  // recording began, or promised, and registers it with id 0 or the
  // promised one).
  bool rankAndSize(uint64_t comm, int32_t& rank, int32_t& size);
  // Its rank and size, learnt after it was registered (size > 0 only).
  void communicatorSized(uint64_t comm, int32_t rank, int32_t size);
  // A split or shrink returned before the library wrote its communicator
  // to `slot` (the call's ncclComm_t*: a non-blocking call, whose
  // communicator NCCL's own thread writes there later, or one inside a
  // group, written at the group's end): the communicator found there later
  // stands for `id`. The latest kPromises are kept.
  void communicatorPromised(uint64_t slot, uint64_t id);
  // The id promised for `comm`, a communicator not known yet (0: none): the
  // promised slots are read with `read` (false where they cannot be read:
  // memory the program has given back), the latest first, and the promise
  // whose slot holds `comm` is kept, once.
  uint64_t promisedId(uint64_t comm, const std::function<bool(uint64_t slot, uint64_t& value)>& read);
  static constexpr size_t kPromises = 64;

  // Before the real call: the communicator's id, rank, size and sequence
  // number, the send buffer hashed on the call's stream.
  std::unique_ptr<PendingCollective> before(CollectiveCall call);
  // After it returned (`ok`: successfully; `inProgress`: ncclInProgress):
  // the receive buffer hashed and the event emitted, or, inside a group on
  // this thread, both kept until the group's end. A failed call is not
  // recorded.
  void after(std::unique_ptr<PendingCollective> pending, bool ok, bool inProgress = false);
  // The collectives this thread issues from now on (`delta` 1) carry objects
  // the framework serialised (torch.distributed's *_object* calls pickle
  // them, and a pickled tensor holds a host address that differs from run
  // to run): they are recorded without digests until `delta` -1 (nests).
  static void objectsOnThisThread(int delta);
  // ncclGroupStart / ncclGroupEnd on this thread (groups nest; the outermost
  // end completes the group's collectives, `ok` when it succeeded).
  void groupStart();
  void groupEnd(bool ok, bool inProgress = false);

  // A framework's device tensors that its collective sends or receives,
  // hashed on `stream` behind the work enqueued there so far: a handle for
  // frameworkCollective, 0 when nothing could be hashed (a stream being
  // captured, memory the device cannot read, no recording).
  uint64_t hashFrameworkTensors(uint64_t stream, std::span<const std::pair<uint64_t, uint64_t>> tensors);
  // A handle frameworkCollective will not take.
  void dropFrameworkHashes(uint64_t handle);
  // A framework's collective (source kFramework), with the digests its layer
  // computed (host tensors), those of the handles `sent` and `received` (its
  // device tensors; 0 none), or none: numbered in its communicator and
  // emitted, its origin's op the call and its line the program's (`file`,
  // `line`; none when null).
  void frameworkCollective(trace::Collective event, const char* file, uint32_t line, uint64_t sent = 0,
                           uint64_t received = 0);
  // A framework's synchronous collective about to run, which may never
  // return (ranks that issue other collectives wait for good, or until the
  // backend's timeout): kept, with the calling thread's origin, until
  // frameworkDone, and emitted as described (what it receives without
  // digests; `sent` the handle of what it sends from device memory, taken
  // only then) by emitPending if the trace is flushed or closed first.
  // Returns its ticket.
  uint64_t frameworkPending(trace::Collective event, const char* file, uint32_t line, uint64_t sent = 0);
  // The call of `ticket` returned or raised: whether it was still kept
  // (false: emitPending wrote it).
  bool frameworkDone(uint64_t ticket);
  // Emits the framework collectives still kept, in the order they began
  // (the session's flush and finish).
  void emitPending();

 private:
  struct Communicator {
    uint64_t id = 0;
    int32_t rank = -1, size = 0;
    uint64_t nextSequence = 0, splits = 0;
    std::unordered_map<uint64_t, uint64_t> shrinks;  // by the excluded ranks' hash
  };
  void complete(PendingCollective& pending);
  void emitFramework(trace::Collective event, std::optional<trace::Origin> origin, const char* file, uint32_t line,
                     uint64_t sent, uint64_t received);
  struct KeptCall {
    trace::Collective event;
    std::optional<trace::Origin> origin;
    std::string file;  // empty: none
    uint32_t line = 0;
    uint64_t sent = 0;
  };
  // The hashes of `handle` and their stream (none: an empty ticket).
  std::pair<HashTicket, uint64_t> takeFrameworkHashes(uint64_t handle);

  Device& device_;
  SessionOutput& out_;
  MemoryRecorder& memory_;
  HashRules& hashing_;
  std::mutex mu_;  // communicators_, frameworkSequences_, groups_, frameworkHashes_, promises_, kept_
  std::unordered_map<uint64_t, Communicator> communicators_;
  std::unordered_map<uint64_t, uint64_t> frameworkSequences_;  // by communicator id
  uint64_t groups_ = 0;
  std::unordered_map<uint64_t, std::pair<HashTicket, uint64_t>> frameworkHashes_;  // by handle, with the stream
  uint64_t nextHandle_ = 0;
  uint64_t wholeCommunicators_ = 0;
  std::deque<std::pair<uint64_t, uint64_t>> promises_;  // (slot, id), oldest first
  std::map<uint64_t, KeptCall> kept_;                   // frameworkPending's, by ticket
  uint64_t nextKept_ = 0;
};

// The session's collective recorder while one records (the wrappers and the
// framework layer's exports reach it through here); null otherwise.
CollectiveRecorder* activeCollectives();
void setActiveCollectives(CollectiveRecorder* recorder);

}  // namespace gpurr::recorder
