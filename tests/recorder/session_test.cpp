// RecordSession driven with hand-made CUPTI callback data (session_harness.h):
// launches, copies, sets and syncs recorded, selection, the header, modules,
// domains, threads and full recording.
#include "tests/recorder/session_harness.h"

using namespace gpurr;
using namespace gpurr::recorder;
using namespace gpurr::recorder::session_testing;

TEST_CASE("a launch is recorded with parameters, pointers, module and input/output digests", "[recorder][session]") {
  Harness h;
  h.device->device = 1;
  h.device->functions[kAxpy] = axpyInfo(0xAB);
  std::vector<uint8_t> x = randomBytes(100000, 1), y = randomBytes(70000, 2);
  h.memAlloc(x);
  h.memAlloc(y);
  const std::vector<uint8_t> cubin = {1, 2, 3, 4, 5};
  h.moduleLoad(cubin, 0xAB);

  uint64_t px = addr(x.data()) + 16, py = addr(y.data());
  float a = 2.0f;
  int n = 1000;
  void* args[] = {&px, &py, &a, &n};
  const std::vector<uint8_t> yBefore = y;
  h.launch(kAxpy, args, 0x5, CUDA_SUCCESS, [&] { y[10] ^= 0xff; });  // the "kernel" writes y
  // A launch that fails is not an event.
  h.launch(kAxpy, args, 0x5, CUDA_ERROR_INVALID_VALUE);

  const auto events = h.finishAndRead();
  const auto allocs = eventsOf<trace::Allocation>(events);
  REQUIRE(allocs.size() == 2);
  CHECK(allocs[0].ordinal == 1);
  CHECK(allocs[0].address == addr(x.data()));
  CHECK(allocs[0].device == 1);
  CHECK(allocs[1].size == 70000);
  const auto modules = eventsOf<trace::ModuleLoad>(events);
  REQUIRE(modules.size() == 1);
  CHECK(modules[0].ordinal == 1);
  // Not recorded for replay: the image is left out, its digest kept.
  CHECK(modules[0].cubin.size == 0);
  CHECK(modules[0].digest == gpurr::hash::hashBuffer(cubin));

  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(launches.size() == 1);
  const trace::KernelLaunch& k = launches[0];
  CHECK(k.function == "_Z4axpyPfS_fi");
  CHECK(k.module == 1);
  CHECK(k.grid == trace::Dim3{4, 1, 1});
  CHECK(k.block == trace::Dim3{128, 1, 1});
  CHECK(k.sharedMemBytes == 256);
  CHECK(k.stream == 0x5);
  CHECK(k.context == 0xC0);
  CHECK(k.hashed);
  REQUIRE(k.params.size() == 24);
  float gotA;
  std::memcpy(&gotA, k.params.data() + 16, 4);
  CHECK(gotA == 2.0f);
  REQUIRE(k.pointers.size() == 2);
  CHECK(k.pointers[0] == trace::PointerParam{0, 1, 16});
  CHECK(k.pointers[1] == trace::PointerParam{8, 2, 0});
  // Ranges are in address order; find them by allocation.
  auto byAllocation = [](const std::vector<trace::RangeDigest>& list, uint32_t ordinal) {
    for (const auto& r : list)
      if (r.range.allocation == ordinal) return r;
    FAIL("no range in allocation " << ordinal);
    return trace::RangeDigest{};
  };
  REQUIRE(k.inputs.size() == 2);
  REQUIRE(k.outputs.size() == 2);
  const trace::RangeDigest xIn = byAllocation(k.inputs, 1), yIn = byAllocation(k.inputs, 2);
  const trace::RangeDigest xOut = byAllocation(k.outputs, 1), yOut = byAllocation(k.outputs, 2);
  CHECK(xIn.range == trace::DeviceRange{px, 100000 - 16, 1, 16});
  CHECK(xIn.digest == hash::hashBuffer({x.data() + 16, x.size() - 16}));
  CHECK(yIn.digest == hash::hashBuffer(yBefore));
  CHECK(yOut.digest == hash::hashBuffer(y));
  CHECK(yOut.digest != yIn.digest);
  CHECK(xOut.digest == xIn.digest);
  CHECK(xIn.chunkDigests.size() == 2);  // 2 chunks: kept to locate differences
  // Hashes went to the launch's stream.
  REQUIRE(h.calls.size() >= 2);
  CHECK(h.calls[0].stream == 0x5);
  CHECK_FALSE(h.calls[0].synchronous);
  // Sequence numbers follow the calls.
  for (size_t i = 0; i < events.size(); ++i) CHECK(events[i].seq == i);
  CHECK(h.warnings.empty());
}

