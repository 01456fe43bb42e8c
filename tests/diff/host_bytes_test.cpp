// Parameter bytes the host left there: PyTorch passes kernels structs by
// value whose unused parts hold host stack, heap and library addresses, and
// references to host objects (docs/GPU_FACTS.md). Where two runs differ only
// in such words, and the kernel's outputs differ, the kernel is
// nondeterministic, not its parameters; a real scalar difference is still
// one. A launch re-executed from one run's state with different results is a
// nondeterministic kernel whatever its parameter bytes.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>
#include <string>

#include "diff/diff.h"
#include "tests/diff/evidence_text.h"
#include "trace_format/trace.h"

using namespace gpurr;
using gpurr::testing::evidence;
using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kBase = 0x7f0000000000;
constexpr uint64_t kStackA = 0x7ffd98652200, kStackB = 0x7ffefd92b1a0;  // from a run on a GPU

// `void k(float* out, const float* in, Info info, int n, int m)`, Info two
// 8-byte words that the kernel does not read.
struct Launch {
  std::string function = "_Z4step";  // no parameter types
  bool splitInfo = false;             // Info passed as two 8-byte parameters
  std::array<uint64_t, 2> info{0, 0};
  uint32_t n = 1024;
  uint32_t m = 0;
  uint64_t outDigest = 0x1111;
  std::optional<DeterminismCheck> check;
};

fs::path writeRun(const fs::path& dir, const std::vector<Launch>& launches,
                  const std::vector<HostRegion>& regions = {}) {
  fs::remove_all(dir);
  TraceWriter w(dir, Header{});
  w.setHostRegions(regions);
  uint64_t seq = 0;
  for (uint32_t o = 1; o <= 2; ++o) {
    w.append(Event{seq++, seq, 0, Allocation{o, kBase + o * 0x10000, 4096, AllocationKind::kDevice, 0, 0}});
  }
  for (const Launch& l : launches) {
    KernelLaunch k;
    k.function = l.function;
    k.grid = {4, 1, 1};
    k.block = {128, 1, 1};
    appendPointerParam(k, kBase + 0x10000, 1, 0);
    appendPointerParam(k, kBase + 0x20000, 2, 0);
    if (l.splitInfo) {
      appendParam(k, &l.info[0], 8, 8);
      appendParam(k, &l.info[1], 8, 8);
    } else {
      appendParam(k, l.info.data(), 16, 8);
    }
    appendParam(k, &l.n, 4, 4);
    appendParam(k, &l.m, 4, 4);
    k.inputs = {{{kBase + 0x20000, 4096, 2, 0}, 0x2222, {}}};
    k.outputs = {{{kBase + 0x10000, 4096, 1, 0}, l.outDigest, {}}};
    if (l.check) k.annotations.push_back(*l.check);
    w.append(Event{seq++, seq, 0, k});
  }
  w.close();
  return dir;
}

struct Pair {
  fs::path root = fs::temp_directory_path() / ("gpurr-host-bytes-" + std::to_string(getpid()));
  std::vector<HostRegion> regionsA, regionsB;  // the index's, per run
  ~Pair() { fs::remove_all(root); }
  diff::FirstDivergence first(const Launch& a, const Launch& b) {
    TraceReader ra(writeRun(root / "a.gpurr", {Launch{}, a}, regionsA)),
        rb(writeRun(root / "b.gpurr", {Launch{}, b}, regionsB));
    const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
    REQUIRE(d.firstDivergence);
    CHECK(d.firstDivergence->a.index == 1);
    return *d.firstDivergence;
  }
};

}  // namespace

TEST_CASE("parameters that differ only in host addresses do not make the verdict scalar parameters") {
  Pair p;
  Launch a, b;
  a.info = {kStackA, 0x7f4c390d73d2};
  b.info = {kStackB, 0x7f745f2d73d2};
  b.outDigest = 0x3333;
  const diff::FirstDivergence f = p.first(a, b);
  CHECK(f.cause == diff::Cause::kNondeterministicKernel);
  REQUIRE(f.params.size() == 1);
  CHECK(f.params[0].param == 2);
  CHECK(f.params[0].meaning == diff::ParamMeaning::kHostAddresses);
  const std::string e = evidence(f);
  CHECK_THAT(e, Catch::Contains("parameters identical after pointer normalisation but for host addresses in 1 "
                                "parameter"));
  CHECK_THAT(e, Catch::Contains("host addresses in no recorded allocation"));

  SECTION("with the outputs equal, the runs are identical") {
    b.outDigest = a.outDigest;
    TraceReader ra(writeRun(p.root / "a.gpurr", {a})), rb(writeRun(p.root / "b.gpurr", {b}));
    CHECK(diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr).identical);
  }
}

