// RecordSession (session_harness.h) on the kinds of memory a launch reaches:
// VMM mappings, host, another device's, IPC, managed and pool-imported
// memory, and which ranges a launch hashes before it runs.
#include "tests/recorder/session_harness.h"

using namespace gpurr;
using namespace gpurr::recorder;
using namespace gpurr::recorder::session_testing;

TEST_CASE("VMM mappings bound the hashed range, module names come from the cubin", "[recorder][session]") {
  Harness h;
  // The function's module handle is unknown: the module is found by name in
  // a loaded image's symbol table (this test binary is such an ELF image).
  std::ifstream self("/proc/self/exe", std::ios::binary);
  const std::vector<uint8_t> image((std::istreambuf_iterator<char>(self)), std::istreambuf_iterator<char>());
  h.device->functions[0xF02] = {"main", 0, {{0, 8}}, true};
  h.moduleLoad({9, 9, 9}, 0x1);
  h.moduleLoad(image, 0x2);

  std::vector<uint8_t> arena = randomBytes(8 << 16, 8);  // 8 x 64 KiB "pages"
  CUdeviceptr base = addr(arena.data());
  {
    cuMemAddressReserve_params p{&base, arena.size(), 0, 0, 0};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, &p);
  }
  {
    cuMemMap_params p{base, 3 << 16, 0, 0, 0};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &p);
  }
  {
    CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    cuMemSetAccess_params p{base, 3 << 16, &access, 1};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess, &p);
  }
  uint64_t ptr = base + 1000;
  void* args[] = {&ptr};
  h.launch(0xF02, args);
  const auto events = h.finishAndRead();
  const auto allocs = eventsOf<trace::Allocation>(events);
  REQUIRE(allocs.size() == 1);
  CHECK(allocs[0].kind == trace::AllocationKind::kVmm);
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(launches.size() == 1);
  CHECK(launches[0].module == 2);
  REQUIRE(launches[0].inputs.size() == 1);
  CHECK(launches[0].inputs[0].range.size == (3u << 16) - 1000);
}

// Memory the launch's device cannot read is never given to the device hash:
// reading it would fault and kill the program.
namespace {

void setAccess(Harness& h, uint64_t ptr, size_t size, std::vector<CUmemAccessDesc> access) {
  cuMemSetAccess_params p{ptr, size, access.data(), access.size()};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess, &p);
}

CUmemAccessDesc deviceAccess(int device, CUmemAccess_flags flags) {
  return {{CU_MEM_LOCATION_TYPE_DEVICE, device}, flags};
}

std::string notes(const trace::KernelLaunch& k) {
  std::string out;
  for (const auto& a : k.annotations)
    if (const auto* n = std::get_if<trace::Note>(&a)) out += n->text + "\n";
  return out;
}

}  // namespace

