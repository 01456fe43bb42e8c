// The NCCL wrappers (recorder/nccl_interpose.cpp) linked into this program,
// as `gpurr record` preloads them, in front of a stand-in libnccl.so.2
// (fake_nccl.cpp) opened RTLD_LOCAL as libtorch_cuda.so brings NCCL in,
// recording into a session (session_harness.h): each collective the program
// calls is one Collective event, also when NCCL makes it of another entry
// point that reaches a wrapper again; a call still in progress (a
// non-blocking communicator's) has its received bytes left unhashed, and a
// communicator whose size was unknown when it was made is asked again.
#include <dlfcn.h>
#include <nccl.h>

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
