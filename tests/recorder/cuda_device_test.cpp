// CudaDevice's hashing pipeline against a fake driver table
// (cuda_device_harness.h): the hash ring (one kernel launch per batch,
// digests and completion through mapped host memory, bounded room), the
// folding, waits that are bounded, the capture check, function descriptions
// and context teardown. Snapshots, re-runs and graphs: cuda_device_copy_test.cpp.
#include "tests/recorder/cuda_device_harness.h"

using namespace gpurr;
using namespace gpurr::recorder;
using namespace gpurr::recorder::cuda_device_testing;

namespace {

// The context's hash ring made by a first hash, which is read back.
void makeRing(Device& device, const kernels::HashRequest& req) {
  std::string error;
  std::unique_ptr<PendingHashes> first = device.hash(0xC0, 0x5, std::span(&req, 1), false, error);
  REQUIRE(first);
  std::vector<kernels::HashResult> r;
  REQUIRE(first->wait(r, error));
}

// With the GPU blocked, takes every batch place of the ring but the one a
// batch before kept (made after makeRing); then the GPU runs the first
// `kernels` queued, that batch's among them: a hash finds its room within a
// second, and every batch taken reads back the digest of `a`.
void takeRingThenFreeOne(Device& device, const kernels::HashRequest& req, const std::vector<uint8_t>& a,
                         size_t kernels) {
  std::string error;
  std::vector<std::unique_ptr<PendingHashes>> pending;
  for (int i = 0; i < 8191; ++i) {
    pending.push_back(device.hash(0xC0, 0x5, std::span(&req, 1), false, error));
    REQUIRE(pending.back());
  }
  gpu->blocked = false;
  for (size_t i = 0; i < kernels; ++i) {
    std::lock_guard lock(gpu->mu);
    auto op = std::move(gpu->queue.front());
    gpu->queue.pop_front();
    op();
  }
  const auto start = std::chrono::steady_clock::now();
  auto next = device.hash(0xC0, 0x5, std::span(&req, 1), false, error);
  CHECK(next);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  pending.push_back(std::move(next));
  std::vector<kernels::HashResult> r;
  for (auto& p : pending) {  // and no later wait gives up for it
    REQUIRE(p);
    REQUIRE(p->wait(r, error));
    CHECK(r.at(0).digest == hash::hashBuffer(a));
  }
}

}  // namespace

TEST_CASE("hashes are enqueued and read back only after the GPU ran them", "[recorder][cudadevice]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  const auto a = randomBytes(200000, 1), b = randomBytes(10, 2);
  const std::vector<kernels::HashRequest> req = {{reinterpret_cast<uint64_t>(a.data()), a.size()},
                                                 {reinterpret_cast<uint64_t>(b.data()), 0},
                                                 {reinterpret_cast<uint64_t>(b.data()), b.size()}};
  std::string error;
  auto p1 = device->hash(0xC0, 0x5, req, false, error);
  REQUIRE(p1);
  CHECK_FALSE(gpu->queue.empty());  // nothing ran yet: asynchronous
  CHECK(gpu->ctxSyncs == 0);
  CHECK(gpu->streamSyncs == 0);
  // No capture open: the thread's capture mode is left alone.
  CHECK(gpu->modeExchanges == 0);
  // While one may be open, it is relaxed for the recorder's calls, then restored.
  device->captures().beginning(0x77);
  auto p2 = device->hash(0xC0, 0x5, std::span(req).subspan(2), false, error);  // a second batch
  REQUIRE(p2);
  CHECK(gpu->modeExchanges == 2);
  CHECK(gpu->captureMode == CU_STREAM_CAPTURE_MODE_GLOBAL);
  device->captures().settled(0x77, false);
  std::vector<kernels::HashResult> r1, r2;
  REQUIRE(p2->wait(r2, error));
  REQUIRE(p1->wait(r1, error));
  REQUIRE(r1.size() == 3);
  CHECK(r1[0].digest == hash::hashBuffer(a));
  CHECK(r1[0].chunkDigests == hash::chunkDigests(a));
  CHECK(r1[1].digest == hash::hashBuffer({}));
  CHECK(r1[2].digest == hash::hashBuffer(b));
  REQUIRE(r2.size() == 1);
  CHECK(r2[0].digest == hash::hashBuffer(b));
  CHECK(gpu->launches == 2);

  // A large batch takes room in the ring: nothing is allocated after the
  // context's first hash.
  const int allocsBefore = gpu->allocs;
  const auto big = randomBytes(3 << 20, 3);
  const kernels::HashRequest bigReq{reinterpret_cast<uint64_t>(big.data()), big.size()};
  std::vector<kernels::HashRequest> many(300, bigReq);  // 300 x 48 chunks
  auto p3 = device->hash(0xC0, 0x5, many, false, error);
  CHECK(gpu->allocs == allocsBefore);
  REQUIRE(p3);
  std::vector<kernels::HashResult> r3;
  REQUIRE(p3->wait(r3, error));
  REQUIRE(r3.size() == 300);
  CHECK(r3[299].digest == hash::hashBuffer(big));

  // Teardown of the context frees everything the hasher allocated.
  device->contextDestroying(0xC0);
  CHECK(gpu->allocs == gpu->frees);
  CHECK(gpu->events.empty());
}