TEST_CASE("a VMM mapping is hashed only where cuMemSetAccess lets the launch's device read it",
          "[recorder][session][readable]") {
  Harness h;
  h.device->functions[kRead4] = read4Info();
  std::vector<uint8_t> arena = randomBytes(8 << 16, 30);  // 8 x 64 KiB "pages"
  CUdeviceptr base = addr(arena.data());
  {
    cuMemAddressReserve_params p{&base, arena.size(), 0, 0, 0};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, &p);
  }
  for (uint64_t page : {0, 4}) {  // two mappings of 2 pages, with a hole between
    cuMemMap_params p{base + (page << 16), 2 << 16, 0, 0, 0};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &p);
  }
  uint64_t low = base + 100, high = base + (4 << 16) + 200, none = 0;
  void* args[] = {&low, &high, &none, &none};
  h.launch(kRead4, args);  // 0: mapped, but no access set yet
  setAccess(h, base, 2 << 16, {deviceAccess(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE)});
  setAccess(h, base + (4 << 16), 2 << 16, {deviceAccess(1, CU_MEM_ACCESS_FLAGS_PROT_READ)});
  h.launch(kRead4, args);  // 1: the low mapping for device 0; the high one for device 1 only
  setAccess(h, base + (4 << 16), 2 << 16,
            {deviceAccess(1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), deviceAccess(0, CU_MEM_ACCESS_FLAGS_PROT_READ)});
  setAccess(h, base, 2 << 16, {deviceAccess(0, CU_MEM_ACCESS_FLAGS_PROT_NONE)});
  h.launch(kRead4, args);  // 2: access swapped
  {
    // Unmapped and mapped again: a new mapping has no access.
    cuMemUnmap_params u{base + (4 << 16), 2 << 16};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &u);
    cuMemMap_params m{base + (4 << 16), 2 << 16, 0, 0, 0};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &m);
  }
  h.launch(kRead4, args);  // 3: nothing readable

  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 4);
  for (const auto& k : launches) {
    CHECK(k.hashed);
    REQUIRE(k.pointers.size() == 2);  // both still resolve to the reservation
    CHECK(k.pointers[0] == trace::PointerParam{0, 1, 100});
    CHECK(k.pointers[1] == trace::PointerParam{8, 1, (4u << 16) + 200});
  }
  CHECK(launches[0].inputs.empty());
  CHECK(launches[0].outputs.empty());
  CHECK_THAT(notes(launches[0]), Catch::Contains("allocation 1 (VMM mapping without read access for device 0)"));
  REQUIRE(launches[1].inputs.size() == 1);
  CHECK(launches[1].inputs[0].range == trace::DeviceRange{low, (2u << 16) - 100, 1, 100});
  CHECK(launches[1].inputs[0].digest == hash::hashBuffer({arena.data() + 100, (2u << 16) - 100}));
  REQUIRE(launches[2].inputs.size() == 1);
  CHECK(launches[2].inputs[0].range == trace::DeviceRange{high, (2u << 16) - 200, 1, (4u << 16) + 200});
  CHECK(launches[3].inputs.empty());
  // Launches 0..3 hashed only what they could read: calls for 1 and 2 only.
  REQUIRE(h.calls.size() == 4);
  for (const auto& c : h.calls) {
    REQUIRE(c.requests.size() == 1);
    CHECK(c.requests[0].address != base + (2 << 16));
  }
}

TEST_CASE("host memory a launch points into is not hashed by the device, the launch says so",
          "[recorder][session][readable]") {
  Harness h;
  h.device->functions[kRead4] = read4Info();
  std::vector<uint8_t> dev = randomBytes(4096, 31), alloced = randomBytes(4096, 32), allocHost = randomBytes(4096, 33),
                       registered = randomBytes(4096, 34);
  h.memAlloc(dev);
  {
    void* p = alloced.data();
    cuMemHostAlloc_params params{&p, alloced.size(), CU_MEMHOSTALLOC_DEVICEMAP};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, &params);
  }
  {
    void* p = allocHost.data();
    cuMemAllocHost_v2_params params{&p, allocHost.size()};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, &params);
  }
  {
    cuMemHostRegister_v2_params params{registered.data(), registered.size(), CU_MEMHOSTREGISTER_DEVICEMAP};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2, &params);
  }
  uint64_t a = addr(alloced.data()) + 8, b = addr(allocHost.data()), c = addr(registered.data()), d = addr(dev.data());
  void* args[] = {&a, &b, &c, &d};
  h.launch(kRead4, args);
  {
    // A copy from device memory into pinned memory: the source is hashed,
    // never the host destination.
    cuMemcpyAsync_params p{addr(alloced.data()), addr(dev.data()), 64, reinterpret_cast<CUstream>(0x4)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, &p);
  }
  {
    cuGraphLaunch_params p{reinterpret_cast<CUgraphExec>(0x6), nullptr};  // the launch's stream
    h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &p);
  }

  const auto events = h.finishAndRead();
  const auto allocs = eventsOf<trace::Allocation>(events);
  REQUIRE(allocs.size() == 4);
  for (size_t i = 1; i < 4; ++i) CHECK(allocs[i].kind == trace::AllocationKind::kHostMapped);
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(launches.size() == 1);
  const trace::KernelLaunch& k = launches[0];
  CHECK(k.hashed);
  // Every pointer keeps its allocation ordinal (the diff compares them as
  // pointers, not as raw addresses); only the device buffer is hashed.
  REQUIRE(k.pointers.size() == 4);
  CHECK(k.pointers[0] == trace::PointerParam{0, 2, 8});
  CHECK(k.pointers[1] == trace::PointerParam{8, 3, 0});
  CHECK(k.pointers[2] == trace::PointerParam{16, 4, 0});
  CHECK(k.pointers[3] == trace::PointerParam{24, 1, 0});
  REQUIRE(k.inputs.size() == 1);
  CHECK(k.inputs[0].range.allocation == 1);
  REQUIRE(k.outputs.size() == 1);
  CHECK(k.outputs[0].range.allocation == 1);
  CHECK_THAT(notes(k), Catch::Contains("not hashed, not readable from device 0: allocation 2 (host memory), "
                                       "allocation 3 (host memory), allocation 4 (host memory)"));
  const auto graphs = eventsOf<trace::GraphLaunch>(events);
  REQUIRE(graphs.size() == 1);
  // The launch touched the device buffer first, so the graph hashes it only
  // after it runs (inputs at first use); the host memory never.
  CHECK(graphs[0].inputs.empty());
  REQUIRE(graphs[0].outputs.size() == 1);
  CHECK(graphs[0].outputs[0].range.allocation == 1);
  for (const auto& call : h.calls)
    for (const auto& r : call.requests) CHECK((r.address >= d && r.address < d + dev.size()));
}

