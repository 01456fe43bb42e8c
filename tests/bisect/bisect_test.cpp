// Tests of `gpurr bisect` that need no GPU. The command runs for real (bin/gpurr,
// which runs `gpurr record` and `gpurr replay` as its children) on
// fake_cuda_program, which writes the trace a recorded CUDA program would,
// its content set by a scenario and a run counter. The recorder library is a
// plain file: `gpurr record` only needs it to exist, and the fake program
// does the recording. Replay needs a GPU, so here it must say why it did not
// run.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <thread>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cuda_driver.h"
#include "cli/bisect.h"
#include "tests/unit/test_util.h"
#include "trace_format/trace.h"

namespace fs = std::filesystem;
using gpurr::testing::TempDir;
using gpurr::testing::readText;
using gpurr::testing::writeText;
using namespace gpurr;
using Json = nlohmann::json;

namespace {

const fs::path kGpurr = fs::path(GPURR_BINARY_DIR) / "bin" / "gpurr";
const fs::path kFake = FAKE_CUDA_PROGRAM;

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

// A working directory, a stand-in recorder library, the fake program's run
// counter and files for stdio.
struct Sandbox {
  TempDir tmp;
  fs::path work = tmp / "work";
  fs::path io = tmp / "io";
  fs::path state = tmp / "state";
  fs::path lib = tmp / "libgpurr_recorder.so";
  Sandbox() {
    fs::create_directories(work);
    fs::create_directories(io);
    fs::create_directories(state);
    writeText(lib, "not really a library");
  }
  Result run(const std::vector<std::string>& args, bool withLibrary = true) {
    const pid_t pid = start(args, withLibrary);
    int status = 0;
    ::waitpid(pid, &status, 0);
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
    r.out = readText(io / "stdout");
    r.err = readText(io / "stderr");
    return r;
  }
  // gpurr ARGS started, not waited for.
  pid_t start(const std::vector<std::string>& args, bool withLibrary = true) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int in = ::open("/dev/null", O_RDONLY);
      const int out = ::open((io / "stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open((io / "stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(in, 0);
      ::dup2(out, 1);
      ::dup2(err, 2);
      if (::chdir(work.c_str()) != 0) ::_exit(99);
      if (withLibrary) {
        ::setenv("GPURR_RECORDER_LIB", lib.c_str(), 1);
      } else {
        ::setenv("GPURR_RECORDER_LIB", (tmp / "missing.so").c_str(), 1);
      }
      ::unsetenv("GPURR_SNAPSHOT");
      // The runs started early are the tests' to check, whatever memory a
      // busy machine has left (a test that sets a bound keeps it).
      ::setenv("GPURR_BISECT_MIN_AVAILABLE_MB", "0", 0);
      ::setenv("GPURR_BISECT_MIN_CPUS", "1", 0);  // so too on a machine of few CPUs
      std::vector<char*> argv{const_cast<char*>(kGpurr.c_str())};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(kGpurr.c_str(), argv.data());
      ::_exit(98);
    }
    return pid;
  }
  // gpurr bisect -o DIR [options] -- fake_cuda_program SCENARIO STATE
  Result bisect(const std::string& scenario, std::vector<std::string> options = {}) {
    std::vector<std::string> args{"bisect", "-o", "out"};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {"--", kFake.string(), scenario, state.string()});
    return run(args);
  }
  fs::path out() const { return work / "out"; }
  Json report() const { return Json::parse(readText(out() / "report.json")); }
};

std::vector<std::string> filesIn(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The launches of a trace whose ranges carry snapshots, by launch number.
std::vector<uint64_t> snapshotLaunches(const fs::path& trace) {
  std::vector<uint64_t> out;
  uint64_t n = 0;
  for (const trace::Event& e : trace::TraceReader(trace).readAll()) {
    const auto* k = std::get_if<trace::KernelLaunch>(&e.payload);
    if (k == nullptr) continue;
    bool any = false, all = true;
    for (const auto* list : {&k->inputs, &k->outputs}) {
      for (const trace::RangeDigest& r : *list) {
        any = any || r.snapshot.has_value();
        all = all && r.snapshot.has_value();
      }
    }
    if (any) {
      CHECK(all);  // inputs before and outputs after, every range
      out.push_back(n);
    }
    ++n;
  }
  return out;
}

void checkReportKeys(const Json& r) {
  for (const char* key : {"verdict", "command", "runs", "diff", "confirmation", "reproduced", "replay",
                          "replayError", "timeline", "seconds"}) {
    INFO(key);
    CHECK(r.contains(key));
  }
  for (const Json& run : r["runs"]) {
    for (const char* key : {"trace", "log", "exitCode", "seconds", "launches"}) {
      INFO(key);
      CHECK(run.contains(key));
    }
  }
}

const Json& firstDivergence(const Json& diff) { return diff["processes"][0]["firstDivergence"]; }

}  // namespace

// ---------------------------------------------------------------- parts

TEST_CASE("bisect directory: named after the command and the time and never reused") {
  TempDir tmp;
  const std::time_t now = 1'700'000'000;
  const fs::path first = cli::bisect::defaultDirectory({"/usr/bin/python3", "train.py"}, now, tmp.path());
  CHECK(first.parent_path() == tmp.path());
  CHECK(first.filename().string().starts_with("bisect-python3-2023"));
  CHECK(first.extension() != ".gpurr");
  fs::create_directory(first);
  const fs::path second = cli::bisect::defaultDirectory({"/usr/bin/python3", "train.py"}, now, tmp.path());
  CHECK(second.filename().string() == first.filename().string() + "-2");
  CHECK(cli::bisect::defaultDirectory({"my tool!"}, now, tmp.path()).filename().string().starts_with(
      "bisect-my_tool_-"));
}

TEST_CASE("bisect directory: a full one only with --force which removes only bisect files") {
  TempDir tmp;
  const fs::path dir = tmp / "d";
  CHECK(cli::bisect::prepareDirectory(dir, false).empty());
  CHECK(fs::is_directory(dir));
  CHECK(cli::bisect::prepareDirectory(dir, false).empty());  // empty: fine
  fs::create_directory(dir / "run1.gpurr");
  writeText(dir / "run1.log", "old");
  writeText(dir / "report.json", "{}");
  writeText(dir / "notes.txt", "mine");
  const std::string refused = cli::bisect::prepareDirectory(dir, false);
  CHECK_THAT(refused, Catch::Contains("not empty") && Catch::Contains("--force") && Catch::Contains(dir.string()));
  CHECK(cli::bisect::prepareDirectory(dir, true).empty());
  CHECK(filesIn(dir) == std::vector<std::string>{"notes.txt"});
  writeText(tmp / "file", "x");
  CHECK_THAT(cli::bisect::prepareDirectory(tmp / "file", true), Catch::Contains("not a directory"));
  CHECK_THAT(cli::bisect::prepareDirectory(tmp / "no" / "such", false), Catch::Contains("does not exist"));
  CHECK(cli::bisect::isBisectFile("run12.gpurr"));
  CHECK(cli::bisect::isBisectFile("replay.json"));
  CHECK_FALSE(cli::bisect::isBisectFile("run.gpurr"));
  CHECK_FALSE(cli::bisect::isBisectFile("report.json.bak"));
}