TEST_CASE("synchronous mode synchronises before and has the digests on return", "[recorder][cudadevice]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  const auto a = randomBytes(1000, 4);
  const kernels::HashRequest req{reinterpret_cast<uint64_t>(a.data()), a.size()};
  std::string error;
  auto p = device->hash(0xC0, 0, std::span(&req, 1), true, error);
  REQUIRE(p);
  CHECK(gpu->streamSyncs == 2);  // before and after the hash
  CHECK(gpu->ctxSyncs == 0);  // never the whole context: other streams may be capturing
  CHECK(gpu->queue.empty());  // already waited for
  std::vector<kernels::HashResult> r;
  REQUIRE(p->wait(r, error));
  CHECK(r.at(0).digest == hash::hashBuffer(a));
  device->contextDestroying(0xC0);
  CHECK(gpu->allocs == gpu->frees);
}

TEST_CASE("a context destroyed with hashes in flight still delivers them", "[recorder][cudadevice]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  const auto a = randomBytes(70000, 5);
  const kernels::HashRequest req{reinterpret_cast<uint64_t>(a.data()), a.size()};
  std::string error;
  auto p = device->hash(0xC0, 0, std::span(&req, 1), false, error);
  REQUIRE(p);
  device->contextDestroying(0xC0);  // synchronises, reads the digests, frees
  CHECK(gpu->allocs == gpu->frees);
  std::vector<kernels::HashResult> r;
  REQUIRE(p->wait(r, error));
  CHECK(r.at(0).digest == hash::hashBuffer(a));
  // Later hashes in that context start afresh.
  auto again = device->hash(0xC0, 0, std::span(&req, 1), false, error);
  REQUIRE(again);
  REQUIRE(again->wait(r, error));
  CHECK(r.at(0).digest == hash::hashBuffer(a));
  device->contextDestroying(0xC0);
  CHECK(gpu->allocs == gpu->frees);
}

TEST_CASE("a failing launch gives no pending hash and frees its slot", "[recorder][cudadevice]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  const auto a = randomBytes(100, 6);
  const kernels::HashRequest req{reinterpret_cast<uint64_t>(a.data()), a.size()};
  std::string error;
  gpu->launchResult = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  CHECK_FALSE(device->hash(0xC0, 0, std::span(&req, 1), false, error));
  CHECK(error.find("launching the hash kernel") != std::string::npos);
  gpu->launchResult = CUDA_SUCCESS;
  auto p = device->hash(0xC0, 0, std::span(&req, 1), false, error);
  REQUIRE(p);
  std::vector<kernels::HashResult> r;
  REQUIRE(p->wait(r, error));
  CHECK(r.at(0).digest == hash::hashBuffer(a));
  device->contextDestroying(0xC0);
  CHECK(gpu->allocs == gpu->frees);
}

TEST_CASE("a hash is one kernel launch: no upload, no download, no event, no wait on the program's thread",
          "[recorder][cudadevice][ring]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  const auto a = randomBytes(300000, 7);
  const kernels::HashRequest req{reinterpret_cast<uint64_t>(a.data()), a.size()};
  std::string error;
  REQUIRE(device->hash(0xC0, 0x5, std::span(&req, 1), false, error));  // the ring is made here, once
  const ThreadCounts before = countOnThisThread();
  const size_t queued = gpu->queue.size();
  const int allocs = gpu->allocs, waits = gpu->streamSyncs + gpu->ctxSyncs + gpu->queries;
  std::vector<std::unique_ptr<PendingHashes>> pending;
  for (int i = 0; i < 100; ++i) pending.push_back(device->hash(0xC0, 0x5, std::span(&req, 1), false, error));
  CHECK(gpu->queue.size() - queued == 100);  // one stream operation each
  CHECK(countOnThisThread().enqueued - before.enqueued == 100);
  CHECK(countOnThisThread().syncCalls == before.syncCalls);
  CHECK(gpu->allocs == allocs);
  CHECK(gpu->streamSyncs + gpu->ctxSyncs + gpu->queries == waits);
  std::vector<kernels::HashResult> r;
  for (auto& p : pending) {
    REQUIRE(p);
    REQUIRE(p->wait(r, error));
    CHECK(r.at(0).digest == hash::hashBuffer(a));
  }
  device->contextDestroying(0xC0);
  CHECK(gpu->allocs == gpu->frees);
}

