// The ELF reader that maps kernel names to modules. Run on this test's own
// executable (an ELF64 with a symbol table) and on damaged copies of it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "recorder/cubin_symbols.h"

using namespace gpurr::recorder;

extern "C" __attribute__((noinline, used)) int gpurr_cubin_symbols_probe(int x) { return x * 3; }

namespace {
std::vector<uint8_t> selfImage() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST_CASE("function symbols are read from an ELF image", "[recorder][cubin]") {
  const std::vector<uint8_t> image = selfImage();
  const CubinInfo info = readCubin(image);
  CHECK(info.isElf);
  CHECK(std::find(info.functions.begin(), info.functions.end(), "gpurr_cubin_symbols_probe") != info.functions.end());
  CHECK(info.arch == 0);  // x86-64 e_flags carry no SM number
}

TEST_CASE("damaged images give no symbols and no crash", "[recorder][cubin]") {
  std::vector<uint8_t> image = selfImage();
  CHECK_FALSE(readCubin({}).isElf);
  CHECK_FALSE(readCubin(std::vector<uint8_t>(64, 0)).isElf);
  // Truncated anywhere, or with its section table offset corrupted.
  for (size_t cut : {size_t{64}, size_t{100}, image.size() / 2, image.size() - 1}) {
    const CubinInfo info = readCubin({image.data(), cut});
    CHECK(info.functions.size() <= readCubin(image).functions.size());
  }
  for (uint8_t v : {0x00, 0x7f, 0xff}) {
    std::vector<uint8_t> bad = image;
    std::fill(bad.begin() + 0x28, bad.begin() + 0x30, v);
    (void)readCubin(bad);
  }
  SUCCEED();
}
