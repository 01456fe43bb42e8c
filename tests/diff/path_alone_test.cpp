// A path divergence whose stretches hold more operations than the report
// shows of them: the op one run ran alone is found among all of the other
// run's operations there, not only those shown, so that an op both runs ran
// (in the other run after the ops shown) is never named as the one that
// ran alone.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "diff/diff.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

// Launches of kernels from ops at lines of train.py: a prologue (line 1),
// then `middle`, then an epilogue (line 9). A launch's grid is its second.
using Launch = std::tuple<std::string, std::string, uint32_t, uint32_t>;  // kernel, op, line, grid

fs::path writeRun(const fs::path& dir, const std::vector<Launch>& middle) {
  fs::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0;
  auto launch = [&](const std::string& kernel, const std::string& op, uint32_t line, uint32_t grid) {
    KernelLaunch k;
    k.function = kernel;
    k.grid = {grid, 1, 1};
    k.block = {128, 1, 1};
    Origin o;
    o.op = op;
    o.opStack = {op};
    o.module = "Net";
    o.file = "train.py";
    o.line = line;
    o.step = 0;
    w.append(Event{seq++, seq, 0, k, o});
  };
  launch("_Z8prologuev", "aten::add", 1, 1);
  for (const auto& [kernel, op, line, grid] : middle) launch(kernel, op, line, grid);
  launch("_Z8epiloguev", "aten::sub", 9, 1);
  w.close();
  return dir;
}

}  // namespace

TEST_CASE("an op both runs ran, beyond those a stretch shows, is not named as the one a run ran alone") {
  const fs::path root = fs::temp_directory_path() / ("gpurr-path-alone-" + std::to_string(getpid()));
  // Run B multiplies once more at line 4 before the product at line 5,
  // which it launches with another grid: one stretch of 1 operation in run
  // A and 2 in run B, the report showing 1 a side.
  TraceReader a(writeRun(root / "a.gpurr", {{"_Z2mmv", "aten::mm", 5, 4}}));
  TraceReader b(writeRun(root / "b.gpurr", {{"_Z3mulv", "aten::mul", 4, 1}, {"_Z2mmv", "aten::mm", 5, 8}}));
  diff::DiffOptions options;
  options.maxStretchOps = 1;
  const diff::ProcessDiff d = diff::diffTraces(a, b, options, nullptr);
  fs::remove_all(root);
  REQUIRE(d.firstDivergence.has_value());
  CHECK(d.firstDivergence->path);
  CHECK_THAT(d.firstDivergence->summary, Catch::StartsWith("unknown: run B ran aten::mul in Net here"));
}