TEST_CASE("launches, copies and sets carry the calling thread's framework origin", "[recorder][session]") {
  framework::resetForTesting();
  Harness h;
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> y = randomBytes(5000, 3), host = randomBytes(100, 4);
  h.memAlloc(y);
  uint64_t py = addr(y.data());
  float a = 1.0f;
  int n = 10;
  void* args[] = {&py, &py, &a, &n};
  h.launch(kAxpy, args, 0x5);  // before the framework layer: no origin
  static int op;
  framework::setStep(2);
  framework::enterModule("Net.fc");
  framework::openScope(&op, "aten::addmm", framework::ScopeKind::kOp, 3, 1, "/w/train.py", 9);
  h.launch(kAxpy, args, 0x5);
  {
    cuMemcpyHtoD_v2_params p{py, host.data(), host.size()};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, &p, CUDA_SUCCESS);
  }
  {
    cuMemsetD8_v2_params p{py, 0, 16};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, &p, CUDA_SUCCESS);
  }
  h.launch(kAxpy, args, 0x5);
  framework::closeScope(&op);
  framework::exitModule();

  const auto events = h.finishAndRead();
  framework::resetForTesting();
  std::vector<trace::Event> ops;
  for (const trace::Event& e : events) {
    if (trace::ranWhenRecorded(e.payload)) ops.push_back(e);
    if (std::holds_alternative<trace::Allocation>(e.payload)) CHECK_FALSE(e.origin);
  }
  REQUIRE(ops.size() == 5);
  CHECK_FALSE(ops[0].origin);
  for (size_t i = 1; i < 5; ++i) {
    REQUIRE(ops[i].origin);
    CHECK(ops[i].origin->op == "aten::addmm");
    CHECK(ops[i].origin->module == "Net.fc");
    CHECK(ops[i].origin->file == "/w/train.py");
    CHECK(ops[i].origin->line == 9);
    CHECK(ops[i].origin->step == 2);
  }
  CHECK(ops[1].origin->stepLaunch == 0);
  CHECK(ops[4].origin->stepLaunch == 1);  // copies and sets are not launches
}

TEST_CASE("GPURR_STEPS hashes the launches of the selected training steps only", "[recorder][session]") {
  framework::resetForTesting();
  Harness h(std::map<std::string, std::string>{{"GPURR_STEPS", "1:3"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> y = randomBytes(5000, 3);
  h.memAlloc(y);
  uint64_t py = addr(y.data());
  float a = 1.0f;
  int n = 10;
  void* args[] = {&py, &py, &a, &n};
  h.launch(kAxpy, args, 0x5);  // no step known yet: not hashed, one warning
  for (int64_t step = 0; step < 4; ++step) {
    framework::setStep(step);
    h.launch(kAxpy, args, 0x5);
  }
  trace::Header header;
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead(&header));
  framework::resetForTesting();
  REQUIRE(launches.size() == 5);
  std::vector<bool> hashed;
  for (const auto& k : launches) hashed.push_back(k.hashed);
  CHECK(hashed == std::vector<bool>{false, false, true, true, false});
  CHECK(launches[2].outputs.size() == 1);
  CHECK(header.options.steps == "1:3");
  REQUIRE(h.warnings.size() == 1);
  CHECK_THAT(h.warnings[0], Catch::Contains("--steps"));
}

TEST_CASE("copies, sets, syncs and frees are recorded with digests of what they wrote", "[recorder][session]") {
  Harness h({{"GPURR_CAPTURE_HOST_DATA", "1"}, {"GPURR_SYNC", "1"}});
  std::vector<uint8_t> dev = randomBytes(4096, 3), host = randomBytes(1000, 4), out(512);
  h.memAlloc(dev);
  {
    cuMemcpyHtoDAsync_v2_params p{addr(dev.data()) + 8, host.data(), host.size(), reinterpret_cast<CUstream>(0x9)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, &p, CUDA_SUCCESS, nullptr,
           [&] { std::memcpy(dev.data() + 8, host.data(), host.size()); });
  }
  {
    cuMemsetD32_v2_params p{addr(dev.data()) + 2048, 0xdeadbeef, 64};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds, &p, CUDA_SUCCESS, nullptr, [&] {
      for (int i = 0; i < 64; ++i) std::memcpy(dev.data() + 2048 + 4 * i, &p.ui, 4);
    });
  }
  {
    cuMemcpyDtoH_v2_params p{out.data(), addr(dev.data()), out.size()};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, &p, CUDA_SUCCESS, nullptr,
           [&] { std::memcpy(out.data(), dev.data(), out.size()); });
  }
  {
    cuStreamSynchronize_params p{reinterpret_cast<CUstream>(0x9)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, &p);
  }
  {
    cuMemFree_v2_params p{addr(dev.data())};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &p);
  }

  trace::Header header;
  const auto events = h.finishAndRead(&header);
  CHECK(header.options.sync);
  CHECK(header.options.captureHostData);
  const auto copies = eventsOf<trace::Memcpy>(events);
  REQUIRE(copies.size() == 2);
  CHECK(copies[0].kind == trace::MemcpyKind::kHostToDevice);
  CHECK(copies[0].async);
  CHECK(copies[0].stream == 0x9);
  CHECK(copies[0].dst == trace::DeviceRange{addr(dev.data()) + 8, 1000, 1, 8});
  CHECK(copies[0].digest == hash::hashBuffer(host));
  REQUIRE(copies[0].data);
  CHECK(copies[0].data->size == 1000);
  CHECK(copies[1].kind == trace::MemcpyKind::kDeviceToHost);
  CHECK(copies[1].src.allocation == 1);
  CHECK(copies[1].digest == hash::hashBuffer(out));
  CHECK_FALSE(copies[1].data);

  const auto sets = eventsOf<trace::Memset>(events);
  REQUIRE(sets.size() == 1);
  CHECK(sets[0].elementSize == 4);
  CHECK(sets[0].value == 0xdeadbeef);
  CHECK(sets[0].dst.size == 256);
  CHECK(sets[0].digest == hash::hashBuffer({dev.data() + 2048, 256}));
  // The _ptds set hashed on the per-thread default stream.
  bool perThread = false;
  for (const auto& c : h.calls) perThread |= c.stream == reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD);
  CHECK(perThread);
  for (const auto& c : h.calls) CHECK(c.synchronous);

  const auto syncs = eventsOf<trace::Sync>(events);
  REQUIRE(syncs.size() == 1);
  CHECK(syncs[0].kind == trace::SyncKind::kStreamSynchronize);
  CHECK(syncs[0].stream == 0x9);
  const auto frees = eventsOf<trace::Free>(events);
  REQUIRE(frees.size() == 1);
  CHECK(frees[0].ordinal == 1);
}

