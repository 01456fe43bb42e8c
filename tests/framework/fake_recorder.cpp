// libgpurr_fake_recorder.so: the recorder as `gpurr record` injects it, with
// a device that needs no GPU, so a real PyTorch CPU program can be recorded
// through the framework layer. It exports what libgpurr_recorder.so exports
// for the framework layer, and gpurr_test_launch(kernel): one kernel launch,
// made through the same RecordSession callbacks a real launch takes, on the
// calling thread (so it carries that thread's framework origin);
// gpurr_test_launch_with(kernel, words, count) gives it the first kWords
// of `words` as its parameters (the op's tensors' addresses: every kernel's
// parameters are kWords 8-byte words, those not given 0), on the legacy
// stream; a thread that never ran Python (a backend's worker) launches
// nothing (launchingThread). With
// GPURR_TEST_OPERANDS_LOG set, each launch also appends to that file the
// operands the framework layer reported for the op it runs in:
// "KERNEL ADDRESS:r|w ...", or "KERNEL unknown". Its session starts when it
// is loaded, so that the framework layer's collectives reach it; that of a
// run held by `gpurr record --start-gate` at its first launch, where it
// waits for its gate, as the recorder waits in the program's first CUDA
// call.
//
// With GPURR_TEST_HASH set, the device hashes host memory, as a GPU's
// hasher hashes device memory: what the CPU allocator hands out is device
// memory (gpurr_test_allocated, gpurr_test_freed) and kernels take
// kHashedWords words. The launcher makes such launches as their ops end,
// so that their outputs exist: a before-hash (--hash-inputs) of what an op
// wrote in place reads what it left.
#include <cupti.h>
#include <dlfcn.h>
#include <sys/uio.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "recorder/framework_context.h"
#include "recorder/options.h"
#include "recorder/session.h"
#include "recorder/signal_flush.h"
#include "recorder/warn.h"
#include "trace_format/hash.h"
#include "trace_format/trace.h"

namespace {
using namespace gpurr::recorder;

constexpr size_t kWords = 4;
constexpr size_t kHashedWords = 16;
const bool hashing = std::getenv("GPURR_TEST_HASH") != nullptr;
size_t wordsPerKernel() { return hashing ? kHashedWords : kWords; }

// The digest of `length` bytes at `address` of this process, read with
// process_vm_readv so that memory freed since reads as what could be read
// (the rest as zeros) instead of faulting.
uint64_t digestOfHost(uint64_t address, uint64_t length) {
  std::vector<uint8_t> bytes(length);
  iovec local{bytes.data(), length};
  iovec remote{reinterpret_cast<void*>(address), length};
  (void)process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  return gpurr::hash::hashBuffer(bytes);
}

class Ready : public PendingHashes {
 public:
  explicit Ready(std::vector<gpurr::kernels::HashResult> r) : r_(std::move(r)) {}
  bool wait(std::vector<gpurr::kernels::HashResult>& out, std::string&) override {
    out = std::move(r_);
    return true;
  }

 private:
  std::vector<gpurr::kernels::HashResult> r_;
};

class CpuDevice : public Device {
 public:
  std::mutex mu;
  std::unordered_map<uint64_t, std::string> names;
  bool describeFunction(uint64_t f, FunctionInfo& out) override {
    std::lock_guard lock(mu);
    auto it = names.find(f);
    if (it == names.end()) return false;
    out = FunctionInfo{};
    out.name = it->second;
    for (uint32_t i = 0; i < wordsPerKernel(); ++i) out.layout.push_back({i * 8, 8});
    out.layoutKnown = true;
    return true;
  }
  StreamCapture captureState(uint64_t) override { return {std::nullopt, true}; }
  std::unique_ptr<PendingHashes> hash(uint64_t, uint64_t, std::span<const gpurr::kernels::HashRequest> requests, bool,
                                      std::string& error) override {
    if (!hashing) {
      error = "no device";
      return nullptr;
    }
    std::vector<gpurr::kernels::HashResult> out;
    for (const auto& q : requests) out.push_back({digestOfHost(q.address, q.length), {}});
    return std::make_unique<Ready>(std::move(out));
  }
  void describeSystem(gpurr::trace::Header&) override {}
  void contextDestroying(uint64_t) override {}
};

std::mutex sessionMu;
RecordSession* session = nullptr;
pid_t sessionPid = 0;  // the process that made it
CpuDevice* device = nullptr;

void finish() {
  session->finish();
  endIfSignalled();
}

RecordSession* theSession() {
  std::lock_guard lock(sessionMu);
  if (session != nullptr) return session;
  std::vector<std::string> problems;
  RecorderOptions options = awaitOptions(std::getenv, problems);  // a held run waits here
  for (const std::string& p : problems) warnToStderr(p);  // as the recorder's injection does
  if (!options.output) return nullptr;
  auto dev = std::make_unique<CpuDevice>();
  device = dev.get();
  sessionPid = getpid();
  session = new RecordSession(
      options, std::move(dev),
      [options](const gpurr::trace::Header& h) { return openTrace(options, h, warnToStderr); },
      warnToStderr);
  std::atexit(finish);
  // A forked child (a DataLoader worker) gives the session up, as the
  // recorder's injection does: its threads stayed in the parent.
  pthread_atfork(nullptr, nullptr, [] { session->abandonInForkedChild(); });
  framework::setFinishRecording(finish);  // the same, earlier, when the layer ends the program itself
  framework::setFlushRecording([] { session->flush(); });  // the program ends on Ctrl-C
  setActiveCollectives(&session->collectives());
  return session;
}

// A run held by `gpurr record --start-gate` starts its session at its first
// launch instead, as the recorder starts in the program's first CUDA call.
__attribute__((constructor)) void startSession() {
  if (std::getenv("GPURR_START_GATE") == nullptr) theSession();
}

}  // namespace