TEST_CASE("another device's memory is not hashed by a launch, copy or set on this device",
          "[recorder][session][readable]") {
  Harness h;
  h.device->functions[kRead4] = read4Info();
  std::vector<uint8_t> mine = randomBytes(4096, 35), peer = randomBytes(4096, 36);
  h.memAlloc(mine);  // context 0xC0, device 0
  h.ctx = reinterpret_cast<CUcontext>(0xC1);
  h.device->device = 1;
  h.memAlloc(peer);  // context 0xC1, device 1
  h.ctx = reinterpret_cast<CUcontext>(0xC0);
  h.device->device = 0;  // (0xC0 is known to be on device 0 already)

  uint64_t a = addr(mine.data()), b = addr(peer.data()), none = 0;
  void* args[] = {&a, &b, &none, &none};
  h.launch(kRead4, args);
  {
    cuMemsetD8_v2_params p{addr(peer.data()), 1, 64};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, &p);
  }
  {
    cuMemcpyDtoD_v2_params p{addr(peer.data()), addr(mine.data()), 64};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2, &p);
  }
  {
    cuMemsetD8_v2_params p{addr(mine.data()), 1, 64};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, &p);
  }

  const auto events = h.finishAndRead();
  const auto allocs = eventsOf<trace::Allocation>(events);
  REQUIRE(allocs.size() == 2);
  CHECK(allocs[1].device == 1);
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(launches.size() == 1);
  REQUIRE(launches[0].pointers.size() == 2);
  CHECK(launches[0].pointers[1] == trace::PointerParam{8, 2, 0});
  REQUIRE(launches[0].inputs.size() == 1);
  CHECK(launches[0].inputs[0].range.allocation == 1);
  CHECK_THAT(notes(launches[0]), Catch::Contains("allocation 2 (memory of device 1)"));
  const auto sets = eventsOf<trace::Memset>(events);
  REQUIRE(sets.size() == 2);
  CHECK(sets[0].dst.allocation == 2);
  CHECK(sets[0].digest == 0);  // no digest: recorded, not hashed
  CHECK(sets[1].digest == hash::hashBuffer({mine.data(), 64}));
  const auto copies = eventsOf<trace::Memcpy>(events);
  REQUIRE(copies.size() == 1);
  CHECK(copies[0].dst.allocation == 2);
  CHECK(copies[0].digest == 0);
  for (const auto& call : h.calls)
    for (const auto& r : call.requests) CHECK((r.address >= a && r.address < a + mine.size()));
}

