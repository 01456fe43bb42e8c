// The recorder's cost on the program's thread, without a GPU: a RecordSession
// with the real CudaDevice, over a fake driver whose "GPU" is a thread that
// runs the enqueued work behind the host (device memory is host memory; the
// hash kernel hashes on the CPU; fake_gpu.h). A program thread allocates
// buffers, then makes launches of a kernel with three pointer parameters,
// each through the session's ENTER and EXIT callbacks as CUPTI would call
// them; the session's trace thread writes a real trace. Measured on the
// program's thread:
//   - GPU operations enqueued per recorded launch (goal <= 2);
//   - host time per launch in the callbacks (goal <= 5 us median);
//   - driver calls that wait for the GPU (stream, event, context
//     synchronisation, stream queries; goal: none) and allocations after
//     the first launch (goal: none);
//   - per launch, what the launch path costs besides its hashes (reported
//     with their goals, and whether each is met; not failed):
//     hash-kernel launches (goal <= 0.25 by default: the outputs' hashes of
//     several launches go in one, hash_deferral.h; counted in the exit
//     status for the plain stream), capture-state queries and capture-mode exchanges (goal 0 while no
//     capture is open), trace entries and the trace thread's wake-ups, by
//     the program or its timer (goal <= 0.01), heap allocations inside the
//     recorder's callbacks (operator new; goal 0), and the median callback
//     time (goal <= 1.5 us);
//   - heap allocations per entry handed to the trace thread (goal 0,
//     measured on entries made beforehand).
// The time is also read back from the trace (KernelLaunch::recorderNs), as
// `gpurr info` shows it.
//
// Each launch runs inside an op of an emulated PyTorch layer (as gpurr's
// framework layer reports it: the op's scope, its operands, and the
// allocator's blocks: three ops in four make their output in a block the
// caching allocator frees and hands out again, the fourth writes a tensor
// in place), unless "nolayer" is given; the block events' mean time is
// reported too. The same counts are reported for the patterns PyTorch
// makes, after the plain stream of launches:
//   - a dependent chain: each launch reads the previous one's output and
//     writes a new buffer;
//   - autograd: a second host thread launching on its own stream (as
//     autograd's device thread does), each thread's stream waiting on events
//     the other records;
//   - DDP: launches on a compute stream; every fourth, an event recorded
//     there, a communication stream waiting on it, and a launch on that
//     stream reading the gradient just written (as a bucket's all-reduce);
//   - the layer's steady state: steps of 30 launches, the first two observed
//     and learned, then the recorder following the learned step with no op
//     observed, as the PyTorch layer has it after its first steps.
//
//   callback_bench [launches (200000)] [buffer KiB (64)] [all] [nolayer] [parts]
//                  [only=PATTERN] [apart]
// ("all": as with --hash-inputs, every launch's buffers hashed before it too;
// "nolayer": no op reports its operands; "parts": the callbacks' time by
// part, as GPURR_VERBOSE=1 has the recorder report it; "only=PATTERN": that
// pattern alone, one of stream, wide, chain, autograd, ddp, follow, for a
// profile of it; "apart": the program's threads on the first CPU the
// process may use and the recorder's and the fake GPU's threads on the
// others, as on a machine where the program's thread has a core of its own;
// unpinned, the scheduler moves them, and pinned to one CPU with taskset,
// no cache line changes cores)
// Exit status: 0 every goal met, 1 a counted goal missed, 3 the time goal only
// (the goals of the first three bullets, on the plain stream of launches).
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <new>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "bench/fake_gpu.h"
#include "recorder/cuda_device.h"
#include "recorder/framework_context.h"
#include "recorder/options.h"
#include "recorder/session.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::recorder;
using namespace gpurr::bench;
using Clock = std::chrono::steady_clock;

