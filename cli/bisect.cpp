// gpurr bisect [-o DIR] [--runs N] -- CMD [ARGS...]: record, diff, confirm,
// replay and report in one command (docs/BISECT.md). Records the command N times, compares the
// runs, records once more with snapshots of the first divergent launch to
// confirm it and to replay it, and writes the one-screen answer (report.txt),
// report.json and report.html into DIR. Each recording and the replay run as
// children (`gpurr record`, `gpurr replay`: this very executable), so they
// behave exactly as when the user types them; their output goes to
// DIR/run<i>.log and DIR/replay.{json,log}.
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>

#include "cli/bisect.h"
#include "cli/bisect_outcome.h"
#include "cli/bisect_run.h"
#include "cli/bisect_watch.h"
#include "cli/commands.h"
#include "cli/cuda_driver.h"
#include "report/diff_report.h"
#include "report/event_json.h"
#include "cli/record.h"
#include "report/terminal.h"
#include "report/text.h"
#include "diff/diff.h"
#include "report/html.h"
#include "report/timeline.h"
#include "trace_format/trace.h"

namespace gpurr::cli {
namespace {
using namespace gpurr::cli::bisect;
using namespace gpurr::report;
using gpurr::diff::Culprits;
using gpurr::diff::FirstDivergence;
using gpurr::diff::ProcessDiff;
using Clock = std::chrono::steady_clock;

struct BisectOptions {
  std::string output;
  uint32_t runs = 2;
  uint32_t repeat = 50;
  bool json = false;
  bool keepGoing = false;
  bool force = false;
  std::string color = "auto";
  std::string culprits;
  // Passed on to every `gpurr record`.
  std::string launches, kernels;
  bool sync = false;
  bool hashInputs = false;
  bool captureHostData = false;
  bool noFramework = false;
  int64_t untilStep = -1;
  bool noOverlap = false;  // --no-overlap: each run starts when the one before has ended
  std::vector<std::string> command;

  std::vector<std::string> recordOptions() const {
    std::vector<std::string> out;
    if (!launches.empty()) out.insert(out.end(), {"--launches", launches});
    if (!kernels.empty()) out.insert(out.end(), {"--kernels", kernels});
    if (sync) out.push_back("--sync");
    if (hashInputs) out.push_back("--hash-inputs");
    if (captureHostData) out.push_back("--capture-host-data");
    if (noFramework) out.push_back("--no-framework");
    if (untilStep >= 0) out.insert(out.end(), {"--until-step", std::to_string(untilStep)});
    return out;
  }
};

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ------------------------------------------------------------ progress

// What gpurr bisect is doing, on stderr: on a terminal one line rewritten in
// place with a running clock; otherwise one line per phase, for logs.
class Progress {
 public:
  explicit Progress(bool terminal) : terminal_(terminal) {}
  ~Progress() { clear(); }

  void phase(const std::string& text, const std::string& note = "") {
    text_ = text;
    note_ = note;
    start_ = Clock::now();
    if (terminal_) {
      draw();
    } else {
      std::cerr << "gpurr bisect: " << (note.empty() ? text : text + " " + note) << "\n";
    }
  }
  void tick() {
    if (terminal_ && !text_.empty()) draw();
  }
  // A line that stays (a finished run, a warning).
  void say(const std::string& line) {
    clear();
    std::cerr << "gpurr bisect: " << line << "\n";
    if (terminal_ && !text_.empty()) draw();
  }
  void clear() {
    if (terminal_ && drawn_) {
      std::fputs("\r\033[K", stderr);
      std::fflush(stderr);
      drawn_ = false;
    }
  }
  void done() {
    clear();
    text_.clear();
  }

