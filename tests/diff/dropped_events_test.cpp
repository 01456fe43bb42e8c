// A run whose recorder dropped events (an EventsDropped marker in their
// place), or whose recording was cut short: the diff compares both runs up
// to there and claims nothing past it, neither a divergence nor identity.
// A run that ended cleanly before the other is a divergence of its own.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <optional>

#include "diff/diff.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::trace;

namespace {

// An allocation and `launches` launches, each writing it; launch
// `divergent` (if any) with another digest. With `gapAt`, launches
// gapAt..gapAt+2 are dropped and a marker stands in their place.
std::filesystem::path writeRun(const std::filesystem::path& dir, std::optional<uint64_t> divergent,
                               std::optional<uint64_t> gapAt, uint64_t launches = 10, bool extraLast = false) {
  std::filesystem::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0;
  Allocation a;
  a.ordinal = 1;
  a.address = 0x7f0000000000;
  a.size = 1 << 20;
  w.append(Event{seq++, 0, 0, a});
  for (uint64_t i = 0; i < launches; ++i) {
    if (gapAt && i >= *gapAt && i < *gapAt + 3) {
      if (i == *gapAt + 2) {
        EventsDropped d;
        d.byKind[0] = 3;
        d.firstTimeNs = (*gapAt + 1) * 1000;
        d.lastTimeNs = (i + 1) * 1000;
        w.append(Event{seq++, d.lastTimeNs, 0, d});
      }
      continue;
    }
    KernelLaunch k;
    k.function = "_Z4stepPf";
    k.grid = {4, 1, 1};
    k.block = {128, 1, 1};
    appendPointerParam(k, a.address, 1, 0);
    k.outputs = {{{a.address, 4096, 1, 0}, divergent == i ? 0xbad : 0x1000 + i, {}}};
    w.append(Event{seq++, (i + 1) * 1000, 0, k});
  }
  if (extraLast) {  // a kernel the other run does not launch there
    KernelLaunch k;
    k.function = "_Z5extraPf";
    k.grid = {1, 1, 1};
    k.block = {32, 1, 1};
    w.append(Event{seq++, (launches + 1) * 1000, 0, k});
  }
  w.close();
  return dir;
}

// A loop of `turns` turns, each launching two kernels (a linear layer's,
// then a multiplication's, at train.py:4), cut short as a killed recording
// is; with `extraAt`, one more multiplication (at train.py:5) after that
// turn's.
std::filesystem::path writeLoop(const std::filesystem::path& dir, uint64_t turns, std::optional<uint64_t> extraAt) {
  std::filesystem::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0;
  auto launch = [&](const char* kernel, const char* op, uint32_t line) {
    KernelLaunch k;
    k.function = kernel;
    k.grid = {1, 1, 1};
    k.block = {32, 1, 1};
    Origin o;
    o.op = op;
    o.opStack = {op};
    o.phase = Phase::kForward;
    o.file = "train.py";
    o.line = line;
    o.step = 0;
    o.stepLaunch = seq;
    w.append(Event{seq, (seq + 1) * 1000, 0, k, o});
    ++seq;
  };
  for (uint64_t i = 0; i < turns; ++i) {
    launch("_Z6linearPf", "aten::addmm", 4);
    launch("_Z3mulPf", "aten::mul", 4);
    if (extraAt == i) launch("_Z3mulPf", "aten::mul", 5);
  }
  w.close();
  std::filesystem::remove(dir / "index");
  std::filesystem::remove(dir / "checksums");
  return dir;
}

}  // namespace

TEST_CASE("a diff across dropped events compares up to the gap and claims nothing past it") {
  const auto root = std::filesystem::temp_directory_path() / ("gpurr-dropped-" + std::to_string(getpid()));
  const auto full = writeRun(root / "full.gpurr", std::nullopt, std::nullopt);
  SECTION("the marker reads back as written") {
    const auto gap = writeRun(root / "gap.gpurr", std::nullopt, 4);
    const auto events = TraceReader(gap).readAll();
    const auto* d = std::get_if<EventsDropped>(&events.at(5).payload);
    REQUIRE(d != nullptr);
    CHECK(d->total() == 3);
    CHECK(d->byKind[0] == 3);
    CHECK(d->firstTimeNs == 5000);
    CHECK(describe(*d) == "3 events dropped (3 launches)");
    CHECK_FALSE(ranWhenRecorded(events.at(5).payload));
  }
  SECTION("no divergence before the gap: neither identical nor different, and the gap is named") {
    const auto gap = writeRun(root / "gap.gpurr", std::nullopt, 4);
    TraceReader ra(full), rb(gap);
    const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
    CHECK(d.identical);  // of what was compared
    REQUIRE(d.gaps.size() == 1);
    CHECK(d.gaps[0] == "run B's recorder dropped 3 events at event #5 (its trace thread fell behind)");
    CHECK(d.matched == 4);
    CHECK_FALSE(d.firstDivergence);
  }
  SECTION("a divergence after the gap, in what was dropped or after it, is not claimed") {
    const auto gap = writeRun(root / "gap.gpurr", 8, 4);
    TraceReader ra(full), rb(gap);
    const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
    CHECK(d.identical);
    CHECK(d.gaps.size() == 1);
    CHECK_FALSE(d.firstDivergence);
    CHECK(d.pathDivergenceCount == 0);
  }
  SECTION("a divergence before the gap is reported as usual") {
    const auto gap = writeRun(root / "gap.gpurr", 2, 4);
    TraceReader ra(full), rb(gap);
    const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
    CHECK_FALSE(d.identical);
    REQUIRE(d.firstDivergence);
    CHECK(d.firstDivergence->a.seq == 3);
    CHECK(d.gaps.size() == 1);
  }
  std::filesystem::remove_all(root);
}

