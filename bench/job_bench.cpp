// Benchmark of `gpurr diff` on a distributed job: writes two runs of a job of
// --ranks ranks (default 64), one trace each of --launches launches (default
// 100,000) with an all-reduce every --collective-every launches, rank 5
// diverging in run B (--diverge-at of the way in) and every rank receiving
// the divergence at the next all-reduce; then times, wall time, best of
// --rounds: decompressing every trace once on every core (the floor of any
// pass over the job), the directory comparison (report::compareRuns: the
// ranks diffed side by side), and the report's job view across ranks
// (report::jobView, from what the comparison gathered); and the peak
// resident memory of the process after each (the traces are written by a
// child process). The goals: both together (what `gpurr diff A/ B/` does)
// within 1.5x the decompression, and within 2 GiB of memory. Exit status 0
// when met, 3 when a goal is missed, 1 when the diff's answer is wrong.
//
//   job_bench [--ranks N] [--launches N] [--collective-every N] [--diverge-at FRACTION] [--rounds N] [--keep DIR]
//   job_bench --launches 2000     # a quick run
#include <fmt/format.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_traces.h"
#include "common/parallel.h"
#include "report/compare.h"
#include "report/job.h"
#include "trace_format/scan.h"

using namespace gpurr;
using namespace gpurr::bench;
namespace fs = std::filesystem;

namespace {

constexpr int32_t kDivergingRank = 5;

std::string rankName(int32_t rank) { return fmt::format("rank{}.gpurr", rank); }

}  // namespace

