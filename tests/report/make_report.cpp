// Writes the HTML report of two runs, as `gpurr diff --html` and `gpurr
// bisect` do, for the tests that open it in a browser:
//
//   make_report A B [--base BISECT.json] [--confirmation] [--json OUT.json] OUT.html
//
// A and B are traces or directories of traces, compared as `gpurr diff`
// compares them (with the checked-in known-culprits table); the timeline is
// read around the first divergence of the first differing process. BISECT
// holds a bisect's keys (verdict, command, runs, replay...), as report.json
// writes them; --confirmation shows the comparison again as the
// confirmation run's. --json writes report.json as `gpurr bisect` would.
#include <fstream>
#include <iostream>
#include <string>

#include "model_util.h"

namespace {

nlohmann::json load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  return nlohmann::json::parse(in);
}

int usage() {
  std::cerr << "usage: make_report A B [--base BISECT.json] [--confirmation] [--json OUT.json] OUT.html\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string base, jsonOut;
  std::vector<std::string> paths;
  bool confirmation = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--base") {
      base = next();
    } else if (arg == "--confirmation") {
      confirmation = true;
    } else if (arg == "--json") {
      jsonOut = next();
    } else if (arg.rfind("--", 0) != 0) {
      paths.push_back(arg);
    } else {
      return usage();
    }
  }
  if (paths.size() != 3) return usage();
  try {
    testutil::TestReport report;
    report.diff = testutil::compare(paths[0], paths[1]);
    report.timeline = testutil::timelineOf(*report.diff);
    if (!base.empty()) report.bisect = testutil::bisectFrom(load(base));
    if (confirmation) report.confirmation = report.diff;
    std::ofstream(paths[2]) << report.html();
    if (!jsonOut.empty() && report.bisect) {
      gpurr::report::Report r{&*report.diff, report.timeline, &*report.bisect};
      std::ofstream(jsonOut) << gpurr::report::bisectJson(r).dump(2) << '\n';
    }
  } catch (const std::exception& e) {
    std::cerr << "make_report: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
