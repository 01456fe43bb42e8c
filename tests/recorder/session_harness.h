// The session tests' harness: RecordSession driven with hand-made CUPTI
// callback data, as the driver would deliver it, against a fake device whose
// "device memory" is host memory. The trace is written for real and read
// back with TraceReader.
#pragma once

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

namespace gpurr::recorder::session_testing {


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
  std::vector<size_t> awaited;  // the hash calls made before each awaitHashesInFlight
  bool awaitHashesInFlight(std::string&) override {
    awaited.push_back(calls->size());
    return true;
  }
  std::set<uint64_t> nonBlocking;  // streams made with CU_STREAM_NON_BLOCKING
  bool blockingStream(uint64_t stream) override { return !nonBlocking.contains(stream); }
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

inline std::vector<uint8_t> randomBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

inline uint64_t addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

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
  // callbacks when the runtime launches through the driver), returning
  // `result`. The ENTER's context is `ctx` as it is then; `inside` may bind
  // one (the runtime's first call on a thread).
  void runtimeLaunch(uint64_t stub, void** args, const std::function<void()>& inside = {},
                     CUpti_CallbackId cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                     cudaError_t result = cudaSuccess) {
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
    ret = result;
    cb.context = ctx;
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

inline constexpr uint64_t kAxpy = 0xF00;
inline FunctionInfo axpyInfo(uint64_t module) {
  return {"_Z4axpyPfS_fi", module, {{0, 8}, {8, 8}, {16, 4}, {20, 4}}, true};
}

// read4(a, b, c, d): four pointers.
inline constexpr uint64_t kRead4 = 0xF10;
inline FunctionInfo read4Info() { return {"_Z5read4PfS_S_S_", 0, {{0, 8}, {8, 8}, {16, 8}, {24, 8}}, true}; }

}  // namespace gpurr::recorder::session_testing
