// The parts of `gpurr bisect` that run no command (see bisect.h).
#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>

#include "cli/bisect.h"
#include "cli/record.h"
#include "report/job.h"
#include "trace_format/trace.h"

namespace gpurr::cli::bisect {
using namespace gpurr::report;
using namespace gpurr::trace;
using gpurr::diff::FirstDivergence;
using gpurr::diff::OpKind;
using gpurr::diff::ProcessDiff;

namespace {

// The number a cgroup file holds (its first word), or nullopt when it holds
// none ("max": no limit) or cannot be read.
std::optional<uint64_t> cgroupNumber(const fs::path& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word) || word.empty() || !std::isdigit(static_cast<unsigned char>(word[0]))) return std::nullopt;
  return std::strtoull(word.c_str(), nullptr, 10);
}

// The page cache a cgroup's processes hold, which the kernel gives back
// before it fails an allocation (memory.stat's active and inactive file
// pages; `prefix` "total_" for v1's hierarchical counts).
uint64_t pageCache(const fs::path& file, const std::string& prefix) {
  std::ifstream in(file);
  std::string name;
  uint64_t cache = 0;
  for (uint64_t value = 0; in >> name >> value;)
    if (name == prefix + "active_file" || name == prefix + "inactive_file") cache += value;
  return cache;
}

// Narrows (available, total) to a cgroup's limit, less the memory its
// processes use and cannot give back (usage less page cache). A limit at or
// above the host's memory (`host`; v1's "unlimited" is a page-rounded
// 2^63-1) is none.
void boundBy(std::optional<uint64_t> limit, uint64_t usage, uint64_t cache, uint64_t host, uint64_t& available,
             uint64_t& total) {
  if (!limit || *limit >= host) return;
  const uint64_t used = usage > cache ? usage - cache : 0;
  total = std::min(total, *limit);
  available = std::min(available, *limit > used ? *limit - used : 0);
}

}  // namespace

std::pair<uint64_t, uint64_t> hostMemory(const fs::path& root) {
  std::ifstream in(root / "proc/meminfo");
  uint64_t available = 0, total = 0;
  std::string name, unit;
  for (uint64_t kib = 0; in >> name >> kib;) {
    if (name == "MemAvailable:") available = kib << 10;
    if (name == "MemTotal:") total = kib << 10;
    std::getline(in, unit);
  }
  if (total == 0) return {0, 0};
  const uint64_t host = total;
  // The cgroups this process is in (lines "<id>:<controllers>:<path>"):
  // v2's unified one (id 0), or v1's memory controller's, and every cgroup
  // above it up to the mount. Its path may not be below the mount (inside a
  // container, whose own cgroup is the mount itself; "/../.." outside this
  // namespace's cgroups): then the mount's alone.
  auto bound = [&](const fs::path& mount, const fs::path& path, const char* limit, const char* usage,
                   const std::string& stats) {
    std::error_code ec;
    const bool below = !path.empty() && path.string().find("..") == std::string::npos &&
                       fs::is_directory(mount / path, ec);
    for (fs::path dir = below ? mount / path : mount;; dir = dir.parent_path()) {
      boundBy(cgroupNumber(dir / limit), cgroupNumber(dir / usage).value_or(0), pageCache(dir / "memory.stat", stats),
              host, available, total);
      if (dir == mount || dir.parent_path() == dir) break;
    }
  };
  std::ifstream cgroups(root / "proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const fs::path path = fs::path(line.substr(second + 1)).relative_path();
    if (line.starts_with("0::")) {
      bound(root / "sys/fs/cgroup", path, "memory.max", "memory.current", "");
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      bound(root / "sys/fs/cgroup/memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_");
    }
  }
  return {available, total};
}

std::string whyNoOverlap(const std::vector<std::string>& command) {
  if (const std::string launcher = launcherOf(command); !launcher.empty()) {
    return fmt::format("two runs of a {} job side by side could meet at one rendezvous", launcher);
  }
  cpu_set_t set;
  const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  const char* least = std::getenv("GPURR_BISECT_MIN_CPUS");
  if (cpus > 0 && cpus < (least ? std::atoi(least) : 4)) {
    return fmt::format("with {} CPU{} here, a run started early would only slow the one recording", cpus,
                       cpus == 1 ? "" : "s");
  }
  return "";
}

