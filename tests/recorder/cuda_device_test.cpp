// CudaDevice's hashing pipeline against a fake driver table: "device memory"
// is host memory and every stream operation is deferred until an event,
// stream or context synchronisation or a stream query, as on a GPU that runs
// behind the host. This checks the hash ring (one kernel launch per batch,
// digests and completion through mapped host memory, bounded room), the
// folding, the capture check, function descriptions and context teardown.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "recorder/cuda_device.h"
#include "trace_format/hash.h"
#include "trace_format/hash_primitives.h"

using namespace gpurr;
using namespace gpurr::recorder;

namespace {

struct FakeGpu {
  std::recursive_mutex mu;                  // the trace thread and the program's threads call in
  std::deque<std::function<void()>> queue;  // enqueued work, in stream order
  std::map<CUevent, bool> events;           // recorded -> completed
  int allocs = 0, frees = 0, launches = 0, ctxSyncs = 0, streamSyncs = 0, modeExchanges = 0, queries = 0;
  bool kernelsVanish = false;  // launches succeed but never run (a lost kernel)
  bool blocked = false;        // the program's stream is stuck: nothing enqueued runs
  CUresult sticky = CUDA_SUCCESS;  // the context failed: every call returns this
  std::set<uint64_t> ownStreams, queried;  // streams the recorder created; streams queried
  CUstreamCaptureMode captureMode = CU_STREAM_CAPTURE_MODE_GLOBAL;  // of the calling thread
  std::vector<CUstreamCaptureMode> waitModes;  // the thread's mode at each cuEventSynchronize
  CUresult launchResult = CUDA_SUCCESS;
  std::map<uint64_t, CUstreamCaptureStatus> capture;
  int captureQueries = 0;

