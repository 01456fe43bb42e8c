// How subcommands plug into `gpurr`: each registers itself, with its options
// and help text, on the top-level app, and sets `chosen` to its action when
// the user picks it.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>
#include <string>
#include <string_view>

namespace gpurr::cli {

// Runs the chosen command; returns the process exit code.
using Action = std::function<int()>;

void addInfoCommand(CLI::App& app, Action& chosen);
void addDumpCommand(CLI::App& app, Action& chosen);
void addRecordCommand(CLI::App& app, Action& chosen);
void addReplayCommand(CLI::App& app, Action& chosen);
void addDiffCommand(CLI::App& app, Action& chosen);
void addBisectCommand(CLI::App& app, Action& chosen);
void addVerifyCommand(CLI::App& app, Action& chosen);

// A whole number 0 or more (a step, a device, an event), checked with a
// message that names what was given; CLI::NonNegativeNumber's names a range
// of doubles. One past 2^63 - 1 would be clamped when it is read.
inline const CLI::Validator kWholeNumber(
    [](const std::string& value) -> std::string {
      const bool digits = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
      if (!digits) return "expected a whole number 0 or more, got '" + value + "'";
      const std::string_view significant = std::string_view(value).substr(std::min(value.find_first_not_of('0'),
                                                                                  value.size() - 1));
      const std::string_view largest = "9223372036854775807";
      const bool fits = significant.size() < largest.size() ||
                        (significant.size() == largest.size() && significant <= largest);
      return fits ? "" : "'" + value + "' is too large (at most " + std::string(largest) + ")";
    },
    "N>=0");

// A path given: not empty (`-o ""` would otherwise mean the default).
inline const CLI::Validator kPathGiven(
    [](const std::string& value) -> std::string { return value.empty() ? "expected a path, got ''" : ""; }, "PATH");

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitDifferent = 1;  // diff: the runs differ
inline constexpr int kExitTrouble = 2;    // usage errors, unreadable traces

}  // namespace gpurr::cli
