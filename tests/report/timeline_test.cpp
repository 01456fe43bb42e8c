// timelineAround on the golden diff pairs (tests/diff/cases, compared as
// `gpurr diff` compares them; their checked-in diff JSON says what to expect)
// and on longer generated runs written in small blocks over two streams,
// diffed by the gpurr binary.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>

#include "model_util.h"
#include "report/timeline.h"
#include "report_test_util.h"
#include "trace_format/trace.h"

using namespace gpurr;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const json& process(const json& diff, size_t i = 0) { return diff.at("processes").at(i); }

// The same comparison as the model the timeline reads: runs `a` and `b`
// compared as `gpurr diff` compares them, process `i`.
diff::ProcessDiff processOf(const fs::path& a, const fs::path& b, size_t i = 0) {
  return testutil::compare(a, b).processes.at(i);
}

const json& rowWith(const json& timeline, bool divergent) {
  for (const json& r : timeline.at("rows")) {
    if (r.at("divergent").get<bool>() == divergent) return r;
  }
  throw std::runtime_error("no such row");
}

}  // namespace

TEST_CASE("timeline of a nondeterministic kernel: the steps before it and what read its output") {
  const fs::path dir = testutil::caseDir("nondeterministic_kernel");
  const json diff = testutil::loadJson(dir / "expected.json");
  const json t = report::timelineAround(dir / "a.gpurr", dir / "b.gpurr", processOf(dir / "a.gpurr", dir / "b.gpurr"));
  const json& rows = t.at("rows");
  // Nine operations in all; index_add_ is the seventh: six before, two after.
  REQUIRE(rows.size() == 9);
  CHECK(t.at("path") == false);
  CHECK(t.at("a").at("anchorSeq") == 13);
  CHECK(t.at("a").at("anchorIndex") == 6);
  for (size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].at("offset") == static_cast<int>(i) - 6);
    CHECK(rows[i].at("a").at("index") == i);
    CHECK(rows[i].at("b").at("index") == i);
    CHECK(rows[i].at("sameOperation") == true);
    CHECK(rows[i].at("stretch") == false);
  }
  const json& d = rows[6];
  CHECK(d.at("divergent") == true);
  CHECK(d.at("a").at("seq") == 13);
  CHECK(d.at("b").at("seq") == 13);
  CHECK(d.at("a").at("kind") == "launch");
  CHECK(d.at("a").at("short") == "at::native::indexFuncLargeIndex<float>");
  CHECK(d.at("a").at("launchIndex") == 3);
  CHECK(d.at("a").at("streamOrdinal") == 1);
  CHECK(d.at("a").at("grid") == json::array({512, 1, 1}));
  CHECK(d.at("inputsEqual") == true);
  CHECK(d.at("outputsEqual") == false);
  CHECK(d.at("a").at("outputs").at(0).at("same") == false);
  CHECK(d.at("a").at("outputs").at(0).at("digest") != d.at("b").at("outputs").at(0).at("digest"));
  CHECK(d.at("a").at("outputs").at(0).at("allocation") == 4);
  CHECK(d.at("a").at("inputs").size() == 3);
  CHECK(d.at("b").at("annotations").at(0).at("kind") == "determinism");
  CHECK(d.at("b").at("annotations").at(0).at("distinctResults") == 31);
  // Where each operation came from in train.py: index_add_ in the backward
  // of line 17's index_select, as the trace records it.
  const json& origin = d.at("a").at("origin");
  CHECK(origin.at("op") == "aten::index_add_");
  CHECK(origin.at("opStack").size() == 4);
  CHECK(origin.at("phase") == "backward");
  CHECK(origin.at("forwardOp") == "aten::index_select");
  CHECK(origin.at("module") == "net.embed");
  CHECK(origin.at("file") == "/home/user/project/train.py");
  CHECK(origin.at("line") == 17);
  CHECK(origin.at("step") == 0);
  CHECK(origin.at("stepLaunch") == 3);
  CHECK(d.at("b").at("origin") == origin);
  CHECK(rows[8].at("a").at("origin").at("op") == "aten::_local_scalar_dense");
  // Before it everything is equal; the sum reads its output, the copy out
  // carries the different loss.
  for (size_t i = 0; i < 6; ++i) CHECK(rows[i].at("outputsEqual") == true);
  CHECK(rows[7].at("inputsEqual") == false);
  CHECK(rows[7].at("a").at("short") == "at::native::sum_kernel<float>");
  CHECK(rows[8].at("a").at("kind") == "memcpy");
  CHECK(rows[8].at("a").at("name") == "memcpy DtoH");
  CHECK(rows[8].at("a").at("launchIndex").is_null());
  CHECK(rows[8].at("outputsEqual") == false);
  // Launch numbers count on from the diff's.
  CHECK(rows[0].at("a").at("launchIndex") == 0);
  CHECK(rows[3].at("a").at("launchIndex") == 1);
  CHECK(rows[5].at("a").at("kind") == "memset");

  SECTION("a narrower window") {
    const json n = report::timelineAround(dir / "a.gpurr", dir / "b.gpurr", processOf(dir / "a.gpurr", dir / "b.gpurr"), 2);
    REQUIRE(n.at("rows").size() == 5);
    CHECK(n.at("rows")[0].at("a").at("index") == 4);
    CHECK(n.at("rows")[2].at("divergent") == true);
    CHECK(n.at("rows")[4].at("a").at("index") == 8);
  }
}

