// Runs the recorded command as a child process. Signals are taken
// synchronously (blocked, then sigwaitinfo) so that gpurr never dies or runs
// handler code while its child is running; it decides per signal whether the
// child still needs it.
#include "cli/process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpurr::cli {

const std::vector<int>& forwardedSignals() {
  static const std::vector<int> signals{SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  return signals;
}

bool shouldForward(const siginfo_t& info, pid_t child) {
  // The terminal's signals (Ctrl-C, Ctrl-\, hangup) go to the whole
  // foreground process group, child included.
  if (info.si_code == SI_KERNEL) return false;
  // The child signalling its own group (kill(0, sig)) has reached itself.
  if ((info.si_code == SI_USER || info.si_code == SI_QUEUE) && info.si_pid == child) return false;
  return true;
}

std::vector<std::string> applyEnv(const std::vector<std::string>& base,
                                  const std::vector<EnvChange>& changes) {
  std::vector<std::string> env = base;
  for (const EnvChange& c : changes) {
    const std::string prefix = c.name + "=";
    std::erase_if(env, [&](const std::string& entry) { return entry.starts_with(prefix); });
    if (!c.unset) env.push_back(prefix + c.value);
  }
  return env;
}

namespace {

ChildExit fromStatus(int status) {
  ChildExit out;
  if (WIFSIGNALED(status)) {
    out.signal = WTERMSIG(status);
    out.code = 128 + out.signal;
  } else {
    out.code = WEXITSTATUS(status);
  }
  return out;
}

}  // namespace

ChildExit runChild(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                   const std::function<void(int)>& onSignal) {
  ChildExit out;
  if (argv.empty()) {
    out.started = false;
    out.code = 127;
    out.error = "no command";
    return out;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // An inherited SIG_IGN for SIGCHLD would reap the child behind our back.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGCHLD, &dfl, nullptr);

  SignalBlock block;
  // The child reports a failed exec through this pipe; a successful exec
  // closes it (O_CLOEXEC) with nothing written.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    out.started = false;
    out.code = 126;
    out.error = std::string("cannot create a pipe: ") + std::strerror(errno);
    return out;
  }
  const pid_t child = fork();
  if (child < 0) {
    const int err = errno;
    close(report[0]);
    close(report[1]);
    out.started = false;
    out.code = 126;
    out.error = std::string("cannot start a process: ") + std::strerror(err);
    return out;
  }
  if (child == 0) {
    // Only async-signal-safe calls from here on.
    close(report[0]);
    sigprocmask(SIG_SETMASK, &block.previous(), nullptr);
    execvpe(args[0], args.data(), envp.data());
    const int err = errno;
    ssize_t ignored = write(report[1], &err, sizeof err);
    (void)ignored;
    _exit(127);
  }
  close(report[1]);
  int execErrno = 0;
  ssize_t got;
  do {
    got = read(report[0], &execErrno, sizeof execErrno);
  } while (got < 0 && errno == EINTR);
  close(report[0]);
  if (got == static_cast<ssize_t>(sizeof execErrno)) {
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    out.started = false;
    out.code = execErrno == ENOENT || execErrno == ENOTDIR ? 127 : 126;
    out.error = execErrno == ENOENT ? "command not found" : std::strerror(execErrno);
    return out;
  }

  for (;;) {
    siginfo_t info{};
    const int sig = sigwaitinfo(&block.set(), &info);
    if (sig < 0) continue;  // EINTR (a stop/continue signal)
    if (sig == SIGCHLD) {
      int status = 0;
      const pid_t done = waitpid(child, &status, WNOHANG);
      if (done == child) return fromStatus(status);
      if (done < 0 && errno == ECHILD) return out;  // reaped elsewhere; nothing to report
      continue;
    }
    if (onSignal) onSignal(sig);
    if (shouldForward(info, child)) kill(child, sig);
  }
}

}  // namespace gpurr::cli