TEST_CASE("a function is described again once a module unloads, a context's device once the context goes",
          "[recorder][session]") {
  Harness h;
  h.device->functions[kRead4] = read4Info();
  std::vector<uint8_t> buffer = randomBytes(4096, 37);
  h.memAlloc(buffer);  // context 0xC0, device 0
  uint64_t a = addr(buffer.data()), none = 0;
  void* args[] = {&a, &none, &none, &none};
  h.launch(kRead4, args);
  // The driver gives a function's handle to another only after its module
  // unloaded, and a context stays on its device: before, neither is asked
  // again (the launch path keeps both answers on its thread).
  h.device->functions[kRead4].name = "_Z5otherPfS_S_S_";
  h.device->device = 1;
  h.launch(kRead4, args);
  CUpti_ResourceData r{h.ctx, {nullptr}, nullptr};
  h.session->onCallback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING, &r);
  h.launch(kRead4, args);
  // A new context at the handle of one destroyed: on device 1, whose
  // kernels cannot read device 0's buffer.
  h.session->onCallback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, &r);
  h.launch(kRead4, args);

  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 4);
  CHECK(launches[0].function == "_Z5read4PfS_S_S_");
  CHECK(launches[1].function == "_Z5read4PfS_S_S_");
  CHECK(launches[2].function == "_Z5otherPfS_S_S_");
  CHECK(launches[3].function == "_Z5otherPfS_S_S_");
  for (size_t i = 0; i < 3; ++i) CHECK_THAT(notes(launches[i]), !Catch::Contains("not readable"));
  CHECK_THAT(notes(launches[3]), Catch::Contains("allocation 1 (memory of device 0)"));
}

TEST_CASE("IPC-opened memory is a known allocation and hashed until its last close",
          "[recorder][session][readable]") {
  Harness h;
  h.device->functions[kRead4] = read4Info();
  std::vector<uint8_t> shared = randomBytes(8192, 37);
  const uint64_t base = addr(shared.data());
  h.device->driverRanges.push_back({base, shared.size()});
  auto open = [&] {
    CUdeviceptr p = 0;
    cuIpcOpenMemHandle_v2_params params{&p, CUipcMemHandle{}, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2, &params, CUDA_SUCCESS, nullptr, [&] { p = base; });
  };
  auto close = [&] {
    cuIpcCloseMemHandle_params params{base};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle, &params);
  };
  uint64_t p = base + 16, none = 0;
  void* args[] = {&p, &none, &none, &none};
  open();
  h.launch(kRead4, args);  // 0: hashed
  open();                  // the same handle again: the same pointer, counted
  close();
  h.launch(kRead4, args);  // 1: still open once
  close();
  h.launch(kRead4, args);  // 2: closed, not a pointer any more

  const auto events = h.finishAndRead();
  const auto allocs = eventsOf<trace::Allocation>(events);
  REQUIRE(allocs.size() == 1);
  CHECK(allocs[0].kind == trace::AllocationKind::kOther);
  CHECK(allocs[0].address == base);
  CHECK(allocs[0].size == shared.size());
  const auto frees = eventsOf<trace::Free>(events);
  REQUIRE(frees.size() == 1);
  CHECK(frees[0].ordinal == 1);
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(launches.size() == 3);
  for (int i : {0, 1}) {
    REQUIRE(launches[i].pointers.size() == 1);
    CHECK(launches[i].pointers[0] == trace::PointerParam{0, 1, 16});
    REQUIRE(launches[i].outputs.size() == 1);
    CHECK(launches[i].outputs[0].range == trace::DeviceRange{p, shared.size() - 16, 1, 16});
    CHECK(launches[i].outputs[0].digest == hash::hashBuffer({shared.data() + 16, shared.size() - 16}));
  }
  // Another process may write it between any two launches: no write
  // history vouches for it, so it is hashed before every launch.
  CHECK(launches[0].inputs.size() == 1);
  CHECK(launches[1].inputs.size() == 1);
  CHECK(launches[2].pointers.empty());
  CHECK(launches[2].outputs.empty());
  CHECK(h.warnings.empty());
}