int main(int argc, char** argv) {
  int32_t ranks = 64;
  uint64_t launches = 100'000;
  uint64_t collectiveEvery = 1000;
  double divergeFraction = 0.9;
  int rounds = 3;
  fs::path keep;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
      ranks = std::max(kDivergingRank + 1, std::stoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--launches") == 0 && i + 1 < argc) {
      launches = std::max<uint64_t>(10, std::stoull(argv[++i]));
    } else if (std::strcmp(argv[i], "--collective-every") == 0 && i + 1 < argc) {
      collectiveEvery = std::max<uint64_t>(1, std::stoull(argv[++i]));
    } else if (std::strcmp(argv[i], "--diverge-at") == 0 && i + 1 < argc) {
      divergeFraction = std::clamp(std::stod(argv[++i]), 0.0, 0.999999);
    } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::max(1, std::stoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--keep") == 0 && i + 1 < argc) {
      keep = argv[++i];
    } else {
      fmt::print(stderr, "usage: job_bench [--ranks N] [--launches N] [--collective-every N] [--diverge-at FRACTION] "
                         "[--rounds N] [--keep DIR]\n");
      return 2;
    }
  }
  collectiveEvery = std::min(collectiveEvery, launches);
  const fs::path dir = keep.empty() ? fs::temp_directory_path() / fmt::format("gpurr-job-bench-{}", ::getpid()) : keep;
  const fs::path a = dir / "a", b = dir / "b";
  const uint64_t divergeAt = static_cast<uint64_t>(static_cast<double>(launches) * divergeFraction);
  const unsigned cores = scanThreads(0);
  if (!fs::exists(a / rankName(ranks - 1)) || !fs::exists(b / rankName(ranks - 1))) {
    fs::remove_all(dir);
    fs::create_directories(a);
    fs::create_directories(b);
    const auto t0 = std::chrono::steady_clock::now();
    // In a child process, so that the peak memory reported is the diff's.
    const pid_t child = ::fork();
    if (child == 0) {
      parallel::onThreads(2 * static_cast<size_t>(ranks), cores, [&](size_t i) {
        TraceShape s;
        s.launches = launches;
        s.runB = i % 2 == 1;
        s.rank = static_cast<int32_t>(i / 2);
        s.worldSize = ranks;
        s.collectiveEvery = collectiveEvery;
        s.divergeAt = s.rank == kDivergingRank ? divergeAt : UINT64_MAX;
        s.receivedFrom = divergeAt + 1;
        writeTrace((s.runB ? b : a) / rankName(s.rank), s);
      });
      std::_Exit(0);
    }
    int status = 0;
    if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fmt::print(stderr, "writing the traces failed\n");
      return 1;
    }
    fmt::print("wrote two runs of {} ranks of {} launches in {:.1f} s\n", ranks, launches,
               seconds(std::chrono::steady_clock::now() - t0));
  }
  std::vector<fs::path> traces;
  uint64_t compressed = 0, uncompressed = 0;
  for (const fs::path& run : {a, b}) {
    for (int32_t r = 0; r < ranks; ++r) {
      traces.push_back(run / rankName(r));
      const trace::TraceReader reader(traces.back());
      compressed += reader.eventsFileBytes();
      uncompressed += reader.uncompressedBytes();
    }
  }
  fmt::print("{} traces: {:.0f} MiB of events compressed, {:.0f} MiB uncompressed\n", traces.size(),
             compressed / 1048576.0, uncompressed / 1048576.0);

  const double availableBefore = coresAvailable(cores);
  // Best of `rounds` of each pass, the passes side by side in every round.
  Best decompress, compare, job;
  double rssCompare = 0;
  bool right = true;
  for (int round = 0; round < rounds; ++round) {
    std::atomic<uint64_t> bytes{0};
    timed(decompress, [&] {
      parallel::onThreads(traces.size(), cores, [&](size_t i) { bytes += decompressAll(trace::TraceReader(traces[i])); });
    });
    if (bytes != uncompressed) {
      fmt::print(stderr, "decompressed {} bytes, expected {}\n", bytes.load(), uncompressed);
      return 1;
    }

    report::RunComparison c;
    timed(compare, [&] { c = report::compareRuns(a, b, false, nullptr); });
    rssCompare = std::max(rssCompare, peakRssMiB());
    // Every rank diverges: rank 5 at its own launch, the others where the
    // all-reduce after it brought them the divergence.
    for (const diff::ProcessDiff& p : c.processes) {
      const bool origin = p.name == rankName(kDivergingRank);
      const uint64_t want = origin ? 256 + divergeAt + divergeAt / collectiveEvery : 0;
      if (!p.firstDivergence || (origin && p.firstDivergence->a.seq != want)) {
        fmt::print(stderr, "{}: the diff did not find the divergence{}\n", p.name,
                   origin ? fmt::format(" at event #{}", want) : "");
        right = false;
      }
    }
    if (c.processes.size() != static_cast<size_t>(ranks)) right = false;

    std::optional<report::JobView> view;
    timed(job, [&] { view = report::jobView(c); });
    if (!view || view->earliestOrigins.size() != 1 || view->ranks[view->earliestOrigins[0]].rank != kDivergingRank) {
      fmt::print(stderr, "the job view did not name rank {} the earliest origin\n", kDivergingRank);
      right = false;
    }
  }
  const double available = coresAvailable(cores);
  const double rssJob = peakRssMiB();
  fmt::print("{} cores, of which this process got {:.1f} before the rounds and {:.1f} after (a shared machine);\n"
             "best of {} rounds; ratios to decompressing every trace once on every core\n",
             cores, availableBefore, available, rounds);
  fmt::print("{:<52} {:>9}  {:>9}   {:>6}    {:>6}\n", "", "wall", "CPU", "wall", "CPU");
  auto row = [&](const std::string& what, const Best& t) {
    fmt::print("{:<52} {:7.2f} s  {:7.2f} s   {:5.2f}x    {:5.2f}x\n", what, t.wall, t.cpu, t.wall / decompress.wall,
               t.cpu / decompress.cpu);
  };
  row(fmt::format("decompress {} traces ({} threads)", traces.size(), cores), decompress);
  row(fmt::format("compareRuns: {} ranks diffed, {} at a time", ranks, std::min<unsigned>(cores, ranks)), compare);
  row("jobView: the job's view across ranks", job);
  const Best whole{.cpu = compare.cpu + job.cpu, .wall = compare.wall + job.wall};
  row("compareRuns + jobView (gpurr diff A/ B/)", whole);
  fmt::print("peak RSS of the process: {:.0f} MiB after compareRuns, {:.0f} MiB after jobView\n", rssCompare, rssJob);
  // Wall time on a quiet machine; CPU time, which other processes' load
  // leaves alone, when this one got fewer cores than it has.
  const bool quiet = std::min(availableBefore, available) > 0.9 * cores;
  const bool fast = quiet ? whole.wall <= 1.5 * decompress.wall : whole.cpu <= 1.5 * decompress.cpu;
  const bool small = rssJob <= 2048;
  fmt::print("goal (compareRuns + jobView <= 1.5x decompression, {}): {}\n", quiet ? "wall" : "CPU, a busy machine",
             fast ? "met" : "NOT met");
  fmt::print("goal (peak RSS <= 2 GiB): {}\n", small ? "met" : "NOT met");
  if (keep.empty()) fs::remove_all(dir);
  if (!right) return 1;
  return fast && small ? 0 : 3;
}
