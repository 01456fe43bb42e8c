// Running the steps of `gpurr bisect` (`gpurr record` and `gpurr replay`
// children) with their output in files, while the caller keeps a progress
// line alive: like runChild (cli/process.h), with the same signal
// forwarding, but stdout and stderr redirected and a tick at least twice a
// second. A step may also be started ahead of its turn and waited for
// later, or ended unused (a run held at its start, docs/BISECT.md).
#pragma once

#include <sys/types.h>

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

class StepChild {
 public:
  // Starts `argv` (argv[0] a path, or looked up in PATH) with this
  // process's environment, stdin inherited, stdout appended to `stdoutFile`
  // and stderr to `stderrFile` (the same file for both is fine). With
  // `diesWithGpurr`, the child gets SIGTERM when gpurr dies (a run held at
  // its start would otherwise wait for ever). When it cannot start or a
  // file cannot be opened, exit() says why (started = false).
  StepChild(const std::vector<std::string>& argv, const std::filesystem::path& stdoutFile,
            const std::filesystem::path& stderrFile, bool diesWithGpurr = false);
  ~StepChild();  // end() when it still runs
  StepChild(const StepChild&) = delete;
  StepChild& operator=(const StepChild&) = delete;

  // How it ended (or why it did not start); meaningful once ended().
  const ChildExit& exit() const { return exit_; }
  // Whether it has ended (reaped here when it has), without waiting.
  bool ended();
  // Waits for it, calling `tick` about twice a second. Signals are
  // forwarded as runChild forwards them.
  StepExit wait(const std::function<void()>& tick);
  // Sends it SIGTERM and waits for it, 10 s at most, then kills it.
  void end();

 private:
  pid_t pid_ = -1;
  ChildExit exit_;
  bool ended_ = false;
};

// Starts `argv` as StepChild does and waits for it.
StepExit runStep(const std::vector<std::string>& argv, const std::filesystem::path& stdoutFile,
                 const std::filesystem::path& stderrFile, const std::function<void()>& tick);

}  // namespace gpurr::cli::bisect