TEST_CASE("a launch hashes before it runs only the ranges holding bytes nothing recorded touched yet",
          "[recorder][session][first-use]") {
  auto run = [](std::map<std::string, std::string> env) {
    Harness h(env);
    h.device->functions[kAxpy] = axpyInfo(0);
    std::vector<uint8_t> x = randomBytes(8192, 61), y = randomBytes(8192, 62);
    h.memAlloc(x);
    h.memAlloc(y);
    uint64_t px = addr(x.data()), py = addr(y.data()), pyTail = py + 4096;
    float a = 1.0f;
    int n = 16;
    void* args[] = {&px, &py, &a, &n};
    void* tailArgs[] = {&px, &pyTail, &a, &n};
    {  // 0: y set in full first, on the launches' stream; x never written
      cuMemsetD8Async_params p{py, 0, y.size(), reinterpret_cast<CUstream>(0x5)};
      h.call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, &p, CUDA_SUCCESS, nullptr,
             [&] { std::fill(y.begin(), y.end(), 0); });
    }
    h.launch(kAxpy, args, 0x5);      // x: first use, hashed; y: set before
    h.launch(kAxpy, args, 0x5);      // both touched by launch 0
    h.launch(kAxpy, tailArgs, 0x5);  // inside what launch 0 touched
    {  // y freed and allocated again: its bytes are the previous owner's
      cuMemFree_v2_params f{py};
      h.call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &f);
      h.memAlloc(y);
    }
    h.launch(kAxpy, args, 0x5);
    h.launch(kAxpy, args, 0x6);  // another stream: what 0x5 wrote is not taken on trust
    h.launch(kAxpy, args, 0x6);
    trace::Header header;
    const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead(&header));
    REQUIRE(launches.size() == 6);
    for (const auto& k : launches) {
      CHECK(k.outputs.size() == 2);
      CHECK(k.recorderNs > 0);  // the callbacks' own time, measured per launch
    }
    std::vector<std::vector<uint64_t>> hashedBefore;
    for (const auto& k : launches) {
      hashedBefore.emplace_back();
      for (const auto& r : k.inputs) hashedBefore.back().push_back(r.range.address);
    }
    return std::make_pair(header.options.hashInputs, hashedBefore);
  };
  SECTION("by default: first use only") {
    const auto [all, before] = run({});
    CHECK_FALSE(all);
    CHECK(before[0].size() == 1);
    CHECK(before[1].empty());
    CHECK(before[2].empty());
    CHECK(before[3].size() == 1);  // y again, allocated afresh
    CHECK(before[4].size() == 2);  // both last touched on stream 0x5
    CHECK(before[5].empty());
  }
  SECTION("GPURR_HASH_INPUTS=1, or a selection of launches: every range") {
    for (auto env : {std::map<std::string, std::string>{{"GPURR_HASH_INPUTS", "1"}},
                     std::map<std::string, std::string>{{"GPURR_LAUNCHES", "0:"}}}) {
      const auto [all, before] = run(env);
      CHECK(all);
      for (const auto& b : before) CHECK(b.size() == 2);
    }
  }
}

