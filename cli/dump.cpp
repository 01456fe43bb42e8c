// gpurr dump TRACE: one line per event.
#include <fmt/format.h>

#include <charconv>
#include <iostream>
#include <limits>
#include <regex>
#include <unordered_map>

#include "cli/commands.h"
#include "common/name_pattern.h"
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
  std::optional<std::string> kernel;
};

// "A:B" (A included, B excluded), "A:", ":B" or "N" (just N); nullopt for
// anything else.
std::optional<std::pair<uint64_t, uint64_t>> parseRange(const std::string& text) {
  auto number = [](std::string_view s, uint64_t fallback) -> std::optional<uint64_t> {
    if (s.empty()) return fallback;
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
    return v;
  };
  if (text.empty()) return std::pair<uint64_t, uint64_t>{0, std::numeric_limits<uint64_t>::max()};
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    const auto n = number(text, 0);
    if (!n || *n == std::numeric_limits<uint64_t>::max()) return std::nullopt;
    return std::pair{*n, *n + 1};
  }
  const std::string_view s(text);
  const auto from = number(s.substr(0, colon), 0);
  const auto to = number(s.substr(colon + 1), std::numeric_limits<uint64_t>::max());
  if (!from || !to) return std::nullopt;
  return std::pair{*from, *to};
}

// --range's check, when the command line is read.
std::string checkRange(const std::string& text) {
  const auto range = parseRange(text);
  if (!range) return "expected A:B, A:, :B or N with event numbers (0, 1, ...), got '" + text + "'";
  if (range->first >= range->second) return "'" + text + "' selects no event (B must be larger than A)";
  return "";
}

// With --json, a dump that cannot be done ends with one line {trace,
// error}, its message on standard error as well.
int fail(const DumpOptions& opts, const std::string& message) {
  std::cout.flush();
  if (opts.json) std::cout << report::jsonText(report::Json{{"trace", opts.trace}, {"error", message}}, -1) << '\n';
  std::cerr << "gpurr dump: error: " << message << "\n";
  return kExitTrouble;
}

int dump(const DumpOptions& opts) {
  const auto [from, to] = *parseRange(opts.range);  // checked when read
  std::optional<std::regex> pattern;
  if (opts.kernel) {
    try {
      pattern = namePattern(*opts.kernel, std::regex::optimize);
    } catch (const std::regex_error&) {
      return fail(opts, fmt::format("--kernel: invalid regular expression '{}': {}", *opts.kernel,
                                    namePatternError(*opts.kernel)));
    }
  }
  TraceReader reader(opts.trace);
  if (reader.damage().incomplete()) {
    std::cerr << "gpurr dump: warning: " << opts.trace << ": " << reader.damage().detail << "\n";
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
  std::optional<uint64_t> last;  // the last event read
  auto show = [&](const Event& e) {
    if (e.seq >= to) return false;
    last = e.seq;
    if (!selected(e)) return true;
    out = opts.json ? report::jsonText(toJson(e), -1) : text::oneLine(describe(e));
    out += '\n';
    std::cout << out;  // through the terminal filter (report/terminal.h)
    return true;
  };
  // A corrupt block is left out, with a warning, and the whole blocks after
  // it are read: nothing readable goes unshown.
  for (uint64_t at = from;;) {
    try {
      reader.forEach(show, at);
      break;
    } catch (const CorruptBlock& e) {
      const std::vector<BlockInfo>& blocks = reader.blocks();
      const size_t bad = reader.blockOf(last && *last + 1 > at ? *last + 1 : at);
      if (bad + 1 >= blocks.size() || blocks[bad + 1].firstSeq >= to) {
        if (!last) throw;  // nothing of the range could be read
        std::cout.flush();
        std::cerr << "gpurr dump: warning: " << e.what() << ": the events after it are not shown\n";
        break;
      }
      at = blocks[bad + 1].firstSeq;
      std::cout.flush();
      std::cerr << "gpurr dump: warning: " << e.what() << fmt::format(": events #{} to #{} are not shown\n",
                                                                        blocks[bad].firstSeq, at - 1);
    }
  }
  std::cout.flush();
  if (!last && from > 0) {
    const uint64_t n = reader.eventCount();
    return fail(opts, fmt::format("--range {}: no such event: {}", opts.range,
                                  n == 0 ? std::string("the trace holds none")
                                         : fmt::format("the trace's events are #0 to #{}", n - 1)));
  }
  return kExitOk;
}

int run(const DumpOptions& opts) {
  try {
    return dump(opts);
  } catch (const TraceError& e) {
    return fail(opts, e.what());
  }
}

}  // namespace

void addDumpCommand(CLI::App& app, Action& chosen) {
  auto opts = std::make_shared<DumpOptions>();
  CLI::App* cmd = app.add_subcommand(
      "dump",
      "Print a trace's events, one line each: sequence number, time, host thread, kind and\n"
      "details. Launches show the demangled kernel, launch configuration, and the digests\n"
      "of the ranges each launch read (in) and wrote (out).");
  cmd->add_option("trace", opts->trace, "Trace (one process's: gpurr info lists a directory of several)")->required();
  cmd->add_flag("--json", opts->json, "One JSON object per line (keys documented in docs/JSON.md)");
  cmd->add_option("--range", opts->range,
                  "Only events with sequence numbers in A:B (A included, B excluded; either may "
                  "be left out), or a single number")
      ->check(checkRange);
  cmd->add_option("--kernel", opts->kernel,
                  "Only launches whose kernel name (mangled or demangled) matches this "
                  "regular expression");
  cmd->callback([opts, &chosen] { chosen = [opts] { return run(*opts); }; });
}

}  // namespace gpurr::cli
