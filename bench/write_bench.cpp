// Benchmark of TraceWriter against zstd -1: writes a realistic stream of one
// million kernel launches (a few dozen kernels repeating as in training steps,
// pointer and scalar parameters, 1-4 input and output ranges with random
// digests, occasional copies, sets, syncs, allocations and frees), then
// compresses the same uncompressed frames with the zstd command-line tool and
// with libzstd, both at level 1. The goal: the writer's throughput is at
// least 0.9 of zstd -1's, so that recording costs about what compressing the
// events costs.
//
//   write_bench [--launches N] [--block-bytes B] [--level L] [--inline] [--write-only]
//               [--dir DIR] [--keep]
//
// Throughputs are of uncompressed frame bytes. The writer's time runs from
// its construction to the end of close(), appending pre-generated events;
// its CPU time is the process's over that span (both of its threads).
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "trace_format/trace.h"

using namespace gpurr::trace;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

extern char** environ;

namespace {

constexpr size_t kPoolSteps = 64;  // about 10,000 launches, 6 MB of frames

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double cpuOf(const rusage& u) {
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// CPU time of the whole process (all threads), or of the calling thread.
double processCpu() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return cpuOf(u);
}

double threadCpu() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// xorshift64*: fast, seeded, so every run writes the same events.
struct Rng {
  uint64_t s;
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1DULL;
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
};

struct Buffer {
  uint32_t ordinal;
  uint64_t address;
  uint64_t size;
};

// One kernel of the model: its name, block shape and parameter shape.
struct Kernel {
  std::string name;
  Dim3 block;
  uint32_t pointers;  // 8-byte pointer parameters, first
  uint32_t scalars;   // 4-byte scalars after them
  uint32_t inputs, outputs;
  bool philox;        // takes a (seed, offset) pair by value
};

std::vector<Kernel> makeKernels(Rng& rng) {
  // PyTorch, cuBLAS and cuDNN names as a profiler shows them, in float,
  // half and bfloat16 flavours.
  const char* bases[] = {
      "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13AUnaryFunctorI{T}{T}{T}NS0_15binary_"
      "internal10MulFunctorI{T}EEEESt5arrayIPcLm2EEEEviT0_T1_",
      "sm90_xmma_gemm_{T}{T}_tf32f32_f32_nt_n_tilesize128x128x32_warpgroupsize1x1x1_execute_"
      "segment_k_off_kernel__5x_cublas",
      "_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastINS0_"
      "13BinaryFunctorI{T}{T}{T}NS0_15binary_internal10AddFunctorI{T}EEEEEEvRNS_18TensorIteratorBaseE"
      "RKT_EUliE_EEviT1_",
      "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpI{T}NS0_14func_wrapper_tI{T}ZNS0_"
      "11sum_functorI{T}{T}{T}EclERNS_14TensorIteratorEEUl{T}{T}E_EEjfLi4EEEEEvT1_",
      "_ZN2at6native27unrolled_elementwise_kernelINS0_21copy_device_to_deviceI{T}EEEviT_",
      "_ZN2at6native43_GLOBAL__N__softmax_forward_kernelILi4E{T}{T}Li1EEEvPT0_PKT_iii",
      "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_23launch_fused_dropout_"
      "kernelI{T}EEvv_EUlvE_EEviT_",
      "_ZN2at6native24layer_norm_backward_kernelI{T}{T}EEvPKT_S4_PKT0_S7_S4_PS2_S8_S8_i",
      "_ZN2at6native18cunn_SoftMaxForwardILi4E{T}{T}{T}NS0_22SoftMaxForwardEpilogueEEEvPT2_PKT0_i",
      "_ZN2at6native61_GLOBAL__N__multi_tensor_apply_kernel_adam_1TensorListMetadataILi4EEENS0_"
      "12AdamFunctorI{T}Li4EEEJ{T}{T}{T}{T}{T}{T}bbEEvT_T0_DpT1_",
      "cudnn_infer_ampere_scudnn_128x64_relu_medium_nn_v1_{T}",
      "_ZN8internal5gemvx6kernelIii{T}{T}{T}{T}Lb0ELb1ELb1ELb0ELi7ELb0E16cublasGemvParamsI16cublasGemv"
      "TensorStridedIK{T}ES6_S4_I{T}E{T}EEENSt9enable_ifIXntT5_EvE4typeET11_",
  };
  const char* types[] = {"f", "N3c104HalfE", "N3c108BFloat16E"};
  std::vector<Kernel> out;
  for (const char* type : types) {
    for (const char* base : bases) {
      std::string name = base;
      for (size_t at; (at = name.find("{T}")) != std::string::npos;) name.replace(at, 3, type);
      Kernel k;
      k.name = name;
      k.block = {128u << rng.below(3), 1, 1};
      k.pointers = 1 + rng.below(6);
      k.scalars = rng.below(8);
      k.inputs = 1 + rng.below(std::min(4u, k.pointers));
      k.outputs = 1 + rng.below(4);
      k.philox = name.find("dropout") != std::string::npos;
      out.push_back(std::move(k));
    }
  }
  return out;
}

// One launch of a training step: which kernel, on which buffers, with which
// of a few grid sizes.
struct Call {
  uint32_t kernel;
  std::vector<uint32_t> buffers;
  Dim3 grid;
};

class Workload {
 public:
  explicit Workload(uint64_t seed) : rng_{seed} {
    kernels_ = makeKernels(rng_);
    uint64_t address = 0x7f3a00000000ULL;
    for (uint32_t i = 1; i <= 400; ++i) {
      const uint64_t size = uint64_t{4096} << rng_.below(15);
      buffers_.push_back({i, address, size});
      address += (size + 0x1fffff) & ~uint64_t{0x1fffff};
    }
    // A step: forward and backward through a few dozen layers, then the
    // optimizer; about 150 launches.
    for (uint32_t i = 0; i < 150; ++i) {
      Call c;
      c.kernel = rng_.below(static_cast<uint32_t>(kernels_.size()));
      const Kernel& k = kernels_[c.kernel];
      for (uint32_t p = 0; p < k.pointers; ++p) c.buffers.push_back(rng_.below(400));
      c.grid = {1u + rng_.below(4096), 1u + (rng_.below(4) == 0 ? rng_.below(16) : 0), 1};
      step_.push_back(std::move(c));
    }
  }

