// Recorder options, launch selection, environment filtering and the claiming
// of per-process trace directories.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

#include "common/name_pattern.h"
#include "recorder/options.h"
#include "recorder/trace_sink.h"

using namespace gpurr::recorder;

namespace {
GetEnv envOf(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::filesystem::path freshDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("gpurr-rec-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}
}  // namespace

TEST_CASE("launch ranges", "[recorder][options]") {
  CHECK(parseLaunchRange("10:20") == std::pair<uint64_t, uint64_t>{10, 20});
  CHECK(parseLaunchRange("5:") == std::pair<uint64_t, uint64_t>{5, UINT64_MAX});
  CHECK(parseLaunchRange(":7") == std::pair<uint64_t, uint64_t>{0, 7});
  CHECK(parseLaunchRange("3:3") == std::pair<uint64_t, uint64_t>{3, 3});
  CHECK_FALSE(parseLaunchRange("20:10"));
  CHECK_FALSE(parseLaunchRange("10"));
  CHECK_FALSE(parseLaunchRange("a:b"));
  CHECK_FALSE(parseLaunchRange("1:2x"));
}

TEST_CASE("options come from the environment, bad values warn and are ignored", "[recorder][options]") {
  std::vector<std::string> problems;
  RecorderOptions o = parseOptions(envOf({{"GPURR_OUTPUT", "/tmp/x"},
                                          {"GPURR_LAUNCHES", "2:4"},
                                          {"GPURR_KERNELS", "gemm|conv"},
                                          {"GPURR_SYNC", "1"},
                                          {"GPURR_TOOL_VERSION", "0.1.0"},
                                          {"RANK", "3"}}),
                                   problems);
  CHECK(problems.empty());
  CHECK(o.output == std::filesystem::path("/tmp/x"));
  CHECK(o.sync);
  CHECK_FALSE(o.captureHostData);
  CHECK(o.rank == 3);
  CHECK(o.toolVersion == "0.1.0");
  CHECK_FALSE(launchInRange(o, 1));
  CHECK(launchInRange(o, 2));
  CHECK(launchInRange(o, 3));
  CHECK_FALSE(launchInRange(o, 4));
  CHECK(kernelSelected(o, "ampere_sgemm_128x64_nn"));
  CHECK_FALSE(kernelSelected(o, "_Z6reducePfi"));
  const auto rec = toRecordingOptions(o);
  CHECK(rec.launchRange == "2:4");
  CHECK(rec.kernelRegex == "gemm|conv");
  CHECK(rec.sync);

  problems.clear();
  o = parseOptions(envOf({{"GPURR_LAUNCHES", "9:1"}, {"GPURR_KERNELS", "(unclosed"}, {"RANK", "x"}}), problems);
  CHECK(problems.size() == 3);
  CHECK_FALSE(o.output);
  CHECK(launchInRange(o, 12345));
  CHECK(kernelSelected(o, "anything"));
  CHECK_FALSE(o.rank);
}

TEST_CASE("GPURR_DEFER_HASHES=0 hashes each launch's outputs at once", "[recorder][options]") {
  std::vector<std::string> problems;
  CHECK(parseOptions(envOf({}), problems).deferHashes);
  CHECK_FALSE(parseOptions(envOf({{"GPURR_DEFER_HASHES", "0"}}), problems).deferHashes);
  CHECK(parseOptions(envOf({{"GPURR_DEFER_HASHES", "1"}}), problems).deferHashes);
  CHECK(problems.empty());
  CHECK(parseOptions(envOf({{"GPURR_DEFER_HASHES", "no"}}), problems).deferHashes);
  CHECK(problems.size() == 1);
}

TEST_CASE("GPURR_FLUSH_MS sets how often a block is closed, and the sink takes it", "[recorder][options]") {
  std::vector<std::string> problems;
  CHECK(parseOptions(envOf({}), problems).flushIntervalMs == 1000);
  const RecorderOptions o = parseOptions(envOf({{"GPURR_FLUSH_MS", "250"}, {"GPURR_TRACE_QUEUE_MB", "8"}}), problems);
  CHECK(problems.empty());
  const SinkOptions sink = sinkOptions(o);
  CHECK(sink.flushIntervalMs == 250);
  CHECK(sink.queueBytes == (uint64_t{8} << 20));
  for (const char* bad : {"10", "soon", "600000"}) {
    problems.clear();
    CHECK(parseOptions(envOf({{"GPURR_FLUSH_MS", bad}}), problems).flushIntervalMs == 1000);
    REQUIRE(problems.size() == 1);
    CHECK_THAT(problems[0], Catch::Contains(std::string("GPURR_FLUSH_MS=") + bad));
  }
}

TEST_CASE("GPURR_START_GATE holds the options until its file exists, which may name a snapshot",
          "[recorder][options]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("gpurr-gate-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string gate = (dir / "gate").string();
  std::vector<std::string> problems;
  // Opened while the options wait: a line names the launch to snapshot.
  std::atomic<bool> opened{false};
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    std::ofstream(dir / "gate.part") << "snapshot 7\n";
    std::filesystem::rename(dir / "gate.part", gate);
    opened = true;
  });
  RecorderOptions o = awaitOptions(envOf({{"GPURR_START_GATE", gate}, {"GPURR_OUTPUT", "/tmp/x"}}), problems);
  opener.join();
  CHECK(opened);
  CHECK(problems.empty());
  CHECK(o.output);
  CHECK(launchNumberSelected(o.snapshot, 7));
  CHECK_FALSE(launchNumberSelected(o.snapshot, 6));
  // An empty gate file: the options as the environment gives them.
  std::ofstream(dir / "empty").close();
  o = awaitOptions(envOf({{"GPURR_START_GATE", (dir / "empty").string()}, {"GPURR_SNAPSHOT", "3"}}), problems);
  CHECK(launchNumberSelected(o.snapshot, 3));
  // No gate: at once.
  CHECK(launchNumberSelected(awaitOptions(envOf({{"GPURR_SNAPSHOT", "4"}}), problems).snapshot, 4));
  std::filesystem::remove_all(dir);
}