TEST_CASE("a synchronous copy's hash is complete when the copy returns, an asynchronous one's is not waited for",
          "[recorder][session]") {
  // After a synchronous copy the program may change the bytes it copied from
  // any stream at once: a hash left in the copy's stream would race with it.
  Harness h;
  std::vector<uint8_t> dev = randomBytes(4096, 5), out(512);
  h.memAlloc(dev);
  {
    cuMemcpyDtoH_v2_params p{out.data(), addr(dev.data()), out.size()};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, &p, CUDA_SUCCESS, nullptr,
           [&] { std::memcpy(out.data(), dev.data(), out.size()); });
  }
  {
    cuMemcpyDtoHAsync_v2_params p{out.data(), addr(dev.data()), out.size(), reinterpret_cast<CUstream>(0x9)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2, &p, CUDA_SUCCESS, nullptr,
           [&] { std::memcpy(out.data(), dev.data(), out.size()); });
  }
  h.finishAndRead();
  REQUIRE(h.calls.size() == 2);
  CHECK(h.calls[0].synchronous);
  CHECK_FALSE(h.calls[1].synchronous);
  // No capture open: the driver is not asked.
  CHECK(h.device->captureQueries == 0);
}

TEST_CASE("unified copies take their direction from the memory map, pinned host memory is host", "[recorder][session]") {
  Harness h(std::map<std::string, std::string>{{"GPURR_CAPTURE_HOST_DATA", "1"}});
  std::vector<uint8_t> dev = randomBytes(256, 11), pinned = randomBytes(256, 12), pageable = randomBytes(256, 13);
  h.memAlloc(dev);
  {
    void* p = pinned.data();
    cuMemHostAlloc_params params{&p, pinned.size(), 0};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, &params);
  }
  auto copy = [&](void* dst, const void* src, size_t n) {
    cuMemcpyAsync_params p{addr(dst), addr(src), n, reinterpret_cast<CUstream>(0x4)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, &p, CUDA_SUCCESS, nullptr, [&] { std::memcpy(dst, src, n); });
  };
  copy(dev.data(), pinned.data(), 128);         // pinned host -> device
  copy(pageable.data(), dev.data() + 64, 64);   // device -> pageable host
  copy(dev.data() + 128, dev.data(), 64);       // device -> device
  const auto events = h.finishAndRead();
  const auto allocs = eventsOf<trace::Allocation>(events);
  REQUIRE(allocs.size() == 2);
  CHECK(allocs[1].kind == trace::AllocationKind::kHostMapped);
  const auto copies = eventsOf<trace::Memcpy>(events);
  REQUIRE(copies.size() == 3);
  CHECK(copies[0].kind == trace::MemcpyKind::kHostToDevice);
  CHECK(copies[0].digest == hash::hashBuffer({pinned.data(), 128}));
  REQUIRE(copies[0].data);  // host input kept
  CHECK(copies[0].data->size == 128);
  CHECK(copies[1].kind == trace::MemcpyKind::kDeviceToHost);
  CHECK(copies[1].src == trace::DeviceRange{addr(dev.data()) + 64, 64, 1, 64});
  CHECK(copies[1].digest == hash::hashBuffer({pageable.data(), 64}));
  CHECK(copies[2].kind == trace::MemcpyKind::kDeviceToDevice);
  CHECK(copies[2].dst.offset == 128);
  CHECK_FALSE(copies[2].data);
}

