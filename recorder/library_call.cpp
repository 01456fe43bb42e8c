// The library call in progress on this thread (see library_call.h).
#include "recorder/library_call.h"

namespace gpurr::recorder {
namespace {

std::atomic<bool> gActive{false};
thread_local const LibraryCallScope* tCurrent = nullptr;

}  // namespace

bool libraryRecordingActive() { return gActive.load(std::memory_order_relaxed); }
void setLibraryRecordingActive(bool active) { gActive.store(active, std::memory_order_relaxed); }

bool libraryCallInProgress() { return tCurrent != nullptr; }

LibraryCallScope::LibraryCallScope(std::vector<trace::Annotation> annotations)
    : outermost_(tCurrent == nullptr) {
  if (!outermost_) return;
  annotations_ = std::move(annotations);
  tCurrent = this;
}

LibraryCallScope::~LibraryCallScope() {
  if (outermost_) tCurrent = nullptr;
}

void appendLibraryCallAnnotations(std::vector<trace::Annotation>& out) {
  const LibraryCallScope* current = tCurrent;
  if (current != nullptr) out.insert(out.end(), current->annotations_.begin(), current->annotations_.end());
}

}  // namespace gpurr::recorder