std::string launcherOf(const std::vector<std::string>& command) {
  if (command.empty()) return "";
  const std::string program = fs::path(command[0]).filename().string();
  if (program == "env") {  // env [OPTION]... [NAME=value]... command
    size_t i = 1;
    for (; i < command.size(); ++i) {
      const std::string& a = command[i];
      if (a == "-u" || a == "-C" || a == "-S" || a == "--unset" || a == "--chdir" || a == "--split-string") {
        ++i;  // its value is the next argument
      } else if (!a.starts_with("-") && a.find('=') == std::string::npos) {
        break;
      }
    }
    const auto rest = command.begin() + static_cast<std::ptrdiff_t>(std::min(i, command.size()));
    return launcherOf(std::vector<std::string>(rest, command.end()));
  }
  for (const char* launcher : {"torchrun", "deepspeed", "srun", "mpirun", "mpiexec"})
    if (program == launcher) return program;
  if (program == "accelerate" && std::find(command.begin(), command.end(), "launch") != command.end())
    return "accelerate launch";
  if (program.starts_with("python")) {
    for (size_t i = 1; i < command.size(); ++i) {
      const std::string& a = command[i];
      const std::string module = a == "-m" && i + 1 < command.size() ? command[i + 1]
                                 : a.starts_with("-m")            ? a.substr(2)
                                                                  : "";
      if (module == "torch.distributed.run" || module == "torch.distributed.launch" ||
          module == "accelerate.commands.launch" || module == "deepspeed")
        return "python -m " + module;
      // The script, module or code the interpreter runs ends its options.
      if (!module.empty() || !a.starts_with("-") || a.starts_with("-c") || a == "-" || a == "--") break;
      if (a == "-X" || a == "-W") ++i;  // an option with its value in the next argument
    }
  }
  return "";
}

fs::path defaultDirectory(const std::vector<std::string>& command, std::time_t now, const fs::path& dir) {
  // record::defaultOutput names a trace "<command>-<date>-<time>.gpurr" with
  // a shell-friendly command name; the bisect directory takes its stem.
  const std::string stem = "bisect-" + record::defaultOutput(command, now, dir).stem().string();
  fs::path candidate = dir / stem;
  std::error_code ec;
  for (int n = 2; fs::exists(fs::symlink_status(candidate, ec)); ++n) {
    candidate = dir / fmt::format("{}-{}", stem, n);
  }
  return candidate;
}

std::string joinedCommand(const std::vector<std::string>& command) {
  std::string s;
  for (const std::string& a : command) {
    const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos;
    s += (s.empty() ? "" : " ") + (plain ? a : "'" + a + "'");
  }
  return s;
}

bool isBisectFile(const std::string& name) {
  static const std::regex pattern(R"(run[0-9]+\.(gpurr|log)|report\.(txt|json|html)|replay\.(json|log))");
  return std::regex_match(name, pattern);
}

std::string prepareDirectory(const fs::path& dir, bool force) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) {
    if (!fs::is_directory(dir.parent_path(), ec)) {
      return fmt::format("cannot create {}: directory {} does not exist", dir.string(),
                         dir.parent_path().string());
    }
    if (!fs::create_directory(dir, ec)) return fmt::format("cannot create {}: {}", dir.string(), ec.message());
    return "";
  }
  if (!fs::is_directory(st)) return fmt::format("{} exists and is not a directory", dir.string());
  std::vector<fs::path> ours;
  bool empty = true;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    empty = false;
    if (isBisectFile(e.path().filename().string())) ours.push_back(e.path());
  }
  if (ec) return fmt::format("cannot read {}: {}", dir.string(), ec.message());
  if (empty) return "";
  if (!force) {
    return fmt::format("{} already exists and is not empty; choose another -o DIR, or add --force to "
                       "replace the files of an earlier bisect in it",
                       dir.string());
  }
  for (const fs::path& p : ours) {
    fs::remove_all(p, ec);
    if (ec) return fmt::format("cannot remove {}: {}", p.string(), ec.message());
  }
  return "";
}

