// The signals that end a program by default and that gpurr's recorder takes
// first, where their action is still the default when recording begins:
// what it holds is written into the trace before the program ends
// (recorder/signal_flush.h), and `gpurr record` says so when one ended the
// command.
#pragma once

#include <signal.h>

#include <algorithm>
#include <iterator>

namespace gpurr {

inline constexpr int kEndingSignals[] = {SIGINT,  SIGTERM, SIGHUP,    SIGQUIT, SIGUSR1, SIGUSR2,
                                         SIGPIPE, SIGALRM, SIGVTALRM, SIGXCPU, SIGXFSZ};
inline constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS};

// Whether the recorder takes `sig` first (an ending signal or a fault).
inline bool recorderTakesSignal(int sig) {
  return std::ranges::find(kEndingSignals, sig) != std::end(kEndingSignals) ||
         std::ranges::find(kFaultSignals, sig) != std::end(kFaultSignals);
}

}  // namespace gpurr