 private:
  void draw() {
    winsize ws{};
    const size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
    // A line longer than the terminal wraps, and \r then rewrites only its
    // last part: the description gives way, the clock stays.
    // Escaped before it is measured, and cut at a character's start.
    const std::string note = report::terminalText(note_);
    std::string text = report::terminalText(text_);
    std::string tail = "  " + clockTime(secondsSince(start_));
    if (!note.empty() && text.size() + tail.size() + note.size() + 2 < width) tail += "  " + note;
    if (text.size() + tail.size() >= width) {
      const size_t room = width > tail.size() + 8 ? width - tail.size() - 4 : 4;
      text = text.substr(0, report::characterStart(text, room)) + "...";
    }
    std::fprintf(stderr, "\r\033[K%s", (text + tail).c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

  bool terminal_;
  bool drawn_ = false;
  std::string text_, note_;
  Clock::time_point start_;
};

// Ctrl-C while gpurr bisect itself works (comparing, writing reports): the
// children are gone, the directory is complete up to here; say where it is.
char interruptMessage[4096];
size_t interruptLength = 0;

extern "C" void onInterrupt(int sig) {
  ssize_t ignored = ::write(STDERR_FILENO, interruptMessage, interruptLength);
  (void)ignored;
  _exit(128 + sig);
}

void catchInterrupts(const fs::path& dir) {
  const std::string text = fmt::format("{}gpurr bisect: interrupted; what was recorded so far is in {}/\n",
                                       ::isatty(STDERR_FILENO) == 1 ? "\r\033[K" : "", dir.string());
  interruptLength = std::min(text.size(), sizeof interruptMessage);
  std::memcpy(interruptMessage, text.data(), interruptLength);
  struct sigaction sa {};
  sa.sa_handler = onInterrupt;
  sigemptyset(&sa.sa_mask);
  for (int s : forwardedSignals()) sigaction(s, &sa, nullptr);
}

// ------------------------------------------------------------ the bisect

class Bisect {
 public:
  Bisect(const BisectOptions& opts, fs::path exe, fs::path dir, fs::path shown, const Culprits* culprits)
      : opts_(opts), exe_(std::move(exe)), dir_(std::move(dir)), shown_(std::move(shown)),
        culprits_(culprits), progress_(::isatty(STDERR_FILENO) == 1) {
    out_.command = opts.command;
    out_.recordOptions = opts.recordOptions();
    out_.dir = shown_;
  }

  Outcome run() {
    const Clock::time_point start = Clock::now();
    execute();
    dropHeld();
    progress_.done();
    out_.seconds = secondsSince(start);
    return std::move(out_);
  }

 private:
  void execute() {
    const uint32_t total = opts_.runs;
    for (uint32_t i = 1; i <= total; ++i) {
      RunRecord& r = record(i, total, "", false);
      if (out_.interruptedBy != 0) return;
      if (!r.started) {
        out_.error = fmt::format("cannot run gpurr record: {}", r.startError);
        return;
      }
      if (r.failed() || !r.traced) {
        noteFailure(r);
        if (!opts_.keepGoing) {
          // A clean exit without a trace: no CUDA process ran, and going on
          // would only run it again.
          out_.error = !r.failed() ? fmt::format("run {} recorded nothing to compare{}", r.number,
                                                 noDriver_ ? ": " + *noDriver_ : "")
                                   : fmt::format("run {} failed; add --keep-going to compare the runs that leave a "
                                                 "trace anyway",
                                                 r.number);
          return;
        }
      }
    }
    std::vector<const RunRecord*> traced;
    for (const RunRecord& r : out_.runs) {
      if (r.traced) traced.push_back(&r);
    }
    if (traced.size() < 2) {
      out_.error = fmt::format("{} of {} runs left a trace: nothing to compare", traced.size(), total);
      return;
    }
    if (!compare(traced)) return;
    if (!out_.chosen && comparedInPart_) {
      out_.verdict = "failed";  // out_.error says where the comparison stopped
      return;
    }
    if (!out_.chosen) {
      out_.verdict = "identical";
      progress_.phase(fmt::format("reading run {} to summarise what was compared", out_.base));
      out_.tally = tallyRun(traced.front()->trace);
      return;
    }
    out_.verdict = "diverged";
    confirm();
    if (out_.interruptedBy != 0) return;
    timeline();
  }

  // Records run `number`. A run after the first traced one is watched and
  // stopped soon after its first divergence (bisect_watch.h); `untilStep`
  // >= 0 stops it after that step instead of --until-step's. A run held at
  // its start (holdAhead) is let go instead of started.
  RunRecord& record(uint32_t number, uint32_t total, const std::string& snapshot, bool confirmation,
                    int64_t untilStep = -1) {
    RunRecord r;
    r.number = number;
    r.confirmation = confirmation;
    r.trace = shown_ / fmt::format("run{}.gpurr", number);
    r.log = shown_ / fmt::format("run{}.log", number);
    r.snapshot = snapshot;
    // The layer counts steps (not with --no-framework): a run after the
    // first traced one is stopped soon after it diverges.
    const RunRecord* first = firstTraced();
    const bool watched = !confirmation && first && !opts_.noFramework;
    const fs::path stopFile = runFile(".run{}.stop", number);
    std::string what = confirmation ? fmt::format("run {}: recording {} again to confirm", number,
                                                  joinedCommand(opts_.command))
                                    : fmt::format("run {}/{}: recording {}", number, total,
                                                  joinedCommand(opts_.command));
    if (!snapshot.empty()) what += fmt::format(", with snapshots of launch #{}", snapshot);
    std::unique_ptr<StepChild> child = letGo(number, snapshot, untilStep, r.startedBeside);
    if (r.startedBeside != 0) what += fmt::format(" (started during run {})", r.startedBeside);
    progress_.phase(what, fmt::format("(output in {})", r.log.string()));
    const Clock::time_point start = Clock::now();
    if (!child) {
      std::vector<std::string> argv = recordArgv(number, snapshot, untilStep, watched ? stopFile : fs::path());
      child = std::make_unique<StepChild>(argv, dir_ / r.log.filename(), dir_ / r.log.filename());
    }
    std::optional<RunWatch> watch;
    if (watched) watch.emplace(dir_ / first->trace.filename(), dir_ / r.trace.filename(), stopFile);
    bool begun = false, heldAtItsStart = false;
    const StepExit step = child->exit().started ? child->wait([&] {
      progress_.tick();
      guardMemory();
      begun = holdAhead(number, heldAtItsStart) || begun;
    })
                                                : StepExit{child->exit(), 0};
    r.seconds = secondsSince(start);
    // The step after which the bisect asked the run to stop: before
    // --until-step's, or --until-step stopped it.
    const int64_t stopAsked = watch ? watch->stopAfter() : -1;
    watch.reset();
    std::error_code ec;
    fs::remove(stopFile, ec);
    fs::remove(runFile(".run{}.gate", number), ec);
    r.started = step.exit.started;
    r.startError = step.exit.error;
    r.exitCode = step.exit.code;
    r.signal = step.exit.signal;
    r.traced = !runTraces(dir_ / r.trace.filename()).empty();
    const RunIndex index = readRunIndex(dir_ / r.trace.filename());
    r.launches = index.launches;
    r.stoppedAfterStep = index.stoppedAfterStep;
    const int64_t until = untilStep >= 0 ? untilStep : opts_.untilStep;
    // Stopped as it went (the watch), or told by the bisect to stop after an
    // earlier step than --until-step's (the confirmation run, after the
    // divergent step).
    const bool earlier = untilStep >= 0 && (opts_.untilStep < 0 || untilStep < opts_.untilStep);
    r.stoppedByBisect = r.stoppedAfterStep >= 0 && ((stopAsked >= 0 && (until < 0 || stopAsked < until)) || earlier);
    if (step.interruptedBy != 0) out_.interruptedBy = step.interruptedBy;
    progress_.done();
    if (r.failed() && !r.traced && !begun && (heldAtItsStart || r.startedBeside != 0) && out_.interruptedBy == 0) {
      // It may have failed for a run beside it at its start (a port both
      // bind, as torchrun's): the run started beside it, or the run it was
      // started during, which may have held the port until its end. It
      // runs again alone.
      const std::string beside = heldAtItsStart ? fmt::format("while run {} started beside it", number + 1)
                                                : fmt::format("after it was started during run {}", r.startedBeside);
      progress_.say(fmt::format("run {} failed before its CUDA work {}; running it again alone", number, beside));
      noteRunAgain(number, fmt::format("this run failed before its CUDA work (exit {}) {}", r.exitCode, beside));
      aloneNext_ = number;
      return record(number, total, snapshot, confirmation, untilStep);
    }
    progress_.say(fmt::format("run {}: {} after {}, {} launches", number,
                              !r.started ? "not started: " + r.startError
                              : r.signal ? fmt::format("killed by signal {}", r.signal)
                                         : fmt::format("exit {}", r.exitCode),
                              clockTime(r.seconds), withCommas(r.launches)));
    out_.runs.push_back(r);
    return out_.runs.back();
  }

  // The `gpurr record` command line of run `number`: with a stop file, and
  // held at its start until `gate` exists, when given.
  std::vector<std::string> recordArgv(uint32_t number, const std::string& snapshot, int64_t untilStep,
                                      const fs::path& stopFile, const fs::path& gate = {}) const {
    std::vector<std::string> argv{exe_.string(), "record", "-o", runFile("run{}.gpurr", number).string()};
    BisectOptions options = opts_;
    if (untilStep >= 0) options.untilStep = untilStep;
    const std::vector<std::string> passed = options.recordOptions();
    argv.insert(argv.end(), passed.begin(), passed.end());
    if (!snapshot.empty()) argv.insert(argv.end(), {"--snapshot", snapshot});
    if (!stopFile.empty()) argv.insert(argv.end(), {"--stop-file", stopFile.string()});
    if (!gate.empty()) argv.insert(argv.end(), {"--start-gate", gate.string()});
    // A run gpurr stops ends without the interpreter's teardown: the next
    // run waits for this one's end (docs/BISECT.md, "Time to an answer").
    if (!opts_.noFramework) argv.push_back("--quick-exit");
    argv.push_back("--");
    argv.insert(argv.end(), opts_.command.begin(), opts_.command.end());
    return argv;
  }

  // A file of run `number` in DIR: its log ("run{}.log"), trace, stop file
  // (".run{}.stop") or gate (".run{}.gate").
  fs::path runFile(std::string_view pattern, uint32_t number) const {
    return dir_ / fmt::format(fmt::runtime(pattern), number);
  }

  // While run `number` records, starts later runs (the confirmation run
  // after the last) held at their first CUDA call, so that the program's
  // start (imports, data, the model on the CPU) overlaps this run and only
  // its GPU work waits (docs/BISECT.md, "Time to an answer"): the next run
  // at once, the one after it once this run has begun its CUDA work (a
  // process of it has claimed its trace). At most kMaxHeld wait at a time.
  // Returns whether this run has begun its CUDA work.
  bool holdAhead(uint32_t number, bool& heldAtItsStart) {
    const bool begun = begunCudaWork(number);
    if (opts_.noOverlap || overlapOff_ || out_.interruptedBy != 0) return begun;
    const uint32_t confirmation = opts_.runs + 1;
    for (uint32_t next = number + 1; next <= std::min(number + 2, confirmation); ++next) {
      // The next run at once, unless this one failed so before (aloneNext_).
      const bool atOnce = next == number + 1 && aloneNext_ != number;
      if (held_.size() >= kMaxHeld || !(begun || atOnce)) break;
      if (heldBefore_.count(next) != 0) continue;
      heldBefore_.insert(next);
      // The confirmation's snapshot and step come through its gate and stop
      // file when it is let go; any run's stop file is written only then.
      const fs::path stopFile = opts_.noFramework ? fs::path() : runFile(".run{}.stop", next);
      const fs::path gate = runFile(".run{}.gate", next), log = runFile("run{}.log", next);
      std::error_code ec;
      fs::remove(gate, ec);
      auto child = std::make_unique<StepChild>(recordArgv(next, "", -1, stopFile, gate), log, log, true);
      if (!child->exit().started) continue;
      held_.push_back(Held{next, number, std::move(child)});
      if (!begun) heldAtItsStart = true;
    }
    return begun;
  }

  // Whether a process of run `number` has claimed its trace in the staging
  // directory `gpurr record` keeps beside the run's output.
  bool begunCudaWork(uint32_t number) const {
    const fs::path staging = record::stagingDirectory(runFile("run{}.gpurr", number));
    std::error_code ec;
    return !staging.empty() && !fs::is_empty(staging, ec);
  }

  // The held run `number`, let go: its gate opened, naming the launches to
  // snapshot, its stop file naming `untilStep` (when >= 0). Null when no
  // run `number` is held, or when it ended before its turn (a port or a
  // file that the run before it held): it is then run again from the
  // start, its first output left in its log, and no other run waits
  // beside it (they are ended, and started again later).
  std::unique_ptr<StepChild> letGo(uint32_t number, const std::string& snapshot, int64_t untilStep,
                                   uint32_t& startedBeside) {
    auto it = std::find_if(held_.begin(), held_.end(), [&](const Held& h) { return h.number == number; });
    if (it == held_.end()) return nullptr;
    Held held = std::move(*it);
    held_.erase(it);
    if (held.child->ended()) {
      const ChildExit& e = held.child->exit();
      const std::string how = e.signal ? fmt::format("killed by signal {}", e.signal) : fmt::format("exit {}", e.code);
      progress_.say(fmt::format("run {}, started during run {}, ended before its turn ({}); running it again",
                                number, held.beside, how));
      noteRunAgain(number, fmt::format("this run, started during run {}, ended before its turn ({})",
                                       held.beside, how));
      aloneNext_ = number;  // what ended it may end a run started beside it too
      return nullptr;
    }
    if (untilStep >= 0 && !opts_.noFramework &&
        !writeAtomically(runFile(".run{}.stop", number), fmt::format("{}\n", untilStep))) {
      return nullptr;
    }
    if (!writeAtomically(runFile(".run{}.gate", number), snapshot.empty() ? "" : "snapshot " + snapshot + "\n")) {
      return nullptr;
    }
    startedBeside = held.beside;
    return std::move(held.child);
  }

  static bool writeAtomically(const fs::path& file, const std::string& text) {
    const fs::path partial = fs::path(file).concat(".part");
    {
      std::ofstream f(partial, std::ios::trunc);
      f << text;
      if (!f) return false;
    }
    std::error_code ec;
    fs::rename(partial, file, ec);
    return !ec;
  }

  // The runs held beside the one recorded build what they build before
  // their first CUDA call (a model on the CPU, their data) in host memory:
  // once less than the larger of 4 GiB and a tenth of the machine's is
  // available (GPURR_BISECT_MIN_AVAILABLE_MB, when set), the held runs are
  // ended, to run at their turn, and no run starts early from then on, so
  // that the OOM killer does not take the run being recorded. Checked
  // before a run is started early too.
  void guardMemory() {
    if (overlapOff_ || opts_.noOverlap) return;
    const auto [available, total] = hostMemory();
    uint64_t least = std::max<uint64_t>(uint64_t{4} << 30, total / 10);
    if (const char* mb = std::getenv("GPURR_BISECT_MIN_AVAILABLE_MB")) least = std::strtoull(mb, nullptr, 10) << 20;
    if (total == 0 || available >= least) return;
    overlapOff_ = true;
    progress_.say(fmt::format("{} MiB of host memory left: no run starts early from now on{}", available >> 20,
                              held_.empty() ? "" : ", and the runs started early are ended"));
    dropHeld();
  }

  // Ends the held runs (identical runs need no confirmation; a failure or
  // Ctrl-C stops the bisect; a run about to run again alone) and removes
  // what they left; they may be started again later.
  void dropHeld() {
    while (!held_.empty()) {
      const uint32_t number = held_.back().number;
      // A program that handles SIGTERM itself would not end where it is
      // held: its gate tells it to go.
      writeAtomically(runFile(".run{}.gate", number), "cancel\n");
      held_.pop_back();  // SIGTERM, then waits
      heldBefore_.erase(number);
      std::error_code ec;
      for (const char* name : {"run{}.log", "run{}.gpurr", ".run{}.stop", ".run{}.gate"}) {
        fs::remove_all(runFile(name, number), ec);
      }
    }
  }

  // Before run `number` runs again from the start: no run waits beside it,
  // its log says why (its first output kept above), its first trace goes.
  void noteRunAgain(uint32_t number, const std::string& why) {
    dropHeld();
    std::ofstream(runFile("run{}.log", number), std::ios::app)
        << fmt::format("\n--- gpurr bisect: {}; it is run again from here ---\n\n", why);
    std::error_code ec;
    fs::remove_all(runFile("run{}.gpurr", number), ec);
  }

  const RunRecord* firstTraced() const {
    for (const RunRecord& r : out_.runs) {
      if (r.traced) return &r;
    }
    return nullptr;
  }

  const RunRecord& runNumbered(uint32_t number) const {
    for (const RunRecord& r : out_.runs) {
      if (r.number == number) return r;
    }
    throw std::logic_error(fmt::format("no run {}", number));
  }

  void noteFailure(const RunRecord& r) {
    std::string text;
    if (r.failed()) {
      text = fmt::format("run {} failed: {} after {}", r.number,
                         r.signal ? fmt::format("killed by signal {} ({})", r.signal, strsignal(r.signal))
                                  : fmt::format("exit code {}", r.exitCode),
                         clockTime(r.seconds));
      text += r.traced ? fmt::format("; its trace is kept in {}", r.trace.string()) : "; no trace written";
    } else if (noDriver_) {
      text = fmt::format("run {} wrote no trace: {}, so the recorder cannot start", r.number, *noDriver_);
    } else {
      text = fmt::format("run {} wrote no trace: the command ran no CUDA process (or the recorder could "
                         "not start)",
                         r.number);
    }
    const std::vector<std::string> tail = lastLines(dir_ / r.log.filename(), 10);
    text += fmt::format("\nthe end of its output ({}):", r.log.string());
    for (const std::string& line : tail) text += "\n    " + line;
    if (tail.empty()) text += "\n    (nothing)";
    out_.failures.push_back(text);
  }

  // Compares the first traced run with each other one; chooses the pair that
  // diverges first.
  bool compare(const std::vector<const RunRecord*>& traced) {
    const RunRecord& first = *traced.front();
    out_.base = first.number;
    std::optional<uint64_t> best;
    for (size_t i = 1; i < traced.size(); ++i) {
      const RunRecord& other = *traced[i];
      progress_.phase(fmt::format("comparing run {} with run {}", first.number, other.number));
      try {
        out_.comparisons.emplace_back(other.number, compareRuns(first.trace, other.trace, false, culprits_));
      } catch (const std::exception& e) {
        out_.error = fmt::format("comparing run {} with run {}: {}", first.number, other.number, e.what());
        return false;
      }
      const RunComparison& c = out_.comparisons.back().second;
      const std::optional<DivergencePoint> p = earliestDivergence(c);
      // A run compared only in part (its trace cut short, or a gap), with
      // no divergence before: nothing known of it, said, and no verdict.
      if (!p && c.unknown()) {
        comparedInPart_ = true;
        for (const report::IncompleteTrace& u : c.unreadable) {
          out_.error = fmt::format("comparing run {} with run {}: {} could not be read: {}", first.number,
                                   other.number, u.name, u.detail);
        }
        for (const ProcessDiff& d : c.processes) {
          for (const std::string& gap : d.gaps) {
            out_.error = fmt::format("run {} and run {} agree up to where {}; nothing after it was compared",
                                     first.number, other.number, gap);
          }
        }
        for (const auto& [only, run] : {std::pair{&c.onlyA, first.number}, std::pair{&c.onlyB, other.number}}) {
          for (const std::string& name : *only) {
            out_.error = fmt::format("run {} and run {} agree in every process recorded in both; {} was recorded "
                                     "in run {} only",
                                     first.number, other.number, name, run);
          }
        }
        continue;
      }
      const std::optional<uint64_t> key =
          p ? std::optional<uint64_t>(p->indexA) : (c.identical() ? std::nullopt : std::optional<uint64_t>(UINT64_MAX));
      if (key && (!best || *key < *best)) {
        best = key;
        out_.chosen = out_.comparisons.size() - 1;
        out_.point = p;
      }
    }
    return true;
  }

  void confirm() {
    const ProcessDiff* p = out_.chosenProcess();
    if (p == nullptr) {
      out_.noSnapshotWhy = "the runs differ in which processes ran, not in an operation";
      out_.replayError = out_.noSnapshotWhy;
      out_.reproduced = std::nullopt;
      return;
    }
    const FirstDivergence& d = *p->firstDivergence;
    out_.snapshotLaunch = snapshotLaunch(d, out_.noSnapshotWhy);
    const uint32_t number = opts_.runs + 1;
    const std::string selection = out_.snapshotLaunch ? std::to_string(*out_.snapshotLaunch) : "";
    // The confirmation needs the run only up to the divergent operation's
    // step: it stops after it.
    int64_t until = opts_.noFramework ? -1 : divergenceStep(d);
    if (opts_.untilStep >= 0 && (until < 0 || until > opts_.untilStep)) until = -1;
    RunRecord& r = record(number, number, selection, true, until);
    if (out_.interruptedBy != 0) return;
    if (!r.started || r.failed() || !r.traced) {
      noteFailure(r);
      out_.replayError = fmt::format("the confirmation run failed ({})",
                                     r.started ? fmt::format("exit code {}", r.exitCode) : r.startError);
      return;
    }
    const uint32_t other = out_.chosenRun();
    progress_.phase(fmt::format("comparing run {} with runs {} and {}", number, out_.base, other));
    try {
      out_.confirmation = compareRuns(runNumbered(out_.base).trace, r.trace, false, culprits_);
      out_.confirmationOther = compareRuns(runNumbered(other).trace, r.trace, false, culprits_);
    } catch (const std::exception& e) {
      out_.error = fmt::format("comparing the confirmation run {}: {}", number, e.what());
      return;
    }
    const Reproduction rep = reproduction(*out_.confirmation, *out_.confirmationOther, p->name, *out_.point, d);
    out_.reproduced = rep.reproduced;
    out_.reproducedElsewhere = rep.elsewhere;
    if (!rep.reproduced) out_.verdict = "notReproduced";
    if (!out_.snapshotLaunch) {
      out_.replayError = out_.noSnapshotWhy;
      return;
    }
    replay(r, *p);
  }

  void replay(const RunRecord& r, const ProcessDiff& p) {
    const fs::path trace = p.name.empty() ? r.trace : r.trace / p.name;
    std::optional<LaunchLocation> at;
    try {
      at = findLaunch(trace, *out_.snapshotLaunch);
    } catch (const std::exception& e) {
      out_.replayError = e.what();
      return;
    }
    if (!at) {
      out_.replayError = fmt::format("{} has no launch #{} (the confirmation run launched fewer kernels)",
                                     trace.string(), *out_.snapshotLaunch);
      return;
    }
    if (at->snapshots == 0) {
      out_.replayError = fmt::format(
          "{} holds no snapshot of launch #{} (event #{}): the recorder did not store its buffers",
          trace.string(), *out_.snapshotLaunch, at->seq);
      return;
    }
    const fs::path json = dir_ / "replay.json", log = dir_ / "replay.log";
    const std::vector<std::string> argv{exe_.string(), "replay", trace.string(), "--launch", std::to_string(at->seq),
                                        "--repeat", std::to_string(opts_.repeat), "--json"};
    progress_.phase(fmt::format("replay: re-executing launch #{} (run {} event #{}) {} times", *out_.snapshotLaunch,
                                r.number, at->seq, opts_.repeat));
    const StepExit step = runStep(argv, json, log, [this] { progress_.tick(); });
    if (step.interruptedBy != 0) out_.interruptedBy = step.interruptedBy;
    const std::vector<std::string> err = lastLines(log, 20);
    std::optional<Json> parsed;
    if (step.exit.started && (step.exit.code == 0 || step.exit.code == 1)) parsed = readReplayJson(json);
    std::error_code ec;
    if (parsed) {
      out_.replay = std::move(parsed);
      // The replay's proof outranks what differs between the runs.
      ProcessDiff& chosen = out_.comparisons[*out_.chosen].second.processes[out_.point->process];
      const std::string summary = out_.replay->value("summary", std::string());
      if (out_.replay->value("verdict", std::string()) == "nondeterministic" &&
          diff::provenNondeterministic(*chosen.firstDivergence,
                                       fmt::format("re-executed from run {}'s recorded inputs and parameters "
                                                   "(replay below): {}",
                                                   r.number, summary)) &&
          culprits_ != nullptr) {
        chosen.firstDivergence->known = culprits_->match(*chosen.firstDivergence, chosen.environment);
      }
    } else {
      fs::remove(json, ec);
      out_.replayError = (step.exit.started ? replayFailure(err, fmt::format("gpurr replay exited with "
                                                                                          "code {}", step.exit.code))
                                                          : step.exit.error);
    }
    if (fs::file_size(log, ec) == 0 && !ec) fs::remove(log, ec);
  }

  void timeline() {
    const ProcessDiff* p = out_.chosenProcess();
    if (p == nullptr) return;
    progress_.phase("reading the operations around the first divergence");
    try {
      out_.timeline = report::timelineAround(p->pathA, p->pathB, *p);
    } catch (const std::exception& e) {
      progress_.say(fmt::format("warning: no timeline in the report: {}", e.what()));
    }
  }

  // A run started ahead of its turn, held at its start (holdAhead).
  struct Held {
    uint32_t number = 0;
    uint32_t beside = 0;  // the run it was started during
    std::unique_ptr<StepChild> child;
  };

  static constexpr size_t kMaxHeld = 2;

  const BisectOptions& opts_;
  std::vector<Held> held_;         // in run order, at most kMaxHeld
  std::set<uint32_t> heldBefore_;  // runs started ahead of their turn (and not ended by dropHeld)
  uint32_t aloneNext_ = 0;         // the run to start with no run beside it at its start (one failed so)
  bool overlapOff_ = false;        // host memory ran short: no run starts early any more (guardMemory)
  fs::path exe_;
  fs::path dir_;    // absolute
  fs::path shown_;  // as the user named it (or the default, relative)
  const Culprits* culprits_;
  Progress progress_;
  Outcome out_;
  bool comparedInPart_ = false;  // compare(): a run agreed as far as it was compared, with nothing known after
  // Why runs cannot record, when this machine has no CUDA driver (a stand-in
  // program that writes its own traces records anyway).
  const std::optional<std::string> noDriver_ = missingCudaDriver();
};

// ------------------------------------------------------------ the command

bool writeFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "gpurr bisect: error: cannot write " << path.string() << "\n";
    return false;
  }
  return true;
}

// With --json, a bisect refused before its first run still prints an
// object: report.json's first keys, verdict "failed".
int usageError(const std::string& text, bool json = false) {
  if (json) std::cout << report::jsonText(Json{{"gpurrBisect", 1}, {"verdict", "failed"}, {"error", text}}) << '\n';
  std::cerr << "gpurr bisect: error: " << text << "\n";
  return kExitTrouble;
}

int run(const BisectOptions& opts) {
  const auto refuse = [&opts](const std::string& text) { return usageError(text, opts.json); };
  if (opts.command.empty()) {
    return refuse("no command given after --; usage: gpurr bisect [-o DIR] [--runs N] -- CMD [ARGS...]");
  }
  if (!opts.launches.empty()) {
    if (std::string e = record::checkLaunchRange(opts.launches); !e.empty()) return refuse(e);
  }
  if (!opts.kernels.empty()) {
    if (std::string e = record::checkKernelRegex(opts.kernels); !e.empty()) return refuse(e);
  }
  if (opts.untilStep >= 0 && opts.noFramework) {
    return refuse("--until-step needs the PyTorch layer, which counts training steps: leave out --no-framework");
  }
  // A command that cannot run would fail every run.
  if (const fs::path program = record::findProgram(opts.command[0], std::getenv("PATH"));
      program.empty() || ::access(program.c_str(), X_OK) != 0) {
    return refuse(fmt::format("cannot run '{}': {}", opts.command[0],
                              program.empty() || errno == ENOENT ? "command not found" : std::strerror(errno)));
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return refuse("cannot find the gpurr executable (/proc/self/exe): " + ec.message());
  // The runs' reports name launches: every one of them attributed by the
  // PyTorch layer as it ran, not by its place in an earlier step
  // (docs/RECORDING.md, "What the layer costs").
  ::setenv("GPURR_FULL_ATTRIBUTION", "1", 0);
  // The children would each say so; say it once, before anything runs.
  try {
    record::recorderLibrary(exe, std::getenv("GPURR_RECORDER_LIB"));
  } catch (const std::runtime_error& e) {
    return refuse(e.what());
  }
  fs::path shown = opts.output.empty() ? defaultDirectory(opts.command, std::time(nullptr), ".").lexically_normal()
                                       : fs::path(opts.output).lexically_normal();
  if (!shown.has_filename()) shown = shown.parent_path();  // "dir/" names dir
  const fs::path dir = fs::absolute(shown).lexically_normal();
  if (std::string problem = prepareDirectory(dir, opts.force); !problem.empty()) return refuse(problem);

  std::optional<Culprits> culprits;
  try {
    std::string warning;
    culprits = loadCulprits(opts.culprits, warning);
    if (!warning.empty()) std::cerr << "gpurr bisect: warning: " << warning << "\n";
  } catch (const std::runtime_error& e) {
    return refuse(e.what());
  }
  if (opts.output.empty()) std::cerr << "gpurr bisect: results go to " << shown.string() << "/\n";
  catchInterrupts(shown);

  BisectOptions chosen = opts;
  if (const std::string why = whyNoOverlap(opts.command); !why.empty() && !opts.noOverlap) {
    chosen.noOverlap = true;
    std::cerr << "gpurr bisect: each run starts when the one before has ended (--no-overlap): " << why << "\n";
  }
  Bisect bisect(chosen, exe, dir, shown, culprits ? &*culprits : nullptr);
  Outcome outcome = bisect.run();
  // Stopped by a signal: the report says what was done, verdict "failed".
  const std::string interrupted =
      outcome.interruptedBy == 0
          ? ""
          : fmt::format("interrupted ({}); what was recorded so far is in {}/", strsignal(outcome.interruptedBy),
                        shown.string());
  if (!interrupted.empty()) {
    std::cerr << "gpurr bisect: " << interrupted << "\n";
    outcome.verdict = "failed";
    outcome.error = interrupted;
  }

  const BisectFacts facts = factsOf(outcome);
  const Report model{outcome.chosenComparison(), outcome.timeline, &facts};
  const Json report = bisectJson(model);
  bool written = writeFile(dir / "report.txt", report::terminalText(renderText(outcome, Style{false})));
  written = writeFile(dir / "report.json", report::jsonText(report) + "\n") && written;
  try {
    written = writeFile(dir / "report.html", renderHtml(model)) && written;
  } catch (const std::exception& e) {
    std::cerr << "gpurr bisect: error: cannot render " << shown.string() << "/report.html: " << e.what() << "\n";
    written = false;
  }
  if (opts.json) {
    std::cout << report::jsonText(report) << '\n';
  } else {
    const bool colour = useColor(opts.color);
    report::keepTerminalColours(colour);
    std::cout << renderText(outcome, Style{colour});
    std::string files = "report.txt report.json report.html";
    if (outcome.replay) files += " replay.json";
    std::cout << fmt::format("results in {}/ ({}, and each run's trace and log)\n", shown.string(), files);
  }
  std::cout.flush();
  if (!interrupted.empty()) return 128 + outcome.interruptedBy;
  if (!written) return kExitTrouble;
  if (outcome.verdict == "identical") return kExitOk;
  if (outcome.verdict == "diverged" || outcome.verdict == "notReproduced") return kExitDifferent;
  return kExitTrouble;
}

}  // namespace

void addBisectCommand(CLI::App& app, Action& chosen) {
  auto opts = std::make_shared<BisectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bisect", "Record a command several times, find the first kernel launch that differs, why, and replay it.");
  cmd->add_option("-o,--output", opts->output,
                  "Directory for the traces, logs and reports (default: bisect-<command>-<date>-<time> here)")
      ->check(kPathGiven);
  cmd->add_option("--runs", opts->runs, "How many times to record the command before comparing (default 2)")
      ->check(CLI::Range(2u, 1000u));
  cmd->add_option("--repeat", opts->repeat,
                  "How many times to replay the first divergent launch from its recorded inputs (default 50)")
      ->check(CLI::Range(1u, 1000000u));
  cmd->add_flag("--json", opts->json, "Print report.json instead of the text report");
  cmd->add_flag("--keep-going", opts->keepGoing,
                "Go on when a run fails (non-zero exit), comparing the runs that left a trace");
  cmd->add_flag("--force", opts->force, "Use a non-empty DIR, replacing the files of an earlier bisect in it");
  cmd->add_option("--color", opts->color, "Colour the report: auto (a terminal, unless NO_COLOR is set), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->add_option("--culprits", opts->culprits,
                  "Known-culprits table (default: share/gpurr/known_culprits.json beside the binary)");
  cmd->add_option("--launches", opts->launches,
                  "Passed to gpurr record: hash only launches A up to (not including) B ('A:', ':B')");
  cmd->add_option("--kernels", opts->kernels,
                  "Passed to gpurr record: hash only launches of kernels matching this regular expression");
  cmd->add_flag("--sync", opts->sync, "Passed to gpurr record: synchronise around every launch");
  cmd->add_flag("--hash-inputs", opts->hashInputs,
                "Passed to gpurr record: hash every launch's buffers before it runs too");
  cmd->add_flag("--no-framework", opts->noFramework,
                "Passed to gpurr record: leave out the PyTorch layer (op, module, line and step of each launch)");
  cmd->add_option("--until-step", opts->untilStep,
                  "Passed to gpurr record: stop the program cleanly after training step N (counted from 0), so that "
                  "each recording of a long job takes only its first N+1 steps")
      ->check(kWholeNumber);
  cmd->add_flag("--capture-host-data", opts->captureHostData,
                "Passed to gpurr record: keep the bytes of every host-to-device copy (shows where host inputs differ)");
  cmd->add_flag("--no-overlap", opts->noOverlap,
                "Start each run when the one before has ended. By default a run is started while an earlier one "
                "records, and held at its first CUDA call until the runs before it have ended: only the "
                "program's start (imports, data, the model on the CPU) overlaps");
  cmd->add_option("command", opts->command, "The command to record and its arguments, after --")->expected(-1);
  cmd->footer(
      "Put -- before the command: gpurr bisect -- python train.py --lr 0.1\n"
      "Runs `gpurr record` N times (DIR/run<i>.gpurr, its output in DIR/run<i>.log), compares run 1\n"
      "with the others, records once more with snapshots of the first divergent launch to confirm\n"
      "it, replays that launch (gpurr replay --repeat R), and writes DIR/report.txt, report.json and\n"
      "report.html. In a PyTorch program, each run after the first is compared with run 1 as it\n"
      "records and stopped soon after its first divergence, and the confirmation run after the\n"
      "divergent step. Each run starts while an earlier one records, held at its first CUDA call\n"
      "until the runs before it have ended (--no-overlap: one after another). Exit status: 0 identical, 1\n"
      "diverged (or not reproduced), 2 trouble (a run failed, a usage error). More in\n"
      "docs/BISECT.md.");
  cmd->allow_extras();
  cmd->callback([opts, cmd, &chosen] {
    std::vector<std::string> extras = cmd->remaining();
    std::erase(extras, "--");
    if (!extras.empty()) {
      std::string list;
      for (const std::string& e : extras) list += (list.empty() ? "'" : " '") + e + "'";
      chosen = [list, opts] {
        return usageError(fmt::format("unknown option {}; to give options to the command, put -- before it: "
                                      "gpurr bisect [-o DIR] [options] -- CMD [ARGS...]",
                                      list),
                          opts->json);
      };
      return;
    }
    chosen = [opts] { return run(*opts); };
  });
}

}  // namespace gpurr::cli