  void runAll() {
    std::lock_guard lock(mu);
    while (!blocked && !queue.empty()) {
      auto op = std::move(queue.front());
      queue.pop_front();
      op();
    }
  }
};
FakeGpu* gpu = nullptr;

CUresult fGetErrorString(CUresult, const char** s) { return *s = "fake error", CUDA_SUCCESS; }
CUresult fModuleLoadData(CUmodule* m, const void*) { return *m = reinterpret_cast<CUmodule>(0x1), CUDA_SUCCESS; }
CUresult fModuleUnload(CUmodule) { return CUDA_SUCCESS; }
CUresult fModuleGetFunction(CUfunction* f, CUmodule, const char*) {
  return *f = reinterpret_cast<CUfunction>(0x2), CUDA_SUCCESS;
}
CUresult fCtxGetDevice(CUdevice* d) { return *d = 0, CUDA_SUCCESS; }
CUresult fDeviceGetAttribute(int* v, CUdevice_attribute, CUdevice) { return *v = 4, CUDA_SUCCESS; }
CUresult fMemAlloc(CUdeviceptr* p, size_t n) {
  ++gpu->allocs;
  *p = reinterpret_cast<CUdeviceptr>(std::calloc(n, 1));
  return CUDA_SUCCESS;
}
CUresult fMemFree(CUdeviceptr p) {
  ++gpu->frees;
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}
CUresult fMemAllocHost(void** p, size_t n) {
  ++gpu->allocs;
  *p = std::calloc(n, 1);
  return CUDA_SUCCESS;
}
CUresult fMemHostAlloc(void** p, size_t n, unsigned) {
  ++gpu->allocs;
  *p = std::calloc(n, 1);
  return CUDA_SUCCESS;
}
CUresult fMemHostGetDevicePointer(CUdeviceptr* d, void* p, unsigned) {
  *d = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: the same address
  return CUDA_SUCCESS;
}
CUresult fMemsetD8(CUdeviceptr p, unsigned char v, size_t n) {
  std::memset(reinterpret_cast<void*>(p), v, n);
  return CUDA_SUCCESS;
}
CUresult fMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream) {
  std::lock_guard lock(gpu->mu);
  gpu->queue.push_back([=] { std::memset(reinterpret_cast<void*>(p), v, n); });
  return CUDA_SUCCESS;
}
CUresult fStreamCreate(CUstream* s, unsigned flags) {
  REQUIRE(flags == CU_STREAM_NON_BLOCKING);
  std::lock_guard lock(gpu->mu);
  *s = reinterpret_cast<CUstream>(0xEE00 + gpu->ownStreams.size());
  gpu->ownStreams.insert(reinterpret_cast<uint64_t>(*s));
  return CUDA_SUCCESS;
}
CUresult fStreamDestroy(CUstream s) {
  std::lock_guard lock(gpu->mu);
  return gpu->ownStreams.erase(reinterpret_cast<uint64_t>(s)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult fStreamQuery(CUstream s) {
  std::lock_guard lock(gpu->mu);
  ++gpu->queries;
  gpu->queried.insert(reinterpret_cast<uint64_t>(s));
  gpu->waitModes.push_back(gpu->captureMode);
  if (gpu->sticky != CUDA_SUCCESS) return gpu->sticky;
  gpu->runAll();
  return CUDA_SUCCESS;
}
CUresult fMemFreeHost(void* p) {
  ++gpu->frees;
  std::free(p);
  return CUDA_SUCCESS;
}
CUresult fMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream) {
  gpu->queue.push_back([=] { std::memcpy(reinterpret_cast<void*>(dst), src, n); });
  return CUDA_SUCCESS;
}
CUresult fMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream) {
  gpu->queue.push_back([=] { std::memcpy(dst, reinterpret_cast<const void*>(src), n); });
  return CUDA_SUCCESS;
}
// The hash kernel: every chunk slot of the table, by the CPU reference.
CUresult fLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned block, unsigned, unsigned, unsigned,
                       CUstream, void** args, void**) {
  if (gpu->launchResult != CUDA_SUCCESS) return gpu->launchResult;
  ++gpu->launches;
  REQUIRE(block == 256);
  const auto table = *static_cast<CUdeviceptr*>(args[0]);
  const auto count = *static_cast<uint32_t*>(args[1]);
  const auto slots = *static_cast<uint64_t*>(args[2]);
  const auto out = *static_cast<CUdeviceptr*>(args[3]);
  const auto counter = *static_cast<CUdeviceptr*>(args[4]);
  const auto doneWord = *static_cast<CUdeviceptr*>(args[5]);
  const auto ticket = *static_cast<uint64_t*>(args[6]);
  if (gpu->kernelsVanish) return CUDA_SUCCESS;
  std::lock_guard lock(gpu->mu);
  gpu->queue.push_back([=] {
    const auto* ranges = reinterpret_cast<const kernels::DeviceHashRange*>(table);
    auto* digests = reinterpret_cast<uint64_t*>(out);
    for (uint32_t r = 0; r < count; ++r) {
      for (uint64_t c = 0; c < kernels::chunkCount(ranges[r].length); ++c) {
        const uint64_t start = c * hash::kChunkBytes;
        const uint64_t len = std::min<uint64_t>(hash::kChunkBytes, ranges[r].length - start);
        REQUIRE(ranges[r].firstSlot + c < slots);
        digests[ranges[r].firstSlot + c] =
            hash::hashChunk({reinterpret_cast<const uint8_t*>(ranges[r].address + start), len}, c);
      }
    }
    if (doneWord != 0) {  // the last block: counter back to 0, ticket raised
      REQUIRE(*reinterpret_cast<uint32_t*>(counter) == 0);
      __atomic_store_n(reinterpret_cast<uint64_t*>(doneWord), ticket, __ATOMIC_RELEASE);
    }
  });
  return CUDA_SUCCESS;
}
CUresult fEventCreate(CUevent* e, unsigned) {
  *e = reinterpret_cast<CUevent>(new int(0));
  gpu->events[*e] = false;
  return CUDA_SUCCESS;
}
CUresult fEventDestroy(CUevent e) {
  gpu->events.erase(e);
  delete reinterpret_cast<int*>(e);
  return CUDA_SUCCESS;
}
CUresult fEventRecord(CUevent e, CUstream) {
  gpu->events[e] = false;
  gpu->queue.push_back([e] { gpu->events[e] = true; });
  return CUDA_SUCCESS;
}
CUresult fEventSynchronize(CUevent e) {
  if (!gpu->events.count(e)) return CUDA_ERROR_INVALID_HANDLE;
  gpu->waitModes.push_back(gpu->captureMode);
  while (!gpu->events[e] && !gpu->queue.empty()) {
    auto op = std::move(gpu->queue.front());
    gpu->queue.pop_front();
    op();
  }
  return CUDA_SUCCESS;
}
CUresult fEventQuery(CUevent e) {  // the GPU gets on with its work when asked
  std::lock_guard lock(gpu->mu);
  if (!gpu->events.count(e)) return CUDA_ERROR_INVALID_HANDLE;
  gpu->waitModes.push_back(gpu->captureMode);
  if (!gpu->events[e]) gpu->runAll();
  return gpu->events[e] ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult fCtxSynchronize() {
  std::lock_guard lock(gpu->mu);
  ++gpu->ctxSyncs;
  gpu->runAll();
  return CUDA_SUCCESS;
}
CUresult fStreamSynchronize(CUstream s) {
  std::lock_guard lock(gpu->mu);
  if (!gpu->ownStreams.count(reinterpret_cast<uint64_t>(s))) ++gpu->streamSyncs;  // the program's streams
  gpu->runAll();
  return CUDA_SUCCESS;
}
CUresult fExchangeCaptureMode(CUstreamCaptureMode* mode) {
  std::swap(*mode, gpu->captureMode);
  ++gpu->modeExchanges;
  return CUDA_SUCCESS;
}
CUresult fCtxPushCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult fCtxPopCurrent(CUcontext* c) { return *c = nullptr, CUDA_SUCCESS; }
CUresult fStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  auto it = gpu->capture.find(reinterpret_cast<uint64_t>(s));
  *status = it == gpu->capture.end() ? CU_STREAM_CAPTURE_STATUS_NONE : it->second;
  return CUDA_SUCCESS;
}
// Streams in `capture` report their status and the capture id 0x70 + stream;
// 0xE is the legacy stream while a blocking stream captures.
CUresult fStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph*,
                               const CUgraphNode**, const CUgraphEdgeData**, size_t*) {
  ++gpu->captureQueries;
  if (reinterpret_cast<uint64_t>(s) == 0xE) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  fStreamIsCapturing(s, status);
  if (id != nullptr) *id = 0x70 + reinterpret_cast<uint64_t>(s);
  return CUDA_SUCCESS;
}
// Function 0x100 is a CUfunction with params (8 @0, 4 @8); 0x200 is a CUkernel.
CUresult fFuncGetName(const char** name, CUfunction f) {
  if (reinterpret_cast<uint64_t>(f) != 0x100) return CUDA_ERROR_INVALID_HANDLE;
  return *name = "_Z1fPfi", CUDA_SUCCESS;
}
CUresult fKernelGetName(const char** name, CUkernel k) {
  if (reinterpret_cast<uint64_t>(k) != 0x200) return CUDA_ERROR_INVALID_HANDLE;
  return *name = "_Z1kv", CUDA_SUCCESS;
}
CUresult fFuncGetParamInfo(CUfunction f, size_t i, size_t* off, size_t* size) {
  if (reinterpret_cast<uint64_t>(f) != 0x100) return CUDA_ERROR_INVALID_HANDLE;
  if (i == 0) return *off = 0, *size = 8, CUDA_SUCCESS;
  if (i == 1) return *off = 8, *size = 4, CUDA_SUCCESS;
  return CUDA_ERROR_INVALID_VALUE;
}
CUresult fKernelGetParamInfo(CUkernel k, size_t, size_t*, size_t*) {
  return reinterpret_cast<uint64_t>(k) == 0x200 ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
}
CUresult fFuncGetModule(CUmodule* m, CUfunction f) {
  *m = reinterpret_cast<CUmodule>(reinterpret_cast<uint64_t>(f) + 0x1000);
  return CUDA_SUCCESS;
}
CUresult fKernelGetFunction(CUfunction* f, CUkernel k) {
  *f = reinterpret_cast<CUfunction>(reinterpret_cast<uint64_t>(k) + 1);
  return CUDA_SUCCESS;
}

