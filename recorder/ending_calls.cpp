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
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "recorder/signal_flush.h"

#define GPURR_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// The trace closed first (beforeExitCall), then the process ends.
[[noreturn]] void exitAfterClose(int status) {
  gpurr::recorder::beforeExitCall();
  for (;;) syscall(SYS_exit_group, status);
}

}  // namespace

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