TEST_CASE("a full hash ring makes the program wait a bounded time, then drops the batch and says so",
          "[recorder][cudadevice][ring]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  const auto a = randomBytes(100, 8);
  const kernels::HashRequest req{reinterpret_cast<uint64_t>(a.data()), a.size()};
  std::string error;
  std::vector<std::unique_ptr<PendingHashes>> pending;
  for (int i = 0; i < 8192; ++i) {  // every batch place taken, none read back
    pending.push_back(device->hash(0xC0, 0x5, std::span(&req, 1), false, error));
    REQUIRE(pending.back());
  }
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(device->hash(0xC0, 0x5, std::span(&req, 1), false, error));
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::seconds(2));
  CHECK(error.find("the hash ring is full") != std::string::npos);
  CHECK(error.find("dropped so far: 1") != std::string::npos);
  std::vector<kernels::HashResult> r;
  REQUIRE(pending.front()->wait(r, error));  // the trace thread reads the oldest: room again
  CHECK(device->hash(0xC0, 0x5, std::span(&req, 1), false, error));
  // A batch larger than the ring is refused at once.
  const kernels::HashRequest huge{reinterpret_cast<uint64_t>(a.data()), uint64_t{1} << 40};
  CHECK_FALSE(device->hash(0xC0, 0x5, std::span(&huge, 1), false, error));
  CHECK(error.find("exceed what the hash ring holds") != std::string::npos);
  pending.clear();
  device->contextDestroying(0xC0);
}

TEST_CASE("a hash kernel of a failed context is not waited for, and the context takes no more",
          "[recorder][cudadevice][ring]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  const auto a = randomBytes(100, 10);
  const kernels::HashRequest req{reinterpret_cast<uint64_t>(a.data()), a.size()};
  std::string error;
  gpu->kernelsVanish = true;
  auto p = device->hash(0xC0, 0x5, std::span(&req, 1), false, error);
  REQUIRE(p);
  gpu->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;  // the program's kernel faulted
  const auto start = std::chrono::steady_clock::now();
  std::vector<kernels::HashResult> r;
  CHECK_FALSE(p->wait(r, error));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  CHECK(error.find("the context failed: CUDA error 700 (fake error)") != std::string::npos);
  CHECK_FALSE(device->hash(0xC0, 0x5, std::span(&req, 1), false, error));  // refused at once
  CHECK(error.find("the context failed") != std::string::npos);
  gpu->sticky = CUDA_SUCCESS;
  device->contextDestroying(0xC0);
}

TEST_CASE("waiting for a hash never queries the program's stream, which may be capturing by then",
          "[recorder][cudadevice][ring]") {
  // A query of a stream being captured invalidates the program's capture
  // (torch.cuda.graphs, torch.compile's reduce-overhead): the trace thread
  // asks the recorder's own stream whether the context is still alive.
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  const auto a = randomBytes(100, 12);
  const kernels::HashRequest req{reinterpret_cast<uint64_t>(a.data()), a.size()};
  std::string error;
  std::vector<kernels::HashResult> r;
  for (uint64_t stream : {uint64_t{0x5}, uint64_t{0}}) {
    auto p = device->hash(0xC0, stream, std::span(&req, 1), false, error);
    REQUIRE(p);
    REQUIRE(p->wait(r, error));  // the fake GPU runs only when asked: a query was made
    CHECK(r.at(0).digest == hash::hashBuffer(a));
  }
  REQUIRE(gpu->queries > 0);
  for (uint64_t s : gpu->queried) CHECK(gpu->ownStreams.count(s) == 1);
  device->contextDestroying(0xC0);
}