TEST_CASE("timeline of a path divergence: each run's stretch, then the runs side by side again") {
  const fs::path dir = testutil::caseDir("algorithm_choice");
  const json diff = testutil::loadJson(dir / "expected.json");
  const json t = report::timelineAround(dir / "a.gpurr", dir / "b.gpurr", processOf(dir / "a.gpurr", dir / "b.gpurr"));
  const json& rows = t.at("rows");
  CHECK(t.at("path") == true);
  // 3 before, a stretch of 1 (A) against 3 (B), then 5 operations.
  REQUIRE(rows.size() == 11);
  const json& d = rows[3];
  CHECK(d.at("divergent") == true);
  CHECK(d.at("stretch") == true);
  CHECK(d.at("offset") == 0);
  CHECK(d.at("sameOperation") == false);
  CHECK(d.at("a").at("seq") == 9);
  CHECK(d.at("b").at("seq") == 10);
  CHECK(d.at("a").at("annotations").at(0).at("algorithm") == "engine=3 (implicit GEMM)");
  CHECK(d.at("b").at("annotations").at(0).at("algorithm") == "engine=12 (FFT)");
  CHECK(d.at("b").at("name") == "cudnn_fft_r2c_nhwc_input_transform_kernel");
  // This trace has FrameworkOp annotations and no origins.
  CHECK(d.at("a").at("origin").is_null());
  CHECK(d.at("a").at("annotations").at(1).at("kind") == "frameworkOp");
  // A stretch pairs different operations: no digest comparison.
  CHECK(d.at("outputsEqual").is_null());
  CHECK(d.at("a").at("outputs").at(0).at("same").is_null());
  for (size_t i : {4u, 5u}) {
    CHECK(rows[i].at("stretch") == true);
    CHECK(rows[i].at("a").is_null());
    CHECK(rows[i].at("sameOperation").is_null());
  }
  CHECK(rows[4].at("b").at("name") == "cudnn_fft_cgemm_batched_kernel");
  CHECK(rows[5].at("b").at("name") == "cudnn_fft_c2r_nhwc_output_transform_kernel");
  // After the stretch: A's operation 4 is B's operation 6 (relu).
  CHECK(rows[6].at("stretch") == false);
  CHECK(rows[6].at("a").at("index") == 4);
  CHECK(rows[6].at("b").at("index") == 6);
  CHECK(rows[6].at("sameOperation") == true);
  CHECK(rows[6].at("outputsEqual") == false);
  CHECK(rows[10].at("a").at("kind") == "memcpy");
  for (size_t i = 0; i < 3; ++i) CHECK(rows[i].at("outputsEqual") == true);
  // Launch numbers go on across the stretch on each side.
  CHECK(rows[6].at("a").at("launchIndex") == 2);
  CHECK(rows[6].at("b").at("launchIndex") == 4);
}