kernels::DriverApi fakeApi() {
  kernels::DriverApi a;
  a.cuGetErrorString = fGetErrorString;
  a.cuModuleLoadData = fModuleLoadData;
  a.cuModuleUnload = fModuleUnload;
  a.cuModuleGetFunction = fModuleGetFunction;
  a.cuCtxGetDevice = fCtxGetDevice;
  a.cuDeviceGetAttribute = fDeviceGetAttribute;
  a.cuMemAlloc = fMemAlloc;
  a.cuMemFree = fMemFree;
  a.cuMemAllocHost = fMemAllocHost;
  a.cuMemFreeHost = fMemFreeHost;
  a.cuMemHostAlloc = fMemHostAlloc;
  a.cuMemHostGetDevicePointer = fMemHostGetDevicePointer;
  a.cuMemsetD8 = fMemsetD8;
  a.cuMemsetD8Async = fMemsetD8Async;
  a.cuStreamCreate = fStreamCreate;
  a.cuStreamDestroy = fStreamDestroy;
  a.cuStreamQuery = fStreamQuery;
  a.cuMemcpyHtoDAsync = fMemcpyHtoDAsync;
  a.cuMemcpyDtoHAsync = fMemcpyDtoHAsync;
  a.cuLaunchKernel = fLaunchKernel;
  a.cuEventCreate = fEventCreate;
  a.cuEventDestroy = fEventDestroy;
  a.cuEventRecord = fEventRecord;
  a.cuEventSynchronize = fEventSynchronize;
  a.cuEventQuery = fEventQuery;
  a.cuCtxSynchronize = fCtxSynchronize;
  a.cuStreamSynchronize = fStreamSynchronize;
  a.cuThreadExchangeStreamCaptureMode = fExchangeCaptureMode;
  a.cuCtxPushCurrent = fCtxPushCurrent;
  a.cuCtxPopCurrent = fCtxPopCurrent;
  a.cuStreamIsCapturing = fStreamIsCapturing;
  a.cuFuncGetName = fFuncGetName;
  a.cuKernelGetName = fKernelGetName;
  a.cuFuncGetParamInfo = fFuncGetParamInfo;
  a.cuKernelGetParamInfo = fKernelGetParamInfo;
  a.cuFuncGetModule = fFuncGetModule;
  a.cuKernelGetFunction = fKernelGetFunction;
  return a;
}