TEST_CASE("bytes written without a digest, and first uses left unrecorded, are hashed by their next reader",
          "[recorder][session][first-use]") {
  // The diff takes a range no launch hashed before it on trust only when
  // every byte was last written, with a digest, by a recorded operation.
  Harness h;
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x = randomBytes(8192, 81), y = randomBytes(8192, 82);
  h.memAlloc(x);
  h.memAlloc(y);
  uint64_t px = addr(x.data()), py = addr(y.data());
  float a = 1.0f;
  int n = 16;
  void* args[] = {&px, &py, &a, &n};
  auto hashedBefore = [&] {
    std::vector<size_t> counts;
    for (const auto& k : eventsOf<trace::KernelLaunch>(h.finishAndRead())) counts.push_back(k.inputs.size());
    return counts;
  };
  SECTION("a launch whose outputs could not be hashed") {
    h.launch(kAxpy, args, 0x5);  // first uses
    h.device->refuseHashes = 1;  // its after-hash (nothing is hashed before it)
    h.launch(kAxpy, args, 0x5);
    h.launch(kAxpy, args, 0x5);
    CHECK(hashedBefore() == std::vector<size_t>{2, 0, 2});
  }
  SECTION("a launch whose first uses could not be hashed") {
    h.device->refuseHashes = 1;
    h.launch(kAxpy, args, 0x5);
    h.launch(kAxpy, args, 0x5);
    CHECK(hashedBefore() == std::vector<size_t>{0, 2});
  }
  SECTION("a launch that failed") {
    h.launch(kAxpy, args, 0x5, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);  // not in the trace
    h.launch(kAxpy, args, 0x5);
    CHECK(hashedBefore() == std::vector<size_t>{2});
  }
  SECTION("a runtime launch that failed") {
    constexpr uint64_t kStub = 0x4000;
    h.device->runtimeStubs[kStub] = kAxpy;
    h.runtimeLaunch(kStub, args, {}, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                    cudaErrorLaunchOutOfResources);  // not in the trace
    h.launch(kAxpy, args, 0x5);
    CHECK(hashedBefore() == std::vector<size_t>{2});
  }
  SECTION("a 2D copy into device memory") {
    h.launch(kAxpy, args, 0);
    CUDA_MEMCPY2D c{};
    c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = x.data(), c.srcPitch = 64;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = py, c.dstPitch = 128, c.dstY = 2;
    c.WidthInBytes = 64, c.Height = 4;
    cuMemcpy2D_v2_params p{&c};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2, &p);
    h.launch(kAxpy, args, 0);
    CHECK(hashedBefore() == std::vector<size_t>{2, 1});
  }
  SECTION("a driver call gpurr does not record") {
    h.launch(kAxpy, args, 0x5);
    cuMemcpyBatchAsync_params p{};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync, &p);
    h.launch(kAxpy, args, 0x5);
    CHECK(hashedBefore() == std::vector<size_t>{2, 2});
  }
}

TEST_CASE("memory allocated on a stream being captured belongs to the graph and is never hashed as live memory",
          "[recorder][session][capture]") {
  Harness h;
  std::vector<uint8_t> owned = randomBytes(4096, 85), live = randomBytes(4096, 86);
  CUdeviceptr po = addr(owned.data()), pl = addr(live.data());
  h.beginCapture(0x9);
  cuMemAllocAsync_params a{&po, owned.size(), reinterpret_cast<CUstream>(0x9)};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, &a);
  h.endCapture(0x9);
  cuMemAllocAsync_params b{&pl, live.size(), reinterpret_cast<CUstream>(0x5)};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, &b);
  cuGraphLaunch_params g{reinterpret_cast<CUgraphExec>(0x6), reinterpret_cast<CUstream>(0x5)};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &g);
  const auto events = h.finishAndRead();
  const auto allocs = eventsOf<trace::Allocation>(events);
  REQUIRE(allocs.size() == 1);
  CHECK(allocs[0].address == pl);
  const auto graphs = eventsOf<trace::GraphLaunch>(events);
  REQUIRE(graphs.size() == 1);
  REQUIRE(graphs[0].outputs.size() == 1);
  CHECK(graphs[0].outputs[0].range.address == pl);
}

TEST_CASE("managed memory, which the CPU writes unrecorded, is hashed before every launch",
          "[recorder][session][first-use]") {
  Harness h;
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x = randomBytes(8192, 83), y = randomBytes(8192, 84);
  h.memAlloc(y);
  CUdeviceptr px = addr(x.data());
  cuMemAllocManaged_params m{&px, x.size(), CU_MEM_ATTACH_GLOBAL};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, &m);
  uint64_t pxArg = px, py = addr(y.data());
  float a = 1.0f;
  int n = 16;
  void* args[] = {&pxArg, &py, &a, &n};
  h.launch(kAxpy, args, 0x5);
  h.launch(kAxpy, args, 0x5);
  std::vector<std::vector<uint64_t>> before;
  for (const auto& k : eventsOf<trace::KernelLaunch>(h.finishAndRead())) {
    before.emplace_back();
    for (const auto& r : k.inputs) before.back().push_back(r.range.address);
    std::sort(before.back().begin(), before.back().end());
  }
  CHECK(before == std::vector<std::vector<uint64_t>>{{std::min<uint64_t>(px, py), std::max<uint64_t>(px, py)}, {px}});
}

