// Loads libgpurr_recorder.so as the driver would (dlopen + InitializeInjection)
// and checks that it exports only the entry point, returns success, and
// explains in one "gpurr: warning: " line why it records nothing when it
// cannot. Without a GPU this is all that can run of the injection path.
// With GATE_FILE, the recorder is held at its start (GPURR_START_GATE, as
// `gpurr record --start-gate` sets it): InitializeInjection must not return
// before another thread has created GATE_FILE.
//
//   injection_smoke LIBRARY EXPECTED_WARNING_TEXT [GATE_FILE]
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: injection_smoke LIBRARY EXPECTED_WARNING_TEXT [GATE_FILE]\n");
    return 2;
  }
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW)) {
    // With a driver the library would really record; tests/gpu covers that.
    dlclose(driver);
    std::printf("driver present: skipped\n");
    return 77;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
    return 1;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
  if (init == nullptr) {
    std::fprintf(stderr, "InitializeInjection is not exported\n");
    return 1;
  }
  if (dlsym(lib, "_ZN5gpurr8recorder12warnToStderrERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE") ||
      dlsym(lib, "_ZN5gpurr5trace11TraceWriterD1Ev")) {
    std::fprintf(stderr, "internal symbols are exported\n");
    return 1;
  }

  // The gate, opened by another thread a moment after the call began.
  std::atomic<bool> opened{false};
  std::thread opener;
  if (argc == 4) {
    unlink(argv[3]);
    setenv("GPURR_START_GATE", argv[3], 1);
    opener = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      opened = true;
      std::ofstream(argv[3]).close();
    });
  }

  // Capture stderr around the call.
  int fds[2];
  if (pipe(fds) != 0) return 1;
  const int saved = dup(2);
  dup2(fds[1], 2);
  const int result = init();
  const bool openedBefore = opened;
  if (opener.joinable()) opener.join();
  const int again = init();  // a second call must be harmless
  dup2(saved, 2);
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) text.append(buf, static_cast<size_t>(n));
  std::fputs(text.c_str(), stderr);

  if (argc == 4 && !openedBefore) {
    std::fprintf(stderr, "InitializeInjection returned before its gate %s existed\n", argv[3]);
    return 1;
  }
  if (result != 1 || again != 1) {
    std::fprintf(stderr, "InitializeInjection returned %d, then %d (expected 1)\n", result, again);
    return 1;
  }
  if (text.find(std::string("gpurr: warning: ") + argv[2]) == std::string::npos) {
    std::fprintf(stderr, "expected a warning containing \"%s\"\n", argv[2]);
    return 1;
  }
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  if (lines != 1) {
    std::fprintf(stderr, "expected exactly one warning line, got %zu\n", lines);
    return 1;
  }
  return 0;
}