TEST_CASE("the trace is named by RANK, else SLURM_PROCID, else LOCAL_RANK with the node", "[recorder][options]") {
  std::vector<std::string> problems;
  auto named = [&](std::map<std::string, std::string> vars) {
    return parseOptions(envOf(std::move(vars)), problems);
  };
  RecorderOptions o = named({{"RANK", "7"}, {"SLURM_PROCID", "2"}, {"LOCAL_RANK", "3"}, {"NODE_RANK", "1"}});
  CHECK(o.rankName.name == "rank7.gpurr");
  CHECK(o.rank == 7);
  CHECK(o.rankName.attempt == 0);
  o = named({{"RANK", "7"}, {"TORCHELASTIC_RESTART_COUNT", "2"}});  // torchrun's third attempt
  CHECK(o.rankName.attempt == 2);
  o = named({{"SLURM_PROCID", "12"}, {"LOCAL_RANK", "0"}});
  CHECK(o.rankName.name == "rank12.gpurr");
  CHECK(o.rankName.source == "SLURM_PROCID=12");
  CHECK(o.rank == 12);
  // MPI launchers: Open MPI's mpirun, MPICH's and Intel MPI's mpiexec.
  o = named({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  CHECK(o.rankName.name == "rank5.gpurr");
  CHECK(o.rankName.source == "OMPI_COMM_WORLD_RANK=5");
  CHECK(o.rank == 5);
  CHECK(named({{"PMI_RANK", "6"}}).rankName.name == "rank6.gpurr");
  CHECK(named({{"RANK", "2"}, {"PMI_RANK", "6"}}).rankName.name == "rank2.gpurr");
  // LOCAL_RANK alone repeats on every node: never the name by itself.
  o = named({{"LOCAL_RANK", "3"}, {"NODE_RANK", "1"}});
  CHECK(o.rankName.name == "node1-local3.gpurr");
  CHECK_FALSE(o.rank);
  CHECK(problems.empty());
  const gpurr::job::RankName onHost =
      gpurr::job::rankName(envOf({{"LOCAL_RANK", "2"}}), problems, [] { return std::string("gpu-a7"); });
  CHECK(onHost.name == "gpu-a7-local2.gpurr");
  CHECK(gpurr::job::rankName(envOf({{"LOCAL_RANK", "2"}}), problems).name.ends_with("-local2.gpurr"));
  CHECK(gpurr::job::rankName(envOf({{"LOCAL_RANK", "2"}}), problems, [] { return std::string(); }).name.empty());
  CHECK(problems.size() == 1);  // no host name: proc<N>, said
  problems.clear();
  o = named({{"RANK", "x"}, {"SLURM_PROCID", "4"}});
  CHECK(o.rankName.name == "rank4.gpurr");
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "RANK=x is not a rank number; it does not name the trace");
  problems.clear();
  o = named({});
  CHECK(o.rankName.name.empty());
  CHECK_FALSE(o.rank);
}

TEST_CASE("a process is one of several ranks when the launcher says there are several", "[recorder][options]") {
  using gpurr::job::severalRanks;
  CHECK(severalRanks(envOf({{"WORLD_SIZE", "2"}})));
  CHECK_FALSE(severalRanks(envOf({{"WORLD_SIZE", "1"}})));
  CHECK(severalRanks(envOf({{"SLURM_NTASKS", "64"}})));
  // srun's step inside a larger allocation: the step's count.
  CHECK_FALSE(severalRanks(envOf({{"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_NTASKS", "8"}})));
  CHECK_FALSE(severalRanks(envOf({{"WORLD_SIZE", "x"}})));
  CHECK(severalRanks(envOf({{"OMPI_COMM_WORLD_SIZE", "16"}})));
  CHECK(severalRanks(envOf({{"PMI_SIZE", "4"}})));
  CHECK_FALSE(severalRanks(envOf({{"PMI_SIZE", "1"}})));
  CHECK_FALSE(severalRanks(envOf({})));
  CHECK(severalRanks(envOf({{"LOCAL_WORLD_SIZE", "2"}})));
  // A launcher that names local ranks and gives no size starts several.
  CHECK(severalRanks(envOf({{"LOCAL_RANK", "0"}})));
  CHECK_FALSE(severalRanks(envOf({{"LOCAL_RANK", "0"}, {"WORLD_SIZE", "1"}})));
  CHECK_FALSE(severalRanks(envOf({{"LOCAL_RANK", "x"}})));
}

TEST_CASE("kernel regex matches the demangled name too", "[recorder][options]") {
  std::vector<std::string> problems;
  RecorderOptions o = parseOptions(envOf({{"GPURR_KERNELS", "^reduce\\(float\\*"}}), problems);
  REQUIRE(problems.empty());
  CHECK(kernelSelected(o, "_Z6reducePfi"));  // reduce(float*, int)
  CHECK_FALSE(kernelSelected(o, "_Z6scalePfi"));
  // A long name (templates run to tens of kilobytes) under a `.*` pattern,
  // matched in the recorded program's thread: it must not exhaust the stack.
  o = parseOptions(envOf({{"GPURR_KERNELS", "gemm.*tn$"}}), problems);
  REQUIRE(problems.empty());
  const std::string name = "cutlass_gemm" + std::string(400000, 'x');
  CHECK(kernelSelected(o, name + "_tn"));
  CHECK_FALSE(kernelSelected(o, name + "_nt"));
  // A leading `.*`, which made each search quadratic in the name's length
  // (hours on this name), is left out: it changes nothing a search finds.
  o = parseOptions(envOf({{"GPURR_KERNELS", ".*.*gemm.*tn$"}}), problems);
  REQUIRE(problems.empty());
  CHECK(kernelSelected(o, name + "_tn"));
  CHECK_FALSE(kernelSelected(o, name + "_nt"));
}

TEST_CASE("a name pattern finds what its leading .* would have found", "[recorder][options]") {
  const auto finds = [](const std::string& pattern, const std::string& name) {
    return std::regex_search(name, gpurr::namePattern(pattern));
  };
  CHECK(finds(".*", ""));
  CHECK(finds(".*", "anything"));
  CHECK(finds(".*gemm", "sgemm"));
  CHECK(finds(".*gemm", "line\ngemm"));
  CHECK_FALSE(finds(".*gemm", "gem"));
  CHECK(finds(".*a|b", "b"));
  CHECK(finds(".*?gemm", "xgemm"));  // a lazy .* is kept as it is
  CHECK_THROWS_AS(gpurr::namePattern(".*("), std::regex_error);
}

TEST_CASE("only determinism-relevant environment variables are kept, sorted", "[recorder][options]") {
  CHECK(isDeterminismRelevant("CUBLAS_WORKSPACE_CONFIG"));
  CHECK(isDeterminismRelevant("NCCL_ALGO"));
  CHECK(isDeterminismRelevant("TORCH_CUDNN_V8_API_DISABLED"));
  CHECK(isDeterminismRelevant("PYTORCH_CUDA_ALLOC_CONF"));
  CHECK(isDeterminismRelevant("CUDA_LAUNCH_BLOCKING"));
  CHECK(isDeterminismRelevant("PYTHONHASHSEED"));
  CHECK(isDeterminismRelevant("NVIDIA_TF32_OVERRIDE"));
  CHECK(isDeterminismRelevant("OMP_NUM_THREADS"));
  CHECK_FALSE(isDeterminismRelevant("HOME"));
  CHECK_FALSE(isDeterminismRelevant("PATH"));
  CHECK_FALSE(isDeterminismRelevant("CUDA_INJECTION64_PATH"));
  CHECK_FALSE(isDeterminismRelevant("XNCCL_ALGO"));
  char a[] = "PATH=/bin", b[] = "NCCL_ALGO=ring", c[] = "CUBLAS_WORKSPACE_CONFIG=:4096:8", d[] = "NOEQUALS",
       e[] = "PYTHONHASHSEED=0";
  char* env[] = {a, b, c, d, e, nullptr};
  const auto kept = determinismEnvironment(env);
  REQUIRE(kept.size() == 3);
  CHECK(kept[0].key == "CUBLAS_WORKSPACE_CONFIG");
  CHECK(kept[0].value == ":4096:8");
  CHECK(kept[1].key == "NCCL_ALGO");
  CHECK(kept[2].key == "PYTHONHASHSEED");
}

TEST_CASE("trace directories are claimed atomically", "[recorder][options]") {
  const auto dir = freshDir("claim");
  std::string error;
  CHECK(claimTraceDirectory(dir, {}, error) == dir / "proc0.gpurr");
  CHECK(claimTraceDirectory(dir, {}, error) == dir / "proc1.gpurr");
  const gpurr::job::RankName four{"rank4.gpurr", 4, "RANK=4"};
  CHECK(claimTraceDirectory(dir, four, error) == dir / "rank4.gpurr");
  CHECK_FALSE(claimTraceDirectory(dir, four, error));
  CHECK(error.find("rank4.gpurr already exists (two processes with RANK=4?)") != std::string::npos);
  // The same rank of a restarted job (torchrun --max-restarts): the earlier
  // attempt's trace is kept in attempts/, and this one takes its name.
  std::ofstream(dir / "rank4.gpurr" / "marker") << "attempt 0";
  const gpurr::job::RankName again{"rank4.gpurr", 4, "RANK=4", 1};
  error.clear();
  CHECK(claimTraceDirectory(dir, again, error) == dir / "rank4.gpurr");
  CHECK(error.empty());
  CHECK(std::filesystem::exists(dir / "attempts" / "0" / "rank4.gpurr" / "marker"));
  CHECK_FALSE(std::filesystem::exists(dir / "rank4.gpurr" / "marker"));

  // Concurrent claimers never share a name.
  std::mutex mu;
  std::set<std::string> names;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      std::string err;
      auto d = claimTraceDirectory(dir, {}, err);
      std::lock_guard lock(mu);
      if (d) names.insert(d->string());
    });
  }
  for (auto& t : threads) t.join();
  CHECK(names.size() == 8);
  CHECK_FALSE(names.count((dir / "proc0.gpurr").string()));

  CHECK_FALSE(claimTraceDirectory(dir / "missing", {}, error));
  CHECK(error.find("cannot create") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("trace directories are claimed private (0700), whatever the umask", "[recorder][options]") {
  const auto dir = freshDir("claim-mode");
  std::string error;
  for (const mode_t mask : {mode_t{0}, mode_t{0277}}) {
    const mode_t old = ::umask(mask);
    const auto claimed = claimTraceDirectory(dir, {}, error);
    ::umask(old);
    REQUIRE(claimed);
    struct stat st {};
    REQUIRE(::stat(claimed->c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0700);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("snapshot selections: launch numbers, ranges and kernel patterns", "[recorder][options]") {
  std::string error;
  auto sel = parseLaunchSelection("7,100:200,gemm,:3,500:", error);
  REQUIRE(sel);
  CHECK(sel->text == "7,100:200,gemm,:3,500:");
  REQUIRE(sel->launches.size() == 4);
  CHECK(sel->launches[0] == std::pair<uint64_t, uint64_t>{7, 8});
  CHECK(sel->launches[1] == std::pair<uint64_t, uint64_t>{100, 200});
  CHECK(sel->launches[2] == std::pair<uint64_t, uint64_t>{0, 3});
  CHECK(sel->launches[3] == std::pair<uint64_t, uint64_t>{500, UINT64_MAX});
  CHECK(sel->kernels.size() == 1);
  CHECK(launchSelected(*sel, 7, "_Z4axpyPfS_fi"));
  CHECK_FALSE(launchSelected(*sel, 8, "_Z4axpyPfS_fi"));
  CHECK(launchSelected(*sel, 199, "x"));
  CHECK_FALSE(launchSelected(*sel, 200, "x"));
  CHECK(launchSelected(*sel, 2, "x"));
  CHECK(launchSelected(*sel, 1u << 30, "x"));
  CHECK(launchSelected(*sel, 50, "_Z4gemmPf"));
  CHECK_FALSE(launchNumberSelected(*sel, 50));
  // Patterns see the demangled name too.
  auto byDemangled = parseLaunchSelection("^axpy\\(", error);
  REQUIRE(byDemangled);
  CHECK(kernelNameSelected(*byDemangled, "_Z4axpyPfS_fi"));
  CHECK_FALSE(kernelNameSelected(*byDemangled, "_Z5saxpyPfS_fi"));
  // An item with letters is a pattern, even with digits and a colon in it.
  auto pattern = parseLaunchSelection("sm90:gemm", error);
  REQUIRE(pattern);
  CHECK(pattern->launches.empty());
  CHECK(kernelNameSelected(*pattern, "cutlass_sm90:gemm_kernel"));
}

TEST_CASE("bad snapshot selections say what is wrong", "[recorder][options]") {
  std::string error;
  CHECK_FALSE(parseLaunchSelection("", error));
  CHECK_THAT(error, Catch::Contains("empty selection"));
  CHECK_FALSE(parseLaunchSelection("3,,4", error));
  CHECK_THAT(error, Catch::Contains("empty item"));
  CHECK_FALSE(parseLaunchSelection("5,", error));
  CHECK_THAT(error, Catch::Contains("empty item"));
  CHECK_FALSE(parseLaunchSelection("9:2", error));
  CHECK_THAT(error, Catch::Contains("'9:2' is not A:B"));
  CHECK_FALSE(parseLaunchSelection("4:4", error));
  CHECK_THAT(error, Catch::Contains("selects no launch"));
  // Two colons make a pattern, not a range.
  auto twoColons = parseLaunchSelection("1:2:3", error);
  REQUIRE(twoColons);
  CHECK(twoColons->launches.empty());
  CHECK(twoColons->kernels.size() == 1);
  CHECK_FALSE(parseLaunchSelection("gemm((", error));
  CHECK_THAT(error, Catch::Contains("'gemm((' is neither a launch number nor a valid regular expression"));
  CHECK_FALSE(parseLaunchSelection("99999999999999999999", error));
  CHECK_THAT(error, Catch::Contains("too large"));
}

TEST_CASE("GPURR_SNAPSHOT, GPURR_SNAPSHOT_MEMORY_MB, GPURR_CHECK_DETERMINISM and GPURR_FULL", "[recorder][options]") {
  std::vector<std::string> problems;
  RecorderOptions o = parseOptions(envOf({{"GPURR_SNAPSHOT", "3,conv"},
                                          {"GPURR_SNAPSHOT_MEMORY_MB", "64"},
                                          {"GPURR_KERNELS", "gemm"},
                                          {"GPURR_CHECK_DETERMINISM", "5"},
                                          {"GPURR_FULL", "1"}}),
                                   problems);
  CHECK(problems.empty());
  CHECK(o.snapshot.text == "3,conv");
  CHECK(o.snapshotMemoryBytes == uint64_t{64} << 20);
  CHECK(o.checkDeterminism == 5);
  CHECK(o.full);
  CHECK(o.captureHostData);  // implied
  const gpurr::trace::RecordingOptions r = toRecordingOptions(o);
  CHECK(r.full);
  CHECK(r.captureHostData);
  CHECK(r.snapshot == "3,conv");
  CHECK(r.checkDeterminism == 5);

  RecorderOptions defaults = parseOptions(envOf({}), problems);
  CHECK(problems.empty());
  CHECK(defaults.snapshot.empty());
  CHECK(defaults.snapshotMemoryBytes == uint64_t{2048} << 20);
  CHECK(defaults.checkDeterminism == 0);
  CHECK_FALSE(defaults.full);
  CHECK_FALSE(toRecordingOptions(defaults).full);
  CHECK(toRecordingOptions(defaults).snapshot.empty());

  // Malformed values: one message each, and the feature stays off.
  RecorderOptions bad = parseOptions(envOf({{"GPURR_SNAPSHOT", "1,,2"},
                                            {"GPURR_SNAPSHOT_MEMORY_MB", "lots"},
                                            {"GPURR_LAUNCHES", "0:10"},
                                            {"GPURR_CHECK_DETERMINISM", "1"}}),
                                     problems);
  REQUIRE(problems.size() == 3);
  CHECK_THAT(problems[0], Catch::Contains("GPURR_SNAPSHOT=1,,2: empty item"));
  CHECK_THAT(problems[1], Catch::Contains("GPURR_SNAPSHOT_MEMORY_MB=lots"));
  CHECK_THAT(problems[2], Catch::Contains("GPURR_CHECK_DETERMINISM=1 is not a number of re-runs from 2"));
  CHECK(bad.snapshot.empty());
  CHECK(bad.snapshotMemoryBytes == uint64_t{2048} << 20);
  CHECK(bad.checkDeterminism == 0);

  // Re-running every launch is refused.
  problems.clear();
  RecorderOptions unselected = parseOptions(envOf({{"GPURR_CHECK_DETERMINISM", "10"}}), problems);
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], Catch::Contains("needs GPURR_LAUNCHES, GPURR_KERNELS or GPURR_SNAPSHOT"));
  CHECK(unselected.checkDeterminism == 0);
  // A snapshot selection is enough.
  problems.clear();
  RecorderOptions bySnapshot =
      parseOptions(envOf({{"GPURR_CHECK_DETERMINISM", "4"}, {"GPURR_SNAPSHOT", "12"}}), problems);
  CHECK(problems.empty());
  CHECK(bySnapshot.checkDeterminism == 4);
}

TEST_CASE("GPURR_STEPS: a Python slice of training steps", "[recorder][options]") {
  auto sel = parseStepSelection("10:12");
  REQUIRE(sel);
  CHECK((sel->begin == 10 && sel->end == 12 && sel->every == 1));
  sel = parseStepSelection("::50");
  REQUIRE(sel);
  CHECK((sel->begin == 0 && sel->end == UINT64_MAX && sel->every == 50));
  sel = parseStepSelection("5:");
  REQUIRE(sel);
  CHECK((sel->begin == 5 && sel->every == 1));
  CHECK((parseStepSelection("3:9:")->every == 1));
  for (const char* bad : {"", "7", "9:3", "1:2:0", "a:b", "1:2:x"}) {
    INFO(bad);
    CHECK_FALSE(parseStepSelection(bad));
  }

  std::vector<std::string> problems;
  auto opts = [&](const char* steps) {
    problems.clear();
    return parseOptions([steps](const char* n) { return std::string(n) == "GPURR_STEPS" ? steps : nullptr; },
                        problems);
  };
  RecorderOptions o = opts("2:10:3");
  CHECK(problems.empty());
  CHECK(o.stepsText == "2:10:3");
  CHECK(toRecordingOptions(o).steps == "2:10:3");
  std::vector<int64_t> hashed;
  for (int64_t s = -1; s < 12; ++s)
    if (stepSelected(o, s)) hashed.push_back(s);
  CHECK(hashed == std::vector<int64_t>{2, 5, 8});
  o = opts("bad");
  CHECK(problems.size() == 1);
  CHECK(stepSelected(o, -1));  // ignored: every launch
}