TEST_CASE("a stream blocked past the wait limit abandons that batch, not the context",
          "[recorder][cudadevice][ring]") {
  // A collective waiting minutes for another process, a debugger: the
  // kernel runs later, and its room comes back then.
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  device->setHashWaitLimit(std::chrono::milliseconds(50));
  const auto a = randomBytes(100, 11);
  const kernels::HashRequest req{reinterpret_cast<uint64_t>(a.data()), a.size()};
  std::string error;
  makeRing(*device, req);  // and its first batch read: only the rest of the ring is free
  gpu->blocked = true;
  auto stuck = device->hash(0xC0, 0x5, std::span(&req, 1), false, error);
  REQUIRE(stuck);
  std::vector<kernels::HashResult> r;
  CHECK_FALSE(stuck->wait(r, error));
  CHECK(error.find("did not complete within 0 s: its stream stayed blocked") != std::string::npos);
  // Only the abandoned batch's room is left to come back, once its ticket shows.
  takeRingThenFreeOne(*device, req, a, 2);
  device->contextDestroying(0xC0);
}

TEST_CASE("a hash destroyed unread is not waited for and its room comes back once it ran",
          "[recorder][cudadevice][ring]") {
  // A launch entry dropped because the trace thread fell behind, or a launch
  // that failed: its program thread may be far ahead of the GPU.
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  const auto a = randomBytes(100, 15);
  const kernels::HashRequest req{reinterpret_cast<uint64_t>(a.data()), a.size()};
  std::string error;
  makeRing(*device, req);  // and its first batch read: only the rest of the ring is free
  gpu->blocked = true;
  const auto start = std::chrono::steady_clock::now();
  device->hash(0xC0, 0x5, std::span(&req, 1), false, error).reset();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(250));
  // Only the dropped batch's room is left to come back, once its kernel ran.
  takeRingThenFreeOne(*device, req, a, 1);
  device->contextDestroying(0xC0);
}

TEST_CASE("before memory goes away outside stream order every hash kernel enqueued has run",
          "[recorder][cudadevice][ring]") {
  // cuMemUnmap does not wait for the GPU: a hash kernel still queued would
  // read unmapped memory.
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  device->setHashWaitLimit(std::chrono::milliseconds(300));
  const auto a = randomBytes(100, 16);
  const kernels::HashRequest req{reinterpret_cast<uint64_t>(a.data()), a.size()};
  std::string error;
  makeRing(*device, req);
  auto queued = device->hash(0xC0, 0x5, std::span(&req, 1), false, error);
  REQUIRE(queued);
  REQUIRE(gpu->queue.size() == 1);
  std::string why;
  CHECK(device->awaitHashesInFlight(why));
  CHECK(gpu->queue.empty());  // it ran (the fake GPU runs when its state is asked)
  std::vector<kernels::HashResult> r;
  REQUIRE(queued->wait(r, error));  // and the trace thread still reads it
  CHECK(r.at(0).digest == hash::hashBuffer(a));
  gpu->blocked = true;
  auto stuck = device->hash(0xC0, 0x5, std::span(&req, 1), false, error);
  REQUIRE(stuck);
  CHECK_FALSE(device->awaitHashesInFlight(why));
  CHECK(why == "1 hash kernels did not complete within 0 s");
  gpu->blocked = false;
  device->contextDestroying(0xC0);
}

TEST_CASE("while a batch stays stuck, later ones are given up without a wait limit of their own",
          "[recorder][cudadevice][ring]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  device->setHashWaitLimit(std::chrono::milliseconds(500));
  const auto a = randomBytes(100, 14);
  const kernels::HashRequest req{reinterpret_cast<uint64_t>(a.data()), a.size()};
  std::string error;
  REQUIRE(device->hash(0xC0, 0x5, std::span(&req, 1), false, error));  // the ring is made
  gpu->blocked = true;
  auto first = device->hash(0xC0, 0x5, std::span(&req, 1), false, error);
  auto second = device->hash(0xC0, 0x5, std::span(&req, 1), false, error);
  REQUIRE(first);
  REQUIRE(second);
  std::vector<kernels::HashResult> r;
  CHECK_FALSE(first->wait(r, error));
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(second->wait(r, error));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(250));
  CHECK(error.find("an earlier hash kernel of this context did not complete") != std::string::npos);
  gpu->blocked = false;
  auto later = device->hash(0xC0, 0x5, std::span(&req, 1), false, error);  // the stream moves again
  REQUIRE(later);
  REQUIRE(later->wait(r, error));
  CHECK(r.at(0).digest == hash::hashBuffer(a));
  device->contextDestroying(0xC0);
}

