// Traces made to exhaust the diff (a trace is whoever recorded it): words
// the diff would size its memory or its work by are refused, or bounded,
// with an error that names what is wrong.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "diff/diff.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::trace;

namespace {

std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("gpurr-hostile-" + std::to_string(getpid())) / name;
}

// One allocation of `ordinal` and one launch writing it.
std::filesystem::path withOrdinal(const std::filesystem::path& dir, uint32_t ordinal, uint64_t digest) {
  std::filesystem::remove_all(dir);
  TraceWriter w(dir, Header{});
  Allocation a;
  a.ordinal = ordinal;
  a.address = 0x7f0000000000;
  a.size = 4096;
  w.append(Event{0, 0, 0, a});
  KernelLaunch k;
  k.function = "_Z4stepPf";
  k.grid = k.block = {1, 1, 1};
  appendPointerParam(k, a.address, ordinal, 0);
  k.outputs = {{{a.address, 4096, ordinal, 0}, digest, {}}};
  w.append(Event{1, 1000, 0, k});
  w.close();
  return dir;
}

}  // namespace

TEST_CASE("an allocation ordinal far beyond the trace's allocations is refused, not used to size memory") {
  // 0xffffffff wrapped to 0 and wrote out of bounds; 60 million asked for
  // gigabytes.
  for (const uint32_t ordinal : {0xffffffffu, 60'000'000u}) {
    const auto a = withOrdinal(scratch("a.gpurr"), ordinal, 1), b = withOrdinal(scratch("b.gpurr"), ordinal, 2);
    TraceReader ta(a), tb(b);
    CHECK_THROWS_WITH(diff::diffTraces(ta, tb, {}, nullptr),
                      Catch::Contains("allocation ordinal " + std::to_string(ordinal) + " is far beyond"));
  }
  // An ordinal within reach of the allocations made is an allocation as any.
  const auto a = withOrdinal(scratch("a.gpurr"), 3, 1), b = withOrdinal(scratch("b.gpurr"), 3, 2);
  TraceReader ta(a), tb(b);
  CHECK_FALSE(diff::diffTraces(ta, tb, {}, nullptr).identical);
  std::filesystem::remove_all(scratch(""));
}
