// The framework layer's part in ending a recording (framework_context.h):
// the recording finished at once where the layer ends the program without
// the interpreter's teardown (gpurr record --quick-exit), and written out
// where the program ends on Ctrl-C; the session's owner sets what each runs.
#include <atomic>

#include "recorder/framework_context.h"

namespace gpurr::recorder::framework {
namespace {
std::atomic<void (*)()> finishRecording_{nullptr}, flushRecording_{nullptr};
}  // namespace

void setFinishRecording(void (*finish)()) { finishRecording_.store(finish); }

void finishRecording() {
  if (void (*finish)() = finishRecording_.exchange(nullptr)) finish();
}

void setFlushRecording(void (*flush)()) { flushRecording_.store(flush); }

void flushRecording() {
  if (void (*flush)() = flushRecording_.load()) flush();
}

}  // namespace gpurr::recorder::framework