TEST_CASE("GPURR_LAUNCHES and GPURR_KERNELS select what is hashed, every launch is listed", "[recorder][session]") {
  Harness h({{"GPURR_LAUNCHES", "1:3"}, {"GPURR_KERNELS", "axpy"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  h.device->functions[0xF01] = {"_Z5scalePf", 0, {{0, 8}}, true};
  std::vector<uint8_t> x = randomBytes(1000, 5);
  h.memAlloc(x);
  uint64_t px = addr(x.data());
  float a = 1;
  int n = 1;
  void* args[] = {&px, &px, &a, &n};
  void* args1[] = {&px};
  h.launch(kAxpy, args);   // 0: outside the range
  h.launch(kAxpy, args);   // 1: hashed
  h.launch(0xF01, args1);  // 2: in range, name does not match
  h.launch(kAxpy, args);   // 3: outside
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 4);
  CHECK_FALSE(launches[0].hashed);
  CHECK(launches[1].hashed);
  CHECK_FALSE(launches[2].hashed);
  CHECK_FALSE(launches[3].hashed);
  CHECK(launches[0].inputs.empty());
  CHECK(launches[1].inputs.size() == 1);
  CHECK(launches[2].pointers.size() == 1);  // pointers are resolved even when not hashed
  CHECK(h.calls.size() == 2);               // before and after launch 1 only
}

TEST_CASE("GPURR_VERBOSE times the parts of the launch callbacks, and nothing is timed without it",
          "[recorder][session]") {
  for (const bool verbose : {true, false}) {
    INFO("GPURR_VERBOSE " << verbose);
    Harness h(verbose ? std::map<std::string, std::string>{{"GPURR_VERBOSE", "1"}}
                      : std::map<std::string, std::string>{});
    CHECK(h.session->launchPartsText().empty());  // no launch yet
    h.device->functions[kAxpy] = axpyInfo(0);
    std::vector<uint8_t> x = randomBytes(1000, 5);
    h.memAlloc(x);
    uint64_t px = addr(x.data());
    float a = 1;
    int n = 1;
    void* args[] = {&px, &px, &a, &n};
    for (int i = 0; i < 3; ++i) h.launch(kAxpy, args);
    h.launch(kAxpy, args, 0x5, CUDA_ERROR_INVALID_VALUE);  // failed: no launch to count
    const std::string text = h.session->launchPartsText();
    if (!verbose) {
      CHECK(text.empty());
      continue;
    }
    CHECK(text.starts_with("recorder: launch callbacks by part, mean per launch over 3 launches: describe "));
    for (const char* part : {", pointers ", ", before ", ", framework ", ", exit ", " us (in all "})
      CHECK(text.find(part) != std::string::npos);
  }
}

TEST_CASE("cuLaunchKernelEx: extra parameter buffer, attributes and cluster dims", "[recorder][session]") {
  Harness h;
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x = randomBytes(300, 7);
  h.memAlloc(x);
  // A by-value struct {int n; float* p;}: the pointer sits at offset 8.
  uint8_t buffer[16] = {};
  const int n = 3;
  const uint64_t px = addr(x.data()) + 100;
  std::memcpy(buffer, &n, 4);
  std::memcpy(buffer + 8, &px, 8);
  size_t size = sizeof(buffer);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = 2, attr.value.clusterDim.y = 1, attr.value.clusterDim.z = 1;
  CUlaunchConfig config{};
  config.gridDimX = 8, config.gridDimY = 1, config.gridDimZ = 1;
  config.blockDimX = 64, config.blockDimY = 1, config.blockDimZ = 1;
  config.hStream = reinterpret_cast<CUstream>(0x3);
  config.attrs = &attr;
  config.numAttrs = 1;
  cuLaunchKernelEx_params p{&config, reinterpret_cast<CUfunction>(kAxpy), nullptr, extra};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, &p);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 1);
  const auto& k = launches[0];
  CHECK(k.api == trace::LaunchApi::kLaunchKernelExPtsz);
  CHECK(k.grid == trace::Dim3{8, 1, 1});
  CHECK(k.cluster == trace::Dim3{2, 1, 1});
  REQUIRE(k.attributes.size() == 1);
  CHECK(k.attributes[0].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  CHECK(k.params == std::vector<uint8_t>(buffer, buffer + 16));
  REQUIRE(k.pointers.size() == 1);
  CHECK(k.pointers[0] == trace::PointerParam{8, 1, 100});
  REQUIRE(k.inputs.size() == 1);
  CHECK(k.inputs[0].digest == hash::hashBuffer({x.data() + 100, 200}));
}

TEST_CASE("a launch built in the storage of a written launch carries nothing of it", "[recorder][session]") {
  // Launches of two kernels in turn, long and short: name, parameters,
  // layout, pointers and ranges each grow and shrink from one launch to the
  // next. The second run's launches all reuse storage the first run's (or
  // its own earlier launches') left.
  constexpr uint64_t kScale = 0xF01;
  const FunctionInfo axpy = axpyInfo(0);
  const FunctionInfo scale{"_Z5scalePf", 0, {{0, 8}}, true};
  for (int run = 0; run < 2; ++run) {
    Harness h;
    h.device->functions[kAxpy] = axpy;
    h.device->functions[kScale] = scale;
    std::vector<uint8_t> x = randomBytes(3000, 1), y = randomBytes(2000, 2);
    h.memAlloc(x);
    h.memAlloc(y);
    uint64_t px = addr(x.data()), py = addr(y.data()) + 8;
    float a = 2.0f;
    int n = 7;
    void* axpyArgs[] = {&px, &py, &a, &n};
    void* scaleArgs[] = {&py};
    std::vector<uint8_t> axpyParams(24), scaleParams(8);
    std::memcpy(axpyParams.data(), &px, 8);
    std::memcpy(axpyParams.data() + 8, &py, 8);
    std::memcpy(axpyParams.data() + 16, &a, 4);
    std::memcpy(axpyParams.data() + 20, &n, 4);
    std::memcpy(scaleParams.data(), &py, 8);
    for (int i = 0; i < 3; ++i) {
      h.launch(kAxpy, axpyArgs, 0x5);
      h.launch(kScale, scaleArgs, 0x5);
      h.launch(kScale, scaleArgs, 0x5);
    }
    const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
    REQUIRE(launches.size() == 9);
    for (size_t i = 0; i < launches.size(); ++i) {
      INFO("run " << run << ", launch " << i);
      const trace::KernelLaunch& k = launches[i];
      CHECK(k.hashed);
      CHECK(k.annotations.empty());
      if (i % 3 == 0) {
        CHECK(k.function == axpy.name);
        CHECK(k.params == axpyParams);
        CHECK(k.paramLayout == axpy.layout);
        CHECK(k.pointers == std::vector<trace::PointerParam>{{0, 1, 0}, {8, 2, 8}});
        REQUIRE(k.outputs.size() == 2);
        CHECK(k.outputs[static_cast<size_t>(px > py)].range == trace::DeviceRange{px, 3000, 1, 0});
        CHECK(k.outputs[static_cast<size_t>(px < py)].range == trace::DeviceRange{py, 2000 - 8, 2, 8});
      } else {
        CHECK(k.function == scale.name);
        CHECK(k.params == scaleParams);
        CHECK(k.paramLayout == scale.layout);
        CHECK(k.pointers == std::vector<trace::PointerParam>{{0, 2, 8}});
        REQUIRE(k.outputs.size() == 1);
        CHECK(k.outputs[0].range == trace::DeviceRange{py, 2000 - 8, 2, 8});
      }
    }
    CHECK(h.warnings.empty());
  }
  // What is kept for the next launch is a launch as new, its containers'
  // capacity kept.
  const EntryBox kept = takeLaunchEntry();
  const auto& k = std::get<trace::KernelLaunch>(kept->event.payload);
  CHECK(k == trace::KernelLaunch{});
  CHECK(k.params.capacity() >= 8);
  CHECK(kept->kernel == nullptr);
  CHECK(kept->followedOrigin == nullptr);
  CHECK(kept->event.seq == 0);
  for (const HashTicket* t : {&kept->before, &kept->after}) {
    CHECK(t->ranges.empty());
    CHECK(!t->pending);
    CHECK(t->error.empty());
  }
  CHECK(kept->beforeSnapshots.empty());
  CHECK(kept->afterSnapshots.empty());
}

TEST_CASE("the recorder's own calls are not recorded", "[recorder][session]") {
  Harness h;
  std::vector<uint8_t> x(100);
  h.memAlloc(x);
  {
    ReentrancyGuard guard;  // as on the recorder's own threads and calls
    std::vector<uint8_t> y(100);
    h.memAlloc(y);
  }
  CHECK(eventsOf<trace::Allocation>(h.finishAndRead()).size() == 1);
}

TEST_CASE("the header describes the process, the GPUs and the options", "[recorder][session]") {
  Harness h({{"GPURR_TOOL_VERSION", "9.9.9"}, {"RANK", "2"}});
  std::vector<uint8_t> x(10);
  h.memAlloc(x);
  trace::Header header;
  h.finishAndRead(&header);
  CHECK(h.traceDir.filename() == "rank2.gpurr");
  CHECK(header.toolVersion == "9.9.9");
  CHECK(header.rank == 2);
  CHECK(header.pid == static_cast<uint32_t>(getpid()));
  CHECK_FALSE(header.commandLine.empty());
  CHECK_FALSE(header.workingDirectory.empty());
  CHECK(header.driverVersion == 13000);
  REQUIRE(header.gpus.size() == 1);
  CHECK(header.gpus[0].name == "Fake GPU");
  CHECK(header.startTimeNs > 0);
  for (const auto& kv : header.environment) CHECK(isDeterminismRelevant(kv.key));
}

TEST_CASE("when the trace cannot be opened the session records nothing and runs on", "[recorder][session]") {
  Harness h({}, /*failOpen=*/true);
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x(100);
  h.memAlloc(x);
  uint64_t px = addr(x.data());
  void* args[] = {&px, &px, &px, &px};
  CHECK(h.launch(kAxpy, args) == CUDA_SUCCESS);
  h.session->finish();
  CHECK(h.calls.empty());
  CHECK(h.traceDir.empty());
}

TEST_CASE("a forked child records nothing and leaves the parent's trace alone", "[recorder][session]") {
  Harness h;
  std::vector<uint8_t> x(100), y(100);
  h.memAlloc(x);
  const pid_t child = fork();
  if (child == 0) {
    h.session->abandonInForkedChild();  // what the atfork handler does
    h.memAlloc(y);                      // ignored
    h.session->finish();                // no thread to join, nothing to close
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(eventsOf<trace::Allocation>(h.finishAndRead()).size() == 1);
}

TEST_CASE("a launch is recorded once whichever domain reports it: runtime, driver, or both nested",
          "[recorder][session]") {
  constexpr uint64_t kStub = 0x4000, kUnknownStub = 0x4001;
  auto setUp = [&](Harness& h, std::vector<uint8_t>& y) {
    h.device->functions[kAxpy] = axpyInfo(0);
    h.device->runtimeStubs[kStub] = kAxpy;
    h.memAlloc(y);
  };
  auto checkFull = [](const trace::KernelLaunch& k, const std::vector<uint8_t>& y) {
    CHECK(k.function == "_Z4axpyPfS_fi");
    CHECK(k.grid == trace::Dim3{4, 1, 1});
    CHECK(k.stream == 0x5);
    CHECK(k.hashed);
    REQUIRE(k.params.size() == 24);
    REQUIRE(k.outputs.size() == 1);
    CHECK(k.outputs[0].digest == hash::hashBuffer(y));
  };
  std::vector<uint8_t> y = randomBytes(5000, 3);
  uint64_t py = addr(y.data()), px = 0;
  float a = 1.0f;
  int n = 10;
  void* args[] = {&px, &py, &a, &n};

  SECTION("runtime alone") {
    Harness h;
    setUp(h, y);
    h.runtimeLaunch(kStub, args);
    const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
    REQUIRE(launches.size() == 1);
    checkFull(launches[0], y);
  }
  SECTION("the driver's callbacks nested in the runtime's") {
    Harness h;
    setUp(h, y);
    h.runtimeLaunch(kStub, args, [&] { h.launch(kAxpy, args, 0x5, CUDA_SUCCESS, [&] { y[3] ^= 1; }); });
    h.launch(kAxpy, args, 0x5);  // then a launch the driver alone reports
    const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
    REQUIRE(launches.size() == 2);
    checkFull(launches[0], y);
  }
  SECTION("nested, and the runtime cannot resolve its function: the driver's callback records it") {
    Harness h;
    setUp(h, y);
    h.runtimeLaunch(kUnknownStub, args, [&] { h.launch(kAxpy, args, 0x5); });
    const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
    REQUIRE(launches.size() == 1);
    checkFull(launches[0], y);
  }
  SECTION("runtime alone, function unresolved: counted, bare, with a note") {
    Harness h;
    setUp(h, y);
    h.runtimeLaunch(kUnknownStub, args);
    h.runtimeLaunch(kStub, args);
    const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
    REQUIRE(launches.size() == 2);
    CHECK(launches[0].function == "runtime_symbol");
    CHECK_FALSE(launches[0].hashed);
    REQUIRE(launches[0].annotations.size() == 1);
    CHECK(std::get<trace::Note>(launches[0].annotations[0]).text.find("runtime alone") != std::string::npos);
    checkFull(launches[1], y);
  }
  SECTION("the runtime's ENTER has no context yet: the driver's callback inside records it in its context") {
    Harness h;
    setUp(h, y);
    h.ctx = nullptr;  // the thread's first runtime call binds the primary context
    h.runtimeLaunch(kStub, args, [&] {
      h.ctx = reinterpret_cast<CUcontext>(0xC0);
      h.launch(kAxpy, args, 0x5);
    });
    const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
    REQUIRE(launches.size() == 1);
    checkFull(launches[0], y);
    CHECK(launches[0].context == 0xC0);
    CHECK(h.warnings.empty());
  }
  SECTION("__cudaLaunchKernel names a CUkernel, used as it is") {
    Harness h;
    setUp(h, y);
    h.runtimeLaunch(kAxpy, args, {}, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000);
    const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
    REQUIRE(launches.size() == 1);
    checkFull(launches[0], y);
  }
}

TEST_CASE("a module loaded lazily while the recorder describes a launch is that launch's module",
          "[recorder][session]") {
  // cuKernelGetFunction in the launch's ENTER loads the library's module and
  // names its handle: the MODULE_LOADED inside ties the two.
  Harness h;
  h.device->functions[kAxpy] = axpyInfo(0xAB);  // its module handle, not loaded by cuModuleLoad*
  const std::vector<uint8_t> image = {4, 4, 4, 4};
  h.device->onDescribe = [&] {
    ReentrancyGuard recorderCall;
    CUpti_ModuleResourceData m{5, image.size(), reinterpret_cast<const char*>(image.data())};
    CUpti_ResourceData r{h.ctx, {nullptr}, &m};
    h.session->onCallback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED, &r);
  };
  std::vector<uint8_t> y = randomBytes(256, 2);
  h.memAlloc(y);
  uint64_t py = addr(y.data());
  float a = 1;
  int n = 1;
  void* args[] = {&py, &py, &a, &n};
  h.moduleLoad({1, 2, 3}, 0xCD);  // another module first: ordinal 1
  h.launch(kAxpy, args);
  h.device->onDescribe = {};
  h.device->functions[0xF77] = {"_Z5otherPf", 0xAB, {{0, 8}}, true};  // a second kernel of that module
  h.launch(0xF77, args);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  CHECK(launches[0].module == 2);
  CHECK(launches[1].module == 2);
}

TEST_CASE("a kernel name that two images with different code define gets no module, and says so",
          "[recorder][session]") {
  Harness h;
  std::ifstream self("/proc/self/exe", std::ios::binary);
  std::vector<uint8_t> image((std::istreambuf_iterator<char>(self)), std::istreambuf_iterator<char>());
  h.device->functions[0xF02] = {"main", 0, {{0, 8}}, true};  // no module handle: found by name
  h.moduleLoad(image, 0x1);
  h.moduleLoad(image, 0x2);  // the same code again (another context): still known
  uint64_t zero = 0;
  void* args[] = {&zero};
  h.launch(0xF02, args);
  image.push_back(0);  // other code defining the same names
  h.moduleLoad(image, 0x3);
  h.launch(0xF02, args);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  CHECK(launches[0].module == 2);
  CHECK(launches[0].annotations.empty());
  CHECK(launches[1].module == 0);
  REQUIRE(launches[1].annotations.size() == 1);
  CHECK(std::get<trace::Note>(launches[1].annotations[0]).text.find("several loaded images") != std::string::npos);
}

TEST_CASE("module images are kept in traces recorded for replay alone", "[recorder][session]") {
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"GPURR_FULL", "1"}, {"GPURR_SNAPSHOT", "7"}, {"GPURR_SYNC", "1"}}) {
    UNSCOPED_INFO(name);
    Harness h(std::map<std::string, std::string>{{name, value}});
    h.device->functions[kAxpy] = axpyInfo(0xAB);
    const std::vector<uint8_t> cubin = {1, 2, 3, 4, 5};
    h.moduleLoad(cubin, 0xAB);
    const auto modules = eventsOf<trace::ModuleLoad>(h.finishAndRead());
    REQUIRE(modules.size() == 1);
    CHECK(modules[0].cubin.size == (name == "GPURR_SYNC" ? 0 : 5));
  }
}

