// The trace written before a signal ends the program (see signal_flush.h).
// The handler uses only async-signal-safe calls: atomics, getpid, gettid,
// sigaction, clock_gettime, nanosleep, and the kill, tgkill and futex system calls;
// no file descriptor of the recorder's can be closed or reused by the
// program.
#include "recorder/signal_flush.h"

#include <linux/futex.h>
#include <pthread.h>
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

#include "common/ending_signals.h"
#include "recorder/warn.h"

namespace gpurr::recorder {
namespace {

constexpr const auto& kEnding = kEndingSignals;
constexpr const auto& kFaults = kFaultSignals;

std::atomic<void (*)()> gFlush{nullptr};   // set once the handlers are installed
std::atomic<void (*)()> gFinish{nullptr};  // for the program's own _exit; null: none
std::chrono::milliseconds gWait{0};
pid_t gOwner = 0;
std::atomic<uint32_t> gTaken{0};  // the signal taken, or kExitCall; the thread waits while 0
std::atomic<uint32_t> gDone{0};   // 1 once the trace is written (or the wait is over)
std::atomic<pid_t> gWriters[2];   // the recorder's thread and the one it writes on
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
// gTaken's value for the program's own _exit: no signal's number.
constexpr uint32_t kExitCall = 1u << 16;
static_assert(kExitCall > NSIG);

long futex(std::atomic<uint32_t>& word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op | FUTEX_PRIVATE_FLAG, value, timeout, nullptr, 0);
}

void onSignal(int sig, siginfo_t* info, void*);

bool isFault(int sig) {
  for (int f : kFaults)
    if (f == sig) return true;
  return false;
}

sigset_t endingSet() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kEnding) sigaddset(&set, sig);
  return set;
}

bool isOurs(int sig) {  // one of the signals this module takes
  for (int s : kEnding)
    if (s == sig) return true;
  return isFault(sig);
}

// The handler this module installs.
struct sigaction ourAction() {
  struct sigaction ours {};
  ours.sa_sigaction = onSignal;
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&ours.sa_mask);
  return ours;
}

// Installs the handler for `sig` where its action is the default.
void takeIfDefault(int sig) {
  struct sigaction current {};
  if (sigaction(sig, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_DFL) {
    const struct sigaction ours = ourAction();
    sigaction(sig, &ours, nullptr);
  }
}

void restoreDefault(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
}

// The default action back, and `sig` sent to the whole process: it ends the
// program from whichever thread does not block it.
void endProcessBy(int sig) {
  restoreDefault(sig);
  syscall(SYS_kill, getpid(), sig);
}

// The default action back, and the signal again. A fault the hardware
// raised (si_code > 0) happens again once the handler returns, with its own
// siginfo for the core dump; any other signal is sent again, blocked until
// the handler returns.
void endWithDefault(int sig, const siginfo_t* info) {
  restoreDefault(sig);
  const bool again = (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL) && info != nullptr &&
                     info->si_code > 0;
  if (!again) syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig);
}

int64_t nowNs() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// Waits for the trace to be written, `wait` at most; whether it was.
bool awaitWritten(std::chrono::milliseconds wait) {
  const int64_t end = nowNs() + std::chrono::nanoseconds(wait).count();
  for (int64_t left = end - nowNs(); gDone.load() == 0 && left > 0; left = end - nowNs()) {
    const timespec t{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
    futex(gDone, FUTEX_WAIT, 0, &t);
  }
  return gDone.load() != 0;
}

bool isWriter(pid_t tid) { return gWriters[0].load() == tid || gWriters[1].load() == tid; }

void onSignal(int sig, siginfo_t* info, void*) {
  const int saved = errno;
  if (getpid() != gOwner) {
    endWithDefault(sig, info);  // a forked process: the thread that writes is the parent's
    errno = saved;
    return;
  }
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (isWriter(tid)) {
    // A fault in the writing itself (the ending signals are blocked there):
    // the program ends by the signal taken, from another thread.
    const int taken = static_cast<int>(gTaken.load());
    if (taken != 0 && taken != sig && taken != static_cast<int>(kExitCall)) {
      endProcessBy(taken);
      const timespec second{1, 0};
      for (int i = 0; i < 5; ++i) nanosleep(&second, nullptr);
    }
    endWithDefault(sig, info);
    errno = saved;
    return;
  }
  uint32_t none = 0;
  const bool first = gTaken.compare_exchange_strong(none, static_cast<uint32_t>(sig));
  if (first) futex(gTaken, FUTEX_WAKE, 1, nullptr);
  const int taken = static_cast<int>(gTaken.load());
  if (taken == static_cast<int>(kExitCall)) {
    // The program is ending by its own _exit, which would have come first:
    // the signal is absorbed. The thread waits for the trace to be closed,
    // kHeld at most (it may hold a lock the close needs), then runs on
    // until the exit.
    awaitWritten(kHeld);
  } else if (isFault(sig)) {
    awaitWritten(gWait);
    endWithDefault(sig, info);
  } else if (isFault(taken)) {
    awaitWritten(gWait);  // the faulting thread ends the program, with its own siginfo
  } else if (awaitWritten(kHeld)) {
    // The first signal ends the program, from whichever thread it reached.
    endWithDefault(taken, first ? info : nullptr);
  }
  // Otherwise the thread runs on: the recorder's thread ends the program.
  errno = saved;
}

// Runs `write` (gFlush or gFinish) on a thread of its own, so that one
// stuck on a lock still lets the program end after gWait. Returns whether
// it ended in time.
bool writeWithin(void (*write)()) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto state = std::make_shared<State>();
  try {
    std::thread([state, write] {
      gWriters[1].store(static_cast<pid_t>(syscall(SYS_gettid)));
      write();
      std::lock_guard lock(state->mu);
      state->done = true;
      state->cv.notify_all();
    }).detach();
  } catch (const std::system_error&) {
    write();
    return true;
  }
  std::unique_lock lock(state->mu);
  return state->cv.wait_for(lock, gWait, [&] { return state->done; });
}

