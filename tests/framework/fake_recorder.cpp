// libgpurr_fake_recorder.so: the recorder as `gpurr record` injects it, with
// a device that needs no GPU, so a real PyTorch CPU program can be recorded
// through the framework layer. It exports what libgpurr_recorder.so exports
// for the framework layer, and gpurr_test_launch(kernel): one kernel launch,
// made through the same RecordSession callbacks a real launch takes, on the
// calling thread (so it carries that thread's framework origin);
// gpurr_test_launch_with(kernel, words, count) gives it the first kWords
// of `words` as its parameters (the op's tensors' addresses: every kernel's
// parameters are kWords 8-byte words, those not given 0). With
// GPURR_TEST_OPERANDS_LOG set, each launch also appends to that file the
// operands the framework layer reported for the op it runs in:
// "KERNEL ADDRESS:r|w ...", or "KERNEL unknown". Its session starts when it
// is loaded, so that the framework layer's collectives reach it; that of a
// run held by `gpurr record --start-gate` at its first launch, where it
// waits for its gate, as the recorder waits in the program's first CUDA
// call.
#include <cupti.h>

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
#include "trace_format/trace.h"

namespace {
using namespace gpurr::recorder;

constexpr size_t kWords = 4;

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
    for (uint32_t i = 0; i < kWords; ++i) out.layout.push_back({i * 8, 8});
    out.layoutKnown = true;
    return true;
  }
  StreamCapture captureState(uint64_t) override { return {std::nullopt, true}; }
  std::unique_ptr<PendingHashes> hash(uint64_t, uint64_t, std::span<const gpurr::kernels::HashRequest>, bool,
                                      std::string& error) override {
    error = "no device";
    return nullptr;
  }
  void describeSystem(gpurr::trace::Header&) override {}
  void contextDestroying(uint64_t) override {}
};

std::mutex sessionMu;
RecordSession* session = nullptr;
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
  if (!options.output) return nullptr;
  auto dev = std::make_unique<CpuDevice>();
  device = dev.get();
  session = new RecordSession(
      options, std::move(dev),
      [options](const gpurr::trace::Header& h) -> std::unique_ptr<TraceSink> {
        std::string error;
        auto dir = claimTraceDirectory(*options.output, options.rankName, error);
        if (!dir) return nullptr;
        return std::make_unique<TraceSink>(std::make_unique<gpurr::trace::TraceWriter>(*dir, h), warnToStderr,
                                           sinkOptions(options));
      },
      warnToStderr);
  std::atexit(finish);
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

extern "C" __attribute__((visibility("default"))) void gpurr_test_launch_with(const char* kernel,
                                                                             const uint64_t* words,
                                                                             uint32_t count) {
  RecordSession* s = theSession();
  if (s == nullptr) return;
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
  uint64_t given[kWords] = {};
  for (size_t i = 0; i < kWords && i < count; ++i) given[i] = words[i];
  void* params[kWords];
  for (size_t i = 0; i < kWords; ++i) params[i] = &given[i];
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

extern "C" __attribute__((visibility("default"))) void gpurr_test_launch(const char* kernel) {
  gpurr_test_launch_with(kernel, nullptr, 0);
}
