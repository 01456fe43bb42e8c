// The parts of `gpurr record` that do not run the command: option checks,
// where the recorder library and the trace go, moving the traces the recorded
// processes wrote out of the staging directory, and the summary printed at
// the end. Separate from the command so that tests can drive them directly.
#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "cli/process.h"
#include "cli/recorder_cost.h"
#include "trace_format/trace.h"

namespace gpurr::cli::record {

namespace fs = std::filesystem;

// Empty when `range` is a valid --launches value: "A:B", launch numbers with
// A < B, either of which may be left out ("A:" to the end, ":B" from the
// start). Else what is wrong.
std::string checkLaunchRange(const std::string& range);

// Empty when `regex` is a valid --kernels ECMAScript regular expression.
std::string checkKernelRegex(const std::string& regex);

// Empty when `selection` is a valid --snapshot value: comma-separated items,
// each a launch number K, a range A:B / A: / :B (B excluded), or an
// ECMAScript regular expression on the kernel name. Else what is wrong.
std::string checkSnapshotSelection(const std::string& selection);

// Empty when `runs` is a valid --check-determinism count (2 to 1000) and a
// --launches, --kernels or (without those) --snapshot selection limits the
// launches re-run.
std::string checkDeterminismOptions(uint64_t runs, bool launchesGiven, bool kernelsGiven, bool snapshotGiven);

// "<command>-YYYYmmdd-HHMMSS.gpurr" in `dir` (local time), with "-2", "-3"...
// added when that name is taken. `command` is the recorded argv.
fs::path defaultOutput(const std::vector<std::string>& command, std::time_t now,
                       const fs::path& dir);

// The injection library: `overridePath` (GPURR_RECORDER_LIB) when not null,
// else <directory of `executable`>/../lib/libgpurr_recorder.so; made
// absolute. Throws std::runtime_error, saying what to do, when it is missing.
fs::path recorderLibrary(const fs::path& executable, const char* overridePath);

// The environment that puts gpurr's PyTorch layer (share/gpurr/python beside
// `executable`'s bin/) first on a Python program's path, ahead of
// `pythonPath` (the caller's PYTHONPATH, null or empty when unset), and
// names its op observer; nothing when the layer is not installed.
std::vector<EnvChange> frameworkEnv(const fs::path& executable, const char* pythonPath);

// Where `program` runs from: itself when it names a folder, else the first
// match in `path` (a PATH list); empty when none. Not resolved through
// links: a virtual environment's python is a link to the base interpreter.
fs::path findProgram(const std::string& program, const char* path);

// The nvidia-cuda-cupti copy of libcupti.so.13 (nvidia/cu13/lib/, or
// nvidia/cuda_cupti/lib/ for older wheels) in the Python environment the
// recorded command runs in, so that the recorder loads the copy PyTorch will
// load and a process never holds two. Environments, in order: the one whose
// bin/ holds `command`'s program (looked up in `path`, the caller's PATH,
// when it names no folder: python, torchrun, accelerate...), $VIRTUAL_ENV,
// $CONDA_PREFIX (from `getenv`), then the one gpurr itself is installed in
// (`executable` in site-packages/gpurr/bin/, as pip installs it). Empty when
// none has one.
std::string pythonCupti(const std::vector<std::string>& command, const fs::path& executable,
                        const std::function<const char*(const char*)>& getenv);

// LD_PRELOAD for the recorded command: `library` (whose wrappers record the
// algorithm choices of cuDNN, cuBLAS and cuRAND calls) after `existing`, the
// caller's LD_PRELOAD (null or empty when unset), which keeps precedence;
// `existing` unchanged when it already names `library`.
std::string preloadWith(const char* existing, const std::string& library);

// Whether `path` is an ELF file, which the dynamic loader can preload; it
// prints an error into the command's stderr for anything else.
bool isElf(const fs::path& path);

// Whether `path` may be replaced by --force: a trace, a directory of traces
// (with a restarted job's earlier attempts, attempts/) or an empty
// directory. Anything else is the user's data.
bool replaceable(const fs::path& path);

// The staging directory `gpurr record -o out` writes into while the program
// runs, beside OUT (trace.h): its mkdtemp template, and the one that exists
// now (gpurr bisect watches it).
using trace::stagingDirectory;
using trace::stagingTemplate;

// The trace directories (names ending in ".gpurr") in `staging`, in natural
// order: rank2.gpurr before rank10.gpurr.
std::vector<fs::path> stagedTraces(const fs::path& staging);

// Where the traces went.
struct Placement {
  std::vector<fs::path> traces;  // their final paths, in natural order
  bool directoryOfTraces = false;  // several: `out` holds them by name
  std::vector<fs::path> leftovers;  // other files left in the staging directory
};

// Moves the traces in `staging` to `out`: a single trace becomes `out`
// itself; several are kept side by side in `out` under the names the
// recorder gave them (rank0.gpurr, proc1.gpurr...), so that the processes of
// two runs match by name. Replaces an existing `out` when `replace` is true.
// Removes `staging` when nothing else is in it. Throws fs::filesystem_error.
Placement placeTraces(const fs::path& staging, const fs::path& out, bool replace);

// For a `gpurr record` started once per rank of a job of several (srun,
// torchrun --no-python: its own environment names a rank and more than one
// task, common/job_rank.h): OUT is
// the job's directory, which every rank's gpurr joins. Moves the traces in
// `staging` into `out` under their names, creating `out` when this is the
// first to finish. A name already in `out` is replaced when `replace` is
// true (that trace only, never the other ranks'); otherwise nothing is moved
// and fs::filesystem_error (file exists) is thrown. Removes `staging` when
// nothing else is in it.
Placement joinTraces(const fs::path& staging, const fs::path& out, bool replace);

struct TraceSummary {
  fs::path path;
  bool readable = false;
  uint64_t launches = 0;
  uint64_t bytesHashed = 0;  // input and output ranges of launches and graphs
  uint64_t snapshotBytes = 0;  // ranges whose bytes were kept (--snapshot)
  uint64_t determinismChecked = 0;  // launches re-run by --check-determinism
  uint64_t nondeterministic = 0;    // ... whose re-runs gave different results
  RecorderCost cost;                // what recording cost the program (record --verbose)
  int64_t stoppedAfterStep = -1;    // gpurr stopped the program after this step (--until-step), else -1
  bool stepped = false;             // the PyTorch layer saw a training step completed (the index's layerSteps)
  std::string damage;  // the reader's note on an unclosed trace, else empty
  std::string error;   // why it cannot be read, when !readable
};

struct RecordSummary {
  std::vector<TraceSummary> traces;
  uint64_t diskBytes = 0;  // every file of the traces, as stored
};

// Reads the placed traces back. Never throws for a bad trace: its error is
// kept in its TraceSummary.
RecordSummary summarise(const std::vector<fs::path>& traces);

// "2 processes, 1,234 launches, 3.5 GiB hashed, 12.0 MiB on disk", with
// ", 2.0 MiB in snapshots" and ", 3 launches checked for determinism (1
// nondeterministic)" when there are any, and ", 1 incomplete" / ", 1
// unreadable" when some traces are damaged.
std::string summaryLine(const RecordSummary& summary);

}  // namespace gpurr::cli::record