std::vector<uint8_t> randomBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

struct Fixture {
  FakeGpu state;
  Fixture() { gpu = &state; }
  ~Fixture() { gpu = nullptr; }
};

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
  REQUIRE(device->hash(0xC0, 0x5, std::span(&req, 1), false, error));  // the ring is made
  gpu->blocked = true;
  auto stuck = device->hash(0xC0, 0x5, std::span(&req, 1), false, error);
  REQUIRE(stuck);
  std::vector<kernels::HashResult> r;
  CHECK_FALSE(stuck->wait(r, error));
  CHECK(error.find("did not complete within 0 s: its stream stayed blocked") != std::string::npos);
  // Every other batch place taken: only the abandoned batch's room is left to come back.
  std::vector<std::unique_ptr<PendingHashes>> pending;
  for (int i = 0; i < 8191; ++i) {
    pending.push_back(device->hash(0xC0, 0x5, std::span(&req, 1), false, error));
    REQUIRE(pending.back());
  }
  gpu->blocked = false;
  for (size_t i = 0; i < 2; ++i) {  // the GPU catches up with the first two kernels only
    std::lock_guard lock(gpu->mu);
    auto op = std::move(gpu->queue.front());
    gpu->queue.pop_front();
    op();
  }
  const auto start = std::chrono::steady_clock::now();
  auto next = device->hash(0xC0, 0x5, std::span(&req, 1), false, error);
  CHECK(next);  // the abandoned batch's room, given back since its ticket showed
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  pending.push_back(std::move(next));
  for (auto& p : pending) {
    REQUIRE(p);
    REQUIRE(p->wait(r, error));
    CHECK(r.at(0).digest == hash::hashBuffer(a));
  }
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

// ---------------------------------------------------------------- snapshots

