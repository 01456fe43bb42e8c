// gpurr dump TRACE: one line per event.
#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <limits>
#include <regex>
#include <unordered_map>

#include "cli/commands.h"
#include "report/event_json.h"
#include "report/text.h"
#include "trace_format/trace.h"

namespace gpurr::cli {
using namespace gpurr::report;
namespace {
using namespace gpurr::trace;

struct DumpOptions {
  std::string trace;
  bool json = false;
  std::string range;
  std::string kernel;
};

// "A:B" (A included, B excluded), "A:", ":B" or "N" (just N).
std::pair<uint64_t, uint64_t> parseRange(const std::string& text) {
  auto number = [&](std::string_view s, uint64_t fallback) {
    if (s.empty()) return fallback;
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size()) {
      throw CLI::ValidationError("--range", "expected A:B with event numbers, got '" + text + "'");
    }
    return v;
  };
  if (text.empty()) return {0, std::numeric_limits<uint64_t>::max()};
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    const uint64_t n = number(text, 0);
    return {n, n + 1};
  }
  const std::string_view s(text);
  return {number(s.substr(0, colon), 0),
          number(s.substr(colon + 1), std::numeric_limits<uint64_t>::max())};
}

int run(const DumpOptions& opts) {
  const auto [from, to] = parseRange(opts.range);
  std::optional<std::regex> pattern;
  if (!opts.kernel.empty()) {
    try {
      pattern.emplace(opts.kernel, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      std::fprintf(stderr, "gpurr dump: --kernel: invalid regular expression '%s': %s\n",
                   opts.kernel.c_str(), e.what());
      return kExitTrouble;
    }
  }
  TraceReader reader(opts.trace);
  if (reader.damage().unclosed) {
    std::fprintf(stderr, "gpurr dump: warning: %s: %s\n", opts.trace.c_str(),
                 reader.damage().detail.c_str());
  }
  // Whether a function name matches --kernel, cached per mangled name.
  std::unordered_map<std::string, bool> matches;
  auto selected = [&](const Event& e) {
    if (!pattern) return true;
    const auto* k = std::get_if<KernelLaunch>(&e.payload);
    if (!k) return false;
    auto it = matches.find(k->function);
    if (it == matches.end()) {
      const bool m = std::regex_search(k->function, *pattern) ||
                     std::regex_search(demangle(k->function), *pattern);
      it = matches.emplace(k->function, m).first;
    }
    return it->second;
  };
  std::string out;
  reader.forEach(
      [&](const Event& e) {
        if (e.seq >= to) return false;
        if (!selected(e)) return true;
        out = opts.json ? toJson(e).dump() : describe(e);
        out += '\n';
        std::fwrite(out.data(), 1, out.size(), stdout);
        return true;
      },
      from);
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace

void addDumpCommand(CLI::App& app, Action& chosen) {
  auto opts = std::make_shared<DumpOptions>();
  CLI::App* cmd = app.add_subcommand(
      "dump",
      "Print a trace's events, one line each: sequence number, time, host thread, kind and\n"
      "details. Launches show the demangled kernel, launch configuration, and the digests\n"
      "of the ranges each launch read (in) and wrote (out).");
  cmd->add_option("trace", opts->trace, "Trace directory")->required();
  cmd->add_flag("--json", opts->json, "One JSON object per line (keys documented in docs/JSON.md)");
  cmd->add_option("--range", opts->range,
                  "Only events with sequence numbers in A:B (A included, B excluded; either may "
                  "be left out), or a single number");
  cmd->add_option("--kernel", opts->kernel,
                  "Only launches whose kernel name (mangled or demangled) matches this "
                  "regular expression");
  cmd->callback([opts, &chosen] { chosen = [opts] { return run(*opts); }; });
}

}  // namespace gpurr::cli