TEST_CASE("a program module loaded inside the recorder's own driver call is recorded", "[recorder][session]") {
  // Lazy loading: the recorder's cuKernelGetFunction (describing a launched
  // function) can be what loads the program's module; the driver announces
  // that load once, inside the recorder's call.
  Harness h(std::map<std::string, std::string>{{"GPURR_SNAPSHOT", "0"}});
  h.session->ensureStarted();
  const std::vector<uint8_t> image = {9, 8, 7, 6};
  CUpti_ModuleResourceData m{3, image.size(), reinterpret_cast<const char*>(image.data())};
  CUpti_ResourceData r{h.ctx, {nullptr}, &m};
  {
    ReentrancyGuard recorderCall;
    h.session->onCallback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED, &r);
    // Its own calls are still not recorded.
    std::vector<uint8_t> x = randomBytes(64, 1);
    h.memAlloc(x);
  }
  const auto events = h.finishAndRead();
  const auto modules = eventsOf<trace::ModuleLoad>(events);
  REQUIRE(modules.size() == 1);
  CHECK(modules[0].cubin.size == 4);
  CHECK(eventsOf<trace::Allocation>(events).empty());
}

TEST_CASE("a launch ENTER that records nothing leaves no stale pointer for its EXIT", "[recorder][session]") {
  Harness h;
  h.session->ensureStarted();
  // CUPTI does not promise a zeroed correlationData: EXIT must not take
  // whatever was there for a pending launch when ENTER returned early.
  for (CUpti_CallbackId cbid : {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel}) {
    uint64_t correlation = 0xdeadbeefcafe;
    CUresult ret = CUDA_SUCCESS;
    cuLaunchKernelEx_params ex{};  // no config: nothing to record
    cuLaunchKernel_params plain{};
    plain.f = reinterpret_cast<CUfunction>(0xF0F);
    h.device->throwOnDescribe = cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;  // fails part-way
    CUpti_CallbackData cb{};
    cb.functionName = "cuTest";
    cb.functionParams = cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx ? static_cast<const void*>(&ex) : &plain;
    cb.functionReturnValue = &ret;
    cb.context = h.ctx;
    cb.correlationData = &correlation;
    cb.callbackSite = CUPTI_API_ENTER;
    h.session->onCallback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
    CHECK(correlation == 0);
    cb.callbackSite = CUPTI_API_EXIT;
    h.session->onCallback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);  // would free 0xdeadbeefcafe
  }
  h.device->throwOnDescribe = false;
  CHECK(eventsOf<trace::KernelLaunch>(h.finishAndRead()).empty());
}

