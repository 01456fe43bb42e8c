// The parts of `gpurr record` that do not run the command (record.h):
// option checks, where the recorder library and the trace go, moving the
// traces the recorded processes wrote out of the staging directory, and the
// summary printed at the end.
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <stdexcept>

#include "cli/record.h"
#include "common/name_pattern.h"
#include "report/compare.h"
#include "report/text.h"
#include "trace_format/trace.h"

namespace gpurr::cli {
using namespace gpurr::report;
namespace record {

namespace {

bool parseNumber(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

uint64_t sizeOnDisk(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return fs::file_size(path, ec);
  uint64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(path, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code fileEc;
    if (it->is_regular_file(fileEc)) {
      const uint64_t size = it->file_size(fileEc);
      if (!fileEc) total += size;
    }
  }
  return total;
}

std::string plural(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", withCommas(n), n == 1 ? one : many);
}

}  // namespace

std::string checkLaunchRange(const std::string& range) {
  const size_t colon = range.find(':');
  if (colon == std::string::npos) {
    return fmt::format("--launches: expected A:B (launch A up to, not including, B; either may be "
                       "left out), got '{}'",
                       range);
  }
  uint64_t a = 0, b = 0;
  const std::string_view s(range);
  const std::string_view first = s.substr(0, colon), last = s.substr(colon + 1);
  if (!first.empty() && !parseNumber(first, a)) {
    return fmt::format("--launches: '{}' does not start with a launch number", range);
  }
  if (last.empty()) return "";
  if (!parseNumber(last, b)) {
    return fmt::format("--launches: '{}' does not end with a launch number", range);
  }
  if (b <= a) return fmt::format("--launches: '{}' selects no launch (B must be larger than A)", range);
  return "";
}

std::string checkKernelRegex(const std::string& regex) {
  if (regex.empty()) return "--kernels: empty regular expression (leave the option out to record every kernel)";
  if (const std::string why = namePatternError(regex); !why.empty()) {
    return fmt::format("--kernels: invalid regular expression '{}': {}", regex, why);
  }
  return "";
}

std::string checkSnapshotSelection(const std::string& selection) {
  if (selection.empty()) {
    return "--snapshot: empty selection; give launch numbers (7), ranges (100:200) or kernel name "
           "patterns (gemm), separated by commas";
  }
  size_t start = 0;
  for (;;) {
    const size_t comma = selection.find(',', start);
    const std::string item = selection.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) return fmt::format("--snapshot: empty item in '{}'", selection);
    const bool numeric = item.find_first_not_of("0123456789:") == std::string::npos &&
                         std::count(item.begin(), item.end(), ':') <= 1;
    if (numeric) {
      if (item.find(':') == std::string::npos) {
        uint64_t k = 0;
        if (!parseNumber(item, k) || k == UINT64_MAX)
          return fmt::format("--snapshot: launch number '{}' is too large", item);
      } else if (std::string e = checkLaunchRange(item); !e.empty()) {
        return fmt::format("--snapshot: '{}' is not a launch range A:B with A < B", item);
      }
    } else {
      if (const std::string why = namePatternError(item); !why.empty()) {
        return fmt::format("--snapshot: '{}' is neither a launch number nor a valid regular expression: {}",
                           item, why);
      }
    }
    if (comma == std::string::npos) return "";
    start = comma + 1;
  }
}

std::string checkDeterminismOptions(uint64_t runs, bool launchesGiven, bool kernelsGiven, bool snapshotGiven) {
  if (runs < 2 || runs > 1000) {
    return fmt::format("--check-determinism={}: give the number of re-runs, from 2 to 1000 (default 10)", runs);
  }
  if (!launchesGiven && !kernelsGiven && !snapshotGiven) {
    return "--check-determinism re-runs each selected launch in the recorded process; select them with "
           "--launches A:B, --kernels REGEX or --snapshot SEL (checking every launch would run the whole "
           "program again that many times)";
  }
  return "";
}

fs::path defaultOutput(const std::vector<std::string>& command, std::time_t now,
                       const fs::path& dir) {
  std::string base = command.empty() ? "trace" : fs::path(command[0]).filename().string();
  // Keep the name shell-friendly whatever the command is called.
  for (char& c : base) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) c = '_';
  }
  if (base.empty() || base[0] == '.') base = "trace" + base;
  std::tm local{};
  localtime_r(&now, &local);
  const std::string stem = fmt::format("{}-{:%Y%m%d-%H%M%S}", base, local);
  fs::path candidate = dir / (stem + ".gpurr");
  std::error_code ec;
  for (int n = 2; fs::exists(fs::symlink_status(candidate, ec)); ++n) {
    candidate = dir / fmt::format("{}-{}.gpurr", stem, n);
  }
  return candidate;
}

