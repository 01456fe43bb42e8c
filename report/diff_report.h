// The text and JSON reports of a comparison, shared by `gpurr diff` and
// `gpurr bisect`: the one-screen text report and the --json
// object (docs/DIFF.md). One rendering, so that both commands say the same
// thing.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "report/compare.h"
#include "report/event_json.h"
#include "report/words.h"

namespace gpurr::report {

struct JobView;  // report/job.h

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

// The text report of one process (without the "== process ==" title).
// `replayRows` are printed as "replay" rows after the recorder's own
// determinism checks (bisect adds its replay result there).
void printProcess(std::ostream& os, const Style& st, const diff::ProcessDiff& p,
                  const std::vector<std::string>& replayRows = {});

// The whole `gpurr diff` text report: the command line, processes found in
// one run only, then each process.
void printComparison(std::ostream& os, const Style& st, const RunComparison& c);
// As above, with the job's view computed once by the caller: jobView(c), or
// null when it has none.
void printComparison(std::ostream& os, const Style& st, const RunComparison& c, const JobView* job);

// JSON of one process (an element of "processes") and of the whole
// comparison (what `gpurr diff --json` prints).
Json processJson(const diff::ProcessDiff& p);
Json comparisonJson(const RunComparison& c);
Json comparisonJson(const RunComparison& c, const JobView* job);

}  // namespace gpurr::report
