// A path divergence first whose operations the PyTorch layer did not observe
// (it followed a learnt step, and they matched no template: their origins
// hold their step and place alone). Where the same operations, of the same
// kernels and at the same place in their step, ran again in a later step
// that the layer observed in full, the report names that op; a stretch of
// the same kernels elsewhere in a step (a backward's) names nothing.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "diff/diff.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

// Steps 0 to 3 of two launches each (a forward product and an update); in
// run B, from step 1 on, a hook's two extra launches after the product, not
// observed in step 1 and observed in step 2 at the same place (launches 1
// and 2 of the step), or (`elsewhere`) in step 2 after the update
// (launches 2 and 3).
fs::path writeRun(const fs::path& dir, bool hook, bool elsewhere) {
  fs::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0;
  auto launch = [&](const char* kernel, const char* op, uint32_t line, int64_t step, uint64_t stepLaunch,
                    bool observed) {
    KernelLaunch k;
    k.function = kernel;
    k.grid = {4, 1, 1};
    k.block = {128, 1, 1};
    Origin o;
    if (observed) {
      o.op = op;
      o.opStack = {op};
      o.module = "Net.layer";
      o.file = "train.py";
      o.line = line;
    }
    o.step = step;
    o.stepLaunch = stepLaunch;
    w.append(Event{seq++, seq, 0, k, o});
  };
  for (int64_t step = 0; step < 4; ++step) {
    uint64_t n = 0;
    launch("_Z2mmv", "aten::mm", 5, step, n++, true);
    const bool extra = hook && step >= 1 && step <= 2, late = elsewhere && step == 2;
    if (extra && !late) {
      launch("_Z5copy_v", "aten::copy_", 26, step, n++, step == 2);
      launch("_Z3mulv", "aten::mul", 26, step, n++, step == 2);
    }
    launch("_Z6updatev", "aten::add_", 9, step, n++, true);
    if (extra && late) {
      launch("_Z5copy_v", "aten::copy_", 26, step, n++, step == 2);
      launch("_Z3mulv", "aten::mul", 26, step, n++, step == 2);
    }
  }
  w.close();
  return dir;
}

diff::ProcessDiff diffOf(bool elsewhere) {
  const fs::path root = fs::temp_directory_path() / ("gpurr-named-later-" + std::to_string(getpid()));
  TraceReader a(writeRun(root / "a.gpurr", false, elsewhere)), b(writeRun(root / "b.gpurr", true, elsewhere));
  diff::ProcessDiff d = diff::diffTraces(a, b, diff::DiffOptions{}, nullptr);
  fs::remove_all(root);
  REQUIRE(d.firstDivergence.has_value());
  REQUIRE(d.firstDivergence->path);
  return d;
}

}  // namespace

TEST_CASE("an unobserved path divergence is named by the same stretch, observed, in a later step") {
  SECTION("at the same place in step 2") {
    const diff::ProcessDiff d = diffOf(false);
    REQUIRE(d.firstDivergence->namedLater.has_value());
    const Origin& o = *d.firstDivergence->namedLater->origin;
    CHECK(o.op == "aten::copy_");
    CHECK(o.line == 26);
    CHECK(o.step == 2);
  }
  SECTION("the same kernels at another place in step 2 than in step 1: not named") {
    const diff::ProcessDiff d = diffOf(true);
    CHECK_FALSE(d.firstDivergence->namedLater.has_value());
  }
}
