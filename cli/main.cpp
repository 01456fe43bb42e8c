// gpurr: record GPU programs, find where two runs first differ, and why.
#include <exception>
#include <functional>
#include <iostream>
#include <new>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "cli/commands.h"
#include "commit.h"  // generated: GPURR_COMMIT (cmake/write_commit.cmake)
#include "report/event_json.h"
#include "report/terminal.h"
#include "trace_format/trace.h"

int main(int argc, char** argv) {
  using namespace gpurr::cli;
  // What the commands print holds text from traces and programs.
  gpurr::report::filterTerminalOutput();
  CLI::App app{
      "gpurr: a bitwise record-and-replay debugger for GPU programs.\n"
      "Finds the first kernel launch whose output differs between two runs, and why."};
  app.name("gpurr");
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("gpurr {} (commit {}, built with {}, trace format {}, compat {})",
                                                GPURR_VERSION, GPURR_COMMIT, GPURR_BUILT_WITH,
                                                gpurr::trace::kFormatVersion, gpurr::trace::kCompatVersion));
  Action chosen;
  addInfoCommand(app, chosen);
  addDumpCommand(app, chosen);
  addVerifyCommand(app, chosen);
  addRecordCommand(app, chosen);
  addReplayCommand(app, chosen);
  addDiffCommand(app, chosen);
  addBisectCommand(app, chosen);
  // A word where the command goes that names none: said as such (the
  // parser would only say that a command is required).
  if (argc > 1 && argv[1][0] != '-') {
    const CLI::App& commands = app;
    std::string names;
    bool known = false;
    for (const CLI::App* c : commands.get_subcommands(std::function<bool(const CLI::App*)>{})) {
      names += (names.empty() ? "" : ", ") + c->get_name();
      known = known || c->get_name() == argv[1];
    }
    if (!known) {
      std::cerr << "gpurr: no command '" << argv[1] << "'; the commands are " << names << " (gpurr --help)\n";
      return kExitTrouble;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Said as the commands' own errors are; a count given to an option
    // whose value is optional must follow its '=' (the parser took it for
    // the command's first word).
    const std::string command = argc > 1 && argv[1][0] != '-' ? argv[1] : "";
    std::string message = e.what();
    bool json = false;
    for (int i = 2; i < argc && std::string_view(argv[i]) != "--"; ++i) {
      json = json || std::string_view(argv[i]) == "--json";
      if (i + 1 < argc && std::string_view(argv[i]) == "--check-determinism" && argv[i + 1][0] >= '0' &&
          argv[i + 1][0] <= '9') {
        message = fmt::format("--check-determinism takes its count after '=': --check-determinism={}", argv[i + 1]);
      }
    }
    // A command line asking for JSON gets an object even so (docs/JSON.md):
    // diff's and bisect's of the same form as their other refusals.
    if (json) {
      gpurr::report::Json out{{"error", message}};
      if (command == "diff") {
        out = {{"gpurrDiff", 1}, {"verdict", "error"}, {"error", message}, {"errorKind", "option"}};
      }
      if (command == "bisect") out = {{"gpurrBisect", 1}, {"verdict", "failed"}, {"error", message}};
      std::cout << gpurr::report::jsonText(out) << '\n';
    }
    std::cerr << fmt::format("gpurr{}: error: {} (gpurr {}--help)\n", command.empty() ? "" : " " + command, message,
                             command.empty() ? "" : command + " ");
    return kExitTrouble;
  }
  // Errors begin "gpurr COMMAND: error:", as the commands' own do.
  const auto parsed = app.get_subcommands();
  const std::string who = parsed.empty() ? "gpurr" : "gpurr " + parsed.front()->get_name();
  try {
    return chosen ? chosen() : kExitTrouble;
  } catch (const gpurr::trace::TraceError& e) {
    std::cerr << who << ": error: " << e.what() << "\n";
    return kExitTrouble;
  } catch (const std::bad_alloc&) {
    std::cerr << who << ": error: out of memory: a trace may be damaged, made to exhaust memory, or larger than "
                        "this machine can read\n";
    return kExitTrouble;
  } catch (const std::exception& e) {
    std::cerr << who << ": internal error: " << e.what() << "\n";
    return kExitTrouble;
  }
}
