// RecordSession driven with hand-made CUPTI callback data, as the driver would
// deliver it, against a fake device whose "device memory" is host memory.
// The trace is written for real and read back with TraceReader.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "recorder/library_call.h"
#include "recorder/reentrancy.h"
#include "recorder/session.h"
#include "recorder/trace_sink.h"
#include "recorder/framework_context.h"
#include "trace_format/hash.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::recorder;

namespace {

class ReadyHashes : public PendingHashes {
 public:
  explicit ReadyHashes(std::vector<kernels::HashResult> r) : results_(std::move(r)) {}
  bool wait(std::vector<kernels::HashResult>& out, std::string&) override {
    out = results_;
    return true;
  }

 private:
  std::vector<kernels::HashResult> results_;
};

struct HashCall {
  uint64_t stream;
  std::vector<kernels::HashRequest> requests;
  bool synchronous;
};

// A snapshot copy of host memory taken at the moment of the call (stream
// order), which completes only when its device lets copies finish.
class FakeCopy : public PendingCopy {
 public:
  FakeCopy(std::vector<uint8_t> bytes, std::function<void()> awaitRelease, std::function<void(int64_t)> account)
      : bytes_(std::move(bytes)), awaitRelease_(std::move(awaitRelease)), account_(std::move(account)) {
    account_(static_cast<int64_t>(bytes_.size()));
  }
  ~FakeCopy() override { account_(-static_cast<int64_t>(bytes_.size())); }
  bool wait(std::span<const uint8_t>& bytes, std::string&) override {
    awaitRelease_();
    bytes = bytes_;
    return true;
  }

 private:
  std::vector<uint8_t> bytes_;
  std::function<void()> awaitRelease_;
  std::function<void(int64_t)> account_;
};

// Hashes host memory at once: the digest is the state at the moment of the
// call, as stream order gives on a GPU.
class FakeDevice : public Device {
 public:
  // Snapshot copies: held back until `copiesReleased`; staging bytes alive.
  std::mutex copyMu;
  std::condition_variable copyCv;
  bool copiesReleased = true;
  int64_t liveCopyBytes = 0, peakLiveCopyBytes = 0;
  int copies = 0;

  // Re-runs: `rerunKernel(run)` plays the kernel on host memory; the state
  // of the output ranges is saved before and restored after each run, as the
  // checkpoint does. `failCheckpoint` makes the save fail.
  std::function<void(uint32_t run)> rerunKernel;
  bool failCheckpoint = false;
  std::vector<Relaunch> reruns;

  std::unique_ptr<PendingCopy> copyToHost(uint64_t, uint64_t, uint64_t address, uint64_t size, bool,
                                          std::string&) override {
    const auto* p = reinterpret_cast<const uint8_t*>(address);
    {
      std::lock_guard lock(copyMu);
      ++copies;
    }
    return std::make_unique<FakeCopy>(
        std::vector<uint8_t>(p, p + size),
        [this] {
          std::unique_lock lock(copyMu);
          copyCv.wait(lock, [this] { return copiesReleased; });
        },
        [this](int64_t delta) {
          std::lock_guard lock(copyMu);
          liveCopyBytes += delta;
          peakLiveCopyBytes = std::max(peakLiveCopyBytes, liveCopyBytes);
        });
  }
  void releaseCopies() {
    {
      std::lock_guard lock(copyMu);
      copiesReleased = true;
    }
    copyCv.notify_all();
  }

  bool rerunLaunch(uint64_t, const Relaunch& launch, std::span<const kernels::HashRequest> outputs, uint32_t runs,
                   std::vector<std::vector<uint64_t>>& digests, std::string& error) override {
    reruns.push_back(launch);
    if (failCheckpoint) {
      error = "cuptiCheckpointSave: CUPTI_ERROR_NOT_SUPPORTED";
      return false;
    }
    std::vector<std::vector<uint8_t>> saved;
    for (const auto& q : outputs) {
      const auto* p = reinterpret_cast<const uint8_t*>(q.address);
      saved.emplace_back(p, p + q.length);
    }
    digests.clear();
    for (uint32_t run = 0; run < runs; ++run) {
      if (rerunKernel) rerunKernel(run);
      std::vector<uint64_t> d;
      for (const auto& q : outputs) d.push_back(hash::hashBuffer({reinterpret_cast<const uint8_t*>(q.address), q.length}));
      digests.push_back(std::move(d));
      for (size_t i = 0; i < outputs.size(); ++i)
        std::memcpy(reinterpret_cast<void*>(outputs[i].address), saved[i].data(), saved[i].size());
    }
    return true;
  }

  std::map<uint64_t, FunctionInfo> functions;
  std::set<uint64_t> capturing;
  std::vector<HashCall>* calls = nullptr;
  uint32_t device = 0;
  std::mutex mu;

  uint32_t currentDevice() override { return device; }
  uint64_t streamContext(uint64_t) override { return 0xC0; }  // the harness's context
  bool throwOnDescribe = false;
  std::function<void()> onDescribe;  // what the driver does inside the description (a lazy module load)

  std::map<uint64_t, uint64_t> runtimeStubs;  // host entry function -> CUfunction
  uint64_t runtimeFunction(uint64_t stub) override {
    auto it = runtimeStubs.find(stub);
    return it == runtimeStubs.end() ? 0 : it->second;
  }
  // What cuMemGetAddressRange knows: (base, size) of memory made outside the
  // recorder's view (IPC handles, imported pool allocations).
  std::vector<std::pair<uint64_t, uint64_t>> driverRanges;
  bool addressRange(uint64_t address, uint64_t& base, uint64_t& size) override {
    for (const auto& [b, n] : driverRanges) {
      if (address >= b && address < b + n) {
        base = b, size = n;
        return true;
      }
    }
    return false;
  }

  bool describeFunction(uint64_t f, FunctionInfo& out) override {
    if (throwOnDescribe) throw std::runtime_error("describeFunction failed");
    if (onDescribe) onDescribe();
    auto it = functions.find(f);
    if (it == functions.end()) return false;
    out = it->second;
    return true;
  }
  // Graphs the driver describes, by CUgraph handle.
  std::map<uint64_t, GraphNodes> graphs;
  bool graphNodes(uint64_t graph, GraphNodes& out, std::string& error) override {
    auto it = graphs.find(graph);
    if (it == graphs.end()) return error = "it holds a conditional node", false;
    out = it->second;
    return true;
  }
  int captureQueries = 0;
  StreamCapture captureState(uint64_t stream) override {
    ++captureQueries;
    if (capturing.count(stream) == 0) return {std::nullopt, true};
    return {40 + stream, false};  // the capture's id
  }
  // Whether output hashes may be held back on their stream (as CudaDevice
  // allows): off unless a test turns it on.
  bool deferHashes = false;
  bool defersHashes() override { return deferHashes; }
  int refuseHashes = 0;  // the next this many hashes fail to enqueue
  std::unique_ptr<PendingHashes> hash(uint64_t, uint64_t stream, std::span<const kernels::HashRequest> requests,
                                      bool synchronous, std::string& error) override {
    if (refuseHashes > 0) {
      --refuseHashes;
      error = "refused";
      return nullptr;
    }
    if (calls) {
      std::lock_guard lock(mu);  // callbacks come from many threads
      calls->push_back({stream, {requests.begin(), requests.end()}, synchronous});
    }
    std::vector<kernels::HashResult> r;
    for (const auto& q : requests) {
      std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(q.address), q.length);
      r.push_back({hash::hashBuffer(bytes), hash::chunkDigests(bytes)});
    }
    return std::make_unique<ReadyHashes>(std::move(r));
  }
  void describeSystem(trace::Header& h) override {
    h.driverVersion = 13000;
    h.gpus.push_back({0, "Fake GPU", "GPU-00000000-0000-0000-0000-000000000000", 132, 9, 0, 80ull << 30, "0000:01:00.0"});
  }
  void contextDestroying(uint64_t) override {}
};

std::vector<uint8_t> randomBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

uint64_t addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

// A session writing to a fresh trace directory, and helpers that play the
// driver's part of each call.
struct Harness {
  std::filesystem::path root;
  std::filesystem::path traceDir;
  std::vector<std::string> warnings;
  std::mutex warningsMu;
  std::vector<HashCall> calls;
  FakeDevice* device = nullptr;
  std::unique_ptr<RecordSession> session;
  CUcontext ctx = reinterpret_cast<CUcontext>(0xC0);  // the calls' current context