namespace {

// Heap allocations per entry that TraceSink::push makes: entries made
// beforehand, in their boxes (as the launch path makes them), are pushed
// while counting.
double sinkAllocationsPerEntry(const std::filesystem::path& dir) {
  constexpr size_t kEntries = 20000;
  std::vector<EntryBox> entries(kEntries);
  for (size_t i = 0; i < kEntries; ++i) {
    trace::KernelLaunch k;
    k.function = kKernelName;
    k.params.assign(28, 0);
    entries[i] = std::make_unique<SinkEntry>();
    entries[i]->event.payload = std::move(k);
  }
  TraceSink sink(std::make_unique<trace::TraceWriter>(dir, trace::Header{}), [](const std::string&) {});
  const uint64_t before = gpu->heapAllocations;
  gpu->counting = true;
  inCallbacks = true;
  for (EntryBox& e : entries) sink.push(std::move(e));
  inCallbacks = false;
  gpu->counting = false;
  const uint64_t made = gpu->heapAllocations - before;
  sink.close();
  return static_cast<double>(made) / kEntries;
}

// One driver call through the session's ENTER and EXIT callbacks; the time
// spent in them (not in `body`, the call's own work).
std::chrono::nanoseconds call(RecordSession& session, CUpti_CallbackId cbid, const void* params,
                              const std::function<void()>& body = {}) {
  uint64_t correlation = 0;
  CUresult ret = CUDA_SUCCESS;
  CUpti_CallbackData cb{};
  cb.functionName = "cuBench";
  cb.functionParams = params;
  cb.functionReturnValue = &ret;
  cb.context = reinterpret_cast<CUcontext>(0xC0);
  cb.correlationData = &correlation;
  cb.callbackSite = CUPTI_API_ENTER;
  const auto t0 = Clock::now();
  inCallbacks = true;
  session.onCallback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
  inCallbacks = false;
  const auto t1 = Clock::now();
  if (body) body();
  cb.callbackSite = CUPTI_API_EXIT;
  const auto t2 = Clock::now();
  inCallbacks = true;
  session.onCallback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
  inCallbacks = false;
  return (t1 - t0) + (Clock::now() - t2);
}

// What one pattern cost, per launch, on the threads that made it.
struct Measured {
  bool ran = false;       // false: skipped (only=)
  uint64_t launches = 0;  // counted (after each thread's warm-up)
  double opsPerLaunch = 0, hashesPerLaunch = 0, entriesPerLaunch = 0, wakeupsPerLaunch = 0, queries = 0,
         exchanges = 0, heap = 0;
  double blockUs = 0;  // the emulated allocator's block events around each launch, mean
  uint64_t waits = 0, allocations = 0;
  std::vector<double> us;  // host time of each counted launch in the callbacks, sorted
  double median() const { return us.empty() ? 0 : us[us.size() / 2]; }
  double mean() const {
    return us.empty() ? 0 : std::accumulate(us.begin(), us.end(), 0.0) / static_cast<double>(us.size());
  }
  double p99() const { return us.empty() ? 0 : us[us.size() * 99 / 100]; }
};

// Counts what the program's threads do once `start` turns their counting on
// (each thread after its own warm-up), until `run` returns.
class Counter {
 public:
  // `only`: the one pattern measured (empty: every one).
  Counter(FakeGpu& fake, TraceSink* const& sink, std::string only) : fake_(fake), sink_(sink), only_(std::move(only)) {}
  Measured measure(const char* pattern, const std::function<void(std::vector<double>& us, uint64_t& counted)>& run) {
    if (!only_.empty() && only_ != pattern) return {};
    const uint64_t enqueued = fake_.enqueued, waits = fake_.waits, allocs = fake_.allocations,
                   queries = fake_.captureQueries, exchanges = fake_.modeExchanges, heap = fake_.heapAllocations,
                   hashes = fake_.hashLaunches;
    const uint64_t entries = sink_ != nullptr ? sink_->pushed() : 0;
    const uint64_t wakeups = sink_ != nullptr ? sink_->stats().wakeups : 0;
    const uint64_t callsBefore = calls, blockNs = blocks.ns;
    Measured m;
    m.ran = true;
    fake_.counting = true;
    run(m.us, m.launches);
    fake_.counting = false;
    const double n = static_cast<double>(std::max<uint64_t>(m.launches, 1));
    m.opsPerLaunch = static_cast<double>(fake_.enqueued - enqueued) / n;
    m.hashesPerLaunch = static_cast<double>(fake_.hashLaunches - hashes) / n;
    m.waits = fake_.waits - waits;
    m.allocations = fake_.allocations - allocs;
    m.queries = static_cast<double>(fake_.captureQueries - queries) / n;
    m.exchanges = static_cast<double>(fake_.modeExchanges - exchanges) / n;
    m.heap = static_cast<double>(fake_.heapAllocations - heap) / n;
    m.blockUs = static_cast<double>(blocks.ns - blockNs) / 1e3 / n;
    // Entries and wake-ups are counted by the sink for every thread, warm-up
    // included: per launch of the whole pattern.
    if (sink_ != nullptr) {
      const double made = static_cast<double>(std::max<uint64_t>(calls - callsBefore, 1));
      m.entriesPerLaunch = static_cast<double>(sink_->pushed() - entries) / made;
      m.wakeupsPerLaunch = static_cast<double>(sink_->stats().wakeups - wakeups) / made;
    }
    std::sort(m.us.begin(), m.us.end());
    return m;
  }
  std::atomic<uint64_t> calls{0};  // launches made, warm-up included
  // Time in the recorder's block events (the allocator's reports), on the
  // threads that count.
  struct {
    std::atomic<uint64_t> ns{0};
    void add(Clock::duration d) { ns += std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); }
  } blocks;

