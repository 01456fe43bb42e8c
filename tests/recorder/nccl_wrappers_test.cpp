// The NCCL wrappers (recorder/nccl_interpose.cpp) linked into this program,
// as `gpurr record` preloads them, in front of a stand-in libnccl.so.2
// (fake_nccl.cpp) opened RTLD_LOCAL as libtorch_cuda.so brings NCCL in,
// recording into a session (session_harness.h): each collective the program
// calls is one Collective event, also when NCCL makes it of another entry
// point that reaches a wrapper again; a call still in progress (a
// non-blocking communicator's) has its received bytes left unhashed, a
// communicator whose size was unknown when it was made is asked again, and
// the communicators of ncclCommInitAll and ncclCommShrink have ids that are
// the same in every run, as has a split's that NCCL writes after the call
// returned (inside a group, or non-blocking).
#include <dlfcn.h>
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "recorder/collectives.h"
#include "tests/recorder/session_harness.h"

using namespace gpurr;
using namespace gpurr::recorder;
using namespace gpurr::recorder::session_testing;

TEST_CASE("each NCCL call is one collective and one still in progress leaves its received bytes unhashed",
          "[recorder][nccl]") {
  void* lib = dlopen(GPURR_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib != nullptr);
  const int* broadcasts = static_cast<const int*>(dlsym(lib, "gFakeNcclBroadcasts"));
  const int* allReduces = static_cast<const int*>(dlsym(lib, "gFakeNcclAllReduces"));
  REQUIRE(broadcasts != nullptr);
  REQUIRE(allReduces != nullptr);
  Harness h;
  setActiveCollectives(&h.session->collectives());
  std::vector<uint8_t> buffer = randomBytes(4096, 21);
  h.memAlloc(buffer);
  const auto comm = reinterpret_cast<ncclComm_t>(0x77);
  const auto stream = reinterpret_cast<cudaStream_t>(0x5);
  CHECK(ncclBcast(buffer.data(), 1024, ncclFloat32, 0, comm, stream) == ncclSuccess);
  CHECK(*broadcasts == 1);
  CHECK(ncclAllReduce(buffer.data(), buffer.data(), 1024, ncclFloat32, ncclSum, comm, stream) == ncclSuccess);
  CHECK(*allReduces == 1);
  // A non-blocking communicator's call may return before its work is
  // enqueued: nothing the recorder enqueues then is ordered after it.
  auto* result = static_cast<ncclResult_t*>(dlsym(lib, "gFakeNcclAllReduceResult"));
  REQUIRE(result != nullptr);
  *result = ncclInProgress;
  CHECK(ncclAllReduce(buffer.data(), buffer.data(), 1024, ncclFloat32, ncclSum, comm, stream) == ncclInProgress);
  *result = ncclSuccess;
  // A non-blocking communicator split off another may not tell its size yet
  // when made: it is asked again at its first collective.
  h.session->collectives().communicatorCreated(0x99, 5, -1, 0);
  CHECK(ncclAllReduce(buffer.data(), buffer.data(), 1024, ncclFloat32, ncclSum, reinterpret_cast<ncclComm_t>(0x99),
                      stream) == ncclSuccess);
  const auto collectives = eventsOf<trace::Collective>(h.finishAndRead());
  REQUIRE(collectives.size() == 4);
  CHECK(collectives[3].communicator == 5);
  CHECK(collectives[3].rank == 0);
  CHECK(collectives[3].size == 1);
  CHECK(collectives[3].sequence == 0);
  CHECK(collectives[0].call == "ncclBcast");
  CHECK(collectives[0].sequence == 0);
  CHECK(collectives[0].outputs.size() == 1);
  CHECK(collectives[1].call == "ncclAllReduce");
  CHECK(collectives[1].sequence == 1);
  CHECK(collectives[1].outputs.size() == 1);
  CHECK(collectives[2].inputs.size() == 1);
  CHECK(collectives[2].outputs.empty());  // its received bytes not hashed
  dlclose(lib);
}

