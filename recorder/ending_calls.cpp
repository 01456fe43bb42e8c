// The libc calls that end a process, exported for LD_PRELOAD (`gpurr record`
// preloads the recorder), so that what was recorded is written before they
// take effect; each does what glibc's does otherwise (the system call, errno
// set on failure):
// - `kill` to the program's own process or a process group it is in, and
//   `raise`: a signal that ends it, its action the default, is taken by the
//   recorder first (signal_flush.h, selfSignal). Python ends so after an unhandled KeyboardInterrupt (its
//   atexit handlers, then SIGINT's default back and `kill(getpid(),
//   SIGINT)`); so do faulthandler after a crash and any handler that cleans
//   up and raises its signal again.
// - `_exit` and `_Exit` (Python's `os._exit`, which scripts call to skip a
//   teardown that hangs): the trace is closed as at the exit first
//   (beforeExitCall), which C's exit handlers would have done.
// - the `exec` family (Python's `os.execv`, a launcher that hands over to
//   another program or restarts itself): the process image ends without
//   C's exit handlers too, so the trace is closed first, where the program
//   to run is there to be run (else the call fails as it would have, and
//   the recording goes on); an exec that fails all the same says that the
//   rest of the program is not recorded.
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "recorder/signal_flush.h"

#define GPURR_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// The trace closed first (beforeExitCall), then the process ends.
[[noreturn]] void exitAfterClose(int status) {
  gpurr::recorder::beforeExitCall();
  for (;;) syscall(SYS_exit_group, status);
}

// Whether `file` names a program exec can run: a path (with a slash) to an
// executable regular file, or, `search`ing as execvp does, one in a
// directory of PATH.
bool runnable(const char* file, bool search) {
  auto executable = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
  };
  if (file == nullptr || *file == '\0') return false;
  if (!search || strchr(file, '/') != nullptr) return executable(file);
  const char* path = getenv("PATH");
  std::string dirs = path != nullptr ? path : "/bin:/usr/bin";
  for (size_t from = 0; from <= dirs.size();) {
    const size_t to = std::min(dirs.find(':', from), dirs.size());
    const std::string dir = to > from ? dirs.substr(from, to - from) : ".";
    if (executable(dir + "/" + file)) return true;
    from = to + 1;
  }
  return false;
}

// The trace closed before an exec of `file` that can run it; the exec's
// result, with a word where it failed all the same.
template <typename Exec>
int execAfterClose(const char* file, bool search, Exec exec) {
  const bool closing = runnable(file, search);
  if (closing) gpurr::recorder::beforeExitCall();
  const int result = exec();
  if (closing && gpurr::recorder::closedByExitCall()) {
    const int error = errno;
    const std::string text = std::string("gpurr: warning: the exec of ") + file + " failed (" + strerror(error) +
                             ") after the trace was closed for it; the rest of the program is not recorded\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
    errno = error;
  }
  return result;
}

template <typename Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// The arguments of execl and its kind, up to the null pointer, as an argv;
// `envp` takes what follows it where there is one (execle).
std::vector<char*> argvOf(const char* arg, va_list args, char* const** envp = nullptr) {
  std::vector<char*> argv{const_cast<char*>(arg)};
  while (argv.back() != nullptr) argv.push_back(va_arg(args, char*));
  if (envp != nullptr) *envp = va_arg(args, char* const*);
  return argv;
}

}  // namespace

GPURR_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  static const auto real = next<int (*)(const char*, char* const*, char* const*)>("execve");
  return execAfterClose(path, false, [&] { return real(path, argv, envp); });
}

GPURR_EXPORT int execv(const char* path, char* const argv[]) {
  static const auto real = next<int (*)(const char*, char* const*)>("execv");
  return execAfterClose(path, false, [&] { return real(path, argv); });
}

GPURR_EXPORT int execvp(const char* file, char* const argv[]) {
  static const auto real = next<int (*)(const char*, char* const*)>("execvp");
  return execAfterClose(file, true, [&] { return real(file, argv); });
}

GPURR_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  static const auto real = next<int (*)(const char*, char* const*, char* const*)>("execvpe");
  return execAfterClose(file, true, [&] { return real(file, argv, envp); });
}

GPURR_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  static const auto real = next<int (*)(int, char* const*, char* const*)>("fexecve");
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  return execAfterClose(self.c_str(), false, [&] { return real(fd, argv, envp); });
}

GPURR_EXPORT int execl(const char* path, const char* arg, ...) {
  va_list args;
  va_start(args, arg);
  std::vector<char*> argv = argvOf(arg, args);
  va_end(args);
  return execv(path, argv.data());
}

GPURR_EXPORT int execlp(const char* file, const char* arg, ...) {
  va_list args;
  va_start(args, arg);
  std::vector<char*> argv = argvOf(arg, args);
  va_end(args);
  return execvp(file, argv.data());
}

GPURR_EXPORT int execle(const char* path, const char* arg, ...) {
  va_list args;
  va_start(args, arg);
  char* const* envp = nullptr;
  std::vector<char*> argv = argvOf(arg, args, &envp);
  va_end(args);
  return execve(path, argv.data(), envp);
}

GPURR_EXPORT int kill(pid_t pid, int sig) noexcept {
  // Its own pid, or a process group it is in (0: its own; -pgid).
  if (pid == getpid() || pid == 0 || (pid < -1 && -pid == getpgrp())) gpurr::recorder::selfSignal(sig);
  return static_cast<int>(syscall(SYS_kill, pid, sig));
}

GPURR_EXPORT int raise(int sig) noexcept {
  gpurr::recorder::selfSignal(sig);
  const int error = pthread_kill(pthread_self(), sig);
  if (error == 0) return 0;
  errno = error;
  return -1;
}

GPURR_EXPORT void _exit(int status) { exitAfterClose(status); }

GPURR_EXPORT void _Exit(int status) noexcept { exitAfterClose(status); }
