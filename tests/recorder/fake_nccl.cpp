// A stand-in libnccl.so.2 for the NCCL wrappers' test (nccl_wrappers_test.cpp):
// a communicator of one rank (those of ncclCommInitAll, ncclCommSplit and
// ncclCommShrink made up handles), collectives that count their calls and
// succeed (or say they are in progress), a split that, as NCCL's, leaves its
// communicator unwritten inside a group until ncclGroupEnd, or when
// non-blocking (gFakeNcclSplitInProgress) until the test finishes it as
// NCCL's thread would (gpurr_fake_nccl_finish_split), and ncclBcast made of
// ncclBroadcast through the library's PLT, as
// NCCL 2.28 makes it (its libnccl.so.2 has a JUMP_SLOT relocation for
// ncclBroadcast), so that a preloaded ncclBroadcast is reached from inside
// ncclBcast.
#include <nccl.h>

#include <cstdint>

#define FAKE extern "C" __attribute__((visibility("default")))

extern "C" {
__attribute__((visibility("default"))) int gFakeNcclBroadcasts = 0;
__attribute__((visibility("default"))) int gFakeNcclAllReduces = 0;
// What ncclAllReduce returns (ncclInProgress: a non-blocking communicator's).
__attribute__((visibility("default"))) ncclResult_t gFakeNcclAllReduceResult = ncclSuccess;
}

FAKE ncclResult_t ncclCommUserRank(const ncclComm_t, int* rank) {
  *rank = 0;
  return ncclSuccess;
}
FAKE ncclResult_t ncclCommCount(const ncclComm_t, int* count) {
  *count = 1;
  return ncclSuccess;
}
FAKE ncclResult_t ncclBroadcast(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  ++gFakeNcclBroadcasts;
  return ncclSuccess;
}
FAKE ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
FAKE ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) {
  ++gFakeNcclAllReduces;
  return gFakeNcclAllReduceResult;
}
FAKE ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int*) {
  static uintptr_t next = 0x1000;
  for (int i = 0; i < ndev; ++i, next += 0x10) comm[i] = reinterpret_cast<ncclComm_t>(next);
  return ncclSuccess;
}
extern "C" {
// Whether ncclCommSplit returns ncclInProgress (a non-blocking
// communicator's) and leaves its communicator for
// gpurr_fake_nccl_finish_split to write.
__attribute__((visibility("default"))) bool gFakeNcclSplitInProgress = false;
}
namespace {
int groupDepth = 0;
ncclComm_t* unwritten = nullptr;  // the split's slot NCCL has not written yet
uintptr_t nextSplit = 0x3000;
void writeSplit() {
  if (unwritten != nullptr) *unwritten = reinterpret_cast<ncclComm_t>(nextSplit += 0x10);
  unwritten = nullptr;
}
}  // namespace
FAKE void gpurr_fake_nccl_finish_split() { writeSplit(); }
FAKE ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return ncclSuccess;
}
FAKE ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0) return ncclInvalidUsage;
  if (--groupDepth == 0) writeSplit();
  return ncclSuccess;
}
FAKE ncclResult_t ncclCommSplit(ncclComm_t, int color, int, ncclComm_t* newcomm, ncclConfig_t*) {
  *newcomm = nullptr;
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;  // this rank is in no communicator it makes
  unwritten = newcomm;
  if (gFakeNcclSplitInProgress) return ncclInProgress;
  if (groupDepth == 0) writeSplit();
  return ncclSuccess;
}
FAKE ncclResult_t ncclCommShrink(ncclComm_t, int*, int, ncclComm_t* newcomm, ncclConfig_t*, int) {
  *newcomm = reinterpret_cast<ncclComm_t>(0x2000);
  return ncclSuccess;
}
