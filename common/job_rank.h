// A process's place in a distributed job, read from the variables its
// launcher sets: the name of its trace ("rank3.gpurr"), so that the traces
// of a job's processes sit side by side in one directory and two runs match
// by name. Shared by the recorder (which names the trace) and `gpurr record`
// (which, started once per rank by srun or torchrun --no-python, joins the
// job's directory). Header-only.
#pragma once

#include <unistd.h>

#include <charconv>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpurr::job {

struct RankName {
  // "rank<R>.gpurr", "node<N>-local<L>.gpurr" or "<host>-local<L>.gpurr";
  // empty when the environment names no rank (the trace is proc<N>.gpurr).
  std::string name;
  std::optional<int32_t> rank;  // the job-wide rank, when known
  std::string source;           // the variables it came from: "RANK=3"
  // The job's attempt, where its launcher starts the whole job again after a
  // rank failed (torchrun --max-restarts: TORCHELASTIC_RESTART_COUNT); 0
  // the first. A later attempt's trace takes the name from the earlier's.
  int32_t attempt = 0;
};

inline std::optional<int32_t> rankNumber(const char* v) {
  if (v == nullptr || *v == '\0') return std::nullopt;
  const std::string_view s(v);
  int64_t n = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || ptr != s.data() + s.size() || n < 0 || n > INT32_MAX) return std::nullopt;
  return static_cast<int32_t>(n);
}

// This machine's host name, with anything but letters, digits, '-', '_' and
// '.' made '_'; empty when it cannot be read.
inline std::string hostNameForFile() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  std::string s(buf);
  for (char& c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.';
    if (!ok) c = '_';
  }
  return s == "." || s == ".." ? "" : s;
}

// The trace's name, in order: RANK (torchrun, torch.distributed launchers),
// then SLURM_PROCID (srun), OMPI_COMM_WORLD_RANK (Open MPI's mpirun, as
// Horovod's jobs start) and PMI_RANK (MPICH's and Intel MPI's mpiexec),
// then LOCAL_RANK together with the node: NODE_RANK
// when set, else the host name. LOCAL_RANK alone would give two processes on
// two nodes one name on shared storage. A value that is not a number adds a
// line to `problems` and is passed over.
inline RankName rankName(const std::function<const char*(const char*)>& getenv, std::vector<std::string>& problems,
                         const std::function<std::string()>& hostName = hostNameForFile) {
  auto number = [&](const char* var) -> std::optional<int32_t> {
    const char* v = getenv(var);
    if (v == nullptr || *v == '\0') return std::nullopt;
    const std::optional<int32_t> n = rankNumber(v);
    if (!n) problems.push_back(std::string(var) + "=" + v + " is not a rank number; it does not name the trace");
    return n;
  };
  const int32_t attempt = rankNumber(getenv("TORCHELASTIC_RESTART_COUNT")).value_or(0);
  for (const char* var : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (const std::optional<int32_t> r = number(var)) {
      return {"rank" + std::to_string(*r) + ".gpurr", r, std::string(var) + "=" + std::to_string(*r), attempt};
    }
  }
  const std::optional<int32_t> local = number("LOCAL_RANK");
  if (!local) return {};
  const std::string l = std::to_string(*local);
  if (const std::optional<int32_t> node = number("NODE_RANK")) {
    return {"node" + std::to_string(*node) + "-local" + l + ".gpurr", std::nullopt,
            "NODE_RANK=" + std::to_string(*node) + " and LOCAL_RANK=" + l, attempt};
  }
  const std::string host = hostName();
  if (host.empty()) {
    problems.push_back("LOCAL_RANK is set but neither NODE_RANK nor the host name is known; the trace is named proc<N>");
    return {};
  }
  return {host + "-local" + l + ".gpurr", std::nullopt, "LOCAL_RANK=" + l + " on host " + host, attempt};
}

// Where a restarted job's rank keeps the trace its earlier attempt left
// under its name in the job's directory `dir`: attempts/<attempt - 1>/, out
// of the job's view (which reads the traces beside each other) and kept.
// The launcher stopped every rank of that attempt before it started this
// one. False, with a reason in `error`, when it cannot be moved.
inline bool keepEarlierAttempt(const std::filesystem::path& dir, const RankName& name, std::string& error) {
  std::error_code ec;
  const std::filesystem::path to = dir / "attempts" / std::to_string(name.attempt - 1);
  std::filesystem::create_directories(to, ec);
  if (!ec) std::filesystem::rename(dir / name.name, to / name.name, ec);
  if (ec) error = "cannot keep the earlier attempt's trace in " + to.string() + ": " + ec.message();
  return !ec;
}

// Whether the launcher started several processes as this one (WORLD_SIZE,
// srun's SLURM_STEP_NUM_TASKS, else SLURM_NTASKS, an MPI launcher's
// OMPI_COMM_WORLD_SIZE or PMI_SIZE, or LOCAL_WORLD_SIZE, above 1): a `gpurr record` so started
// is one rank of a job. One task (an interactive `srun --pty bash`, which
// sets SLURM_PROCID=0) is not. A launcher that sets LOCAL_RANK and no size
// at all is taken to start several: as one trace each, its processes would
// race for OUT.
inline bool severalRanks(const std::function<const char*(const char*)>& getenv) {
  const char* slurm = getenv("SLURM_STEP_NUM_TASKS");
  if (slurm == nullptr || *slurm == '\0') slurm = getenv("SLURM_NTASKS");
  bool sized = false;
  for (const char* v : {getenv("WORLD_SIZE"), slurm, getenv("OMPI_COMM_WORLD_SIZE"), getenv("PMI_SIZE"),
                        getenv("LOCAL_WORLD_SIZE")}) {
    const std::optional<int32_t> n = rankNumber(v);
    if (n && *n > 1) return true;
    sized = sized || n.has_value();
  }
  return !sized && rankNumber(getenv("LOCAL_RANK")).has_value();
}

}  // namespace gpurr::job
