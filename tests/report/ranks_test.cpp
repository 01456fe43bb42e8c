// Two directories of per-rank traces compared: the pairs diffed side by side
// and reported in name order, the first refusal in that order, and the
// ranks missing from a run, whose trace did not end cleanly or could not be
// read, in the text and JSON reports.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "report/compare.h"
#include "report/diff_report.h"
#include "report/job.h"
#include "report/ranks.h"
#include "model_util.h"
#include "trace_format/trace.h"

using namespace gpurr;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("gpurr-ranks-" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// Rank `rank`'s trace: four launches, the last one's output `last`.
void writeRank(const fs::path& dir, int32_t rank, uint64_t last, const std::string& gpu = "NVIDIA H100 80GB HBM3",
               const std::vector<std::string>& command = {"python", "train.py"}) {
  trace::Header h;
  h.rank = rank;
  h.commandLine = command;
  h.gpus = {{0, gpu, "GPU-0", 132, 9, 0, 85520809984ULL, "0000:19:00.0"}};
  trace::TraceWriter w(dir, h);
  uint64_t seq = 0;
  w.append({seq, seq, 0, trace::Allocation{1, 0x7f0000000000, 1 << 20, trace::AllocationKind::kDevice, 0, 0}});
  ++seq;
  for (uint64_t i = 0; i < 4; ++i) {
    trace::KernelLaunch k;
    k.function = "_Z4stepPf";
    k.grid = {64, 1, 1};
    k.block = {128, 1, 1};
    trace::appendPointerParam(k, 0x7f0000000000, 1, 0);
    trace::RangeDigest r;
    r.range = {0x7f0000000000, 4096, 1, 0};
    r.digest = 0x100 + i + static_cast<uint64_t>(rank);
    k.inputs = {r};
    r.digest = i == 3 ? last : 0x200 + i + static_cast<uint64_t>(rank);
    k.outputs = {r};
    w.append({seq, seq, 0, k});
    ++seq;
  }
  w.close();
}

std::string name(int r) { return "rank" + std::to_string(r) + ".gpurr"; }

}  // namespace

