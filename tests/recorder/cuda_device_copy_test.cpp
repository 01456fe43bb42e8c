// CudaDevice against a fake driver table (cuda_device_harness.h): snapshot
// copies and their pinned staging, launches re-run from a checkpoint, and
// graphs read through the driver.
#include "tests/recorder/cuda_device_harness.h"

using namespace gpurr;
using namespace gpurr::recorder;
using namespace gpurr::recorder::cuda_device_testing;

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