TEST_CASE("bisect finds the launch of a number as the recorder numbered it: graphs' captured launches have none") {
  TempDir tmp;
  const fs::path trace = tmp / "t.gpurr";
  {
    trace::TraceWriter w(trace, trace::Header{});
    uint64_t seq = 0;
    for (const bool captured : {false, true, true, false, false}) {
      trace::KernelLaunch k;
      k.function = "_Z1kv";
      k.captured = captured;
      w.append(trace::Event{seq, seq, 0, k});
      ++seq;
    }
    w.close();
  }
  CHECK(cli::bisect::findLaunch(trace, 0)->seq == 0);
  CHECK(cli::bisect::findLaunch(trace, 1)->seq == 3);
  CHECK(cli::bisect::findLaunch(trace, 2)->seq == 4);
  CHECK_FALSE(cli::bisect::findLaunch(trace, 3));
}

TEST_CASE("bisect helpers: the host's memory from /proc/meminfo") {
  const auto [available, total] = cli::bisect::hostMemory();
  CHECK(total > 0);
  CHECK(available > 0);
  CHECK(available <= total);
}

namespace {

// Writes `text` to `root`/`relative`, making its folders.
void put(const fs::path& root, const std::string& relative, const std::string& text) {
  fs::create_directories((root / relative).parent_path());
  std::ofstream(root / relative) << text;
}

}  // namespace

TEST_CASE("bisect helpers: the host's memory is bounded by the cgroups the process is in") {
  const fs::path root = fs::temp_directory_path() / ("gpurr-cgroups-" + std::to_string(getpid()));
  fs::remove_all(root);
  const std::string meminfo = "MemTotal:       67108864 kB\nMemFree: 1 kB\nMemAvailable:   50331648 kB\n";
  const uint64_t gib = uint64_t{1} << 30;
  // A cgroup's limit and usage, in GiB: v2's files, or v1's.
  auto cgroup = [&](const std::string& dir, bool v1, uint64_t limit, uint64_t usage) {
    put(root, dir + (v1 ? "/memory.limit_in_bytes" : "/memory.max"), std::to_string(limit * gib) + "\n");
    put(root, dir + (v1 ? "/memory.usage_in_bytes" : "/memory.current"), std::to_string(usage * gib) + "\n");
  };
  SECTION("cgroup v2: the tightest limit of the process's cgroup and those above it less their working set") {
    put(root, "proc/meminfo", meminfo);
    put(root, "proc/self/cgroup", "0::/job.slice/step_0\n");
    cgroup("sys/fs/cgroup/job.slice", false, 16, 10);
    put(root, "sys/fs/cgroup/job.slice/memory.stat",
        "anon 1\nactive_file " + std::to_string(gib) + "\ninactive_file " + std::to_string(gib) + "\n");
    put(root, "sys/fs/cgroup/job.slice/step_0/memory.max", "max\n");
    put(root, "sys/fs/cgroup/job.slice/step_0/memory.current", std::to_string(9 * gib) + "\n");
    const auto [available, total] = cli::bisect::hostMemory(root);
    CHECK(total == 16 * gib);
    CHECK(available == 8 * gib);  // 16 less (10 less 2 of page cache it can give back)
  }
  SECTION("cgroup v2: a job's limit above a step's as large counts with what the job's other steps use") {
    put(root, "proc/meminfo", meminfo);
    put(root, "proc/self/cgroup", "0::/job_1/step_0\n");
    cgroup("sys/fs/cgroup/job_1", false, 40, 38);
    cgroup("sys/fs/cgroup/job_1/step_0", false, 40, 10);
    const auto [available, total] = cli::bisect::hostMemory(root);
    CHECK(total == 40 * gib);
    CHECK(available == 2 * gib);
  }
  SECTION("cgroup v2 in a container: its own cgroup is the mount") {
    put(root, "proc/meminfo", meminfo);
    put(root, "proc/self/cgroup", "0::/\n");
    cgroup("sys/fs/cgroup", false, 4, 5);
    const auto [available, total] = cli::bisect::hostMemory(root);
    CHECK(total == 4 * gib);
    CHECK(available == 0);  // over its limit: nothing left
  }
  SECTION("cgroup v1: the memory controller's limit with unlimited read as none") {
    put(root, "proc/meminfo", meminfo);
    put(root, "proc/self/cgroup", "4:cpuset:/\n3:cpuacct,memory:/docker/abc\n0::/\n");
    put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    SECTION("limited") {
      cgroup("sys/fs/cgroup/memory/docker/abc", true, 32, 30);
      put(root, "sys/fs/cgroup/memory/docker/abc/memory.stat",
          "inactive_file 7\ntotal_active_file " + std::to_string(4 * gib) + "\ntotal_inactive_file " +
              std::to_string(2 * gib) + "\n");
      const auto [available, total] = cli::bisect::hostMemory(root);
      CHECK(total == 32 * gib);
      CHECK(available == 8 * gib);
    }
    SECTION("a job's limit above its step's") {
      cgroup("sys/fs/cgroup/memory/docker", true, 40, 38);
      cgroup("sys/fs/cgroup/memory/docker/abc", true, 40, 10);
      const auto [available, total] = cli::bisect::hostMemory(root);
      CHECK(total == 40 * gib);
      CHECK(available == 2 * gib);
    }
    SECTION("unlimited and the path not below the mount (a container's)") {
      const auto [available, total] = cli::bisect::hostMemory(root);
      CHECK(total == 64 * gib);
      CHECK(available == 48 * gib);
    }
  }
  SECTION("no cgroup files: the host's alone") {
    put(root, "proc/meminfo", meminfo);
    const auto [available, total] = cli::bisect::hostMemory(root);
    CHECK(total == 64 * gib);
    CHECK(available == 48 * gib);
  }
  fs::remove_all(root);
}