TEST_CASE("a PyTorch Philox state parameter is labelled on the launch", "[recorder][session]") {
  Harness h;
  h.device->functions[0xF03] = {"_ZN2at6native6kernelIfEEvlNS_15PhiloxCudaStateEPf", 0, {{0, 8}, {8, 24}, {32, 8}}, true};
  int64_t n = 10;
  uint8_t philox[24] = {};
  const uint64_t seed = 7, offset = 96;
  std::memcpy(philox, &seed, 8);
  std::memcpy(philox + 8, &offset, 8);
  uint64_t out = 0;
  void* args[] = {&n, philox, &out};
  h.launch(0xF03, args);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 1);
  REQUIRE(launches[0].annotations.size() == 1);
  const auto& rng = std::get<trace::RngState>(launches[0].annotations[0]);
  CHECK(rng.seed == 7);
  CHECK(rng.offset == 96);
  CHECK(rng.paramOffset == 8);
}

TEST_CASE("launches made during a library call carry its annotations, later ones do not", "[recorder][session]") {
  Harness h;
  h.device->functions[0xF04] = {"_Z4gemmPf", 0, {{0, 8}}, true};
  uint64_t out = 0;
  void* args[] = {&out};
  trace::AlgorithmChoice choice{"cublasLt", "cublasLtMatmul", "algo=6 tile=20", {{"workspace", "0"}}, {}};
  {
    LibraryCallScope scope({choice});
    h.launch(0xF04, args);
    h.launch(0xF04, args);
  }
  h.launch(0xF04, args);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 3);
  for (int i = 0; i < 2; ++i) {
    REQUIRE(launches[i].annotations.size() == 1);
    CHECK(std::get<trace::AlgorithmChoice>(launches[i].annotations[0]) == choice);
  }
  CHECK(launches[2].annotations.empty());
}