TEST_CASE("ranks of two job directories: diffed side by side in rank order, missing and incomplete ranks said") {
  TempDir tmp;
  const fs::path a = tmp.path / "a", b = tmp.path / "b";
  for (int r = 0; r < 12; ++r) {
    writeRank(a / name(r), r, 0x5000 + r);
    if (r != 10) writeRank(b / name(r), r, r == 3 ? 0x9999 : 0x5000 + r);
  }
  fs::remove(b / name(7) / "index");  // as when rank 7 was killed
  fs::remove(b / name(7) / "checksums");
  const report::RunComparison c = report::compareRuns(a, b, false, nullptr);
  // Rank order (rank11 after rank9), whatever the threads' timing.
  REQUIRE(c.processes.size() == 11);
  std::vector<std::string> names;
  for (const diff::ProcessDiff& p : c.processes) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{name(0), name(1), name(2), name(3), name(4), name(5), name(6), name(7),
                                          name(8), name(9), name(11)});
  for (const diff::ProcessDiff& p : c.processes) CHECK(p.identical == (p.name != name(3)));
  CHECK(c.onlyA == std::vector<std::string>{name(10)});
  CHECK(c.onlyB.empty());
  CHECK(c.tracesA == 12);
  CHECK(c.tracesB == 11);
  REQUIRE(c.incompleteB.size() == 1);
  CHECK(c.incompleteB[0].name == name(7));
  CHECK(c.incompleteB[0].detail.find("did not end cleanly") != std::string::npos);
  CHECK(c.incompleteA.empty());

  std::ostringstream text;
  report::printComparison(text, report::Style{}, c);
  const std::string head = "gpurr diff " + a.string() + " " + b.string() + "\nranks: 12 in " + a.string() +
                           ", 11 in " + b.string() + "\n  missing in " + b.string() + ": rank10.gpurr\n" +
                           "  incomplete in " + b.string() +
                           ": rank7.gpurr (4 operations kept) (the recording did not end cleanly: compared up to "
                           "its last complete block)\n\n== process rank0.gpurr ==\n";
  CHECK(text.str().substr(0, head.size()) == head);
  // Reports alike (the identical ranks') once, the others named after it;
  // rank 7's says that its trace ended early, so it is not among them.
  const std::string alike = "identical: 4 operations match, with equal parameters and outputs\n\n== ranks 1, 2, "
                            "4-6, 8, 9, 11: the same report as rank0.gpurr, each with its own rank ==\n\n"
                            "== process rank3.gpurr ==\n";
  CHECK(text.str().substr(head.size(), alike.size()) == alike);
  CHECK(text.str().find("\n== process rank7.gpurr ==\nwarning: ") != std::string::npos);

  const nlohmann::ordered_json j = report::comparisonJson(c);
  const nlohmann::ordered_json& ranks = j.at("ranks");
  CHECK(ranks.at("a") == 12);
  CHECK(ranks.at("b") == 11);
  CHECK(ranks.at("missing").at("a").empty());
  CHECK(ranks.at("missing").at("b") == nlohmann::ordered_json::array({name(10)}));
  CHECK(ranks.at("incomplete").at("a").empty());
  REQUIRE(ranks.at("incomplete").at("b").size() == 1);
  CHECK(ranks.at("incomplete").at("b")[0].at("process") == name(7));
  CHECK(ranks.at("incomplete").at("b")[0].at("detail") == c.incompleteB[0].detail);

  // The HTML page says both.
  testutil::TestReport page;
  page.diff = c;
  const std::string html = page.html();
  CHECK(html.find("process <code>rank10.gpurr</code> was recorded in run A only") != std::string::npos);
  CHECK(html.find("process <code>rank7.gpurr</code> of run B: the recording did not end cleanly; compared up to its "
                  "last complete block") != std::string::npos);
}

TEST_CASE("a rank recorded in one run only with the others identical: not known, not diverged") {
  TempDir tmp;
  for (int r = 0; r < 4; ++r) {
    writeRank(tmp.path / "a" / name(r), r, 1);
    if (r != 2) writeRank(tmp.path / "b" / name(r), r, 1);
  }
  const report::RunComparison c = report::compareRuns(tmp.path / "a", tmp.path / "b", false, nullptr);
  CHECK_FALSE(c.identical());
  CHECK(c.unknown());
  CHECK(report::comparisonJson(c).at("verdict") == "notKnown");
  std::ostringstream text;
  report::printComparison(text, report::Style{}, c);
  CHECK_THAT(text.str(), Catch::EndsWith("\nnot known: the processes compared agree, but rank2.gpurr was recorded in "
                                         "run A only: its results are not known\n"));
  testutil::TestReport page;
  page.diff = c;
  CHECK_THAT(page.html(), Catch::Contains("but not all of them could be compared (a process recorded in one run only: "
                                          "see below)"));
  // No trace's name in both runs: none was compared, and the report says so.
  for (int r = 0; r < 4; ++r) writeRank(tmp.path / "c" / fmt::format("node0-local{}.gpurr", r), r, 1);
  const report::RunComparison none = report::compareRuns(tmp.path / "a", tmp.path / "c", false, nullptr);
  CHECK(none.unknown());
  std::ostringstream noneText;
  report::printComparison(noneText, report::Style{}, none);
  CHECK_THAT(noneText.str(), Catch::Contains("\nnot known: no process was compared (no trace's name is in both runs: "
                                             "pair them by giving each run's traces the same names), but "));
  // A divergence in a rank recorded in both decides, missing rank or not.
  fs::remove_all(tmp.path / "b" / name(3));
  writeRank(tmp.path / "b" / name(3), 3, 2);
  const report::RunComparison d = report::compareRuns(tmp.path / "a", tmp.path / "b", false, nullptr);
  CHECK_FALSE(d.unknown());
  CHECK(report::comparisonJson(d).at("verdict") == "diverged");
}

