// Comparing two runs and rendering the result, shared by `gpurr diff` and
// `gpurr bisect`: matching the processes of two traces (or directories of
// traces), the one-screen text report (DESIGN.md §1) and the --json object
// (docs/DIFF.md). One rendering, so that both commands say the same thing.
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "report/event_json.h"
#include "diff/diff.h"

namespace gpurr::cli::diffreport {

// Two traces that should not be compared, or paths that are not traces. The
// message says what to do instead.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Terminal colours, or none.
struct Style {
  bool color = false;
  std::string bold(const std::string& s) const;
  std::string red(const std::string& s) const;
  std::string yellow(const std::string& s) const;
  std::string green(const std::string& s) const;
  std::string dim(const std::string& s) const;
};

// --color=auto|always|never: auto colours a terminal on stdout, unless
// NO_COLOR is set or TERM=dumb.
bool useColor(const std::string& mode);

// Whether `p` is one trace (rather than a directory of traces).
bool isTrace(const std::filesystem::path& p);

// The known-culprits table: `file`, or the default one beside the binary
// when `file` is empty. A missing default gives nullopt and a warning in
// `warning`; a bad file throws std::runtime_error naming it.
std::optional<diff::Culprits> loadCulprits(const std::string& file, std::string& warning);

// Two runs compared: each process matched by name, and the processes found
// in one run only.
struct RunComparison {
  std::string a, b;  // as given
  bool forced = false;
  std::vector<diff::ProcessDiff> processes;
  std::vector<std::string> onlyA, onlyB;
  bool identical() const;
};

// Compares runs `a` and `b`: two traces, or two directories of per-process
// traces matched by entry name. Refuses traces of different GPU models or
// command lines unless `force`. `culprits` may be null. Throws UsageError
// for paths that cannot be compared, trace::TraceError for bad traces.
RunComparison compareRuns(const std::filesystem::path& a, const std::filesystem::path& b, bool force,
                          const diff::Culprits* culprits);

// "launch #5", "memcpy HtoD (operation #3)".
std::string opTitle(const diff::OpInfo& o);

// The text report of one process (without the "== process ==" title).
// `replayRows` are printed as "replay" rows after the recorder's own
// determinism checks (bisect adds its replay result there).
void printProcess(std::ostream& os, const Style& st, const diff::ProcessDiff& p,
                  const std::vector<std::string>& replayRows = {});

// The whole `gpurr diff` text report: the command line, processes found in
// one run only, then each process.
void printComparison(std::ostream& os, const Style& st, const RunComparison& c);

// JSON of one process (an element of "processes") and of the whole
// comparison (what `gpurr diff --json` prints).
Json processJson(const diff::ProcessDiff& p);
Json comparisonJson(const RunComparison& c);

}  // namespace gpurr::cli::diffreport