TEST_CASE("a trace cut short is compared up to its end and claims nothing past it") {
  const auto root = std::filesystem::temp_directory_path() / ("gpurr-cut-" + std::to_string(getpid()));
  const auto full = writeRun(root / "full.gpurr", std::nullopt, std::nullopt);
  auto cut = [&](std::optional<uint64_t> divergent, bool extraLast = false, const char* name = "cut.gpurr",
                 uint64_t launches = 6) {
    const auto dir = writeRun(root / name, divergent, std::nullopt, launches, extraLast);
    std::filesystem::remove(dir / "index");  // as when the recorded process was killed
    std::filesystem::remove(dir / "checksums");
    return dir;
  };
  SECTION("no divergence before the end: neither identical nor different, and the end is named") {
    TraceReader ra(full), rb(cut(std::nullopt));
    const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
    CHECK(d.identical);  // of what was compared
    REQUIRE(d.gaps.size() == 1);
    CHECK(d.gaps[0] == "run B's trace ends (its recording did not end cleanly) and run A goes on for 4 operations");
    CHECK(d.matched == 6);
    CHECK_FALSE(d.firstDivergence);
  }
  SECTION("a divergence before the end is reported as usual") {
    TraceReader ra(full), rb(cut(3));
    const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
    CHECK_FALSE(d.identical);
    REQUIRE(d.firstDivergence);
    CHECK(d.firstDivergence->a.seq == 4);
    CHECK(d.gaps.size() == 1);
  }
  SECTION("an operation more just before the end: the other run does not end there, its rest uncompared") {
    TraceReader ra(full), rb(cut(std::nullopt, true));
    const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
    REQUIRE(d.firstDivergence);
    CHECK(d.firstDivergence->path);
    CHECK(d.firstDivergence->cause == diff::Cause::kAlgorithmChoice);
    CHECK(d.firstDivergence->summary.find("ends here") == std::string::npos);
  }
  SECTION("both cut short at one place: neither identical nor different") {
    TraceReader ra(cut(std::nullopt, false, "cut2.gpurr")), rb(cut(std::nullopt));
    const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
    CHECK(d.identical);  // of what was compared
    REQUIRE(d.gaps.size() == 1);
    CHECK(d.gaps[0] == "run A's trace ends (its recording did not end cleanly) where the other's does: what it did "
                       "after is not known");
    CHECK_FALSE(d.firstDivergence);
  }
  SECTION("both cut short at different places: the longer one's rest is not compared") {
    TraceReader ra(cut(std::nullopt, false, "cut8.gpurr", 8)), rb(cut(std::nullopt));
    const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
    CHECK(d.identical);  // of what was compared
    REQUIRE(d.gaps.size() == 1);
    CHECK(d.gaps[0] == "run B's trace ends (its recording did not end cleanly) and run A goes on for 2 operations");
    CHECK_FALSE(d.firstDivergence);
  }
  SECTION("both cut short, one with an operation more in a loop: that one, whichever run is longer") {
    // Either run's operations after the other's end are free, so moving an
    // extra operation to the other run costs no more edits: the origins
    // tell which run made it.
    for (const auto& [extraTurns, plainTurns] : {std::pair{10, 15}, std::pair{15, 10}}) {
      const auto extra = writeLoop(root / "extra.gpurr", extraTurns, 5);
      const auto plain = writeLoop(root / "plain.gpurr", plainTurns, std::nullopt);
      for (const bool extraIsA : {false, true}) {
        TraceReader ra(extraIsA ? extra : plain), rb(extraIsA ? plain : extra);
        const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
        INFO("turns " << extraTurns << " with the extra one, " << plainTurns << " without; it in run "
                      << (extraIsA ? 'A' : 'B'));
        REQUIRE(d.firstDivergence);
        REQUIRE(d.firstDivergence->stretch);
        const diff::PathDivergence& s = *d.firstDivergence->stretch;
        CHECK((extraIsA ? s.aCount : s.bCount) == 1);
        CHECK((extraIsA ? s.bCount : s.aCount) == 0);
        const diff::OpInfo& op = extraIsA ? d.firstDivergence->a : d.firstDivergence->b;
        CHECK(op.seq == 12);
        REQUIRE(op.origin);
        CHECK(op.origin->line == 5);
      }
    }
  }
  SECTION("a run that ended cleanly before the other diverges where it ends, for no known reason") {
    TraceReader ra(full), rb(writeRun(root / "short.gpurr", std::nullopt, std::nullopt, 6));
    const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
    CHECK_FALSE(d.identical);
    CHECK(d.gaps.empty());
    REQUIRE(d.firstDivergence);
    CHECK(d.firstDivergence->path);
    CHECK(d.firstDivergence->a.seq == 7);
    CHECK(d.firstDivergence->cause == diff::Cause::kUnknown);
    CHECK(d.firstDivergence->summary == "unknown: run B ends here, and run A goes on for 4 operations");
    REQUIRE(!d.firstDivergence->evidence.empty());
    CHECK(d.firstDivergence->evidence[0].kind == diff::EvidenceKind::kRunEnds);
  }
  std::filesystem::remove_all(root);
}
