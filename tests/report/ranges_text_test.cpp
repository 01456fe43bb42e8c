// How the text report words an input or output range that differs: here,
// the same bytes written to another buffer in run B, which the digests alone
// ("digest X vs X") would not say.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "model_util.h"
#include "report/diff_report.h"
#include "report_test_util.h"
#include "trace_format/trace.h"

using namespace gpurr;

namespace {

constexpr uint64_t kBase = 0x7f0000000000;
uint64_t address(uint32_t ordinal) { return kBase + ordinal * 0x10000; }

// Three allocations of 4 KiB; a launch writes allocation 3, then one writes
// `out` with the same bytes in both runs.
std::filesystem::path writeRun(const std::filesystem::path& dir, uint32_t out) {
  trace::TraceWriter w(dir, trace::Header{});
  uint64_t seq = 0;
  for (uint32_t o = 1; o <= 3; ++o)
    w.append({seq++, seq, 0, trace::Allocation{o, address(o), 4096, trace::AllocationKind::kDevice, 0, 0}});
  for (uint32_t target : {3u, out}) {
    trace::KernelLaunch k;
    k.function = "_Z4fillPf";
    k.grid = {4, 1, 1};
    k.block = {128, 1, 1};
    trace::appendPointerParam(k, address(target), target, 0);
    k.outputs = {{{address(target), 4096, target, 0}, 0xabcdef12345678, {}}};
    w.append({seq++, seq, 0, k});
  }
  w.close();
  return dir;
}

}  // namespace

TEST_CASE("an output with the same bytes in another buffer is worded so, not as equal digests that differ") {
  testutil::TempDir dir("ranges_text");
  const auto c = testutil::compare(writeRun(dir.path / "a.gpurr", 1), writeRun(dir.path / "b.gpurr", 3));
  const diff::ProcessDiff* p = testutil::firstDiffering(c);
  REQUIRE(p != nullptr);
  std::ostringstream text;
  report::printProcess(text, report::Style{}, *p);
  CHECK_THAT(text.str(),
             Catch::Contains("output 0 alloc#1+0x0 (4.0 KiB): the same bytes (digest 00abcdef12345678), in run B at "
                             "alloc#3+0x0"));
  CHECK_THAT(text.str(), !Catch::Contains("digest 00abcdef12345678 vs"));
}
