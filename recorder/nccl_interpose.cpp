// Exported wrappers around NCCL's communicator, group and collective entry
// points (preloaded, as interpose.cpp's): each collective becomes a
// Collective event of the session's CollectiveRecorder (collectives.h), its
// send buffer hashed on its stream before the call and its receive buffer
// after it, or after ncclGroupEnd inside a group. Communicators are known by
// an id the same in every rank of one run: a hash of the ncclUniqueId they
// were made from, or of their parent's id and how it was split or shrunk,
// or of the devices of ncclCommInitAll. The real functions are found in the
// loaded libnccl.so.2 however it was loaded (PyTorch opens it RTLD_LOCAL,
// through libtorch_cuda.so), and their result is returned unchanged; without
// a recording session the wrappers only forward.
#include <fcntl.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <span>
#include <vector>

#include "recorder/collectives.h"
#include "recorder/real_function.h"
#include "recorder/reentrancy.h"

#define GPURR_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpurr::recorder {
namespace {

uint64_t u64(const void* p) { return reinterpret_cast<uint64_t>(p); }

const char* typeName(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "float16";
    case ncclFloat32: return "float32";
    case ncclFloat64: return "float64";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat8e4m3: return "float8_e4m3";
    case ncclFloat8e5m2: return "float8_e5m2";
    default: return "unknown";
  }
}

uint64_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;  // unknown: nothing hashed
  }
}

const char* redOpName(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "premulsum";  // made by ncclRedOpCreatePreMulSum
  }
}

// The session's collective recorder, unless there is none, this call is
// the recorder's own, or its thread's thread_locals are gone (a static
// destructor's ncclCommDestroy at exit(): thread_local_ref.h).
CollectiveRecorder* recorder() {
  const ThreadFlags& flags = threadFlags();
  return flags.inside || flags.ended ? nullptr : activeCollectives();
}

// A communicator's rank and size as the library tells them (-1 and 0 when
// it does not).
void askRankAndSize(ncclComm_t comm, int32_t& rank, int32_t& size) {
  static Real<decltype(&::ncclCommUserRank)> userRank{"ncclCommUserRank", WrappedLibrary::Nccl};
  static Real<decltype(&::ncclCommCount)> count{"ncclCommCount", WrappedLibrary::Nccl};
  int rk = -1, n = 0;
  if (auto f = userRank.find(); f == nullptr || f(comm, &rk) != ncclSuccess) rk = -1;
  if (auto f = count.find(); f == nullptr || f(comm, &n) != ncclSuccess) n = 0;
  rank = rk, size = n;
}

// Reads 8-byte words of this process without a fault where the program has
// gone on to unmap that memory (a promised slot on a thread's stack that is
// gone): through a pipe, whose write of unreadable memory fails (EFAULT).
// Memory freed but still mapped reads as what it holds now: the lookup
// is a best effort. One pipe for one lookup's words.
class SafeReader {
 public:
  SafeReader() { open_ = pipe2(fds_, O_CLOEXEC | O_NONBLOCK) == 0; }
  ~SafeReader() {
    if (open_) close(fds_[0]), close(fds_[1]);
  }
  SafeReader(const SafeReader&) = delete;
  SafeReader& operator=(const SafeReader&) = delete;
  bool operator()(uint64_t address, uint64_t& value) const {
    return open_ && write(fds_[1], reinterpret_cast<const void*>(address), sizeof value) == sizeof value &&
           read(fds_[0], &value, sizeof value) == sizeof value;
  }

 private:
  int fds_[2] = {-1, -1};
  bool open_ = false;
};

// Registers a communicator not known yet: one a split or shrink promised
// (derive), with its id, or else one made before recording began (or by a
// call not wrapped), id 0; its rank and size from the library. One whose
// size was not known when it was made (a non-blocking communicator still
// being initialised) is asked again.
void learn(CollectiveRecorder& r, ncclComm_t comm, int32_t& rank, int32_t& size) {
  const bool known = r.rankAndSize(u64(comm), rank, size);
  if (known && size > 0) return;
  askRankAndSize(comm, rank, size);
  if (known) {
    r.communicatorSized(u64(comm), rank, size);
    return;
  }
  const SafeReader reader;
  r.communicatorCreated(u64(comm), r.promisedId(u64(comm), [&reader](uint64_t a, uint64_t& v) { return reader(a, v); }),
                        rank, size);
}

// The buffers of one collective, in bytes, by what this rank sends and
// receives. `rank` and `size` are the communicator's.
struct Buffers {
  const void* send = nullptr;
  uint64_t sendBytes = 0;
  const void* recv = nullptr;
  uint64_t recvBytes = 0;
};