TEST_CASE("ranks all there and complete: no ranks lines, the JSON still counts them") {
  TempDir tmp;
  for (int r = 0; r < 3; ++r) {
    writeRank(tmp.path / "a" / name(r), r, 1);
    writeRank(tmp.path / "b" / name(r), r, 1);
  }
  const report::RunComparison c = report::compareRuns(tmp.path / "a", tmp.path / "b", false, nullptr);
  std::ostringstream text;
  report::printComparison(text, report::Style{}, c);
  CHECK(text.str().find("\nranks:") == std::string::npos);
  CHECK(report::comparisonJson(c).at("ranks").at("a") == 3);
  CHECK(report::comparisonJson(c).at("verdict") == "identical");
  CHECK(c.identical());

  // Two traces, not directories: no ranks at all.
  const report::RunComparison two =
      report::compareRuns(tmp.path / "a" / name(0), tmp.path / "b" / name(0), false, nullptr);
  CHECK_FALSE(report::comparisonJson(two).contains("ranks"));
}

TEST_CASE("ranks diffed side by side: the first refusal in rank order is the one thrown") {
  TempDir tmp;
  for (int r = 0; r < 9; ++r) {
    writeRank(tmp.path / "a" / name(r), r, 1);
    writeRank(tmp.path / "b" / name(r), r, 1, r == 2 || r == 8 ? "NVIDIA A100-SXM4-80GB" : "NVIDIA H100 80GB HBM3");
  }
  try {
    report::compareRuns(tmp.path / "a", tmp.path / "b", false, nullptr);
    FAIL("different GPU models were compared");
  } catch (const report::UsageError& e) {
    // rank2.gpurr comes before rank8.gpurr.
    CHECK(std::string(e.what()).find(name(2)) != std::string::npos);
    CHECK(std::string(e.what()).find(name(8)) == std::string::npos);
  }
}

TEST_CASE("a rank whose trace cannot be read is listed and the other ranks are compared all the same") {
  TempDir tmp;
  for (int r = 0; r < 4; ++r) {
    writeRank(tmp.path / "a" / name(r), r, 1);
    writeRank(tmp.path / "b" / name(r), r, r == 3 ? 2 : 1);
  }
  fs::remove(tmp.path / "a" / name(1) / "header");        // damaged
  fs::remove_all(tmp.path / "b" / name(2));                // left unbegun: its directory alone
  fs::create_directories(tmp.path / "b" / name(2));
  const report::RunComparison c = report::compareRuns(tmp.path / "a", tmp.path / "b", false, nullptr);
  REQUIRE(c.unreadable.size() == 2);
  CHECK(c.unreadable[0].name == name(1));
  CHECK_THAT(c.unreadable[0].detail, Catch::Contains((tmp.path / "a" / name(1)).string()));
  CHECK(c.unreadable[1].name == name(2));
  CHECK_THAT(c.unreadable[1].detail, Catch::Contains("no version marker"));
  REQUIRE(c.processes.size() == 2);  // ranks 0 and 3, rank 3 diverging
  CHECK(c.processes[1].name == name(3));
  CHECK(c.processes[1].firstDivergence.has_value());
  CHECK_FALSE(c.identical());
  CHECK_FALSE(c.unknown());  // a divergence was found
  std::ostringstream text;
  report::printComparison(text, report::Style{}, c);
  CHECK_THAT(text.str(), Catch::Contains("  unreadable: " + name(1) + ", not compared: "));
  CHECK_THAT(text.str(), Catch::Contains("  unreadable: " + name(2) + ", not compared: "));
  const auto json = report::comparisonJson(c).at("ranks").at("unreadable");
  REQUIRE(json.size() == 2);
  CHECK(json[1].at("process") == name(2));

  // With no divergence among the ranks read, nothing is known of the rest.
  fs::remove_all(tmp.path / "b" / name(3));
  writeRank(tmp.path / "b" / name(3), 3, 1);
  const report::RunComparison rest = report::compareRuns(tmp.path / "a", tmp.path / "b", false, nullptr);
  CHECK_FALSE(rest.identical());
  CHECK(rest.unknown());
}