  explicit Harness(std::map<std::string, std::string> env = {}, bool failOpen = false) {
    root = std::filesystem::temp_directory_path() /
           ("gpurr-session-" + std::to_string(getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
    env["GPURR_OUTPUT"] = root.string();
    std::vector<std::string> problems;
    RecorderOptions options = parseOptions(
        [env](const char* n) -> const char* {
          auto it = env.find(n);
          return it == env.end() ? nullptr : it->second.c_str();
        },
        problems);
    REQUIRE(problems.empty());
    auto dev = std::make_unique<FakeDevice>();
    dev->calls = &calls;
    device = dev.get();
    WarnFn warn = [this](const std::string& m) {
      std::lock_guard lock(warningsMu);
      warnings.push_back(m);
    };
    session = std::make_unique<RecordSession>(
        options, std::move(dev),
        [this, options, failOpen, warn](const trace::Header& h) -> std::unique_ptr<TraceSink> {
          if (failOpen) return nullptr;
          std::string error;
          auto dir = claimTraceDirectory(*options.output, options.rankName, error);
          REQUIRE(dir);
          traceDir = *dir;
          return std::make_unique<TraceSink>(std::make_unique<trace::TraceWriter>(*dir, h), warn);
        },
        warn);
  }
  ~Harness() { std::filesystem::remove_all(root); }
  static int& counter() {
    static int n = 0;
    return n;
  }

  CUresult call(CUpti_CallbackId cbid, const void* params, CUresult result = CUDA_SUCCESS,
                const char* symbol = nullptr, const std::function<void()>& between = {}) {
    uint64_t correlation = 0;
    CUresult ret = CUDA_SUCCESS;
    CUpti_CallbackData cb{};
    cb.functionName = "cuTest";
    cb.functionParams = params;
    cb.functionReturnValue = &ret;
    cb.symbolName = symbol;
    cb.context = ctx;
    cb.correlationData = &correlation;
    cb.callbackSite = CUPTI_API_ENTER;
    session->onCallback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
    if (between) between();  // what the call itself does (e.g. a kernel's writes)
    ret = result;
    cb.callbackSite = CUPTI_API_EXIT;
    session->onCallback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
    return ret;
  }

  void memAlloc(const std::vector<uint8_t>& buffer) {
    CUdeviceptr p = addr(buffer.data());
    cuMemAlloc_v2_params params{&p, buffer.size()};
    call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &params);
  }

  void moduleLoad(const std::vector<uint8_t>& image, uint64_t handle) {
    CUmodule module = nullptr;
    cuModuleLoadData_params params{&module, image.data()};
    call(CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData, &params, CUDA_SUCCESS, nullptr, [&] {
      CUpti_ModuleResourceData m{7, image.size(), reinterpret_cast<const char*>(image.data())};
      CUpti_ResourceData r{ctx, {nullptr}, &m};
      session->onCallback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED, &r);
      module = reinterpret_cast<CUmodule>(handle);
    });
  }

  CUresult launch(uint64_t function, void** args, uint64_t stream = 0, CUresult result = CUDA_SUCCESS,
                  const std::function<void()>& kernel = {}) {
    cuLaunchKernel_params p{};
    p.f = reinterpret_cast<CUfunction>(function);
    p.gridDimX = 4, p.gridDimY = 1, p.gridDimZ = 1;
    p.blockDimX = 128, p.blockDimY = 1, p.blockDimZ = 1;
    p.sharedMemBytes = 256;
    p.hStream = reinterpret_cast<CUstream>(stream);
    p.kernelParams = args;
    return call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, result, "fallback_name", kernel);
  }

  // cudaLaunchKernel of the host function `stub` as the runtime reports it:
  // its callbacks around `inside` (nothing, or the driver's own launch
  // callbacks when the runtime launches through the driver).
  void runtimeLaunch(uint64_t stub, void** args, const std::function<void()>& inside = {},
                     CUpti_CallbackId cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
    cudaLaunchKernel_v7000_params p{};
    p.func = reinterpret_cast<const void*>(stub);
    p.gridDim = dim3(4, 1, 1);
    p.blockDim = dim3(128, 1, 1);
    p.args = args;
    p.sharedMem = 256;
    p.stream = reinterpret_cast<cudaStream_t>(0x5);
    uint64_t correlation = 0x5151;  // not zeroed by CUPTI
    cudaError_t ret = cudaSuccess;
    CUpti_CallbackData cb{};
    cb.functionName = "cudaLaunchKernel";
    cb.functionParams = &p;
    cb.functionReturnValue = &ret;
    cb.symbolName = "runtime_symbol";
    cb.context = ctx;
    cb.correlationData = &correlation;
    cb.callbackSite = CUPTI_API_ENTER;
    session->onCallback(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &cb);
    if (inside) inside();
    cb.callbackSite = CUPTI_API_EXIT;
    session->onCallback(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &cb);
  }

  // A runtime API call as CUPTI reports it: ENTER, `inside` (what the call
  // does, e.g. the driver's own callbacks), EXIT with `result`.
  void runtimeCall(CUpti_CallbackId cbid, const void* params, cudaError_t result = cudaSuccess,
                   const std::function<void()>& inside = {}) {
    uint64_t correlation = 0;
    cudaError_t ret = cudaSuccess;
    CUpti_CallbackData cb{};
    cb.functionName = "cudaTest";
    cb.functionParams = params;
    cb.functionReturnValue = &ret;
    cb.context = ctx;
    cb.correlationData = &correlation;
    cb.callbackSite = CUPTI_API_ENTER;
    session->onCallback(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &cb);
    if (inside) inside();
    ret = result;
    cb.callbackSite = CUPTI_API_EXIT;
    session->onCallback(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &cb);
  }

  // A graph capture of `stream` begun and ended through the driver, as a
  // program's calls report it: the fake driver says the stream captures in
  // between.
  void beginCapture(uint64_t stream) {
    cuStreamBeginCapture_v2_params p{reinterpret_cast<CUstream>(stream), CU_STREAM_CAPTURE_MODE_GLOBAL};
    call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &p, CUDA_SUCCESS, nullptr,
         [&] { device->capturing.insert(stream); });
  }
  void endCapture(uint64_t stream) {
    CUgraph graph = nullptr;
    cuStreamEndCapture_params p{reinterpret_cast<CUstream>(stream), &graph};
    call(CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, &p, CUDA_SUCCESS, nullptr,
         [&] { device->capturing.erase(stream); });
  }

  std::vector<trace::Event> finishAndRead(trace::Header* header = nullptr) {
    session->finish();
    REQUIRE(!traceDir.empty());
    trace::TraceReader reader(traceDir);
    if (header) *header = reader.header();
    CHECK_FALSE(reader.damage().unclosed);
    // Every trace's index holds the process's readable host memory: this
    // stack frame's among it.
    const auto here = reinterpret_cast<uint64_t>(&header);
    CHECK(std::any_of(reader.hostRegions().begin(), reader.hostRegions().end(),
                      [&](const trace::HostRegion& r) { return here >= r.start && here < r.end; }));
    return reader.readAll();
  }
};

template <typename T>
std::vector<T> eventsOf(const std::vector<trace::Event>& events) {
  std::vector<T> out;
  for (const auto& e : events)
    if (auto* p = std::get_if<T>(&e.payload)) out.push_back(*p);
  return out;
}

constexpr uint64_t kAxpy = 0xF00;
FunctionInfo axpyInfo(uint64_t module) {
  return {"_Z4axpyPfS_fi", module, {{0, 8}, {8, 8}, {16, 4}, {20, 4}}, true};
}

}  // namespace

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
  // Not recorded for replay: the image is left out.
  CHECK(modules[0].cubin.size == 0);

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
    if (trace::isOperation(e.payload)) ops.push_back(e);
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

TEST_CASE("while a capture is open, one capture query per copy answers both \"captured?\" and \"may we enqueue?\"",
          "[recorder][session][capture]") {
  Harness h;
  std::vector<uint8_t> dev = randomBytes(4096, 5), out(512);
  h.memAlloc(dev);
  h.beginCapture(0x77);
  const int before = h.device->captureQueries;
  cuMemcpyDtoHAsync_v2_params p{out.data(), addr(dev.data()), out.size(), reinterpret_cast<CUstream>(0x9)};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2, &p, CUDA_SUCCESS, nullptr,
         [&] { std::memcpy(out.data(), dev.data(), out.size()); });
  CHECK(h.device->captureQueries - before == 1);
  h.endCapture(0x77);
  h.finishAndRead();
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

TEST_CASE("nothing is enqueued on a stream being captured", "[recorder][session]") {
  Harness h;
  h.device->functions[kAxpy] = axpyInfo(0);
  h.beginCapture(0x77);
  std::vector<uint8_t> x = randomBytes(1000, 6);
  h.memAlloc(x);
  uint64_t px = addr(x.data());
  float a = 1;
  int n = 1;
  void* args[] = {&px, &px, &a, &n};
  h.launch(kAxpy, args, 0x77);
  {
    cuMemsetD8Async_params p{px, 0, 10, reinterpret_cast<CUstream>(0x77)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, &p);
  }
  h.launch(kAxpy, args, 0x5);  // an ordinary launch: the first to run
  const auto events = h.finishAndRead();
  CHECK(h.calls.size() == 2);  // before and after the ordinary launch only
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(launches.size() == 2);
  // Captured into the graph, not run: marked so, with its capture, its
  // pointers resolved, nothing hashed.
  CHECK(launches[0].captured);
  CHECK(launches[0].captureId == 40 + 0x77);
  CHECK_FALSE(launches[0].hashed);
  CHECK(launches[0].pointers.size() == 2);
  CHECK(launches[0].inputs.empty());
  CHECK_FALSE(launches[1].captured);
  CHECK(launches[1].hashed);
  CHECK(eventsOf<trace::Memset>(events).at(0).digest == 0);
}

