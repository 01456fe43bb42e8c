// The trace written before a signal ends the program (see signal_flush.h).
// The handler uses only async-signal-safe calls: atomics, getpid,
// sigaction, raise, clock_gettime and futex system calls; no file
// descriptor of the recorder's can be closed or reused by the program.
#include "recorder/signal_flush.h"

#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "recorder/warn.h"

namespace gpurr::recorder {
namespace {

constexpr int kEnding[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
constexpr int kFaults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

void (*gFlush)() = nullptr;
std::chrono::milliseconds gWait{0};
pid_t gOwner = 0;
std::atomic<uint32_t> gTaken{0};  // the signal being handled; the thread waits while 0
std::atomic<uint32_t> gDone{0};   // 1 once the trace is written (or the wait is over)
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);

long futex(std::atomic<uint32_t>& word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op | FUTEX_PRIVATE_FLAG, value, timeout, nullptr, 0);
}

bool isFault(int sig) {
  for (int f : kFaults)
    if (f == sig) return true;
  return false;
}

// The default action back, and the signal again: it is blocked while its
// handler runs, so it ends the program as soon as the handler returns.
void endWithDefault(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);
}

int64_t nowNs() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// A fault's thread waits here for the trace to be written, gWait at most.
void awaitWritten() {
  const int64_t end = nowNs() + std::chrono::nanoseconds(gWait).count();
  for (int64_t left = end - nowNs(); gDone.load() == 0 && left > 0; left = end - nowNs()) {
    const timespec t{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
    futex(gDone, FUTEX_WAIT, 0, &t);
  }
}

void onSignal(int sig, siginfo_t*, void*) {
  const int saved = errno;
  uint32_t none = 0;
  if (getpid() != gOwner) {
    endWithDefault(sig);  // a forked process: the thread that writes is the parent's
  } else if (gTaken.compare_exchange_strong(none, static_cast<uint32_t>(sig))) {
    futex(gTaken, FUTEX_WAKE, 1, nullptr);
    if (isFault(sig)) {
      awaitWritten();
      endWithDefault(sig);
    }
  } else if (isFault(sig)) {
    endWithDefault(sig);  // a fault while the trace is written, perhaps in the writing itself
  }
  // An ending signal while the trace is written: the first one ends the program.
  errno = saved;
}

// Runs gFlush on a thread of its own, so that a flush stuck on a lock still
// lets the program end after gWait. Returns whether it ended in time.
bool flushWithin() {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto state = std::make_shared<State>();
  try {
    std::thread([state] {
      gFlush();
      std::lock_guard lock(state->mu);
      state->done = true;
      state->cv.notify_all();
    }).detach();
  } catch (const std::system_error&) {
    gFlush();
    return true;
  }
  std::unique_lock lock(state->mu);
  return state->cv.wait_for(lock, gWait, [&] { return state->done; });
}

void writeThenEnd() {
  uint32_t sig = 0;
  while ((sig = gTaken.load()) == 0) futex(gTaken, FUTEX_WAIT, 0, nullptr);
  if (!flushWithin()) {
    const int64_t ms = gWait.count();
    warnToStderr("what was recorded could not be written within " +
                 (ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms") + " of SIG" +
                 sigabbrev_np(static_cast<int>(sig)) + "; the trace may lack the program's last second");
  }
  gDone.store(1);
  futex(gDone, FUTEX_WAKE, INT32_MAX, nullptr);
  if (!isFault(static_cast<int>(sig))) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(static_cast<int>(sig), &dfl, nullptr);
    kill(getpid(), static_cast<int>(sig));
  }
}

}  // namespace

bool flushOnEndingSignals(void (*flush)(), std::chrono::milliseconds wait) {
  static std::once_flag once;
  bool started = false;
  std::call_once(once, [&] {
    gFlush = flush;
    gWait = wait;
    gOwner = getpid();
    // The thread (and the one it writes on) blocks every signal: none is
    // delivered to it, and it never waits on itself.
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    try {
      std::thread thread(writeThenEnd);
      pthread_setname_np(thread.native_handle(), "gpurr-signals");
      thread.detach();
      started = true;
    } catch (const std::system_error&) {
    }
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    if (!started) return;
    struct sigaction ours {};
    ours.sa_sigaction = onSignal;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    const auto take = [&](int sig) {
      struct sigaction current {};
      if (sigaction(sig, nullptr, &current) != 0) return;
      const bool isDefault = (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_DFL;
      if (isDefault) sigaction(sig, &ours, nullptr);
    };
    for (int sig : kEnding) take(sig);
    for (int sig : kFaults) take(sig);
  });
  return started;
}

}  // namespace gpurr::recorder
