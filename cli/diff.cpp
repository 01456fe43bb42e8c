// gpurr diff A B: the first operation whose output differs between two runs,
// its cause, and what it affected afterwards. Text for people (one screen,
// docs/DIFF.md, "Reading the report"), --json for programs (docs/DIFF.md). Exit codes as diff(1).
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "report/diff_report.h"
#include "report/event_json.h"
#include "diff/diff.h"
#include "report/html.h"
#include "report/job.h"
#include "report/terminal.h"
#include "report/timeline.h"

namespace gpurr::cli {
namespace {
using namespace gpurr::diff;
using namespace gpurr::report;
namespace fs = std::filesystem;

struct DiffCommandOptions {
  std::string a, b;
  bool json = false;
  std::string color = "auto";
  bool force = false;
  std::string culprits;
  std::string html;
};

// The page of `--html`: the comparison and, for the process the page leads
// with (a job's earliest origin, else the first that diverged), the
// operations around its first divergence in both runs.
std::string htmlPage(const RunComparison& c, const std::optional<JobView>& job) {
  Report page{&c, nullptr, nullptr, &job};
  if (const ProcessDiff* first = leadProcess(c, job ? &*job : nullptr)) {
    page.timeline = report::timelineAround(first->pathA, first->pathB, *first);
  }
  return renderHtml(page);
}

// The input of `--html` FILE lies in: a file of trace A or B (or either
// itself), which the page must not replace; "" when none.
std::string inputHolding(const std::string& file, const DiffCommandOptions& opts) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return "";
  const fs::path target = fs::weakly_canonical(file, ec);
  const bool linked = fs::hard_link_count(target, ec) > 1;
  for (const std::string& input : {opts.a, opts.b}) {
    const fs::path root = fs::weakly_canonical(input, ec);
    const auto [end, _] = std::mismatch(root.begin(), root.end(), target.begin(), target.end());
    if (end == root.end()) return input;
    // Another name of one of its files (a hard link).
    if (linked) {
      for (const auto& entry : fs::recursive_directory_iterator(root, ec)) {
        if (entry.is_regular_file(ec) && fs::equivalent(entry.path(), target, ec)) return input;
      }
    }
  }
  return "";
}

int run(const DiffCommandOptions& opts) {
  // With --json, a comparison refused, a trace that cannot be read or an
  // option that cannot be served still gives one object, its message on
  // standard error as well.
  // `kind`: errorKind (docs/DIFF.md, JSON schema).
  auto refused = [&](const std::string& error, const char* kind) {
    if (opts.json) {
      std::cout << report::jsonText(Json{{"gpurrDiff", 1},
                                         {"a", opts.a},
                                         {"b", opts.b},
                                         {"verdict", "error"},
                                         {"error", error},
                                         {"errorKind", kind}})
                << '\n';
    }
  };
  auto fail = [&](const std::string& error, const char* kind = "option") {
    refused(error, kind);
    std::cerr << "gpurr diff: error: " << error << '\n';
    return kExitTrouble;
  };
  if (!opts.html.empty()) {
    if (const std::string input = inputHolding(opts.html, opts); !input.empty()) {
      return fail(fmt::format("--html {} would replace a file of the trace {}; give the page another name", opts.html,
                              input));
    }
    // Found before the comparison, so that the verdict printed is the exit
    // status's.
    std::error_code ec;
    const fs::path file = fs::absolute(opts.html, ec), dir = file.parent_path();
    if (!fs::is_directory(dir, ec)) {
      return fail(fmt::format("cannot write {}: directory {} does not exist", opts.html, dir.string()));
    }
    if (fs::is_directory(file, ec)) return fail(fmt::format("cannot write {}: it is a directory", opts.html));
    if (::access(fs::exists(file, ec) ? file.c_str() : dir.c_str(), W_OK) != 0) {
      return fail(fmt::format("cannot write {}: {}", opts.html, std::strerror(errno)));
    }
  }
  std::optional<Culprits> culprits;
  try {
    std::string warning;
    culprits = loadCulprits(opts.culprits, warning);
    if (!warning.empty()) std::cerr << fmt::format("gpurr diff: warning: {}\n", warning);
  } catch (const std::runtime_error& e) {
    return fail(e.what());
  }

  RunComparison comparison;
  try {
    comparison = compareRuns(opts.a, opts.b, opts.force, culprits ? &*culprits : nullptr);
  } catch (const UsageError& e) {
    return fail(e.what(), UsageError::kindName(e.kind));
  } catch (const trace::TraceError& e) {
    refused(e.what(), "unreadableTrace");
    throw;
  }
  // The job's view across ranks, once, for the page and the report alike.
  const std::optional<JobView> job = jobView(comparison);
  // Made before the file is opened: it reads the traces again.
  const std::string page = opts.html.empty() ? "" : htmlPage(comparison, job);
  if (opts.json) {
    std::cout << report::jsonText(comparisonJson(comparison, job ? &*job : nullptr)) << '\n';
  } else {
    const bool colour = useColor(opts.color);
    keepTerminalColours(colour);
    printComparison(std::cout, Style{colour}, comparison, job ? &*job : nullptr);
  }
  if (!opts.html.empty()) {
    std::ofstream out(opts.html, std::ios::binary | std::ios::trunc);
    out << page;
    out.close();
    // A page that could not be written after all (a full disk) leaves the
    // report printed, and its exit status, as they are.
    if (!out) std::cerr << fmt::format("gpurr diff: warning: cannot write {}: {}\n", opts.html, std::strerror(errno));
  }
  if (comparison.identical()) return kExitOk;
  return comparison.unknown() ? kExitTrouble : kExitDifferent;
}

}  // namespace

void addDiffCommand(CLI::App& app, Action& chosen) {
  auto opts = std::make_shared<DiffCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "diff",
      "Find the first operation whose output differs between two runs, and why.\n"
      "A and B are traces, or directories of per-process traces (rank0.gpurr...) matched by "
      "name.\nExit status: 0 identical, 1 different, 2 trouble. Report format: docs/DIFF.md.");
  cmd->add_option("a", opts->a, "Trace of run A (or a directory of traces)")->required();
  cmd->add_option("b", opts->b, "Trace of run B (or a directory of traces)")->required();
  cmd->add_flag("--json", opts->json, "Print one JSON object (schema in docs/DIFF.md)");
  cmd->add_option("--color", opts->color, "Colour the text report: auto (a terminal, unless NO_COLOR is set), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->add_flag("--force", opts->force,
                "Compare traces from different GPU models or different command lines anyway");
  cmd->add_option("--html", opts->html,
                  "Also write the report as one self-contained HTML page (with the operations around the "
                  "first divergence) to FILE")
      ->check([](const std::string& file) { return file.empty() ? std::string("give the page's file name") : ""; });
  cmd->add_option("--culprits", opts->culprits,
                  "Known-culprits table (default: share/gpurr/known_culprits.json beside the binary)");
  cmd->callback([opts, &chosen] { chosen = [opts] { return run(*opts); }; });
}

}  // namespace gpurr::cli
