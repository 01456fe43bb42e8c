// The thread's stack of library calls in progress (see library_call.h).
#include "recorder/library_call.h"

namespace gpurr::recorder {
namespace {

std::atomic<bool> gActive{false};
thread_local const LibraryCallScope* tInnermost = nullptr;

}  // namespace

bool libraryRecordingActive() { return gActive.load(std::memory_order_relaxed); }
void setLibraryRecordingActive(bool active) { gActive.store(active, std::memory_order_relaxed); }

LibraryCallScope::LibraryCallScope(std::vector<trace::Annotation> annotations)
    : annotations_(std::move(annotations)), outer_(tInnermost) {
  tInnermost = this;
}

LibraryCallScope::~LibraryCallScope() { tInnermost = outer_; }

void appendLibraryCallAnnotations(std::vector<trace::Annotation>& out) {
  std::vector<const LibraryCallScope*> frames;
  for (const LibraryCallScope* s = tInnermost; s != nullptr; s = s->outer_) frames.push_back(s);
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    out.insert(out.end(), (*it)->annotations_.begin(), (*it)->annotations_.end());
  }
}

}  // namespace gpurr::recorder
