// interpose_real_check LIB local|global [reference]
//
// Loads LIB (interpose_real_calls.cpp, linked to the real cuBLAS, cuBLASLt,
// cuDNN and cuRAND) with dlopen, RTLD_LOCAL or RTLD_GLOBAL, as PyTorch loads
// its CUDA libraries, and has it call the entry points the recorder wraps.
// Run with the recorder preloaded (LD_PRELOAD): the calls must reach the
// wrappers, and what they return (and what the libraries' API logs saw) must
// equal what the same calls give without the preload, which this program
// finds by running itself again without LD_PRELOAD ("reference").
#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++failures;
  }
}

struct Output {
  std::string calls;
  std::string binding;
};

bool load(const char* lib, const char* mode, Output& out) {
  const int flags = RTLD_NOW | (std::strcmp(mode, "global") == 0 ? RTLD_GLOBAL : RTLD_LOCAL);
  void* handle = dlopen(lib, flags);
  if (handle == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", lib, dlerror());
    return false;
  }
  auto calls = reinterpret_cast<const char* (*)()>(dlsym(handle, "gpurrInterposeCalls"));
  auto binding = reinterpret_cast<const char* (*)()>(dlsym(handle, "gpurrInterposeBinding"));
  if (calls == nullptr || binding == nullptr) {
    std::fprintf(stderr, "%s lacks gpurrInterposeCalls / gpurrInterposeBinding\n", lib);
    return false;
  }
  out.calls = calls();
  out.binding = binding();
  return true;
}

std::string run(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  if (pclose(p) != 0) out += "(reference run failed)\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: interpose_real_check LIB local|global [reference]\n");
    return 2;
  }
  const char* lib = argv[1];
  const char* mode = argv[2];
  Output mine;
  if (argc > 3 && std::strcmp(argv[3], "reference") == 0) {
    if (!load(lib, mode, mine)) return 1;
    std::fputs(mine.calls.c_str(), stdout);
    return 0;
  }

  // The recorder must be preloaded, or nothing here tests it.
  Dl_info info{};
  void* exported = dlsym(RTLD_DEFAULT, "cudnnBackendExecute");
  check(exported != nullptr && dladdr(exported, &info) != 0 && info.dli_fname != nullptr &&
            std::strstr(info.dli_fname, "libgpurr_recorder") != nullptr,
        "cudnnBackendExecute is the recorder's wrapper (is it preloaded?)");
  if (!load(lib, mode, mine)) return 1;

  // Every call of the library must reach the wrappers...
  std::istringstream binding(mine.binding);
  for (std::string name, object; binding >> name >> object;)
    check(object.find("libgpurr_recorder") != std::string::npos,
          name + " from " + lib + " binds to " + object + ", not to the recorder");

  // ...and give what it gives without them.
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  check(n > 0, "/proc/self/exe");
  unsetenv("LD_PRELOAD");
  const std::string reference = run(std::string("'") + self + "' '" + lib + "' " + mode + " reference");
  std::printf("with the recorder preloaded (%s):\n%s\nwithout:\n%s", mode, mine.calls.c_str(), reference.c_str());
  check(!reference.empty() && mine.calls == reference,
        "the calls give the same statuses, and reach the libraries, with and without the recorder");
  return failures == 0 ? 0 : 1;
}
