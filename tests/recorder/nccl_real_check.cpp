// nccl_real_check LIBNCCL local|global
//
// Loads the real libnccl.so.2 with dlopen, RTLD_LOCAL (as PyTorch's
// libtorch_cuda.so brings it in) or RTLD_GLOBAL, and calls the entry points
// the recorder wraps with a null communicator, once through the name the
// program would bind to (the recorder's wrapper, preloaded) and once
// straight into the library: the wrapper must be the one reached by name,
// find the real function however the library was loaded, and return the
// same status. No GPU is needed: NCCL refuses a null communicator before it
// touches a device.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++failures;
  }
}

using Result = int;  // ncclResult_t
using Stream = void*;

template <typename Fn, typename... Args>
void compare(void* lib, const char* name, Args... args) {
  auto wrapper = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
  auto real = reinterpret_cast<Fn>(dlsym(lib, name));
  check(wrapper != nullptr && real != nullptr, std::string(name) + ": defined");
  if (wrapper == nullptr || real == nullptr) return;
  Dl_info info{};
  check(dladdr(reinterpret_cast<void*>(wrapper), &info) != 0 && info.dli_fname != nullptr &&
            std::strstr(info.dli_fname, "gpurr_recorder") != nullptr,
        std::string(name) + ": the name binds to the recorder's wrapper");
  const Result viaWrapper = wrapper(args...);
  const Result direct = real(args...);
  std::printf("%s: %d (wrapper) %d (library)\n", name, viaWrapper, direct);
  check(viaWrapper == direct, std::string(name) + ": the wrapper returns the library's status");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: nccl_real_check LIBNCCL local|global\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | (std::strcmp(argv[2], "global") == 0 ? RTLD_GLOBAL : RTLD_LOCAL));
  if (lib == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
    return 1;
  }
  void* comm = nullptr;
  char buf[64] = {};
  const int dtype = 7, sum = 0;  // ncclFloat32, ncclSum
  Stream stream = nullptr;
  compare<Result (*)(const void*, void*, size_t, int, int, void*, Stream)>(lib, "ncclAllReduce", buf, buf, 4,
                                                                           dtype, sum, comm, stream);
  compare<Result (*)(const void*, void*, size_t, int, int, void*, Stream)>(lib, "ncclReduceScatter", buf, buf, 4,
                                                                           dtype, sum, comm, stream);
  compare<Result (*)(const void*, void*, size_t, int, void*, Stream)>(lib, "ncclAllGather", buf, buf, 4, dtype, comm,
                                                                      stream);
  compare<Result (*)(const void*, void*, size_t, int, int, void*, Stream)>(lib, "ncclBroadcast", buf, buf, 4, dtype,
                                                                           0, comm, stream);
  compare<Result (*)(void*, size_t, int, int, void*, Stream)>(lib, "ncclBcast", buf, 4, dtype, 0, comm, stream);
  compare<Result (*)(const void*, void*, size_t, int, int, int, void*, Stream)>(lib, "ncclReduce", buf, buf, 4, dtype,
                                                                                sum, 0, comm, stream);
  compare<Result (*)(const void*, void*, size_t, int, void*, Stream)>(lib, "ncclAlltoAll", buf, buf, 4, dtype, comm,
                                                                      stream);
  compare<Result (*)(const void*, void*, size_t, int, int, void*, Stream)>(lib, "ncclGather", buf, buf, 4, dtype, 0,
                                                                           comm, stream);
  compare<Result (*)(const void*, void*, size_t, int, int, void*, Stream)>(lib, "ncclScatter", buf, buf, 4, dtype, 0,
                                                                           comm, stream);
  compare<Result (*)(const void*, size_t, int, int, void*, Stream)>(lib, "ncclSend", buf, 4, dtype, 1, comm, stream);
  compare<Result (*)(void*, size_t, int, int, void*, Stream)>(lib, "ncclRecv", buf, 4, dtype, 1, comm, stream);
  compare<Result (*)()>(lib, "ncclGroupStart");
  compare<Result (*)()>(lib, "ncclGroupEnd");
  compare<Result (*)()>(lib, "ncclGroupEnd");  // without a start: an error, the same one
  void* newcomm = nullptr;
  compare<Result (*)(void*, int, int, void**, void*)>(lib, "ncclCommSplit", comm, 0, 0, &newcomm, nullptr);
  void* comms[1] = {};
  compare<Result (*)(void**, int, const int*)>(lib, "ncclCommInitAll", comms, 0, nullptr);  // no devices
  compare<Result (*)(void*)>(lib, "ncclCommDestroy", comm);
  compare<Result (*)(void*)>(lib, "ncclCommAbort", comm);
  // Entry points that need a device or a peer (ncclCommInitRank*), or a
  // communicator (ncclCommShrink reads a null one), are only resolved, not
  // called.
  for (const char* name :
       {"ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitRankScalable", "ncclCommShrink"}) {
    void* wrapper = dlsym(RTLD_DEFAULT, name);
    Dl_info info{};
    check(wrapper != nullptr && dladdr(wrapper, &info) != 0 && std::strstr(info.dli_fname, "gpurr_recorder"),
          std::string(name) + ": the name binds to the recorder's wrapper");
    check(dlsym(lib, name) != nullptr && dlsym(lib, name) != wrapper, std::string(name) + ": the library defines it");
  }
  if (failures == 0) std::printf("all NCCL wrappers forward to %s (%s)\n", argv[1], argv[2]);
  return failures == 0 ? 0 : 1;
}