std::vector<EnvChange> frameworkEnv(const fs::path& executable, const char* pythonPath) {
  const fs::path prefix = executable.parent_path() / "..";
  const fs::path layer = (prefix / "share" / "gpurr" / "python").lexically_normal();
  std::error_code ec;
  if (!fs::exists(layer / "sitecustomize.py", ec)) return {};
  std::string path = layer.string();
  if (pythonPath != nullptr && *pythonPath != '\0') path += std::string(":") + pythonPath;
  return {{"PYTHONPATH", path},
          {"GPURR_TORCH_OBSERVER", (prefix / "lib" / "libgpurr_torch.so").lexically_normal().string()}};
}

fs::path recorderLibrary(const fs::path& executable, const char* overridePath) {
  fs::path lib;
  if (overridePath != nullptr && *overridePath != '\0') {
    lib = overridePath;
  } else {
    lib = executable.parent_path() / ".." / "lib" / "libgpurr_recorder.so";
  }
  std::error_code ec;
  lib = fs::weakly_canonical(fs::absolute(lib, ec), ec);
  if (!fs::is_regular_file(lib, ec)) {
    if (overridePath != nullptr && *overridePath != '\0') {
      throw std::runtime_error(fmt::format(
          "the recorder library {} (from GPURR_RECORDER_LIB) does not exist or is not a file",
          lib.string()));
    }
    throw std::runtime_error(fmt::format(
        "the recorder library {} does not exist; build the gpurr_recorder target, or point "
        "GPURR_RECORDER_LIB at libgpurr_recorder.so",
        lib.string()));
  }
  return lib;
}

namespace {

// libcupti.so.13 in a site-packages folder, where a CUDA 13 wheel puts it.
std::string cuptiIn(const fs::path& sitePackages) {
  std::error_code ec;
  for (const char* sub : {"nvidia/cu13/lib/libcupti.so.13", "nvidia/cuda_cupti/lib/libcupti.so.13"}) {
    const fs::path candidate = sitePackages / sub;
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  return {};
}

// libcupti.so.13 in the environment at `prefix` (lib/python3.*/site-packages).
std::string cuptiInEnvironment(const fs::path& prefix) {
  std::error_code ec;
  std::vector<fs::path> libs;
  for (const auto& entry : fs::directory_iterator(prefix / "lib", ec)) {
    if (entry.path().filename().string().rfind("python3", 0) == 0) libs.push_back(entry.path());
  }
  std::sort(libs.begin(), libs.end());
  for (const fs::path& lib : libs) {
    for (const char* packages : {"site-packages", "dist-packages"}) {
      if (std::string found = cuptiIn(lib / packages); !found.empty()) return found;
    }
  }
  return {};
}

}  // namespace

fs::path findProgram(const std::string& program, const char* path) {
  if (program.find('/') != std::string::npos) return fs::absolute(program);
  const std::string dirs = path != nullptr ? path : "";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(end > start ? dirs.substr(start, end - start) : ".") / program;
    if (access(candidate.c_str(), X_OK) == 0) return fs::absolute(candidate);
    start = end + 1;
  }
  return {};
}

