// A CUDA program as the real recorder sees it, for the fault tests without a
// GPU: it records itself through a RecordSession (its options read from the
// environment `gpurr record` sets, its trace written by the recorder's own
// TraceSink and TraceWriter) over a fake device whose memory is host memory
// and whose hashes are computed at once on the CPU. It allocates 8 buffers
// of 64 KiB, then makes STEPS training steps of LAUNCHES launches each,
// printing one line per step, and exits with status 7.
//
//   [KILL_IN_STEP=K] recorded_program STEPS LAUNCHES
//
// With KILL_IN_STEP=K it kills itself (SIGKILL) in the middle of step K,
// after waiting 1.5 s there, so that the recorder's periodic flush has run
// (an environment variable: the command line, which the diff compares,
// stays that of the run it is compared with). With SIGNAL_IN_STEP=K and
// SIGNAL=TERM, SEGV or ABRT it ends there at once, as the recorder takes
// these signals in a real program (recorder/signal_flush.h): SIGTERM sent
// twice (Slurm's signal to a job step reaches a program twice under gpurr
// record), then 30 s of waiting for its end; a write through a null
// pointer; abort(); or, with SIGNAL=RERAISE, a SIGTERM handler of its own
// installed there, which cleans up, puts the default action back and raises
// SIGTERM again (the recorder's `kill` and `raise`, ending_calls.cpp, are
// linked in, as `gpurr record` preloads them into a real program); with
// SIGNAL=GROUP the same, in a process group of its own, by kill(0). With
// SIGNAL=EXIT it calls _exit(9) there, skipping C's exit handlers; with
// SIGNAL=EXEC it execs a shell that prints "exec ran" and exits with 9; with
// SIGNAL=EXEC_MISSING it tries to exec a program that does not exist, says
// so, and goes on. With
// HANDLES_TERM=1 it handles SIGTERM itself (ending with status 3 in its
// handler, by _exit) from the start.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "recorder/options.h"
#include "recorder/session.h"
#include "recorder/signal_flush.h"
#include "trace_format/hash.h"

using namespace gpurr;
using namespace gpurr::recorder;

namespace {

constexpr uint64_t kKernel = 0xF00;

class Ready : public PendingHashes {
 public:
  explicit Ready(std::vector<kernels::HashResult> r) : r_(std::move(r)) {}
  bool wait(std::vector<kernels::HashResult>& out, std::string&) override {
    out = std::move(r_);
    return true;
  }

 private:
  std::vector<kernels::HashResult> r_;
};

class HostDevice : public Device {
 public:
  bool describeFunction(uint64_t function, FunctionInfo& out) override {
    if (function != kKernel) return false;
    out.name = "_Z4stepPfPKfi";
    out.layout = {{0, 8}, {8, 8}, {16, 4}};
    out.layoutKnown = true;
    return true;
  }
  StreamCapture captureState(uint64_t) override { return {std::nullopt, true}; }
  std::unique_ptr<PendingHashes> hash(uint64_t, uint64_t, std::span<const kernels::HashRequest> requests, bool,
                                      std::string&) override {
    std::vector<kernels::HashResult> r;
    for (const auto& q : requests) {
      std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(q.address), q.length);
      r.push_back({hash::hashBuffer(bytes), {}});
    }
    return std::make_unique<Ready>(std::move(r));
  }
  void describeSystem(trace::Header& h) override {
    h.driverVersion = 13000;
    h.gpus.push_back({0, "Fake GPU", "GPU-00000000-0000-0000-0000-000000000000", 132, 9, 0, 80ull << 30, ""});
  }
  void contextDestroying(uint64_t) override {}
};

RecordSession* gSession = nullptr;

// The program's own SIGTERM handler (HANDLES_TERM=1).
void onTerm(int) {
  const char line[] = "handled SIGTERM\n";
  if (::write(1, line, sizeof(line) - 1) < 0) _exit(4);
  _exit(3);
}

// SIGNAL=RERAISE's and GROUP's handler: the default action back, and the
// signal again (GROUP: to its process group).
bool gToGroup = false;
void onTermReraise(int sig) {
  const char line[] = "cleaned up\n";
  if (::write(1, line, sizeof(line) - 1) < 0) _exit(4);
  ::signal(sig, SIG_DFL);
  if (gToGroup) {
    ::kill(0, sig);
  } else {
    ::raise(sig);
  }
}

