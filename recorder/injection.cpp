// The CUDA injection entry point: the driver loads libgpurr_recorder.so
// (CUDA_INJECTION64_PATH) during cuInit and calls InitializeInjection. It
// reads the options, subscribes to CUPTI and hands every callback to the
// RecordSession. Nothing here may stop the program: every failure is one
// warning, and the program runs on unrecorded.
#include <cupti.h>
#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "recorder/cuda_device.h"
#include "recorder/cupti_library.h"
#include "recorder/framework_context.h"
#include "recorder/library_call.h"
#include "recorder/reentrancy.h"
#include "recorder/session.h"
#include "recorder/signal_flush.h"
#include "recorder/warn.h"
#include "trace_format/trace.h"

namespace gpurr::recorder {
namespace {

// The one global: the C entry point and atexit have no other way to reach the
// session. Never deleted: other threads may still be in callbacks at exit.
RecordSession* gSession = nullptr;

// How long a signal's flush may hold the program's end (signal_flush.h): a
// rank torchrun stops while it waits in a collective has digests that never
// come.
constexpr std::chrono::seconds kSignalWait{5};

void CUPTIAPI onCupti(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata) {
  static_cast<RecordSession*>(userdata)->onCallback(domain, cbid, cbdata);
}

void finishAtExit() {
  if (gSession == nullptr) return;
  gSession->finish();
  static std::atomic<bool> said{false};  // once, however many ends call this (os._exit after --quick-exit's)
  if (const std::string parts = gSession->launchPartsText(); !parts.empty() && !said.exchange(true))
    sayToStderr(parts);
  endIfSignalled();  // the program exited while a signal's flush ran: it ends by the signal
}

void flushAtInterrupt() {
  if (gSession != nullptr) gSession->flush();
}

void abandonInChild() {
  if (gSession != nullptr) gSession->abandonInForkedChild();
}

int initialize() {
  ReentrancyGuard guard;
  std::vector<std::string> problems;
  // A run gpurr bisect started early waits here, at the program's first
  // CUDA call, for its turn (gpurr record --start-gate).
  RecorderOptions options = awaitOptions([](const char* name) { return std::getenv(name); }, problems);
  for (const std::string& p : problems) warnToStderr(p);
  if (!options.output) {
    warnToStderr("GPURR_OUTPUT is not set, so nothing is recorded (start the program with `gpurr record`)");
    return 1;
  }
  std::string error;
  const std::optional<CuptiLibrary> loaded = loadCupti([](const char* name) { return std::getenv(name); }, error);
  if (!loaded) {
    warnToStderr(error + "; nothing is recorded");
    return 1;
  }
  const CuptiLibrary& cupti = *loaded;
  if (const char* v = std::getenv("GPURR_VERBOSE"); v != nullptr && std::string(v) == "1") {
    sayToStderr("CUPTI " + cupti.path + " (" + cupti.where + ")" +
                (cupti.checkpointPath.empty() ? ", no libcheckpoint.so (--check-determinism unavailable)"
                                              : ", checkpoint API " + cupti.checkpointPath));
  }
  std::unique_ptr<CudaDevice> device = CudaDevice::create(error);
  if (!device) {
    warnToStderr(error + "; nothing is recorded");
    return 1;
  }
  device->setCheckpointApi(cupti.checkpoint);
  device->setStagingLimit(options.snapshotMemoryBytes);
  auto session = std::make_unique<RecordSession>(
      options, std::move(device),
      [opts = options](const trace::Header& header) { return openTrace(opts, header, warnToStderr); }, warnToStderr);

  CUpti_SubscriberHandle subscriber = nullptr;
  char holder[256] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "gpurr";
  params.oldSubscriberName = holder;
  params.oldSubscriberSize = sizeof(holder);
  const CUptiResult r = cupti.subscribe(&subscriber, onCupti, session.get(), &params);
  if (r != CUPTI_SUCCESS) {
    const char* text = nullptr;
    cupti.resultString(r, &text);
    std::string who = holder[0] != '\0' ? std::string(holder)
                                        : "another CUPTI client (torch.profiler, Nsight Systems, Nsight Compute, "
                                          "compute-sanitizer or cuda-gdb)";
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      warnToStderr("cannot record: the CUDA profiling interface (CUPTI) is already taken by " + who +
                   "; the program runs unrecorded (disable the profiler to record it)");
    } else {
      warnToStderr(std::string("cannot record: cuptiSubscribe failed (") + (text ? text : "unknown error") +
                   "); the program runs unrecorded");
    }
    return 1;
  }
  cupti.enableDomain(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE);
  for (CUpti_CallbackId cbid : subscribedDriverCallbacks()) {
    // Ids this driver does not know fail harmlessly.
    cupti.enableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
  }
  for (CUpti_CallbackId cbid : subscribedRuntimeCallbacks())
    cupti.enableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cbid);
  gSession = session.release();
  setLibraryRecordingActive(true);
  setActiveCollectives(&gSession->collectives());
  std::atexit(finishAtExit);
  framework::setFinishRecording(finishAtExit);  // the same, earlier, when the layer ends the program itself
  framework::setFlushRecording(flushAtInterrupt);  // the program ends on Ctrl-C: C's exit handlers will not run
  pthread_atfork(nullptr, nullptr, abandonInChild);
  // Killed by a signal (SIGTERM at a job's time limit, a crash): the same,
  // first; ended by its own _exit (os._exit): closed as at the exit.
  flushOnEndingSignals(flushAtInterrupt, kSignalWait, finishAtExit);
  return 1;
}

}  // namespace
}  // namespace gpurr::recorder

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::once_flag once;
  static int result = 1;
  std::call_once(once, [] {
    try {
      result = gpurr::recorder::initialize();
    } catch (const std::exception& e) {
      gpurr::recorder::warnToStderr(std::string("recorder failed to start (") + e.what() +
                                    "); the program runs unrecorded");
    }
  });
  return result;
}
