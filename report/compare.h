// Comparing two runs: matching the processes of two traces (or directories
// of traces) by name and diffing each pair. The comparison is the model that
// every report of a diff is rendered from (diff_report.h, html.h).
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "diff/diff.h"

namespace gpurr::report {

// Two traces that should not be compared, or paths that are not traces. The
// message says what to do instead; `kind` says which, for scripts
// (`errorKind` in `gpurr diff --json`'s error object: kindName).
class UsageError : public std::runtime_error {
 public:
  enum class Kind { kChunkSizes, kGpuModels, kPrograms, kNotATrace, kTraceAndDirectory };
  UsageError(Kind kind, const std::string& what) : std::runtime_error(what), kind(kind) {}
  Kind kind;
  // "differentChunkSizes", "differentGpuModels", "differentPrograms",
  // "notATrace", "traceAndDirectory".
  static const char* kindName(Kind kind);
};

// The known-culprits table: `file`, or the default one beside the binary
// when `file` is empty. A missing default gives nullopt and a warning in
// `warning`; a bad file throws std::runtime_error naming it.
std::optional<diff::Culprits> loadCulprits(const std::string& file, std::string& warning);

// A compared trace that did not end cleanly (its process crashed or was
// killed), or damaged since it was written (a corrupt block, an index that
// does not fit): compared up to its last readable block.
struct IncompleteTrace {
  std::string name;     // "rank3.gpurr"
  std::string detail;   // the reader's note (trace::Damage::detail)
  std::string cause;    // trace::Damage::cause(): "the recording did not end cleanly", "damaged since ..."
  std::string readsTo;  // trace::Damage::readsTo(): "its last complete block", "its corrupt block"
};

// Two runs compared: each process matched by name, and the processes found
// in one run only.
struct RunComparison {
  std::string a, b;  // as given
  bool forced = false;
  std::vector<diff::ProcessDiff> processes;
  std::vector<std::string> onlyA, onlyB;
  // Two directories of per-process traces (not two traces): how many each
  // holds, and which of the compared ones are incomplete, in process order.
  bool directories = false;
  size_t tracesA = 0, tracesB = 0;
  std::vector<IncompleteTrace> incompleteA, incompleteB;
  // Processes whose traces could not be read (a damaged header, an empty
  // directory where a trace should be), in process order: the others are
  // compared all the same. `detail` is the reader's error, naming the file.
  std::vector<IncompleteTrace> unreadable;
  // Every process compared identical, and none lost events.
  bool identical() const;
  // No divergence seen, but a run's recorder dropped events, a trace was
  // cut short, a process could not be read or was recorded in one run
  // only: the rest is not known (exit status 2).
  bool unknown() const;
};

// Compares runs `a` and `b`: two traces, or two directories of per-process
// traces matched by entry name, the pairs diffed side by side on every core
// (the result is the same for any number of cores). Refuses traces of
// different GPU models or command lines unless `force`. `culprits` may be
// null. Throws UsageError for paths that cannot be compared, and
// trace::TraceError for a bad trace given as a trace (in directories, a
// process whose trace cannot be read is listed in `unreadable`).
RunComparison compareRuns(const std::filesystem::path& a, const std::filesystem::path& b, bool force,
                          const diff::Culprits* culprits);

}  // namespace gpurr::report
