// The trace written before a signal or the program's own _exit ends the
// program (recorder/signal_flush.h): each case runs in a forked process,
// whose "flush" writes 'f' into a pipe ("finish", 'F'; the program writes
// other letters there), and checks how that process ended and what it wrote.
#include <catch2/catch.hpp>

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "recorder/signal_flush.h"

using namespace gpurr::recorder;
using namespace std::chrono_literals;

namespace {

int gPipe = -1;  // the forked process's end of the pipe

void mark(char c) {
  if (::write(gPipe, &c, 1) != 1) _exit(90);
}

void flushByte() { mark('f'); }

void flushSlowly() {  // longer than a handler holds its thread (kHeld)
  std::this_thread::sleep_for(kHeld + 1500ms);
  mark('f');
}

void flushNever() { std::this_thread::sleep_for(100s); }

void flushCrashing() { *static_cast<volatile int*>(nullptr) = 1; }

struct Ended {
  int status = 0;
  std::string marks;  // what the flush and the program wrote, in order
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
    for (int sig = 1; sig < NSIG; ++sig)
      if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);
    body();
    _exit(0);
  }
  ::close(fds[1]);
  Ended e;
  char buf[64];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) e.marks.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  REQUIRE(::waitpid(pid, &e.status, 0) == pid);
  e.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return e;
}

bool killedBy(const Ended& e, int sig) { return WIFSIGNALED(e.status) && WTERMSIG(e.status) == sig; }

}  // namespace

TEST_CASE("a signal sent to end the program is written first and then ends it as it would have") {
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGALRM}) {
    const Ended e = runForked([sig] {
      REQUIRE(flushOnEndingSignals(flushByte, 5s));
      ::kill(::getpid(), sig);
      ::kill(::getpid(), sig);  // twice: a job step's signal under gpurr record
      mark('r');                // never: the thread the signal reached runs no more of the program
      std::this_thread::sleep_for(30s);
      _exit(80);
    });
    INFO("signal " << sig);
    CHECK(killedBy(e, sig));
    CHECK(e.marks == "f");
  }
}

TEST_CASE("a thread held by a signal never sees its sleep or poll end early") {
  // poll() and nanosleep() return EINTR when a handler returns, whatever
  // SA_RESTART says: the program would run on and exit by itself.
  for (const bool usePoll : {true, false}) {
    const Ended e = runForked([usePoll] {
      REQUIRE(flushOnEndingSignals([] {
        std::this_thread::sleep_for(50ms);
        mark('f');
      }, 5s));
      const pthread_t main = pthread_self();
      std::thread([main] {
        std::this_thread::sleep_for(100ms);
        pthread_kill(main, SIGTERM);
      }).detach();
      if (usePoll) {
        ::poll(nullptr, 0, 3000);
      } else {
        const timespec t{3, 0};
        ::nanosleep(&t, nullptr);
      }
      mark('r');
      _exit(0);
    });
    INFO((usePoll ? "poll" : "nanosleep"));
    CHECK(killedBy(e, SIGTERM));
    CHECK(e.marks == "f");
  }
}

TEST_CASE("a signal taken while the program exits by itself still ends it") {
  // The signal reaches another thread; the main thread exits meanwhile.
  const Ended e = runForked([] {
    REQUIRE(flushOnEndingSignals(flushSlowly, 5s));
    std::atexit(endIfSignalled);  // as the recorder's exit handler calls it once the trace is closed
    std::thread([] {
      pthread_kill(pthread_self(), SIGTERM);
      std::this_thread::sleep_for(30s);
    }).detach();
    std::this_thread::sleep_for(200ms);
    mark('x');
    std::exit(0);
  });
  CHECK(killedBy(e, SIGTERM));
  CHECK(e.marks.find('x') != std::string::npos);
}

TEST_CASE("a thread held longer than kHeld runs on and the program ends once the trace is written") {
  const Ended e = runForked([] {
    REQUIRE(flushOnEndingSignals(flushSlowly, 5s));
    ::raise(SIGTERM);
    mark('r');  // after kHeld: a lock it holds may be what the writing waits for
    std::this_thread::sleep_for(30s);
    _exit(80);
  });
  CHECK(killedBy(e, SIGTERM));
  CHECK(e.marks == "rf");
}

TEST_CASE("a fault is written first and then ends the program with its own signal") {
  const Ended segv = runForked([] {
    REQUIRE(flushOnEndingSignals(flushByte, 5s));
    *static_cast<volatile int*>(nullptr) = 1;
  });
  CHECK(killedBy(segv, SIGSEGV));
  CHECK(segv.marks == "f");
  const Ended abrt = runForked([] {
    REQUIRE(flushOnEndingSignals(flushByte, 5s));
    std::abort();
  });
  CHECK(killedBy(abrt, SIGABRT));
  CHECK(abrt.marks == "f");
  const Ended pipe = runForked([] {
    REQUIRE(flushOnEndingSignals(flushByte, 5s));
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    ::close(fds[0]);
    if (::write(fds[1], "x", 1) < 0) mark('e');  // EPIPE: the handler returned
    _exit(80);
  });
  CHECK(killedBy(pipe, SIGPIPE));
  CHECK(pipe.marks == "f");
}