std::string pythonCupti(const std::vector<std::string>& command, const fs::path& executable,
                        const std::function<const char*(const char*)>& getenv) {
  std::vector<fs::path> prefixes;
  if (!command.empty()) {
    if (const fs::path program = findProgram(command[0], getenv("PATH")); !program.empty()) {
      prefixes.push_back(program.parent_path().parent_path());
    }
  }
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    if (const char* v = getenv(var); v != nullptr && *v != '\0') prefixes.emplace_back(v);
  }
  for (const fs::path& prefix : prefixes) {
    if (std::string found = cuptiInEnvironment(prefix); !found.empty()) return found;
  }
  // pip installs gpurr as site-packages/gpurr/bin/gpurr.
  const fs::path package = executable.parent_path().parent_path();
  return package.filename() == "gpurr" ? cuptiIn(package.parent_path()) : std::string();
}

std::string preloadWith(const char* existing, const std::string& library) {
  if (existing == nullptr || *existing == '\0') return library;
  const std::string list = existing;
  // The dynamic loader separates entries with spaces or colons.
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find_first_of(": ", start), list.size());
    if (list.compare(start, end - start, library) == 0) return list;
    start = end + 1;
  }
  return list + ":" + library;
}

bool isElf(const fs::path& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char magic[4] = {};
  const bool elf = std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "\x7f" "ELF", 4) == 0;
  std::fclose(f);
  return elf;
}

bool replaceable(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (!fs::is_directory(st)) return false;
  if (fs::exists(path / "version", ec)) return true;  // a trace
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    std::error_code entryEc;
    if (!e.is_directory(entryEc)) return false;
    // A restarted job's earlier attempts (job::keepEarlierAttempt).
    if (e.path().filename() == "attempts") continue;
    if (e.path().extension() != ".gpurr") return false;
  }
  return !ec;  // empty, or only traces
}

std::vector<fs::path> stagedTraces(const fs::path& staging) {
  std::vector<fs::path> out;
  for (const fs::directory_entry& e : fs::directory_iterator(staging)) {
    std::error_code ec;
    if (e.path().extension() == ".gpurr" && e.is_directory(ec)) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    return trace::RankOrder{}(a.filename().string(), b.filename().string());
  });
  return out;
}

Placement placeTraces(const fs::path& staging, const fs::path& out, bool replace) {
  Placement placed;
  const std::vector<fs::path> staged = stagedTraces(staging);
  if (staged.empty()) {
    for (const fs::directory_entry& e : fs::directory_iterator(staging)) {
      placed.leftovers.push_back(e.path());
    }
    if (placed.leftovers.empty()) fs::remove(staging);
    return placed;
  }
  if (replace && fs::exists(fs::symlink_status(out))) fs::remove_all(out);
  if (staged.size() == 1) {
    fs::rename(staged[0], out);
    placed.traces.push_back(out);
    for (const fs::directory_entry& e : fs::directory_iterator(staging)) {
      placed.leftovers.push_back(e.path());
    }
    if (placed.leftovers.empty()) fs::remove(staging);
    return placed;
  }
  // The staging directory already holds the traces under their names.
  std::vector<std::string> names;
  for (const fs::path& p : staged) names.push_back(p.filename().string());
  fs::rename(staging, out);
  placed.directoryOfTraces = true;
  for (const std::string& name : names) placed.traces.push_back(out / name);
  return placed;
}