TEST_CASE("callbacks from many threads at once: every event once, ordinals unique", "[recorder][session]") {
  Harness h;
  h.device->functions[kAxpy] = axpyInfo(0);
  constexpr int kThreads = 4, kRounds = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&h, t] {
      for (int i = 0; i < kRounds; ++i) {
        std::vector<uint8_t> buffer = randomBytes(512, static_cast<uint64_t>(t * 1000 + i));
        h.memAlloc(buffer);
        uint64_t p = addr(buffer.data());
        float a = 1;
        int n = i;
        void* args[] = {&p, &p, &a, &n};
        h.launch(kAxpy, args, static_cast<uint64_t>(t + 1));
        cuMemFree_v2_params f{p};
        h.call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &f);
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto events = h.finishAndRead();
  const auto allocs = eventsOf<trace::Allocation>(events);
  const auto frees = eventsOf<trace::Free>(events);
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  CHECK(allocs.size() == kThreads * kRounds);
  CHECK(frees.size() == kThreads * kRounds);
  REQUIRE(launches.size() == kThreads * kRounds);
  std::set<uint32_t> ordinals;
  for (const auto& a : allocs) ordinals.insert(a.ordinal);
  CHECK(ordinals.size() == allocs.size());
  // Each launch's pointer resolved to a live allocation of its own thread's buffer.
  for (const auto& k : launches) {
    REQUIRE(k.pointers.size() == 2);
    CHECK(ordinals.count(k.pointers[0].allocation) == 1);
    CHECK(k.inputs.size() == 1);
    CHECK(k.outputs.size() == 1);
  }
  std::set<uint32_t> threadIds;
  for (const auto& e : events) threadIds.insert(e.thread);
  CHECK(threadIds.size() == kThreads);
}

