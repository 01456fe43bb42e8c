// Writes the HTML report of a diff of two traces, as `gpurr diff --html` and
// `gpurr bisect` do, for the tests that open it in a browser:
//
//   make_report --diff DIFF.json A B [--base REPORT.json] [--confirmation DIFF.json]
//               [--json OUT.json] OUT.html
//
// DIFF.json is `gpurr diff --json A B`'s output; the timeline is read from A
// and B around the first divergence of its first differing process. BASE
// holds the bisect keys (verdict, command, runs, replay...) merged in.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "report/html.h"
#include "report/timeline.h"

namespace {

nlohmann::json load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  return nlohmann::json::parse(in);
}

int usage() {
  std::cerr << "usage: make_report --diff DIFF.json A B [--base REPORT.json] [--confirmation DIFF.json] "
               "[--json OUT.json] OUT.html\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string diffPath, a, b, base, confirmation, jsonOut, htmlOut;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--diff") {
      diffPath = next();
      a = next();
      b = next();
    } else if (arg == "--base") {
      base = next();
    } else if (arg == "--confirmation") {
      confirmation = next();
    } else if (arg == "--json") {
      jsonOut = next();
    } else if (htmlOut.empty() && arg.rfind("--", 0) != 0) {
      htmlOut = arg;
    } else {
      return usage();
    }
  }
  if (diffPath.empty() || a.empty() || b.empty() || htmlOut.empty()) return usage();
  try {
    nlohmann::json report = base.empty() ? nlohmann::json::object() : load(base);
    const nlohmann::json diff = load(diffPath);
    report["diff"] = diff;
    if (!confirmation.empty()) report["confirmation"] = load(confirmation);
    nlohmann::json process = nlohmann::json::object();
    for (const auto& p : diff.at("processes")) {
      if (!p.at("firstDivergence").is_null()) {
        process = p;
        break;
      }
    }
    report["timeline"] = gpurr::report::timelineAround(a, b, process);
    std::ofstream(htmlOut) << gpurr::report::renderHtml(report);
    if (!jsonOut.empty()) std::ofstream(jsonOut) << report.dump(2) << '\n';
  } catch (const std::exception& e) {
    std::cerr << "make_report: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