void writeThenEnd() {
  gWriters[0].store(static_cast<pid_t>(syscall(SYS_gettid)));
  uint32_t taken = 0;
  while ((taken = gTaken.load()) == 0) futex(gTaken, FUTEX_WAIT, 0, nullptr);
  const bool exitCall = taken == kExitCall;
  const int sig = static_cast<int>(taken);
  if (!writeWithin(exitCall ? gFinish.load() : gFlush.load())) {
    const int64_t ms = gWait.count();
    warnToStderr("what was recorded could not be written within " +
                 (ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms") + " of " +
                 (exitCall ? std::string("the program's _exit") : std::string("SIG") + sigabbrev_np(sig)) +
                 "; the trace may lack the program's last second");
  }
  gDone.store(1);
  futex(gDone, FUTEX_WAKE, INT32_MAX, nullptr);
  // A handler that returned (or never waited): the program ends here. An
  // exit call ends it itself.
  if (!exitCall && !isFault(sig)) {
    endProcessBy(sig);
  }
}

}  // namespace

EndingSignalsBlocked::EndingSignalsBlocked() {
  const sigset_t ending = endingSet();
  pthread_sigmask(SIG_BLOCK, &ending, &before_);
}

EndingSignalsBlocked::~EndingSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &before_, nullptr); }

bool flushOnEndingSignals(void (*flush)(), std::chrono::milliseconds wait, void (*finish)()) {
  static std::once_flag once;
  bool started = false;
  std::call_once(once, [&] {
    gWait = wait;
    gOwner = getpid();
    try {
      // The ending signals are never delivered to the recorder's thread or
      // the one it writes on (it would wait on itself); a fault there still
      // reaches the handler.
      EndingSignalsBlocked blocked;
      std::thread thread(writeThenEnd);
      pthread_setname_np(thread.native_handle(), "gpurr-signals");
      thread.detach();
      started = true;
    } catch (const std::system_error&) {
    }
    if (!started) return;
    gFinish.store(finish);
    gFlush.store(flush);
    for (int sig : kEnding) takeIfDefault(sig);
    for (int sig : kFaults) takeIfDefault(sig);
  });
  return started;
}

void selfSignal(int sig) {
  if (gFlush.load() == nullptr || !isOurs(sig) || gTaken.load() != 0 || getpid() != gOwner) return;
  takeIfDefault(sig);
}

void beforeExitCall() {
  if (gFinish.load() == nullptr || getpid() != gOwner || isWriter(static_cast<pid_t>(syscall(SYS_gettid)))) return;
  uint32_t none = 0;
  if (gTaken.compare_exchange_strong(none, kExitCall)) futex(gTaken, FUTEX_WAKE, 1, nullptr);
  awaitWritten(gWait);  // this exit's finish, or the flush of a signal taken before it
  if (gTaken.load() != kExitCall) {
    // A signal taken before this exit ends the program (its status, its
    // core dump), as it would have: the exit waits for that.
    const int64_t end = nowNs() + std::chrono::nanoseconds(kHeld + gWait).count();
    const timespec tick{0, 10'000'000};
    while (nowNs() < end) nanosleep(&tick, nullptr);
  }
}

bool closesAtExitCall() { return gFinish.load() != nullptr && getpid() == gOwner; }

bool closedByExitCall() { return gFinish.load() != nullptr && getpid() == gOwner && gTaken.load() == kExitCall; }

void endIfSignalled() {
  const int sig = static_cast<int>(gTaken.load());
  if (sig == 0 || sig == static_cast<int>(kExitCall) || getpid() != gOwner) return;
  endProcessBy(sig);
}

}  // namespace gpurr::recorder