std::vector<std::string> lastLines(const fs::path& file, size_t count) {
  std::ifstream in(file, std::ios::binary);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    if (lines.size() > count) lines.erase(lines.begin());
  }
  return lines;
}

std::string clockTime(double seconds) {
  const auto s = static_cast<uint64_t>(std::max(0.0, seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::vector<std::pair<std::string, fs::path>> runTraces(const fs::path& run) {
  std::vector<std::pair<std::string, fs::path>> out;
  std::error_code ec;
  if (trace::isTrace(run)) {
    out.emplace_back("", run);
  } else if (fs::is_directory(run, ec)) {
    for (const fs::path& p : record::stagedTraces(run)) out.emplace_back(p.filename().string(), p);
  }
  return out;
}

RunTally tallyRun(const fs::path& run) {
  RunTally t;
  for (const auto& [name, path] : runTraces(run)) {
    ++t.processes;
    try {
      TraceReader reader(path);
      reader.forEach([&](const Event& e) {
        auto add = [&](const std::vector<RangeDigest>& ranges) {
          for (const RangeDigest& r : ranges) t.bytesHashed += r.range.size;
        };
        if (!ranWhenRecorded(e.payload)) return true;  // not run (captured into a graph), or no operation
        if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) {
          ++t.launches;
          if (k->hashed) ++t.hashedLaunches;
          add(k->inputs);
          add(k->outputs);
        } else if (const auto* g = std::get_if<GraphLaunch>(&e.payload)) {
          add(g->inputs);
          add(g->outputs);
        } else if (std::holds_alternative<Memcpy>(e.payload)) {
          ++t.copies;
        } else if (std::holds_alternative<Memset>(e.payload)) {
          ++t.memsets;
        }
        return true;
      });
    } catch (const std::exception& e) {
      if (t.error.empty()) t.error = e.what();
    }
  }
  return t;
}

RunIndex readRunIndex(const fs::path& run) {
  RunIndex out;
  for (const auto& [name, path] : runTraces(run)) {
    try {
      const TraceReader reader(path);
      out.launches += reader.launchCount();
      out.stoppedAfterStep = std::max(out.stoppedAfterStep, reader.stoppedAfterStep());
    } catch (const std::exception&) {
      // An unreadable trace counts no launches; the comparison reports it.
    }
  }
  return out;
}

namespace {

std::pair<uint64_t, uint64_t> indices(const FirstDivergence& d) {
  if (d.path && d.stretch) return {d.stretch->aBegin, d.stretch->bBegin};
  return {d.a.index, d.b.index};
}

}  // namespace

std::optional<DivergencePoint> earliestDivergence(const report::RunComparison& c) {
  // In a job, one rank's operation indices say nothing about another's: the
  // job's collective order does, and its earliest origin (the first in rank
  // order) is where the divergence began. A receiver may diverge at a lower
  // index of its own than the origin did.
  if (c.directories) {
    const std::optional<report::JobView> job = report::jobView(c);
    if (job && !job->earliestOrigins.empty()) {
      const size_t i = job->ranks[job->earliestOrigins.front()].process;
      const auto [a, b] = indices(*c.processes[i].firstDivergence);
      return DivergencePoint{i, a, b};
    }
  }
  std::optional<DivergencePoint> best;
  for (size_t i = 0; i < c.processes.size(); ++i) {
    const ProcessDiff& p = c.processes[i];
    if (p.identical || !p.firstDivergence) continue;
    const auto [a, b] = indices(*p.firstDivergence);
    if (!best || a < best->indexA) best = DivergencePoint{i, a, b};
  }
  return best;
}

int64_t divergenceStep(const FirstDivergence& d) {
  if (d.a.origin && d.a.origin->step >= 0) return d.a.origin->step;
  if (d.b.origin && d.b.origin->step >= 0) return d.b.origin->step;
  return -1;
}

bool divergesAt(const report::RunComparison& confirmation, const std::string& name, uint64_t index) {
  for (const ProcessDiff& p : confirmation.processes) {
    if (p.name != name) continue;
    return !p.identical && p.firstDivergence && indices(*p.firstDivergence).first == index;
  }
  return false;
}

Reproduction reproduction(const report::RunComparison& vsBase, const report::RunComparison& vsOther,
                          const std::string& name, const DivergencePoint& point, const FirstDivergence& first) {
  if (divergesAt(vsBase, name, point.indexA) || divergesAt(vsOther, name, point.indexB)) return {true, false};
  using diff::Cause;
  if (first.path || (first.cause != Cause::kRngState && first.cause != Cause::kNondeterministicKernel &&
                     first.cause != Cause::kUninitialisedMemory)) {
    return {};
  }
  auto site = [](const diff::OpInfo& o) {
    return o.origin ? fmt::format("{}\n{}\n{}\n{}", o.name, o.origin->op, o.origin->file, o.origin->line) : o.name;
  };
  auto alike = [&](const report::RunComparison& confirmation) {
    for (const ProcessDiff& p : confirmation.processes) {
      if (p.name != name) continue;
      const std::optional<FirstDivergence>& d = p.firstDivergence;
      return !p.identical && d && !d->path && d->cause == first.cause && site(d->a) == site(first.a);
    }
    return false;
  };
  const bool elsewhere = alike(vsBase) || alike(vsOther);
  return {elsewhere, elsewhere};
}

std::optional<uint64_t> snapshotLaunch(const FirstDivergence& d, std::string& why) {
  if (d.path) {
    why = "the runs take different paths there: there is no single launch to re-execute";
    return std::nullopt;
  }
  if (d.a.kind != OpKind::kLaunch) {
    why = fmt::format("the first divergence is a {}, not a kernel launch",
                      d.a.kind == OpKind::kGraph ? std::string("graph launch") : d.a.name);
    return std::nullopt;
  }
  return d.a.launchIndex;
}

std::optional<LaunchLocation> findLaunch(const fs::path& trace, uint64_t launchIndex) {
  const TraceReader reader(trace);
  std::optional<LaunchLocation> found;
  uint64_t n = 0;
  reader.forEach([&](const Event& e) {
    const auto* k = std::get_if<KernelLaunch>(&e.payload);
    // Counted as the recorder numbered them: one captured into a graph has
    // no number (it did not run then).
    if (k == nullptr || k->captured) return true;
    // The recorder's own number where the trace has it (compatVersion 13).
    if (k->number != kNoLaunchNumber ? k->number != launchIndex : n++ < launchIndex) return true;
    LaunchLocation at;
    at.seq = e.seq;
    for (const auto* list : {&k->inputs, &k->outputs}) {
      for (const RangeDigest& r : *list) {
        ++at.ranges;
        if (r.snapshot) ++at.snapshots;
      }
    }
    found = at;
    return false;
  });
  return found;
}

std::optional<Json> readReplayJson(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  Json j = Json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("verdict") || !j["verdict"].is_string()) return std::nullopt;
  return j;
}

std::string replaySummary(const Json& replay, uint32_t run) {
  auto number = [&](const char* key) -> uint64_t {
    const auto it = replay.find(key);
    return it != replay.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
  };
  auto text = [&](const char* key) -> std::string {
    const auto it = replay.find(key);
    return it != replay.end() && it->is_string() ? it->get<std::string>() : "";
  };
  const std::string verdict = text("verdict");
  const std::string summary = text("summary");
  return fmt::format("{} re-execution{} of run {} #{} from its recorded inputs: {}{}", number("runs"),
                     number("runs") == 1 ? "" : "s", run, number("seq"), summary.empty() ? verdict : summary,
                     verdict == "nondeterministic" ? " -> intrinsic" : "");
}

std::string replayFailure(const std::vector<std::string>& stderrLines, const std::string& fallback) {
  for (auto it = stderrLines.rbegin(); it != stderrLines.rend(); ++it) {
    std::string line = *it;
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    for (const char* prefix : {"gpurr replay: error: ", "gpurr replay: ", "gpurr: error: ", "gpurr: "}) {
      if (line.starts_with(prefix)) {
        line.erase(0, std::string_view(prefix).size());
        break;
      }
    }
    return line;
  }
  return fallback;
}

}  // namespace gpurr::cli::bisect