 private:
  FakeGpu& fake_;
  TraceSink* const& sink_;
  const std::string only_;
};

const char* met(bool yes) { return yes ? "met" : "not met"; }

// The goals of the launch path besides its hashes, with whether each is met.
void printLaunchPathGoals(const Measured& m, bool allInputs) {
  if (!m.ran) {
    std::printf("    not run (only=)\n");
    return;
  }
  if (allInputs) {
    std::printf("    hash-kernel launches %.3f (every launch's inputs hashed before it)\n", m.hashesPerLaunch);
  } else {
    std::printf("    hash-kernel launches %.3f (goal <= 0.25: %s)\n", m.hashesPerLaunch, met(m.hashesPerLaunch <= 0.25));
  }
  std::printf("    capture-state queries %.2f (goal 0 with no capture open: %s), capture-mode exchanges %.2f (goal 0: %s)\n",
              m.queries, met(m.queries == 0), m.exchanges, met(m.exchanges == 0));
  std::printf("    trace entries %.2f, trace-thread wake-ups %.4f (goal <= 0.01: %s)\n", m.entriesPerLaunch,
              m.wakeupsPerLaunch, met(m.wakeupsPerLaunch <= 0.01));
  std::printf("    heap allocations in the callbacks %.2f (goal 0: %s)\n", m.heap, met(m.heap == 0));
  std::printf("    median callback time %.2f us (goal <= 1.5 us: %s), mean %.2f us, 99th percentile %.2f us\n",
              m.median(), met(m.median() <= 1.5), m.mean(), m.p99());
  if (m.blockUs > 0)
    std::printf("    the allocator's block events before it (a free and an allocation in 3 ops of 4): %.2f us (mean)\n",
                m.blockUs);
}

}  // namespace