namespace {

// One run's communicators, recorded: ncclCommInitAll over devices 3 and 5
// twice, and the first one's rank 0 shrunk without the ranks `excluded`,
// each used by one all-reduce (in this order: the first call's rank 1, the
// second call's rank 0, the shrunk one).
std::vector<trace::Collective> madeTogetherAndShrunk(std::vector<int> excluded) {
  Harness h;
  setActiveCollectives(&h.session->collectives());
  std::vector<uint8_t> buffer = randomBytes(4096, 22);
  h.memAlloc(buffer);
  const auto stream = reinterpret_cast<cudaStream_t>(0x5);
  const int devices[] = {3, 5};
  ncclComm_t first[2] = {}, second[2] = {};
  REQUIRE(ncclCommInitAll(first, 2, devices) == ncclSuccess);
  REQUIRE(ncclCommInitAll(second, 2, devices) == ncclSuccess);
  ncclComm_t shrunk = nullptr;
  REQUIRE(ncclCommShrink(first[0], excluded.data(), static_cast<int>(excluded.size()), &shrunk, nullptr,
                         NCCL_SHRINK_DEFAULT) == ncclSuccess);
  for (ncclComm_t comm : {first[1], second[0], shrunk})
    CHECK(ncclAllReduce(buffer.data(), buffer.data(), 16, ncclFloat32, ncclSum, comm, stream) == ncclSuccess);
  auto collectives = eventsOf<trace::Collective>(h.finishAndRead());
  setActiveCollectives(nullptr);
  return collectives;
}

}  // namespace

