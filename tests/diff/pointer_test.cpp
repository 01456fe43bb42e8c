// A pointer parameter that points elsewhere (same kernel and launch
// configuration): the diff matches the two launches and names the pointer,
// each side's allocation and offset, under `scalar parameters`; it is never
// an algorithm choice with no algorithm recorded.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "diff/diff.h"
#include "tests/diff/evidence_text.h"
#include "trace_format/trace.h"

using namespace gpurr;
using gpurr::testing::evidence;
using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

struct Launch {
  std::string kernel = "_Z4stepPfPKf";
  uint32_t outAlloc = 1, inAlloc = 2;
  uint64_t inOffset = 0;
  uint64_t outDigest = 0x1111;
};

constexpr uint64_t kBase = 0x7f0000000000;

// Three allocations of 4 KiB, then the launches.
fs::path writeRun(const fs::path& dir, const std::vector<Launch>& launches) {
  fs::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0;
  for (uint32_t o = 1; o <= 3; ++o) {
    w.append(Event{seq++, seq, 0, Allocation{o, kBase + o * 0x10000, 4096, AllocationKind::kDevice, 0, 0}});
  }
  for (const Launch& l : launches) {
    KernelLaunch k;
    k.function = l.kernel;
    k.grid = {4, 1, 1};
    k.block = {128, 1, 1};
    appendPointerParam(k, kBase + l.outAlloc * 0x10000, l.outAlloc, 0);
    appendPointerParam(k, kBase + l.inAlloc * 0x10000 + l.inOffset, l.inAlloc, l.inOffset);
    const uint32_t n = 1024;
    appendParam(k, &n, 4, 4);
    k.inputs = {{{kBase + l.inAlloc * 0x10000 + l.inOffset, 4096 - l.inOffset, l.inAlloc, l.inOffset},
                 0x2222 + l.inOffset,
                 {}}};
    k.outputs = {{{kBase + l.outAlloc * 0x10000, 4096, l.outAlloc, 0}, l.outDigest, {}}};
    w.append(Event{seq++, seq, 0, k});
  }
  w.close();
  return dir;
}

struct Pair {
  fs::path root = fs::temp_directory_path() / ("gpurr-pointer-" + std::to_string(getpid()));
  ~Pair() { fs::remove_all(root); }
  diff::ProcessDiff diff(const std::vector<Launch>& a, const std::vector<Launch>& b) {
    TraceReader ra(writeRun(root / "a.gpurr", a)), rb(writeRun(root / "b.gpurr", b));
    return diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
  }
};

}  // namespace

TEST_CASE("a pointer 128 bytes further into the same allocation is a pointer parameter difference") {
  Pair p;
  Launch a, b;
  b.inOffset = 0x80;
  b.outDigest = 0x3333;
  const diff::ProcessDiff d = p.diff({Launch{}, a, Launch{}}, {Launch{}, b, Launch{}});
  CHECK_FALSE(d.identical);
  CHECK(d.matched == 3);
  CHECK(d.pathDivergenceCount == 0);
  REQUIRE(d.firstDivergence);
  const diff::FirstDivergence& f = *d.firstDivergence;
  CHECK_FALSE(f.path);
  CHECK(f.a.index == 1);
  CHECK(f.cause == diff::Cause::kScalarParameters);
  CHECK_THAT(f.summary, Catch::Contains("pointer parameter 1 points elsewhere"));
  REQUIRE(f.params.size() == 1);
  CHECK(f.params[0].meaning == diff::ParamMeaning::kPointer);
  CHECK(f.params[0].offset == 8);
  CHECK(f.params[0].a == "alloc#2+0x0");
  CHECK(f.params[0].b == "alloc#2+0x80");
  const std::string e = evidence(f);
  CHECK_THAT(e, Catch::Contains("pointer parameter 1 (bytes 0x8-0x10)"));
  CHECK_THAT(e, Catch::Contains("run A offset 0x0 of alloc#2"));
  CHECK_THAT(e, Catch::Contains("run B offset 0x80 of alloc#2"));
  CHECK_THAT(e, Catch::Contains("the same allocation, 128 bytes further in run B"));
  CHECK_THAT(f.summary + e, !Catch::Contains("algorithm"));
}

