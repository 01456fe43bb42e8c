// Verdicts over replay runs, the machine differences behind "different from
// the recording", and the text and JSON reports, from synthetic run results.
#include <catch2/catch.hpp>

#include "replayer/report.h"
#include "replayer/verdict.h"

using namespace gpurr;
using namespace gpurr::replay;

namespace {

std::vector<OutputCheck> twoOutputs() {
  OutputCheck a;
  a.range = {0x7f0000000000, 4096, 1, 0};
  a.digest = 0xa;
  OutputCheck b;
  b.range = {0x7f0000001000, 4096, 2, 0};
  b.digest = 0xb;
  return {a, b};
}

}  // namespace

TEST_CASE("verdict: equal, different, nondeterministic, unrecorded", "[replayer][verdict]") {
  const auto outputs = twoOutputs();

  const std::vector<std::vector<uint64_t>> same(50, {0xa, 0xb});
  const Verdict eq = judge(outputs, same);
  CHECK(eq.kind == VerdictKind::kEqual);
  CHECK(eq.runs == 50);
  CHECK(eq.distinct == 1);
  CHECK(eq.runsMatchingRecording == 50);
  CHECK(eq.varyingOutputs.empty());
  CHECK(eq.differingOutputs.empty());
  CHECK(exitCode(eq.kind) == 0);

  const std::vector<std::vector<uint64_t>> other(3, {0xa, 0xc});
  const Verdict diff = judge(outputs, other);
  CHECK(diff.kind == VerdictKind::kDifferent);
  CHECK(diff.distinct == 1);
  CHECK(diff.runsMatchingRecording == 0);
  CHECK(diff.differingOutputs == std::vector<size_t>{1});
  CHECK(exitCode(diff.kind) == 1);

  const std::vector<std::vector<uint64_t>> mixed = {{0xa, 0xb}, {0xa, 0xd}, {0xa, 0xb}, {0xa, 0xe}, {0xa, 0xd}};
  const Verdict nd = judge(outputs, mixed);
  CHECK(nd.kind == VerdictKind::kNondeterministic);
  CHECK(nd.runs == 5);
  CHECK(nd.distinct == 3);
  CHECK(nd.runsPerResult == std::vector<uint32_t>{2, 2, 1});
  CHECK(nd.resultOfRun == std::vector<uint32_t>{0, 1, 0, 2, 1});
  CHECK(nd.runsMatchingRecording == 2);
  CHECK(nd.varyingOutputs == std::vector<size_t>{1});
  CHECK(exitCode(nd.kind) == 1);

  auto unrecorded = outputs;
  for (auto& o : unrecorded) o.recorded = false;
  const Verdict un = judge(unrecorded, other);
  CHECK(un.kind == VerdictKind::kUnrecorded);
  CHECK(exitCode(un.kind) == 0);
  CHECK(judge(unrecorded, mixed).kind == VerdictKind::kNondeterministic);
}

TEST_CASE("verdict: what differs between the recording's machine and this one", "[replayer][verdict]") {
  trace::Header header;
  header.driverVersion = 13000;
  const trace::GpuInfo recorded{0, "NVIDIA H100 80GB HBM3", "GPU-aaaa", 132, 9, 0, 85520809984ULL, "0000:19:00.0"};
  MachineInfo here{0, "NVIDIA H100 80GB HBM3", "GPU-aaaa", 9, 0, 132, 85520809984ULL, "0000:19:00.0", 13000};
  CHECK(environmentDifferences(header, recorded, here).empty());

  here.name = "NVIDIA H200";
  here.smCount = 132;
  here.memoryBytes = 150754820096ULL;
  here.uuid = "GPU-bbbb";
  here.driverVersion = 13010;
  const auto lines = environmentDifferences(header, recorded, here);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "GPU: NVIDIA H100 80GB HBM3 (sm_90) -> NVIDIA H200 (sm_90)");
  CHECK(lines[1] == "GPU memory: 79.6 GiB -> 140.4 GiB");
  CHECK(lines[2] == "GPU unit: GPU-aaaa -> GPU-bbbb (another physical GPU)");
  CHECK(lines[3] == "driver: CUDA 13.0 -> CUDA 13.1");
  CHECK(environmentDifferences(header, std::nullopt, here)[0] ==
        "GPU: not described in the trace -> NVIDIA H200 (sm_90)");
}

