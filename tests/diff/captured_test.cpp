// Launches, copies, sets and graph launches captured into a CUDA graph did
// not run when recorded: the diff aligns the operations that ran, so a
// capture in one run only (a CUDA graph built lazily, say) is no divergence
// of its own.
#include <catch2/catch.hpp>

#include <filesystem>

#include "diff/diff.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::trace;

namespace {

// alloc, [a captured launch, copy, set and graph launch], a launch that ran,
// a graph launch.
std::filesystem::path writeRun(const std::filesystem::path& dir, bool withCapture) {
  std::filesystem::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0;
  Allocation a;
  a.ordinal = 1;
  a.address = 0x7f0000000000;
  a.size = 1 << 20;
  w.append(Event{seq++, 0, 0, a});
  auto launch = [&](uint64_t digest) {
    KernelLaunch k;
    k.function = "_Z4stepPf";
    k.grid = {4, 1, 1};
    k.block = {128, 1, 1};
    appendPointerParam(k, a.address, 1, 0);
    k.outputs = {{{a.address, 4096, 1, 0}, digest, {}}};
    return k;
  };
  if (withCapture) {
    KernelLaunch c = launch(0);
    c.captured = true;
    c.captureId = 3;
    c.hashed = false;
    c.outputs.clear();
    w.append(Event{seq++, seq, 0, c});
    Memcpy m;
    m.kind = MemcpyKind::kDeviceToDevice;
    m.stream = 0x77;
    m.async = true;
    m.size = 256;
    m.dst = {a.address + 8192, 256, 1, 8192};
    m.src = {a.address, 256, 1, 0};
    m.captured = true;
    m.captureId = 3;
    w.append(Event{seq++, seq, 0, m});
    Memset s;
    s.stream = 0x77;
    s.async = true;
    s.dst = {a.address, 4096, 1, 0};
    s.captured = true;
    s.captureId = 3;
    w.append(Event{seq++, seq, 0, s});
    GraphLaunch inner;
    inner.graphExec = 0x98;
    inner.stream = 0x77;
    inner.captured = true;
    inner.captureId = 3;
    w.append(Event{seq++, seq, 0, inner});
  }
  w.append(Event{seq++, seq, 0, launch(0x1234)});
  GraphLaunch g;
  g.graphExec = 0x99;
  g.outputs = {{{a.address, 4096, 1, 0}, 0x5678, {}}};
  w.append(Event{seq++, seq, 0, g});
  w.close();
  return dir;
}

}  // namespace

TEST_CASE("launches, copies, sets and graph launches captured into a graph are not operations: one run's capture "
          "is no divergence") {
  const auto root = std::filesystem::temp_directory_path() / ("gpurr-captured-" + std::to_string(getpid()));
  const auto a = writeRun(root / "a.gpurr", false);
  const auto b = writeRun(root / "b.gpurr", true);
  TraceReader ra(a), rb(b);
  const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
  CHECK(d.identical);
  CHECK(d.opsA == 2);
  CHECK(d.opsB == 2);
  CHECK(d.pathDivergenceCount == 0);
  // And it reads back as what it is.
  const auto events = rb.readAll();
  const auto* c = std::get_if<KernelLaunch>(&events.at(1).payload);
  REQUIRE(c != nullptr);
  CHECK(c->captured);
  CHECK(c->captureId == 3);
  const auto* m = std::get_if<Memcpy>(&events.at(2).payload);
  const auto* s = std::get_if<Memset>(&events.at(3).payload);
  const auto* g = std::get_if<GraphLaunch>(&events.at(4).payload);
  REQUIRE(m != nullptr);
  REQUIRE(s != nullptr);
  REQUIRE(g != nullptr);
  CHECK((m->captured && m->captureId == 3 && s->captured && s->captureId == 3 && g->captured && g->captureId == 3));
  CHECK_FALSE(ranWhenRecorded(events.at(2).payload));
  std::filesystem::remove_all(root);
}