TEST_CASE("bisect helpers: launchers of many processes are known by their command") {
  using S = std::vector<std::string>;
  CHECK(cli::bisect::launcherOf(S{"torchrun", "--nproc-per-node", "2", "train.py"}) == "torchrun");
  CHECK(cli::bisect::launcherOf(S{"/opt/venv/bin/torchrun", "train.py"}) == "torchrun");
  CHECK(cli::bisect::launcherOf(S{"python3", "-u", "-m", "torch.distributed.run", "train.py"}) ==
        "python -m torch.distributed.run");
  CHECK(cli::bisect::launcherOf(S{"python", "-mtorch.distributed.launch", "train.py"}) ==
        "python -m torch.distributed.launch");
  CHECK(cli::bisect::launcherOf(S{"accelerate", "launch", "train.py"}) == "accelerate launch");
  CHECK(cli::bisect::launcherOf(S{"srun", "-n", "8", "python", "train.py"}) == "srun");
  CHECK(cli::bisect::launcherOf(S{"python", "train.py", "-m", "torch.distributed.run"}).empty());  // the script's own
  CHECK(cli::bisect::launcherOf(S{"python", "-m", "mypackage.train"}).empty());
  CHECK(cli::bisect::launcherOf(S{"python", "-X", "dev", "-W", "error", "-m", "torch.distributed.run", "t.py"}) ==
        "python -m torch.distributed.run");
  CHECK(cli::bisect::launcherOf(S{"python", "-Xdev", "-m", "torch.distributed.run", "t.py"}) ==
        "python -m torch.distributed.run");
  CHECK(cli::bisect::launcherOf(S{"python", "-c", "import x", "-m", "torch.distributed.run"}).empty());
  CHECK(cli::bisect::launcherOf(S{"env", "-i", "NCCL_ALGO=Ring", "torchrun", "t.py"}) == "torchrun");
  CHECK(cli::bisect::launcherOf(S{"/usr/bin/env", "A=1", "python", "-m", "torch.distributed.run"}) ==
        "python -m torch.distributed.run");
  CHECK(cli::bisect::launcherOf(S{"env", "A=1"}).empty());
  CHECK(cli::bisect::launcherOf(S{"env", "-u", "CUDA_VISIBLE_DEVICES", "-C", "/job", "torchrun", "t.py"}) == "torchrun");
  CHECK(cli::bisect::launcherOf(S{"accelerate", "config"}).empty());
  CHECK(cli::bisect::launcherOf(S{}).empty());
}

TEST_CASE("bisect helpers: log tails and clocks and replay errors") {
  TempDir tmp;
  writeText(tmp / "log", "one\ntwo\r\nthree\nfour\n");
  CHECK(cli::bisect::lastLines(tmp / "log", 2) == std::vector<std::string>{"three", "four"});
  CHECK(cli::bisect::lastLines(tmp / "log", 10).size() == 4);
  CHECK(cli::bisect::lastLines(tmp / "missing", 3).empty());
  CHECK(cli::bisect::clockTime(7.9) == "0:07");
  CHECK(cli::bisect::clockTime(754) == "12:34");
  CHECK(cli::bisect::clockTime(3723) == "1:02:03");
  CHECK(cli::bisect::replayFailure({"gpurr replay: warning: x", "gpurr replay: error: no CUDA driver", ""}, "?") ==
        "no CUDA driver");
  CHECK(cli::bisect::replayFailure({}, "exit 2") == "exit 2");
}

// ---------------------------------------------------------------- the command

TEST_CASE("bisect: identical runs say what was compared and exit 0") {
  Sandbox s;
  const Result r = s.bisect("identical");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const Json rep = s.report();
  checkReportKeys(rep);
  CHECK(rep["verdict"] == "identical");
  CHECK(rep["diff"].is_null());
  CHECK(rep["reproduced"].is_null());
  CHECK(rep["timeline"].is_null());
  REQUIRE(rep["runs"].size() == 2);
  for (const Json& run : rep["runs"]) {
    CHECK(run["exitCode"] == 0);
    CHECK(run["launches"] == 10);
  }
  CHECK(rep["compared"]["launches"] == 10);
  CHECK(rep["compared"]["copies"] == 3);
  CHECK(rep["compared"]["processes"] == 1);
  // 22 buffers touched by the 10 launches: the 10 their ops write hashed after
  // them, the other 12 only read; 8 hashed before too, at their first use (the
  // 2 copied in were touched by the copies).
  CHECK(rep["compared"]["bytesHashed"] == 4096 * 18);
  CHECK(rep["command"][1] == "identical");
  CHECK(filesIn(s.out()) == std::vector<std::string>{"report.html", "report.json", "report.txt", "run1.gpurr",
                                                     "run1.log", "run2.gpurr", "run2.log"});
  CHECK_THAT(r.out, Catch::Contains("identical: the 2 runs are bitwise identical"));
  CHECK_THAT(r.out, Catch::Contains("10 launches (10 hashed), 3 copies"));
  // report.txt is the report without the pointer to the files.
  const std::string txt = readText(s.out() / "report.txt");
  CHECK(r.out.starts_with(txt));
  CHECK_THAT(r.out, Catch::Contains("results in out/"));
  // The command's output went to the logs, not to the terminal.
  CHECK_THAT(readText(s.out() / "run2.log"), Catch::Contains("fake training (identical), run 2"));
  CHECK_THAT(r.out, !Catch::Contains("fake training"));
  // One progress line per phase on a pipe.
  CHECK_THAT(r.err, Catch::Contains("run 1/2: recording") && Catch::Contains("run 2/2: recording") &&
                        Catch::Contains("out/run1.log"));
  CHECK(readText(s.out() / "report.html").find("<html") != std::string::npos);
}