TEST_CASE("a host address against a small value, or small values, are a real parameter difference") {
  Pair p;
  Launch a, b;
  b.outDigest = 0x3333;
  a.info = {kStackA, 0};
  b.info = {kStackB, 0x7f745f2d73d2};  // 0 in run A: not an address on both sides
  diff::FirstDivergence f = p.first(a, b);
  CHECK(f.cause == diff::Cause::kScalarParameters);
  REQUIRE(f.params.size() == 1);
  CHECK(f.params[0].meaning == diff::ParamMeaning::kNone);

  a.info = {5, 0};
  b.info = {6, 0};
  f = p.first(a, b);
  CHECK(f.cause == diff::Cause::kScalarParameters);
  CHECK(f.summary == "scalar parameters: same kernel and inputs; parameter 2 differs");
}

TEST_CASE("4-byte parameters never hold host addresses whatever the word they share reads as") {
  Pair p;
  Launch a, b;
  b.outDigest = 0x3333;
  // n and m make the word 0x00000001_000004xx, which reads as a host address
  // above 4 GiB; n alone differs.
  a.m = b.m = 1;
  b.n = 1025;
  diff::FirstDivergence f = p.first(a, b);
  CHECK(f.cause == diff::Cause::kScalarParameters);
  REQUIRE(f.params.size() == 1);
  CHECK(f.params[0].param == 3);
  CHECK(f.params[0].meaning == diff::ParamMeaning::kNone);

  // Sizes inside the heap in both runs, beside a zero: still values.
  p.regionsA = p.regionsB = {{0x00400000, 0x0c000000}};
  a.m = b.m = 0;
  a.n = 0x0951d340;
  b.n = 0x0951cf80;
  f = p.first(a, b);
  CHECK(f.cause == diff::Cause::kScalarParameters);
  REQUIRE(f.params.size() == 1);
  CHECK(f.params[0].meaning == diff::ParamMeaning::kNone);
}

TEST_CASE("a parameter the kernel's signature types as a number never holds host addresses") {
  Pair p;
  p.regionsA = p.regionsB = {{0x00400000, 0x0c000000}};
  Launch a, b;
  b.outDigest = 0x3333;
  a.splitInfo = b.splitInfo = true;
  a.info = {0x0951d340, 0x7f4c390d73d2};  // in the heap, and above 4 GiB
  b.info = {0x0951cf80, 0x7f745f2d73d2};
  // step(float*, float const*, void*, void*, int, int): may be host addresses.
  a.function = b.function = "_Z4stepPfPKfPvS2_ii";
  diff::FirstDivergence f = p.first(a, b);
  CHECK(f.cause == diff::Cause::kNondeterministicKernel);
  REQUIRE(f.params.size() == 2);
  CHECK(f.params[0].meaning == diff::ParamMeaning::kHostAddresses);
  CHECK(f.params[1].meaning == diff::ParamMeaning::kHostAddresses);

  // step(float*, float const*, long, unsigned long, int, int): sizes.
  a.function = b.function = "_Z4stepPfPKflmii";
  f = p.first(a, b);
  CHECK(f.cause == diff::Cause::kScalarParameters);
  REQUIRE(f.params.size() == 2);
  CHECK(f.params[0].meaning == diff::ParamMeaning::kNone);
  CHECK(f.params[1].meaning == diff::ParamMeaning::kNone);

  // A signature that does not match the layout says nothing.
  a.function = b.function = "_Z4stepPfPKflii";
  CHECK(p.first(a, b).cause == diff::Cause::kNondeterministicKernel);
}

TEST_CASE("a real scalar difference beside host addresses is named alone in the summary") {
  Pair p;
  Launch a, b;
  a.info = {kStackA, 0};
  b.info = {kStackB, 0};
  b.n = 1025;
  b.outDigest = 0x3333;
  const diff::FirstDivergence f = p.first(a, b);
  CHECK(f.cause == diff::Cause::kScalarParameters);
  CHECK(f.summary == "scalar parameters: same kernel and inputs; parameter 3 differs");
  REQUIRE(f.params.size() == 2);
  CHECK(f.params[0].meaning == diff::ParamMeaning::kHostAddresses);
  CHECK_THAT(evidence(f), Catch::Contains("parameter 2 (bytes 0x10-0x20, host addresses)") &&
                              Catch::Contains("parameter 3 (bytes 0x20-0x24): run A 0x00000400 (int 1024"));
}