TEST_CASE("a context destroyed while the trace thread waits ends the wait without touching the freed ring",
          "[recorder][cudadevice][ring]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  const auto a = randomBytes(100, 13);
  const kernels::HashRequest req{reinterpret_cast<uint64_t>(a.data()), a.size()};
  std::string error;
  gpu->blocked = true;
  auto p = device->hash(0xC0, 0x5, std::span(&req, 1), false, error);
  REQUIRE(p);
  bool ok = true;
  std::string waitError;
  std::thread traceThread([&] {
    std::vector<kernels::HashResult> r;
    ok = p->wait(r, waitError);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the trace thread polls
  device->contextDestroying(0xC0);
  traceThread.join();
  CHECK_FALSE(ok);
  CHECK(waitError.find("did not run before the context was destroyed") != std::string::npos);
  CHECK(gpu->allocs == gpu->frees);
  gpu->blocked = false;
}

TEST_CASE("the trace thread waits for hashes and snapshots in relaxed capture mode", "[recorder][cudadevice]") {
  // Another thread of the program may be capturing a graph in global mode
  // (torch.cuda.graph's default), which forbids cuEventSynchronize on every
  // other thread in global mode: the waits must run in relaxed mode.
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  const auto a = randomBytes(5000, 9);
  const kernels::HashRequest req{reinterpret_cast<uint64_t>(a.data()), a.size()};
  std::string error;
  auto p = device->hash(0xC0, 0, std::span(&req, 1), false, error);
  REQUIRE(p);
  auto c = device->copyToHost(0xC0, 0, reinterpret_cast<uint64_t>(a.data()), a.size(), false, error);
  REQUIRE(c);
  REQUIRE(gpu->captureMode == CU_STREAM_CAPTURE_MODE_GLOBAL);  // as the trace thread starts
  std::vector<kernels::HashResult> r;
  REQUIRE(p->wait(r, error));
  std::span<const uint8_t> bytes;
  REQUIRE(c->wait(bytes, error));
  REQUIRE(gpu->waitModes.size() == 2);
  CHECK(gpu->waitModes[0] == CU_STREAM_CAPTURE_MODE_RELAXED);
  CHECK(gpu->waitModes[1] == CU_STREAM_CAPTURE_MODE_RELAXED);
  CHECK(gpu->captureMode == CU_STREAM_CAPTURE_MODE_GLOBAL);  // and restored
  c.reset();
  device->contextDestroying(0xC0);
}

TEST_CASE("capturing streams are refused", "[recorder][cudadevice]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  gpu->capture[0x9] = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  CHECK(device->canEnqueue(0x9));  // no capture seen to begin: the driver is not asked
  device->captures().beginning(0x9);
  CHECK_FALSE(device->canEnqueue(0x9));
  CHECK(device->canEnqueue(0x8));
  CHECK(device->captureState(0x9).capture == 0u);  // the driver gives no id without cuStreamGetCaptureInfo
  CHECK_FALSE(device->captureState(0x8).capture);
}

TEST_CASE("one capture query gives the capture's id and whether work may be enqueued",
          "[recorder][cudadevice]") {
  Fixture fx;
  kernels::DriverApi api = fakeApi();
  api.cuStreamGetCaptureInfo = fStreamGetCaptureInfo;
  auto device = CudaDevice::create(api);
  gpu->capture[0x9] = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  gpu->capture[0xA] = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  const Device::StreamCapture active = device->captureState(0x9);
  CHECK(active.capture == 0x79u);
  CHECK_FALSE(active.canEnqueue);
  CHECK(gpu->captureQueries == 1);
  const Device::StreamCapture idle = device->captureState(0x8);
  CHECK_FALSE(idle.capture);
  CHECK(idle.canEnqueue);
  // A capture gone wrong: not captured (its work will fail), and keep off.
  const Device::StreamCapture invalidated = device->captureState(0xA);
  CHECK_FALSE(invalidated.capture);
  CHECK_FALSE(invalidated.canEnqueue);
  // The legacy stream while a blocking stream captures: the query fails.
  const Device::StreamCapture implicit = device->captureState(0xE);
  CHECK_FALSE(implicit.capture);
  CHECK_FALSE(implicit.canEnqueue);
}

TEST_CASE("functions and CUkernels are described through the driver", "[recorder][cudadevice]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  FunctionInfo f;
  REQUIRE(device->describeFunction(0x100, f));
  CHECK(f.name == "_Z1fPfi");
  CHECK(f.layoutKnown);
  CHECK(f.layout == std::vector<trace::ParamInfo>{{0, 8}, {8, 4}});
  CHECK(f.module == 0x1100);
  FunctionInfo k;
  REQUIRE(device->describeFunction(0x200, k));
  CHECK(k.name == "_Z1kv");
  CHECK(k.layoutKnown);
  CHECK(k.layout.empty());
  CHECK(k.module == 0x201 + 0x1000);  // via cuKernelGetFunction
  FunctionInfo none;
  CHECK_FALSE(device->describeFunction(0x300, none));
}