#ifdef GPURR_CALLBACK_BENCH_LIBRARY
// Built into libgpurr_callback_bench.so too, which callback_bench_dlopen
// opens as the driver opens libgpurr_recorder.so: the recorder's
// thread_locals are then reached as the real library reaches them, each
// through a call to __tls_get_addr (in an executable, an offset).
extern "C" __attribute__((visibility("default"))) int gpurr_callback_bench_main(int argc, char** argv) {
#else
int main(int argc, char** argv) {
#endif
  const uint64_t launches = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200000;
  const uint64_t bufferBytes = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 64) * 1024;
  bool allInputs = false, layer = true, parts = false, apart = false;
  std::string only;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "all") == 0) allInputs = true;
    if (std::strcmp(argv[i], "nolayer") == 0) layer = false;
    if (std::strcmp(argv[i], "parts") == 0) parts = true;
    if (std::strcmp(argv[i], "apart") == 0) apart = true;
    if (std::strncmp(argv[i], "only=", 5) == 0) only = argv[i] + 5;
  }
  const char* patterns[] = {"stream", "wide", "chain", "autograd", "ddp", "follow"};
  if (!only.empty() && std::none_of(std::begin(patterns), std::end(patterns), [&](const char* p) { return only == p; })) {
    std::fprintf(stderr, "callback_bench: only=%s: no such pattern (stream, wide, chain, autograd, ddp, follow)\n",
                 only.c_str());
    return 2;
  }
  // apart: every thread made from here on (the fake GPU's, the trace
  // thread, the writer's) on the CPUs but the first; this thread moves to
  // the first once they are made, before any launch counts.
  cpu_set_t mine, others;
  CPU_ZERO(&mine);
  CPU_ZERO(&others);
  if (apart) {
    cpu_set_t allowed;
    sched_getaffinity(0, sizeof(allowed), &allowed);
    for (int c = 0, first = -1; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &allowed)) continue;
      if (first < 0) {
        first = c;
        CPU_SET(c, &mine);
      } else {
        CPU_SET(c, &others);
      }
    }
    if (CPU_COUNT(&others) == 0) {
      std::fprintf(stderr, "callback_bench: apart needs two CPUs; this process may use one\n");
      return 2;
    }
    pthread_setaffinity_np(pthread_self(), sizeof(others), &others);
  }
  FakeGpu fake;
  gpu = &fake;
  programThread = true;

  const auto dir = std::filesystem::temp_directory_path() / ("gpurr-callback-bench-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<std::string> problems;
  const std::string output = dir.string();
  RecorderOptions options = parseOptions(
      [&](const char* n) -> const char* {
        if (std::strcmp(n, "GPURR_OUTPUT") == 0) return output.c_str();
        if (std::strcmp(n, "GPURR_VERBOSE") == 0) return parts ? "1" : nullptr;
        return allInputs && std::strcmp(n, "GPURR_HASH_INPUTS") == 0 ? "1" : nullptr;
      },
      problems);
  std::filesystem::path traceDir;
  TraceSink* sink = nullptr;
  auto session = std::make_unique<RecordSession>(
      options, CudaDevice::create(fakeApi()),
      [&](const trace::Header& h) -> std::unique_ptr<TraceSink> {
        std::string error;
        traceDir = *claimTraceDirectory(*options.output, options.rankName, error);
        auto made = std::make_unique<TraceSink>(std::make_unique<trace::TraceWriter>(traceDir, h),
                                                [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); });
        sink = made.get();
        return made;
      },
      [](const std::string& m) { std::fprintf(stderr, "gpurr: %s\n", m.c_str()); });

  // 64 buffers, allocated through the session, as a program's tensors.
  std::vector<CUdeviceptr> buffers(64);
  for (CUdeviceptr& b : buffers) {
    b = reinterpret_cast<CUdeviceptr>(std::calloc(bufferBytes, 1));
    cuMemAlloc_v2_params p{&b, bufferBytes};
    call(*session, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p);
    if (layer) framework::blockEvent(b, bufferBytes, true);  // the caching allocator's block
  }
  Counter counter(fake, sink, only);
  // Whether the emulated layer observes ops (it stops once it follows a
  // learned step, as the PyTorch layer does).
  bool observing = layer;
  // One launch of a kernel writing `out` from `x` and `w` on `stream`; its
  // time in the callbacks kept in `us` while this thread counts.
  // `wide`: the kernel with TensorIterator's parameters.
  auto launch = [&](uint64_t stream, CUdeviceptr out, CUdeviceptr x, CUdeviceptr w, uint64_t i,
                    std::vector<double>& us, bool wide = false) {
    int n = 1024;
    static OffsetCalculator offsets;  // only read
    void* args[] = {&out, &x, &w, wide ? static_cast<void*>(&offsets) : &n};
    cuLaunchKernel_params p{};
    p.f = wide ? kWideKernel : reinterpret_cast<CUfunction>(0x100);
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 128, p.blockDimY = p.blockDimZ = 1;
    p.hStream = reinterpret_cast<CUstream>(stream);
    p.kernelParams = args;
    // The op the launch runs in, as the framework layer reports it while
    // it observes: its module, its scope with the program's line, its
    // operands.
    thread_local const char op = 0;
    // Three ops in four make their output (out is no operand of theirs; its
    // block is one PyTorch's caching allocator hands out again: the block
    // tracker reports the block of a tensor freed, FREE_REQUESTED, and
    // ALLOC, whether the layer observes or not); the fourth writes a tensor
    // in place (out an operand it writes).
    const bool makes = i % 4 != 3;
    if (layer && makes) {
      const auto t0 = Clock::now();
      framework::blockEvent(out, 0, false);
      framework::blockEvent(out, bufferBytes, true);
      if (fake.onProgram()) counter.blocks.add(Clock::now() - t0);
    }
    if (observing) {
      framework::enterModule("Model.encoder.layers.0.mlp.fc1");
      framework::openScope(&op, "aten::linear", framework::ScopeKind::kOp, -1, 0, "/home/user/project/train.py",
                           42);
      const framework::Operand operands[] = {{x, false}, {w, false}, {out, true}};
      framework::opOperands(&op, std::span(operands).first(makes ? 2 : 3));
    }
    const auto spent = call(*session, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, [&] {
      // The program's kernel writes its output, on the fake GPU.
      fake.push([out, i] { reinterpret_cast<uint64_t*>(out)[i % 128] = i; }, true);
    });
    if (fake.onProgram()) us.push_back(std::chrono::duration<double, std::micro>(spent).count());
    if (observing) {
      framework::closeScope(&op);
      framework::exitModule();
    }
    ++counter.calls;
  };
  auto eventRecord = [&](uint64_t event, uint64_t stream) {
    cuEventRecord_params p{reinterpret_cast<CUevent>(event), reinterpret_cast<CUstream>(stream)};
    call(*session, CUPTI_DRIVER_TRACE_CBID_cuEventRecord, &p);
  };
  auto streamWaitEvent = [&](uint64_t stream, uint64_t event) {
    cuStreamWaitEvent_params p{reinterpret_cast<CUstream>(stream), reinterpret_cast<CUevent>(event), 0};
    call(*session, CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent, &p);
  };
  constexpr uint64_t kWarmUp = 256;  // launches per thread before it counts
  constexpr uint64_t kProcessWarmUp = 16384;  // launches of the process before anything counts
  std::vector<double> ignored;

  // The plain stream of launches, on the legacy stream.
  auto plainLaunch = [&](uint64_t i, std::vector<double>& us) {
    launch(0, buffers[i % 64], buffers[(i * 7 + 1) % 64], buffers[(i * 13 + 5) % 64], i, us);
  };
  launch(0, buffers[0], buffers[1], buffers[5], 0, ignored);  // the first: module load, ring allocation
  if (apart) pthread_setaffinity_np(pthread_self(), sizeof(mine), &mine);  // the trace thread is made
  // The recorder's pools grow to what is in flight when the program runs as
  // far ahead of the trace thread as it goes before waking it (an eighth of
  // the trace ring): the process's warm-up, before anything counts.
  for (uint64_t i = 1; i <= kProcessWarmUp; ++i) plainLaunch(i, ignored);
  const auto start = Clock::now();
  const Measured plain = counter.measure("stream", [&](std::vector<double>& us, uint64_t& counted) {
    us.reserve(launches);
    for (uint64_t i = 1; i <= launches; ++i) plainLaunch(i, us);
    counted = launches;
  });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  // The plain stream again, its kernel with TensorIterator's parameters.
  const Measured wide = counter.measure("wide", [&](std::vector<double>& us, uint64_t& counted) {
    us.reserve(launches);
    for (uint64_t i = 1; i <= kWarmUp + launches; ++i) {
      const bool counts = i > kWarmUp;
      programThread = counts;
      launch(0, buffers[i % 64], buffers[(i * 7 + 1) % 64], buffers[(i * 13 + 5) % 64], i, counts ? us : ignored,
             true);
    }
    programThread = true;
    counted = launches;
  });

  // A dependent chain: each launch reads the output of the one before and
  // writes a buffer of its own (buffers 0-47; weights 48-63).
  const Measured chain = counter.measure("chain", [&](std::vector<double>& us, uint64_t& counted) {
    us.reserve(launches);
    for (uint64_t i = 1; i <= kWarmUp + launches; ++i) {
      const bool counts = i > kWarmUp;
      programThread = counts;
      launch(0, buffers[i % 48], buffers[(i - 1) % 48], buffers[48 + i % 16], i, counts ? us : ignored);
    }
    programThread = true;
    counted = launches;
  });

  // Autograd: the forward thread launches on its stream into buffers 0-31;
  // the backward thread on its own stream reads them and writes 32-63. Every
  // 8 launches each records an event its peer's stream waits on.
  const Measured autograd = counter.measure("autograd", [&](std::vector<double>& us, uint64_t& counted) {
    std::vector<double> theirs;
    auto work = [&](bool backward, std::vector<double>& mine) {
      programThread = true;
      const uint64_t stream = backward ? 0xB2 : 0xA1;
      const uint64_t event = backward ? 0xE2 : 0xE1, peerEvent = backward ? 0xE1 : 0xE2;
      const uint64_t half = launches / 2;
      mine.reserve(half);
      for (uint64_t i = 0; i < kWarmUp + half; ++i) {
        const bool counts = i >= kWarmUp;
        programThread = counts;
        const CUdeviceptr out = buffers[(backward ? 32 : 0) + i % 32];
        const CUdeviceptr x = buffers[(i * 7 + 1) % 32], w = buffers[(backward ? 32 : 0) + (i * 13 + 5) % 32];
        launch(stream, out, x, w, i, counts ? mine : ignored);
        if (i % 8 == 7) {
          eventRecord(event, stream);
          streamWaitEvent(stream, peerEvent);
        }
      }
      programThread = true;
    };
    std::thread backward([&] { work(true, theirs); });
    work(false, us);
    backward.join();
    us.insert(us.end(), theirs.begin(), theirs.end());
    counted = 2 * (launches / 2);
  });

  // DDP: launches on the compute stream; every fourth, its gradient is
  // handed to the communication stream through an event and reduced there.
  const Measured ddp = counter.measure("ddp", [&](std::vector<double>& us, uint64_t& counted) {
    constexpr uint64_t compute = 0xC1, comm = 0xC2, ready = 0xE3;
    us.reserve(launches);
    uint64_t made = 0;
    for (uint64_t i = 0; made < kWarmUp + launches; ++i) {
      const bool counts = made >= kWarmUp;
      programThread = counts;
      const CUdeviceptr grad = buffers[i % 48];
      launch(compute, grad, buffers[(i * 7 + 1) % 48], buffers[(i * 13 + 5) % 48], i, counts ? us : ignored);
      ++made;
      if (i % 4 == 3 && made < kWarmUp + launches) {
        eventRecord(ready, compute);
        streamWaitEvent(comm, ready);
        launch(comm, buffers[48 + i % 16], grad, buffers[48 + (i + 1) % 16], i, counts ? us : ignored);
        ++made;
      }
    }
    programThread = true;
    counted = launches;
  });
  // The layer's steady state: steps of 30 launches (the MLP's), the first
  // two observed and learned, the rest following the last learned step with
  // no op observed (framework_context.h, kFollow). The model's weights, as
  // the layer reports them: a quarter of the buffers, and 256 parameters
  // elsewhere, so that a launch's place is checked against its weight.
  constexpr uint64_t kStepLaunches = 30;
  bool followed = false;
  const Measured follow = !layer ? Measured{} : counter.measure("follow", [&](std::vector<double>& us, uint64_t& counted) {
    std::vector<uint64_t> weights;
    for (size_t b = 0; b < 16; ++b) weights.insert(weights.end(), {buffers[b], bufferBytes});
    for (uint64_t p = 0; p < 256; ++p) weights.insert(weights.end(), {(uint64_t{1} << 46) + (p << 20), 4096});
    framework::setParameters(weights);
    // PyTorch's grad mode, as the layer's op library lets the recorder read
    // it (at::GradMode::is_enabled: a thread_local) at every launch.
    static thread_local bool gradEnabled = true;
    framework::setGradModeSource([] { return gradEnabled ? 1 : 0; });
    framework::setAttribution(framework::Attribution::kLearn);
    us.reserve(launches);
    const uint64_t learnt = 2 * kStepLaunches, total = learnt + kWarmUp + launches;
    for (uint64_t i = 0; i < total; ++i) {
      if (i % kStepLaunches == 0) {
        framework::setStep(static_cast<int64_t>(i / kStepLaunches));
        if (i == learnt) followed = framework::setAttribution(framework::Attribution::kFollow);
        observing = !followed;
      }
      const bool counts = i >= learnt + kWarmUp;
      programThread = counts;
      plainLaunch(i % kStepLaunches, counts ? us : ignored);
    }
    programThread = true;
    observing = layer;
    framework::setAttribution(framework::Attribution::kObserve);
    framework::setGradModeSource(nullptr);
    counted = launches;
  });
  const SinkStats sinkStats = sink != nullptr ? sink->stats() : SinkStats{};
  session->finish();

  // The same cost as the trace records it.
  std::vector<uint32_t> recorded;
  trace::TraceReader reader(traceDir);
  const trace::RecorderMemory memory = reader.recorderMemory().value_or(trace::RecorderMemory{});
  reader.forEach([&](const trace::Event& e) {
    if (const auto* k = std::get_if<trace::KernelLaunch>(&e.payload); k && k->recorderNs) recorded.push_back(k->recorderNs);
    return true;
  });
  std::sort(recorded.begin(), recorded.end());
  std::printf("callback_bench: %llu launches of 3 buffers of %llu KiB, fake driver, %s, %.2f s\n",
              static_cast<unsigned long long>(launches), static_cast<unsigned long long>(bufferBytes / 1024),
              allInputs ? "every input hashed (--hash-inputs)" : "inputs hashed at first use", seconds);
  if (plain.ran) {
    std::printf("  GPU operations enqueued by the recorder per launch: %.2f   (goal <= 2)\n", plain.opsPerLaunch);
    std::printf("  host time per launch in the callbacks: median %.2f us, 99th percentile %.2f us   (goal: median <= 5 "
                "us)\n",
                plain.median(), plain.p99());
  }
  if (apart) std::printf("  the program's threads on a CPU of their own, the recorder's and the fake GPU's on the others\n");
  if (!recorded.empty()) {
    std::printf("  ... as the trace records it (recorderNs, every pattern): median %.2f us, 99th percentile %.2f us\n",
                recorded[recorded.size() / 2] / 1e3, recorded[recorded.size() * 99 / 100] / 1e3);
  }
  if (parts) std::printf("  %s (every pattern, warm-up included)\n", session->launchPartsText().c_str());
  std::printf("  memory the recorder held at most: host %.1f MiB (event queue %.1f MiB, snapshots %.1f MiB, writer %.1f "
              "MiB), pinned host %.1f MiB, GPU %.1f KiB\n",
              memory.hostBytes / 1048576.0, memory.queueBytes / 1048576.0, memory.snapshotBytes / 1048576.0,
              memory.writerBytes / 1048576.0, memory.pinnedHostBytes / 1048576.0, memory.deviceBytes / 1024.0);
  std::printf("  driver calls on the program's thread that wait for the GPU: %llu   (goal: 0)\n",
              static_cast<unsigned long long>(plain.waits));
  std::printf("  allocations or frees on the program's thread after the first launch: %llu   (goal: 0)\n",
              static_cast<unsigned long long>(plain.allocations));
  std::printf("  per launch, the launch path besides its hashes, after %llu launches of the process's warm-up and "
              "%llu per thread:\n",
              static_cast<unsigned long long>(kProcessWarmUp), static_cast<unsigned long long>(kWarmUp));
  std::printf("  - one stream of launches, one thread%s:\n", layer ? ", each in an op of the emulated layer" : "");
  printLaunchPathGoals(plain, allInputs);
  std::printf("  - the same, its kernel's parameters those of PyTorch's elementwise kernels on strided tensors "
              "(three pointers and an OffsetCalculator: %zu bytes):\n",
              24 + sizeof(OffsetCalculator));
  printLaunchPathGoals(wide, allInputs);
  std::printf("  - a dependent chain, each launch reading the output of the one before (%.2f GPU operations of the "
              "recorder per launch):\n",
              chain.opsPerLaunch);
  printLaunchPathGoals(chain, allInputs);
  std::printf("  - autograd: a second thread launching on its own stream, the streams ordered by events "
              "(%.2f GPU operations of the recorder per launch, %llu waits):\n",
              autograd.opsPerLaunch, static_cast<unsigned long long>(autograd.waits));
  printLaunchPathGoals(autograd, allInputs);
  std::printf("  - DDP: a communication stream fed by events from the compute stream (%.2f GPU operations of the "
              "recorder per launch, %llu waits):\n",
              ddp.opsPerLaunch, static_cast<unsigned long long>(ddp.waits));
  printLaunchPathGoals(ddp, allInputs);
  if (layer) {
    std::printf("  - the layer following the step it learned (steps of %llu launches; no op observed after the "
                "first two%s):\n",
                static_cast<unsigned long long>(kStepLaunches),
                followed ? "" : ", NOT FOLLOWING: the step was not learned");
    printLaunchPathGoals(follow, allInputs);
  }
  const double sinkAllocations = sinkAllocationsPerEntry(dir / "sink.gpurr");
  std::printf("  trace thread: heap allocations per entry handed to it %.2f   (goal 0); ring %llu slots, %.1f MiB, "
              "at most %.1f MiB held, %llu entries dropped\n",
              sinkAllocations, static_cast<unsigned long long>(sinkStats.slots), sinkStats.ringBytes / 1048576.0,
              sinkStats.peakBytes / 1048576.0, static_cast<unsigned long long>(sinkStats.dropped));
  session.reset();
  std::filesystem::remove_all(dir);
  for (CUdeviceptr b : buffers) std::free(reinterpret_cast<void*>(b));
  // 1: a goal that counts (operations, waits, allocations, the trace
  // thread's wake-ups and allocations) is missed; 3: only
  // the time goal, which a busy machine can miss (the short test run accepts it).
  const uint64_t waits = plain.waits + wide.waits + chain.waits + autograd.waits + ddp.waits + follow.waits;
  const uint64_t allocations = plain.allocations + wide.allocations + chain.allocations + autograd.allocations +
                               ddp.allocations + follow.allocations;
  if (plain.opsPerLaunch > 2 || waits != 0 || allocations != 0 || plain.wakeupsPerLaunch > 0.01 || sinkAllocations > 0)
    return 1;
  if (layer && follow.ran && !followed) return 1;
  if (!allInputs && layer && plain.hashesPerLaunch > 0.25) return 1;
  return plain.median() <= 5 ? 0 : 3;
}