Placement joinTraces(const fs::path& staging, const fs::path& out, bool replace) {
  Placement placed;
  const std::vector<fs::path> staged = stagedTraces(staging);
  if (!staged.empty()) {
    // Another rank's gpurr may create it at the same moment.
    if (::mkdir(out.c_str(), 0700) != 0 && errno != EEXIST) {
      throw fs::filesystem_error("cannot create the job's directory", out,
                                 std::error_code(errno, std::generic_category()));
    }
    if (!fs::is_directory(out)) {
      throw fs::filesystem_error("not a directory", out, std::make_error_code(std::errc::not_a_directory));
    }
    for (const fs::path& p : staged) {
      const fs::path to = out / p.filename();
      if (fs::exists(fs::symlink_status(to)) && !(replace && replaceable(to))) {
        throw fs::filesystem_error("already in the job's directory", to, std::make_error_code(std::errc::file_exists));
      }
    }
    for (const fs::path& p : staged) {
      const fs::path to = out / p.filename();
      if (replace) fs::remove_all(to);
      fs::rename(p, to);
      placed.traces.push_back(to);
    }
    placed.directoryOfTraces = true;
  }
  for (const fs::directory_entry& e : fs::directory_iterator(staging)) placed.leftovers.push_back(e.path());
  if (placed.leftovers.empty()) fs::remove(staging);
  return placed;
}

RecordSummary summarise(const std::vector<fs::path>& traces) {
  RecordSummary summary;
  for (const fs::path& path : traces) {
    TraceSummary t;
    t.path = path;
    try {
      trace::TraceReader reader(path);
      t.launches = reader.launchCount();
      reader.forEach([&](const trace::Event& e) {
        auto add = [&](const std::vector<trace::RangeDigest>& ranges) {
          for (const trace::RangeDigest& r : ranges) {
            t.bytesHashed += r.range.size;
            if (r.snapshot) t.snapshotBytes += r.range.size;
          }
        };
        if (const auto* k = std::get_if<trace::KernelLaunch>(&e.payload)) {
          add(k->inputs);
          add(k->outputs);
          t.cost.add(*k);
          for (const trace::Annotation& a : k->annotations) {
            if (const auto* d = std::get_if<trace::DeterminismCheck>(&a)) {
              ++t.determinismChecked;
              if (d->distinctResults > 1) ++t.nondeterministic;
            }
          }
        } else if (const auto* g = std::get_if<trace::GraphLaunch>(&e.payload)) {
          add(g->inputs);
          add(g->outputs);
        }
        return true;
      });
      if (reader.damage().incomplete()) t.damage = reader.damage().detail;
      t.stoppedAfterStep = reader.stoppedAfterStep();
      t.stepped = reader.layerSteps().has_value();
      t.readable = true;
    } catch (const std::exception& e) {
      // A trace cut off mid-block can still fail in decoding; what was
      // counted before the failure stays, with the reason.
      t.error = e.what();
    }
    summary.traces.push_back(std::move(t));
    summary.diskBytes += sizeOnDisk(path);
  }
  return summary;
}

std::string summaryLine(const RecordSummary& summary) {
  uint64_t launches = 0, hashed = 0, snapshots = 0, checked = 0, nondeterministic = 0, incomplete = 0,
           unreadable = 0;
  for (const TraceSummary& t : summary.traces) {
    launches += t.launches;
    hashed += t.bytesHashed;
    snapshots += t.snapshotBytes;
    checked += t.determinismChecked;
    nondeterministic += t.nondeterministic;
    if (!t.readable) {
      ++unreadable;
    } else if (!t.damage.empty()) {
      ++incomplete;
    }
  }
  std::string line = fmt::format("{}, {}, {} hashed, {} on disk",
                                 plural(summary.traces.size(), "process", "processes"),
                                 plural(launches, "launch", "launches"), humanBytes(hashed),
                                 humanBytes(summary.diskBytes));
  if (snapshots) line += fmt::format(", {} in snapshots", humanBytes(snapshots));
  if (checked) {
    line += fmt::format(", {} checked for determinism ({} nondeterministic)",
                        plural(checked, "launch", "launches"), withCommas(nondeterministic));
  }
  if (incomplete) line += fmt::format(", {} incomplete", incomplete);
  if (unreadable) line += fmt::format(", {} unreadable", unreadable);
  return line;
}

}  // namespace record

}  // namespace gpurr::cli
