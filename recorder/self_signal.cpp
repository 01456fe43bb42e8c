// `kill` and `raise`, exported for LD_PRELOAD (`gpurr record` preloads the
// recorder): a program that sends itself a signal that ends it, its action
// the default, has the recorder take it first (signal_flush.h, selfSignal),
// so what was recorded is written before the program ends. Python ends so
// after an unhandled KeyboardInterrupt: its atexit handlers, then the
// default action back for SIGINT and `kill(getpid(), SIGINT)`. Both are
// what glibc's are otherwise: the system call, errno set on failure.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "recorder/signal_flush.h"

extern "C" __attribute__((visibility("default"))) int kill(pid_t pid, int sig) {
  if (pid == getpid()) gpurr::recorder::selfSignal(sig);
  return static_cast<int>(syscall(SYS_kill, pid, sig));
}

extern "C" __attribute__((visibility("default"))) int raise(int sig) {
  gpurr::recorder::selfSignal(sig);
  const int error = pthread_kill(pthread_self(), sig);
  if (error == 0) return 0;
  errno = error;
  return -1;
}
