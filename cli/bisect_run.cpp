// Runs a bisect step as a child with its output in files. Signals are taken
// synchronously, as in process.cpp, but with a timeout so that the progress
// line keeps its clock running while the child works.
#include "cli/bisect_run.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

extern char** environ;

namespace gpurr::cli::bisect {
namespace {

ChildExit notStarted(int code, std::string why) {
  ChildExit out;
  out.started = false;
  out.code = code;
  out.error = std::move(why);
  return out;
}

int openLog(const std::filesystem::path& file) {
  return ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

}  // namespace

StepExit runStep(const std::vector<std::string>& argv, const std::filesystem::path& stdoutFile,
                 const std::filesystem::path& stderrFile, const std::function<void()>& tick) {
  StepExit result;
  if (argv.empty()) {
    result.exit = notStarted(127, "no command");
    return result;
  }
  const int out = openLog(stdoutFile);
  if (out < 0) {
    result.exit = notStarted(126, "cannot open " + stdoutFile.string() + ": " + std::strerror(errno));
    return result;
  }
  const int err = stderrFile == stdoutFile ? ::dup(out) : openLog(stderrFile);
  if (err < 0) {
    const int e = errno;
    ::close(out);
    result.exit = notStarted(126, "cannot open " + stderrFile.string() + ": " + std::strerror(e));
    return result;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  // An inherited SIG_IGN for SIGCHLD would reap the child behind our back.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGCHLD, &dfl, nullptr);

  SignalBlock block;
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out);
    ::close(err);
    result.exit = notStarted(126, std::string("cannot create a pipe: ") + std::strerror(e));
    return result;
  }
  const pid_t child = fork();
  if (child < 0) {
    const int e = errno;
    for (int fd : {report[0], report[1], out, err}) ::close(fd);
    result.exit = notStarted(126, std::string("cannot start a process: ") + std::strerror(e));
    return result;
  }
  if (child == 0) {
    // Only async-signal-safe calls from here on.
    ::close(report[0]);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    sigprocmask(SIG_SETMASK, &block.previous(), nullptr);
    execvpe(args[0], args.data(), environ);
    const int e = errno;
    ssize_t ignored = ::write(report[1], &e, sizeof e);
    (void)ignored;
    _exit(127);
  }
  ::close(report[1]);
  ::close(out);
  ::close(err);
  int execErrno = 0;
  ssize_t got;
  do {
    got = ::read(report[0], &execErrno, sizeof execErrno);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got == static_cast<ssize_t>(sizeof execErrno)) {
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    result.exit = notStarted(execErrno == ENOENT || execErrno == ENOTDIR ? 127 : 126,
                             execErrno == ENOENT ? "command not found" : std::strerror(execErrno));
    return result;
  }

  const timespec wait{0, 500'000'000};
  for (;;) {
    if (tick) tick();
    siginfo_t info{};
    const int sig = sigtimedwait(&block.set(), &info, &wait);
    if (sig < 0) continue;  // timeout, or EINTR
    if (sig == SIGCHLD) {
      int status = 0;
      const pid_t done = waitpid(child, &status, WNOHANG);
      if (done == child) {
        if (WIFSIGNALED(status)) {
          result.exit.signal = WTERMSIG(status);
          result.exit.code = 128 + result.exit.signal;
        } else {
          result.exit.code = WEXITSTATUS(status);
        }
        return result;
      }
      if (done < 0 && errno == ECHILD) return result;
      continue;
    }
    result.interruptedBy = sig;
    if (shouldForward(info, child)) kill(child, sig);
  }
}

}  // namespace gpurr::cli::bisect