TEST_CASE("ranks named by node and local rank: each number counted as a number, the node's first") {
  TempDir tmp;
  const std::vector<std::string> ordered{"node0-local2.gpurr", "node0-local10.gpurr", "node1-local0.gpurr",
                                         "node2-local1.gpurr", "node10-local0.gpurr"};
  for (size_t i = 0; i < ordered.size(); ++i) {
    const int r = static_cast<int>(ordered.size() - 1 - i);  // written in another order than expected
    writeRank(tmp.path / "a" / ordered[r], r, 1);
    writeRank(tmp.path / "b" / ordered[r], r, 1);
  }
  const report::RunComparison c = report::compareRuns(tmp.path / "a", tmp.path / "b", false, nullptr);
  std::vector<std::string> names;
  for (const diff::ProcessDiff& p : c.processes) names.push_back(p.name);
  CHECK(names == ordered);
}

TEST_CASE("reports alike but for their own rank are grouped and named by rank, or by name where a rank is unknown") {
  const std::vector<std::string> reports{"sent (rank 0 of 4, comm 7)", "sent (rank 1 of 4, comm 7)", "other",
                                         "sent (rank 3 of 4, comm 7)", "sent (rank 0 of 4, comm 7)"};
  // Process 4 names rank 0 although it is rank 2: not alike (only its own
  // rank is set aside).
  const std::vector<int32_t> ranks{0, 1, -1, 3, 2};
  const std::vector<std::string> names{"rank0.gpurr", "rank1.gpurr", "proc7.gpurr", "rank3.gpurr", "rank2.gpurr"};
  const auto with = report::alikeReports(reports, ranks, {3, 0, 1, 2, 4});
  CHECK(with[3] == std::vector<size_t>{0, 1});  // in the order shown, after the first
  CHECK(with[0].empty());
  CHECK(with[4].empty());
  CHECK(report::processesText({0, 1}, ranks, names) == "ranks 0, 1");
  CHECK(report::processesText({1, 2}, ranks, names) == "rank1.gpurr, proc7.gpurr");
  std::vector<size_t> many;
  std::vector<std::string> manyNames;
  for (size_t i = 0; i < 10; ++i) many.push_back(i), manyNames.push_back(fmt::format("proc{}.gpurr", i));
  CHECK(report::processesText(many, std::vector<int32_t>(10, -1), manyNames) ==
        "proc0.gpurr, proc1.gpurr, proc2.gpurr, proc3.gpurr, proc4.gpurr, proc5.gpurr, proc6.gpurr, proc7.gpurr "
        "and 2 more");
}

TEST_CASE("reports alike but for their rank, addresses and digests are grouped, and the group says what differs") {
  // Data-parallel receivers: each rank sent its own gradient, from its own
  // buffer.
  const std::vector<std::string> reports{
      "sent (rank 0 of 3): input 0x7f0000001000: digest f9588a3437fd4519 vs 9c6d1d2efb3d7be0",
      "sent (rank 1 of 3): input 0x7f0000002000: digest 2b7f1b668896dde6 vs 429b7693870ef1df",
      "sent (rank 2 of 3): input 0x7f0000001000: digest f9588a3437fd4519 vs 9c6d1d2efb3d7be0"};
  const std::vector<int32_t> ranks{0, 1, 2};
  const auto with = report::alikeReports(reports, ranks, {0, 1, 2});
  CHECK(with[0] == std::vector<size_t>{1, 2});
  CHECK(report::alikeText(reports, ranks, 0, with[0]) ==
        ", each with its own rank, addresses and digests (--json gives them)");
  CHECK(report::alikeText(reports, ranks, 0, {2}) == ", each with its own rank");
  // Processes without ranks (a program's DataLoader workers): nothing of
  // their own rank is said.
  const std::vector<std::string> workers{"read input 0x7f0000001000", "read input 0x7f0000002000",
                                         "read input 0x7f0000001000"};
  const std::vector<int32_t> none{-1, -1, -1};
  CHECK(report::alikeText(workers, none, 0, {2}).empty());
  CHECK(report::alikeText(workers, none, 0, {1, 2}) == ", but for their addresses and digests (--json gives them)");
  // Another count or event number is another report.
  CHECK(report::alikeReports({"#3 sent 1024", "#4 sent 1024"}, {0, 1}, {0, 1})[0].empty());
}

