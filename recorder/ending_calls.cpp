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
#include <alloca.h>
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
#include <charconv>
#include <string>

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
// result, with a word where it failed all the same. Anywhere but in the
// recorded process itself (a child forked or vforked to run another
// program, where only async-signal-safe calls may come before the exec)
// the exec is made at once.
template <typename Exec>
int execAfterClose(const char* file, bool search, Exec exec) {
  if (!gpurr::recorder::closesAtExitCall()) return exec();
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

// libc's exec functions, found as the library loads (before any fork: a
// child must not look symbols up).
struct Execs {
  int (*execve)(const char*, char* const*, char* const*);
  int (*execv)(const char*, char* const*);
  int (*execvp)(const char*, char* const*);
  int (*execvpe)(const char*, char* const*, char* const*);
  int (*fexecve)(int, char* const*, char* const*);
} real;

template <typename Fn>
void find(Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

__attribute__((constructor)) void findExecs() {
  find(real.execve, "execve");
  find(real.execv, "execv");
  find(real.execvp, "execvp");
  find(real.execvpe, "execvpe");
  find(real.fexecve, "fexecve");
}

// execl's arguments after `arg` up to its null pointer as an argv, built
// on the stack as glibc's execl does (no allocation: a vforked child may
// call it), then `envp` where it takes what follows them (execle), given
// to `exec`.
template <typename Exec>
int withArgv(const char* arg, va_list args, bool envp, Exec exec) {
  va_list count;
  va_copy(count, args);
  size_t n = 1;
  while (va_arg(count, char*) != nullptr) ++n;
  va_end(count);
  auto** argv = static_cast<char**>(alloca((n + 1) * sizeof(char*)));
  argv[0] = const_cast<char*>(arg);
  for (size_t i = 1; i <= n; ++i) argv[i] = va_arg(args, char*);
  char* const* env = envp ? va_arg(args, char* const*) : nullptr;
  return exec(argv, env);
}

}  // namespace

GPURR_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  return execAfterClose(path, false, [&] { return real.execve(path, argv, envp); });
}

GPURR_EXPORT int execv(const char* path, char* const argv[]) {
  return execAfterClose(path, false, [&] { return real.execv(path, argv); });
}

GPURR_EXPORT int execvp(const char* file, char* const argv[]) {
  return execAfterClose(file, true, [&] { return real.execvp(file, argv); });
}

GPURR_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return execAfterClose(file, true, [&] { return real.execvpe(file, argv, envp); });
}

GPURR_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  char self[32] = "/proc/self/fd/";
  std::to_chars(self + 14, self + sizeof(self) - 1, fd);
  return execAfterClose(self, false, [&] { return real.fexecve(fd, argv, envp); });
}

GPURR_EXPORT int execl(const char* path, const char* arg, ...) {
  va_list args;
  va_start(args, arg);
  const int result = withArgv(arg, args, false, [&](char** argv, char* const*) { return execv(path, argv); });
  va_end(args);
  return result;
}

GPURR_EXPORT int execlp(const char* file, const char* arg, ...) {
  va_list args;
  va_start(args, arg);
  const int result = withArgv(arg, args, false, [&](char** argv, char* const*) { return execvp(file, argv); });
  va_end(args);
  return result;
}

GPURR_EXPORT int execle(const char* path, const char* arg, ...) {
  va_list args;
  va_start(args, arg);
  const int result =
      withArgv(arg, args, true, [&](char** argv, char* const* envp) { return execve(path, argv, envp); });
  va_end(args);
  return result;
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