// Whether this thread ran Python (or the program is no Python program).
// A thread that never did is a backend's worker (gloo's): its ops move a
// collective's data on the host, which a GPU's program does not launch
// (for CUDA tensors, gloo's copies are the program's memcpys): it launches
// nothing here, and the collective's own event carries the digests.
bool launchingThread() {
  using GetState = void* (*)();
  static const auto state = reinterpret_cast<GetState>(dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState"));
  thread_local const bool python = state == nullptr || state() != nullptr;
  return python;
}

extern "C" __attribute__((visibility("default"))) void gpurr_test_launch_with(const char* kernel,
                                                                             const uint64_t* words,
                                                                             uint32_t count) {
  RecordSession* s = theSession();
  if (s == nullptr || !launchingThread()) return;
  // Or by a signal, or the program's own _exit: from the first launch on, as
  // the recorder takes signals from the program's first CUDA call on (after
  // Python's own handlers).
  flushOnEndingSignals([] { session->flush(); }, std::chrono::seconds(5), finish);
  const uint64_t function = 0x1000 + std::hash<std::string>()(kernel) % 0xffff * 16;
  {
    std::lock_guard lock(device->mu);
    device->names[function] = kernel;
  }
  cuLaunchKernel_params p{};
  p.f = reinterpret_cast<CUfunction>(function);
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  uint64_t given[kHashedWords] = {};
  for (size_t i = 0; i < wordsPerKernel() && i < count; ++i) given[i] = words[i];
  void* params[kHashedWords];
  for (size_t i = 0; i < kHashedWords; ++i) params[i] = &given[i];
  p.kernelParams = params;
  if (const char* log = std::getenv("GPURR_TEST_OPERANDS_LOG")) {
    std::string line = kernel;
    if (const auto operands = framework::innermostOpOperands()) {
      for (const framework::Operand& o : *operands)
        line += " " + std::to_string(o.address) + (o.written ? ":w" : ":r");
    } else {
      line += " unknown";
    }
    std::lock_guard lock(device->mu);
    std::ofstream(log, std::ios::app) << line << "\n";
  }
  uint64_t correlation = 0;
  CUresult ret = CUDA_SUCCESS;
  CUpti_CallbackData cb{};
  cb.functionName = "cuLaunchKernel";
  cb.functionParams = &p;
  cb.functionReturnValue = &ret;
  cb.symbolName = kernel;
  cb.context = reinterpret_cast<CUcontext>(0xC0);
  cb.correlationData = &correlation;
  cb.callbackSite = CUPTI_API_ENTER;
  s->onCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb);
  cb.callbackSite = CUPTI_API_EXIT;
  s->onCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb);
}

// GPURR_TEST_HASH: memory the program's CPU allocator handed out (`length`
// bytes at `address`) and took back, as device memory: cuMemAlloc's and
// cuMemFree's callbacks.
void memoryCall(CUpti_CallbackId id, const char* name, void* params) {
  RecordSession* s = theSession();
  // A forked process (a DataLoader worker) records nothing: its session is
  // the parent's, without its threads.
  if (s == nullptr || getpid() != sessionPid) return;
  CUresult ret = CUDA_SUCCESS;
  uint64_t correlation = 0;
  CUpti_CallbackData cb{};
  cb.functionName = name;
  cb.functionParams = params;
  cb.functionReturnValue = &ret;
  cb.context = reinterpret_cast<CUcontext>(0xC0);
  cb.correlationData = &correlation;
  cb.callbackSite = CUPTI_API_EXIT;
  s->onCallback(CUPTI_CB_DOMAIN_DRIVER_API, id, &cb);
}

extern "C" __attribute__((visibility("default"))) void gpurr_test_allocated(uint64_t address, uint64_t length) {
  CUdeviceptr dptr = address;
  cuMemAlloc_v2_params p{&dptr, length};
  memoryCall(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2", &p);
}

extern "C" __attribute__((visibility("default"))) void gpurr_test_freed(uint64_t address) {
  cuMemFree_v2_params p{static_cast<CUdeviceptr>(address)};
  memoryCall(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2", &p);
}

extern "C" __attribute__((visibility("default"))) void gpurr_test_launch(const char* kernel) {
  gpurr_test_launch_with(kernel, nullptr, 0);
}