TEST_CASE("captured launches take no launch number: --launches counts the launches that run",
          "[recorder][session]") {
  Harness h(std::map<std::string, std::string>{{"GPURR_LAUNCHES", "0:1"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  h.beginCapture(0x77);
  std::vector<uint8_t> x = randomBytes(1000, 6);
  h.memAlloc(x);
  uint64_t px = addr(x.data());
  float a = 1;
  int n = 1;
  void* args[] = {&px, &px, &a, &n};
  h.launch(kAxpy, args, 0x77);
  h.launch(kAxpy, args, 0x5);  // launch 0: selected
  h.launch(kAxpy, args, 0x5);  // launch 1: not
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 3);
  CHECK(launches[0].captured);
  CHECK(launches[1].hashed);
  CHECK_FALSE(launches[2].hashed);
}

TEST_CASE("copies, sets and graph launches on a stream being captured are marked captured: nothing hashed, kept or "
          "forgotten",
          "[recorder][session][capture]") {
  Harness h(std::map<std::string, std::string>{{"GPURR_CAPTURE_HOST_DATA", "1"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x = randomBytes(8192, 93), y = randomBytes(8192, 94), host = randomBytes(64, 95);
  h.memAlloc(x);
  h.memAlloc(y);
  uint64_t px = addr(x.data()), py = addr(y.data());
  float a = 1.0f;
  int n = 16;
  void* args[] = {&px, &py, &a, &n};
  h.launch(kAxpy, args, 0x5);  // first uses: both hashed before, then touched on stream 5
  const size_t enqueued = h.calls.size();
  h.beginCapture(0x77);
  {
    cuMemcpyHtoDAsync_v2_params p{px, host.data(), host.size(), reinterpret_cast<CUstream>(0x77)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, &p);
  }
  {
    cuMemcpyDtoDAsync_v2_params p{py + 100, px, 50, reinterpret_cast<CUstream>(0x77)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2, &p);
  }
  {
    cuMemsetD8Async_params p{py, 1, 10, reinterpret_cast<CUstream>(0x77)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, &p);
  }
  {
    cuGraphLaunch_params g{reinterpret_cast<CUgraphExec>(0x6), reinterpret_cast<CUstream>(0x77)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &g);
  }
  CHECK(h.calls.size() == enqueued);  // nothing enqueued on the capturing stream
  h.endCapture(0x77);
  h.launch(kAxpy, args, 0x5);  // the captured work has not run: x and y are as launch 0 left them
  const auto events = h.finishAndRead();
  const auto copies = eventsOf<trace::Memcpy>(events);
  const auto sets = eventsOf<trace::Memset>(events);
  const auto graphs = eventsOf<trace::GraphLaunch>(events);
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(copies.size() == 2);
  REQUIRE(sets.size() == 1);
  REQUIRE(graphs.size() == 1);
  REQUIRE(launches.size() == 2);
  for (const auto& c : copies) {
    CHECK(c.captured);
    CHECK(c.captureId == 40 + 0x77);
    CHECK(c.digest == 0);
    CHECK_FALSE(c.data);  // the host bytes are read when the graph runs, not now
  }
  CHECK(copies[0].kind == trace::MemcpyKind::kHostToDevice);
  CHECK(copies[1].dst == trace::DeviceRange{py + 100, 50, 2, 100});
  CHECK(sets[0].captured);
  CHECK(sets[0].captureId == 40 + 0x77);
  CHECK(sets[0].digest == 0);
  CHECK(graphs[0].captured);
  CHECK(graphs[0].inputs.empty());
  CHECK(graphs[0].outputs.empty());
  for (const auto& e : events) {
    if (std::holds_alternative<trace::Memcpy>(e.payload) || std::holds_alternative<trace::Memset>(e.payload) ||
        std::holds_alternative<trace::GraphLaunch>(e.payload)) {
      CHECK_FALSE(trace::isOperation(e.payload));
    }
  }
  CHECK(launches[0].inputs.size() == 2);
  CHECK(launches[1].inputs.empty());  // still last written, with a digest, by launch 0
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
  // What is kept for the next launch is empty, its capacity kept.
  LaunchStorage kept;
  REQUIRE(takeLaunchStorage(kept));
  CHECK(kept.function.empty());
  CHECK(kept.params.empty());
  CHECK(kept.paramLayout.empty());
  CHECK(kept.pointers.empty());
  CHECK(kept.ranges.empty());
  CHECK(kept.inputs.empty());
  CHECK(kept.params.capacity() >= 8);
}

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

constexpr uint64_t kRead4 = 0xF10;
FunctionInfo read4Info() { return {"_Z5read4PfS_S_S_", 0, {{0, 8}, {8, 8}, {16, 8}, {24, 8}}, true}; }

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

namespace {

size_t blobFiles(const std::filesystem::path& trace) {
  size_t n = 0;
  if (!std::filesystem::exists(trace / "blobs")) return 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(trace / "blobs"))
    if (e.is_regular_file()) ++n;
  return n;
}

const trace::RangeDigest& inAllocation(const std::vector<trace::RangeDigest>& list, uint32_t ordinal) {
  for (const auto& r : list)
    if (r.range.allocation == ordinal) return r;
  FAIL("no range in allocation " << ordinal);
  return list.front();
}

}  // namespace

TEST_CASE("snapshots: inputs before and outputs after a selected launch are byte-exact, other launches get none",
          "[recorder][session][snapshot]") {
  // Hashing is limited to launch 5: the snapshot selection hashes its own.
  Harness h({{"GPURR_SNAPSHOT", "0,^scale\\("}, {"GPURR_LAUNCHES", "5:6"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  constexpr uint64_t kScale = 0xF01;
  h.device->functions[kScale] = {"_Z5scalePfi", 0, {{0, 8}, {8, 4}}, true};
  std::vector<uint8_t> x = randomBytes(3000, 10), y = randomBytes(5000, 11);
  std::vector<float> z(2048);
  for (size_t i = 0; i < z.size(); ++i) z[i] = 0.5f * static_cast<float>(i);
  std::vector<uint8_t> zb(z.size() * 4);
  std::memcpy(zb.data(), z.data(), zb.size());
  h.memAlloc(x);
  h.memAlloc(y);
  h.memAlloc(zb);
  uint64_t px = addr(x.data()), py = addr(y.data()), pz = addr(zb.data());
  float a = 2.0f;
  int n = 10;
  void* args[] = {&px, &py, &a, &n};
  const std::vector<uint8_t> xBefore = x, yBefore = y;
  h.launch(kAxpy, args, 0x5, CUDA_SUCCESS, [&] { y[100] ^= 0x5a; });  // launch 0: selected by number
  const std::vector<uint8_t> yAfter0 = y;
  h.launch(kAxpy, args, 0x5, CUDA_SUCCESS, [&] { y[101] ^= 0x5a; });  // launch 1: not selected
  void* scaleArgs[] = {&pz, &n};
  const std::vector<uint8_t> zBefore = zb;
  h.launch(kScale, scaleArgs, 0x5, CUDA_SUCCESS, [&] { zb[4] ^= 1; });  // launch 2: selected by name
  const std::vector<uint8_t> zAfter = zb;
  h.launch(kAxpy, args, 0x5);  // launch 3: not selected

  trace::Header header;
  const auto events = h.finishAndRead(&header);
  CHECK(header.options.snapshot == "0,^scale\\(");
  trace::TraceReader reader(h.traceDir);
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(launches.size() == 4);

  const trace::KernelLaunch& k0 = launches[0];
  CHECK(k0.hashed);
  REQUIRE(k0.inputs.size() == 2);
  REQUIRE(k0.outputs.size() == 2);
  for (const auto* list : {&k0.inputs, &k0.outputs})
    for (const trace::RangeDigest& r : *list) REQUIRE(r.snapshot);
  CHECK(reader.readBlob(*inAllocation(k0.inputs, 1).snapshot) == xBefore);
  CHECK(reader.readBlob(*inAllocation(k0.inputs, 2).snapshot) == yBefore);
  CHECK(reader.readBlob(*inAllocation(k0.outputs, 1).snapshot) == xBefore);
  CHECK(reader.readBlob(*inAllocation(k0.outputs, 2).snapshot) == yAfter0);
  // The digests describe the same bytes as the snapshots.
  CHECK(inAllocation(k0.outputs, 2).digest == hash::hashBuffer(yAfter0));
  // Deduplicated: x unchanged by the launch is one blob.
  CHECK(inAllocation(k0.inputs, 1).snapshot == inAllocation(k0.outputs, 1).snapshot);

  CHECK_FALSE(launches[1].hashed);
  CHECK(launches[1].inputs.empty());
  CHECK(launches[3].inputs.empty());

  const trace::KernelLaunch& k2 = launches[2];
  CHECK(k2.hashed);
  REQUIRE(k2.inputs.size() == 1);
  REQUIRE(k2.outputs.size() == 1);
  REQUIRE(k2.inputs[0].snapshot);
  REQUIRE(k2.outputs[0].snapshot);
  CHECK(reader.readBlob(*k2.inputs[0].snapshot) == zBefore);
  CHECK(reader.readBlob(*k2.outputs[0].snapshot) == zAfter);
  // Float data is stored in byte planes.
  CHECK(k2.inputs[0].snapshot->encoding != trace::BlobEncoding::kRaw);

  // x, y before, y after, z before, z after.
  CHECK(blobFiles(h.traceDir) == 5);
  CHECK(h.device->copies == 6);
  CHECK(h.session->snapshotBudget().inUse() == 0);
  CHECK(h.warnings.empty());
}

TEST_CASE("snapshots: identical bytes are stored once across launches", "[recorder][session][snapshot]") {
  Harness h(std::map<std::string, std::string>{{"GPURR_SNAPSHOT", ":"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x = randomBytes(10000, 12), y(10000, 0);
  h.memAlloc(x);
  h.memAlloc(y);
  uint64_t px = addr(x.data()), py = addr(y.data());
  float a = 1.0f;
  int n = 1;
  void* args[] = {&px, &py, &a, &n};
  for (int i = 0; i < 3; ++i) h.launch(kAxpy, args, 0x1);  // writes nothing
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 3);
  for (const auto& k : launches) {
    REQUIRE(k.inputs.size() == 2);
    CHECK(k.inputs[0].snapshot == launches[0].inputs[0].snapshot);
    CHECK(k.outputs[1].snapshot == launches[0].inputs[1].snapshot);
  }
  CHECK(blobFiles(h.traceDir) == 2);
}

TEST_CASE("snapshots: the program waits for the writer at the memory bound and nothing is dropped",
          "[recorder][session][snapshot]") {
  Harness h({{"GPURR_SNAPSHOT", ":"}, {"GPURR_SNAPSHOT_MEMORY_MB", "1"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  h.device->copiesReleased = false;  // the GPU has not finished any copy yet
  std::vector<uint8_t> x = randomBytes(400 * 1024, 13), y = randomBytes(400 * 1024, 14);
  h.memAlloc(x);
  h.memAlloc(y);
  uint64_t px = addr(x.data()), py = addr(y.data());
  float a = 1.0f;
  int n = 1;
  void* args[] = {&px, &py, &a, &n};
  // One launch alone may take what it needs: nothing queued could make room.
  h.launch(kAxpy, args, 0x1, CUDA_SUCCESS, [&] { y[0] ^= 1; });
  CHECK(h.device->liveCopyBytes == 4 * 400 * 1024);

  std::atomic<bool> done{false};
  std::thread second([&] {
    h.launch(kAxpy, args, 0x1, CUDA_SUCCESS, [&] { y[1] ^= 1; });
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(done.load());  // waiting for the writer, not copying past the bound
  CHECK(h.device->liveCopyBytes == 4 * 400 * 1024);
  CHECK(h.session->snapshotBudget().waits() == 1);
  h.device->releaseCopies();
  second.join();
  CHECK(done.load());

  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  trace::TraceReader reader(h.traceDir);
  for (const auto& k : launches) {
    REQUIRE(k.outputs.size() == 2);
    for (const auto& r : k.outputs) REQUIRE(r.snapshot);
  }
  CHECK(reader.readBlob(*inAllocation(launches[1].outputs, 2).snapshot) == y);
  CHECK(h.device->peakLiveCopyBytes <= 4 * 400 * 1024);
  CHECK(h.device->liveCopyBytes == 0);
  CHECK(h.session->snapshotBudget().inUse() == 0);
}

TEST_CASE("determinism check: re-runs from the same state count distinct results and leave the program unaffected",
          "[recorder][session][determinism]") {
  Harness h({{"GPURR_LAUNCHES", "0:1"}, {"GPURR_CHECK_DETERMINISM", "6"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x = randomBytes(4096, 15), y = randomBytes(4096, 16);
  h.memAlloc(x);
  h.memAlloc(y);
  uint64_t px = addr(x.data()), py = addr(y.data());
  float a = 3.0f;
  int n = 7;
  void* args[] = {&px, &py, &a, &n};
  // An atomics-like kernel: three different results over the re-runs.
  uint32_t seen = 0;
  h.device->rerunKernel = [&](uint32_t run) {
    y[0] = static_cast<uint8_t>(run % 3);
    ++seen;
  };
  const std::vector<uint8_t> yBefore = y;
  h.launch(kAxpy, args, 0x7, CUDA_SUCCESS, [&] { y[0] = 0xEE; });
  h.launch(kAxpy, args, 0x7, CUDA_SUCCESS);  // not selected: not re-run

  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  CHECK(seen == 6);
  REQUIRE(h.device->reruns.size() == 1);
  const Relaunch& r = h.device->reruns[0];
  CHECK(r.function == kAxpy);
  CHECK(r.grid == trace::Dim3{4, 1, 1});
  CHECK(r.block == trace::Dim3{128, 1, 1});
  CHECK(r.sharedMemBytes == 256);
  CHECK(r.stream == 0x7);
  CHECK(r.kernelParams == args);
  CHECK_FALSE(r.cooperative);

  std::vector<trace::DeterminismCheck> checks;
  for (const auto& an : launches[0].annotations)
    if (auto* d = std::get_if<trace::DeterminismCheck>(&an)) checks.push_back(*d);
  REQUIRE(checks.size() == 1);
  CHECK(checks[0] == trace::DeterminismCheck{6, 3});
  for (const auto& an : launches[1].annotations) CHECK_FALSE(std::holds_alternative<trace::DeterminismCheck>(an));
  // The program's launch started from the state it would have had unrecorded.
  CHECK(inAllocation(launches[0].inputs, 2).digest == hash::hashBuffer(yBefore));
  CHECK(y[0] == 0xEE);
  CHECK(h.warnings.empty());
}

TEST_CASE("determinism check: a deterministic kernel gives one result", "[recorder][session][determinism]") {
  Harness h({{"GPURR_KERNELS", "axpy"}, {"GPURR_CHECK_DETERMINISM", "3"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> y = randomBytes(4096, 17);
  h.memAlloc(y);
  uint64_t py = addr(y.data());
  float a = 3.0f;
  int n = 7;
  void* args[] = {&py, &py, &a, &n};
  h.device->rerunKernel = [&](uint32_t) { y[5] = 42; };
  h.launch(kAxpy, args, 0x7);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 1);
  bool found = false;
  for (const auto& an : launches[0].annotations)
    if (auto* d = std::get_if<trace::DeterminismCheck>(&an)) {
      found = true;
      CHECK(*d == trace::DeterminismCheck{3, 1});
    }
  CHECK(found);
}

TEST_CASE("determinism check: skipped for a launch whose re-runs the checkpoint cannot undo",
          "[recorder][session][determinism]") {
  // Host memory (the checkpoint restores the device's), or a collective's
  // kernel, which would wait for other processes that never run it again.
  Harness h({{"GPURR_KERNELS", "axpy|nccl"}, {"GPURR_CHECK_DETERMINISM", "3"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  h.device->functions[kRead4] = read4Info();
  h.device->functions[kRead4].name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  std::vector<uint8_t> y = randomBytes(4096, 19), pinned = randomBytes(4096, 20);
  h.memAlloc(y);
  {
    void* p = pinned.data();
    cuMemHostAlloc_params params{&p, pinned.size(), CU_MEMHOSTALLOC_DEVICEMAP};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, &params);
  }
  uint64_t py = addr(y.data()), ph = addr(pinned.data()), none = 0;
  float a = 3.0f;
  int n = 7;
  void* hostArgs[] = {&ph, &py, &a, &n};
  void* deviceArgs[] = {&py, &py, &a, &n};
  void* ncclArgs[] = {&py, &none, &none, &none};
  h.launch(kAxpy, hostArgs, 0x7);
  h.launch(kRead4, ncclArgs, 0x7);
  h.launch(kAxpy, deviceArgs, 0x7);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 3);
  CHECK(h.device->reruns.size() == 1);  // the last one only
  auto note = [](const trace::KernelLaunch& k) {
    std::string all;
    for (const auto& an : k.annotations)
      if (const auto* n = std::get_if<trace::Note>(&an)) all += n->text + "\n";
    return all;
  };
  CHECK_THAT(note(launches[0]), Catch::Contains("determinism check skipped: it points into allocation 2 (host memory)"));
  CHECK_THAT(note(launches[1]), Catch::Contains("determinism check skipped: a collective's kernel"));
  CHECK(std::holds_alternative<trace::DeterminismCheck>(launches[2].annotations.back()));
}

TEST_CASE("determinism check: skipped while a graph is being captured, since it synchronises the context",
          "[recorder][session][determinism]") {
  Harness h(std::map<std::string, std::string>{{"GPURR_KERNELS", "axpy"}, {"GPURR_CHECK_DETERMINISM", "3"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> y = randomBytes(4096, 18);
  h.memAlloc(y);
  uint64_t py = addr(y.data());
  float a = 3.0f;
  int n = 7;
  void* args[] = {&py, &py, &a, &n};
  CUstream captureStream = reinterpret_cast<CUstream>(0x9);
  cuStreamBeginCapture_v2_params begin{captureStream, CU_STREAM_CAPTURE_MODE_GLOBAL};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &begin);
  h.launch(kAxpy, args, 0x7);  // on another stream, while the capture is open
  CUgraph graph = nullptr;
  cuStreamEndCapture_params end{captureStream, &graph};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, &end, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  h.launch(kAxpy, args, 0x7);  // the capture is over (invalidated, but over)
  // Another capture, whose end fails otherwise (work not joined back): the
  // stream captures no more all the same.
  h.device->capturing.insert(0x9);
  h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &begin);
  h.device->capturing.erase(0x9);
  h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, &end, CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
  h.launch(kAxpy, args, 0x7);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 3);
  CHECK(h.device->reruns.size() == 2);
  auto has = [](const trace::KernelLaunch& k, auto pred) {
    return std::any_of(k.annotations.begin(), k.annotations.end(), pred);
  };
  CHECK(has(launches[0], [](const trace::Annotation& an) {
    const auto* note = std::get_if<trace::Note>(&an);
    return note != nullptr && note->text.find("graph was being captured") != std::string::npos;
  }));
  CHECK(has(launches[1], [](const trace::Annotation& an) { return std::holds_alternative<trace::DeterminismCheck>(an); }));
}

TEST_CASE("determinism check: without --launches or --kernels it follows the snapshot selection",
          "[recorder][session][determinism]") {
  Harness h({{"GPURR_SNAPSHOT", "1"}, {"GPURR_CHECK_DETERMINISM", "4"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> y = randomBytes(4096, 18);
  h.memAlloc(y);
  uint64_t py = addr(y.data());
  float a = 2.0f;
  int n = 3;
  void* args[] = {&py, &py, &a, &n};
  h.device->rerunKernel = [&](uint32_t run) { y[9] = static_cast<uint8_t>(run); };
  for (int i = 0; i < 3; ++i) h.launch(kAxpy, args, 0x7);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 3);
  REQUIRE(h.device->reruns.size() == 1);
  for (size_t i = 0; i < launches.size(); ++i) {
    std::optional<trace::DeterminismCheck> check;
    for (const auto& an : launches[i].annotations)
      if (auto* d = std::get_if<trace::DeterminismCheck>(&an)) check = *d;
    INFO("launch " << i);
    if (i == 1) {
      REQUIRE(check);
      CHECK(*check == trace::DeterminismCheck{4, 4});
    } else {
      CHECK_FALSE(check);
    }
  }
}

TEST_CASE("determinism check: a checkpoint that cannot be saved warns once and recording goes on",
          "[recorder][session][determinism]") {
  Harness h({{"GPURR_LAUNCHES", "0:2"}, {"GPURR_CHECK_DETERMINISM", "10"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  h.device->failCheckpoint = true;
  std::vector<uint8_t> y = randomBytes(4096, 18);
  h.memAlloc(y);
  uint64_t py = addr(y.data());
  float a = 3.0f;
  int n = 7;
  void* args[] = {&py, &py, &a, &n};
  h.launch(kAxpy, args, 0x7, CUDA_SUCCESS, [&] { y[0] ^= 1; });
  h.launch(kAxpy, args, 0x7, CUDA_SUCCESS, [&] { y[0] ^= 2; });
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  for (const auto& k : launches) {
    CHECK(k.hashed);
    REQUIRE(k.outputs.size() == 1);
    for (const auto& an : k.annotations) CHECK_FALSE(std::holds_alternative<trace::DeterminismCheck>(an));
  }
  CHECK(launches[1].outputs[0].digest == hash::hashBuffer(y));
  REQUIRE(h.warnings.size() == 1);
  CHECK_THAT(h.warnings[0], Catch::Contains("cannot re-run launches to check their determinism"));
  CHECK_THAT(h.warnings[0], Catch::Contains("CUPTI_ERROR_NOT_SUPPORTED"));
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

namespace {
void instantiate(Harness& h, uint64_t graph, uint64_t exec) {
  CUgraphExec out = reinterpret_cast<CUgraphExec>(exec);
  cuGraphInstantiateWithFlags_params p{&out, reinterpret_cast<CUgraph>(graph), 0};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &p);
}
void launchGraph(Harness& h, uint64_t exec) {
  cuGraphLaunch_params p{reinterpret_cast<CUgraphExec>(exec), reinterpret_cast<CUstream>(0x5)};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &p);
}
std::vector<uint32_t> ordinals(const std::vector<trace::RangeDigest>& ranges) {
  std::vector<uint32_t> out;
  for (const auto& r : ranges) out.push_back(r.range.allocation);
  std::sort(out.begin(), out.end());  // ranges come in address order
  return out;
}
}  // namespace

TEST_CASE("a graph launch hashes what its nodes point into, once the graph's nodes are known",
          "[recorder][session][graph]") {
  Harness h;
  h.device->functions[kRead4] = read4Info();
  std::vector<uint8_t> a = randomBytes(4096, 61), b = randomBytes(4096, 62), c = randomBytes(4096, 63),
                       d = randomBytes(4096, 64);
  for (auto* buffer : {&a, &b, &c, &d}) h.memAlloc(*buffer);
  // Graph 0x60: a kernel taking pointers into a (past its start) and b, and
  // a number; a set of d; an event node, counted, touching nothing.
  uint64_t pa = addr(a.data()) + 256, pb = addr(b.data()), number = 7, nothing = 0;
  void* args[] = {&pa, &pb, &number, &nothing};
  Device::GraphNodes nodes;
  nodes.count = 3;
  nodes.kernels.push_back({kRead4, args, nullptr});
  nodes.addresses.push_back(addr(d.data()));
  h.device->graphs[0x60] = nodes;
  instantiate(h, 0x60, 0xE1);
  instantiate(h, 0x61, 0xE2);  // a graph the recorder cannot follow
  launchGraph(h, 0xE1);
  launchGraph(h, 0xE2);
  {
    // A node of 0xE1 changed: from now on it may touch anything.
    cuGraphExecKernelNodeSetParams_v2_params p{reinterpret_cast<CUgraphExec>(0xE1), nullptr, nullptr};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2, &p);
  }
  launchGraph(h, 0xE1);
  {
    // Updated from 0x60 again: known again.
    cuGraphExecUpdate_v2_params p{reinterpret_cast<CUgraphExec>(0xE1), reinterpret_cast<CUgraph>(0x60), nullptr};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2, &p);
  }
  launchGraph(h, 0xE1);
  {
    cuGraphExecDestroy_params p{reinterpret_cast<CUgraphExec>(0xE1)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy, &p);
  }
  launchGraph(h, 0xE1);  // destroyed: the handle may name a graph instantiated unseen

  const auto events = h.finishAndRead();
  const auto graphs = eventsOf<trace::GraphLaunch>(events);
  REQUIRE(graphs.size() == 5);
  // Known: from each pointer to its allocation's end, as a launch's pointers.
  CHECK(graphs[0].nodeCount == 3);
  CHECK(ordinals(graphs[0].outputs) == std::vector<uint32_t>{1, 2, 4});
  const auto inA = std::find_if(graphs[0].outputs.begin(), graphs[0].outputs.end(),
                                [](const trace::RangeDigest& r) { return r.range.allocation == 1; });
  REQUIRE(inA != graphs[0].outputs.end());
  CHECK(inA->range == trace::DeviceRange{pa, 4096 - 256, 1, 256});
  CHECK(ordinals(graphs[0].inputs) == std::vector<uint32_t>{1, 2, 4});  // first uses
  // Unknown, changed, destroyed: every allocation, node count 0.
  for (size_t i : {1, 2, 4}) {
    CHECK(graphs[i].nodeCount == 0);
    CHECK(ordinals(graphs[i].outputs) == std::vector<uint32_t>{1, 2, 3, 4});
  }
  CHECK(graphs[3].nodeCount == 3);
  CHECK(ordinals(graphs[3].outputs) == std::vector<uint32_t>{1, 2, 4});
  std::lock_guard lock(h.warningsMu);
  REQUIRE(h.warnings.size() == 1);
  CHECK_THAT(h.warnings[0], Catch::Contains("a CUDA graph's nodes cannot all be followed (it holds a conditional "
                                            "node): its launches hash every allocation"));
}

TEST_CASE("a graph launch whose nodes touch nothing of the program's hashes nothing and keeps the history",
          "[recorder][session][graph]") {
  Harness h;
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x = randomBytes(8192, 65), y = randomBytes(8192, 66);
  h.memAlloc(x);
  h.memAlloc(y);
  uint64_t px = addr(x.data()), py = addr(y.data());
  float alpha = 1.0f;
  int n = 16;
  void* args[] = {&px, &py, &alpha, &n};
  h.launch(kAxpy, args, 0x5);  // first uses: hashed before
  Device::GraphNodes empty;
  empty.count = 2;  // say, a host node and an event record
  h.device->graphs[0x70] = empty;
  instantiate(h, 0x70, 0xE3);
  const size_t enqueued = h.calls.size();
  launchGraph(h, 0xE3);
  CHECK(h.calls.size() == enqueued);
  h.launch(kAxpy, args, 0x5);
  const auto events = h.finishAndRead();
  const auto graphs = eventsOf<trace::GraphLaunch>(events);
  REQUIRE(graphs.size() == 1);
  CHECK(graphs[0].nodeCount == 2);
  CHECK(graphs[0].outputs.empty());
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(launches.size() == 2);
  CHECK(launches[1].inputs.empty());  // still vouched for by launch 0's digests
}

// Captures are tracked by the recorder's own callbacks of the calls that
// begin and end them (CaptureTracker): while none is open, a launch asks the
// driver nothing about captures; while one may be, every launch asks as
// before, on every stream (a stream joins a capture by waiting on an event
// of a captured one).
namespace {
struct CaptureCase {
  Harness h;
  std::vector<uint8_t> x = randomBytes(1000, 61);
  uint64_t px = 0;
  float a = 1;
  int n = 1;
  void* args[4] = {&px, &px, &a, &n};
  CaptureCase() {
    h.device->functions[kAxpy] = axpyInfo(0);
    h.memAlloc(x);
    px = addr(x.data());
  }
  // The capture queries one launch on `stream` makes.
  int queriesOfLaunch(uint64_t stream) {
    const int before = h.device->captureQueries;
    h.launch(kAxpy, args, stream);
    return h.device->captureQueries - before;
  }
  size_t open() { return h.device->captures().openCount(); }
};

void runtimeBegin(Harness& h, uint64_t stream, cudaError_t result = cudaSuccess,
                  const std::function<void()>& inside = {}) {
  cudaStreamBeginCapture_v10000_params p{reinterpret_cast<cudaStream_t>(stream), cudaStreamCaptureModeGlobal};
  h.runtimeCall(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, &p, result, inside);
}
void runtimeEnd(Harness& h, uint64_t stream, const std::function<void()>& inside = {}) {
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture_v10000_params p{reinterpret_cast<cudaStream_t>(stream), &graph};
  h.runtimeCall(CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, &p, cudaSuccess, inside);
}
}  // namespace

TEST_CASE("capture tracking: no capture open, no capture query", "[recorder][session][capture]") {
  CaptureCase c;
  CHECK(c.queriesOfLaunch(0x5) == 0);
  CHECK(c.queriesOfLaunch(0) == 0);
  const auto launches = eventsOf<trace::KernelLaunch>(c.h.finishAndRead());
  REQUIRE(launches.size() == 2);
  CHECK(launches[1].hashed);
  CHECK_FALSE(launches[1].captured);
}

TEST_CASE("capture tracking: a capture begun and ended through the runtime API only",
          "[recorder][session][capture]") {
  CaptureCase c;
  runtimeBegin(c.h, 0x77, cudaSuccess, [&] { c.h.device->capturing.insert(0x77); });
  CHECK(c.open() == 1);
  CHECK(c.queriesOfLaunch(0x5) == 2);  // ENTER and EXIT, as before
  CHECK(c.queriesOfLaunch(0x77) == 1);  // captured: nothing to hash at EXIT
  runtimeEnd(c.h, 0x77, [&] { c.h.device->capturing.erase(0x77); });
  CHECK(c.open() == 0);
  CHECK(c.queriesOfLaunch(0x5) == 0);
  const auto launches = eventsOf<trace::KernelLaunch>(c.h.finishAndRead());
  REQUIRE(launches.size() == 3);
  CHECK_FALSE(launches[0].captured);
  CHECK(launches[1].captured);
  CHECK(launches[1].captureId == 40 + 0x77);
  CHECK_FALSE(launches[2].captured);
}

TEST_CASE("capture tracking: a capture begun and ended through the driver API only",
          "[recorder][session][capture]") {
  CaptureCase c;
  c.h.beginCapture(0x77);
  CHECK(c.open() == 1);
  CHECK(c.queriesOfLaunch(0x5) == 2);
  CHECK(c.queriesOfLaunch(0x77) == 1);
  c.h.endCapture(0x77);
  CHECK(c.open() == 0);
  CHECK(c.queriesOfLaunch(0x5) == 0);
  const auto launches = eventsOf<trace::KernelLaunch>(c.h.finishAndRead());
  REQUIRE(launches.size() == 3);
  CHECK(launches[1].captured);
}

TEST_CASE("capture tracking: a runtime begin and end that reach the driver's callbacks too count once",
          "[recorder][session][capture]") {
  CaptureCase c;
  runtimeBegin(c.h, 0x77, cudaSuccess, [&] { c.h.beginCapture(0x77); });
  CHECK(c.open() == 1);
  CHECK(c.queriesOfLaunch(0x5) == 2);
  runtimeEnd(c.h, 0x77, [&] { c.h.endCapture(0x77); });
  CHECK(c.open() == 0);
  CHECK(c.queriesOfLaunch(0x5) == 0);
  // A driver begin seen without its runtime call, ended through the runtime.
  c.h.beginCapture(0x78);
  runtimeEnd(c.h, 0x78, [&] { c.h.device->capturing.erase(0x78); });
  CHECK(c.open() == 0);
  c.h.finishAndRead();
}

TEST_CASE("capture tracking: concurrent captures on two streams, ended in either order",
          "[recorder][session][capture]") {
  CaptureCase c;
  c.h.beginCapture(0x77);
  runtimeBegin(c.h, 0x88, cudaSuccess, [&] { c.h.device->capturing.insert(0x88); });
  CHECK(c.open() == 2);
  c.h.endCapture(0x77);
  CHECK(c.open() == 1);
  CHECK(c.queriesOfLaunch(0x5) == 2);  // 0x88 still captures
  CHECK(c.queriesOfLaunch(0x88) == 1);
  runtimeEnd(c.h, 0x88, [&] { c.h.device->capturing.erase(0x88); });
  CHECK(c.open() == 0);
  CHECK(c.queriesOfLaunch(0x5) == 0);
  // The per-thread default stream of two threads: two captures.
  {
    cuStreamBeginCapture_v2_params p{nullptr, CU_STREAM_CAPTURE_MODE_RELAXED};
    c.h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz, &p);
    std::thread other([&] { c.h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz, &p); });
    other.join();
    CHECK(c.open() == 2);
  }
  const auto launches = eventsOf<trace::KernelLaunch>(c.h.finishAndRead());
  REQUIRE(launches.size() == 3);
  CHECK(launches[1].captured);
  CHECK_FALSE(launches[2].captured);
}

TEST_CASE("capture tracking: a begin that fails leaves no capture open, unless its stream captures already",
          "[recorder][session][capture]") {
  CaptureCase c;
  cuStreamBeginCapture_v2_params p{reinterpret_cast<CUstream>(0x77), CU_STREAM_CAPTURE_MODE_GLOBAL};
  c.h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &p, CUDA_ERROR_INVALID_VALUE);
  CHECK(c.open() == 0);
  CHECK(c.queriesOfLaunch(0x5) == 0);
  runtimeBegin(c.h, 0x77, cudaErrorInvalidValue);
  CHECK(c.open() == 0);
  // A second begin on a stream already capturing fails; the first capture
  // is still open.
  c.h.beginCapture(0x77);
  c.h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &p, CUDA_ERROR_ILLEGAL_STATE);
  CHECK(c.open() == 1);
  CHECK(c.queriesOfLaunch(0x5) == 2);
  c.h.endCapture(0x77);
  CHECK(c.open() == 0);
  c.h.finishAndRead();
}

TEST_CASE("capture tracking: a begin whose result the recorder cannot see counts as open until its stream says",
          "[recorder][session][capture]") {
  CaptureCase c;
  cuStreamBeginCapture_v2_params p{reinterpret_cast<CUstream>(0x77), CU_STREAM_CAPTURE_MODE_GLOBAL};
  uint64_t correlation = 0;
  CUpti_CallbackData cb{};
  cb.functionName = "cuStreamBeginCapture_v2";
  cb.functionParams = &p;
  cb.functionReturnValue = nullptr;  // no result to read
  cb.context = c.h.ctx;
  cb.correlationData = &correlation;
  cb.callbackSite = CUPTI_API_ENTER;
  c.h.session->onCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &cb);
  CHECK(c.open() == 1);  // open from the begin's ENTER
  c.h.device->capturing.insert(0x77);
  cb.callbackSite = CUPTI_API_EXIT;
  c.h.session->onCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &cb);
  CHECK(c.open() == 1);  // the driver says the stream captures
  CHECK(c.queriesOfLaunch(0x77) == 1);
  c.h.endCapture(0x77);
  CHECK(c.open() == 0);
  const auto launches = eventsOf<trace::KernelLaunch>(c.h.finishAndRead());
  REQUIRE(launches.size() == 1);
  CHECK(launches[0].captured);
}

TEST_CASE("a collective is an operation: the send buffer hashed before it, the receive buffer after", "[recorder][collective]") {
  Harness h;
  std::vector<uint8_t> send = randomBytes(4096, 7), recv = randomBytes(4096, 8);
  h.memAlloc(send);
  h.memAlloc(recv);
  const uint8_t uniqueId[128] = {1, 2, 3};
  const uint64_t id = communicatorIdFromUniqueId(uniqueId);
  CHECK(id == communicatorIdFromUniqueId(uniqueId));  // every rank gets the same id
  CollectiveRecorder& c = h.session->collectives();
  c.communicatorCreated(0x77, id, 1, 2);

  auto call = [&](const char* name, trace::CollectiveOp op, uint64_t sendBytes, uint64_t recvBytes) {
    CollectiveCall k;
    k.event.call = name;
    k.event.op = op;
    k.event.dataType = "float32";
    k.event.count = 1024;
    k.event.stream = 0x5;
    k.comm = 0x77;
    if (sendBytes) k.send = addr(send.data()), k.sendBytes = sendBytes;
    if (recvBytes) k.recv = addr(recv.data()), k.recvBytes = recvBytes;
    return k;
  };
  const std::vector<uint8_t> sendBefore = send;
  auto p = c.before(call("ncclAllReduce", trace::CollectiveOp::kAllReduce, 4096, 4096));
  send[0] ^= 1;  // NCCL may reuse the send buffer once it ran; the digest is of before
  recv[5] ^= 0xff;  // what the collective wrote
  const std::vector<uint8_t> recvAfter = recv;
  c.after(std::move(p), true);
  // A call that failed is not recorded.
  c.after(c.before(call("ncclAllReduce", trace::CollectiveOp::kAllReduce, 4096, 4096)), false);

  // A group: the receive buffers are hashed after the group's end.
  c.groupStart();
  c.after(c.before(call("ncclSend", trace::CollectiveOp::kSend, 4096, 0)), true);
  c.after(c.before(call("ncclRecv", trace::CollectiveOp::kRecv, 0, 4096)), true);
  recv[9] ^= 0xff;  // the group's work runs at its end
  const std::vector<uint8_t> recvAfterGroup = recv;
  c.groupEnd(true);
  // Another communicator at the same time: numbered on its own.
  c.communicatorCreated(0x88, id + 1, 0, 4);
  CollectiveCall other = call("ncclBroadcast", trace::CollectiveOp::kBroadcast, 4096, 4096);
  other.comm = 0x88;
  c.after(c.before(std::move(other)), true);

  const auto collectives = eventsOf<trace::Collective>(h.finishAndRead());
  REQUIRE(collectives.size() == 4);
  CHECK(collectives[3].communicator == id + 1);
  CHECK(collectives[3].sequence == 0);
  CHECK(collectives[3].size == 4);
  const trace::Collective& a = collectives[0];
  CHECK(a.call == "ncclAllReduce");
  CHECK(a.communicator == id);
  CHECK(a.rank == 1);
  CHECK(a.size == 2);
  CHECK(a.sequence == 0);
  CHECK(a.group == 0);
  CHECK(a.stream == 0x5);
  REQUIRE(a.inputs.size() == 1);
  CHECK(a.inputs[0].digest == hash::hashBuffer(sendBefore));
  CHECK(a.inputs[0].range.allocation == 1);
  REQUIRE(a.outputs.size() == 1);
  CHECK(a.outputs[0].digest == hash::hashBuffer(recvAfter));
  CHECK(a.outputs[0].range.allocation == 2);

  const trace::Collective& s = collectives[1];
  CHECK(s.op == trace::CollectiveOp::kSend);
  CHECK(s.sequence == 2);  // the failed call took number 1
  CHECK(s.group == 1);
  CHECK(s.outputs.empty());
  const trace::Collective& r = collectives[2];
  CHECK(r.op == trace::CollectiveOp::kRecv);
  CHECK(r.group == 1);
  CHECK(r.inputs.empty());
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0].digest == hash::hashBuffer(recvAfterGroup));
}

TEST_CASE("a collective carries the c10d op, line and step it ran in, and no phase outside a backward node",
          "[recorder][collective]") {
  framework::resetForTesting();
  Harness h;
  std::vector<uint8_t> buffer = randomBytes(4096, 9);
  h.memAlloc(buffer);
  CollectiveRecorder& c = h.session->collectives();
  c.communicatorCreated(0x77, 42, 0, 2);
  auto allReduce = [&] {
    CollectiveCall k;
    k.event.call = "ncclAllReduce";
    k.event.op = trace::CollectiveOp::kAllReduce;
    k.event.count = 1024;
    k.comm = 0x77;
    k.send = k.recv = addr(buffer.data());
    k.sendBytes = k.recvBytes = buffer.size();
    c.after(c.before(std::move(k)), true);
  };
  static int op;
  framework::setStep(3);
  framework::openScope(&op, "c10d::allreduce_", framework::ScopeKind::kOp, 7, 1, "/w/train.py", 12);
  allReduce();
  framework::closeScope(&op);
  framework::setStep(4);
  allReduce();
  const auto events = h.finishAndRead();
  framework::resetForTesting();
  std::vector<trace::Event> collectives;
  for (const trace::Event& e : events) {
    if (std::holds_alternative<trace::Collective>(e.payload)) collectives.push_back(e);
  }
  REQUIRE(collectives.size() == 2);
  REQUIRE(collectives[0].origin);
  CHECK(collectives[0].origin->op == "c10d::allreduce_");
  CHECK(collectives[0].origin->file == "/w/train.py");
  CHECK(collectives[0].origin->line == 12);
  CHECK(collectives[0].origin->step == 3);
  // Inside an op but no backward node: no phase claimed (autograd's hooks,
  // where DDP issues its all-reduces, run outside every node's scope).
  CHECK(collectives[0].origin->phase == trace::Phase::kUnknown);
  REQUIRE(collectives[1].origin);
  CHECK(collectives[1].origin->op.empty());
  CHECK(collectives[1].origin->step == 4);
}

TEST_CASE("a framework's collective of device tensors: sent hashed on its stream before the call, received after",
          "[recorder][collective]") {
  Harness h;
  std::vector<uint8_t> bucket = randomBytes(4096, 11), gathered = randomBytes(8192, 12);
  h.memAlloc(bucket);
  h.memAlloc(gathered);
  CollectiveRecorder& c = h.session->collectives();
  auto event = [](const char* call, trace::CollectiveOp op) {
    trace::Collective e;
    e.source = trace::CollectiveSource::kFramework;
    e.call = call;
    e.op = op;
    e.communicator = 99;
    return e;
  };
  // An asynchronous all-reduce in place: what it sends hashed now; what it
  // receives listed by the layer without a digest.
  const std::vector<uint8_t> sent = bucket;
  const std::pair<uint64_t, uint64_t> bucketRange{addr(bucket.data()), bucket.size()};
  const uint64_t handle = c.hashFrameworkTensors(0x5, std::span(&bucketRange, 1));
  REQUIRE(handle != 0);
  bucket[3] ^= 0xff;  // the backend writes the sum later
  trace::Collective reduce = event("c10d::allreduce_", trace::CollectiveOp::kAllReduce);
  trace::RangeDigest host, received;
  host.range = {0x1000, 64, 0, 0};  // a host tensor, hashed by the layer
  host.digest = 0x1234;
  received.range = {addr(bucket.data()), bucket.size(), 0, 0};
  reduce.inputs.push_back(host);
  reduce.outputs.push_back(received);
  c.frameworkCollective(reduce, "/w/train.py", 7, handle, 0);
  // A synchronous all-gather: what it received hashed after the call.
  const std::pair<uint64_t, uint64_t> gatheredRange{addr(gathered.data()), gathered.size()};
  const uint64_t before = c.hashFrameworkTensors(0x6, std::span(&bucketRange, 1));
  gathered[100] ^= 0xff;
  const uint64_t after = c.hashFrameworkTensors(0x6, std::span(&gatheredRange, 1));
  c.frameworkCollective(event("all_gather", trace::CollectiveOp::kAllGather), nullptr, 0, before, after);
  // A handle no call took, and memory the recorder does not know: nothing.
  c.dropFrameworkHashes(c.hashFrameworkTensors(0x5, std::span(&bucketRange, 1)));
  const std::pair<uint64_t, uint64_t> unknown{0xdead0000, 64};
  CHECK(c.hashFrameworkTensors(0x5, std::span(&unknown, 1)) == 0);

  const auto collectives = eventsOf<trace::Collective>(h.finishAndRead());
  REQUIRE(collectives.size() == 2);
  const trace::Collective& a = collectives[0];
  CHECK(a.stream == 0x5);
  REQUIRE(a.inputs.size() == 2);
  CHECK(a.inputs[0].digest == 0x1234);
  CHECK(a.inputs[1].digest == hash::hashBuffer(sent));
  CHECK(a.inputs[1].range.allocation != 0);
  CHECK(a.inputs[0].range.allocation == 0);  // host memory
  REQUIRE(a.outputs.size() == 1);
  CHECK(a.outputs[0].digest == 0);
  CHECK(a.outputs[0].range.allocation == a.inputs[1].range.allocation);  // listed by address, resolved
  const trace::Collective& g = collectives[1];
  CHECK(g.stream == 0x6);
  REQUIRE(g.inputs.size() == 1);
  CHECK(g.inputs[0].digest == hash::hashBuffer(bucket));
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.outputs[0].digest == hash::hashBuffer(gathered));
  CHECK(g.sequence == 1);
}

TEST_CASE("a split communicator's id depends on its parent, color and split only", "[recorder][collective]") {
  const uint64_t parent = 0x1234;
  CHECK(communicatorIdFromSplit(parent, 0, 1) == communicatorIdFromSplit(parent, 0, 1));
  CHECK(communicatorIdFromSplit(parent, 0, 1) != communicatorIdFromSplit(parent, 1, 1));
  CHECK(communicatorIdFromSplit(parent, 0, 1) != communicatorIdFromSplit(parent, 0, 2));
  CHECK(communicatorIdFromSplit(parent, 0, 1) != communicatorIdFromSplit(parent + 1, 0, 1));
  CHECK(communicatorIdFromSplit(parent, 0, 1) != 0);
}

// Deferred output hashes (hash_deferral.h): the fake device hashes host
// memory when a hash is enqueued, so a digest taken too late shows the
// bytes of whatever wrote the range since.
namespace {

// A launch of axpy(out, in) on `stream` inside an op that reads `in` and
// makes `out` (`given` false: a new tensor, not hashed before the launch) or
// writes the `out` it is given (both blocks of the framework's allocator);
// `kernel` is what the launch writes.
void opLaunch(Harness& h, uint64_t stream, uint64_t out, uint64_t in, const std::function<void()>& kernel,
              bool given = false) {
  float a = 1.0f;
  int n = 16;
  void* args[] = {&out, &in, &a, &n};
  const int op = 0;
  framework::openScope(&op, "aten::add", framework::ScopeKind::kOp, -1, 0, nullptr, 0);
  std::vector<framework::Operand> operands{{in, false}};
  if (given) operands.push_back({out, true});
  framework::opOperands(&op, operands);
  h.launch(kAxpy, args, stream, CUDA_SUCCESS, kernel);
  framework::closeScope(&op);
}

// Buffers allocated through the session, each a block of the framework's allocator.
std::vector<std::vector<uint8_t>> blocks(Harness& h, size_t count, uint64_t seed) {
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < count; ++i) {
    out.push_back(randomBytes(4096, seed + i));
    h.memAlloc(out.back());
    framework::blockEvent(addr(out.back().data()), out.back().size(), true);
  }
  return out;
}

uint64_t digestOf(const std::vector<uint8_t>& bytes) { return hash::hashBuffer({bytes.data(), bytes.size()}); }

// The digest of the single output of a launch.
uint64_t outputDigest(const trace::KernelLaunch& k) {
  REQUIRE(k.outputs.size() == 1);
  return k.outputs[0].digest;
}

// A chain of `count` launches, each writing buffer i from buffer i - 1; the
// output digests, then those of the inputs hashed at their first use, and
// how many hash calls there were.
std::pair<std::vector<uint64_t>, size_t> recordChain(bool defer, size_t count) {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = defer;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, count + 1, 300);
  for (size_t i = 1; i <= count; ++i) {
    uint64_t out = addr(bufs[i].data()), in = addr(bufs[i - 1].data());
    opLaunch(h, 0x5, out, in, [&] {
      for (size_t b = 0; b < bufs[i].size(); ++b) bufs[i][b] = static_cast<uint8_t>(bufs[i - 1][b] + i);
    });
  }
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  std::vector<uint64_t> digests;
  for (const auto& k : launches) digests.push_back(outputDigest(k));
  for (const auto& k : launches) {
    for (const auto& r : k.inputs) digests.push_back(r.digest);
  }
  framework::resetForTesting();
  return {digests, h.calls.size()};
}

}  // namespace

TEST_CASE("deferred hashes: a dependent chain is hashed in merged batches, with the digests it had without",
          "[recorder][session][deferral]") {
  const auto [plain, plainCalls] = recordChain(false, 20);
  const auto [merged, mergedCalls] = recordChain(true, 20);
  REQUIRE(plain.size() == 21);  // 20 outputs, and buffer 0 at its first use
  CHECK(merged == plain);
  // Without deferral: the first use of buffer 0, then each launch's output,
  // 21 calls. With it: a batch every HashDeferral::kMaxLaunches launches
  // and the rest at the close (3), the first use of buffer 0 in the first
  // (launch 0 only reads it); the trace thread, when it waits for a batch
  // for long, may ask for one more.
  CHECK(plainCalls == 21);
  CHECK(mergedCalls >= 3);
  CHECK(mergedCalls <= 7);
}

TEST_CASE("deferred hashes: an input only read at its first use waits in the batch until a launch may write it",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 3, 700);
  const uint64_t x = addr(bufs[0].data()), y = addr(bufs[1].data()), z = addr(bufs[2].data());
  const std::vector<uint8_t> xBefore = bufs[0];
  const size_t callsBefore = h.calls.size();
  // Launch 0 reads x at its first use and makes y: nothing is enqueued.
  opLaunch(h, 0x5, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 5); });
  CHECK(h.calls.size() == callsBefore);
  // Launch 1 writes x (the op is given it to write): x's digest of before
  // launch 1, and y's, are enqueued before it; z, read at its first use,
  // waits.
  opLaunch(h, 0x5, x, z, [&] { std::fill(bufs[0].begin(), bufs[0].end(), 6); }, true);
  CHECK(h.calls.size() == callsBefore + 1);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  REQUIRE(launches[0].inputs.size() == 1);
  CHECK(launches[0].inputs[0].digest == digestOf(xBefore));
  REQUIRE(launches[1].inputs.size() == 1);
  CHECK(launches[1].inputs[0].digest == digestOf(bufs[2]));
  CHECK(outputDigest(launches[1]) == digestOf(bufs[0]));
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: a launch that writes a held-back range in place has it hashed first",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 2, 400);
  uint64_t y = addr(bufs[1].data()), x = addr(bufs[0].data());
  opLaunch(h, 0x5, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 1); });
  const std::vector<uint8_t> left = bufs[1];  // what launch 0 left
  const size_t callsBefore = h.calls.size();
  // Launch 1 updates y in place (the op writes it).
  opLaunch(h, 0x5, y, y, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 2); }, true);
  CHECK(h.calls.size() == callsBefore + 1);  // launch 0's output, enqueued before launch 1
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  CHECK(outputDigest(launches[0]) == digestOf(left));
  CHECK(outputDigest(launches[1]) == digestOf(bufs[1]));
  CHECK(outputDigest(launches[0]) != outputDigest(launches[1]));
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: an event record hashes what its stream holds back before another stream can wait on it",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 3, 500);
  uint64_t y = addr(bufs[1].data()), x = addr(bufs[0].data()), z = addr(bufs[2].data());
  opLaunch(h, 0xA, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 3); });
  const std::vector<uint8_t> left = bufs[1];
  const size_t callsBefore = h.calls.size();
  cuEventRecord_params record{reinterpret_cast<CUevent>(0xE1), reinterpret_cast<CUstream>(0xA)};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuEventRecord, &record);
  REQUIRE(h.calls.size() == callsBefore + 1);
  CHECK(h.calls.back().stream == 0xA);  // on the stream, before the event
  cuStreamWaitEvent_params wait{reinterpret_cast<CUstream>(0xB), reinterpret_cast<CUevent>(0xE1), 0};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent, &wait);
  // Stream B, ordered after the event, overwrites y from z.
  opLaunch(h, 0xB, y, z, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 4); }, true);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  CHECK(outputDigest(launches[0]) == digestOf(left));
  CHECK(outputDigest(launches[1]) == digestOf(bufs[1]));
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: another stream's launch that writes a held-back range has it hashed first",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 3, 550);
  uint64_t y = addr(bufs[1].data()), x = addr(bufs[0].data()), z = addr(bufs[2].data());
  opLaunch(h, 0xA, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 5); });
  const std::vector<uint8_t> left = bufs[1];
  opLaunch(h, 0xB, y, z, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 6); }, true);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  CHECK(outputDigest(launches[0]) == digestOf(left));
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: synchronisations, frees and capture begins hash what is held back first",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 2, 600);
  uint64_t y = addr(bufs[1].data()), x = addr(bufs[0].data());
  std::vector<std::vector<uint8_t>> left;
  // After each, what the launch wrote changes without a recorded launch (a
  // later program's write the call made safe): the digest is the launch's.
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"stream synchronize",
       [&] {
         cuStreamSynchronize_params p{reinterpret_cast<CUstream>(0x5)};
         h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, &p);
       }},
      {"context synchronize", [&] { h.call(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, nullptr); }},
      {"capture begin", [&] { h.beginCapture(0x5); }},
  };
  uint8_t value = 10;
  for (const auto& [name, makeCall] : calls) {
    INFO(name);
    opLaunch(h, 0x5, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), value); });
    left.push_back(bufs[1]);
    const size_t callsBefore = h.calls.size();
    makeCall();
    CHECK(h.calls.size() == callsBefore + 1);
    std::fill(bufs[1].begin(), bufs[1].end(), ++value);
    ++value;
  }
  // Inside the capture nothing is held back: a launch on another stream is
  // hashed at its EXIT.
  {
    opLaunch(h, 0x7, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 40); });
    left.push_back(bufs[1]);
    REQUIRE_FALSE(h.calls.empty());
    CHECK(h.calls.back().requests.at(0).address == y);
    h.endCapture(0x5);
  }
  // A free of the range's allocation.
  opLaunch(h, 0x5, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 50); });
  left.push_back(bufs[1]);
  cuMemFree_v2_params f{y};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &f);
  std::fill(bufs[1].begin(), bufs[1].end(), 51);  // the memory's next owner
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == left.size());
  for (size_t i = 0; i < left.size(); ++i) {
    INFO("launch " << i);
    CHECK(outputDigest(launches[i]) == digestOf(left[i]));
  }
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: managed memory is hashed at once, so a host write after a sync does not reach the digest",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 1, 700);
  std::vector<uint8_t> m = randomBytes(4096, 701);
  CUdeviceptr pm = addr(m.data());
  const uint64_t x = addr(bufs[0].data());
  cuMemAllocManaged_params alloc{&pm, m.size(), CU_MEM_ATTACH_GLOBAL};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, &alloc);
  framework::blockEvent(pm, m.size(), true);
  opLaunch(h, 0x5, pm, x, [&] { std::fill(m.begin(), m.end(), 7); });
  REQUIRE_FALSE(h.calls.empty());
  CHECK(h.calls.back().requests.at(0).address == pm);  // at the launch's EXIT
  const std::vector<uint8_t> left = m;
  cuStreamSynchronize_params p{reinterpret_cast<CUstream>(0x5)};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, &p);
  std::fill(m.begin(), m.end(), 8);  // the host writes it
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 1);
  CHECK(outputDigest(launches[0]) == digestOf(left));
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: a batch that cannot be enqueued leaves each of its launches unhashed, with a note",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 3, 800);
  uint64_t x = addr(bufs[0].data()), y = addr(bufs[1].data()), z = addr(bufs[2].data());
  opLaunch(h, 0x5, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 1); });
  opLaunch(h, 0x5, z, x, [&] { std::fill(bufs[2].begin(), bufs[2].end(), 2); });
  h.device->refuseHashes = 1;  // the faulted context refuses the next hash
  h.call(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, nullptr);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    INFO("launch " << i);
    CHECK_FALSE(launches[i].hashed);
    CHECK(launches[i].outputs.empty());
    CHECK(std::any_of(launches[i].annotations.begin(), launches[i].annotations.end(), [](const trace::Annotation& a) {
      const auto* n = std::get_if<trace::Note>(&a);
      return n != nullptr && n->text == "not hashed: refused";
    }));
  }
  framework::resetForTesting();
}