TEST_CASE("full recording is in the header and keeps host data", "[recorder][session]") {
  Harness h(std::map<std::string, std::string>{{"GPURR_FULL", "1"}});
  std::vector<uint8_t> dev = randomBytes(4096, 19), host = randomBytes(1000, 20);
  h.memAlloc(dev);
  cuMemcpyHtoD_v2_params p{addr(dev.data()), host.data(), host.size()};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, &p, CUDA_SUCCESS, nullptr,
         [&] { std::memcpy(dev.data(), host.data(), host.size()); });
  trace::Header header;
  const auto copies = eventsOf<trace::Memcpy>(h.finishAndRead(&header));
  CHECK(header.options.full);
  CHECK(header.options.captureHostData);
  REQUIRE(copies.size() == 1);
  REQUIRE(copies[0].data);
  CHECK(trace::TraceReader(h.traceDir).readBlob(*copies[0].data) == host);
}

TEST_CASE("full recording warns once about calls a whole-stream replay cannot redo", "[recorder][session]") {
  Harness h(std::map<std::string, std::string>{{"GPURR_FULL", "1"}});
  std::vector<uint8_t> dev = randomBytes(8192, 21);
  h.memAlloc(dev);
  for (int i = 0; i < 2; ++i) {
    cuMemsetD2D8_v2_params p{addr(dev.data()), 128, 7, 64, 4};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2, &p);
  }
  cuMemsetD8_v2_params contiguous{addr(dev.data()), 1, 64};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, &contiguous);  // replayable: no warning
  const auto sets = eventsOf<trace::Memset>(h.finishAndRead());
  CHECK(sets.size() == 3);
  REQUIRE(h.warnings.size() == 1);
  CHECK_THAT(h.warnings[0], Catch::Contains("--full: the program makes 2D memsets"));
  CHECK_THAT(h.warnings[0], Catch::Contains("whole-stream replay cannot restore them"));
}

TEST_CASE("without full recording the same calls are recorded silently", "[recorder][session]") {
  Harness h;
  std::vector<uint8_t> dev = randomBytes(8192, 22);
  h.memAlloc(dev);
  cuMemsetD2D8_v2_params p{addr(dev.data()), 128, 7, 64, 4};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2, &p);
  CHECK(eventsOf<trace::Memset>(h.finishAndRead()).size() == 1);
  CHECK(h.warnings.empty());
}