TEST_CASE("bisect: a nondeterministic kernel is found and snapshotted and confirmed while replay says why it did not run") {
  Sandbox s;
  const Result r = s.bisect("nondeterministic", {"--repeat", "7"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  const Json rep = s.report();
  checkReportKeys(rep);
  CHECK(rep["verdict"] == "diverged");
  const Json& d = firstDivergence(rep["diff"]);
  CHECK(d["cause"] == "nondeterministicKernel");
  CHECK(d["a"]["launchIndex"] == 5);
  CHECK(d["a"]["kind"] == "launch");
  REQUIRE(rep["runs"].size() == 3);
  CHECK(rep["runs"][2]["snapshot"] == "5");
  CHECK(rep["runs"][0]["snapshot"].is_null());
  CHECK(rep["reproduced"] == true);
  CHECK(rep["confirmation"].is_object());
  CHECK(rep["confirmation"]["identical"] == false);
  // The confirmation run was recorded with snapshots of launch 5 only.
  const fs::path run3 = s.out() / "run3.gpurr";
  CHECK(trace::TraceReader(run3).header().options.snapshot == "5");
  CHECK(snapshotLaunches(run3) == std::vector<uint64_t>{5});
  CHECK(snapshotLaunches(s.out() / "run1.gpurr").empty());
  // No GPU here: replay reports that it did not run, and why.
  CHECK(rep["replay"].is_null());
  REQUIRE(rep["replayError"].is_string());
  CHECK(rep["replayError"].get<std::string>().size() > 10);
  // gpurr replay ran, failed, and its reason is the one reported.
  CHECK_THAT(readText(s.out() / "replay.log"), Catch::Contains(rep["replayError"].get<std::string>()));
  CHECK_THAT(r.out, Catch::Contains("  replay   not run: "));
  CHECK_THAT(r.out, Catch::Contains("cause    nondeterministic kernel"));
  CHECK_THAT(r.out, Catch::Contains("first divergence: launch #5"));
  CHECK_THAT(r.out, Catch::Contains("reproduced"));
  // Where it came from in train.py, and the known culprit matched by its op.
  CHECK_THAT(r.out, Catch::Contains("  op       aten::index_add_ (forward) in net, train.py:19, step 0 (launch 6 of "
                                    "the step)\n"));
  CHECK_THAT(r.out, Catch::Contains("matched by framework op: aten::index_add_ at train.py:19"));
  const Json& origin = d["a"]["origin"];
  CHECK(origin["op"] == "aten::index_add_");
  CHECK(origin["phase"] == "forward");
  CHECK(origin["module"] == "net");
  CHECK(origin["file"] == "/work/train.py");
  CHECK(origin["line"] == 19);
  CHECK(origin["step"] == 0);
  CHECK(origin["stepLaunch"] == 5);
  REQUIRE(d["known"].size() == 1);
  CHECK(d["known"][0]["id"] == "torch-index-add");
  CHECK(d["known"][0]["matchedBy"] == "framework op");
  // The timeline's operations carry their origins, and so does the page.
  bool anyOrigin = false;
  for (const Json& row : rep["timeline"]["rows"]) {
    anyOrigin = anyOrigin || (row["a"].is_object() && row["a"]["origin"].is_object());
  }
  CHECK(anyOrigin);
  const std::string page = readText(s.out() / "report.html");
  CHECK_THAT(page, Catch::Contains("aten::index_add_") && Catch::Contains("train.py:19") &&
                       Catch::Contains("net.drop"));
  // The trace's later steps: what follows the optimizer step is step 1.
  const auto events = trace::TraceReader(s.out() / "run1.gpurr").readAll();
  REQUIRE(events.back().origin);
  CHECK(events.back().origin->op == "aten::_local_scalar_dense");
  CHECK(events.back().origin->step == 1);
  CHECK(events.back().origin->stepLaunch == 1);
  CHECK_FALSE(fs::exists(s.out() / "replay.json"));
  CHECK(rep["timeline"].is_object());
  CHECK(rep["timeline"]["rows"].size() > 0);
  CHECK_THAT(r.err, Catch::Contains("with snapshots of launch #5"));
}

// Runs `body` with FAKE_RUN_SECONDS set, so that each run of the fake
// program takes that long and the bisect starts the next one beside it.
template <typename Body>
void withSlowRuns(const char* seconds, Body body) {
  ::setenv("FAKE_RUN_SECONDS", seconds, 1);
  body();
  ::unsetenv("FAKE_RUN_SECONDS");
}

TEST_CASE("bisect: each run starts while the one before records and waits before its CUDA work until that one ends") {
  Sandbox s;
  Result r;
  withSlowRuns("1.5", [&] { r = s.bisect("nondeterministic", {"--repeat", "3"}); });
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  const Json rep = s.report();
  REQUIRE(rep["runs"].size() == 3);
  CHECK(rep["runs"][0]["startedDuring"].is_null());
  CHECK(rep["runs"][1]["startedDuring"] == 1);
  // Run 2 at once, the confirmation once run 1 had begun its CUDA work.
  CHECK(rep["runs"][2]["startedDuring"] == 1);
  CHECK_THAT(r.out, Catch::Contains("run2.gpurr  (started during run 1)"));
  CHECK_THAT(readText(s.out() / "report.html"), Catch::Contains("started during run 1</span>"));
  // Their CUDA work never overlapped: each run began after the one before ended.
  CHECK(readText(s.state / "order") == "begin 1\nend 1\nbegin 2\nend 2\nbegin 3\nend 3\n");
  // The confirmation, started before the launch to snapshot was known, got
  // it through its gate.
  CHECK(firstDivergence(rep["diff"])["a"]["launchIndex"] == 5);
  CHECK(rep["reproduced"] == true);
  const fs::path run3 = s.out() / "run3.gpurr";
  CHECK(trace::TraceReader(run3).header().options.snapshot == "5");
  CHECK(snapshotLaunches(run3) == std::vector<uint64_t>{5});
  for (const std::string& name : filesIn(s.out())) CHECK(name[0] != '.');  // no gate or stop file left
}

TEST_CASE("bisect: on a machine of fewer CPUs than GPURR_BISECT_MIN_CPUS no run starts early") {
  Sandbox s;
  Result r;
  ::setenv("GPURR_BISECT_MIN_CPUS", "100000", 1);  // more than any machine has
  withSlowRuns("1", [&] { r = s.bisect("nondeterministic", {"--repeat", "3"}); });
  ::unsetenv("GPURR_BISECT_MIN_CPUS");
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("each run starts when the one before has ended (--no-overlap): with "));
  CHECK_THAT(r.err, Catch::Contains("CPUs here, a run started early would only slow the one recording"));
  for (const Json& run : s.report()["runs"]) CHECK(run["startedDuring"].is_null());
}

TEST_CASE("bisect: the run during which others started says that its time is more than recording costs") {
  Sandbox s;
  Result r;
  withSlowRuns("1", [&] { r = s.bisect("nondeterministic", {"--repeat", "3"}); });
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("run1.gpurr  (runs 2 and 3 started during it: their start shared the machine "
                                    "with it, so its time is more than recording alone costs)"));
}

TEST_CASE("bisect: when host memory runs short no run starts early from then on") {
  // The runs held beside the one recorded build their model on the CPU:
  // the OOM killer could take the run being recorded.
  Sandbox s;
  Result r;
  ::setenv("GPURR_BISECT_MIN_AVAILABLE_MB", "1000000000", 1);  // more than any machine has: short at once
  withSlowRuns("1", [&] { r = s.bisect("nondeterministic", {"--repeat", "3"}); });
  ::unsetenv("GPURR_BISECT_MIN_AVAILABLE_MB");
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("MiB of host memory left: no run starts early from now on"));
  const Json rep = s.report();
  REQUIRE(rep["runs"].size() == 3);
  for (const Json& run : rep["runs"]) CHECK(run["startedDuring"].is_null());
  CHECK(rep["reproduced"] == true);
  CHECK(readText(s.state / "order") == "begin 1\nend 1\nbegin 2\nend 2\nbegin 3\nend 3\n");
  for (const std::string& name : filesIn(s.out())) CHECK(name[0] != '.');  // no gate or stop file left
}

// Whether a process whose command line holds `text` is alive.
bool running(const std::string& text) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc", ec)) {
    const std::string cmdline = readText(e.path() / "cmdline");
    if (cmdline.find(text) != std::string::npos && e.path().filename() != std::to_string(::getpid())) return true;
  }
  return false;
}

TEST_CASE("record --start-gate: a held program that ignores SIGTERM ends when record is told to end or is gone") {
  // gpurr bisect ends a held run with SIGTERM, and kills its gpurr record
  // 10 s later; when bisect dies, its record gets SIGTERM.
  Sandbox s;
  ::setenv("FAKE_IGNORES_TERM", "1", 1);
  for (const int sig : {SIGTERM, SIGKILL}) {
    INFO("signal " << sig);
    const std::string n = std::to_string(sig);
    const fs::path gate = s.tmp / ("gate" + n), state = s.tmp / ("state" + n);
    const pid_t record = s.start({"record", "-o", "run" + n + ".gpurr", "--start-gate", gate.string(),
                                  "--", kFake.string(), "identical", state.string()});
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the program waits at its gate
    REQUIRE(running(state.string()));
    ::kill(record, sig);
    int status = 0;
    ::waitpid(record, &status, 0);
    bool gone = false;
    for (int i = 0; i < 50 && !gone; ++i) {
      gone = !running(state.string());
      if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    CHECK(gone);
    CHECK_FALSE(fs::exists(state / "counter"));  // it never went past its gate
    if (sig == SIGTERM) CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 143));
  }
  ::unsetenv("FAKE_IGNORES_TERM");
}