  // Appends the events of one training step (or what is left of the launch
  // budget) to `out`; returns the number of launches.
  uint64_t step(std::vector<Event>& out, uint64_t maxLaunches) {
    out.clear();
    auto add = [&](Payload p) {
      time_ += 2000 + rng_.below(20000);
      out.push_back(Event{seq_++, time_, rng_.below(16) == 0 ? 1u : 0u, std::move(p)});
    };
    // The batch arrives from the host.
    const Buffer& batch = buffers_[stepIndex_ % 8];
    Memcpy copy;
    copy.kind = MemcpyKind::kHostToDevice;
    copy.stream = 0x7;
    copy.async = true;
    copy.size = std::min<uint64_t>(batch.size, 1 << 20);
    copy.dst = {batch.address, copy.size, batch.ordinal, 0};
    copy.src = {0x55d0c0de0000 + (stepIndex_ % 2) * copy.size, copy.size, 0, 0};
    copy.digest = rng_.next();
    add(std::move(copy));
    uint64_t launches = 0;
    for (const Call& c : step_) {
      if (launches == maxLaunches) break;
      if (rng_.below(40) == 0) {
        // Gradients zeroed, a temporary allocated and freed by the caching
        // allocator, or a wait between streams.
        const Buffer& b = buffers_[c.buffers[0]];
        switch (rng_.below(3)) {
          case 0: {
            Memset set;
            set.stream = 0x7;
            set.async = true;
            set.dst = {b.address, b.size, b.ordinal, 0};
            set.digest = rng_.next();
            add(set);
            break;
          }
          case 1: {
            const uint32_t ordinal = nextOrdinal_++;
            const uint64_t address = 0x7f9000000000ULL + uint64_t{ordinal} * 0x200000;
            add(Allocation{ordinal, address, 0x200000, AllocationKind::kAsync, 0, 0x7});
            add(Free{ordinal, address});
            break;
          }
          default:
            add(Sync{SyncKind::kStreamWaitEvent, 0x7, 0xe0 + rng_.below(4)});
        }
      }
      add(launch(c));
      ++launches;
    }
    Memcpy loss;
    loss.kind = MemcpyKind::kDeviceToHost;
    loss.stream = 0x7;
    loss.size = 4;
    loss.dst = {0x55d0c0df0000, 4, 0, 0};
    loss.src = {buffers_[9].address, 4, buffers_[9].ordinal, 0};
    loss.digest = rng_.next();
    add(std::move(loss));
    add(Sync{SyncKind::kStreamSynchronize, 0x7, 0});
    ++stepIndex_;
    return launches;
  }

