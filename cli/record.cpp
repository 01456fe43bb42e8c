// gpurr record [-o OUT] [options] -- CMD [ARGS...]: runs an unmodified CUDA
// program with the recorder injected, and leaves one trace per CUDA process.
//
// The recorder (libgpurr_recorder.so, loaded by the CUDA driver through
// CUDA_INJECTION64_PATH) writes each process's trace into a staging directory
// next to OUT; once the command has exited they are moved into place, so an
// interrupted recording never leaves a half-named OUT behind.
#include "cli/record.h"

#include <fmt/format.h>
#include <sys/file.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <regex>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/cuda_driver.h"
#include "cli/process.h"
#include "common/ending_signals.h"
#include "common/job_rank.h"
#include "report/text.h"

extern char** environ;

namespace gpurr::cli {
using namespace gpurr::report;
namespace {
using namespace record;

struct RecordOptions {
  std::string output;
  std::string launches;
  std::string kernels;
  bool sync = false;
  bool hashInputs = false;
  bool verbose = false;
  bool captureHostData = false;
  bool full = false;
  std::string snapshot;
  uint64_t snapshotMemoryMb = 2048;
  uint64_t traceQueueMb = 64;
  uint64_t checkDeterminism = 0;  // re-runs; 0 = off
  bool checkDeterminismGiven = false;
  bool force = false;
  bool noFramework = false;
  bool aslr = false;
  std::string steps;
  int64_t untilStep = -1;  // --until-step; -1 = run to the end
  std::string stopFile;    // --stop-file
  std::string startGate;   // --start-gate
  bool quickExit = false;  // --quick-exit
  bool launchesGiven = false;
  bool kernelsGiven = false;
  bool snapshotGiven = false;
  bool snapshotMemoryGiven = false;
  bool traceQueueGiven = false;
  bool noDeferHashes = false;
  std::vector<std::string> command;
};

constexpr uint64_t kDefaultDeterminismRuns = 10;

// Turns off address-space randomisation for the processes gpurr starts from
// now on, as `setarch -R` does: personality flags pass to children across
// exec. PyTorch passes kernels structs whose unused parts hold whatever its
// host stack held (addresses), and references to host objects: with a
// randomised layout those bytes differ between two runs of the same program
// (docs/GPU_FACTS.md). Empty on success, else why not (a seccomp filter may
// forbid it).
std::string fixAddressLayout() {
  const int current = personality(0xffffffff);
  if (current == -1 || personality(static_cast<unsigned long>(current) | ADDR_NO_RANDOMIZE) == -1) {
    return std::strerror(errno);
  }
  return {};
}

// One line each: a path that holds a line feed prints it as \n.
// Set after the program where stderr is a file whose last byte the program
// left without a newline (a progress bar cut short): gpurr's next line
// starts a line of its own. (On a terminal or a pipe what came last cannot
// be read back.)
bool gLineOpen = false;

void noteOpenLine() {
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return;
  const int fd = ::open("/proc/self/fd/2", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char last = '\n';
  gLineOpen = ::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n';
  ::close(fd);
}

// gpurr's stream for a line of its own.
std::ostream& ownLine() {
  if (gLineOpen) std::cerr << "\n";
  gLineOpen = false;
  return std::cerr;
}

void say(const std::string& text) { ownLine() << "gpurr: " << text::oneLine(text) << "\n"; }

int usageError(const std::string& text) {
  std::cerr << "gpurr record: " << text << "\n";
  return kExitTrouble;
}

// Ends gpurr as the command ended: by its signal where one killed it (its
// default action, without a core dump of gpurr's: neither a core file nor a
// crash handler's report), so that what waits for gpurr (torchrun, srun,
// Python's subprocess) sees the command's death, as a shell's `$?` does
// (128 + N); else returns `code`. `gpurr bisect`, which is no recorded
// program, exits 128 + N instead (docs/BISECT.md).
int passOn(const ChildExit& exit, int code) {
  if (exit.signal == 0) return code;
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const rlimit noCore{0, 0};
  setrlimit(RLIMIT_CORE, &noCore);
  prctl(PR_SET_DUMPABLE, 0);  // a piped core_pattern (systemd-coredump) ignores the limit
  signal(exit.signal, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, exit.signal);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(exit.signal);
  // Still here: gpurr is a PID namespace's init (a container's PID 1), to
  // which the kernel delivers no signal it has no handler for.
  return code;
}

// A gpurr record holds a lock on its staging directory while it runs (the
// lock goes with the process, however it ends): another one into the same
// OUT tells a recording still under way from one that was stopped.
int holdStaging(const fs::path& staging) {
  const int fd = ::open(staging.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) ::flock(fd, LOCK_EX | LOCK_NB);
  return fd;
}

bool stillWriting(const fs::path& staging) {
  const int fd = ::open(staging.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return held;
}

fs::path thisExecutable() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

int run(const RecordOptions& opts) {
  const std::vector<std::string>& command = opts.command;
  if (command.empty()) {
    return usageError("no command given after --; usage: gpurr record [-o OUT] [options] -- CMD [ARGS...]");
  }
  if (!opts.output.empty() && opts.output.front() == '-') {
    // `-o -- python train.py`: the output's name forgotten, `--` taken for it.
    return usageError(fmt::format("-o {}: a trace's name that starts with '-' looks like a missing -o value; "
                                  "give the trace's name (-o ./{} if that is its name)",
                                  opts.output, opts.output));
  }
  if (!opts.steps.empty()) {
    // A Python slice of step numbers; the recorder reads it (GPURR_STEPS).
    static const std::regex kSlice(R"((\d{0,18}):(\d{0,18})(:(\d{0,18}))?)");
    std::smatch m;
    const bool slice = std::regex_match(opts.steps, m, kSlice) && (m[4].str().empty() || std::stoull(m[4].str()) > 0);
    if (slice && !m[1].str().empty() && !m[2].str().empty() && std::stoull(m[1].str()) >= std::stoull(m[2].str())) {
      return usageError(fmt::format("--steps: '{}' selects no step (B must be larger than A)", opts.steps));
    }
    if (!slice) {
      return usageError(fmt::format("--steps: '{}' is not A:B or A:B:N (steps A up to, not including, B, every "
                                    "N-th; either end may be left out: 10:12, 100:, ::50)",
                                    opts.steps));
    }
  }
  if (opts.launchesGiven) {
    if (std::string e = checkLaunchRange(opts.launches); !e.empty()) return usageError(e);
  }
  if (opts.kernelsGiven) {
    if (std::string e = checkKernelRegex(opts.kernels); !e.empty()) return usageError(e);
  }
  if (opts.snapshotGiven) {
    if (std::string e = checkSnapshotSelection(opts.snapshot); !e.empty()) return usageError(e);
  }
  if (opts.snapshotMemoryGiven && (opts.snapshotMemoryMb == 0 || opts.snapshotMemoryMb > (uint64_t{1} << 40))) {
    return usageError(fmt::format("--snapshot-memory {}: give the host memory for snapshots in MiB (at least 1)",
                                  opts.snapshotMemoryMb));
  }
  if (opts.traceQueueGiven && (opts.traceQueueMb == 0 || opts.traceQueueMb > (uint64_t{1} << 20))) {
    return usageError(fmt::format("--trace-queue {}: give the host memory for events waiting for the trace "
                                  "thread in MiB (at least 1)",
                                  opts.traceQueueMb));
  }
  if ((opts.untilStep >= 0 || !opts.stopFile.empty()) && opts.noFramework) {
    return usageError(fmt::format("{} needs the PyTorch layer, which counts training steps: leave out --no-framework",
                                  opts.untilStep >= 0 ? "--until-step" : "--stop-file"));
  }
  if (opts.checkDeterminismGiven) {
    if (std::string e = checkDeterminismOptions(opts.checkDeterminism, opts.launchesGiven, opts.kernelsGiven,
                                                    opts.snapshotGiven);
        !e.empty())
      return usageError(e);
  }
  const fs::path executable = thisExecutable();
  fs::path library;
  try {
    library = recorderLibrary(executable, std::getenv("GPURR_RECORDER_LIB"));
  } catch (const std::runtime_error& e) {
    return usageError(e.what());
  }

  std::error_code ec;
  const fs::path cwd = fs::current_path();
  const std::time_t started = std::time(nullptr);
  fs::path out = opts.output.empty() ? defaultOutput(command, started, cwd) : fs::absolute(opts.output);
  out = out.lexically_normal();
  if (out.has_filename() == false) out = out.parent_path();  // "a.gpurr/" names a.gpurr
  // Started once per rank of a job of several (srun, torchrun --no-python):
  // OUT is the job's directory, shared with the other ranks' gpurr
  // (joinTraces). The recorder warns about malformed variables.
  const auto getenv = [](const char* n) { return std::getenv(n); };
  std::vector<std::string> rankProblems;
  const job::RankName self = job::rankName(getenv, rankProblems);
  const bool jobMember = !self.name.empty() && job::severalRanks(getenv);
  // Whether OUT was there as gpurr began: only one that was not is taken
  // below (and one that another gpurr record takes meanwhile is refused).
  const bool existed = fs::exists(fs::symlink_status(out, ec));
  if (jobMember && existed) {
    if (!replaceable(out) || fs::exists(out / "version", ec)) {
      return usageError(fmt::format("{} exists and is not a directory of traces: as one rank of a job ({}), gpurr "
                                    "puts its trace in OUT beside the other ranks'; choose another -o OUT",
                                    out.string(), self.source));
    }
    std::string kept;
    if (self.attempt > 0 && fs::exists(fs::symlink_status(out / self.name, ec)) &&
        !job::keepEarlierAttempt(out, self, kept)) {
      return usageError(kept);
    }
    if (fs::exists(fs::symlink_status(out / self.name, ec)) && !opts.force) {
      return usageError(fmt::format("{} already exists; choose another -o OUT, or add --force to replace this "
                                    "rank's trace",
                                    (out / self.name).string()));
    }
  } else if (existed) {
    // Only a trace is ever replaced: other data is not offered --force.
    if (!replaceable(out)) {
      return usageError(fmt::format("{} exists and is not a gpurr trace; choose another -o OUT (gpurr replaces "
                                    "only a trace, with --force)",
                                    out.string()));
    }
    // Taken, empty, by a gpurr record whose traces gather beside it: one
    // still running is never replaced, --force or not.
    const fs::path writing = fs::is_empty(out, ec) ? stagingDirectory(out) : fs::path();
    if (!writing.empty() && stillWriting(writing)) {
      return usageError(fmt::format("{} is being written by a gpurr record that is still running (its traces gather "
                                    "in {}); wait for it to end, or choose another -o OUT",
                                    out.string(), writing.string()));
    }
    if (!opts.force) {
      return usageError(writing.empty()
                            ? fmt::format("{} already exists; choose another -o OUT, or add --force to replace it",
                                          out.string())
                            : fmt::format("{} already exists: a gpurr record that was stopped before it ended "
                                          "took it (what it recorded is in {}); choose another -o OUT, or add "
                                          "--force to replace it",
                                          out.string(), writing.string()));
    }
  }
  if (!fs::is_directory(out.parent_path(), ec)) {
    return usageError(fmt::format("cannot write {}: directory {} does not exist", out.string(),
                                  out.parent_path().string()));
  }
  // The program would wait for a gate that cannot appear.
  if (const fs::path gateDir = opts.startGate.empty() ? fs::path() : fs::absolute(opts.startGate).parent_path();
      !gateDir.empty() && !fs::is_directory(gateDir, ec)) {
    return usageError(fmt::format("--start-gate {}: directory {} does not exist, so the gate could never open",
                                  opts.startGate, gateDir.string()));
  }
  // Said up front: without a driver no CUDA call succeeds, so the recorder
  // never starts; the program still runs, and its exit code passes through.
  // A recorder library named by GPURR_RECORDER_LIB (the tests' stand-in
  // records without a driver) is not known to need one.
  const char* namedLibrary = std::getenv("GPURR_RECORDER_LIB");
  const std::optional<std::string> noDriver =
      namedLibrary != nullptr && *namedLibrary != '\0' ? std::nullopt : missingCudaDriver();
  if (noDriver) say(*noDriver + ": nothing will be recorded; the program runs as usual");
  // OUT is taken now, an empty directory, so that a second `gpurr record`
  // into it (the same -o, or the same default name in the same second) is
  // refused before its program runs; the traces replace it when they are
  // moved into place. A rank of a job shares OUT; an OUT to be replaced
  // (--force) stays as it is until then.
  bool reserved = false;
  if (!jobMember && !existed) {
    while (::mkdir(out.c_str(), 0700) != 0) {
      if (errno == EEXIST && opts.output.empty()) {
        out = defaultOutput(command, started, cwd);
        continue;
      }
      return usageError(errno == EEXIST ? fmt::format("{} already exists: another gpurr record began writing it; "
                                                      "choose another -o OUT",
                                                      out.string())
                                        : fmt::format("cannot write {}: {}", out.string(), std::strerror(errno)));
    }
    reserved = true;
  }
  // Gives OUT up where no trace takes its place.
  const auto release = [&] {
    if (reserved) fs::remove(out, ec);  // only while it is still empty
  };
  if (opts.output.empty()) say(fmt::format("recording to {}", out.string()));

  // Next to OUT, so that moving the traces into place is a rename (gpurr
  // bisect finds it by this name to compare a run as it records,
  // cli/bisect_watch.cpp).
  std::string templ = stagingTemplate(out);
  if (mkdtemp(templ.data()) == nullptr) {
    const int error = errno;
    release();
    return usageError(fmt::format("cannot create a staging directory in {}: {}",
                                  out.parent_path().string(), std::strerror(error)));
  }
  // mkdtemp makes it private (0700), and it stays so: a single trace or the
  // directory of traces becomes OUT, and traces can hold training data.
  const fs::path staging = templ;
  [[maybe_unused]] const int stagingLock = holdStaging(staging);  // held to the end of the process

  std::vector<EnvChange> changes{
      {"CUDA_INJECTION64_PATH", library.string()},
      {"GPURR_OUTPUT", staging.string()},
      {"GPURR_TOOL_VERSION", GPURR_VERSION},
      // Only the options given here apply, whatever the environment holds.
      {"GPURR_LAUNCHES", opts.launches, opts.launches.empty()},
      {"GPURR_KERNELS", opts.kernels, opts.kernels.empty()},
      {"GPURR_STEPS", opts.steps, opts.steps.empty()},
      {"GPURR_SYNC", "1", !opts.sync},
      {"GPURR_HASH_INPUTS", "1", !opts.hashInputs},
      {"GPURR_CAPTURE_HOST_DATA", "1", !opts.captureHostData},
      {"GPURR_FULL", "1", !opts.full},
      {"GPURR_SNAPSHOT", opts.snapshot, !opts.snapshotGiven},
      {"GPURR_SNAPSHOT_MEMORY_MB", std::to_string(opts.snapshotMemoryMb), !opts.snapshotMemoryGiven},
      {"GPURR_TRACE_QUEUE_MB", std::to_string(opts.traceQueueMb), !opts.traceQueueGiven},
      {"GPURR_DEFER_HASHES", "0", !opts.noDeferHashes},
      {"GPURR_CHECK_DETERMINISM", std::to_string(opts.checkDeterminism), opts.checkDeterminism == 0},
      {"GPURR_VERBOSE", "1", !opts.verbose},
      {"GPURR_UNTIL_STEP", std::to_string(opts.untilStep), opts.untilStep < 0},
      {"GPURR_STOP_FILE", opts.stopFile.empty() ? "" : fs::absolute(opts.stopFile).string(), opts.stopFile.empty()},
      // A run with a stop file is watched as it is written (gpurr bisect):
      // its blocks are closed four times a second for the watcher to see.
      {"GPURR_FLUSH_MS", "250", opts.stopFile.empty()},
      {"GPURR_START_GATE", opts.startGate.empty() ? "" : fs::absolute(opts.startGate).string(),
       opts.startGate.empty()},
      // The held program's parent: once it is gone the program ends.
      {"GPURR_START_GATE_PARENT", std::to_string(::getpid()), opts.startGate.empty()},
      {"GPURR_QUICK_EXIT", "1", !opts.quickExit},
  };
  // The CUPTI the recorder loads when the process has none yet (see
  // recorder/cupti_library.h): the program's Python environment's first.
  const std::string envCupti = pythonCupti(command, executable, [](const char* n) { return std::getenv(n); });
  changes.push_back({"GPURR_PYTHON_CUPTI", envCupti, envCupti.empty()});
  if (opts.verbose) {
    const char* chosen = std::getenv("GPURR_CUPTI");
    say(fmt::format("CUPTI search order: the copy the program has loaded, {}{}the CUDA toolkit (CUDA_HOME, "
                    "CUDA_PATH, /usr/local/cuda), the system's library path",
                    chosen != nullptr && *chosen != '\0' ? fmt::format("GPURR_CUPTI={}, ", chosen) : "",
                    envCupti.empty() ? "" : fmt::format("the program's Python environment ({}), ", envCupti)));
  }
  if (!opts.noFramework) {
    for (EnvChange& c : frameworkEnv(executable, std::getenv("PYTHONPATH"))) changes.push_back(std::move(c));
  }
  // Its cuDNN / cuBLAS / cuRAND wrappers record the algorithms chosen.
  if (isElf(library)) changes.push_back({"LD_PRELOAD", preloadWith(std::getenv("LD_PRELOAD"), library.string())});
  if (const char* previous = std::getenv("CUDA_INJECTION64_PATH");
      previous != nullptr && *previous != '\0' && library != previous) {
    say(fmt::format("warning: replacing CUDA_INJECTION64_PATH={} with the recorder", previous));
  }
  std::vector<std::string> baseEnv;
  for (char** e = environ; *e != nullptr; ++e) baseEnv.emplace_back(*e);
  if (!opts.aslr) {
    const std::string failed = fixAddressLayout();
    if (!failed.empty()) {
      say(fmt::format("warning: cannot turn off address-space randomisation ({}): host addresses the "
                      "program passes to kernels will differ between runs (--aslr leaves it on)",
                      failed));
    }
  }
  std::fflush(stdout);
  std::fflush(stderr);

  // A signal to end it (gpurr bisect's, or its death's) reaches a program
  // still held at its start gate, where one that handles SIGTERM itself
  // cannot run its handler: its gate tells it to go.
  const fs::path gate = opts.startGate.empty() ? fs::path() : fs::absolute(opts.startGate);
  const ChildExit exit = runChild(command, applyEnv(baseEnv, changes), [&gate](int sig) {
    std::error_code ec;
    if (gate.empty() || (sig != SIGTERM && sig != SIGINT && sig != SIGHUP) || fs::exists(gate, ec)) return;
    const fs::path partial = fs::path(gate).concat(".part");
    std::ofstream(partial) << "cancel\n";
    fs::rename(partial, gate, ec);
  });
  if (!exit.started) {
    fs::remove_all(staging, ec);
    release();
    std::cerr << "gpurr record: cannot run '" << command[0] << "': " << exit.error << "\n";
    return exit.code;
  }
  noteOpenLine();
  if (exit.signal != 0) {
    // A recorded process this signal ended wrote what its recorder held
    // first, unless its recorder could not take it.
    say(fmt::format("the command was killed by signal {} ({}){}", exit.signal, strsignal(exit.signal),
                    recorderTakesSignal(exit.signal)
                        ? ": the recorder takes this signal first and writes what it holds before the program ends, "
                          "so a trace it cut short ends where the program stopped"
                        : ""));
  }

  Placement placed;
  try {
    placed = jobMember ? joinTraces(staging, out, opts.force) : placeTraces(staging, out, opts.force);
  } catch (const fs::filesystem_error& e) {
    release();
    // A trace of the same name in a job's directory: another process of the
    // job given the same rank.
    const std::string clash = e.code() == std::errc::file_exists && !e.path1().empty() && e.path1() != out
                                  ? fmt::format(" ({} is there already: another process of the job wrote it, given "
                                                "the same rank: RANK, SLURM_PROCID, or LOCAL_RANK with the node)",
                                                e.path1().filename().string())
                                  : "";
    // The program's exit status, whatever became of its trace.
    ownLine() << "gpurr record: error: could not move the trace to " << out.string() << ": " << e.code().message()
              << clash << "\ngpurr: the recorded traces are still in " << staging.string() << "\n";
    return passOn(exit, exit.code);
  }
  for (const fs::path& p : placed.leftovers) {
    say(fmt::format("warning: the recorder left {} (not a trace) in {}", p.filename().string(),
                    staging.string()));
  }
  if (placed.traces.empty()) {
    release();
    if (!noDriver) {
      // A recorder that could not make its trace (a full disk) said so.
      const std::string none = "no trace written (no CUDA process ran, or a warning above says why)";
      say(existed && !jobMember ? fmt::format("{}; {} is as it was", none, out.string()) : none);
    }
    return passOn(exit, exit.code);
  }
  if (placed.directoryOfTraces) {
    std::string names;
    for (const fs::path& p : placed.traces) {
      names += (names.empty() ? "" : ", ") + p.filename().string();
    }
    if (jobMember) {
      say(fmt::format("{} written to {}/, the job's directory ({})", names, out.string(), self.source));
    } else {
      say(fmt::format("{} traces written to {}/ ({})", placed.traces.size(), out.string(), names));
    }
  } else {
    say(fmt::format("trace written to {}", out.string()));
  }
  const RecordSummary summary = summarise(placed.traces);
  for (const TraceSummary& t : summary.traces) {
    if (!t.readable) {
      say(fmt::format("warning: {}: {}", t.path.string(), t.error));
    } else if (!t.damage.empty()) {
      say(fmt::format("warning: {}: {}", t.path.string(), t.damage));
    }
  }
  if (opts.untilStep >= 0 && std::none_of(summary.traces.begin(), summary.traces.end(),
                                          [](const TraceSummary& t) { return t.stoppedAfterStep >= 0; })) {
    // The trace's index says where gpurr stopped the program: one cut short
    // (a signal, a crash while it shut down) has none.
    const bool cut = std::any_of(summary.traces.begin(), summary.traces.end(),
                                 [](const TraceSummary& t) { return !t.readable || !t.damage.empty(); });
    say(cut ? fmt::format("warning: --until-step {}: whether gpurr stopped the program is not known: its trace was "
                          "cut short (above), and only a trace's end says where gpurr stopped it",
                          opts.untilStep)
            : fmt::format("warning: the program was not stopped (--until-step {}): it ended by itself before gpurr "
                          "stopped it (gpurr stops it at its first module call after that step's optimizer step, or "
                          "at the end of the next step), or it never stepped a torch.optim optimizer",
                          opts.untilStep));
  }
  const auto stepped = [](const TraceSummary& t) { return t.stepped || !t.readable; };
  if (!opts.steps.empty() && std::none_of(summary.traces.begin(), summary.traces.end(), stepped)) {
    say(fmt::format("warning: --steps {}: the program completed no training step, so no launch was hashed (gpurr "
                    "counts training steps by the steps of a torch.optim optimizer, docs/RECORDING.md)",
                    opts.steps));
  }
  const char* stopOption = opts.stopFile.empty() ? "--until-step"
                           : opts.untilStep < 0   ? "--stop-file"
                                                  : "--until-step or --stop-file";
  for (const TraceSummary& t : summary.traces) {
    if (t.stoppedAfterStep < 0) continue;
    say(fmt::format("{}stopped the program after training step {} ({}): the trace is complete up to there",
                    placed.directoryOfTraces ? t.path.filename().string() + ": " : "", t.stoppedAfterStep,
                    stopOption));
  }
  say(summaryLine(summary));
  if (opts.verbose) {
    for (const TraceSummary& t : summary.traces) {
      if (t.readable) say(fmt::format("{}: recorder {}", t.path.filename().string(), t.cost.line()));
    }
  }
  return passOn(exit, exit.code);
}

}  // namespace

void addRecordCommand(CLI::App& app, Action& chosen) {
  auto opts = std::make_shared<RecordOptions>();
  CLI::App* cmd = app.add_subcommand(
      "record", "Run a CUDA program, unmodified, with the recorder injected: a trace per CUDA process.");
  cmd->add_option("-o,--output", opts->output,
                  "Trace to write (default: <command>-<date>-<time>.gpurr here)")
      ->check(kPathGiven);
  cmd->add_option("--launches", opts->launches,
                  "Hash only launches A up to (not including) B, counted from 0 in each "
                  "process; 'A:' and ':B' leave one end open. Other launches are still recorded.");
  cmd->add_option("--kernels", opts->kernels,
                  "Hash only launches of kernels whose name (mangled or demangled) matches "
                  "this regular expression (ECMAScript)");
  cmd->add_option("--steps", opts->steps,
                  "Hash only launches of these training steps of a PyTorch program, as a Python slice of step "
                  "numbers counted from 0 (optimizer steps completed): 10:12, 100:, ::50 (every 50th). Other "
                  "launches are still recorded.");
  cmd->add_option("--until-step", opts->untilStep,
                  "Stop a PyTorch program cleanly after training step N (counted from 0, as --steps counts), at "
                  "the next step's first training call of a module (the rest of step N's iteration runs; a "
                  "program that calls no module stops after step N+1, and says so): its atexit handlers run "
                  "and the trace is complete; `gpurr info` says where it was stopped. Needs the PyTorch layer "
                  "(not with --no-framework). More in docs/RECORDING.md.")
      ->check(kWholeNumber);
  cmd->add_option("--stop-file", opts->stopFile,
                  "Stop a PyTorch program cleanly once FILE names a training step: after that step, as "
                  "--until-step N does, or at the next step when it has passed. The program looks for FILE at "
                  "every step; write the number into it from outside (gpurr bisect does so to stop a run soon "
                  "after its first divergence). Needs the PyTorch layer.");
  cmd->add_flag("--quick-exit", opts->quickExit,
                "When gpurr stops the program (--until-step, --stop-file), end it once its atexit handlers have "
                "run, its open files are flushed and the trace is closed, without the interpreter's teardown of "
                "every module (about a second after `import torch`). gpurr bisect uses it for every run.");
  cmd->add_option("--start-gate", opts->startGate,
                  "Hold every CUDA process of the program at its first CUDA call until FILE exists; a line "
                  "\"snapshot SELECTION\" in FILE then selects launches as --snapshot does. gpurr bisect uses it "
                  "to start a run while an earlier one records, holding it until the runs before it have ended: only "
                  "the program's start overlaps.");
  cmd->add_flag("--sync", opts->sync,
                "Synchronise around every launch: slower, but hashes see each launch in "
                "isolation");
  cmd->add_flag("--hash-inputs", opts->hashInputs,
                "Hash every launch's buffers before it runs too, not only those holding bytes no recorded "
                "operation has touched yet (in the cost model, about 1.5 times the bytes hashed without the "
                "PyTorch layer and about 3 times in a PyTorch program; docs/RECORDING.md, What hashing costs)");
  cmd->add_flag("-v,--verbose", opts->verbose,
                "Say where CUPTI is looked for and which copy each process loaded; after the run, also say what "
                "recording cost the program, per process: time its threads spent in the recorder per launch (and "
                "by part of its launch callbacks), and the GPU operations the recorder enqueued per launch");
  cmd->add_flag("--capture-host-data", opts->captureHostData,
                "Keep the bytes of every host-to-device copy in the trace");
  cmd->add_flag("--full", opts->full,
                "Record everything a whole-stream replay (gpurr replay --all) needs; implies "
                "--capture-host-data");
  cmd->add_option("--snapshot", opts->snapshot,
                  "Keep the full bytes of the inputs (before) and outputs (after) of the selected "
                  "launches: comma-separated launch numbers K, ranges A:B, A:, :B, or kernel name "
                  "regular expressions; selected launches are always hashed");
  cmd->add_option("--snapshot-memory", opts->snapshotMemoryMb,
                  "Host memory for snapshots on their way to disk, in MiB (default 2048); the program "
                  "waits for the trace writer when it is full")
      ->check(kWholeNumber);
  cmd->add_option("--trace-queue", opts->traceQueueMb,
                  "Host memory for events waiting for the trace writer, in MiB (default 64); when it is full, "
                  "events are dropped, counted and marked in the trace (the program never waits for the writer)")
      ->check(kWholeNumber);
  cmd->add_flag("--no-defer-hashes", opts->noDeferHashes,
                "Hash each launch's outputs when it ends, instead of with later launches' in one hash launch "
                "(the default on a GPU; docs/RECORDING.md, Deferred output hashes)");
  // A flag that takes an optional =N: an option with an optional value would
  // swallow the -- before the command.
  CLI::Option* determinism =
      cmd->add_flag("--check-determinism", opts->checkDeterminism,
                    "Re-run each launch selected by --launches/--kernels (or, without them, by --snapshot) N "
                    "times (default 10) from the same state, in the process, and record how many distinct "
                    "results they gave")
          ->option_text("[=N]");
  cmd->add_flag("--no-framework", opts->noFramework,
                "Leave out the PyTorch layer that attributes each launch to its op, module, source line and "
                "training step");
  cmd->add_flag("--aslr", opts->aslr,
                "Leave address-space layout randomisation on for the command (gpurr turns it off, as setarch -R "
                "does, so that host addresses the program passes to kernels are the same in two runs)");
  cmd->add_flag("--force", opts->force, "Replace OUT if it already exists");
  // After "--" everything belongs to the command, options included.
  cmd->add_option("command", opts->command,
                  "The command to record and its arguments, after --")
      ->expected(-1);
  cmd->footer(
      "Put -- before the command: gpurr record -o run.gpurr -- python train.py --lr 0.1\n"
      "OUT is the trace when one CUDA process ran; when several did, OUT is a directory of\n"
      "traces named rank<R>.gpurr (RANK, else SLURM_PROCID), node<N>-local<L>.gpurr (LOCAL_RANK\n"
      "with NODE_RANK), <host>-local<L>.gpurr (LOCAL_RANK without it) or proc<N>.gpurr, so that\n"
      "two runs match by name. Started once per rank of several (srun gpurr record -o DIR -- ...),\n"
      "each gpurr puts its rank's trace in the directory OUT, shared by the job's ranks.\n"
      "The command's input and output pass through untouched; gpurr exits with its\n"
      "exit code, and dies of the signal that killed it. More in docs/RECORDING.md.");
  // Unknown options are collected rather than rejected by the parser, so
  // that the error can say how to pass options to the command.
  cmd->allow_extras();
  cmd->callback([opts, cmd, determinism, &chosen] {
    // Alone, the flag reads "true" (counted as 1): the default count.
    if (determinism->results() == std::vector<std::string>{"true"}) opts->checkDeterminism = kDefaultDeterminismRuns;
    opts->checkDeterminismGiven = determinism->count() > 0;
    opts->launchesGiven = cmd->count("--launches") > 0;
    opts->kernelsGiven = cmd->count("--kernels") > 0;
    opts->snapshotGiven = cmd->count("--snapshot") > 0;
    opts->snapshotMemoryGiven = cmd->count("--snapshot-memory") > 0;
    opts->traceQueueGiven = cmd->count("--trace-queue") > 0;
    std::vector<std::string> extras = cmd->remaining();
    std::erase(extras, "--");  // the separator itself, handed back by the parser
    if (!extras.empty()) {
      std::string list;
      for (const std::string& e : extras) list += (list.empty() ? "'" : " '") + e + "'";
      chosen = [list] {
        return usageError(fmt::format(
            "unknown option {}; to give options to the command, put -- before it: "
            "gpurr record [-o OUT] [options] -- CMD [ARGS...]",
            list));
      };
      return;
    }
    chosen = [opts] { return run(*opts); };
  });
}

}  // namespace gpurr::cli