TEST_CASE("record --start-gate: a program that is not gpurr record's own child waits for its gate too") {
  // A shell's command, a worker the program started: their parent is not
  // gpurr record, which is alive.
  Sandbox s;
  const fs::path gate = s.tmp / "gate", state = s.tmp / "state-child";
  const pid_t record = s.start({"record", "-o", "child.gpurr", "--start-gate", gate.string(), "--", "sh", "-c",
                                "'" + kFake.string() + "' identical '" + state.string() + "'; true"});
  std::this_thread::sleep_for(std::chrono::seconds(1));
  CHECK(running(state.string()));  // still waiting
  writeText(gate, "");
  int status = 0;
  ::waitpid(record, &status, 0);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(readText(state / "counter") == "1\n");  // it ran, once let go
}

TEST_CASE("bisect: a run held at its start that handles SIGTERM itself is ended through its gate") {
  // Identical runs need no confirmation: the run held beside run 2 is ended.
  // A Python program whose SIGTERM handler was set before its first CUDA
  // call cannot run it where it is held.
  Sandbox s;
  Result r;
  ::setenv("FAKE_IGNORES_TERM", "1", 1);
  const auto start = std::chrono::steady_clock::now();
  withSlowRuns("1", [&] { r = s.bisect("identical"); });
  const auto took = std::chrono::steady_clock::now() - start;
  ::unsetenv("FAKE_IGNORES_TERM");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(s.report()["verdict"] == "identical");
  CHECK(took < std::chrono::seconds(8));  // not the 10 s after which a child that stays is killed
  CHECK(readText(s.state / "order") == "begin 1\nend 1\nbegin 2\nend 2\n");
  for (const std::string& name : filesIn(s.out())) CHECK(name[0] != '.');  // no gate or stop file left
}

TEST_CASE("bisect: a run started early that ends before its turn runs again, and --no-overlap starts none early") {
  Sandbox s;
  Result r;
  // As torchrun's port: the run started during run 1 finds it taken and
  // fails at once, before its CUDA work.
  withSlowRuns("1.5", [&] { r = s.bisect("port"); });
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  const Json rep = s.report();
  CHECK(rep["verdict"] == "identical");
  REQUIRE(rep["runs"].size() == 2);
  CHECK(rep["runs"][1]["startedDuring"].is_null());
  CHECK(rep["runs"][1]["exitCode"] == 0);
  CHECK_THAT(r.err, Catch::Contains("run 2, started during run 1, ended before its turn (exit 1); running it again"));
  const std::string log = readText(s.out() / "run2.log");
  CHECK_THAT(log, Catch::Contains("Address already in use") && Catch::Contains("it is run again from here"));
  CHECK(readText(s.state / "order") == "begin 1\nend 1\nbegin 2\nend 2\n");
  // Identical runs need no confirmation: none is left running or on disk.
  CHECK_FALSE(fs::exists(s.out() / "run3.log"));
  CHECK_FALSE(fs::exists(s.out() / "run3.gpurr"));

  // The run started during run 1 still alive at its turn, failing only
  // after it was let go (torchrun's agent slow to give up the port): it
  // runs again alone too.
  Sandbox late;
  ::setenv("FAKE_PORT_FAIL_SECONDS", "3", 1);
  withSlowRuns("1.5", [&] { r = late.bisect("port"); });
  ::unsetenv("FAKE_PORT_FAIL_SECONDS");
  CHECK(r.code == 0);
  CHECK(late.report()["verdict"] == "identical");
  REQUIRE(late.report()["runs"].size() == 2);
  CHECK(late.report()["runs"][1]["exitCode"] == 0);
  CHECK(late.report()["runs"][1]["startedDuring"].is_null());
  CHECK_THAT(r.err, Catch::Contains("run 2 failed before its CUDA work after it was started during run 1; running "
                                    "it again alone"));
  CHECK_THAT(readText(late.out() / "run2.log"), Catch::Contains("Address already in use") &&
                                                    Catch::Contains("it is run again from here"));

  // Run 1 failing before its CUDA work, run 2 started beside it (as when
  // run 2 took the port first), runs again alone; run 2 is started again
  // once it has begun its CUDA work.
  Sandbox f;
  withSlowRuns("1.5", [&] { r = f.bisect("first_fails"); });
  CHECK(r.code == 0);
  CHECK(f.report()["verdict"] == "identical");
  CHECK(f.report()["runs"][0]["exitCode"] == 0);
  CHECK(f.report()["runs"][1]["startedDuring"] == 1);
  CHECK_THAT(r.err, Catch::Contains("run 1 failed before its CUDA work while run 2 started beside it; running it "
                                    "again alone"));
  CHECK_THAT(readText(f.out() / "run1.log"), Catch::Contains("No module named 'torch'") &&
                                                 Catch::Contains("it is run again from here"));

  Sandbox t;
  withSlowRuns("1.5", [&] { r = t.bisect("nondeterministic", {"--no-overlap", "--repeat", "3"}); });
  CHECK(r.code == 1);
  for (const Json& run : t.report()["runs"]) CHECK(run["startedDuring"].is_null());
}

TEST_CASE("bisect: an unseeded RNG is named at its launch") {
  Sandbox s;
  const Result r = s.bisect("seed");
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  const Json rep = s.report();
  CHECK(rep["verdict"] == "diverged");
  CHECK(firstDivergence(rep["diff"])["cause"] == "rngState");
  CHECK(firstDivergence(rep["diff"])["a"]["launchIndex"] == 3);
  CHECK(rep["runs"][2]["snapshot"] == "3");
  CHECK(snapshotLaunches(s.out() / "run3.gpurr") == std::vector<uint64_t>{3});
  CHECK(rep["reproduced"] == true);
  CHECK_THAT(r.out, Catch::Contains("cause    RNG state") || Catch::Contains("cause    rng state"));
  CHECK_THAT(r.out, Catch::Contains("  op       aten::native_dropout inside aten::dropout (forward) in net.drop, "
                                    "train.py:18, step 0"));
  CHECK_THAT(r.out, Catch::Contains("matched by framework op: aten::native_dropout at train.py:18"));
}

TEST_CASE("bisect: a host-input difference is a copy with no snapshot and no replay") {
  Sandbox s;
  const Result r = s.bisect("host_input");
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  const Json rep = s.report();
  CHECK(rep["verdict"] == "diverged");
  const Json& d = firstDivergence(rep["diff"]);
  CHECK(d["cause"] == "hostInput");
  CHECK(d["a"]["kind"] == "memcpy");
  REQUIRE(rep["runs"].size() == 3);
  CHECK(rep["runs"][2]["snapshot"].is_null());
  CHECK(snapshotLaunches(s.out() / "run3.gpurr").empty());
  CHECK(trace::TraceReader(s.out() / "run3.gpurr").header().options.snapshot.empty());
  CHECK(rep["reproduced"] == true);
  CHECK_THAT(rep["replayError"].get<std::string>(), Catch::Contains("not a kernel launch"));
}