 private:
  KernelLaunch launch(const Call& c) {
    const Kernel& k = kernels_[c.kernel];
    KernelLaunch l;
    l.context = 0x5581a0c0;
    l.stream = 0x7;
    l.module = 1 + c.kernel % 5;
    l.function = k.name;
    l.grid = c.grid;
    l.block = k.block;
    l.params.reserve(k.pointers * 8 + k.scalars * 4 + 16);
    for (uint32_t p = 0; p < k.pointers; ++p) {
      const Buffer& b = buffers_[c.buffers[p]];
      // Views into the buffer: some at an offset.
      const uint64_t offset = (p % 3 == 2) ? (b.size / 2) & ~uint64_t{255} : 0;
      const uint64_t address = b.address + offset;
      appendPointerParam(l, address, b.ordinal, offset);
    }
    for (uint32_t s = 0; s < k.scalars; ++s) {
      // Sizes and strides stay; a step counter and a learning rate change.
      uint32_t v = s == 0 ? static_cast<uint32_t>(stepIndex_) : s == 1 ? 0x3a83126fu - static_cast<uint32_t>(stepIndex_) : 1u << (s + 4);
      appendParam(l, &v, 4, 4);
    }
    if (k.philox) {
      const uint64_t seed = 0x5eed, offset = philoxOffset_;
      philoxOffset_ += 16;
      const uint64_t state[2] = {seed, offset};
      const uint32_t at = appendParam(l, state, 16, 8);
      l.annotations.push_back(RngState{"philox", "cuda:0", seed, offset, at});
    }
    auto range = [&](uint32_t p) {
      const Buffer& b = buffers_[c.buffers[p % c.buffers.size()]];
      RangeDigest r;
      r.range = {b.address, b.size, b.ordinal, 0};
      r.digest = rng_.next();
      return r;
    };
    for (uint32_t i = 0; i < k.inputs; ++i) l.inputs.push_back(range(i));
    for (uint32_t i = 0; i < k.outputs; ++i) l.outputs.push_back(range(k.pointers - 1 - i));
    return l;
  }

  Rng rng_;
  std::vector<Kernel> kernels_;
  std::vector<Buffer> buffers_;
  std::vector<Call> step_;
  uint64_t seq_ = 0, time_ = 0, stepIndex_ = 0, philoxOffset_ = 0;
  uint32_t nextOrdinal_ = 1000;
};

struct Timing {
  double wall = 0;
  double cpu = 0;
};

// Runs a command, returning its wall and CPU time; exits on failure.
Timing timeCommand(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto start = Clock::now();
  pid_t pid;
  if (::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
    std::fprintf(stderr, "write_bench: cannot run %s: is it installed?\n", argv[0]);
    std::exit(1);
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  const double t = seconds(Clock::now() - start);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "write_bench: %s failed\n", argv[0]);
    std::exit(1);
  }
  return {t, cpuOf(usage)};
}

std::vector<uint8_t> readRange(std::ifstream& in, uint64_t offset, uint64_t size) {
  std::vector<uint8_t> out(size);
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(size));
  if (!in) throw TraceError("cannot read the events file back");
  return out;
}