TEST_CASE("communicators made together or shrunk have ids that are the same in every run", "[recorder][nccl]") {
  void* lib = dlopen(GPURR_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib != nullptr);
  const auto run = madeTogetherAndShrunk({2, 1});
  REQUIRE(run.size() == 3);
  // ncclCommInitAll's communicators: rank i of as many as devices.
  CHECK(run[0].rank == 1);
  CHECK(run[0].size == 2);
  CHECK(run[1].rank == 0);
  CHECK(run[1].size == 2);
  CHECK(run[0].communicator != 0);
  CHECK(run[0].communicator != run[1].communicator);  // the second call's
  CHECK(run[2].communicator != 0);
  CHECK(run[2].communicator != run[0].communicator);
  // Another run: the same ids; the excluded ranks' order does not count,
  // which of them are excluded does.
  const auto again = madeTogetherAndShrunk({1, 2});
  REQUIRE(again.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(again[i].communicator == run[i].communicator);
  const auto other = madeTogetherAndShrunk({1});
  REQUIRE(other.size() == 3);
  CHECK(other[0].communicator == run[0].communicator);
  CHECK(other[2].communicator != run[2].communicator);
  dlclose(lib);
}

TEST_CASE("a shrink leaves the numbers of its parent's splits alone as the ranks it excluded never shrink",
          "[recorder][nccl]") {
  void* lib = dlopen(GPURR_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib != nullptr);
  // The same split of one parent on a rank that shrank it first (without
  // rank 3) and on rank 3, which did not: one communicator, one id.
  auto splitAfter = [](bool shrinkFirst) {
    Harness h;
    setActiveCollectives(&h.session->collectives());
    const auto parent = reinterpret_cast<ncclComm_t>(0x77);
    h.session->collectives().communicatorCreated(0x77, 9, 0, 4);
    int excluded[] = {3};
    ncclComm_t shrunk = nullptr, split = nullptr;
    if (shrinkFirst) REQUIRE(ncclCommShrink(parent, excluded, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT) == ncclSuccess);
    REQUIRE(ncclCommSplit(parent, 0, 0, &split, nullptr) == ncclSuccess);
    const uint64_t id = h.session->collectives().communicatorId(reinterpret_cast<uint64_t>(split));
    setActiveCollectives(nullptr);
    return id;
  };
  CHECK(splitAfter(true) == splitAfter(false));
  dlclose(lib);
}

namespace {

// When NCCL writes a split's communicator to the slot the program gave it.
enum class Written {
  kAtOnce,      // a blocking split's, before it returns
  kAtGroupEnd,  // a split inside a group's, at ncclGroupEnd
  kByNccl,      // a non-blocking split's, by NCCL's thread after it returned
  kGone,        // the same, the slot's memory given back before the first use
};

// A recording with a communicator of id 9 to split (0x77), the stand-in's
// controls of its split (fake_nccl.cpp) and a buffer for collectives.
struct Splitting {
  Harness h;
  std::vector<uint8_t> buffer = randomBytes(4096, 23);
  const ncclComm_t parent = reinterpret_cast<ncclComm_t>(0x77);
  bool* inProgress;
  void (*finish)();
  explicit Splitting(void* lib)
      : inProgress(static_cast<bool*>(dlsym(lib, "gFakeNcclSplitInProgress"))),
        finish(reinterpret_cast<void (*)()>(dlsym(lib, "gpurr_fake_nccl_finish_split"))) {
    REQUIRE(inProgress != nullptr);
    REQUIRE(finish != nullptr);
    setActiveCollectives(&h.session->collectives());
    h.memAlloc(buffer);
    h.session->collectives().communicatorCreated(0x77, 9, 0, 4);
  }
  // A split that returns before NCCL's thread writes its communicator.
  void nonBlocking(ncclComm_t* slot) {
    *inProgress = true;
    CHECK(ncclCommSplit(parent, 1, 0, slot, nullptr) == ncclInProgress);
    *inProgress = false;
    CHECK(*slot == nullptr);
  }
  // One all-reduce on `comm`, then the recording's end: its communicator id.
  uint64_t idOf(ncclComm_t comm) {
    CHECK(ncclAllReduce(buffer.data(), buffer.data(), 16, ncclFloat32, ncclSum, comm,
                        reinterpret_cast<cudaStream_t>(0x5)) == ncclSuccess);
    const auto collectives = eventsOf<trace::Collective>(h.finishAndRead());
    setActiveCollectives(nullptr);
    REQUIRE(collectives.size() == 1);
    return collectives[0].communicator;
  }
};

// One split of the communicator of id 9, its communicator written as `when`
// says, then used by one all-reduce: that collective's communicator id.
uint64_t splitWritten(void* lib, Written when) {
  Splitting s(lib);
  // The slot on a page of its own, which the program may give back.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* memory = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(memory != MAP_FAILED);
  auto* slot = static_cast<ncclComm_t*>(memory);
  if (when == Written::kAtOnce) {
    CHECK(ncclCommSplit(s.parent, 1, 0, slot, nullptr) == ncclSuccess);
  } else if (when == Written::kAtGroupEnd) {
    CHECK(ncclGroupStart() == ncclSuccess);
    CHECK(ncclCommSplit(s.parent, 1, 0, slot, nullptr) == ncclSuccess);
    CHECK(*slot == nullptr);
    CHECK(ncclGroupEnd() == ncclSuccess);
  } else {
    s.nonBlocking(slot);
    s.finish();
  }
  const ncclComm_t comm = *slot;
  REQUIRE(comm != nullptr);
  if (when == Written::kGone) munmap(memory, page);
  const uint64_t id = s.idOf(comm);
  if (when != Written::kGone) munmap(memory, page);
  return id;
}

}  // namespace

TEST_CASE("a split whose communicator NCCL writes after the call returned has the id a blocking split gets",
          "[recorder][nccl]") {
  void* lib = dlopen(GPURR_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib != nullptr);
  const uint64_t atOnce = splitWritten(lib, Written::kAtOnce);
  CHECK(atOnce != 0);
  CHECK(splitWritten(lib, Written::kAtGroupEnd) == atOnce);
  CHECK(splitWritten(lib, Written::kByNccl) == atOnce);
  // A slot the program gave back is not read (no fault): the communicator
  // is one of unknown making.
  CHECK(splitWritten(lib, Written::kGone) == 0);
  dlclose(lib);
}

TEST_CASE("splits a rank takes no part in promise nothing and leave a later communicator its id",
          "[recorder][nccl]") {
  void* lib = dlopen(GPURR_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib != nullptr);
  {
    Splitting s(lib);
    // A non-blocking split, then as many NOCOLOR splits as PyTorch's new_group
    // makes on the ranks outside the groups of a large job, before NCCL's
    // thread writes the first one's communicator.
    ncclComm_t split = nullptr;
    s.nonBlocking(&split);
    for (size_t i = 0; i < CollectiveRecorder::kPromises + 6; ++i) {
      ncclComm_t none = nullptr;
      CHECK(ncclCommSplit(s.parent, NCCL_SPLIT_NOCOLOR, 0, &none, nullptr) == ncclSuccess);
      CHECK(none == nullptr);
    }
    s.finish();
    REQUIRE(split != nullptr);
    CHECK(s.idOf(split) == communicatorIdFromSplit(9, 1, 1));
  }
  dlclose(lib);
}
