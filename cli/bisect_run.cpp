// Runs bisect steps as children with their output in files. Signals are
// taken synchronously, as in process.cpp, but with a timeout so that the
// progress line keeps its clock running while the child works.
#include "cli/bisect_run.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <thread>

extern char** environ;

namespace gpurr::cli::bisect {
namespace {

// How long end() lets a child take to end after SIGTERM before SIGKILL.
constexpr auto kEndWait = std::chrono::milliseconds(10'000);

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

StepChild::StepChild(const std::vector<std::string>& argv, const std::filesystem::path& stdoutFile,
                     const std::filesystem::path& stderrFile, bool diesWithGpurr) {
  ended_ = true;  // until it runs
  if (argv.empty()) {
    exit_ = notStarted(127, "no command");
    return;
  }
  const int out = openLog(stdoutFile);
  if (out < 0) {
    exit_ = notStarted(126, "cannot open " + stdoutFile.string() + ": " + std::strerror(errno));
    return;
  }
  const int err = stderrFile == stdoutFile ? ::dup(out) : openLog(stderrFile);
  if (err < 0) {
    const int e = errno;
    ::close(out);
    exit_ = notStarted(126, "cannot open " + stderrFile.string() + ": " + std::strerror(e));
    return;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  // An inherited SIG_IGN for SIGCHLD would reap the child behind our back.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGCHLD, &dfl, nullptr);

  // The child's signal mask: this thread's, without what a SignalBlock of
  // a wait under way blocks.
  SignalBlock block;
  sigset_t childMask = block.previous();
  for (int s : forwardedSignals()) sigdelset(&childMask, s);
  sigdelset(&childMask, SIGCHLD);
  const pid_t parent = ::getpid();
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out);
    ::close(err);
    exit_ = notStarted(126, std::string("cannot create a pipe: ") + std::strerror(e));
    return;
  }
  const pid_t child = fork();
  if (child < 0) {
    const int e = errno;
    for (int fd : {report[0], report[1], out, err}) ::close(fd);
    exit_ = notStarted(126, std::string("cannot start a process: ") + std::strerror(e));
    return;
  }
  if (child == 0) {
    // Only async-signal-safe calls from here on.
    ::close(report[0]);
    if (diesWithGpurr && (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || ::getppid() != parent)) _exit(127);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    sigprocmask(SIG_SETMASK, &childMask, nullptr);
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
    exit_ = notStarted(execErrno == ENOENT || execErrno == ENOTDIR ? 127 : 126,
                       execErrno == ENOENT ? "command not found" : std::strerror(execErrno));
    return;
  }
  pid_ = child;
  ended_ = false;
}

StepChild::~StepChild() {
  if (!ended_) end();
}

bool StepChild::ended() {
  if (ended_) return true;
  int status = 0;
  const pid_t done = waitpid(pid_, &status, WNOHANG);
  if (done == pid_) {
    if (WIFSIGNALED(status)) {
      exit_.signal = WTERMSIG(status);
      exit_.code = 128 + exit_.signal;
    } else {
      exit_.code = WEXITSTATUS(status);
    }
    ended_ = true;
  } else if (done < 0 && errno == ECHILD) {
    ended_ = true;  // reaped elsewhere: its status is lost
  }
  return ended_;
}

StepExit StepChild::wait(const std::function<void()>& tick) {
  StepExit result;
  SignalBlock block;
  const timespec pause{0, 500'000'000};
  for (;;) {
    if (tick) tick();
    if (ended()) {
      result.exit = exit_;
      return result;
    }
    siginfo_t info{};
    const int sig = sigtimedwait(&block.set(), &info, &pause);
    if (sig < 0 || sig == SIGCHLD) continue;  // timeout, EINTR, or a child ended: ended() tells
    result.interruptedBy = sig;
    if (shouldForward(info, pid_)) kill(pid_, sig);
  }
}

void StepChild::end() {
  if (ended()) return;
  kill(pid_, SIGTERM);
  // A program that handles SIGTERM itself may take its time, or not end
  // (one held at its start ends through its gate instead): `gpurr record`
  // is killed after kEndWait, and a program it held then ends with it.
  int status = 0;
  pid_t done = 0;
  for (auto waited = std::chrono::milliseconds(0);
       (done = waitpid(pid_, &status, WNOHANG)) == 0 || (done < 0 && errno == EINTR);
       waited += std::chrono::milliseconds(50)) {
    if (waited == kEndWait) kill(pid_, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (done < 0) status = 0;  // reaped elsewhere: its status is lost
  exit_.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  exit_.code = WIFSIGNALED(status) ? 128 + exit_.signal : WEXITSTATUS(status);
  ended_ = true;
}

StepExit runStep(const std::vector<std::string>& argv, const std::filesystem::path& stdoutFile,
                 const std::filesystem::path& stderrFile, const std::function<void()>& tick) {
  StepChild child(argv, stdoutFile, stderrFile);
  if (!child.exit().started) return StepExit{child.exit(), 0};
  return child.wait(tick);
}

}  // namespace gpurr::cli::bisect