TEST_CASE("a mismatched send or receive is named by the calls between its two ranks, not as a collective") {
  report::CollectiveMismatch m;
  m.sequence = 14;
  CHECK(report::mismatchedCall(m) == "collective #14");
  m.sequence = 1;
  m.ends = int64_t{0} << 32 | 1;
  CHECK(report::mismatchedCall(m) ==
        "send/receive #1 from rank 0 to rank 1 (the calls between those two, counted from 0)");
}

TEST_CASE("a job recorded through torchrun and one recorded rank by rank compare: python's -u is set aside") {
  TempDir tmp;
  const std::string gpu = "NVIDIA H100 80GB HBM3";
  writeRank(tmp.path / "a.gpurr", 0, 0x5000, gpu, {"/venv/bin/python", "-u", "train.py", "--lr", "-u"});
  writeRank(tmp.path / "b.gpurr", 0, 0x5000, gpu, {"/venv/bin/python", "train.py", "--lr", "-u"});
  writeRank(tmp.path / "c.gpurr", 0, 0x5000, gpu, {"/venv/bin/python", "train.py", "--lr"});
  CHECK(report::compareRuns(tmp.path / "a.gpurr", tmp.path / "b.gpurr", false, nullptr).identical());
  // The program's own -u is its own argument.
  CHECK_THROWS_AS(report::compareRuns(tmp.path / "a.gpurr", tmp.path / "c.gpurr", false, nullptr),
                  report::UsageError);
}

TEST_CASE("a trace damaged since it was written is listed apart from one whose recording did not end cleanly") {
  report::RunComparison c;
  c.a = "a";
  c.b = "b";
  c.directories = true;
  c.tracesA = c.tracesB = 4;
  for (const char* name : {"rank0.gpurr", "rank1.gpurr", "rank2.gpurr", "rank3.gpurr"}) {
    diff::ProcessDiff p;
    p.name = name;
    p.opsA = p.opsB = 4;
    c.processes.push_back(p);
  }
  trace::Damage unclosed, index, block;
  unclosed.unclosed = index.unclosed = index.indexDamaged = true;
  block.corruptBlock = true;
  auto incomplete = [](const char* name, const trace::Damage& d) {
    return report::IncompleteTrace{name, "detail", d.cause(), d.readsTo()};
  };
  c.incompleteB = {incomplete("rank0.gpurr", block), incomplete("rank1.gpurr", unclosed),
                   incomplete("rank2.gpurr", index), incomplete("rank3.gpurr", unclosed)};
  std::ostringstream text;
  report::printRanks(text, report::Style{}, c);
  CHECK(text.str() == "ranks: 4 in a, 4 in b\n"
                      "  incomplete in b: rank1.gpurr (4 operations kept), rank3.gpurr (4 operations kept) (the "
                      "recording did not end cleanly: compared up to its last complete block)\n"
                      "  incomplete in b: rank0.gpurr (4 operations kept) (damaged since it was written: a block of "
                      "its events is corrupt: compared up to its corrupt block)\n"
                      "  incomplete in b: rank2.gpurr (4 operations kept) (damaged since it was written: its index "
                      "does not fit its events: compared up to its last complete block)\n");
}
