// How the recorder keeps its thread_locals: those with a destructor as
// EndsWithThread (below), and each one's address taken once per function
// (threadLocalRef). In a shared library (libgpurr_recorder.so, loaded by
// dlopen) every access to a thread_local is a call to __tls_get_addr, and
// the compiler, which may compute the address again rather than keep it,
// calls it again at nearly every use: about 60 calls a launch on the launch
// path, 6% of its instructions, before the hot functions took their
// thread_locals through this. The address behind the empty asm is opaque
// to the compiler: it keeps it (in a register or on the stack) instead of
// computing it again.
#pragma once

#include "recorder/reentrancy.h"

namespace gpurr::recorder {

// The recorder's thread_locals whose type has a destructor are kept as
// this: destroying one first marks the thread ended (ThreadFlags), and the
// dispatcher leaves that thread's later callbacks alone, so that none
// reaches a thread_local already destroyed (but the Hands of recycling.h,
// which give their things back to their shelf and may be used after it: a
// thing put in one then is never freed, which a flush at the thread's end
// may do). The main thread's are destroyed
// by exit() before C's exit handlers run, some of which (a library loaded
// after CUDA started unregistering its kernels) still call the driver.
template <typename T>
struct EndsWithThread : T {
  using T::T;
  using T::operator=;
  ~EndsWithThread() { threadFlags().ended = true; }
};

template <typename T>
inline T& threadLocalRef(T& v) {
  T* p = &v;
  asm("" : "+r"(p));
  return *p;
}

}  // namespace gpurr::recorder