// Set while this thread is inside a wrapped collective: NCCL's own entry
// points call one another through their PLT (ncclBcast calls
// ncclBroadcast), which reaches the wrapper again; that inner call is the
// same collective, and only forwards.
thread_local bool tInCollective = false;

// Runs `real` as a recorded collective: described by `event` (its call, op,
// type, count, reduction, peer and stream), buffers by `buffers`.
template <typename Buf, typename Call>
ncclResult_t collective(trace::Collective event, ncclComm_t comm, Buf buffers, Call real) {
  CollectiveRecorder* r = recorder();
  if (r == nullptr || tInCollective) return real();
  std::unique_ptr<PendingCollective> pending;
  try {
    int32_t rank = -1, size = 0;
    learn(*r, comm, rank, size);
    const Buffers b = buffers(rank, size);
    CollectiveCall call{std::move(event), u64(comm), u64(b.send), b.sendBytes, u64(b.recv), b.recvBytes};
    pending = r->before(std::move(call));
  } catch (const std::exception&) {
    pending.reset();  // the program runs on; the call is not recorded
  }
  tInCollective = true;
  const ncclResult_t result = real();
  tInCollective = false;
  try {
    r->after(std::move(pending), result == ncclSuccess || result == ncclInProgress, result == ncclInProgress);
  } catch (const std::exception&) {
  }
  return result;
}

trace::Collective describe(const char* call, trace::CollectiveOp op, size_t count, ncclDataType_t type,
                           cudaStream_t stream, int peer = -1, const char* reduceOp = "") {
  trace::Collective c;
  c.source = trace::CollectiveSource::kNccl;
  c.call = call;
  c.op = op;
  c.count = count;
  c.dataType = typeName(type);
  c.stream = u64(stream);
  c.peer = peer;
  c.reduceOp = reduceOp;
  return c;
}

void created(ncclComm_t* comm, uint64_t id, int rank, int nranks, ncclResult_t result) {
  CollectiveRecorder* r = recorder();
  if (r == nullptr || comm == nullptr || *comm == nullptr || (result != ncclSuccess && result != ncclInProgress))
    return;
  r->communicatorCreated(u64(*comm), id, rank, nranks);
}

uint64_t idOf(const ncclUniqueId& id) {
  return communicatorIdFromUniqueId({reinterpret_cast<const uint8_t*>(id.internal), sizeof(id.internal)});
}

// Runs `real`, which makes `*newcomm` of `comm` (a split or a shrink), and
// registers it with the id `idOf(recorder, the parent's id)` gives, asked
// before the call (it numbers the parent's splits or shrinks). A
// non-blocking call, or one inside a group, leaves `*newcomm` null until
// NCCL's own thread (with an atomic store) or the group's end sets it: that
// communicator is promised the id, and registered with it at its first use
// (learn). A split this rank takes no part in (`makes` false:
// NCCL_SPLIT_NOCOLOR, as PyTorch's new_group splits on the ranks outside
// the group) makes none.
template <typename Call, typename IdOf>
ncclResult_t derive(ncclComm_t comm, ncclComm_t* newcomm, bool makes, Call real, IdOf idOf) {
  CollectiveRecorder* r = recorder();
  uint64_t id = 0;
  if (r != nullptr) {
    int32_t rank = -1, size = 0;
    learn(*r, comm, rank, size);
    id = idOf(*r, r->communicatorId(u64(comm)));
  }
  const ncclResult_t result = real();
  const bool made = result == ncclSuccess || result == ncclInProgress;
  if (r == nullptr || newcomm == nullptr || !made || !makes) return result;
  const ncclComm_t written = __atomic_load_n(newcomm, __ATOMIC_ACQUIRE);
  if (written == nullptr) {
    r->communicatorPromised(u64(newcomm), id);
    return result;
  }
  int32_t rank = -1, size = 0;
  askRankAndSize(written, rank, size);
  r->communicatorCreated(u64(written), id, rank, size);
  return result;
}

using Op = trace::CollectiveOp;

}  // namespace
}  // namespace gpurr::recorder

using namespace gpurr::recorder;

// ---- communicators

GPURR_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  GPURR_REAL(ncclCommInitRank, Nccl);
  const ncclResult_t result = real(comm, nranks, commId, rank);
  created(comm, idOf(commId), rank, nranks, result);
  return result;
}

GPURR_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                 ncclConfig_t* config) {
  GPURR_REAL(ncclCommInitRankConfig, Nccl);
  const ncclResult_t result = real(comm, nranks, commId, rank, config);
  created(comm, idOf(commId), rank, nranks, result);
  return result;
}

