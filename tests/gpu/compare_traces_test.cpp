// CPU test of compare_traces.py, the GPU suite's judge: on pairs of traces
// made with TraceWriter that differ in known ways, it must accept exactly the
// differences it is told to expect and report every other one.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/unit/test_util.h"
#include "trace_format/trace.h"

namespace fs = std::filesystem;
using gpurr::testing::TempDir;
using namespace gpurr::trace;

namespace {

struct Launch {
  std::string function = "_Z6reducePKfPf";
  uint32_t scalar = 7;
  uint64_t inDigest = 0x1111;
  uint64_t outDigest = 0x2222;
  uint32_t gridX = 64;
  uint64_t host = 0;  // a word the host left in the parameters (a heap pointer)
  uint64_t outPointer = 4096;  // where the second pointer parameter points
};

// One allocation at `base` (which differs between runs, like real
// addresses), and launches whose two pointer parameters point into it.
void makeTrace(const fs::path& dir, const std::vector<Launch>& launches, uint64_t base,
               const std::vector<GraphLaunch>& graphs = {}, const std::vector<HostRegion>& regions = {}) {
  TraceWriter w(dir, Header{});
  w.setHostRegions(regions);
  uint64_t seq = 0;
  Allocation a;
  a.ordinal = 1;
  a.address = base;
  a.size = 1 << 20;
  w.append(Event{seq++, 1, 0, a});
  for (const Launch& l : launches) {
    KernelLaunch k;
    k.function = l.function;
    k.grid = {l.gridX, 1, 1};
    k.block = {256, 1, 1};
    const uint64_t in = base, out = base + l.outPointer;
    k.params.resize(32);
    std::memcpy(k.params.data(), &in, 8);
    std::memcpy(k.params.data() + 8, &out, 8);
    std::memcpy(k.params.data() + 16, &l.scalar, 4);
    std::memcpy(k.params.data() + 24, &l.host, 8);
    k.paramLayout = {{0, 8}, {8, 8}, {16, 4}, {24, 8}};
    k.pointers = {{0, 1, 0}, {8, 1, l.outPointer}};
    RangeDigest i;
    i.range = {in, 4096, 1, 0};
    i.digest = l.inDigest;
    RangeDigest o;
    o.range = {base + 4096, 4, 1, 4096};
    o.digest = l.outDigest;
    k.inputs = {i};
    k.outputs = {o};
    w.append(Event{seq++, seq * 10, 0, k});
  }
  for (const GraphLaunch& g : graphs) w.append(Event{seq++, seq * 10, 0, g});
  w.close();
}

struct Run {
  int code = -1;
  std::string output;
};

Run compare(const fs::path& a, const fs::path& b, const std::string& options, const TempDir& tmp) {
  const fs::path out = tmp / "compare.out";
  const std::string cmd = std::string("python3 ") + GPURR_SOURCE_DIR + "/tests/gpu/compare_traces.py --gpurr " +
                          GPURR_BINARY_DIR + "/bin/gpurr " + options + " " + a.string() + " " +
                          b.string() + " > " + out.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(out);
  Run r;
  r.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<Launch> program() {
  Launch fill;
  fill.function = "_Z4fillPfS_j";
  Launch reduce;
  Launch tail;
  tail.function = "_Z4tailPfS_j";
  return {fill, reduce, tail};
}

}  // namespace

TEST_CASE("identical recordings pass, addresses may differ, allocations may not") {
  TempDir tmp;
  makeTrace(tmp / "a.gpurr", program(), 0x7f0000000000);
  makeTrace(tmp / "b.gpurr", program(), 0x7e5500000000);  // another run, another address
  Run r = compare(tmp / "a.gpurr", tmp / "b.gpurr", "--min-launches 3", tmp);
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("3 launches compared"));
  r = compare(tmp / "a.gpurr", tmp / "b.gpurr", "--min-launches 4", tmp);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("3 launches recorded, expected at least 4"));
}