TEST_CASE("a pointer into another allocation is a pointer parameter difference") {
  Pair p;
  // Allocation 3 is a buffer of its own in both runs: the first launch reads
  // it. Run B's second launch reads it again instead of allocation 2.
  Launch first, b;
  first.inAlloc = 3;
  b.inAlloc = 3;
  b.outDigest = 0x3333;
  const diff::ProcessDiff d = p.diff({first, Launch{}}, {first, b});
  REQUIRE(d.firstDivergence);
  const diff::FirstDivergence& f = *d.firstDivergence;
  CHECK_FALSE(f.path);
  CHECK(f.cause == diff::Cause::kScalarParameters);
  CHECK_THAT(evidence(f), Catch::Contains("another allocation: run B's alloc#3 corresponds to run A's alloc#3"));
}

TEST_CASE("an allocation one run first uses where the other run used another is the same buffer") {
  // Run B uses allocation 3 where run A used allocation 2, and never uses
  // allocation 2: an allocator that handed out another segment. Both are
  // the buffer this launch first reads.
  Pair p;
  Launch b;
  b.inAlloc = 3;
  const diff::ProcessDiff d = p.diff({Launch{}, Launch{}}, {b, b});
  CHECK(d.identical);
}

TEST_CASE("a pointer that points elsewhere is a divergence even when the outputs agree") {
  Pair p;
  Launch b;
  b.inOffset = 0x40;
  const diff::ProcessDiff d = p.diff({Launch{}}, {b});
  CHECK_FALSE(d.identical);
  REQUIRE(d.firstDivergence);
  CHECK(d.firstDivergence->cause == diff::Cause::kScalarParameters);
  CHECK(d.firstDivergence->outputs.empty());
}

TEST_CASE("another kernel at the same place is still a different path") {
  Pair p;
  Launch b;
  b.kernel = "_Z5otherPfPKf";
  b.outDigest = 0x3333;
  const diff::ProcessDiff d = p.diff({Launch{}}, {b});
  REQUIRE(d.firstDivergence);
  CHECK(d.firstDivergence->path);
  CHECK(d.firstDivergence->cause == diff::Cause::kAlgorithmChoice);
}

TEST_CASE("a moved pointer at the start of a longer stretch is matched, the rest stays a stretch") {
  Pair p;
  Launch a, b, extra;
  b.inOffset = 0x80;
  b.outDigest = 0x3333;
  extra.kernel = "_Z5extraPfPKf";
  const diff::ProcessDiff d = p.diff({a}, {b, extra});
  CHECK(d.matched == 1);
  CHECK(d.pathDivergenceCount == 1);
  REQUIRE(d.firstDivergence);
  CHECK_FALSE(d.firstDivergence->path);
  CHECK(d.firstDivergence->cause == diff::Cause::kScalarParameters);
}

TEST_CASE("a range one run ended with its tensor's block and the other with the allocation is not compared") {
  Pair p;
  TraceReader ra(writeRun(p.root / "a.gpurr", {Launch{}, Launch{}}));
  // Run B: the same launches, the second one's output range ended by its
  // block (the first 1 KiB), so its digest differs by construction.
  const fs::path dirB = p.root / "b.gpurr";
  {
    TraceReader source(writeRun(p.root / "b-source.gpurr", {Launch{}, Launch{}}));
    fs::remove_all(dirB);
    TraceWriter w(dirB, Header{});
    source.forEach([&](const Event& e) {
      Event copy = e;
      if (auto* k = std::get_if<KernelLaunch>(&copy.payload); k != nullptr && e.seq == 4) {
        k->outputs[0].range.size = 1024;
        k->outputs[0].range.bound = RangeBound::kBlock;
        k->outputs[0].digest = 0x4444;
      }
      w.append(copy);
      return true;
    });
    w.close();
  }
  TraceReader rb(dirB);
  const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
  REQUIRE(d.firstDivergence);
  REQUIRE(d.firstDivergence->outputs.size() == 1);
  const diff::RangeDifference& r = d.firstDivergence->outputs[0];
  CHECK(r.boundsDiffer);
  CHECK(r.a.bound == RangeBound::kAllocation);
  CHECK(r.b.bound == RangeBound::kBlock);
  CHECK(r.spans.empty());  // nothing located in bytes that are not the same bytes
}