TEST_CASE("snapshot copies are stream-ordered, asynchronous, and reuse their staging", "[recorder][cudadevice]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  auto a = randomBytes(300000, 7);
  const std::vector<uint8_t> before = a;
  // The program's own work, enqueued earlier on the stream, writes a.
  gpu->queue.push_back([&a] { a[5] ^= 0xff; });
  std::string error;
  auto c = device->copyToHost(0xC0, 0x5, reinterpret_cast<uint64_t>(a.data()), a.size(), false, error);
  REQUIRE(c);
  CHECK_FALSE(gpu->queue.empty());  // nothing ran yet
  CHECK(gpu->streamSyncs == 0);
  CHECK(gpu->ctxSyncs == 0);
  std::span<const uint8_t> bytes;
  REQUIRE(c->wait(bytes, error));
  REQUIRE(bytes.size() == a.size());
  CHECK(bytes[5] == static_cast<uint8_t>(before[5] ^ 0xff));  // saw what the earlier work left
  CHECK(std::equal(bytes.begin(), bytes.end(), a.begin()));
  const int allocsAfterFirst = gpu->allocs;
  c.reset();  // gives the staging buffer back
  auto again = device->copyToHost(0xC0, 0x5, reinterpret_cast<uint64_t>(a.data()), 250000, false, error);
  REQUIRE(again);
  CHECK(gpu->allocs == allocsAfterFirst);  // the same pinned buffer and event
  REQUIRE(again->wait(bytes, error));
  CHECK(bytes.size() == 250000);
  again.reset();
  // Synchronous mode: complete on return.
  auto sync = device->copyToHost(0xC0, 0x5, reinterpret_cast<uint64_t>(a.data()), 100, true, error);
  REQUIRE(sync);
  CHECK(gpu->queue.empty());
  sync.reset();
  device->contextDestroying(0xC0);
  CHECK(gpu->allocs == gpu->frees);
  CHECK(gpu->events.empty());
}

TEST_CASE("pinned staging is kept for reuse up to the staging limit, and made room for among the free buffers",
          "[recorder][cudadevice]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  constexpr size_t kMiB = size_t{1} << 20;
  device->setStagingLimit(3 * kMiB);
  const auto a = randomBytes(3 * kMiB, 21);
  const auto address = reinterpret_cast<uint64_t>(a.data());
  std::string error;
  auto copies = [&](size_t count, size_t size) {
    std::vector<std::unique_ptr<PendingCopy>> out;
    for (size_t i = 0; i < count; ++i) {
      out.push_back(device->copyToHost(0xC0, 0x5, address, size, false, error));
      REQUIRE(out.back());
    }
    std::span<const uint8_t> bytes;
    for (auto& c : out) REQUIRE(c->wait(bytes, error));
    return out;
  };
  // Three copies of 1 MiB in flight at once fill the limit; given back, all
  // three are kept, and the next three take them.
  copies(3, 900000);
  const int allocs = gpu->allocs, frees = gpu->frees;
  copies(3, 900000);
  CHECK(gpu->allocs == allocs);
  CHECK(gpu->frees == frees);
  // A copy of 2 MiB fits none of them: two are freed to make room for it.
  copies(1, 2 * kMiB);
  CHECK(gpu->allocs == allocs + 1);
  CHECK(gpu->frees == frees + 2);
  // Four in flight take more than the limit; given back, what is beyond it
  // is freed: 2 MiB and one 1 MiB buffer stay.
  {
    auto held = copies(1, 2 * kMiB);
    auto more = copies(3, 900000);
  }
  CHECK(gpu->allocs == allocs + 3);
  CHECK(gpu->frees == frees + 4);
  const int kept = gpu->allocs;
  copies(1, 2 * kMiB);
  copies(1, 900000);
  CHECK(gpu->allocs == kept);
  device->contextDestroying(0xC0);
  CHECK(gpu->allocs == gpu->frees);
}

TEST_CASE("a snapshot copy behind a stream that does not move is given up, and its staging never reused",
          "[recorder][cudadevice]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  device->setHashWaitLimit(std::chrono::milliseconds(50));
  const auto a = randomBytes(5000, 15);
  std::string error;
  gpu->blocked = true;
  auto stuck = device->copyToHost(0xC0, 0x5, reinterpret_cast<uint64_t>(a.data()), a.size(), false, error);
  REQUIRE(stuck);
  std::span<const uint8_t> bytes;
  CHECK_FALSE(stuck->wait(bytes, error));
  CHECK(error.find("did not complete within the wait limit") != std::string::npos);
  stuck.reset();
  gpu->blocked = false;
  const int allocs = gpu->allocs;
  auto next = device->copyToHost(0xC0, 0x5, reinterpret_cast<uint64_t>(a.data()), a.size(), false, error);
  REQUIRE(next);
  CHECK(gpu->allocs == allocs + 1);  // fresh staging: the GPU may still write the first
  REQUIRE(next->wait(bytes, error));
  CHECK(std::vector<uint8_t>(bytes.begin(), bytes.end()) == a);
  next.reset();
  device->contextDestroying(0xC0);
}