TEST_CASE("a launch inside a framework op hashes after it only what the op's schema lets it write",
          "[recorder][session][first-use]") {
  framework::resetForTesting();
  Harness h;
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x = randomBytes(8192, 71), y = randomBytes(8192, 72), z = randomBytes(8192, 73);
  h.memAlloc(x);
  h.memAlloc(y);
  h.memAlloc(z);
  uint64_t px = addr(x.data()), py = addr(y.data()), pz = addr(z.data());
  // x and y are blocks of the framework's allocator; z is not.
  framework::blockEvent(px, x.size(), true);
  framework::blockEvent(py, y.size(), true);
  float a = 1.0f;
  int n = 16;
  uint64_t pxView = px + 256;  // the kernel gets a view into x's storage
  void* args[] = {&pxView, &py, &a, &n};
  void* zArgs[] = {&pz, &py, &a, &n};
  auto inOp = [&](std::vector<framework::Operand> operands, void** launchArgs) {
    const int op = 0;
    framework::openScope(&op, "aten::add", framework::ScopeKind::kOp, -1, 0, nullptr, 0);
    framework::opOperands(&op, operands);
    h.launch(kAxpy, launchArgs, 0x5);
    framework::closeScope(&op);
  };
  inOp({{px, false}, {py, true}}, args);   // 0: x read, y written
  inOp({{px, true}, {py, true}}, args);    // 1: both written
  inOp({{px, false}, {px, true}, {py, true}}, args);  // 2: x read through one argument, written through another
  h.launch(kAxpy, args, 0x5);              // 3: no op
  inOp({{pz, false}, {py, true}}, zArgs);  // 4: z is no block: it may hold other tensors
  {
    const int op = 0, range = 1;          // 5: a user range inside the op
    framework::openScope(&op, "aten::add", framework::ScopeKind::kOp, -1, 0, nullptr, 0);
    framework::opOperands(&op, std::vector<framework::Operand>{{px, false}, {py, true}});
    framework::openScope(&range, "my_range", framework::ScopeKind::kRange, -1, 0, nullptr, 0);
    h.launch(kAxpy, args, 0x5);
    framework::closeScope(&op);
  }
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 6);
  auto addresses = [](const std::vector<trace::RangeDigest>& rs) {
    std::vector<uint64_t> out;
    for (const auto& r : rs) out.push_back(r.range.address);
    return out;
  };
  CHECK(addresses(launches[0].reads) == std::vector<uint64_t>{pxView});
  CHECK(addresses(launches[0].outputs) == std::vector<uint64_t>{py});
  CHECK(launches[0].reads[0].range.bound == trace::RangeBound::kBlock);
  CHECK(launches[0].inputs.size() == 2);  // both at their first use, before the launch
  for (size_t i : {1, 2, 3, 5}) {
    INFO("launch " << i);
    CHECK(launches[i].reads.empty());
    CHECK(launches[i].outputs.size() == 2);
  }
  CHECK(launches[4].reads.empty());
  CHECK(launches[4].outputs.size() == 2);
  framework::resetForTesting();
}