// A launch may list its ranges in another order in each run (the order of
// their addresses); the diff pairs them by allocation and offset, and so
// do the timeline's marks: rows before the divergence are all equal.
TEST_CASE("timeline of runs that list a launch's ranges in another order marks them equal") {
  const fs::path dir = testutil::caseDir("nondeterministic_kernel");
  const testutil::TempDir tmp("timeline_range_order");
  {
    const trace::TraceReader r(dir / "b.gpurr");
    trace::TraceWriter w(tmp.path / "b.gpurr", r.header());
    size_t reversed = 0;
    for (trace::Event ev : r.readAll()) {
      if (auto* k = std::get_if<trace::KernelLaunch>(&ev.payload); k && k->inputs.size() > 1) {
        std::reverse(k->inputs.begin(), k->inputs.end());
        ++reversed;
      }
      w.append(ev);
    }
    w.close();
    REQUIRE(reversed > 0);
  }
  const json t = report::timelineAround(dir / "a.gpurr", tmp.path / "b.gpurr",
                                        processOf(dir / "a.gpurr", tmp.path / "b.gpurr"));
  size_t before = 0;
  for (const json& row : t.at("rows")) {
    if (row.at("divergent").get<bool>()) break;
    if (row.at("a").is_null() || row.at("b").is_null()) continue;
    ++before;
    INFO(row.dump());
    CHECK(row.at("inputsEqual") == true);
    CHECK(row.at("outputsEqual") == true);
  }
  CHECK(before > 0);
}

TEST_CASE("timeline of identical runs is empty") {
  const fs::path dir = testutil::caseDir("identical");
  const json diff = testutil::loadJson(dir / "expected.json");
  const json t = report::timelineAround(dir / "a.gpurr", dir / "b.gpurr", processOf(dir / "a.gpurr", dir / "b.gpurr"));
  CHECK(t.at("rows").empty());
  CHECK(t.at("a").is_null());
  CHECK(t.at("b").is_null());
  CHECK(report::timelineAround(dir / "a.gpurr", dir / "b.gpurr", diff::ProcessDiff{}).at("rows").empty());
}

TEST_CASE("timeline of a damaged trace stops where its last complete block ends") {
  const fs::path dir = testutil::caseDir("truncated");
  const json diff = testutil::loadJson(dir / "expected.json");
  const json t = report::timelineAround(dir / "a.gpurr", dir / "b.gpurr", processOf(dir / "a.gpurr", dir / "b.gpurr"));
  const json& d = rowWith(t, true);
  CHECK(d.at("outputsEqual") == false);
  size_t onlyA = 0;
  for (const json& r : t.at("rows")) onlyA += !r.at("a").is_null() && r.at("b").is_null();
  // Run B lost its last operations; run A's are shown alone.
  CHECK(onlyA > 0);
}

TEST_CASE("timeline of several processes reads the pair it is given") {
  const fs::path dir = testutil::caseDir("processes");
  const diff::ProcessDiff p = processOf(dir / "a", dir / "b", 1);
  REQUIRE(p.name == "rank1.gpurr");
  const json t = report::timelineAround(dir / "a" / "rank1.gpurr", dir / "b" / "rank1.gpurr", p);
  CHECK(t.at("process") == "rank1.gpurr");
  CHECK(rowWith(t, true).at("a").at("short") == "at::native::indexFuncLargeIndex<float>");
}

TEST_CASE("a diff of other traces is refused, naming the trace") {
  const fs::path dir = testutil::caseDir("nondeterministic_kernel");
  const diff::ProcessDiff p = processOf(dir / "a.gpurr", dir / "b.gpurr");
  const fs::path other = testutil::caseDir("algorithm_choice");
  try {
    report::timelineAround(other / "a.gpurr", other / "b.gpurr", p);
    FAIL("no error");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(e.what(), Catch::Contains("a.gpurr") && Catch::Contains("event #13") &&
                             Catch::Contains("other traces"));
  }
  CHECK_THROWS_AS(report::timelineAround(other / "missing.gpurr", other / "b.gpurr", p),
                  trace::TraceError);
}

