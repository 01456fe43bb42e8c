// Keeps what was recorded when a signal ends the program. Without it a
// process killed by a signal (Slurm's SIGTERM at a job's time limit,
// torchrun's SIGTERM to the other ranks when one fails, `| head`'s SIGPIPE,
// a crash) loses what the recorder held: up to the last second, as with
// SIGKILL.
//
// For each signal below whose action is still the default when recording
// begins, the recorder takes the signal first: everything it holds is
// written into the trace (`flush`, as at Ctrl-C in a Python program), then
// the default action is put back and the signal taken ends the program as
// it would have: exit status, core dump and a fault's own siginfo (a
// hardware fault is left to happen again) included. The trace reads as a
// recording that did not end cleanly, cut where the program stopped.
//
// The handler stores the signal's number and wakes a thread of the
// recorder's own, which does the writing, and waits for it in the handler:
// the thread the signal reached runs none of the program's code meanwhile,
// as it would not have (a sleep or poll it was in is never seen to return
// early). An ending signal's handler waits kHeld at most: a thread held
// there may hold a lock the writing needs, so it then returns and runs on,
// and the recorder's thread ends the program once the trace is written,
// `wait` after the signal at most. A fault's handler waits `wait`. Any
// thread the same or another ending signal reaches meanwhile waits as well
// (a signal Slurm sends to a job step's processes reaches the program twice
// under `gpurr record`); the first signal ends the program. A fault in
// another thread meanwhile waits too, and ends the program with its own
// signal; a fault in the writing itself ends it with the signal taken. A
// process forked from the recorded one takes these signals' default action.
// A signal the program handles or ignores itself is never touched, and one
// it takes over later is its own; but where the program sends itself one
// of these signals with the default action in place (a handler that cleans
// up, puts the default back and raises the signal again: Python after an
// unhandled KeyboardInterrupt), the recorder takes it first, as one sent
// from outside (selfSignal, through the `kill` and `raise` that
// ending_calls.cpp exports for LD_PRELOAD).
//
//   ending: SIGINT SIGTERM SIGHUP SIGQUIT SIGUSR1 SIGUSR2 SIGPIPE SIGALRM
//           SIGVTALRM SIGXCPU SIGXFSZ
//   faults: SIGSEGV SIGBUS SIGFPE SIGILL SIGABRT SIGSYS
// (common/ending_signals.h, which `gpurr record` reads too).
#pragma once

#include <signal.h>

#include <chrono>

namespace gpurr::recorder {

// How long the thread an ending signal reached waits in the handler.
inline constexpr std::chrono::milliseconds kHeld{1000};

// Installs the handlers and starts the thread; at most once a process.
// Returns false, installing nothing, where the thread cannot start. With
// `finish` (the recording's end, as at the exit), the program's own `_exit`
// and `_Exit` have that thread run it first (beforeExitCall).
bool flushOnEndingSignals(void (*flush)(), std::chrono::milliseconds wait, void (*finish)() = nullptr);

// Called as the program ends its process without C's exit handlers (`_exit`,
// `_Exit`, Python's `os._exit`): the recorder's thread closes the trace
// with `finish`, as at the exit, and the caller waits for it (`wait` at
// most) before its exit goes on. Safe in a signal handler: the caller only
// waits, so a lock it holds costs the wait, never a hang. A signal that
// arrives meanwhile is absorbed (the exit would have come first; a thread
// it reaches waits kHeld at most); one taken before the exit ends the
// program, as it would have.
void beforeExitCall();
// Whether beforeExitCall would close a trace here: this is the recorded
// process, whose recording is under way (async-signal-safe).
bool closesAtExitCall();
// Whether beforeExitCall closed the trace of this process (an exec that
// then failed: the rest of the program goes unrecorded).
bool closedByExitCall();

// Called before the program sends `sig` to its own process (kill to its
// pid, raise): where the recorder took these signals and the action of
// `sig` is the default, its handler is put in place first.
void selfSignal(int sig);

// For the recording's end while the program still runs (its exit handlers):
// where a signal was taken, the program ends by it now, as it would have
// at once, instead of exiting with a status of its own.
void endIfSignalled();

// Blocks the ending signals in the calling thread for its lifetime, so that
// threads it starts (the trace thread, the writer's) never take one that
// the program's own threads could.
class EndingSignalsBlocked {
 public:
  EndingSignalsBlocked();
  ~EndingSignalsBlocked();
  EndingSignalsBlocked(const EndingSignalsBlocked&) = delete;
  EndingSignalsBlocked& operator=(const EndingSignalsBlocked&) = delete;

 private:
  sigset_t before_;  // the caller's mask
};

}  // namespace gpurr::recorder