TEST_CASE("a tensor made inside the launch's op is not hashed before the launch, whatever its block held",
          "[recorder][session][first-use]") {
  // Most launches of a training step write a tensor made in a block freed
  // the step before: its old bytes are none of the op's business.
  framework::resetForTesting();
  Harness h;
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x = randomBytes(8192, 74), y = randomBytes(8192, 75);
  h.memAlloc(x);
  h.memAlloc(y);
  uint64_t px = addr(x.data()), py = addr(y.data());
  float a = 1.0f;
  int n = 16;
  void* args[] = {&px, &py, &a, &n};
  auto inOp = [&](std::vector<framework::Operand> operands) {
    const int op = 0;
    framework::openScope(&op, "aten::mul", framework::ScopeKind::kOp, -1, 0, nullptr, 0);
    framework::opOperands(&op, operands);
    h.launch(kAxpy, args, 0x5);
    framework::closeScope(&op);
  };
  auto handOut = [&] {  // both blocks freed and handed out again
    for (uint64_t p : {px, py}) {
      framework::blockEvent(p, 0, false);
      framework::blockEvent(p, 8192, true);
    }
  };
  handOut();
  inOp({{px, false}});               // 0: y made inside the op
  handOut();
  inOp({{px, false}, {py, true}});   // 1: y an out= argument: the op may read it
  handOut();
  inOp({{px, false}, {py, false}});  // 2: y read
  handOut();
  h.launch(kAxpy, args, 0x5);        // 3: no op: nothing known of y
  handOut();
  inOp({{px, false}});               // 4: as 0, and then...
  inOp({{py, false}});               // 5: ... y, written by 4, is vouched for
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 6);
  auto before = [](const trace::KernelLaunch& k) {
    std::vector<uint64_t> out;
    for (const auto& r : k.inputs) out.push_back(r.range.address);
    std::sort(out.begin(), out.end());
    return out;
  };
  auto both = std::vector<uint64_t>{std::min(px, py), std::max(px, py)};
  CHECK(before(launches[0]) == std::vector<uint64_t>{px});
  CHECK(launches[0].outputs.size() == 1);  // y is hashed after it, and then vouched for
  CHECK(before(launches[1]) == both);
  CHECK(before(launches[2]) == both);
  CHECK(before(launches[3]) == both);
  CHECK(before(launches[4]) == std::vector<uint64_t>{px});
  CHECK(before(launches[5]) == std::vector<uint64_t>{});
  framework::resetForTesting();
}

TEST_CASE("a pool-imported pointer is a known allocation and hashed until it is freed",
          "[recorder][session][readable]") {
  Harness h;
  h.device->functions[kRead4] = read4Info();
  std::vector<uint8_t> imported = randomBytes(4096, 38), unknown = randomBytes(256, 39);
  const uint64_t base = addr(imported.data());
  h.device->driverRanges.push_back({base, imported.size()});
  auto importPointer = [&](uint64_t address) {
    CUdeviceptr p = 0;
    CUmemPoolPtrExportData data{};
    cuMemPoolImportPointer_params params{&p, reinterpret_cast<CUmemoryPool>(0x9), &data};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportPointer, &params, CUDA_SUCCESS, nullptr, [&] { p = address; });
  };
  importPointer(base);
  importPointer(addr(unknown.data()));  // the driver cannot say its size: not an allocation, warned
  uint64_t p = base, q = addr(unknown.data()), none = 0;
  void* args[] = {&p, &q, &none, &none};
  h.launch(kRead4, args);
  {
    cuMemFreeAsync_params params{base, reinterpret_cast<CUstream>(0x3)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, &params);
  }
  h.launch(kRead4, args);

  const auto events = h.finishAndRead();
  const auto allocs = eventsOf<trace::Allocation>(events);
  REQUIRE(allocs.size() == 1);
  CHECK(allocs[0].kind == trace::AllocationKind::kOther);
  CHECK(allocs[0].size == imported.size());
  REQUIRE(eventsOf<trace::Free>(events).size() == 1);
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(launches.size() == 2);
  REQUIRE(launches[0].pointers.size() == 1);
  REQUIRE(launches[0].inputs.size() == 1);
  CHECK(launches[0].inputs[0].range == trace::DeviceRange{base, imported.size(), 1, 0});
  CHECK(launches[1].pointers.empty());
  CHECK(launches[1].inputs.empty());
  REQUIRE(h.warnings.size() == 1);
  CHECK_THAT(h.warnings[0], Catch::Contains("cannot find the size of memory opened with cuMemPoolImportPointer"));
}
