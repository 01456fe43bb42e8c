// Running a user's command as gpurr's child, the way a shell would: same
// terminal, same process group, stdin/stdout/stderr untouched, its exit status
// passed back, and termination signals sent to gpurr forwarded to it.
#pragma once

#include <pthread.h>

#include <csignal>
#include <functional>
#include <string>
#include <vector>

namespace gpurr::cli {

// Environment changes for the child: `value` set, or the variable removed when
// `unset` is true.
struct EnvChange {
  std::string name;
  std::string value;
  bool unset = false;
};

// How the child ended, as a shell reports it.
struct ChildExit {
  int code = 0;       // exit code, or 128 + signal when killed by one
  int signal = 0;     // the killing signal, 0 when it exited normally
  bool started = true;  // false when the command could not be executed
  std::string error;  // why it could not start ("not found", "permission denied")
};

// The signals gpurr forwards to its child: SIGINT, SIGTERM, SIGHUP, SIGQUIT,
// and SIGUSR1 and SIGUSR2 (a batch system's warning before it stops a job,
// Slurm's --signal, which a program may handle by saving a checkpoint):
// each of them would kill gpurr and leave the program running alone.
const std::vector<int>& forwardedSignals();

// Whether a forwarded signal that gpurr received should be sent on to the
// child. A signal the kernel raised for the terminal (Ctrl-C, Ctrl-\, hangup)
// already reached the child, which shares gpurr's process group: sending it
// again would deliver it twice. One sent with kill() by another process
// targets gpurr alone and is passed on.
bool shouldForward(const siginfo_t& info, pid_t child);

// Blocks the forwarded signals and SIGCHLD for the lifetime of the object,
// so that they wait for sigwaitinfo (in the child's parent, which waits for
// both at once).
class SignalBlock {
 public:
  SignalBlock() {
    sigemptyset(&set_);
    for (int s : forwardedSignals()) sigaddset(&set_, s);
    sigaddset(&set_, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &set_, &previous_);
  }
  ~SignalBlock() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;
  const sigset_t& set() const { return set_; }
  const sigset_t& previous() const { return previous_; }

 private:
  sigset_t set_;
  sigset_t previous_;
};

// Environment `base` (NAME=VALUE strings) with `changes` applied, in order.
std::vector<std::string> applyEnv(const std::vector<std::string>& base,
                                  const std::vector<EnvChange>& changes);

// Runs `argv` (argv[0] looked up in PATH like a shell) with environment
// `env` and waits for it, forwarding signals as shouldForward() says, each
// after `onSignal` (when given) has seen it. When the command cannot be
// executed, returns started = false with code 127 (not found) or 126 (found
// but not executable), as a shell does.
ChildExit runChild(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                   const std::function<void(int)>& onSignal = {});

}  // namespace gpurr::cli