TEST_CASE("bisect: a divergence that the third run does not repeat is reported as not reproduced") {
  Sandbox s;
  const Result r = s.bisect("flaky");
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  const Json rep = s.report();
  CHECK(rep["verdict"] == "notReproduced");
  CHECK(rep["reproduced"] == false);
  CHECK(rep["reproducedElsewhere"] == false);
  CHECK(firstDivergence(rep["diff"])["a"]["launchIndex"] == 5);
  CHECK(rep["runs"][2]["snapshot"] == "5");
  CHECK(firstDivergence(rep["confirmation"])["a"]["launchIndex"] == 2);
  CHECK_THAT(r.out, Catch::Contains("not reproduced at the same place"));
  CHECK_THAT(r.out, Catch::Contains("first divergence at launch #2 (aten::relu (forward) in net, train.py:17)"));
  CHECK(rep["diff"].is_object());  // everything known is still reported
  CHECK(rep["timeline"].is_object());
}

TEST_CASE("bisect: an RNG divergence the third run shows at another draw of the same op is reproduced there") {
  Sandbox s;
  const Result r = s.bisect("rng_draws");
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  const Json rep = s.report();
  CHECK(rep["verdict"] == "diverged");
  CHECK(firstDivergence(rep["diff"])["cause"] == "rngState");
  CHECK(firstDivergence(rep["diff"])["a"]["launchIndex"] == 5);
  CHECK(firstDivergence(rep["confirmation"])["a"]["launchIndex"] == 3);
  CHECK(firstDivergence(rep["confirmationOther"])["a"]["launchIndex"] == 3);
  CHECK(rep["reproduced"] == true);
  CHECK(rep["reproducedElsewhere"] == true);
  CHECK_THAT(r.out, Catch::Contains("reproduced at another launch of the same op, for the same cause"));
}

TEST_CASE("bisect: a crashing run stops the bisect with the end of its log unless --keep-going") {
  Sandbox s;
  const Result r = s.bisect("crash");
  INFO(r.out << r.err);
  REQUIRE(r.code == 2);
  const Json rep = s.report();
  checkReportKeys(rep);
  CHECK(rep["verdict"] == "failed");
  REQUIRE(rep["runs"].size() == 2);
  CHECK(rep["runs"][0]["exitCode"] == 0);
  CHECK(rep["runs"][1]["exitCode"] == 3);
  CHECK(rep["runs"][1]["launches"] == 7);
  CHECK(fs::exists(s.out() / "run2.gpurr" / "version"));  // its trace is kept
  CHECK_THAT(r.out, Catch::Contains("run 2 failed: exit code 3"));
  CHECK_THAT(r.out, Catch::Contains("RuntimeError: CUDA error: an illegal memory access"));
  CHECK_THAT(r.out, Catch::Contains("out/run2.log"));
  CHECK(rep["error"].is_string());

  Sandbox k;
  const Result kept = k.bisect("crash", {"--keep-going"});
  INFO(kept.out << kept.err);
  const Json krep = k.report();
  CHECK(krep["runs"].size() >= 2);
  // The runs that left traces were compared: they agree up to where run 2's
  // trace ends, and nothing is known after it (not "identical").
  CHECK(kept.code == 2);
  CHECK(krep["verdict"] == "failed");
  CHECK_THAT(krep["error"].get<std::string>(),
             Catch::Contains("run 1 and run 2 agree up to where run B's trace ends (its recording did not end "
                             "cleanly) and run A goes on for "));
  CHECK_THAT(kept.out, Catch::Contains("failed: run 1 and run 2 agree up to where run B's trace ends"));
  CHECK_THAT(kept.out, Catch::Contains("run 2 failed: exit code 3"));
}

TEST_CASE("bisect: usage errors exit 2 and touch nothing") {
  Sandbox s;
  Result r = s.run({"bisect", "-o", "out"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("no command given after --"));
  r = s.run({"bisect", "--runs", "1", "--", "true"});
  CHECK(r.code == 2);
  r = s.run({"bisect", "-o", "out", "--", kFake.string(), "identical", s.state.string()}, false);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("recorder library"));
  CHECK_FALSE(fs::exists(s.out()));

  fs::create_directories(s.out());
  writeText(s.out() / "precious.txt", "keep me");
  r = s.bisect("identical");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("not empty"));
  r = s.bisect("identical", {"--force"});
  CHECK(r.code == 0);
  CHECK(readText(s.out() / "precious.txt") == "keep me");
  r = s.bisect("identical", {"--force", "--json"});  // over the previous bisect
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(Json::parse(r.out)["verdict"] == "identical");
}

TEST_CASE("bisect: without -o the results go to bisect-<command>-<date>-<time>") {
  Sandbox s;
  const Result r = s.run({"bisect", "--", kFake.string(), "identical", s.state.string()});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::vector<std::string> names = filesIn(s.work);
  REQUIRE(names.size() == 1);
  CHECK(names[0].starts_with("bisect-fake_cuda_program-"));
  CHECK_THAT(r.err, Catch::Contains("results go to " + names[0]));
  CHECK(fs::exists(s.work / names[0] / "report.json"));
}

TEST_CASE("diff --html writes the report as one page with the launches around the divergence") {
  Sandbox s;
  const fs::path cases = fs::path(GPURR_SOURCE_DIR) / "tests" / "diff" / "cases";
  const fs::path nondet = cases / "nondeterministic_kernel";
  Result r = s.run({"diff", (nondet / "a.gpurr").string(), (nondet / "b.gpurr").string(), "--html",
                    (s.work / "d.html").string()});
  INFO(r.err);
  CHECK(r.code == 1);
  const std::string page = readText(s.work / "d.html");
  CHECK(page.find("<html") != std::string::npos);
  CHECK(page.find("indexFuncLargeIndex") != std::string::npos);
  // The text report is printed as without --html.
  const std::string expected = readText(nondet / "expected.txt");
  CHECK(r.out.substr(r.out.find('\n')) == expected.substr(expected.find('\n')));

  const fs::path same = cases / "identical";
  r = s.run({"diff", (same / "a.gpurr").string(), (same / "b.gpurr").string(), "--html", (s.work / "i.html").string()});
  CHECK(r.code == 0);
  CHECK(readText(s.work / "i.html").find("<html") != std::string::npos);
  r = s.run({"diff", (same / "a.gpurr").string(), (same / "b.gpurr").string(), "--html",
             (s.work / "no" / "such" / "dir.html").string()});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("cannot write"));
}

TEST_CASE("bisect: processes are matched by name and the diverging one is snapshotted and replayed") {
  Sandbox s;
  const Result r = s.bisect("ranks");
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  const Json rep = s.report();
  CHECK(rep["verdict"] == "diverged");
  REQUIRE(rep["diff"]["processes"].size() == 2);
  CHECK(rep["diff"]["processes"][0]["name"] == "rank0.gpurr");
  CHECK(rep["diff"]["processes"][0]["identical"] == true);
  const Json& d = rep["diff"]["processes"][1]["firstDivergence"];
  CHECK(d["cause"] == "nondeterministicKernel");
  CHECK(d["a"]["launchIndex"] == 5);
  CHECK(rep["runs"][2]["snapshot"] == "5");
  CHECK(snapshotLaunches(s.out() / "run3.gpurr" / "rank1.gpurr") == std::vector<uint64_t>{5});
  CHECK(rep["reproduced"] == true);
  CHECK(rep["timeline"]["process"] == "rank1.gpurr");
  CHECK_THAT(r.out, Catch::Contains("runs 1 and 2 diverge in process rank1.gpurr"));
  // The replay was attempted on the diverging process's trace.
  CHECK(rep["replayError"].is_string());
  CHECK_THAT(r.out, Catch::Contains("  replay   not run: "));
}

