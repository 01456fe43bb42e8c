// The numbers FORMAT.md states are the ones the code uses.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "tests/unit/test_util.h"
#include "trace_format/events.h"
#include "trace_format/hash.h"
#include "trace_format/hash_primitives.h"
#include "trace_format/trace.h"

using namespace gpurr;
namespace fs = std::filesystem;

namespace {

std::string formatMd() {
  std::ifstream in(fs::path(GPURR_SOURCE_DIR) / "trace_format/FORMAT.md");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("FORMAT.md states the code's constants") {
  const std::string spec = formatMd();
  REQUIRE_FALSE(spec.empty());
  CHECK_THAT(spec, Catch::Contains(fmt::format("# The gpurr trace format, version {}", trace::kFormatVersion)));
  CHECK_THAT(spec, Catch::Contains(fmt::format("`gpurr-trace {}`", trace::kFormatVersion)));
  CHECK_THAT(spec, Catch::Contains("`0x4b4c425252555047`"));
  CHECK_THAT(spec, Catch::Contains(fmt::format("chunks of {} bytes", hash::kChunkBytes)));
  CHECK_THAT(spec, Catch::Contains(fmt::format("It has {} lanes", hash::kLanes)));
  CHECK_THAT(spec, Catch::Contains(fmt::format("K0 = {:#018x}", hash::kK0)));
  CHECK_THAT(spec, Catch::Contains(fmt::format("K1 = {:#018x}", hash::kK1)));
  CHECK_THAT(spec, Catch::Contains(fmt::format("K2 = {:#018x}", hash::kK2)));
  CHECK_THAT(spec, Catch::Contains(fmt::format("K3 = {:#018x}", hash::kK3)));
  CHECK_THAT(spec, Catch::Contains("xor rotl(s, 29)"));
}

TEST_CASE("FORMAT.md's hash examples are right") {
  auto pattern = [](size_t n) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + 7 + (i >> 8));
    return v;
  };
  const std::string spec = formatMd();
  CHECK_THAT(spec, Catch::Contains(fmt::format("n = 0 gives `{:016x}`", hash::hashBuffer(pattern(0)))));
  CHECK_THAT(spec, Catch::Contains(fmt::format("n = 65536 gives `{:016x}`", hash::hashBuffer(pattern(65536)))));
}

TEST_CASE("a block header is 64 bytes laid out as FORMAT.md says") {
  gpurr::testing::TempDir tmp;
  {
    trace::TraceWriter w(tmp / "t.gpurr", trace::Header{});
    w.append(trace::Event{3, 9, 0, trace::Sync{}});
  }
  const auto events = gpurr::testing::readFile(tmp / "t.gpurr/events");
  REQUIRE(events.size() > 64);
  uint32_t table[2];
  std::memcpy(table, events.data(), 8);
  CHECK(table[0] == 0);
  CHECK(table[1] == 7);
  CHECK(std::string(events.begin() + 16, events.begin() + 24) == "GPURRBLK");
  // The zstd frame starts right after, with its magic number.
  CHECK(events[64] == 0x28);
  CHECK(events[65] == 0xb5);
  CHECK(events[66] == 0x2f);
  CHECK(events[67] == 0xfd);
  const auto version = gpurr::testing::readFile(tmp / "t.gpurr/version");
  CHECK(std::string(version.begin(), version.end()) == "gpurr-trace 1\n");
}

TEST_CASE("trace files are created 0600 and its folders 0700, whatever the umask") {
  for (const mode_t mask : {mode_t{0}, mode_t{022}, mode_t{0277}}) {
    gpurr::testing::TempDir tmp;
    const fs::path dir = tmp / "t.gpurr";
    const mode_t old = ::umask(mask);
    {
      trace::TraceWriter w(dir, trace::Header{});
      const std::vector<uint8_t> bytes(100, 7);
      w.putBlob(bytes);
      w.append(trace::Event{0, 1, 0, trace::Sync{}});
      w.close();
    }
    ::umask(old);
    INFO("umask " << std::oct << mask);
    size_t files = 0, dirs = 0;
    auto mode = [](const fs::path& p) {
      struct stat st {};
      REQUIRE(::stat(p.c_str(), &st) == 0);
      return st.st_mode & 07777;
    };
    CHECK(mode(dir) == 0700);
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      INFO(e.path().string());
      if (e.is_directory()) {
        CHECK(mode(e.path()) == 0700);
        ++dirs;
      } else {
        CHECK(mode(e.path()) == 0600);
        ++files;
      }
    }
    CHECK(dirs == 2);    // blobs/ and blobs/<xx>/
    CHECK(files == 6);   // version, header, events, index, checksums, one blob
    trace::TraceReader r(dir);
    CHECK(r.eventCount() == 1);
  }
}

TEST_CASE("FORMAT.md's hash vectors with a partial word and a partial chunk are the code's") {
  auto pattern = [](size_t n) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + 7 + (i >> 8));
    return v;
  };
  // Rows "| n | what | `chunk` `chunk` | `digest` |" of §8's table.
  const std::string spec = formatMd();
  const std::regex row(R"(\n\| (\d+) \| [^|]+ \| ((?:`[0-9a-f]{16}` ?)+) \| `([0-9a-f]{16})` \|)");
  size_t rows = 0;
  bool partialWord = false, partialChunk = false;
  for (auto it = std::sregex_iterator(spec.begin(), spec.end(), row); it != std::sregex_iterator(); ++it) {
    const size_t n = std::stoul((*it)[1].str());
    INFO("n = " << n);
    const auto bytes = pattern(n);
    std::string chunks;
    for (uint64_t c : hash::chunkDigests(bytes)) chunks += fmt::format("`{:016x}` ", c);
    CHECK((*it)[2].str() + " " == chunks);
    CHECK((*it)[3].str() == fmt::format("{:016x}", hash::hashBuffer(bytes)));
    partialWord = partialWord || n % hash::kWordBytes != 0;
    partialChunk = partialChunk || (n > hash::kChunkBytes && n % hash::kChunkBytes != 0);
    ++rows;
  }
  CHECK(rows >= 3);
  CHECK(partialWord);
  CHECK(partialChunk);
}

TEST_CASE("FORMAT.md lists the compatVersions up to the code's") {
  const std::string all = formatMd();
  const size_t table = all.find("| compatVersion | added |");
  REQUIRE(table != std::string::npos);
  const std::string spec = all.substr(table, all.find("\n\n", table) - table);
  for (uint32_t v = 1; v <= trace::kCompatVersion; ++v) {
    CHECK_THAT(spec, Catch::Contains(fmt::format("\n| {} | ", v)));
  }
  CHECK_THAT(spec, !Catch::Contains(fmt::format("\n| {} | ", trace::kCompatVersion + 1)));
}
