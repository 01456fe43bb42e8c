// Runs the reader fuzz target once on every file given, or every file in the
// directories given, without libFuzzer: the normal build replays the corpus
// as a test, so a regression input fails it with any compiler. Like the
// fuzzer, it treats a huge allocation (over 1 GiB of address space) and a
// slow input (over 10 s) as failures.
//
//   gpurr_fuzz_replay CORPUS_DIR_OR_FILE...
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "tests/fuzz/reader_fuzz.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto& e : fs::directory_iterator(argv[i])) {
        if (e.is_regular_file()) inputs.push_back(e.path());
      }
    } else if (fs::is_regular_file(argv[i], ec)) {
      inputs.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 2;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "no inputs found in the corpus\n");
    return 1;
  }
  std::sort(inputs.begin(), inputs.end());
  // A reader that believes a size in a corrupt file fails here with
  // std::bad_alloc instead of taking the machine's memory.
  const rlimit memory{rlim_t{1} << 30, rlim_t{1} << 30};
  ::setrlimit(RLIMIT_AS, &memory);
  for (const fs::path& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in),
                                     std::istreambuf_iterator<char>()};
    // Named first, so that a crash shows which input caused it.
    std::fprintf(stderr, "%s\n", p.filename().c_str());
    ::alarm(10);  // SIGALRM ends the process: a hang is a failure
    gpurr::fuzz::runOne(bytes);
    ::alarm(0);
  }
  std::printf("%zu inputs read without a reader failure\n", inputs.size());
  return 0;
}
