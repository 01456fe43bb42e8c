// Random ops that write fresh memory (randperm's new tensor, bernoulli_
// into the buffer dropout made): in traces that hash a launch's inputs at
// their first use (FORMAT.md, hashInputs), an output buffer's old contents
// are hashed as an input, and differ between runs. Where the op draws its
// output from the random generator, the diff must say that the generator's
// state differs, at the first divergence and at a later independent one,
// never that the op read uninitialised memory.
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

constexpr uint64_t kP = 0x7f0000010000, kQ = 0x7f0000020000;

// p and q (4 KiB each), fresh; `first` writes p, then aten::bernoulli_
// writes q, each from other old contents and with other results in each
// run (`run`: 0 or 1).
fs::path writeRun(const fs::path& dir, const std::string& first, uint64_t run) {
  fs::remove_all(dir);
  Header h;
  h.options.hashInputs = false;
  TraceWriter w(dir, h);
  uint64_t seq = 0;
  w.append(Event{seq++, seq, 0, Allocation{1, kP, 4096, AllocationKind::kDevice, 0, 0}});
  w.append(Event{seq++, seq, 0, Allocation{2, kQ, 4096, AllocationKind::kDevice, 0, 0}});
  auto draw = [&](const std::string& op, uint64_t address, uint32_t allocation, uint32_t line) {
    KernelLaunch k;
    k.function = "_Z4drawPf";
    k.grid = {4, 1, 1};
    k.block = {128, 1, 1};
    appendPointerParam(k, address, allocation, 0);
    k.inputs = {{{address, 4096, allocation, 0}, 0xa0 + run + 16 * line, {}}};  // old contents, at their first use
    k.outputs = {{{address, 4096, allocation, 0}, 0xb0 + run + 16 * line, {}}};
    Origin o;
    o.op = op;
    o.opStack = {op};
    o.file = "t.py";
    o.line = line;
    o.step = 0;
    w.append(Event{seq++, seq, 0, k, o});
  };
  draw(first, kP, 1, 3);
  draw("aten::bernoulli_", kQ, 2, 4);
  w.close();
  return dir;
}

diff::ProcessDiff diffOf(const std::string& first) {
  const fs::path root = fs::temp_directory_path() / ("gpurr-random-ops-" + std::to_string(getpid()));
  TraceReader a(writeRun(root / "a.gpurr", first, 0)), b(writeRun(root / "b.gpurr", first, 1));
  diff::ProcessDiff d = diff::diffTraces(a, b, diff::DiffOptions{}, nullptr);
  fs::remove_all(root);
  REQUIRE(d.firstDivergence.has_value());
  return d;
}

}  // namespace

TEST_CASE("a random op's fresh output differs: the generator's state, at the first divergence and a later one") {
  SECTION("randperm, which makes a new tensor") {
    const diff::ProcessDiff d = diffOf("aten::randperm");
    CHECK(d.firstDivergence->cause == diff::Cause::kRngState);
    REQUIRE(d.blast.independent.size() == 1);
    CHECK_THAT(d.blast.independent[0].reason,
               Catch::StartsWith("outputs differ; aten::bernoulli_ draws them from the random generator, whose state "
                                 "differs (its inputs differ only in its output buffers' old contents)"));
  }
  SECTION("an op that reads its inputs (aten::add): uninitialised memory") {
    CHECK(diffOf("aten::add").firstDivergence->cause == diff::Cause::kUninitialisedMemory);
  }
}
