// A trace written by a newer gpurr (tests/format/future/make_future_trace.sh:
// a new kind of event and new fields, compatVersion 13) reads with this one:
// the unknown events are skipped with one warning per trace, the unknown
// fields are ignored (FORMAT.md §9).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdlib>

#include "tests/unit/test_util.h"
#include "trace_format/scan.h"
#include "trace_format/trace.h"

using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

fs::path writeFutureTrace(const gpurr::testing::TempDir& tmp) {
  const fs::path src = GPURR_SOURCE_DIR;
  const fs::path out = tmp / "future.gpurr";
  const std::string cmd = "bash " + (src / "tests/format/future/make_future_trace.sh").string() +
                          " " + src.string() + " " + out.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  return out;
}

// Collects the reader's warnings while alive.
struct Warnings {
  std::vector<std::string> seen;
  WarningSink previous;
  Warnings() : previous(setWarningSink([this](const std::string& w) { seen.push_back(w); })) {}
  ~Warnings() { setWarningSink(previous); }
};

}  // namespace

TEST_CASE("events of a kind a newer gpurr added are skipped, with one warning per trace") {
  gpurr::testing::TempDir tmp;
  const fs::path path = writeFutureTrace(tmp);
  Warnings warnings;
  TraceReader r(path);
  CHECK(r.header().compatVersion == 15);
  CHECK(r.eventCount() == 6);
  CHECK(warnings.seen.empty());  // opening reads block headers only

  std::vector<uint64_t> seqs;
  r.forEach([&](const Event& e) {
    seqs.push_back(e.seq);
    return true;
  });
  CHECK(seqs == std::vector<uint64_t>{0, 2, 3, 5});
  CHECK(r.unknownEventsSkipped() == 2);
  REQUIRE(warnings.seen.size() == 1);
  const std::string& w = warnings.seen[0];
  CHECK_THAT(w, Catch::Contains(path.string()));
  CHECK_THAT(w, Catch::Contains("event #1"));
  CHECK_THAT(w, Catch::Contains("compatibility 15"));
  CHECK_THAT(w, Catch::Contains(fmt::format("this gpurr reads compatibility {}", kCompatVersion)));

  // Every other read path skips them too, without warning again.
  std::vector<uint64_t> scanned;
  scanEvents(r, [&](const ScanEvent& e) {
    scanned.push_back(e.seq);
    return true;
  });
  CHECK(scanned == seqs);
  CHECK(r.readAll().size() == 4);
  std::vector<Event> block1;
  r.readBlock(1, block1);
  CHECK(block1.size() == 2);
  CHECK(r.unknownEventsSkipped() == 2);
  CHECK(warnings.seen.size() == 1);

  // A second reader of the same trace is another trace to warn about.
  TraceReader again(path);
  again.forEach([](const Event&) { return true; });
  CHECK(warnings.seen.size() == 2);
}

TEST_CASE("fields a newer gpurr added are ignored") {
  gpurr::testing::TempDir tmp;
  const fs::path path = writeFutureTrace(tmp);
  Warnings warnings;
  TraceReader r(path);
  // Header.futureQuirk: the known fields read as written.
  CHECK(r.header().toolVersion == "9.9.9");
  CHECK(r.header().commandLine == std::vector<std::string>{"python", "train.py"});
  const auto events = r.readAll();
  REQUIRE(events.size() == 4);
  // Memcpy.bandwidth.
  const auto& copy = std::get<Memcpy>(events[1].payload);
  CHECK(copy.kind == MemcpyKind::kHostToDevice);
  CHECK(copy.size == 4096);
  CHECK(copy.digest == 1311768467463790320ULL);
  // KernelLaunch.priority and label, after captured and captureId.
  const auto& k = std::get<KernelLaunch>(events[2].payload);
  CHECK(k.function == "_Z6scale2PfPKff");
  CHECK(k.grid == Dim3{16, 1, 1});
  CHECK(k.paramLayout == std::vector<ParamInfo>{{0, 8}, {8, 4}});
  CHECK(k.pointers == std::vector<PointerParam>{{0, 1, 0}});
  REQUIRE(k.outputs.size() == 1);
  CHECK(k.outputs[0].digest == 81985529216486895ULL);
  CHECK_FALSE(k.captured);
  // The fast scan path reads the longer launch struct the same way.
  bool sawLaunch = false;
  scanEvents(r, [&](const ScanEvent& e) {
    if (e.kind != EventKind::kLaunch) return true;
    sawLaunch = true;
    CHECK(e.function == "_Z6scale2PfPKff");
    CHECK(e.grid == Dim3{16, 1, 1});
    CHECK(e.params.size() == 12);
    CHECK(e.outputs.size() == 1);
    CHECK(e.outputs[0].digest == 81985529216486895ULL);
    return true;
  });
  CHECK(sawLaunch);
}
