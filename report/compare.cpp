// Comparing two runs: the processes of two traces (or of two directories of
// per-process traces) matched by name and diffed, after refusing pairs whose
// comparison would be nonsense. What every report of a diff is made from.
#include "report/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <string_view>
#include <thread>
#include <tuple>
#include <variant>

#include "common/text.h"
#include "diff/environment.h"
#include "trace_format/scan.h"
#include "trace_format/trace.h"

namespace gpurr::report {
using namespace gpurr::trace;
using namespace gpurr::diff;
namespace fs = std::filesystem;

namespace {

using ProcessTraces = std::map<std::string, fs::path, RankOrder>;

// The traces in a directory of several processes' traces, by entry name.
ProcessTraces processTraces(const fs::path& dir) {
  ProcessTraces out;
  for (auto& [name, path] : directoryTraces(dir)) out.emplace(std::move(name), std::move(path));
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

std::string gpuModels(const Header& h) {
  std::vector<std::string> names;
  for (const GpuInfo& g : h.gpus) names.push_back(g.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Refuses comparisons whose answer would be nonsense: digests of different
// chunk sizes always, other GPU models or command lines unless forced.
void checkComparable(const TraceReader& a, const TraceReader& b, bool force,
                     std::vector<std::string>& warnings) {
  // Range digests fold chunk digests of the header's chunk size (FORMAT.md
  // §3): hashed in chunks of two sizes, equal bytes give different digests.
  const uint64_t chunkA = a.header().options.hashChunkBytes, chunkB = b.header().options.hashChunkBytes;
  if (chunkA != chunkB) {
    throw UsageError(UsageError::Kind::kChunkSizes, fmt::format(
        "{} hashed its ranges in chunks of {} bytes and {} in chunks of {} (hashChunkBytes): "
        "their digests cannot be compared",
        a.path().string(), chunkA, b.path().string(), chunkB));
  }
  const std::string ga = gpurr::text::oneLine(gpuModels(a.header())), gb = gpurr::text::oneLine(gpuModels(b.header()));
  if (ga != gb && !ga.empty() && !gb.empty()) {
    const std::string text = fmt::format(
        "{} was recorded on {} and {} on {}: different GPU models run different kernels and "
        "legitimately give different results",
        a.path().string(), ga, b.path().string(), gb);
    if (!force) {
      throw UsageError(UsageError::Kind::kGpuModels,
                       text + ". Record both runs on the same GPU model, or pass --force to compare them anyway.");
    }
    warnings.push_back(text + " (compared anyway: --force)");
  }
  const auto& ca = a.header().commandLine;
  const auto& cb = b.header().commandLine;
  if (diff::programOf(a.header()) != diff::programOf(b.header()) && !ca.empty() && !cb.empty()) {
    const std::string text =
        fmt::format("{} and {} record different programs:\n  A: {}\n  B: {}", a.path().string(),
                    b.path().string(), gpurr::text::oneLine(joined(ca)), gpurr::text::oneLine(joined(cb)));
    if (!force) {
      throw UsageError(UsageError::Kind::kPrograms,
                       text + "\nCompare two runs of the same command, or pass --force to compare them anyway.");
    }
    warnings.push_back(fmt::format("{} and {} record different programs (compared anyway: --force)",
                                   a.path().string(), b.path().string()));
  }
}

}  // namespace

std::optional<Culprits> loadCulprits(const std::string& file, std::string& warning) {
  const fs::path path = file.empty() ? Culprits::defaultPath() : fs::path(file);
  std::error_code ec;
  if (file.empty() && !fs::exists(path, ec)) {
    warning = fmt::format("{} not found: known culprits are not reported (pass --culprits FILE)",
                          path.string());
    return std::nullopt;
  }
  return Culprits::load(path);
}

bool RunComparison::identical() const {
  bool same = onlyA.empty() && onlyB.empty() && unreadable.empty();
  for (const ProcessDiff& p : processes) same = same && p.identical && p.gaps.empty();
  return same;
}

bool RunComparison::unknown() const {
  // A process recorded in one run only (a rank that died before its first
  // CUDA call, a trace lost) is one whose results are not known.
  bool seen = true, gap = !unreadable.empty() || !onlyA.empty() || !onlyB.empty();
  for (const ProcessDiff& p : processes) {
    seen = seen && p.identical;
    gap = gap || !p.gaps.empty();
  }
  return seen && gap;
}

namespace {

struct PairDiff {
  ProcessDiff diff;
  std::optional<IncompleteTrace> incompleteA, incompleteB;  // a trace that did not end cleanly, or damaged
};

IncompleteTrace incomplete(const std::string& name, const Damage& d) {
  return {name, d.detail, d.cause(), d.readsTo()};
}

PairDiff diffPairOnce(const fs::path& a, const fs::path& b, const ReadLimit& limitA, const ReadLimit& limitB,
                      const std::string& name, bool force, const Culprits* culprits, unsigned threads) {
  const TraceReader ra(a, limitA), rb(b, limitB);
  std::vector<std::string> warnings;
  checkComparable(ra, rb, force, warnings);
  DiffOptions options;
  options.threads = threads;
  options.partOfJob = !name.empty();
  PairDiff out{diffTraces(ra, rb, options, culprits), {}, {}};
  ProcessDiff& p = out.diff;
  p.name = name;
  p.pathA = a.string();
  p.pathB = b.string();
  p.warnings.insert(p.warnings.begin(), warnings.begin(), warnings.end());
  if (ra.damage().incomplete()) out.incompleteA = incomplete(name, ra.damage());
  if (rb.damage().incomplete()) out.incompleteB = incomplete(name, rb.damage());
  return out;
}

// Diffs two traces; where a block of one is corrupt, diffs again up to that
// block, as a trace cut short there.
PairDiff diffPair(const fs::path& a, const fs::path& b, const std::string& name, bool force,
                  const Culprits* culprits, unsigned threads) {
  return readingPastCorruptBlocks({a, b}, [&](const std::vector<ReadLimit>& limits) {
    return diffPairOnce(a, b, limits[0], limits[1], name, force, culprits, threads);
  });
}

// Diffs the pairs, several at a time: as many at once as there are cores
// (each on one thread), or, with fewer pairs than cores, each pair on its
// share of them. So 64 ranks on 8 cores run 8 one-thread diffs at a time,
// never 64 x 8 threads, and hold the summaries of 8 pairs at most. Results
// keep the pairs' order: a pair whose trace cannot be read has its error
// (TraceError's message) in place of its diff; the first other failure in
// that order is thrown.
std::vector<std::variant<PairDiff, std::string>> diffPairs(const std::vector<std::pair<fs::path, fs::path>>& paths,
                                                           const std::vector<std::string>& names, bool force,
                                                           const Culprits* culprits) {
  const size_t n = paths.size();
  const unsigned cores = scanThreads(0);
  const size_t workers = std::min<size_t>(n, cores);
  const unsigned each = workers == 0 ? 1 : std::max(1u, static_cast<unsigned>(cores / workers));
  std::vector<std::optional<std::variant<PairDiff, std::string>>> results(n);
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> next{0};
  std::atomic<size_t> firstError{n};  // pairs after a failed one need not run
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      if (i > firstError.load()) continue;
      try {
        results[i] = diffPair(paths[i].first, paths[i].second, names[i], force, culprits, each);
      } catch (const TraceError& e) {
        results[i] = std::string(e.what());
      } catch (...) {
        errors[i] = std::current_exception();
        for (size_t f = firstError.load(); i < f && !firstError.compare_exchange_weak(f, i);) {}
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  std::vector<std::variant<PairDiff, std::string>> out;
  for (size_t i = 0; i < n; ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    out.push_back(std::move(*results[i]));
  }
  return out;
}

}  // namespace

RunComparison compareRuns(const fs::path& a, const fs::path& b, bool force, const Culprits* culprits) {
  RunComparison out;
  out.a = a.string();
  out.b = b.string();
  out.forced = force;
  std::error_code ec;
  for (const fs::path& p : {a, b}) {
    if (!fs::exists(p, ec)) throw TraceError(fmt::format("{}: no such trace", p.string()));
  }
  const bool ta = isTrace(a), tb = isTrace(b);
  if (ta && tb) {
    out.processes.push_back(diffPair(a, b, "", force, culprits, 0).diff);
    return out;
  }
  const ProcessTraces pa = ta ? ProcessTraces{} : processTraces(a);
  const ProcessTraces pb = tb ? ProcessTraces{} : processTraces(b);
  for (const auto& [side, trace, path] : {std::tuple{&pa, ta, a}, std::tuple{&pb, tb, b}}) {
    if (!trace && side->empty()) {
      throw UsageError(UsageError::Kind::kNotATrace,
                       fmt::format("{}: neither a gpurr trace nor a directory of traces{}", path.string(),
                                   trace::earlierAttempts(path) + trace::stagedTracesHint(path)));
    }
  }
  if (ta != tb) {
    throw UsageError(UsageError::Kind::kTraceAndDirectory,
                     fmt::format("{} is {} and {} is {}: give two traces, or two directories of "
                                 "per-process traces (rank0.gpurr, rank1.gpurr...)",
                                 a.string(), ta ? "a trace" : fmt::format("a directory of {} traces", pa.size()),
                                 b.string(), tb ? "a trace" : fmt::format("a directory of {} traces", pb.size())));
  }
  std::vector<std::pair<fs::path, fs::path>> pairs;
  std::vector<std::string> names;
  for (const auto& [name, path] : pa) {
    auto it = pb.find(name);
    if (it == pb.end()) {
      out.onlyA.push_back(name);
    } else {
      pairs.emplace_back(path, it->second);
      names.push_back(name);
    }
  }
  for (const auto& [name, path] : pb) {
    if (!pa.count(name)) out.onlyB.push_back(name);
  }
  out.directories = true;
  out.tracesA = pa.size();
  out.tracesB = pb.size();
  std::vector<std::variant<PairDiff, std::string>> diffs = diffPairs(pairs, names, force, culprits);
  for (size_t i = 0; i < diffs.size(); ++i) {
    if (auto* error = std::get_if<std::string>(&diffs[i])) {
      out.unreadable.push_back({names[i], std::move(*error), "", ""});
      continue;
    }
    PairDiff& p = std::get<PairDiff>(diffs[i]);
    if (p.incompleteA) out.incompleteA.push_back(*p.incompleteA);
    if (p.incompleteB) out.incompleteB.push_back(*p.incompleteB);
    out.processes.push_back(std::move(p.diff));
  }
  return out;
}

const char* UsageError::kindName(Kind kind) {
  switch (kind) {
    case Kind::kChunkSizes: return "differentChunkSizes";
    case Kind::kGpuModels: return "differentGpuModels";
    case Kind::kPrograms: return "differentPrograms";
    case Kind::kNotATrace: return "notATrace";
    case Kind::kTraceAndDirectory: return "traceAndDirectory";
  }
  return "";
}

}  // namespace gpurr::report
