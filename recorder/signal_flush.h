// Keeps what was recorded when a signal ends the program. Without it a
// process killed by a signal (Slurm's SIGTERM at a job's time limit,
// torchrun's SIGTERM to the other ranks when one fails, a crash) loses what
// the recorder held: up to the last second, as with SIGKILL.
//
// For each signal below whose action is still the default when recording
// begins, the recorder takes the signal first: everything it holds is
// written into the trace (`flush`, as at Ctrl-C in a Python program), then
// the default action is put back and the signal sent again, so the program
// ends as it would have, exit status and core dump included. The trace reads
// as a recording that did not end cleanly, cut where the program stopped.
//
// The handler only stores the signal's number and wakes a thread of the
// recorder's own (every signal blocked there), which does the writing:
//   - SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, sent to end the
//     program: the handler returns at once, so that no thread waits in it
//     holding a lock the writing needs. The program runs on while the
//     trace is written (milliseconds; `wait` at most), and ends then. More
//     of these signals meanwhile are absorbed: a signal Slurm sends to a
//     job step's processes reaches the program twice under `gpurr record`.
//   - SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, faults the thread cannot run
//     on from: the thread waits in the handler, `wait` at most.
//   - A fault while the trace is written, or any of them in a process
//     forked from the recorded one, takes the default action at once.
// A signal the program handles or ignores itself is never touched, and one
// it takes over later is its own: nothing is installed over it.
#pragma once

#include <chrono>

namespace gpurr::recorder {

// Installs the handlers and starts the thread; at most once a process.
// Returns false, installing nothing, where the thread cannot start.
bool flushOnEndingSignals(void (*flush)(), std::chrono::milliseconds wait);

}  // namespace gpurr::recorder