TEST_CASE("bisect: in a job of ranks the origin is reported, not a receiver that diverged earlier among its own operations") {
  Sandbox s;
  const Result r = s.bisect("job");
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  const Json rep = s.report();
  CHECK(rep["verdict"] == "diverged");
  REQUIRE(rep["diff"]["processes"].size() == 2);
  // Rank 0 received rank 1's sum at its 9th operation; rank 1's index_add_,
  // where it began, is its 11th.
  const Json& receiver = rep["diff"]["processes"][0]["firstDivergence"];
  const Json& origin = rep["diff"]["processes"][1]["firstDivergence"];
  CHECK(receiver["cause"] == "collective");
  CHECK(origin["cause"] == "nondeterministicKernel");
  CHECK(receiver["a"]["index"].get<uint64_t>() < origin["a"]["index"].get<uint64_t>());
  CHECK_THAT(r.out, Catch::Contains("runs 1 and 2 diverge in process rank1.gpurr"));
  CHECK_THAT(r.out, Catch::Contains("\nrank 0 (rank0.gpurr): receiver, after 0 collectives: "));
  CHECK_THAT(r.out, Catch::Contains("\nrank 1 (rank1.gpurr): origin, after 0 collectives: "));
  CHECK_THAT(r.out, Catch::Contains("\nearliest origin: rank 1, "));
  CHECK(rep["timeline"]["process"] == "rank1.gpurr");
  // The origin's launch is the one snapshotted and confirmed.
  CHECK(rep["runs"][2]["snapshot"] == "5");
  CHECK(snapshotLaunches(s.out() / "run3.gpurr" / "rank1.gpurr") == std::vector<uint64_t>{5});
  CHECK(rep["reproduced"] == true);
}