GPURR_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int myrank, int nId,
                                                   ncclUniqueId* commIds, ncclConfig_t* config) {
  GPURR_REAL(ncclCommInitRankScalable, Nccl);
  const ncclResult_t result = real(comm, nranks, myrank, nId, commIds, config);
  if (commIds != nullptr && nId > 0) {
    created(comm,
            communicatorIdFromUniqueId({reinterpret_cast<const uint8_t*>(commIds), sizeof(ncclUniqueId) * nId}),
            myrank, nranks, result);
  }
  return result;
}

GPURR_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                        ncclConfig_t* config) {
  GPURR_REAL(ncclCommSplit, Nccl);
  return derive(comm, newcomm, color != NCCL_SPLIT_NOCOLOR, [&] { return real(comm, color, key, newcomm, config); },
                [&](CollectiveRecorder& r, uint64_t parent) {
                  return communicatorIdFromSplit(parent, color, r.nextSplit(u64(comm)));
                });
}

// The ranks left after excluding some (NCCL 2.27). The excluded ranks do not
// call it: its number counts the parent's shrinks of the same ranks, apart
// from its splits, which every rank makes.
GPURR_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  GPURR_REAL(ncclCommShrink, Nccl);
  const std::span<const int> excluded =
      excludeRanksList != nullptr && excludeRanksCount > 0
          ? std::span<const int>(excludeRanksList, static_cast<size_t>(excludeRanksCount))
          : std::span<const int>();
  return derive(comm, newcomm, true,
                [&] { return real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags); },
                [&](CollectiveRecorder& r, uint64_t parent) {
                  return communicatorIdFromShrink(parent, excluded, r.nextShrink(u64(comm), excluded));
                });
}

// Every rank in this process, one a device (torch.nn.DataParallel's
// communicators): rank i is devlist[i], or device i without a list. Its
// communicators are written before it returns, also when NCCL_COMM_BLOCKING=0
// has it return ncclInProgress.
GPURR_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  GPURR_REAL(ncclCommInitAll, Nccl);
  const ncclResult_t result = real(comm, ndev, devlist);
  CollectiveRecorder* r = recorder();
  if (r == nullptr || comm == nullptr || ndev <= 0 || (result != ncclSuccess && result != ncclInProgress))
    return result;
  std::vector<int> devices(static_cast<size_t>(ndev));
  for (int i = 0; i < ndev; ++i) devices[static_cast<size_t>(i)] = devlist != nullptr ? devlist[i] : i;
  const uint64_t id = communicatorIdFromDevices(devices, r->nextWholeCommunicator());
  for (int i = 0; i < ndev; ++i)
    if (comm[i] != nullptr) r->communicatorCreated(u64(comm[i]), id, i, ndev);
  return result;
}

GPURR_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  GPURR_REAL(ncclCommDestroy, Nccl);
  if (CollectiveRecorder* r = recorder()) r->communicatorDestroyed(u64(comm));
  return real(comm);
}

GPURR_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  GPURR_REAL(ncclCommAbort, Nccl);
  if (CollectiveRecorder* r = recorder()) r->communicatorDestroyed(u64(comm));
  return real(comm);
}

// ---- groups

GPURR_EXPORT ncclResult_t ncclGroupStart() {
  GPURR_REAL(ncclGroupStart, Nccl);
  const ncclResult_t result = real();
  if (CollectiveRecorder* r = recorder(); r != nullptr && result == ncclSuccess) r->groupStart();
  return result;
}

GPURR_EXPORT ncclResult_t ncclGroupEnd() {
  GPURR_REAL(ncclGroupEnd, Nccl);
  const ncclResult_t result = real();
  if (CollectiveRecorder* r = recorder()) {
    try {
      r->groupEnd(result == ncclSuccess || result == ncclInProgress, result == ncclInProgress);
    } catch (const std::exception&) {
    }
  }
  return result;
}

// ---- collectives

GPURR_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                        ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  GPURR_REAL(ncclAllReduce, Nccl);
  const uint64_t bytes = count * typeSize(datatype);
  return collective(describe("ncclAllReduce", Op::kAllReduce, count, datatype, stream, -1, redOpName(op)), comm,
                    [&](int32_t, int32_t) { return Buffers{sendbuff, bytes, recvbuff, bytes}; },
                    [&] { return real(sendbuff, recvbuff, count, datatype, op, comm, stream); });
}

GPURR_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                            cudaStream_t stream) {
  GPURR_REAL(ncclReduceScatter, Nccl);
  const uint64_t bytes = recvcount * typeSize(datatype);
  return collective(describe("ncclReduceScatter", Op::kReduceScatter, recvcount, datatype, stream, -1, redOpName(op)),
                    comm,
                    [&](int32_t, int32_t size) { return Buffers{sendbuff, bytes * std::max(size, 0), recvbuff, bytes}; },
                    [&] { return real(sendbuff, recvbuff, recvcount, datatype, op, comm, stream); });
}