TEST_CASE("a differing output passes only where it is expected") {
  TempDir tmp;
  std::vector<Launch> b = program();
  b[1].outDigest = 0x3333;
  makeTrace(tmp / "a.gpurr", program(), 0x7f0000000000);
  makeTrace(tmp / "b.gpurr", b, 0x7f0000000000);
  Run r = compare(tmp / "a.gpurr", tmp / "b.gpurr", "", tmp);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("launch 1 reduce(float const*, float*) (seq 2/2): differs in "
                                       "['outputs'], expected nothing"));
  CHECK_THAT(r.output, Catch::Contains("digest 0000000000002222 vs 0000000000003333"));
  CHECK(compare(tmp / "a.gpurr", tmp / "b.gpurr", "--differ reduce=outputs", tmp).code == 0);
  CHECK(compare(tmp / "a.gpurr", tmp / "b.gpurr", "--differ '^_Z6reduce=outputs'", tmp).code == 0);
  // Expected to differ in more than it does, or somewhere else: both fail.
  CHECK(compare(tmp / "a.gpurr", tmp / "b.gpurr", "--differ reduce=inputs,outputs", tmp).code == 1);
  CHECK(compare(tmp / "a.gpurr", tmp / "b.gpurr", "--differ fill=outputs", tmp).code == 1);
}

TEST_CASE("parameters, inputs and launch configuration are compared") {
  TempDir tmp;
  makeTrace(tmp / "a.gpurr", program(), 0x7f0000000000);
  std::vector<Launch> b = program();
  b[0].scalar = 8;
  b[2].inDigest = 0x9999;
  b[2].gridX = 32;
  makeTrace(tmp / "b.gpurr", b, 0x7f0000000000);
  Run r = compare(tmp / "a.gpurr", tmp / "b.gpurr", "", tmp);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("launch 0 fill(float*, float*, unsigned int) (seq 1/1): "
                                       "differs in ['params']"));
  CHECK_THAT(r.output, Catch::Contains("params: byte 16 differs (0x07 vs 0x08)"));
  CHECK_THAT(r.output, Catch::Contains("differs in ['config', 'inputs']"));
  r = compare(tmp / "a.gpurr", tmp / "b.gpurr", "--differ fill=params --differ tail=config,inputs", tmp);
  CHECK(r.code == 0);
}

TEST_CASE("may-differ allows differing bytes of parameters but not where pointers point") {
  TempDir tmp;
  makeTrace(tmp / "a.gpurr", program(), 0x7f0000000000);
  std::vector<Launch> b = program();
  b[1].scalar = 8;  // an unwritten byte of a struct passed by value, say
  makeTrace(tmp / "b.gpurr", b, 0x7f0000000000);
  CHECK(compare(tmp / "a.gpurr", tmp / "b.gpurr", "--may-differ reduce=params", tmp).code == 0);
  // Nothing differs: allowed too.
  CHECK(compare(tmp / "a.gpurr", tmp / "a.gpurr", "--may-differ reduce=params", tmp).code == 0);
  // Another kernel's bytes, or this one's outputs, are not covered.
  Run r = compare(tmp / "a.gpurr", tmp / "b.gpurr", "--may-differ fill=params", tmp);
  CHECK(r.code == 1);
  b[1].scalar = 7;
  b[1].outDigest = 0x3333;
  makeTrace(tmp / "c.gpurr", b, 0x7f0000000000);
  r = compare(tmp / "a.gpurr", tmp / "c.gpurr", "--may-differ reduce=params", tmp);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("differs in ['outputs'], expected at most ['params'], pointers alike"));
  // A pointer that points elsewhere is never a byte that may differ.
  b[1].outDigest = 0x2222;
  b[1].outPointer = 8192;
  makeTrace(tmp / "d.gpurr", b, 0x7f0000000000);
  r = compare(tmp / "a.gpurr", tmp / "d.gpurr", "--may-differ reduce=params", tmp);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("differs in ['params'], expected at most ['params'], pointers alike"));
}

TEST_CASE("host addresses in parameters are no difference, by the diff's rule") {
  TempDir tmp;
  std::vector<Launch> a = program(), b = program();
  a[1].host = 0x0951d340;  // Python's heap below 4 GiB, at another place in each run
  b[1].host = 0x0951cf80;
  const std::vector<HostRegion> heap = {{0x07000000, 0x0a000000}};
  makeTrace(tmp / "a.gpurr", a, 0x7f0000000000, {}, heap);
  makeTrace(tmp / "b.gpurr", b, 0x7f0000000000, {}, heap);
  CHECK(compare(tmp / "a.gpurr", tmp / "b.gpurr", "", tmp).code == 0);
  makeTrace(tmp / "c.gpurr", b, 0x7f0000000000);  // no host regions: a value like any other
  Run r = compare(tmp / "a.gpurr", tmp / "c.gpurr", "", tmp);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("params: byte 24 differs (0x40 vs 0x80)"));
  a[1].host = 0x7ffd98652200;  // stack addresses: host addresses without regions too
  b[1].host = 0x7ffefd92b1a0;
  makeTrace(tmp / "d.gpurr", a, 0x7f0000000000);
  makeTrace(tmp / "e.gpurr", b, 0x7f0000000000);
  CHECK(compare(tmp / "d.gpurr", tmp / "e.gpurr", "", tmp).code == 0);
}