TEST_CASE("report: a nondeterministic outcome in text and JSON", "[replayer][report]") {
  ReplayPlan plan;
  plan.tracePath = "a.gpurr";
  plan.seq = 1234;
  plan.launch.function = "_Z13reduce_atomicPKfPfm";
  plan.launch.grid = {64, 1, 1};
  plan.launch.block = {512, 1, 1};
  plan.outputs = twoOutputs();
  plan.inputs = {{{0x7f0000000000, 4096, 1, 0}, {}, 0}};

  ReplayOutcome o;
  o.machine = {0, "NVIDIA H100 80GB HBM3", "GPU-aaaa", 9, 0, 132, 85520809984ULL, "", 13000};
  o.placements = {{0x7f0000000000, 2 << 20, 0x7f0000000000, {1, 2}}};
  o.restoredBytes = 4096;
  for (int i = 0; i < 50; ++i) o.runs.push_back({0xa, uint64_t(0x100 + i % 31)});
  o.verdict = judge(plan.outputs, o.runs);
  const std::vector<float> x = {1.0f, 2.0f}, y = {1.0f, 2.5f};
  RangeState a{plan.outputs[1].range, 1, {}, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(x.data()),
                                                                    reinterpret_cast<const uint8_t*>(x.data()) + 8)};
  RangeState b{plan.outputs[1].range, 2, {}, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(y.data()),
                                                                    reinterpret_cast<const uint8_t*>(y.data()) + 8)};
  o.acrossRuns = StateComparison::compare(std::vector<RangeState>{a}, std::vector<RangeState>{b});
  o.acrossRunsOther = 1;
  o.kernelMs = std::vector<double>(50, 0.25);
  o.restoreMs = std::vector<double>(50, 0.5);
  o.hashMs = std::vector<double>(50, 0.1);
  o.warnings = {"something to know"};

  CHECK(o.verdict.kind == VerdictKind::kNondeterministic);
  CHECK(o.verdict.distinct == 31);
  CHECK(verdictLine(o) == "nondeterministic: 31 distinct results in 50 runs (0 equal to the recording)");
  const std::string text = formatOutcome(plan, o);
  CHECK_THAT(text, Catch::Contains("replay of launch #1234 from a.gpurr"));
  CHECK_THAT(text, Catch::Contains("verdict   nondeterministic: 31 distinct results in 50 runs"));
  CHECK_THAT(text, Catch::Contains("runs per distinct result: 2, 2, 2, 2, 2, 2, 2, 2, ..."));
  CHECK_THAT(text, Catch::Contains("1 vs 2: alloc#2+0x0 (4.0 KiB): 1 of 2 float32 (assumed) differ"));
  CHECK_THAT(text, Catch::Contains("intrinsically nondeterministic"));
  CHECK_THAT(text, Catch::Contains("all at their recorded addresses"));
  CHECK_THAT(text, Catch::Contains("warning: something to know"));

  const Json j = outcomeJson(plan, o);
  CHECK(j["verdict"] == "nondeterministic");
  CHECK(j["runs"] == 50);
  CHECK(j["distinctResults"] == 31);
  CHECK(j["digests"].size() == 50);
  CHECK(j["digests"][0][0] == "000000000000000a");
  CHECK(j["acrossRuns"]["ranges"][0]["elements"]["differing"] == 1);
  CHECK(j["acrossRuns"]["ranges"][0]["elements"]["assumed"] == true);
  CHECK(j["vsRecording"].is_null());
  CHECK(j["relocated"] == false);
}

TEST_CASE("report: a different-from-recording outcome names the machine differences", "[replayer][report]") {
  ReplayPlan plan;
  plan.tracePath = "b.gpurr";
  plan.outputs = twoOutputs();
  ReplayOutcome o;
  o.runs = {{0xa, 0xc}, {0xa, 0xc}};
  o.verdict = judge(plan.outputs, o.runs);
  o.environment = {"driver: CUDA 13.0 -> CUDA 13.1"};
  const std::string text = formatOutcome(plan, o);
  CHECK_THAT(text, Catch::Contains("deterministic over 2 run(s), but different from the recording"));
  CHECK_THAT(text, Catch::Contains("machine   driver: CUDA 13.0 -> CUDA 13.1"));
  o.environment.clear();
  CHECK_THAT(formatOutcome(plan, o), Catch::Contains("same GPU model and driver as the recording"));
}