TEST_CASE("a context destroyed with a snapshot copy in flight still delivers its bytes", "[recorder][cudadevice]") {
  Fixture fx;
  auto device = CudaDevice::create(fakeApi());
  const auto a = randomBytes(5000, 8);
  std::string error;
  auto c = device->copyToHost(0xC0, 0, reinterpret_cast<uint64_t>(a.data()), a.size(), false, error);
  REQUIRE(c);
  device->contextDestroying(0xC0);  // synchronises and frees the pinned memory
  CHECK(gpu->allocs == gpu->frees);
  std::span<const uint8_t> bytes;
  REQUIRE(c->wait(bytes, error));
  CHECK(std::vector<uint8_t>(bytes.begin(), bytes.end()) == a);
  c.reset();
  CHECK(gpu->allocs == gpu->frees);
}

// ---------------------------------------------------------------- re-runs

namespace {

// The checkpoint saves and restores one "device" buffer; the relaunched
// kernel writes the run number's parity into it.
struct Rerun {
  std::vector<uint8_t>* memory = nullptr;
  std::vector<uint8_t> saved;
  int saves = 0, restores = 0, frees = 0, launches = 0;
  CUptiResult saveResult = CUPTI_SUCCESS, restoreResult = CUPTI_SUCCESS;
  CUlaunchConfig lastConfig{};
  std::vector<CUlaunchAttribute> lastAttrs;
  void** lastParams = nullptr;
};
Rerun* rerun = nullptr;

using NV::Cupti::Checkpoint::CUpti_Checkpoint;
CUptiResult fSave(CUpti_Checkpoint* cp) {
  REQUIRE(cp->structSize == CUpti_Checkpoint_STRUCT_SIZE);
  REQUIRE(cp->ctx == reinterpret_cast<CUcontext>(0xC0));
  REQUIRE(gpu->queue.empty());  // the context was synchronised first
  ++rerun->saves;
  if (rerun->saveResult == CUPTI_SUCCESS) rerun->saved = *rerun->memory;
  return rerun->saveResult;
}
CUptiResult fRestore(CUpti_Checkpoint*) {
  ++rerun->restores;
  if (rerun->restoreResult == CUPTI_SUCCESS) *rerun->memory = rerun->saved;
  return rerun->restoreResult;
}
CUptiResult fFree(CUpti_Checkpoint*) {
  ++rerun->frees;
  return CUPTI_SUCCESS;
}
CUptiResult fResultString(CUptiResult r, const char** s) {
  *s = r == CUPTI_ERROR_NOT_SUPPORTED ? "CUPTI_ERROR_NOT_SUPPORTED" : "CUPTI_ERROR_UNKNOWN";
  return CUPTI_SUCCESS;
}
CUresult fLaunchKernelEx(const CUlaunchConfig* config, CUfunction, void** params, void**) {
  rerun->lastConfig = *config;
  rerun->lastAttrs.assign(config->attrs, config->attrs + config->numAttrs);
  rerun->lastParams = params;
  const int run = rerun->launches++;
  gpu->queue.push_back([run] { (*rerun->memory)[0] = static_cast<uint8_t>(run % 2); });
  return CUDA_SUCCESS;
}

std::unique_ptr<CudaDevice> rerunDevice() {
  auto device = CudaDevice::create(fakeApi());
  device->setCheckpointApi({fSave, fRestore, fFree, fResultString});
  device->setLaunchKernelEx(fLaunchKernelEx);
  return device;
}

}  // namespace

