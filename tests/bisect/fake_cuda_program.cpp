// Stands in for a CUDA training program under `gpurr record` on machines
// without a GPU: it does the recorder's part itself. It reads the recorder's
// options from its environment with the recorder's own parser (GPURR_OUTPUT,
// GPURR_SNAPSHOT...), claims $GPURR_OUTPUT/proc<N>.gpurr as the recorder
// does, and writes the trace of a small training step computed on the CPU:
// real buffer contents, real digests (the CPU buffer hash), and snapshot
// blobs for the launches GPURR_SNAPSHOT selects. Like the recorder in a
// PyTorch program, it hashes after a launch the buffer its op writes (every
// buffer for snapshots), lists the others among its reads and, unless
// GPURR_HASH_INPUTS or a selection asks for all, hashes before the launch
// only the buffers nothing recorded touched yet. Every launch and copy has
// the origin gpurr's framework layer records in a PyTorch program: the op,
// module, line of the train.py below and training step.
//
//   fake_cuda_program SCENARIO STATE_DIR
//
// STATE_DIR/counter counts the runs (1, 2, 3...; STATE_DIR is made when
// missing), and STATE_DIR/order gets "begin N" and "end N" (on a clean
// exit) around each run's work; FAKE_RUN_SECONDS makes each run take that
// much longer, and FAKE_IGNORES_TERM=1 has it ignore SIGTERM. The scenario decides what differs in which run:
//   identical         nothing
//   nondeterministic  launch 5 (index_add) adds in another order in every run
//   seed              launch 3 (dropout) takes an unseeded Philox seed
//   host_input        the batch copied to the GPU differs in every run
//   flaky             run 2 differs at launch 5, run 3 at launch 2 only
//   rng_draws         dropout draws three times (launches 3 to 5): run 2's
//                     third draw takes another seed, run 3's first
//   crash             runs after the first die at launch 7 with exit code 3
//   first_fails       run 1 exits with code 4 before any CUDA work (no trace)
//   ranks             two processes (rank0.gpurr, rank1.gpurr); rank 1 as
//                     nondeterministic, rank 0 identical
//   job               two ranks that all-reduce index_add_'s output (NCCL's
//                     events); rank 1 as nondeterministic, and it copies
//                     three shards of its own first, so that its first
//                     divergence comes later among its operations than rank
//                     0's (the all-reduce, which brings rank 1's sum to it)
//   port              identical, but holds STATE_DIR/port while it runs and
//                     fails when another run holds it: at once, or after
//                     FAKE_PORT_FAIL_SECONDS (as torchrun's agent may)
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "recorder/options.h"
#include "recorder/write_history.h"
#include "trace_format/hash.h"
#include "trace_format/trace.h"

extern char** environ;

namespace {
using namespace gpurr;
using namespace gpurr::trace;
using gpurr::hash::chunkDigests;
using gpurr::hash::hashBuffer;

constexpr uint64_t kBytes = 4096;  // every buffer: 1,024 floats
constexpr uint64_t kBase = 0x7f3a00000000;
constexpr uint64_t kStream = 0x5601d0;

int bumpCounter(const std::string& stateDir) {
  std::error_code ec;
  std::filesystem::create_directories(stateDir, ec);  // a failure shows when the counter is read
  const std::string file = stateDir + "/counter";
  int n = 0;
  {
    std::ifstream in(file);
    in >> n;
  }
  ++n;
  std::ofstream out(file, std::ios::trunc);
  out << n << '\n';
  return n;
}

std::vector<float> floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> f(bytes.size() / 4);
  std::memcpy(f.data(), bytes.data(), bytes.size());
  return f;
}

std::vector<uint8_t> bytesOf(const std::vector<float>& f) {
  std::vector<uint8_t> b(f.size() * 4);
  std::memcpy(b.data(), f.data(), b.size());
  return b;
}

// The program this one stands for, /work/train.py:
//
//   15    def forward(self, x, segments):
//   16        h = self.embed(x)
//   17        h = torch.relu(self.fc1(h))
//   18        h = self.fc2(self.drop(h))
//   19        return h.new_zeros(h.shape).index_add_(0, segments, h)
//   ...
//   33 x = batch.cuda(non_blocking=True)
//   34 model = Net().cuda()
//   ...
//   41 loss = F.mse_loss(model(x, segments), x)
//   42 loss.backward()
//   43 optimizer.step()
//   44 print(f"step 1: loss {loss.sum().item():.4f}")
constexpr const char* kTrainPy = "/work/train.py";

