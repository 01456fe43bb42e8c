// Benchmark of `gpurr diff` on large traces: writes two traces of one million
// kernel launches each (a training loop of repeating kernels with pointer
// parameters and input/output digests) that diverge near the end, then times
// side by side, in CPU and wall time, best of --rounds: decompressing both
// traces' event blocks on one thread (the floor of any pass), the read paths
// over both, and the whole diff (reading, aligning, classifying, blast
// radius) on one thread and on every core; then the peak RSS of the process
// (the traces are written by a child process). The target: the diff on one
// thread within 1.3x the decompression.
//
//   diff_bench [--launches N] [--diverge-at FRACTION] [--rounds N] [--threads N] [--host-threads N]
//              [--threads-from FRACTION] [--own-streams] [--keep DIR]
//   diff_bench --launches 10000000 --rounds 1     # an hour of training: memory
#include <fmt/format.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <ctime>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "diff/diff.h"
#include "trace_format/scan.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ULL;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dULL;
  x ^= x >> 33;
  return x;
}

struct Kernel {
  std::string name;
  Dim3 grid, block;
  uint32_t pointers;
  uint32_t scalars;
};

std::vector<Kernel> kernels() {
  std::vector<Kernel> out;
  const char* bases[] = {
      "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13AUnaryFunctorIfffNS0_15binary_"
      "internal10MulFunctorIfEEEESt5arrayIPcLm2EEEEviT0_T1_",
      "sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize128x128x32_warpgroupsize1x1x1_execute_"
      "segment_k_off_kernel__5x_cublas",
      "_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastINS0_"
      "13BinaryFunctorIfffNS0_15binary_internal10AddFunctorIfEEEEEEvRNS_18TensorIteratorBaseERKT_"
      "EUliE_EEviT1_",
      "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfZNS0_"
      "11sum_functorIfffEclERNS_14TensorIteratorEEUlffE_EEjfLi4EEEEEvT1_",
      "_ZN2at6native27unrolled_elementwise_kernelINS0_21copy_device_to_deviceEEEviT_",
      "_ZN7cutlass7Kernel2I62cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8EEvNT_"
      "6ParamsE",
      "_ZN2at6native43_GLOBAL__N__softmax_forward_kernelILi4EffLi1EEEvPT0_PKT_iii",
      "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_23launch_fused_dropout_"
      "kernelIfEEvv_EUlvE_EEviT_",
  };
  for (uint32_t i = 0; i < 40; ++i) {
    Kernel k;
    k.name = fmt::format("{}_v{}", bases[i % std::size(bases)], i);
    k.grid = {64u << (i % 5), 1u + i % 3, 1};
    k.block = {128u << (i % 3), 1, 1};
    k.pointers = 2 + i % 3;
    k.scalars = 1 + i % 4;
    out.push_back(std::move(k));
  }
  return out;
}