GPURR_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                        ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  GPURR_REAL(ncclAllGather, Nccl);
  const uint64_t bytes = sendcount * typeSize(datatype);
  return collective(describe("ncclAllGather", Op::kAllGather, sendcount, datatype, stream), comm,
                    [&](int32_t, int32_t size) { return Buffers{sendbuff, bytes, recvbuff, bytes * std::max(size, 0)}; },
                    [&] { return real(sendbuff, recvbuff, sendcount, datatype, comm, stream); });
}

GPURR_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                        int root, ncclComm_t comm, cudaStream_t stream) {
  GPURR_REAL(ncclBroadcast, Nccl);
  const uint64_t bytes = count * typeSize(datatype);
  return collective(describe("ncclBroadcast", Op::kBroadcast, count, datatype, stream, root), comm,
                    [&](int32_t rank, int32_t) {
                      return Buffers{rank == root ? sendbuff : nullptr, bytes, recvbuff, bytes};
                    },
                    [&] { return real(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

GPURR_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                    cudaStream_t stream) {
  GPURR_REAL(ncclBcast, Nccl);
  const uint64_t bytes = count * typeSize(datatype);
  return collective(describe("ncclBcast", Op::kBroadcast, count, datatype, stream, root), comm,
                    [&](int32_t rank, int32_t) { return Buffers{rank == root ? buff : nullptr, bytes, buff, bytes}; },
                    [&] { return real(buff, count, datatype, root, comm, stream); });
}

GPURR_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  GPURR_REAL(ncclReduce, Nccl);
  const uint64_t bytes = count * typeSize(datatype);
  return collective(describe("ncclReduce", Op::kReduce, count, datatype, stream, root, redOpName(op)), comm,
                    [&](int32_t rank, int32_t) {
                      return Buffers{sendbuff, bytes, rank == root ? recvbuff : nullptr, bytes};
                    },
                    [&] { return real(sendbuff, recvbuff, count, datatype, op, root, comm, stream); });
}

GPURR_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclComm_t comm, cudaStream_t stream) {
  GPURR_REAL(ncclAlltoAll, Nccl);
  const uint64_t bytes = count * typeSize(datatype);
  return collective(describe("ncclAlltoAll", Op::kAllToAll, count, datatype, stream), comm,
                    [&](int32_t, int32_t size) {
                      const uint64_t all = bytes * std::max(size, 0);
                      return Buffers{sendbuff, all, recvbuff, all};
                    },
                    [&] { return real(sendbuff, recvbuff, count, datatype, comm, stream); });
}

GPURR_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     int root, ncclComm_t comm, cudaStream_t stream) {
  GPURR_REAL(ncclGather, Nccl);
  const uint64_t bytes = count * typeSize(datatype);
  return collective(describe("ncclGather", Op::kGather, count, datatype, stream, root), comm,
                    [&](int32_t rank, int32_t size) {
                      return Buffers{sendbuff, bytes, rank == root ? recvbuff : nullptr, bytes * std::max(size, 0)};
                    },
                    [&] { return real(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

GPURR_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      int root, ncclComm_t comm, cudaStream_t stream) {
  GPURR_REAL(ncclScatter, Nccl);
  const uint64_t bytes = count * typeSize(datatype);
  return collective(describe("ncclScatter", Op::kScatter, count, datatype, stream, root), comm,
                    [&](int32_t rank, int32_t size) {
                      return Buffers{rank == root ? sendbuff : nullptr, bytes * std::max(size, 0), recvbuff, bytes};
                    },
                    [&] { return real(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

GPURR_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                   ncclComm_t comm, cudaStream_t stream) {
  GPURR_REAL(ncclSend, Nccl);
  const uint64_t bytes = count * typeSize(datatype);
  return collective(describe("ncclSend", Op::kSend, count, datatype, stream, peer), comm,
                    [&](int32_t, int32_t) { return Buffers{sendbuff, bytes, nullptr, 0}; },
                    [&] { return real(sendbuff, count, datatype, peer, comm, stream); });
}

GPURR_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                   cudaStream_t stream) {
  GPURR_REAL(ncclRecv, Nccl);
  const uint64_t bytes = count * typeSize(datatype);
  return collective(describe("ncclRecv", Op::kRecv, count, datatype, stream, peer), comm,
                    [&](int32_t, int32_t) { return Buffers{nullptr, 0, recvbuff, bytes}; },
                    [&] { return real(recvbuff, count, datatype, peer, comm, stream); });
}
