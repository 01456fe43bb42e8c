// Finding the real definition of a wrapped entry point (see loaded_symbol.h).
#include "recorder/loaded_symbol.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>

#include "recorder/real_function.h"
#include "recorder/warn.h"

#include <string>
#include <vector>

namespace gpurr::recorder {
namespace {

// The object this code is in (the recorder, or a test program): its own
// exports are the wrappers, never the real function.
const void* ownBase() {
  static const void* base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<const void*>(&findLoadedSymbol), &info) != 0 ? info.dli_fbase : nullptr;
  }();
  return base;
}

bool definedElsewhere(const void* fn) {
  if (fn == nullptr) return false;
  Dl_info info{};
  return dladdr(fn, &info) == 0 || info.dli_fbase != ownBase();
}

// `name` in an object already loaded under `file` (and its dependencies), or
// nullptr. RTLD_NOLOAD never loads anything, and without RTLD_GLOBAL or
// RTLD_NOW it changes nothing about how the object was loaded.
void* findIn(const char* file, const char* name) {
  void* handle = dlopen(file, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* fn = dlsym(handle, name);
  dlclose(handle);  // drops the reference RTLD_NOLOAD took
  return definedElsewhere(fn) ? fn : nullptr;
}

int collectName(dl_phdr_info* info, size_t, void* data) {
  // The program itself (empty name) comes before the recorder in the global
  // scope: calls it could bind to its own definition never reach a wrapper.
  if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0')
    static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
  return 0;
}

}  // namespace

const std::vector<const char*>& librarySonames(WrappedLibrary library) {
  static const std::vector<const char*> cudnn = {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so.10"};
  static const std::vector<const char*> cublas = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11",
                                                  "libcublas.so.14"};
  static const std::vector<const char*> cublasLt = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11",
                                                    "libcublasLt.so.14"};
  static const std::vector<const char*> curand = {"libcurand.so.10", "libcurand.so.11"};
  static const std::vector<const char*> nccl = {"libnccl.so.2"};
  switch (library) {
    case WrappedLibrary::Cudnn: return cudnn;
    case WrappedLibrary::Cublas: return cublas;
    case WrappedLibrary::CublasLt: return cublasLt;
    case WrappedLibrary::Curand: return curand;
    case WrappedLibrary::Nccl: return nccl;
  }
  return curand;
}

void* findLoadedSymbol(const char* name, WrappedLibrary library) {
  if (void* fn = dlsym(RTLD_NEXT, name); definedElsewhere(fn)) return fn;
  for (const char* soname : librarySonames(library)) {
    if (void* fn = findIn(soname, name)) return fn;
  }
  // dlopen is not called under dl_iterate_phdr's lock: names first.
  std::vector<std::string> loaded;
  dl_iterate_phdr(collectName, &loaded);
  for (const std::string& file : loaded) {
    if (void* fn = findIn(file.c_str(), name)) return fn;
  }
  return nullptr;
}

void* loadMissing(const char* name, WrappedLibrary library) {
  static std::atomic_flag warned = ATOMIC_FLAG_INIT;
  const char* soname = librarySonames(library).front();
  void* lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  void* fn = lib != nullptr ? dlsym(lib, name) : nullptr;
  if (!warned.test_and_set()) {
    warnToStderr(fn != nullptr
                     ? fmt::format("{} was called but no loaded library defined it (the call found gpurr's wrapper "
                                   "by name); gpurr loaded {} to answer it, which the program does not do by itself",
                                   name, soname)
                     : fmt::format("{} was called but no loaded library defines it (the call found gpurr's wrapper "
                                   "by name) and {} cannot be loaded; exiting with status 127, as the dynamic linker "
                                   "does for an undefined function",
                                   name, soname));
  }
  if (fn == nullptr) _exit(127);
  return fn;
}

}  // namespace gpurr::recorder
