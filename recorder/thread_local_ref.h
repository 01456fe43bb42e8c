// A thread_local's address taken once per function. In a shared library
// (libgpurr_recorder.so, loaded by dlopen) every access to a thread_local is
// a call to __tls_get_addr, and the compiler, which may compute the address
// again rather than keep it, calls it again at nearly every use: about 60
// calls a launch on the launch path, 6% of its instructions, before the hot
// functions took their thread_locals through this. The address behind the
// empty asm is opaque to the compiler: it keeps it (in a register or on the
// stack) instead of computing it again.
#pragma once

namespace gpurr::recorder {

template <typename T>
inline T& threadLocalRef(T& v) {
  T* p = &v;
  asm("" : "+r"(p));
  return *p;
}

}  // namespace gpurr::recorder
