// The parts of `gpurr bisect` that run no command: naming and preparing the
// output directory, reading what the runs left behind, choosing the pair of
// runs that diverges earliest, and deciding whether the confirmation run
// reproduced the divergence. Separate from the command so that tests can
// drive them directly.
#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "report/diff_report.h"

namespace gpurr::cli::bisect {

using report::Json;

namespace fs = std::filesystem;

// "bisect-<command>-YYYYmmdd-HHMMSS" in `dir` (local time, the command's
// name made shell-friendly as `gpurr record` names traces), with "-2",
// "-3"... added when that name is taken.
fs::path defaultDirectory(const std::vector<std::string>& command, std::time_t now, const fs::path& dir);

// A command line as a shell reads it back: each argument that holds a
// space or a character the shell treats specially, in single quotes.
std::string joinedCommand(const std::vector<std::string>& command);

// The launcher of many processes that `command` runs (torchrun, `python -m
// torch.distributed.run`, accelerate launch, deepspeed, srun, mpirun), or
// empty: two runs of such a job started side by side could meet at one
// rendezvous (a fixed c10d endpoint, MASTER_ADDR and MASTER_PORT), so
// their runs are not overlapped.
std::string launcherOf(const std::vector<std::string>& command);

// Why bisect should not start a run while an earlier one records, in a
// sentence, or empty: a launcher of many processes (launcherOf), or fewer
// than four CPUs for the process (its affinity mask; another bound from
// GPURR_BISECT_MIN_CPUS), where a run's start beside the one recording only
// slows it.
std::string whyNoOverlap(const std::vector<std::string>& command);

// The host memory the kernel says is available for new allocations
// without swapping (MemAvailable) and the machine's (MemTotal), in bytes,
// each bounded by the memory limits of the cgroups this process is in
// (cgroup v2's up to the mount, or v1's memory controller: a container's,
// a Slurm job's) less what their processes use but their page cache; 0 and 0 when /proc/meminfo cannot be read.
// `root` is where /proc and /sys are found.
std::pair<uint64_t, uint64_t> hostMemory(const fs::path& root = "/");

// Whether `name` is a file that a bisect writes in its directory:
// run<N>.gpurr, run<N>.log, report.txt/json/html, replay.json, replay.log.
bool isBisectFile(const std::string& name);

// Makes `dir` ready for a bisect: creates it, or accepts it empty. A
// non-empty one is refused unless `force`, which then removes the files a
// previous bisect left there (isBisectFile) and nothing else. Returns what
// is wrong, or "".
std::string prepareDirectory(const fs::path& dir, bool force);

// The last `count` lines of a text file (fewer when it is shorter; none
// when it cannot be read), without their line ends.
std::vector<std::string> lastLines(const fs::path& file, size_t count);

// Elapsed time as a clock: "0:07", "12:34", "1:02:03".
std::string clockTime(double seconds);

// The per-process traces of a run as `gpurr record -o` leaves them: the
// trace itself (name ""), or the traces of a directory by entry name.
// Empty when the run wrote no trace.
std::vector<std::pair<std::string, fs::path>> runTraces(const fs::path& run);

// What one run holds, summed over its processes.
struct RunTally {
  size_t processes = 0;
  uint64_t launches = 0;
  uint64_t hashedLaunches = 0;
  uint64_t copies = 0;
  uint64_t memsets = 0;
  uint64_t bytesHashed = 0;  // input and output ranges of launches and graph launches
  std::string error;         // a trace that could not be read, else ""
};
// Reads every trace of `run` (decoding all events). Never throws.
RunTally tallyRun(const fs::path& run);
// What a run's traces' indexes say (cheap): the launches, 0 for no trace;
// the training step after which gpurr stopped the program (record
// --until-step), -1 when it was not stopped.
struct RunIndex {
  uint64_t launches = 0;
  int64_t stoppedAfterStep = -1;
};
RunIndex readRunIndex(const fs::path& run);

// The first divergence of one comparison: the process (index into
// `processes`) where it began: in a job of ranks that ran collectives, the
// job's earliest origin (report/job.h); otherwise the process whose first
// divergence comes earliest in run A, by operation index. Nothing when the
// comparison found no divergent operation.
struct DivergencePoint {
  size_t process = 0;
  uint64_t indexA = 0, indexB = 0;  // operation indices in run A and run B
};
std::optional<DivergencePoint> earliestDivergence(const report::RunComparison& c);

// The training step of a first divergence: its operation's in run A, else
// in run B; -1 when neither is known (no PyTorch layer, or before the
// layer counted a step).
int64_t divergenceStep(const diff::FirstDivergence& d);

// Whether the confirmation run reproduced `first`, the first divergence at
// `point` in process `name`: where it diverges from the base run
// (`vsBase`) or from the pair's other run (`vsOther`) at the same
// operation; or else (`elsewhere`), where `first` had a cause that chance
// decides (RNG state, a nondeterministic kernel, uninitialised memory), for
// the same cause at another launch of the same kernel from the same op and
// line (in any module: a layer's other instances call the same line): a
// random op's draws agree by chance at some launches, so which one differs
// first varies from pair to pair.
struct Reproduction {
  bool reproduced = false, elsewhere = false;
};
Reproduction reproduction(const report::RunComparison& vsBase, const report::RunComparison& vsOther,
                          const std::string& name, const DivergencePoint& point, const diff::FirstDivergence& first);

// Whether `confirmation` (some run against the confirmation run, in that
// order) first diverges in process `name` at operation `index` of its run A.
bool divergesAt(const report::RunComparison& confirmation, const std::string& name, uint64_t index);

// The launch number to snapshot for a first divergence: its launch index in
// run A when it is one kernel launch (not a copy, a set, a graph launch or a
// path divergence). Nothing otherwise, with the reason in `why`.
std::optional<uint64_t> snapshotLaunch(const diff::FirstDivergence& d, std::string& why);

// The event number of launch `launchIndex` (counted from 0) in `trace`,
// and whether its input and output ranges carry snapshots.
struct LaunchLocation {
  uint64_t seq = 0;
  size_t ranges = 0;
  size_t snapshots = 0;  // ranges with a snapshot
};
// Nothing when the trace has fewer launches. Throws trace::TraceError.
std::optional<LaunchLocation> findLaunch(const fs::path& trace, uint64_t launchIndex);

// What `gpurr replay --json` wrote to `file`: an object with a verdict, or
// nothing when the file is missing, empty or not such an object.
std::optional<Json> readReplayJson(const fs::path& file);

// The report's replay row for that object, from run `run`: "50
// re-executions of run 3 #18 from its recorded inputs: nondeterministic: 31
// distinct results in 50 runs (...) -> intrinsic".
std::string replaySummary(const Json& replay, uint32_t run);

// The message of a failed `gpurr replay`: its last stderr line without the
// "gpurr replay: error: " prefix; `fallback` when stderr said nothing.
std::string replayFailure(const std::vector<std::string>& stderrLines, const std::string& fallback);

}  // namespace gpurr::cli::bisect
