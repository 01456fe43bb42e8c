// Running one step of `gpurr bisect` (a `gpurr record` or `gpurr replay`
// child) with its output in files, while the caller keeps a progress line
// alive: like runChild (cli/process.h), with the same signal forwarding, but
// stdout and stderr redirected and a tick at least once a second.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "cli/process.h"

namespace gpurr::cli::bisect {

struct StepExit {
  ChildExit exit;
  // A terminating signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) reached gpurr
  // while the child ran: the user wants to stop after this step.
  int interruptedBy = 0;
};

// Runs `argv` (argv[0] a path, or looked up in PATH) with this process's
// environment, stdin inherited, stdout appended to `stdoutFile` and stderr
// to `stderrFile` (the same file for both is fine); calls `tick` about once a
// second until it exits. Signals are forwarded as runChild forwards them.
// Returns started = false with the reason when it cannot start or a file
// cannot be opened.
StepExit runStep(const std::vector<std::string>& argv, const std::filesystem::path& stdoutFile,
                 const std::filesystem::path& stderrFile, const std::function<void()>& tick);

}  // namespace gpurr::cli::bisect
