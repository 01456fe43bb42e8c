// The real definition of an entry point the recorder also exports (the
// wrappers of interpose.cpp and nccl_interpose.cpp): found in the loaded
// library on first use (loaded_symbol.h), however the library was loaded.
#pragma once

#include <atomic>

#include "recorder/loaded_symbol.h"

namespace gpurr::recorder {

// A wrapped entry point reached when no loaded object defines it: only a
// lookup by name (dlsym(RTLD_DEFAULT)) that found the recorder's export can
// get here, as a program or library that links the library has it loaded.
// Without the recorder that name would not have resolved. A status made up
// here would be one the library never gave, so the library is loaded (its
// usual soname, RTLD_LOCAL) and answers the call itself, with a warning that
// the program now runs differently from how it runs without gpurr; if it
// cannot be loaded either, the process ends as the dynamic linker ends a
// program that calls an undefined function (status 127).
void* loadMissing(const char* name, WrappedLibrary library);

// The real definition of one entry point: looked for on first use, kept once
// found; a miss is never kept, as the library may be loaded later.
template <typename Fn>
class Real {
 public:
  constexpr Real(const char* name, WrappedLibrary library) : name_(name), library_(library) {}

  // The function, or nullptr while no loaded library defines it.
  Fn find() {
    Fn fn = fn_.load(std::memory_order_acquire);
    if (fn == nullptr) {
      fn = reinterpret_cast<Fn>(findLoadedSymbol(name_, library_));
      if (fn != nullptr) fn_.store(fn, std::memory_order_release);
    }
    return fn;
  }

  // The function a wrapper forwards to; never returns without one.
  Fn get() {
    Fn fn = find();
    if (fn == nullptr) {
      fn = reinterpret_cast<Fn>(loadMissing(name_, library_));
      fn_.store(fn, std::memory_order_release);
    }
    return fn;
  }

 private:
  std::atomic<Fn> fn_{nullptr};
  const char* name_;
  WrappedLibrary library_;
};

// The wrapper's `real`: the library's own `name`, of the same type.
#define GPURR_REAL(name, library)                                               \
  static Real<decltype(&::name)> realOf_##name{#name, WrappedLibrary::library}; \
  const auto real = realOf_##name.get()

}  // namespace gpurr::recorder