TEST_CASE("faults in two threads at once are written once and end the program") {
  const Ended e = runForked([] {
    REQUIRE(flushOnEndingSignals(flushSlowly, 5s));
    std::atomic<int> ready{0};
    const auto crash = [&] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      *static_cast<volatile int*>(nullptr) = 1;
    };
    std::thread one(crash), two(crash);
    one.join();
    two.join();
  });
  CHECK(killedBy(e, SIGSEGV));
  CHECK(e.marks == "f");
}

TEST_CASE("a fault in the writing itself ends the program by the signal taken") {
  const Ended e = runForked([] {
    REQUIRE(flushOnEndingSignals(flushCrashing, 5s));
    ::raise(SIGTERM);
    std::this_thread::sleep_for(30s);
    _exit(80);
  });
  CHECK(killedBy(e, SIGTERM));
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
  CHECK(e.marks.empty());
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
  CHECK(e.marks.empty());  // neither the child nor its parent flushed
}

// The program's own _exit (recorder/ending_calls.cpp calls beforeExitCall,
// then the exit system call; here the test calls both).
void finishByte() { mark('F'); }

TEST_CASE("the program's own _exit has the trace closed first and keeps its status") {
  const Ended e = runForked([] {
    REQUIRE(flushOnEndingSignals(flushByte, 5s, finishByte));
    mark('p');
    beforeExitCall();
    _exit(4);
  });
  CHECK(WIFEXITED(e.status));
  CHECK(WEXITSTATUS(e.status) == 4);
  CHECK(e.marks == "pF");
}

TEST_CASE("an _exit in a process forked from the recorded one goes on at once") {
  // multiprocessing's and DataLoader's forked workers end with os._exit.
  const Ended e = runForked([] {
    REQUIRE(flushOnEndingSignals(flushByte, 5s, finishByte));
    const auto start = std::chrono::steady_clock::now();
    const pid_t child = ::fork();
    if (child == 0) {
      beforeExitCall();
      _exit(6);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    const bool prompt = std::chrono::steady_clock::now() - start < 2s;
    _exit(WIFEXITED(status) && WEXITSTATUS(status) == 6 && prompt ? 7 : 81);
  });
  CHECK(WIFEXITED(e.status));
  CHECK(WEXITSTATUS(e.status) == 7);
  CHECK(e.marks.empty());  // the child closed nothing: the trace is its parent's
}

TEST_CASE("an _exit whose closing waits on a lock the caller holds goes on after the wait") {
  // As a signal handler that calls _exit in a thread the recorder's lock
  // was taken in: the closing cannot finish, the exit still happens.
  static std::mutex held;
  const Ended e = runForked([] {
    REQUIRE(flushOnEndingSignals(flushByte, 300ms, [] {
      std::lock_guard lock(held);
      mark('F');
    }));
    held.lock();
    beforeExitCall();
    _exit(4);
  });
  CHECK(WIFEXITED(e.status));
  CHECK(WEXITSTATUS(e.status) == 4);
  CHECK(e.marks.empty());
  CHECK(e.took < 5s);
}

TEST_CASE("a signal that arrives while an _exit closes the trace is absorbed: the exit's status wins") {
  // To the exiting thread and to another one, which runs on after kHeld.
  for (const bool toExiting : {true, false}) {
    const Ended e = runForked([toExiting] {
      REQUIRE(flushOnEndingSignals(flushByte, 5s, [] {
        std::this_thread::sleep_for(500ms);
        mark('F');
      }));
      const pthread_t main = pthread_self();
      std::thread([main, toExiting] {
        std::this_thread::sleep_for(100ms);
        pthread_kill(toExiting ? main : pthread_self(), SIGTERM);
        mark('r');
        std::this_thread::sleep_for(30s);
      }).detach();
      beforeExitCall();
      _exit(4);
    });
    INFO((toExiting ? "to the exiting thread" : "to another thread"));
    CHECK(WIFEXITED(e.status));
    CHECK(WEXITSTATUS(e.status) == 4);
    CHECK(e.marks.find('F') != std::string::npos);
  }
}

TEST_CASE("an _exit after a signal was taken waits for the signal to end the program") {
  const Ended e = runForked([] {
    REQUIRE(flushOnEndingSignals(flushSlowly, 5s, finishByte));
    std::thread([] {
      ::raise(SIGTERM);  // held in the handler while the slow flush runs
      std::this_thread::sleep_for(30s);
    }).detach();
    std::this_thread::sleep_for(100ms);
    beforeExitCall();
    _exit(4);
  });
  CHECK(killedBy(e, SIGTERM));
  CHECK(e.marks == "f");
}