uint64_t parseNumber(const char* flag, const char* text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (!*text || *end) {
    std::fprintf(stderr, "write_bench: %s needs a number, got \"%s\"\n", flag, text);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t launches = 1'000'000;
  WriterOptions options;
  fs::path root = fs::temp_directory_path();
  bool keep = false, writeOnly = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    if (a == "--launches" && hasValue) {
      launches = parseNumber("--launches", argv[++i]);
    } else if (a == "--block-bytes" && hasValue) {
      options.blockBytes = parseNumber("--block-bytes", argv[++i]);
    } else if (a == "--level" && hasValue) {
      options.zstdLevel = static_cast<int>(parseNumber("--level", argv[++i]));
    } else if (a == "--dir" && hasValue) {
      root = argv[++i];
    } else if (a == "--inline") {
      options.background = false;  // compress on the caller's thread
    } else if (a == "--write-only") {
      writeOnly = true;  // for profiling the writer
    } else if (a == "--keep") {
      keep = true;
    } else {
      std::fprintf(stderr,
                   "usage: write_bench [--launches N] [--block-bytes B] [--level L] [--inline] "
                   "[--write-only] [--dir DIR] [--keep]\n");
      return 2;
    }
  }
  std::string templ = (root / "gpurr-write-bench-XXXXXX").string();
  if (!::mkdtemp(templ.data())) {
    std::fprintf(stderr, "write_bench: cannot create a directory in %s\n", root.c_str());
    return 1;
  }
  const fs::path work = templ;
  const fs::path trace = work / "bench.gpurr";
  try {
    // ---- the writer
    Header header;
    header.toolVersion = "bench";
    header.commandLine = {"python", "train.py"};
    // The events come from a pool of pre-generated training steps, replayed
    // with their sequence numbers and times shifted, so that the timed loop
    // holds nothing but the writer: generating them between appends would
    // hide the writer's background compression in untimed gaps. The pool
    // spans more than a zstd window, so repeats do not help compression.
    Workload workload(42);
    std::vector<std::vector<Event>> pool(kPoolSteps);
    for (auto& step : pool) workload.step(step, UINT64_MAX);
    const uint64_t poolEvents = pool.back().back().seq + 1;
    const uint64_t poolSpanNs = pool.back().back().timeNs + 10'000;
    uint64_t written = 0, events = 0, writerMemory = 0;
    const double cpuStart = processCpu();
    const auto start = Clock::now();
    {
      TraceWriter writer(trace, header, options);
      writerMemory = writer.memoryBound();
      for (uint64_t round = 0; written < launches; ++round) {
        for (auto& step : pool) {
          for (Event& e : step) {
            const bool launch = std::holds_alternative<KernelLaunch>(e.payload);
            if (launch && written == launches) break;
            e.seq += round * poolEvents;
            e.timeNs += round * poolSpanNs;
            writer.append(e);
            e.seq -= round * poolEvents;
            e.timeNs -= round * poolSpanNs;
            written += launch;
            ++events;
          }
          if (written == launches) break;
        }
      }
      writer.close();
    }
    const Clock::duration writing = Clock::now() - start;
    const double writerCpu = processCpu() - cpuStart;
    rusage peak{};
    ::getrusage(RUSAGE_SELF, &peak);
    // Beside the time: the host memory the writer holds at most (its queued
    // blocks), and the process's peak (the workload's events included).
    char memoryLine[160];
    std::snprintf(memoryLine, sizeof(memoryLine),
                  "memory          writer at most %.1f MiB (blocks queued and being written); process peak %.1f MiB\n",
                  static_cast<double>(writerMemory) / 1048576.0, static_cast<double>(peak.ru_maxrss) / 1024.0);
    if (writeOnly) {
      std::printf("writer          %.3f s, %.0f events/s; cpu %.3f s\n", seconds(writing),
                  static_cast<double>(events) / seconds(writing), writerCpu);
      std::fputs(memoryLine, stdout);
      if (!keep) fs::remove_all(work);
      return 0;
    }

    // ---- the same frames, uncompressed, for zstd
    TraceReader reader(trace);
    const fs::path eventsFile = trace / "events";
    const uint64_t eventsBytes = fs::file_size(eventsFile);
    const fs::path frames = work / "frames";
    uint64_t frameBytes = 0;
    {
      std::ifstream in(eventsFile, std::ios::binary);
      std::ofstream out(frames, std::ios::binary | std::ios::trunc);
      const auto& blocks = reader.blocks();
      for (size_t i = 0; i < blocks.size(); ++i) {
        const uint64_t end = i + 1 < blocks.size() ? blocks[i + 1].fileOffset : eventsBytes;
        const auto compressed = readRange(in, end - blocks[i].compressedSize, blocks[i].compressedSize);
        std::vector<uint8_t> plain(blocks[i].uncompressedSize);
        const size_t n = ZSTD_decompress(plain.data(), plain.size(), compressed.data(), compressed.size());
        if (ZSTD_isError(n) || n != plain.size()) throw TraceError("a block does not decompress");
        out.write(reinterpret_cast<const char*>(plain.data()), static_cast<std::streamsize>(n));
        frameBytes += n;
      }
      if (!out) throw TraceError("cannot write " + frames.string());
    }
    // The trace's bytes, to check that a change to the writer kept its output.
    std::vector<uint8_t> all;
    {
      std::ifstream in(eventsFile, std::ios::binary);
      all = readRange(in, 0, eventsBytes);
    }
    const BlobId digest = blobIdOf(all);
    all = {};

    // ---- zstd -1, the tool
    const fs::path cliOut = work / "frames.zst";
    const Timing cli = timeCommand({"zstd", "-1", "-q", "-f", frames.string(), "-o", cliOut.string()});
    const uint64_t cliBytes = fs::file_size(cliOut);

    // ---- zstd level 1, in process, streaming over the same bytes
    double libSeconds = 0, libCpu = 0;
    uint64_t libBytes = 0;
    {
      ZSTD_CCtx* cctx = ZSTD_createCCtx();
      ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
      ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);  // as `zstd -1` (and the writer) do
      std::ifstream in(frames, std::ios::binary);
      std::vector<uint8_t> chunk(ZSTD_CStreamInSize() * 8);
      std::vector<uint8_t> sink(ZSTD_CStreamOutSize());
      for (uint64_t left = frameBytes; ;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
        in.read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(n));
        left -= n;
        const ZSTD_EndDirective mode = left == 0 ? ZSTD_e_end : ZSTD_e_continue;
        ZSTD_inBuffer input{chunk.data(), n, 0};
        const auto t0 = Clock::now();
        const double c0 = threadCpu();
        for (bool done = false; !done;) {
          ZSTD_outBuffer output{sink.data(), sink.size(), 0};
          const size_t remaining = ZSTD_compressStream2(cctx, &output, &input, mode);
          if (ZSTD_isError(remaining)) throw TraceError(ZSTD_getErrorName(remaining));
          libBytes += output.pos;
          done = mode == ZSTD_e_end ? remaining == 0 : input.pos == input.size;
        }
        libSeconds += seconds(Clock::now() - t0);
        libCpu += threadCpu() - c0;
        if (left == 0) break;
      }
      ZSTD_freeCCtx(cctx);
    }

    const double mb = static_cast<double>(frameBytes) / 1e6;
    const double writerSeconds = seconds(writing);
    std::printf("workload        %llu events, %llu launches, %zu blocks of %zu bytes, level %d\n",
                static_cast<unsigned long long>(events), static_cast<unsigned long long>(written),
                reader.blocks().size(), options.blockBytes, options.zstdLevel);
    std::printf("uncompressed    %.1f MB of frames, %.0f bytes per event\n", mb,
                static_cast<double>(frameBytes) / static_cast<double>(events));
    std::printf("writer          %.3f s, %.0f events/s, %.1f MB/s; cpu %.3f s, %.1f MB/s per core\n",
                writerSeconds, static_cast<double>(events) / writerSeconds, mb / writerSeconds,
                writerCpu, mb / writerCpu);
    std::fputs(memoryLine, stdout);
    std::printf("on disk         %llu bytes of events, %.1f bytes per launch, ratio %.2f\n",
                static_cast<unsigned long long>(eventsBytes),
                static_cast<double>(eventsBytes) / static_cast<double>(written),
                static_cast<double>(frameBytes) / static_cast<double>(eventsBytes));
    std::printf("zstd -1 (tool)  %.3f s, %.1f MB/s; cpu %.3f s; %llu bytes\n", cli.wall,
                mb / cli.wall, cli.cpu, static_cast<unsigned long long>(cliBytes));
    std::printf("zstd 1 (lib)    %.3f s, %.1f MB/s; cpu %.3f s; %llu bytes\n", libSeconds,
                mb / libSeconds, libCpu, static_cast<unsigned long long>(libBytes));
    // Throughput ratios are inverse time ratios over the same bytes.
    std::printf("time ratio      wall: %.2f of the tool, %.2f of the library; cpu: %.2f, %.2f "
                "(writer / zstd throughput, goal >= 0.9)\n",
                cli.wall / writerSeconds, libSeconds / writerSeconds, cli.cpu / writerCpu,
                libCpu / writerCpu);
    std::printf("size ratio      %.3f of the tool, %.3f of the library (writer / zstd bytes)\n",
                static_cast<double>(eventsBytes) / static_cast<double>(cliBytes),
                static_cast<double>(eventsBytes) / static_cast<double>(libBytes));
    std::printf("events digest   %s\n", digest.hex().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_bench: %s\n", e.what());
    if (!keep) fs::remove_all(work);
    return 1;
  }
  if (keep) {
    std::printf("kept            %s\n", work.c_str());
  } else {
    fs::remove_all(work);
  }
  return 0;
}
