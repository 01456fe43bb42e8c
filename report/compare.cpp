// Comparing two runs: the processes of two traces (or of two directories of
// per-process traces) matched by name and diffed, after refusing pairs whose
// comparison would be nonsense. What every report of a diff is made from.
#include "report/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "trace_format/trace.h"

namespace gpurr::report {
using namespace gpurr::trace;
using namespace gpurr::diff;
namespace fs = std::filesystem;

bool isTrace(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p / "version", ec);
}

namespace {

// The traces in a directory of several processes' traces, by entry name.
std::map<std::string, fs::path> processTraces(const fs::path& dir) {
  std::map<std::string, fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory(ec) && isTrace(entry.path())) {
      out.emplace(entry.path().filename().string(), entry.path());
    }
  }
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
    throw UsageError(fmt::format(
        "{} hashed its ranges in chunks of {} bytes and {} in chunks of {} (hashChunkBytes): "
        "their digests cannot be compared",
        a.path().string(), chunkA, b.path().string(), chunkB));
  }
  const std::string ga = gpuModels(a.header()), gb = gpuModels(b.header());
  if (ga != gb && !ga.empty() && !gb.empty()) {
    const std::string text = fmt::format(
        "{} was recorded on {} and {} on {}: different GPU models run different kernels and "
        "legitimately give different results",
        a.path().string(), ga, b.path().string(), gb);
    if (!force) {
      throw UsageError(text + ". Record both runs on the same GPU model, or pass --force to "
                              "compare them anyway.");
    }
    warnings.push_back(text + " (compared anyway: --force)");
  }
  const auto& ca = a.header().commandLine;
  const auto& cb = b.header().commandLine;
  if (ca != cb && !ca.empty() && !cb.empty()) {
    const std::string text =
        fmt::format("{} and {} record different programs:\n  A: {}\n  B: {}", a.path().string(),
                    b.path().string(), joined(ca), joined(cb));
    if (!force) {
      throw UsageError(text + "\nCompare two runs of the same command, or pass --force to compare "
                              "them anyway.");
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
  bool same = onlyA.empty() && onlyB.empty();
  for (const ProcessDiff& p : processes) same = same && p.identical && p.gaps.empty();
  return same;
}

bool RunComparison::unknown() const {
  bool seen = onlyA.empty() && onlyB.empty(), gap = false;
  for (const ProcessDiff& p : processes) {
    seen = seen && p.identical;
    gap = gap || !p.gaps.empty();
  }
  return seen && gap;
}

namespace {

ProcessDiff diffPair(const fs::path& a, const fs::path& b, const std::string& name, bool force,
                     const Culprits* culprits) {
  const TraceReader ra(a), rb(b);
  std::vector<std::string> warnings;
  checkComparable(ra, rb, force, warnings);
  ProcessDiff p = diffTraces(ra, rb, DiffOptions{}, culprits);
  p.name = name;
  p.pathA = a.string();
  p.pathB = b.string();
  p.warnings.insert(p.warnings.begin(), warnings.begin(), warnings.end());
  return p;
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
    out.processes.push_back(diffPair(a, b, "", force, culprits));
    return out;
  }
  const auto pa = ta ? std::map<std::string, fs::path>{} : processTraces(a);
  const auto pb = tb ? std::map<std::string, fs::path>{} : processTraces(b);
  if (ta != tb) {
    throw UsageError(fmt::format("{} is {} and {} is {}: give two traces, or two directories of "
                                 "per-process traces (rank0.gpurr, rank1.gpurr...)",
                                 a.string(), ta ? "a trace" : fmt::format("a directory of {} traces", pa.size()),
                                 b.string(), tb ? "a trace" : fmt::format("a directory of {} traces", pb.size())));
  }
  for (const auto* side : {&pa, &pb}) {
    if (side->empty()) {
      throw UsageError(fmt::format("{}: neither a gpurr trace nor a directory of traces",
                                   (side == &pa ? a : b).string()));
    }
  }
  for (const auto& [name, path] : pa) {
    auto it = pb.find(name);
    if (it == pb.end()) {
      out.onlyA.push_back(name);
    } else {
      out.processes.push_back(diffPair(path, it->second, name, force, culprits));
    }
  }
  for (const auto& [name, path] : pb) {
    if (!pa.count(name)) out.onlyB.push_back(name);
  }
  return out;
}

}  // namespace gpurr::report