TEST_CASE("different kernel sequences and unused expectations are reported") {
  TempDir tmp;
  makeTrace(tmp / "a.gpurr", program(), 0x7f0000000000);
  std::vector<Launch> b = program();
  b[1].function = "_Z6otherPKfPf";
  makeTrace(tmp / "b.gpurr", b, 0x7f0000000000);
  Run r = compare(tmp / "a.gpurr", tmp / "b.gpurr", "", tmp);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("launch 1: different kernels"));
  makeTrace(tmp / "c.gpurr", program(), 0x7f0000000000);
  r = compare(tmp / "a.gpurr", tmp / "c.gpurr", "--differ nosuchkernel=outputs", tmp);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("--differ nosuchkernel=outputs: no launch of a matching kernel"));
  r = compare(tmp / "a.gpurr", tmp / "c.gpurr", "--differ reduce=colour", tmp);
  CHECK(r.code != 0);
  CHECK_THAT(r.output, Catch::Contains("unknown aspects ['colour']"));
}

TEST_CASE("directories of traces are compared process by process") {
  TempDir tmp;
  std::vector<Launch> changed = program();
  changed[1].outDigest = 0x4444;
  makeTrace(tmp / "a" / "rank0.gpurr", program(), 0x7f0000000000);
  makeTrace(tmp / "a" / "rank1.gpurr", program(), 0x7f0000000000);
  makeTrace(tmp / "b" / "rank0.gpurr", program(), 0x7f1000000000);
  makeTrace(tmp / "b" / "rank1.gpurr", changed, 0x7f1000000000);
  Run r = compare(tmp / "a", tmp / "b", "", tmp);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("1 problem(s)"));
  CHECK(compare(tmp / "a", tmp / "a", "--min-launches 3", tmp).code == 0);
}

TEST_CASE("graph launches must each be read node by node and hash so many ranges (--graph-ranges)") {
  TempDir tmp;
  auto graph = [](uint32_t nodes, size_t ranges) {
    GraphLaunch g;
    g.graphExec = 0xE1;
    g.nodeCount = nodes;
    for (size_t i = 0; i < ranges; ++i) g.outputs.push_back({{0x7f0000000000 + 4096 * i, 4096, 1, 4096 * i}, 0x44, {}});
    return g;
  };
  GraphLaunch captured = graph(0, 0);
  captured.captured = true;  // not a launch that ran: not judged
  auto check = [&](const std::vector<GraphLaunch>& graphs) {
    fs::remove_all(tmp / "a.gpurr");
    fs::remove_all(tmp / "b.gpurr");
    makeTrace(tmp / "a.gpurr", program(), 0x7f0000000000, graphs);
    makeTrace(tmp / "b.gpurr", program(), 0x7f0000000000, graphs);
    return compare(tmp / "a.gpurr", tmp / "b.gpurr", "--graph-ranges 1", tmp);
  };
  CHECK(check({graph(4, 1), captured}).code == 0);
  Run r = check({});
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("no graph launch recorded"));
  r = check({graph(4, 1), graph(0, 3)});
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("its nodes were not read (nodeCount 0), so it hashed every allocation"));
  r = check({graph(4, 2)});
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("(seq 4, 4 nodes): 2 ranges hashed after it, expected 1"));
}

TEST_CASE("gpurr info counts the graph launches whose nodes were not read") {
  TempDir tmp;
  GraphLaunch read, whole, captured;
  read.nodeCount = 4;
  captured.captured = true;
  makeTrace(tmp / "a.gpurr", program(), 0x7f0000000000, {read, whole, captured});
  const fs::path out = tmp / "info.out";
  const std::string info = std::string(GPURR_BINARY_DIR) + "/bin/gpurr info ";
  REQUIRE(std::system((info + (tmp / "a.gpurr").string() + " > " + out.string()).c_str()) == 0);
  std::ifstream text(out);
  CHECK_THAT(std::string(std::istreambuf_iterator<char>(text), std::istreambuf_iterator<char>()),
             Catch::Contains("1 graph launch hashed every allocation: their nodes were not read"));
  REQUIRE(std::system((info + "--json " + (tmp / "a.gpurr").string() + " > " + out.string()).c_str()) == 0);
  std::ifstream json(out);
  CHECK_THAT(std::string(std::istreambuf_iterator<char>(json), std::istreambuf_iterator<char>()),
             Catch::Contains("\"graphLaunchesHashedWhole\": 1"));
}