TEST_CASE("bisect: a termination signal stops it after the running child and says where the results are") {
  Sandbox s;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open((s.io / "stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open((s.io / "stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (::chdir(s.work.c_str()) != 0) ::_exit(99);
    ::setenv("GPURR_RECORDER_LIB", s.lib.c_str(), 1);
    ::execl(kGpurr.c_str(), kGpurr.c_str(), "bisect", "-o", "out", "--", "sh", "-c", "echo started; sleep 30",
            static_cast<char*>(nullptr));
    ::_exit(98);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (readText(s.out() / "run1.log").find("started") == std::string::npos &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGTERM);  // to gpurr alone: it passes it on to the recording
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
  const std::string err = readText(s.io / "stderr");
  CHECK_THAT(err, Catch::Contains("interrupted") && Catch::Contains("is in out/"));
  CHECK(fs::exists(s.out() / "run1.log"));
  CHECK_FALSE(fs::exists(s.out() / "run2.log"));  // no further run started
  // The report says what was done, for a job stopped at its time limit.
  const Json rep = s.report();
  CHECK(rep["verdict"] == "failed");
  CHECK(rep["error"] == "interrupted (Terminated); what was recorded so far is in out/");
  CHECK(rep["runs"].size() == 1);
  CHECK_THAT(readText(s.io / "stdout"), Catch::Contains("failed: interrupted (Terminated)"));
}

TEST_CASE("bisect: with more runs the pair that diverges earliest is reported and confirmed against its runs") {
  Sandbox s;
  // flaky: run 2 differs from run 1 at launch 5, run 3 at launch 2; run 4
  // (the confirmation) is like run 1 again.
  const Result r = s.bisect("flaky", {"--runs", "3"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  const Json rep = s.report();
  CHECK(rep["verdict"] == "diverged");
  REQUIRE(rep["runs"].size() == 4);
  CHECK(rep["diff"]["b"].get<std::string>().ends_with("run3.gpurr"));
  CHECK(firstDivergence(rep["diff"])["a"]["launchIndex"] == 2);
  CHECK(rep["runs"][3]["snapshot"] == "2");
  CHECK(rep["confirmation"]["identical"] == true);  // run 4 is like run 1
  CHECK(firstDivergence(rep["confirmationOther"])["a"]["launchIndex"] == 2);
  CHECK(rep["reproduced"] == true);
  CHECK_THAT(r.out, Catch::Contains("runs 1 and 3 diverge"));
  CHECK_THAT(r.out, Catch::Contains("run 4 (snapshots of launch #2) diverges from run 3 at the same operation"));
}

TEST_CASE("bisect: with --keep-going a run that left no trace is skipped and the others are compared") {
  Sandbox s;
  const Result r = s.bisect("first_fails", {"--runs", "3", "--keep-going", "--no-overlap"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const Json rep = s.report();
  CHECK(rep["verdict"] == "identical");
  CHECK(rep["baseRun"] == 2);
  CHECK(rep["runs"][0]["exitCode"] == 4);
  CHECK(rep["runs"][0]["trace"].is_null());
  REQUIRE(rep["failures"].size() == 1);
  CHECK_THAT(rep["failures"][0].get<std::string>(), Catch::Contains("run 1 failed: exit code 4") &&
                                                        Catch::Contains("No module named 'torch'"));
  CHECK_THAT(r.out, Catch::Contains("identical: the 2 runs are bitwise identical"));

  Sandbox stop;
  const Result stopped = stop.bisect("first_fails", {"--no-overlap"});
  CHECK(stopped.code == 2);
  CHECK(stop.report()["verdict"] == "failed");
  CHECK(stop.report()["runs"].size() == 1);
  CHECK_THAT(stopped.out, Catch::Contains("add --keep-going"));
}

TEST_CASE("bisect: a command that runs no CUDA process stops after its first run, without suggesting --keep-going") {
  Sandbox s;
  const Result r = s.run({"bisect", "-o", "out", "--", "true"});
  INFO(r.out << r.err);
  CHECK(r.code == 2);
  if (gpurr::cli::missingCudaDriver()) {
    // The reason is the missing driver, named in the one-line verdict too.
    CHECK_THAT(r.out, Catch::Contains("run 1 wrote no trace: no CUDA driver on this machine (libcuda.so.1: ") &&
                          Catch::Contains("run 1 recorded nothing to compare: no CUDA driver on this machine") &&
                          !Catch::Contains("--keep-going"));
  } else {
    CHECK_THAT(r.out, Catch::Contains("run 1 wrote no trace: the command ran no CUDA process") &&
                          Catch::Contains("run 1 recorded nothing to compare") && !Catch::Contains("--keep-going"));
  }
  const Json rep = s.report();
  CHECK(rep["verdict"] == "failed");
  CHECK(rep["runs"].size() == 1);
}

TEST_CASE("bisect helpers: the replay row from what gpurr replay --json prints") {
  TempDir tmp;
  // The keys of replayer/report.cpp's outcomeJson that the row uses.
  writeText(tmp / "replay.json", R"J({"trace": "run3.gpurr", "seq": 18, "function": "_Z1kv",
    "verdict": "nondeterministic", "summary": "nondeterministic: 31 distinct results in 50 runs (0 equal to the recording)",
    "runs": 50, "distinctResults": 31})J");
  const auto j = cli::bisect::readReplayJson(tmp / "replay.json");
  REQUIRE(j);
  CHECK(cli::bisect::replaySummary(*j, 3) ==
        "50 re-executions of run 3 #18 from its recorded inputs: nondeterministic: 31 distinct results in 50 runs "
        "(0 equal to the recording) -> intrinsic");
  writeText(tmp / "equal.json", R"J({"seq": 7, "verdict": "equal", "runs": 1,
    "summary": "deterministic and equal to the recording: 1 of 1 run(s) identical"})J");
  CHECK(cli::bisect::replaySummary(*cli::bisect::readReplayJson(tmp / "equal.json"), 4) ==
        "1 re-execution of run 4 #7 from its recorded inputs: deterministic and equal to the recording: 1 of 1 "
        "run(s) identical");
  writeText(tmp / "empty.json", "");
  CHECK_FALSE(cli::bisect::readReplayJson(tmp / "empty.json"));
  writeText(tmp / "other.json", "[1, 2]");
  CHECK_FALSE(cli::bisect::readReplayJson(tmp / "other.json"));
  CHECK_FALSE(cli::bisect::readReplayJson(tmp / "missing.json"));
}

namespace {

// Runs bin/gpurr with `args` on a new terminal (120 columns) in `s.work`;
// `whenStarted` is called once `s.out()/run1.log` holds `marker`. Returns
// the exit status and everything written to the terminal.
std::pair<int, std::string> onTerminal(Sandbox& s, const std::vector<std::string>& args, const std::string& marker,
                                       const std::function<void(int master)>& whenStarted) {
  winsize ws{};
  ws.ws_col = 120;
  ws.ws_row = 40;
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &ws);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("GPURR_RECORDER_LIB", s.lib.c_str(), 1);
    ::unsetenv("NO_COLOR");
    if (::chdir(s.work.c_str()) != 0) ::_exit(99);
    std::vector<char*> argv{const_cast<char*>(kGpurr.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(kGpurr.c_str(), argv.data());
    ::_exit(98);
  }
  std::string screen;
  bool started = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) {
      char buf[4096];
      const ssize_t n = ::read(master, buf, sizeof buf);
      if (n <= 0) break;  // EIO: every process of the terminal has gone
      screen.append(buf, static_cast<size_t>(n));
    }
    if (!started && readText(s.out() / "run1.log").find(marker) != std::string::npos) {
      started = true;
      whenStarted(master);
    }
    if (std::chrono::steady_clock::now() > until) {
      ::kill(pid, SIGKILL);
      break;
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(master);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status), screen};
}

}  // namespace

TEST_CASE("bisect on a terminal: one progress line rewritten in place with a running clock") {
  Sandbox s;
  const std::string script = "echo begun; sleep 1.3; exec " + kFake.string() + " identical " + s.state.string();
  const auto [code, screen] = onTerminal(s, {"bisect", "-o", "out", "--", "sh", "-c", script}, "begun", [](int) {});
  INFO(screen);
  CHECK(code == 0);
  CHECK_THAT(screen, Catch::Contains("\r\033[Krun 1/2: recording sh -c"));
  CHECK_THAT(screen, Catch::Contains("  0:01"));  // the clock ran while the command did
  CHECK_THAT(screen, Catch::Contains("\r\033[Krun 2/2: recording"));
  CHECK_THAT(screen, Catch::Contains("identical: the 2 runs are bitwise identical"));
  // Every rewritten line fits the terminal, so that \r returns to its start.
  size_t from = 0, rewritten = 0;
  while ((from = screen.find("\r\033[K", from)) != std::string::npos) {
    from += 4;
    const size_t end = screen.find_first_of("\r\n", from);
    // A line that stays ends in a newline (the terminal turns it into \r\n).
    if (end != std::string::npos && (screen[end] == '\n' || screen.compare(end, 2, "\r\n") == 0)) continue;
    CHECK(screen.substr(from, end - from).size() < 120);
    ++rewritten;
  }
  CHECK(rewritten >= 4);
}

TEST_CASE("bisect on a terminal: Ctrl-C stops the recording and the bisect and says where the results are") {
  Sandbox s;
  const auto [code, screen] =
      onTerminal(s, {"bisect", "-o", "out", "--", "sh", "-c", "echo begun; sleep 30"}, "begun", [](int master) {
        const char ctrlC = 0x03;
        CHECK(::write(master, &ctrlC, 1) == 1);
      });
  INFO(screen);
  CHECK(code == 128 + SIGINT);
  CHECK_THAT(screen, Catch::Contains("interrupted") && Catch::Contains("is in out/"));
  CHECK(fs::exists(s.out() / "run1.log"));
  CHECK_FALSE(fs::exists(s.out() / "run2.log"));
}

TEST_CASE("bisect: recording options reach every gpurr record") {
  Sandbox s;
  const Result r = s.bisect("host_input", {"--capture-host-data", "--launches", "0:8", "--sync", "--no-framework"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  const Json rep = s.report();
  CHECK(rep["recordOptions"] == Json::array({"--launches", "0:8", "--sync", "--capture-host-data", "--no-framework"}));
  REQUIRE(rep["runs"].size() == 3);
  for (const char* run : {"run1.gpurr", "run2.gpurr", "run3.gpurr"}) {
    const trace::RecordingOptions o = trace::TraceReader(s.out() / run).header().options;
    CHECK(o.captureHostData);
    CHECK(o.sync);
    CHECK(o.launchRange == "0:8");
  }
  CHECK(firstDivergence(rep["diff"])["cause"] == "hostInput");
  CHECK_THAT(r.out, Catch::StartsWith("gpurr bisect --launches 0:8 --sync --capture-host-data --no-framework -- "));

  const Result bad = s.run({"bisect", "--launches", "9:3", "--", kFake.string(), "identical", s.state.string()});
  CHECK(bad.code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--launches"));
  const Result noLayer =
      s.run({"bisect", "--until-step", "3", "--no-framework", "--", kFake.string(), "identical", s.state.string()});
  CHECK(noLayer.code == 2);
  CHECK_THAT(noLayer.err, Catch::Contains("--until-step needs the PyTorch layer"));
}

TEST_CASE("bisect: --until-step reaches every gpurr record, and a program that never steps is not stopped") {
  Sandbox s;
  const Result r = s.bisect("host_input", {"--until-step", "3"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  const Json rep = s.report();
  CHECK(rep["recordOptions"] == Json::array({"--until-step", "3"}));
  REQUIRE(rep["runs"].size() == 3);
  for (const Json& run : rep["runs"]) CHECK(run["stoppedAfterStep"].is_null());
  CHECK_THAT(r.out, Catch::StartsWith("gpurr bisect --until-step 3 -- "));
  CHECK_THAT(r.out, !Catch::Contains("stopped after step"));
}