TEST_CASE("a launch re-executed with different results is a nondeterministic kernel whatever its parameters") {
  Pair p;
  Launch a, b;
  b.n = 1025;  // a real difference, which the re-executions did not involve
  b.outDigest = 0x3333;
  a.check = DeterminismCheck{10, 3};
  const diff::FirstDivergence f = p.first(a, b);
  CHECK(f.cause == diff::Cause::kNondeterministicKernel);
  CHECK(f.summary == "nondeterministic kernel: re-executed from the same recorded state, it gives different results");
  REQUIRE(f.evidence.size() >= 3);
  CHECK(f.evidence[0].kind == diff::EvidenceKind::kRecorderReran);
  CHECK(f.evidence[0].numbers == std::vector<uint64_t>{10, 0, 3});
  CHECK(diff::sentence(f.evidence[0]) == "the recorder re-ran it 10 times from run A's state: 3 distinct results");
  CHECK(f.evidence[1].kind == diff::EvidenceKind::kParametersDifferToo);
  CHECK_THAT(diff::sentence(f.evidence[1]), Catch::StartsWith("the runs' parameters differ too"));
  CHECK_THAT(evidence(f), Catch::Contains("parameter 3 (bytes 0x20-0x24): run A 0x00000400"));
  CHECK(std::none_of(f.evidence.begin(), f.evidence.end(), [](const diff::Evidence& e) {
    return e.kind == diff::EvidenceKind::kHostComputedValue;
  }));
  CHECK_THAT(evidence(f), !Catch::Contains("a value computed on the host"));

  SECTION("re-executions that gave one result change nothing") {
    a.check = DeterminismCheck{10, 1};
    CHECK(p.first(a, b).cause == diff::Cause::kScalarParameters);
  }
}

TEST_CASE("a re-execution's proof leaves pointer differences and other causes alone") {
  diff::FirstDivergence d;
  d.a.kind = diff::OpKind::kLaunch;
  d.cause = diff::Cause::kScalarParameters;
  d.params.push_back({8, 8, 1, "alloc#2+0x0", "alloc#2+0x80", diff::ParamMeaning::kPointer});
  CHECK_FALSE(diff::provenNondeterministic(d, "replayed"));
  d.params.clear();
  d.cause = diff::Cause::kUninitialisedMemory;
  CHECK_FALSE(diff::provenNondeterministic(d, "replayed"));
  d.cause = diff::Cause::kUnknown;
  d.summary = "unknown: same parameters, different outputs, and 1 input of the launch could not be compared";
  CHECK(diff::provenNondeterministic(d, "replayed"));
  CHECK(d.cause == diff::Cause::kNondeterministicKernel);
  CHECK(d.evidence.at(0).kind == diff::EvidenceKind::kReexecuted);
  CHECK(diff::sentence(d.evidence.at(0)) == "replayed");
  CHECK(d.evidence.at(1).kind == diff::EvidenceKind::kBeforeReexecutions);
  CHECK(diff::sentence(d.evidence.at(1)) == "before the re-executions: " +
                                                std::string("unknown: same parameters, different outputs, and 1 "
                                                            "input of the launch could not be compared"));
  d.cause = diff::Cause::kUnknown;
  d.path = true;
  CHECK_FALSE(diff::provenNondeterministic(d, "replayed"));
}

TEST_CASE("values below 4 GiB are host addresses where both traces say that host memory was mapped") {
  // Python's heap with the layout fixed (values seen on a GPU): below 4 GiB.
  Pair p;
  Launch a, b;
  a.info = {0x0951d340, 0x07cede68};
  b.info = {0x0951cf80, 0x0765bb78};
  b.outDigest = 0x3333;
  p.regionsA = {{0x00400000, 0x00800000}, {0x07000000, 0x0a000000}};
  p.regionsB = {{0x07000000, 0x0a000000}};
  diff::FirstDivergence f = p.first(a, b);
  CHECK(f.cause == diff::Cause::kNondeterministicKernel);
  REQUIRE(f.params.size() == 1);
  CHECK(f.params[0].meaning == diff::ParamMeaning::kHostAddresses);

  SECTION("one word outside run B's regions is a real difference") {
    b.info[1] = 0x0a000000;  // the end of the region: outside it
    f = p.first(a, b);
    CHECK(f.cause == diff::Cause::kScalarParameters);
    CHECK(f.params.at(0).meaning == diff::ParamMeaning::kNone);
  }
  SECTION("without host regions in one trace (an older recorder), low values count") {
    p.regionsB.clear();
    f = p.first(a, b);
    CHECK(f.cause == diff::Cause::kScalarParameters);
  }
}

TEST_CASE("a trace's host regions survive writing and reading, sorted and merged") {
  const fs::path dir = fs::temp_directory_path() / ("gpurr-host-regions-" + std::to_string(getpid()));
  fs::remove_all(dir);
  {
    TraceWriter w(dir, Header{});
    w.setHostRegions({{0x7ffff7000000, 0x7ffff7100000}, {0x400000, 0x500000}, {0x480000, 0x490000},
                      {0x500000, 0x510000}});
    w.close();
  }
  CHECK(TraceReader(dir).hostRegions() ==
        std::vector<HostRegion>{{0x400000, 0x510000}, {0x7ffff7000000, 0x7ffff7100000}});
  fs::remove(dir / "index");  // a recording that did not end cleanly has none
  fs::remove(dir / "checksums");
  CHECK(TraceReader(dir).hostRegions().empty());
  fs::remove_all(dir);
}
