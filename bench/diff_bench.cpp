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
//              [--threads-from FRACTION] [--own-streams] [--extra-launch-at FRACTION] [--stale-every N]
//              [--origins] [--keep DIR]
//   diff_bench --launches 10000000 --rounds 1     # an hour of training: memory
//   diff_bench --stale-every 100   # a launch in 100 paired despite a stale word in run B
//   diff_bench --origins           # launches with PyTorch's origins (op, module, line, step)
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

#include "bench/bench_traces.h"
#include "diff/diff.h"
#include "trace_format/scan.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::bench;
using namespace gpurr::trace;
namespace fs = std::filesystem;

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
  double extraFraction = -1;  // of the way in; negative: none
  uint64_t staleEvery = 0;
  bool origins = false;
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
    } else if (std::strcmp(argv[i], "--extra-launch-at") == 0 && i + 1 < argc) {
      extraFraction = std::clamp(std::stod(argv[++i]), 0.0, 0.999999);
    } else if (std::strcmp(argv[i], "--stale-every") == 0 && i + 1 < argc) {
      staleEvery = std::stoull(argv[++i]);
    } else if (std::strcmp(argv[i], "--origins") == 0) {
      origins = true;
    } else if (std::strcmp(argv[i], "--keep") == 0 && i + 1 < argc) {
      keep = argv[++i];
    } else {
      fmt::print(stderr, "usage: diff_bench [--launches N] [--diverge-at FRACTION] [--rounds N] [--threads N] "
                         "[--host-threads N] [--threads-from FRACTION] [--own-streams] [--extra-launch-at FRACTION] "
                         "[--stale-every N] [--origins] [--keep DIR] [--diff-only] "
                         "[--scan-only DECODERS]\n");
      return 2;
    }
  }
  const fs::path dir = keep.empty() ? fs::temp_directory_path() / fmt::format("gpurr-diff-bench-{}", ::getpid()) : keep;
  const fs::path a = dir / "a.gpurr", b = dir / "b.gpurr";
  const uint64_t divergeAt = static_cast<uint64_t>(static_cast<double>(launches) * divergeFraction);
  const uint64_t threadsFrom = static_cast<uint64_t>(static_cast<double>(launches) * threadsFraction);
  const uint64_t extraAt =
      extraFraction < 0 ? UINT64_MAX : static_cast<uint64_t>(static_cast<double>(launches) * extraFraction);
  if (!fs::exists(a) || !fs::exists(b)) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const auto t0 = std::chrono::steady_clock::now();
    // In a child process, so that the peak memory reported is the diff's.
    const pid_t child = ::fork();
    if (child == 0) {
      TraceShape shape{launches, divergeAt, false, hostThreads, threadsFrom, ownStreams};
      shape.staleEvery = staleEvery;
      shape.origins = origins;
      writeTrace(a, shape);
      shape.runB = true;
      shape.extraAt = extraAt;
      writeTrace(b, shape);
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

  uint64_t renamed = 0;  // with --extra-launch-at: allocations the diff renamed
  uint64_t stale = 0;    // with --stale-every: launches paired despite a stale word
  auto runDiff = [&](unsigned t) {
    diff::DiffOptions options;
    options.threads = t;
    const diff::ProcessDiff result = diff::diffTraces(ra, rb, options, nullptr);
    const uint64_t syncsBefore = ownStreams ? divergeAt / 16 : 0;
    if (extraAt != UINT64_MAX) {
      // The extra launch is the one path divergence, the planted one the
      // one independent divergence.
      if (!result.firstDivergence || !result.firstDivergence->path || result.pathDivergenceCount != 1 ||
          result.blast.independentCount != 1 || result.blast.independent[0].a.seq != 256 + divergeAt + syncsBefore) {
        fmt::print(stderr, "diff did not find the extra launch at {} alone, then the divergence at launch {}\n",
                   extraAt, divergeAt);
        std::exit(1);
      }
      renamed = result.allocationsRenamed;
    } else if (staleEvery != 0 && result.pairedDespiteStaleWords.count < (divergeAt + staleEvery - 1) / staleEvery) {
      fmt::print(stderr, "diff paired {} launches despite a stale word, {} before the divergence\n",
                 result.pairedDespiteStaleWords.count, (divergeAt + staleEvery - 1) / staleEvery);
      std::exit(1);
    } else if (!result.firstDivergence || result.firstDivergence->a.seq != 256 + divergeAt + syncsBefore) {
      fmt::print(stderr, "diff did not find the divergence at launch {}\n", divergeAt);
      std::exit(1);
    }
    stale = result.pairedDespiteStaleWords.count;
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
  // Best of `rounds` of each pass, the passes side by side in every round.
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
  if (extraAt != UINT64_MAX) {
    fmt::print("one extra launch in run B at launch {}: {} of run B's allocations renamed\n", extraAt, renamed);
  }
  if (staleEvery != 0) {
    fmt::print("a stale word in run B every {} launches: {} launches paired despite it\n", staleEvery, stale);
  }
  const bool ok = diffSerial.cpu <= 1.3 * d;
  fmt::print("target (diff on 1 thread <= 1.3x decompression): {}\n", ok ? "met" : "NOT met");
  if (keep.empty()) fs::remove_all(dir);
  return ok ? 0 : 1;
}