TEST_CASE("timeline of long runs in many blocks over two streams") {
  const testutil::TempDir tmp("timeline_long");
  testutil::LongRuns runs;
  runs.divergeAt = 200;
  runs.write(tmp.path / "a.gpurr", tmp.path / "b.gpurr");
  {
    const trace::TraceReader r(tmp.path / "a.gpurr");
    REQUIRE(r.blocks().size() > 20);  // the window must reach back across blocks
  }
  const json diff = testutil::gpurrDiff(tmp.path, "a.gpurr", "b.gpurr");
  const json& p = process(diff);
  const json& first = p.at("firstDivergence");
  const diff::ProcessDiff model = processOf(tmp.path / "a.gpurr", tmp.path / "b.gpurr");
  REQUIRE(first.at("a").at("launchIndex") == 200);
  const json t = report::timelineAround(tmp.path / "a.gpurr", tmp.path / "b.gpurr", model);
  const json& rows = t.at("rows");
  REQUIRE(rows.size() == 25);
  const uint64_t anchor = first.at("a").at("index").get<uint64_t>();
  const uint64_t divStream = rows[12].at("a").at("stream").get<uint64_t>();
  std::optional<uint64_t> lastLaunch;
  size_t otherStream = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& r = rows[i];
    CHECK(r.at("offset") == static_cast<int>(i) - 12);
    CHECK(r.at("divergent") == (i == 12));
    CHECK(r.at("a").at("index") == anchor + i - 12);
    CHECK(r.at("a").at("seq") == runs.seqOfOperation(anchor + i - 12));
    CHECK(r.at("b").at("seq") == r.at("a").at("seq"));
    // Run B's launches write other bytes from the divergence on; copies and
    // memsets write the same.
    CHECK(r.at("outputsEqual") == (i < 12 || r.at("a").at("kind") != "launch"));
    if (r.at("a").at("kind") == "launch") {
      const uint64_t li = r.at("a").at("launchIndex").get<uint64_t>();
      if (lastLaunch) CHECK(li == *lastLaunch + 1);
      lastLaunch = li;
    }
    // The diff numbers the divergent launch's stream; other streams stay
    // unnumbered rather than guessed.
    if (r.at("a").at("stream") == divStream) {
      CHECK(r.at("a").at("streamOrdinal") == first.at("a").at("stream"));
    } else {
      CHECK(r.at("a").at("streamOrdinal").is_null());
      ++otherStream;
    }
  }
  CHECK(otherStream > 0);
  CHECK(rows[12].at("a").at("launchIndex") == 200);
  CHECK(rows[12].at("inputsEqual") == true);

  // Only the blocks around the window are decoded: a block far before it
  // may be corrupt without the timeline noticing.
  {
    const trace::TraceReader r(tmp.path / "a.gpurr");
    const auto& blocks = r.blocks();
    REQUIRE(r.blockOf(rows[0].at("a").at("seq").get<uint64_t>()) > 3);
    const uint64_t at = blocks[3].fileOffset - blocks[2].compressedSize / 2;  // inside block 2's frame
    std::fstream f(tmp.path / "a.gpurr" / "events", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    const char byte = static_cast<char>(f.get() ^ 0x5a);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(byte);
  }
  CHECK_THROWS_AS(trace::TraceReader(tmp.path / "a.gpurr").readAll(), trace::TraceError);
  CHECK(report::timelineAround(tmp.path / "a.gpurr", tmp.path / "b.gpurr", model) == t);
}

TEST_CASE("timeline of a run that inserted operations: the empty side is found by counting") {
  const testutil::TempDir tmp("timeline_insert");
  testutil::LongRuns runs;
  runs.insertAt = 150;  // run B launches two extra kernels before launch 150
  runs.write(tmp.path / "a.gpurr", tmp.path / "b.gpurr");
  const json diff = testutil::gpurrDiff(tmp.path, "a.gpurr", "b.gpurr");
  const json& first = process(diff).at("firstDivergence");
  REQUIRE(first.at("path") == true);
  REQUIRE(first.at("a").is_null());
  const json t = report::timelineAround(tmp.path / "a.gpurr", tmp.path / "b.gpurr", processOf(tmp.path / "a.gpurr", tmp.path / "b.gpurr"), 4);
  const json& rows = t.at("rows");
  // 4 before, the 2 inserted launches, 4 after.
  REQUIRE(rows.size() == 10);
  CHECK(t.at("a").at("anchorSeq").is_null());
  CHECK(rows[4].at("divergent") == true);
  CHECK(rows[4].at("a").is_null());
  CHECK(rows[5].at("a").is_null());
  CHECK(rows[4].at("b").at("name") == "extra_kernel");
  // The diff numbers the stream of run B's stretch; before the divergence
  // run A's matching stream has the same number.
  size_t numbered = 0;
  for (size_t i = 0; i < 4; ++i) {
    CHECK(rows[i].at("a").at("streamOrdinal") == rows[i].at("b").at("streamOrdinal"));
    numbered += !rows[i].at("a").at("streamOrdinal").is_null();
  }
  CHECK(numbered > 0);
  for (size_t i : {0u, 1u, 2u, 3u, 6u, 7u, 8u, 9u}) {
    CHECK(rows[i].at("sameOperation") == true);
    CHECK(rows[i].at("outputsEqual") == true);
  }
  // The first operation after the stretch is A's operation at the stretch's index.
  CHECK(rows[6].at("a").at("index") == first.at("stretch").at("a").at("firstIndex"));
  CHECK(rows[6].at("a").at("seq") == runs.seqOfOperation(rows[6].at("a").at("index").get<uint64_t>()));
}