// A training loop: a step of `kStepKernels` launches over a pool of buffers.
// `divergeAt` (launch index) makes run B's output differ there, as a
// nondeterministic kernel would. With `hostThreads` > 1, runs of 16 launches
// take turns on that many host threads from launch `threadsFrom` on (before
// it, the first thread alone), on the one stream (as autograd's thread
// launches the backward pass on the forward's stream in PyTorch), or
// with `ownStreams` each on a stream of its own, synchronised after each
// run: the next thread reads what it wrote (data handed over through the
// host).
void writeTrace(const fs::path& dir, uint64_t launches, uint64_t divergeAt, bool runB, uint32_t hostThreads,
                uint64_t threadsFrom, bool ownStreams) {
  Header h;
  h.toolVersion = "0.1.0";
  h.commandLine = {"python", "train.py"};
  h.gpus = {{0, "NVIDIA H100 80GB HBM3", "GPU-0", 132, 9, 0, 85520809984ULL, "0000:19:00.0"}};
  h.driverVersion = 13000;
  h.cudaRuntimeVersion = 13000;
  TraceWriter w(dir, h);
  const auto ks = kernels();
  const uint32_t kBuffers = 256;
  uint64_t seq = 0;
  const uint64_t base = runB ? 0x7f5500000000ULL : 0x7f1200000000ULL;
  auto address = [&](uint32_t ordinal) { return base + uint64_t{ordinal} * (8u << 20); };
  for (uint32_t b = 1; b <= kBuffers; ++b) {
    w.append({seq, seq * 1000, 0, Allocation{b, address(b), 8u << 20, AllocationKind::kDevice, 0, 0}});
    ++seq;
  }
  // What each buffer holds now: launches read these digests and write new
  // ones, so a difference spreads through the data as in a real program.
  std::vector<uint64_t> content(kBuffers + 1);
  for (uint32_t b = 1; b <= kBuffers; ++b) content[b] = mix(b);
  KernelLaunch k;
  k.context = 0x1000;
  k.stream = runB ? 0x55 : 0x77;
  k.module = 1;
  for (uint64_t i = 0; i < launches; ++i) {
    const Kernel& kd = ks[mix(i % 97) % ks.size()];
    k.function = kd.name;
    k.grid = kd.grid;
    k.block = kd.block;
    k.params.clear();
    k.paramLayout.clear();
    k.pointers.clear();
    k.inputs.clear();
    k.outputs.clear();
    for (uint32_t p = 0; p < kd.pointers; ++p) {
      const uint32_t ordinal = 1 + static_cast<uint32_t>(mix(i * 8 + p) % kBuffers);
      const uint64_t ptr = address(ordinal);
      appendPointerParam(k, ptr, ordinal, 0);
      RangeDigest r;
      r.range = {ptr, 1u << 20, ordinal, 0};
      if (p + 1 == kd.pointers) {
        uint64_t derived = i;
        for (const RangeDigest& input : k.inputs) derived = mix(derived ^ input.digest);
        r.digest = derived;
        if (runB && i == divergeAt) r.digest ^= 1;
        content[ordinal] = r.digest;
        if (i % 10 == 0) {
          r.chunkDigests.resize(16);
          for (size_t c = 0; c < 16; ++c) r.chunkDigests[c] = mix(r.digest + c);
          if (runB && i == divergeAt) r.chunkDigests[3] ^= 1;
        }
        k.outputs.push_back(r);
      } else {
        r.digest = content[ordinal];
        k.inputs.push_back(r);
      }
    }
    for (uint32_t s = 0; s < kd.scalars; ++s) {
      const uint32_t v = static_cast<uint32_t>(i % 1024 + s);
      appendParam(k, &v, 4, 4);
    }
    const uint32_t thread = i < threadsFrom ? 0 : static_cast<uint32_t>((i / 16) % hostThreads);
    if (ownStreams) k.stream = (runB ? 0x55 : 0x77) + thread;
    w.append({seq, seq * 1000, thread, k});
    ++seq;
    if (ownStreams && i % 16 == 15) {
      w.append({seq, seq * 1000, thread, Sync{SyncKind::kStreamSynchronize, k.stream, 0}});
      ++seq;
    }
  }
  w.close();
}

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// CPU time of this (single-threaded) process: on a shared machine, wall time
// also counts the time other processes held the core.
struct CpuClock {
  using duration = std::chrono::nanoseconds;
  static std::chrono::time_point<CpuClock, duration> now() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return std::chrono::time_point<CpuClock, duration>(
        duration(int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec));
  }
};

// How many cores this process gets now: `threads` busy threads for 0.3 s,
// the CPU time they were given over the wall time.
double coresAvailable(unsigned threads) {
  const auto c0 = CpuClock::now();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t) {
    ts.emplace_back([t0] {
      volatile uint64_t x = 0;
      while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(300)) {
        for (int i = 0; i < 10000; ++i) x = x + 1;
      }
    });
  }
  for (std::thread& t : ts) t.join();
  return seconds(CpuClock::now() - c0) / seconds(std::chrono::steady_clock::now() - t0);
}