// Ends the program as SIGNAL=TERM, SEGV, ABRT, RERAISE, GROUP, EXIT or EXEC
// says (EXEC_MISSING: returns).
void endBySignal(const std::string& how) {
  std::fflush(stdout);
  if (how == "EXIT") {
    _exit(9);
  } else if (how == "EXEC") {
    ::execl("/bin/sh", "sh", "-c", "echo exec ran; exit 9", static_cast<char*>(nullptr));
  } else if (how == "EXEC_MISSING") {
    if (::execlp("gpurr-test-no-such-program", "gpurr-test-no-such-program", static_cast<char*>(nullptr)) != 0) {
      std::printf("exec failed\n");
      return;
    }
  } else if (how == "RERAISE" || how == "GROUP") {
    gToGroup = how == "GROUP";
    if (gToGroup) ::setpgid(0, 0);  // gpurr record's own process is left out of it
    ::signal(SIGTERM, onTermReraise);
    ::kill(::getpid(), SIGTERM);
    std::this_thread::sleep_for(std::chrono::seconds(30));
  } else if (how == "TERM") {
    ::kill(::getpid(), SIGTERM);
    ::kill(::getpid(), SIGTERM);
    std::this_thread::sleep_for(std::chrono::seconds(30));
  } else if (how == "SEGV") {
    *static_cast<volatile int*>(nullptr) = 1;
  } else if (how == "ABRT") {
    std::abort();
  }
  std::fprintf(stderr, "unknown SIGNAL=%s, or the program outlived it\n", how.c_str());
  std::exit(5);
}

void call(RecordSession& session, CUpti_CallbackId cbid, const void* params, const std::function<void()>& body = {}) {
  uint64_t correlation = 0;
  CUresult ret = CUDA_SUCCESS;
  CUpti_CallbackData cb{};
  cb.functionName = "cuFault";
  cb.functionParams = params;
  cb.functionReturnValue = &ret;
  cb.context = reinterpret_cast<CUcontext>(0xC0);
  cb.correlationData = &correlation;
  cb.callbackSite = CUPTI_API_ENTER;
  session.onCallback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
  if (body) body();
  cb.callbackSite = CUPTI_API_EXIT;
  session.onCallback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const uint64_t steps = std::strtoull(argv[1], nullptr, 10), launches = std::strtoull(argv[2], nullptr, 10);
  const char* kill = std::getenv("KILL_IN_STEP");
  const int64_t killStep = kill != nullptr ? std::atoll(kill) : -1;
  const char* signalIn = std::getenv("SIGNAL_IN_STEP");
  const int64_t signalStep = signalIn != nullptr ? std::atoll(signalIn) : -1;
  const char* signalName = std::getenv("SIGNAL");
  if (const char* h = std::getenv("HANDLES_TERM"); h != nullptr && std::string(h) == "1") ::signal(SIGTERM, onTerm);
  std::vector<std::string> problems;
  RecorderOptions options = parseOptions([](const char* n) { return std::getenv(n); }, problems);
  for (const std::string& p : problems) warnToStderr(p);
  std::unique_ptr<RecordSession> session;
  if (options.output) {
    session = std::make_unique<RecordSession>(
        options, std::make_unique<HostDevice>(),
        [&options](const trace::Header& h) { return openTrace(options, h, warnToStderr); },
        warnToStderr);
    gSession = session.get();
    flushOnEndingSignals([] { gSession->flush(); }, std::chrono::seconds(5), [] { gSession->finish(); });
  }
  constexpr size_t kBytes = 64 << 10;
  std::vector<std::vector<uint8_t>> buffers(8, std::vector<uint8_t>(kBytes));
  for (auto& b : buffers) {
    CUdeviceptr p = reinterpret_cast<CUdeviceptr>(b.data());
    cuMemAlloc_v2_params params{&p, kBytes};
    if (session) call(*session, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &params);
  }
  uint64_t checksum = 0;
  for (uint64_t step = 0; step < steps; ++step) {
    for (uint64_t i = 0; i < launches; ++i) {
      if (static_cast<int64_t>(step) == killStep && i == launches / 2) {
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        ::raise(SIGKILL);
      }
      if (static_cast<int64_t>(step) == signalStep && i == launches / 2) endBySignal(signalName ? signalName : "");
      auto& out = buffers[(step + i) % 8];
      auto& in = buffers[(step + i + 3) % 8];
      CUdeviceptr o = reinterpret_cast<CUdeviceptr>(out.data()), x = reinterpret_cast<CUdeviceptr>(in.data());
      int n = static_cast<int>(kBytes / 4);
      void* args[] = {&o, &x, &n};
      cuLaunchKernel_params p{};
      p.f = reinterpret_cast<CUfunction>(kKernel);
      p.gridDimX = p.gridDimY = p.gridDimZ = 1;
      p.blockDimX = 128, p.blockDimY = p.blockDimZ = 1;
      p.kernelParams = args;
      auto kernel = [&] {
        for (size_t k = 0; k < kBytes; k += 64) out[k] = static_cast<uint8_t>(in[k] * 3 + step + i);
        checksum = checksum * 31 + out[(i * 64) % kBytes];
      };
      if (session) {
        call(*session, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, kernel);
      } else {
        kernel();
      }
    }
    std::printf("step %llu checksum %016llx\n", static_cast<unsigned long long>(step),
                static_cast<unsigned long long>(checksum));
  }
  if (session) session->finish();
  endIfSignalled();
  return 7;
}
