// The trace written before a signal ends the program (recorder/signal_flush.h):
// each case runs in a forked process, whose "flush" writes a byte into a
// pipe, and checks how that process ended and whether it flushed.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

#include "recorder/signal_flush.h"

using namespace gpurr::recorder;
using namespace std::chrono_literals;

namespace {

int gPipe = -1;  // the flush's end of the pipe, in the forked process

void flushByte() {
  const char b = 'f';
  if (::write(gPipe, &b, 1) != 1) _exit(90);
}

void flushNever() {
  std::this_thread::sleep_for(100s);
}

struct Ended {
  int status = 0;
  size_t flushes = 0;  // bytes the flushes wrote
  std::chrono::milliseconds took{};
};

// Runs body in a forked process, as a program with every signal's default
// action; returns how it ended.
Ended runForked(const std::function<void()>& body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    gPipe = fds[1];
    // As a program starts: Catch's own handlers (for its report of a crash) gone.
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
      ::signal(sig, SIG_DFL);
    body();
    _exit(0);
  }
  ::close(fds[1]);
  Ended e;
  char buf[16];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) e.flushes += static_cast<size_t>(n);
  ::close(fds[0]);
  REQUIRE(::waitpid(pid, &e.status, 0) == pid);
  e.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return e;
}

bool killedBy(const Ended& e, int sig) { return WIFSIGNALED(e.status) && WTERMSIG(e.status) == sig; }

}  // namespace

TEST_CASE("a signal sent to end the program is written first and then ends it as it would have") {
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) {
    const Ended e = runForked([sig] {
      REQUIRE(flushOnEndingSignals(flushByte, 5s));
      ::kill(::getpid(), sig);
      ::kill(::getpid(), sig);  // twice: a job step's signal under gpurr record
      std::this_thread::sleep_for(30s);
      _exit(80);
    });
    INFO("signal " << sig);
    CHECK(killedBy(e, sig));
    CHECK(e.flushes == 1);
  }
}

TEST_CASE("a fault is written first and then ends the program with its own signal") {
  const Ended segv = runForked([] {
    REQUIRE(flushOnEndingSignals(flushByte, 5s));
    *static_cast<volatile int*>(nullptr) = 1;
  });
  CHECK(killedBy(segv, SIGSEGV));
  CHECK(segv.flushes == 1);
  const Ended abrt = runForked([] {
    REQUIRE(flushOnEndingSignals(flushByte, 5s));
    std::abort();
  });
  CHECK(killedBy(abrt, SIGABRT));
  CHECK(abrt.flushes == 1);
}

TEST_CASE("a flush that never ends holds the program no longer than its wait") {
  const Ended term = runForked([] {
    REQUIRE(flushOnEndingSignals(flushNever, 300ms));
    ::kill(::getpid(), SIGTERM);
    std::this_thread::sleep_for(30s);
    _exit(80);
  });
  CHECK(killedBy(term, SIGTERM));
  CHECK(term.took < 10s);
  const Ended segv = runForked([] {
    REQUIRE(flushOnEndingSignals(flushNever, 300ms));
    *static_cast<volatile int*>(nullptr) = 1;
  });
  CHECK(killedBy(segv, SIGSEGV));
  CHECK(segv.took < 10s);
}

TEST_CASE("a signal the program handles or ignores itself is left to it") {
  const Ended e = runForked([] {
    ::signal(SIGTERM, SIG_IGN);
    REQUIRE(flushOnEndingSignals(flushByte, 5s));
    ::kill(::getpid(), SIGTERM);
    std::this_thread::sleep_for(200ms);
    _exit(7);  // still running: the signal was ignored
  });
  CHECK(WIFEXITED(e.status));
  CHECK(WEXITSTATUS(e.status) == 7);
  CHECK(e.flushes == 0);
}

TEST_CASE("a process forked from the recorded one takes a signal's default action at once") {
  const Ended e = runForked([] {
    REQUIRE(flushOnEndingSignals(flushByte, 5s));
    const pid_t child = ::fork();
    if (child == 0) {
      ::kill(::getpid(), SIGTERM);
      std::this_thread::sleep_for(30s);
      _exit(80);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    _exit(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM ? 7 : 81);
  });
  CHECK(WIFEXITED(e.status));
  CHECK(WEXITSTATUS(e.status) == 7);
  CHECK(e.flushes == 0);  // neither the child nor its parent flushed
}