// Peak resident memory of this process so far, in MiB.
double peakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t launches = 1'000'000;
  fs::path keep;
  bool diffOnly = false;
  int scanOnly = -1;
  int rounds = 5;
  double divergeFraction = 0.99;  // of the way in
  unsigned threads = 0;
  uint32_t hostThreads = 1;
  double threadsFraction = 0;  // of the way in
  bool ownStreams = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--launches") == 0 && i + 1 < argc) {
      launches = std::stoull(argv[++i]);
    } else if (std::strcmp(argv[i], "--diverge-at") == 0 && i + 1 < argc) {
      divergeFraction = std::clamp(std::stod(argv[++i]), 0.0, 0.999999);
    } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::max(1, std::stoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = static_cast<unsigned>(std::stoul(argv[++i]));
    } else if (std::strcmp(argv[i], "--host-threads") == 0 && i + 1 < argc) {
      hostThreads = std::max(1u, static_cast<uint32_t>(std::stoul(argv[++i])));
    } else if (std::strcmp(argv[i], "--threads-from") == 0 && i + 1 < argc) {
      threadsFraction = std::clamp(std::stod(argv[++i]), 0.0, 1.0);
    } else if (std::strcmp(argv[i], "--own-streams") == 0) {
      ownStreams = true;
    } else if (std::strcmp(argv[i], "--scan-only") == 0 && i + 1 < argc) {
      scanOnly = std::stoi(argv[++i]);  // for profiling: one trace scanned with N decoding threads, ten times
    } else if (std::strcmp(argv[i], "--diff-only") == 0) {
      diffOnly = true;  // for profiling: just the diff on one thread, ten times
    } else if (std::strcmp(argv[i], "--keep") == 0 && i + 1 < argc) {
      keep = argv[++i];
    } else {
      fmt::print(stderr, "usage: diff_bench [--launches N] [--diverge-at FRACTION] [--rounds N] [--threads N] "
                         "[--host-threads N] [--threads-from FRACTION] [--own-streams] [--keep DIR] [--diff-only] "
                         "[--scan-only DECODERS]\n");
      return 2;
    }
  }
  const fs::path dir = keep.empty() ? fs::temp_directory_path() / fmt::format("gpurr-diff-bench-{}", ::getpid()) : keep;
  const fs::path a = dir / "a.gpurr", b = dir / "b.gpurr";
  const uint64_t divergeAt = static_cast<uint64_t>(static_cast<double>(launches) * divergeFraction);
  const uint64_t threadsFrom = static_cast<uint64_t>(static_cast<double>(launches) * threadsFraction);
  if (!fs::exists(a) || !fs::exists(b)) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const auto t0 = std::chrono::steady_clock::now();
    // In a child process, so that the peak memory reported is the diff's.
    const pid_t child = ::fork();
    if (child == 0) {
      writeTrace(a, launches, divergeAt, false, hostThreads, threadsFrom, ownStreams);
      writeTrace(b, launches, divergeAt, true, hostThreads, threadsFrom, ownStreams);
      std::_Exit(0);
    }
    int status = 0;
    if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      fmt::print(stderr, "writing the traces failed\n");
      return 1;
    }
    fmt::print("wrote two traces of {} launches in {:.2f} s\n", launches,
               seconds(std::chrono::steady_clock::now() - t0));
  }
  const TraceReader ra(a), rb(b);
  fmt::print("events file: {:.1f} MiB compressed, {:.1f} MiB uncompressed per trace\n",
             ra.eventsFileBytes() / 1048576.0, ra.uncompressedBytes() / 1048576.0);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned parallel = threads != 0 ? threads : cores;

  auto runDiff = [&](unsigned t) {
    diff::DiffOptions options;
    options.threads = t;
    const diff::ProcessDiff result = diff::diffTraces(ra, rb, options, nullptr);
    const uint64_t syncsBefore = ownStreams ? divergeAt / 16 : 0;
    if (!result.firstDivergence || result.firstDivergence->a.seq != 256 + divergeAt + syncsBefore) {
      fmt::print(stderr, "diff did not find the divergence at launch {}\n", divergeAt);
      std::exit(1);
    }
  };
  if (scanOnly >= 0) {
    for (int round = 0; round < 10; ++round) {
      uint64_t n = 0;
      scanEvents(ra, [&](const ScanEvent&) { ++n; return true; }, 0, static_cast<unsigned>(scanOnly));
    }
    return 0;
  }
  if (diffOnly) {
    for (int round = 0; round < 10; ++round) runDiff(1);
    return 0;
  }
  const double availableBefore = coresAvailable(parallel);
  // Best of `rounds` of each pass, CPU time (all threads of the process) and
  // wall time, the passes side by side in every round.
  struct Best {
    double cpu = 1e9, wall = 1e9;
  };
  auto timed = [](Best& best, auto&& f) {
    const auto c0 = CpuClock::now();
    const auto w0 = std::chrono::steady_clock::now();
    f();
    best.cpu = std::min(best.cpu, seconds(CpuClock::now() - c0));
    best.wall = std::min(best.wall, seconds(std::chrono::steady_clock::now() - w0));
  };
  Best decompress, forEach, scan, diffSerial, diffParallel, scanParallel, scanBlocks;
  const bool small = launches <= 2'000'000;  // the slow forEach pass only on small traces
  for (int round = 0; round < rounds; ++round) {
    timed(decompress, [&] {
      const uint64_t bytes = decompressAll(ra) + decompressAll(rb);
      if (bytes != ra.uncompressedBytes() + rb.uncompressedBytes()) {
        fmt::print(stderr, "decompressed {} bytes, expected {}\n", bytes,
                   ra.uncompressedBytes() + rb.uncompressedBytes());
        std::exit(1);
      }
    });
    if (small) {
      timed(forEach, [&] {
        uint64_t n = 0;
        ra.forEach([&](const Event&) { ++n; return true; });
        rb.forEach([&](const Event&) { ++n; return true; });
      });
    }
    timed(scan, [&] {
      uint64_t n = 0;
      scanEvents(ra, [&](const ScanEvent&) { ++n; return true; });
      scanEvents(rb, [&](const ScanEvent&) { ++n; return true; });
    });
    // As the diff reads them: each trace on a thread of its own, with
    // decoding threads ahead when there are more than two cores.
    timed(scanParallel, [&] {
      const unsigned decoders = parallel >= 4 ? (parallel - 2) / 2 : 0;
      uint64_t n = 0;
      std::thread other([&] { scanEvents(rb, [&](const ScanEvent&) { ++n; return true; }, 0, decoders); });
      uint64_t m = 0;
      scanEvents(ra, [&](const ScanEvent&) { ++m; return true; }, 0, decoders);
      other.join();
    });
    // One trace after the other, each decoded by `parallel` threads ahead
    // of the caller (EventScanner).
    timed(scanBlocks, [&] {
      uint64_t n = 0;
      scanEvents(ra, [&](const ScanEvent&) { ++n; return true; }, 0, parallel);
      scanEvents(rb, [&](const ScanEvent&) { ++n; return true; }, 0, parallel);
    });
    timed(diffSerial, [&] { runDiff(1); });
    timed(diffParallel, [&] { runDiff(parallel); });
  }
  const double d = decompress.cpu;
  const double available = coresAvailable(parallel);
  auto row = [&](const char* what, const Best& b) {
    fmt::print("{:<42} {:7.3f} s  {:7.3f} s   {:5.2f}x    {:5.2f}x\n", what, b.cpu, b.wall, b.cpu / d,
               b.wall / d);
  };
  fmt::print("{} cores, of which this process got {:.1f} before the rounds and {:.1f} after (a shared "
             "machine);\nbest of {} rounds; ratios to the CPU time of decompressing both\n",
             cores, availableBefore, available, rounds);
  fmt::print("{:<42} {:>9}  {:>9}   {:>6}    {:>6}\n", "", "CPU", "wall", "CPU", "wall");
  row("decompress both (1 thread)", decompress);
  if (small) row("TraceReader::forEach both (1 thread)", forEach);
  row("scanEvents both (1 thread)", scan);
  row(fmt::format("scanEvents both, {} decoding threads each", parallel).c_str(), scanBlocks);
  row("scanEvents both, a thread per trace", scanParallel);
  row("gpurr diff (1 thread)", diffSerial);
  row(fmt::format("gpurr diff ({} threads)", parallel).c_str(), diffParallel);
  fmt::print("peak RSS of the process: {:.0f} MiB\n", peakRssMiB());
  const bool ok = diffSerial.cpu <= 1.3 * d;
  fmt::print("target (diff on 1 thread <= 1.3x decompression): {}\n", ok ? "met" : "NOT met");
  if (keep.empty()) fs::remove_all(dir);
  return ok ? 0 : 1;
}