Origin forward(std::string op, std::vector<std::string> stack, std::string module, uint32_t line) {
  return Origin{std::move(op), std::move(stack), Phase::kForward, "", std::move(module), kTrainPy, line, 0, 0};
}

const std::vector<std::string> kToCuda = {"aten::to", "aten::_to_copy", "aten::copy_"};
const std::vector<std::string> kLinear = {"aten::linear", "aten::addmm"};

class Program {
 public:
  Program(TraceWriter& w, const recorder::RecorderOptions& opts) : w_(w), opts_(opts) {}

  // The origin of the next launch or copy; its step and the launches of the
  // step before it are filled in here.
  Program& from(Origin origin) {
    origin.step = step_;
    origin.stepLaunch = launches_ - stepBegan_;
    next_ = std::move(origin);
    return *this;
  }

  // An optimizer step completed: what follows belongs to the next step.
  void stepDone() {
    ++step_;
    stepBegan_ = launches_;
  }

  void alloc(uint32_t ordinal) {
    Allocation a;
    a.ordinal = ordinal;
    a.address = address(ordinal);
    a.size = kBytes;
    append(a);
    memory_[ordinal] = std::vector<uint8_t>(kBytes, 0);
    history_.forget(a.address, a.address + kBytes);
  }

  void module() {
    const std::vector<uint8_t> image(256, 0x42);
    ModuleLoad m;
    m.ordinal = 1;
    // As the recorder does: the image only in traces recorded for replay.
    if (opts_.full || !opts_.snapshot.empty()) m.cubin = w_.putBlob(image);
    m.arch = 90;
    append(m);
  }

  void copyIn(uint32_t ordinal, const std::vector<float>& values) {
    memory_[ordinal] = bytesOf(values);
    Memcpy c;
    c.kind = MemcpyKind::kHostToDevice;
    c.stream = kStream;
    c.async = true;
    c.size = kBytes;
    c.dst = range(ordinal);
    c.src = DeviceRange{0x55d0c0de0000, kBytes, 0, 0};
    c.digest = hashBuffer(memory_[ordinal]);
    history_.touch(address(ordinal), address(ordinal) + kBytes, 0);
    if (opts_.captureHostData) c.data = w_.putBlob(memory_[ordinal]);
    append(c);
  }

  void copyOut(uint32_t ordinal) {
    Memcpy c;
    c.kind = MemcpyKind::kDeviceToHost;
    c.stream = kStream;
    c.size = kBytes;
    c.src = range(ordinal);
    c.dst = DeviceRange{0x55d0c0de0000, kBytes, 0, 0};
    c.digest = hashBuffer(memory_[ordinal]);
    append(c);
  }

  // One kernel launch: out = f(inputs), computed here; `perturb` moves a few
  // output values by a rounding error, as unordered atomics do.
  void launch(const std::string& name, std::vector<uint32_t> inputs, uint32_t output, float scale,
              int perturb = 0, std::optional<uint64_t> philoxSeed = std::nullopt) {
    KernelLaunch k;
    k.api = LaunchApi::kLaunchKernel;
    k.context = 0x1;
    k.stream = kStream;
    k.module = 1;
    k.function = name;
    k.grid = {8, 1, 1};
    k.block = {128, 1, 1};
    appendPointerParam(k, address(output), output, 0);
    for (uint32_t in : inputs) appendPointerParam(k, address(in), in, 0);
    const int32_t n = kBytes / 4;
    appendParam(k, &n, 4, 4);
    if (philoxSeed) {
      const uint64_t state[3] = {*philoxSeed, 4 * launches_, 0};
      const uint32_t at = appendParam(k, state, sizeof state, 8);
      RngState rng;
      rng.source = "philox";
      rng.generator = "cuda:0";
      rng.seed = *philoxSeed;
      rng.offset = 4 * launches_;
      rng.paramOffset = at;
      k.annotations.push_back(rng);
    }
    const bool snapshot = recorder::launchSelected(opts_.snapshot, launches_, name);
    std::vector<uint32_t> touched = inputs;  // in address order, as the recorder's ranges
    touched.push_back(output);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint32_t t : touched) {
      const bool fresh = history_.touch(address(t), address(t) + kBytes, 0);
      if (fresh || snapshot || recorder::hashesAllInputs(opts_)) k.inputs.push_back(digest(t, snapshot));
    }

