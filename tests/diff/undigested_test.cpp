// Traces that hash a launch's inputs at their first use only (FORMAT.md,
// hashInputs) leave the ranges an earlier operation wrote, with a digest, to
// the write history. Where that write left no digest (a hash that failed on
// the GPU), nothing vouches for the bytes: the diff must not blame the
// reader's kernel for outputs that differ.
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

constexpr uint64_t kX = 0x7f0000010000, kY = 0x7f0000020000;

// x and y (4 KiB each); `writer` writes x, its digest kept or not; `reader`
// reads x (its schema says so: not hashed, vouched for) and writes y.
fs::path writeRun(const fs::path& dir, bool writerHashed, uint64_t readerOutput) {
  fs::remove_all(dir);
  Header h;
  h.options.hashInputs = false;
  TraceWriter w(dir, h);
  uint64_t seq = 0;
  w.append(Event{seq++, seq, 0, Allocation{1, kX, 4096, AllocationKind::kDevice, 0, 0}});
  w.append(Event{seq++, seq, 0, Allocation{2, kY, 4096, AllocationKind::kDevice, 0, 0}});
  KernelLaunch writer;
  writer.function = "_Z4fillPf";
  writer.grid = {4, 1, 1};
  writer.block = {128, 1, 1};
  appendPointerParam(writer, kX, 1, 0);
  if (writerHashed) {
    writer.outputs = {{{kX, 4096, 1, 0}, 0xa1, {}}};
  } else {
    writer.hashed = false;  // its outputs' hash did not complete
    writer.annotations.emplace_back(std::in_place_type<Note>, "not hashed: the wait limit passed");
  }
  w.append(Event{seq++, seq, 0, writer});
  KernelLaunch reader;
  reader.function = "_Z4stepPfPKf";
  reader.grid = {4, 1, 1};
  reader.block = {128, 1, 1};
  appendPointerParam(reader, kY, 2, 0);
  appendPointerParam(reader, kX, 1, 0);
  reader.inputs = {{{kY, 4096, 2, 0}, 0xb0, {}}};  // y: its first use
  reader.reads = {{{kX, 4096, 1, 0}, 0, {}}};
  reader.outputs = {{{kY, 4096, 2, 0}, readerOutput, {}}};
  w.append(Event{seq++, seq, 0, reader});
  w.close();
  return dir;
}

diff::FirstDivergence firstDivergence(bool writerHashed) {
  const fs::path root = fs::temp_directory_path() / ("gpurr-undigested-" + std::to_string(getpid()));
  TraceReader a(writeRun(root / "a.gpurr", writerHashed, 0xc1)), b(writeRun(root / "b.gpurr", writerHashed, 0xc2));
  const diff::ProcessDiff d = diff::diffTraces(a, b, diff::DiffOptions{}, nullptr);
  fs::remove_all(root);
  REQUIRE(d.firstDivergence.has_value());
  return *d.firstDivergence;
}

}  // namespace

TEST_CASE("a range last written without a digest is not vouched for: unknown, not the reader's kernel") {
  SECTION("the writer's digests kept: the history vouches for x, the kernel is to blame") {
    const diff::FirstDivergence d = firstDivergence(true);
    CHECK(d.cause == diff::Cause::kNondeterministicKernel);
    CHECK(d.inputsUncompared == 0);
    CHECK(d.inputsVouched == 1);
  }
  SECTION("the writer's hash lost: nothing vouches for x") {
    const diff::FirstDivergence d = firstDivergence(false);
    CHECK(d.cause == diff::Cause::kUnknown);
    CHECK(d.inputsUncompared == 1);
    CHECK(d.inputsVouched == 0);
    CHECK_THAT(evidence(d), Catch::Contains("1 range was last written before the launch without a digest"));
  }
}

namespace {

// Traces that hash every input (hashInputs): `reader` reads x, whose bytes
// differ between the runs (`xDigest`); before it, a launch recorded without
// hashing may have written x.
fs::path writeHashedRun(const fs::path& dir, bool unhashedWriter, uint64_t xDigest) {
  fs::remove_all(dir);
  Header h;
  h.options.hashInputs = true;
  TraceWriter w(dir, h);
  uint64_t seq = 0;
  w.append(Event{seq++, seq, 0, Allocation{1, kX, 4096, AllocationKind::kDevice, 0, 0}});
  w.append(Event{seq++, seq, 0, Allocation{2, kY, 4096, AllocationKind::kDevice, 0, 0}});
  if (unhashedWriter) {
    KernelLaunch writer;
    writer.function = "_Z4fillPf";
    writer.grid = {4, 1, 1};
    writer.block = {128, 1, 1};
    writer.hashed = false;  // outside --launches
    appendPointerParam(writer, kX, 1, 0);
    w.append(Event{seq++, seq, 0, writer});
  }
  KernelLaunch reader;
  reader.function = "_Z4stepPfPKf";
  reader.grid = {4, 1, 1};
  reader.block = {128, 1, 1};
  appendPointerParam(reader, kY, 2, 0);
  appendPointerParam(reader, kX, 1, 0);
  reader.inputs = {{{kY, 4096, 2, 0}, 0xb0, {}}, {{kX, 4096, 1, 0}, xDigest, {}}};
  reader.reads = {{{kX, 4096, 1, 0}, 0, {}}};
  reader.outputs = {{{kY, 4096, 2, 0}, xDigest ^ 0xff, {}}};
  w.append(Event{seq++, seq, 0, reader});
  w.close();
  return dir;
}

diff::FirstDivergence hashedDivergence(bool unhashedWriter) {
  const fs::path root = fs::temp_directory_path() / ("gpurr-unhashed-writer-" + std::to_string(getpid()));
  TraceReader a(writeHashedRun(root / "a.gpurr", unhashedWriter, 0xd1));
  TraceReader b(writeHashedRun(root / "b.gpurr", unhashedWriter, 0xd2));
  const diff::ProcessDiff d = diff::diffTraces(a, b, diff::DiffOptions{}, nullptr);
  fs::remove_all(root);
  REQUIRE(d.firstDivergence.has_value());
  return *d.firstDivergence;
}

}  // namespace

TEST_CASE("bytes a launch recorded without hashing may have written are not called uninitialised") {
  SECTION("nothing wrote x: uninitialised memory") {
    CHECK(hashedDivergence(false).cause == diff::Cause::kUninitialisedMemory);
  }
  SECTION("a launch not hashed took a pointer into x: unknown") {
    const diff::FirstDivergence d = hashedDivergence(true);
    CHECK(d.cause == diff::Cause::kUnknown);
    REQUIRE(d.inputs.size() == 1);
    CHECK(d.inputs[0].writtenChecked);
    CHECK(d.inputs[0].unwrittenA == 0);
    CHECK_THAT(d.summary, Catch::StartsWith("unknown: input 1 (") &&
                              Catch::Contains("an operation recorded without digests wrote it last"));
  }
}