TEST_CASE("a launch re-run from a checkpoint: digests per run, state restored after each", "[recorder][cudadevice]") {
  Fixture fx;
  Rerun r;
  rerun = &r;
  std::vector<uint8_t> y = randomBytes(4096, 9);
  y[0] = 7;
  const std::vector<uint8_t> original = y;
  r.memory = &y;
  auto device = rerunDevice();
  void* params[] = {nullptr};
  Relaunch launch;
  launch.function = 0x100;
  launch.grid = {8, 2, 1};
  launch.block = {64, 1, 1};
  launch.sharedMemBytes = 1024;
  launch.stream = 0x5;
  launch.cooperative = true;
  launch.kernelParams = params;
  const kernels::HashRequest out{reinterpret_cast<uint64_t>(y.data()), y.size()};
  std::vector<std::vector<uint64_t>> digests;
  std::string error;
  REQUIRE(device->rerunLaunch(0xC0, launch, std::span(&out, 1), 5, digests, error));
  CHECK(r.saves == 1);
  CHECK(r.restores == 5);
  CHECK(r.frees == 1);
  CHECK(r.launches == 5);
  CHECK(gpu->ctxSyncs >= 1);
  CHECK(y == original);  // the program's launch starts from its own state
  REQUIRE(digests.size() == 5);
  std::vector<uint8_t> even = original, odd = original;
  even[0] = 0, odd[0] = 1;
  CHECK(digests[0] == std::vector<uint64_t>{hash::hashBuffer(even)});
  CHECK(digests[1] == std::vector<uint64_t>{hash::hashBuffer(odd)});
  CHECK(digests[4] == digests[0]);
  // The same configuration, cooperative by attribute, the program's parameters.
  CHECK(r.lastConfig.gridDimX == 8);
  CHECK(r.lastConfig.gridDimY == 2);
  CHECK(r.lastConfig.blockDimX == 64);
  CHECK(r.lastConfig.sharedMemBytes == 1024);
  CHECK(r.lastConfig.hStream == reinterpret_cast<CUstream>(0x5));
  REQUIRE(r.lastAttrs.size() == 1);
  CHECK(r.lastAttrs[0].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
  CHECK(r.lastParams == params);
  device->contextDestroying(0xC0);
  CHECK(gpu->allocs == gpu->frees);
  rerun = nullptr;
}

TEST_CASE("re-runs fail cleanly when the checkpoint cannot be saved or restored", "[recorder][cudadevice]") {
  Fixture fx;
  Rerun r;
  rerun = &r;
  std::vector<uint8_t> y = randomBytes(100, 10);
  r.memory = &y;
  const kernels::HashRequest out{reinterpret_cast<uint64_t>(y.data()), y.size()};
  Relaunch launch;
  launch.function = 0x100;
  std::vector<std::vector<uint64_t>> digests;
  std::string error;
  {
    auto device = rerunDevice();
    r.saveResult = CUPTI_ERROR_NOT_SUPPORTED;
    CHECK_FALSE(device->rerunLaunch(0xC0, launch, std::span(&out, 1), 3, digests, error));
    CHECK(error == "cuptiCheckpointSave: CUPTI_ERROR_NOT_SUPPORTED");
    CHECK(r.launches == 0);
    r.saveResult = CUPTI_SUCCESS;
    r.restoreResult = CUPTI_ERROR_UNKNOWN;
    CHECK_FALSE(device->rerunLaunch(0xC0, launch, std::span(&out, 1), 3, digests, error));
    CHECK_THAT(error, Catch::Contains("cuptiCheckpointRestore: CUPTI_ERROR_UNKNOWN"));
    CHECK(r.launches == 1);  // stops at the first failed restore
    CHECK(r.frees == 1);
    device->contextDestroying(0xC0);
  }
  {
    // A libcupti without the checkpoint API.
    auto device = CudaDevice::create(fakeApi());
    CHECK_FALSE(device->rerunLaunch(0xC0, launch, std::span(&out, 1), 3, digests, error));
    CHECK_THAT(error, Catch::Contains("no libcheckpoint.so"));
  }
  CHECK(gpu->allocs == gpu->frees);
  rerun = nullptr;
}

namespace {

// A driver that knows a few graphs: 0x900 holds a kernel (a CUfunction), a
// device-to-host copy, a set, a child graph (0x901: a kernel given as a
// CUkernel) and an empty node; 0x902 a conditional node; 0x903 is unknown.
struct FakeGraphs {
  static inline void* params[] = {nullptr};
  static CUresult getNodes(CUgraph g, CUgraphNode* nodes, size_t* n) {
    static const std::map<uint64_t, std::vector<uint64_t>> graphs = {
        {0x900, {0xA1, 0xA2, 0xA3, 0xA4, 0xA6}}, {0x901, {0xA5}}, {0x902, {0xA7}}};
    auto it = graphs.find(reinterpret_cast<uint64_t>(g));
    if (it == graphs.end()) return CUDA_ERROR_INVALID_VALUE;
    if (nodes != nullptr) {
      for (size_t i = 0; i < std::min(*n, it->second.size()); ++i) nodes[i] = reinterpret_cast<CUgraphNode>(it->second[i]);
    }
    *n = it->second.size();
    return CUDA_SUCCESS;
  }
  static CUresult type(CUgraphNode node, CUgraphNodeType* t) {
    switch (reinterpret_cast<uint64_t>(node)) {
      case 0xA1: case 0xA5: *t = CU_GRAPH_NODE_TYPE_KERNEL; break;
      case 0xA2: *t = CU_GRAPH_NODE_TYPE_MEMCPY; break;
      case 0xA3: *t = CU_GRAPH_NODE_TYPE_MEMSET; break;
      case 0xA4: *t = CU_GRAPH_NODE_TYPE_GRAPH; break;
      case 0xA6: *t = CU_GRAPH_NODE_TYPE_EMPTY; break;
      default: *t = CU_GRAPH_NODE_TYPE_CONDITIONAL; break;
    }
    return CUDA_SUCCESS;
  }
  static CUresult kernel(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* p) {
    *p = {};
    if (reinterpret_cast<uint64_t>(node) == 0xA1) {
      p->func = reinterpret_cast<CUfunction>(0x100);
    } else {
      p->kern = reinterpret_cast<CUkernel>(0x200);
    }
    p->kernelParams = params;
    return CUDA_SUCCESS;
  }
  static CUresult copy(CUgraphNode, CUDA_MEMCPY3D* c) {
    *c = {};
    c->srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c->srcDevice = 0x5000;
    c->dstMemoryType = CU_MEMORYTYPE_HOST;
    c->dstHost = reinterpret_cast<void*>(0x6000);
    return CUDA_SUCCESS;
  }
  static CUresult set(CUgraphNode, CUDA_MEMSET_NODE_PARAMS* m) {
    *m = {};
    m->dst = 0x7000;
    return CUDA_SUCCESS;
  }
  static CUresult child(CUgraphNode, CUgraph* g) {
    *g = reinterpret_cast<CUgraph>(0x901);
    return CUDA_SUCCESS;
  }
};

}  // namespace

TEST_CASE("a graph's nodes are read through the driver, child graphs included", "[recorder][cudadevice]") {
  Fixture fx;
  kernels::DriverApi api = fakeApi();
  api.cuGraphGetNodes = FakeGraphs::getNodes;
  api.cuGraphNodeGetType = FakeGraphs::type;
  api.cuGraphKernelNodeGetParams = FakeGraphs::kernel;
  api.cuGraphMemcpyNodeGetParams = FakeGraphs::copy;
  api.cuGraphMemsetNodeGetParams = FakeGraphs::set;
  api.cuGraphChildGraphNodeGetGraph = FakeGraphs::child;
  auto device = CudaDevice::create(api);
  Device::GraphNodes nodes;
  std::string error;
  REQUIRE(device->graphNodes(0x900, nodes, error));
  CHECK(nodes.count == 6);  // the child graph's node too
  REQUIRE(nodes.kernels.size() == 2);
  CHECK(nodes.kernels[0].function == 0x100);
  CHECK(nodes.kernels[0].kernelParams == FakeGraphs::params);
  CHECK(nodes.kernels[1].function == 0x200);  // the CUkernel, where no CUfunction is given
  // The copy's device source and the set's destination; not the host side.
  CHECK(nodes.addresses == std::vector<uint64_t>{0x5000, 0x7000});

  CHECK_FALSE(device->graphNodes(0x902, nodes, error));
  CHECK(error == "it holds a conditional node");
  CHECK_FALSE(device->graphNodes(0x903, nodes, error));
  CHECK_THAT(error, Catch::Contains("cuGraphGetNodes"));
}