    std::vector<float> out(kBytes / 4, 0.0f);
    for (size_t j = 0; j < inputs.size(); ++j) {
      const std::vector<float> x = floats(memory_[inputs[j]]);
      for (size_t i = 0; i < out.size(); ++i) out[i] += scale * x[(i + 7 * j) % x.size()] / (1.0f + j);
    }
    if (philoxSeed) {
      for (size_t i = 0; i < out.size(); ++i) {
        if ((i * 2654435761u + *philoxSeed * 40503u) % 10 == 0) out[i] = 0;  // dropped
      }
    }
    for (int p = 0; p < perturb; ++p) {
      const size_t i = (static_cast<size_t>(p) * 331 + 17 * perturb) % out.size();
      out[i] = std::nextafter(out[i], 1e30f);
    }
    memory_[output] = bytesOf(out);
    // The op's schema says what it writes: the rest is only read, and not
    // hashed after the launch (but for snapshots, which keep every range).
    for (uint32_t t : touched) {
      if (t == output || snapshot) {
        k.outputs.push_back(digest(t, snapshot));
      } else {
        k.reads.push_back(RangeDigest{range(t), 0, {}, {}});
      }
    }
    append(k);
    ++launches_;
  }

  // An in-place all-reduce of buffer `ordinal` over a job of two ranks, as
  // NCCL's wrappers record it: what this rank sends, then what it receives
  // (its own data, moved by a rounding error in `perturb` places where the
  // other rank's contribution differs between runs).
  void allReduce(uint32_t ordinal, int32_t rank, int perturb) {
    Collective c;
    c.call = "ncclAllReduce";
    c.op = CollectiveOp::kAllReduce;
    c.communicator = 0x5eed0c0111ec71f5;
    c.rank = rank;
    c.size = 2;
    c.dataType = "float32";
    c.count = kBytes / 4;
    c.reduceOp = "sum";
    c.stream = kStream;
    c.inputs.push_back(digest(ordinal, false));
    std::vector<float> sum = floats(memory_[ordinal]);
    for (float& x : sum) x *= 2;
    for (int q = 0; q < perturb; ++q) {
      const size_t i = (static_cast<size_t>(q) * 131 + 5) % sum.size();
      sum[i] = std::nextafter(sum[i], 1e30f);
    }
    memory_[ordinal] = bytesOf(sum);
    c.outputs.push_back(digest(ordinal, false));
    append(c);
  }

  uint64_t launches() const { return launches_; }
  void flush() { w_.flush(); }

 private:
  static uint64_t address(uint32_t ordinal) { return kBase + (ordinal - 1) * 0x10000; }
  static DeviceRange range(uint32_t ordinal) { return DeviceRange{address(ordinal), kBytes, ordinal, 0}; }

  RangeDigest digest(uint32_t ordinal, bool snapshot) {
    RangeDigest r;
    r.range = range(ordinal);
    r.digest = hashBuffer(memory_[ordinal]);
    r.chunkDigests = chunkDigests(memory_[ordinal]);
    if (snapshot) r.snapshot = w_.putBlob(memory_[ordinal], BlobEncoding::kBytePlanes4);
    return r;
  }

  template <class T>
  void append(const T& payload) {
    std::optional<Origin> origin;
    if constexpr (std::is_same_v<T, KernelLaunch> || std::is_same_v<T, Memcpy> || std::is_same_v<T, Collective>) {
      origin = std::exchange(next_, {});
    }
    w_.append(Event{seq_, 1000 * (seq_ + 1), 0, payload, std::move(origin)});
    ++seq_;
  }

  TraceWriter& w_;
  const recorder::RecorderOptions& opts_;
  std::map<uint32_t, std::vector<uint8_t>> memory_;
  recorder::WriteHistory history_;
  uint64_t seq_ = 0;
  uint64_t launches_ = 0;
  std::optional<Origin> next_;
  int64_t step_ = 0;
  uint64_t stepBegan_ = 0;  // launches before the current step
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fake_cuda_program identical|nondeterministic|seed|host_input|flaky|rng_draws|crash STATE_DIR\n");
    return 2;
  }
  const std::string scenario = argv[1];
  // A job that takes a port while it runs, as torchrun's rendezvous does:
  // a run started while another holds it fails at once, before any CUDA
  // work. A run gpurr bisect starts held (with its run before it) comes to
  // the port a little later, as a second program started would.
  const std::string port = std::string(argv[2]) + "/port";
  if (scenario == "port") {
    std::filesystem::create_directories(argv[2]);
    if (std::getenv("GPURR_START_GATE") != nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const int taken = ::open(port.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);  // as bind(): one wins
    if (taken < 0) {
      if (const char* seconds = std::getenv("FAKE_PORT_FAIL_SECONDS")) {
        std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(seconds)));
      }
      std::fprintf(stderr, "RuntimeError: The server socket has failed to listen on any local network address. "
                           "port: 29500 (errno: 98 - Address already in use)\n");
      return 1;
    }
    ::close(taken);
  }
  // FAKE_IGNORES_TERM=1: SIGTERM does not end it where it waits for its
  // turn, as a Python program that set a SIGTERM handler before its first
  // CUDA call (the handler would run only once that call returns).
  if (const char* ignores = std::getenv("FAKE_IGNORES_TERM"); ignores != nullptr && *ignores == '1')
    ::signal(SIGTERM, SIG_IGN);
  // The recorder reads its options at the program's first CUDA call, where
  // a run that gpurr bisect started early waits for its turn.
  std::vector<std::string> problems;
  recorder::RecorderOptions opts = recorder::awaitOptions(std::getenv, problems);
  const int run = bumpCounter(argv[2]);
  // STATE_DIR/order: when each run began and ended its CUDA work.
  const auto order = [&](const char* what) {
    std::ofstream(std::string(argv[2]) + "/order", std::ios::app) << what << ' ' << run << '\n';
  };
  order("begin");
  std::printf("fake training (%s), run %d\n", scenario.c_str(), run);
  std::fflush(stdout);

  if (scenario == "first_fails" && run == 1) {
    std::fprintf(stderr, "ModuleNotFoundError: No module named 'torch'\n");
    return 4;
  }
  pid_t second = -1;
  const bool job = scenario == "job";
  if (scenario == "ranks" || job) {
    // Two processes of one job, told apart by rank as torchrun does.
    std::fflush(nullptr);
    second = ::fork();
    ::setenv("RANK", second == 0 ? "1" : "0", 1);
    opts.rankName = job::rankName(std::getenv, problems);
    opts.rank = opts.rankName.rank;
  }
  for (const std::string& p : problems) std::fprintf(stderr, "gpurr: warning: %s\n", p.c_str());
  if (!opts.output) {
    std::printf("not recorded (GPURR_OUTPUT unset)\n");
    return 0;
  }
  std::string error;
  const auto dir = recorder::claimTraceDirectory(*opts.output, opts.rankName, error);
  if (!dir) {
    std::fprintf(stderr, "gpurr: warning: %s\n", error.c_str());
    return 0;
  }

  Header h;
  h.toolVersion = opts.toolVersion;
  h.commandLine.assign(argv, argv + argc);
  h.workingDirectory = "/work";
  h.environment = recorder::determinismEnvironment(environ);
  h.hostname = "gpu-node-1";
  h.pid = static_cast<uint32_t>(::getpid());
  h.gpus.push_back(GpuInfo{0, "NVIDIA H100 80GB HBM3", "GPU-6a1f0c2e-0000-4000-8000-000000000001", 132, 9, 0,
                           uint64_t{80} << 30, "0000:18:00.0"});
  h.driverVersion = 13000;
  h.cudaRuntimeVersion = 13000;
  h.rank = opts.rank.value_or(-1);
  h.options = recorder::toRecordingOptions(opts);
  TraceWriter w(*dir, h, WriterOptions{.blockBytes = 4096, .background = false});
  Program p(w, opts);

  const bool hostInput = scenario == "host_input";
  const bool nondeterministic =
      scenario == "nondeterministic" || ((scenario == "ranks" || job) && *opts.rank == 1);
  const bool seed = scenario == "seed";
  const bool flaky = scenario == "flaky";
  const bool rngDraws = scenario == "rng_draws";
  const bool crash = scenario == "crash" && run > 1;

  p.module();
  for (uint32_t a = 1; a <= 10; ++a) p.alloc(a);
  std::vector<float> batch(kBytes / 4), weights(kBytes / 4);
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i] = static_cast<float>(std::sin(0.01 * i + (hostInput ? run : 0)));
    weights[i] = static_cast<float>(std::cos(0.003 * i));
  }
  p.from(forward("aten::copy_", kToCuda, "", 33)).copyIn(1, batch);
  p.from(forward("aten::copy_", kToCuda, "", 34)).copyIn(2, weights);
  for (int shard = 0; job && *opts.rank == 1 && shard < 3; ++shard) {
    p.from(forward("aten::copy_", kToCuda, "", 35)).copyIn(10, weights);
  }
  p.from(forward("aten::index_select", {"aten::embedding", "aten::index_select"}, "net.embed", 16))
      .launch("_Z11embed_batchPfPKfi", {1}, 3, 1.0f);
  p.from(forward("aten::addmm", kLinear, "net.fc1", 17)).launch("_Z6linearPfPKfS1_i", {3, 2}, 4, 0.5f);
  p.from(forward("aten::relu", {"aten::relu"}, "net", 17))
      .launch("_Z4reluPfPKfi", {4}, 4, 1.0f, flaky && run == 3 ? 3 : 0);
  for (uint32_t draw = 1; draw <= (rngDraws ? 3 : 1); ++draw) {
    const bool reseeded = seed || (rngDraws && ((run == 2 && draw == 3) || (run == 3 && draw == 1)));
    p.from(forward("aten::native_dropout", {"aten::dropout", "aten::native_dropout"}, "net.drop", 18))
        .launch("_ZN2at6native20fused_dropout_kernelIfEEvPKfPfPhiNS_15PhiloxCudaStateE", {4}, 5, 1.1f, 0,
                reseeded ? 1000 + run : 1000);
  }
  p.from(forward("aten::addmm", kLinear, "net.fc2", 18)).launch("_Z6linearPfPKfS1_i", {5, 2}, 6, 0.5f);
  p.from(forward("aten::index_add_", {"aten::index_add_"}, "net", 19))
      .launch("_ZN2at6native19indexFuncLargeIndexIfEEvPfPKfPKll", {6}, 7, 1.0f,
              nondeterministic ? run : (flaky && run == 2 ? 4 : 0));
  if (job) {
    // Rank 1's index_add_ adds in another order in every run: the sum both
    // ranks receive moves with it.
    p.from(forward("c10d::allreduce_", {"c10d::allreduce_"}, "", 40)).allReduce(7, *opts.rank, run);
  }
  p.from(forward("aten::mse_loss", {"aten::mse_loss"}, "", 41)).launch("_Z8mse_lossPfPKfS1_i", {7, 1}, 8, 1.0f);
  if (crash) {
    p.flush();  // what a recorder killed here leaves: the blocks written so far
    std::printf("step 1: loss 0.4217\n");
    std::fprintf(stderr, "Traceback (most recent call last):\n  File \"train.py\", line 42, in <module>\n"
                         "RuntimeError: CUDA error: an illegal memory access was encountered\n");
    std::fflush(nullptr);
    std::_Exit(3);
  }
  // loss.backward() at line 42: the backward of line 41's mse_loss.
  p.from(Origin{"aten::mse_loss_backward",
                {"autograd::engine::evaluate_function: MseLossBackward0", "MseLossBackward0",
                 "aten::mse_loss_backward"},
                Phase::kBackward, "aten::mse_loss", "", kTrainPy, 41, 0, 0})
      .launch("_Z13loss_backwardPfPKfi", {8}, 9, -0.1f);
  p.from(forward("aten::_foreach_add_", {"Optimizer.step#SGD.step", "aten::_foreach_add_"}, "", 43))
      .launch("_Z10sgd_updatePfPKfS1_i", {9, 2}, 2, 1.0f);
  p.stepDone();
  p.from(forward("aten::sum", {"aten::sum"}, "", 44)).launch("_Z7sum_allPfPKfi", {8}, 10, 1.0f);
  p.from(forward("aten::_local_scalar_dense", {"aten::item", "aten::_local_scalar_dense"}, "", 44)).copyOut(10);
  // FAKE_RUN_SECONDS: a run that takes that long, so that gpurr bisect
  // starts the next one beside it.
  if (const char* s = std::getenv("FAKE_RUN_SECONDS")) {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(s)));
  }
  w.close();
  std::printf("step 1: loss 0.4217\n");
  if (second > 0) {
    int status = 0;
    ::waitpid(second, &status, 0);
  }
  if (scenario == "port") std::filesystem::remove(port);
  order("end");
  return 0;
}