TEST_CASE("timeline of a long stretch shows its start and counts the rest") {
  const testutil::TempDir tmp("timeline_stretch");
  testutil::LongRuns runs;
  runs.insertAt = 100;
  runs.inserted = 40;
  runs.write(tmp.path / "a.gpurr", tmp.path / "b.gpurr");
  const json diff = testutil::gpurrDiff(tmp.path, "a.gpurr", "b.gpurr");
  const json t = report::timelineAround(tmp.path / "a.gpurr", tmp.path / "b.gpurr", processOf(tmp.path / "a.gpurr", tmp.path / "b.gpurr"), 5);
  const json& rows = t.at("rows");
  REQUIRE(rows.size() == 5 + 5 + 1 + 5);
  CHECK(rows[10].contains("elided"));
  CHECK(rows[10].at("elided").at("a") == 0);
  CHECK(rows[10].at("elided").at("b") == 35);
  CHECK(rows[11].at("sameOperation") == true);
}

TEST_CASE("short kernel names") {
  CHECK(report::shortKernelName("_ZN2at6native19indexFuncLargeIndexIfEEvPfPKfPKll") ==
        "at::native::indexFuncLargeIndex<float>");
  CHECK(report::demangled("_ZN2at6native19indexFuncLargeIndexIfEEvPfPKfPKll") ==
        "void at::native::indexFuncLargeIndex<float>(float*, float const*, long const*, long)");
  CHECK(report::shortKernelName("_Z8bias_addPfPKfi") == "bias_add");
  CHECK(report::demangled("not_mangled") == "not_mangled");
  CHECK(report::demangled("_Zgarbage") == "_Zgarbage");
  // A name of nested back-references (each template argument twice the one
  // before) would demangle to 200 MB at 44 levels: it is shown mangled.
  auto nested = [](int levels) {
    std::string name = "_Z1fIJ1AIiiE";
    for (int k = 0; k < levels; ++k) {
      std::string id;  // the substitution S<k in base 36>_
      for (int n = k; id.empty() || n > 0; n /= 36) id.insert(id.begin(), "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[n % 36]);
      name += "S_IS" + id + "_S" + id + "_E";
    }
    return name + "EEvv";
  };
  CHECK(report::demangled(nested(8)).starts_with("void f<A<int, int>, f<A, A>, f<A<int, int>, A<int, int> >"));
  CHECK(report::demangled(nested(44)) == nested(44));
  // Deeply nested templates lose their inner arguments first.
  const std::string cutlass =
      "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedINS1_9GemmShapeILi128ELi128ELi8EEEfEELb1EEEEEvNT_6ParamsE";
  const std::string s = report::shortKernelName(cutlass, 60);
  CHECK(s.size() <= 60);
  CHECK(s.rfind("cutlass::Kernel<", 0) == 0);
  // Plain names keep both ends.
  const std::string gemm =
      "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas";
  const std::string g = report::shortKernelName(gemm, 48);
  CHECK(g.size() == 48);
  CHECK(g.rfind("sm90_xmma_gemm", 0) == 0);
  CHECK(g.find("...") != std::string::npos);
  CHECK(g.substr(g.size() - 6) == "cublas");
}
