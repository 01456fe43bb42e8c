// The library call in progress on this thread (cuDNN, cuBLAS, cuBLASLt,
// cuRAND), set by the exported wrappers around the real functions and read by
// the launch callback, which runs on the same thread during the real call and
// attaches the call's annotations to every kernel launch it produces.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "trace_format/events.h"

namespace gpurr::recorder {

// Whether a recording session exists in this process. Wrappers skip all
// decoding (which calls back into the libraries) when it does not, and then
// only forward.
bool libraryRecordingActive();
void setLibraryRecordingActive(bool active);

// Whether a wrapped library call is in progress on this thread. A wrapper
// reached from inside another one (cuBLAS calling cublasLtMatmul, cuSOLVER
// calling cublasGemmEx) only forwards: the program's own call describes the
// launches, once.
bool libraryCallInProgress();

// The thread's current library call for its lifetime. Only the outermost
// scope counts: one made while another is in progress adds nothing.
class LibraryCallScope {
 public:
  explicit LibraryCallScope(std::vector<trace::Annotation> annotations);
  ~LibraryCallScope();
  LibraryCallScope(const LibraryCallScope&) = delete;
  LibraryCallScope& operator=(const LibraryCallScope&) = delete;

 private:
  std::vector<trace::Annotation> annotations_;
  bool outermost_;
  friend void appendLibraryCallAnnotations(std::vector<trace::Annotation>& out);
};

// Appends the annotations of the call in progress on this thread; nothing
// when none is.
void appendLibraryCallAnnotations(std::vector<trace::Annotation>& out);

}  // namespace gpurr::recorder
