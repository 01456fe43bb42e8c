// Tests of `gpurr record` that need no GPU. The command-level cases run the
// real bin/gpurr on `sh -c` scripts: exit codes, signals, pass-through of
// stdin/stdout, usage errors. The recorder's part (writing
// $GPURR_OUTPUT/<name>.gpurr) is played by the scripts, which copy fake
// traces made here with TraceWriter, so the staging, placement and summary
// logic runs exactly as after a real recording.
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli/cuda_driver.h"
#include "cli/process.h"
#include "cli/record.h"
#include "report/text.h"
#include "tests/unit/test_util.h"
#include "trace_format/trace.h"

namespace fs = std::filesystem;
using gpurr::testing::TempDir;
using gpurr::testing::readText;
using gpurr::testing::writeText;
using namespace gpurr;
using namespace gpurr::cli::record;

namespace {

// Single quotes for sh.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A trace as a recorded process would leave it: `launches` kernel launches,
// each with one input and one output range of `rangeBytes`.
void makeTrace(const fs::path& dir, int launches, uint64_t rangeBytes, int32_t rank = -1) {
  trace::Header h;
  h.toolVersion = GPURR_VERSION;
  h.commandLine = {"python", "train.py"};
  h.rank = rank;
  trace::TraceWriter w(dir, h);
  uint64_t seq = 0;
  trace::Allocation a;
  a.ordinal = 1;
  a.address = 0x7f0000000000;
  a.size = 2 * rangeBytes;
  w.append(trace::Event{seq++, 10, 0, a});
  for (int i = 0; i < launches; ++i) {
    trace::KernelLaunch k;
    k.function = "_Z6kernelPfS_";
    k.grid = {64, 1, 1};
    k.block = {256, 1, 1};
    trace::RangeDigest in;
    in.range = {0x7f0000000000, rangeBytes, 1, 0};
    in.digest = 0x1234 + i;
    trace::RangeDigest out = in;
    out.range = {0x7f0000000000 + rangeBytes, rangeBytes, 1, rangeBytes};
    k.inputs.push_back(in);
    k.outputs.push_back(out);
    w.append(trace::Event{seq++, 100 + seq, 0, k});
  }
  w.close();
}

uint64_t filesUnder(const fs::path& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += e.file_size();
  }
  return total;
}

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

const fs::path kGpurr = fs::path(GPURR_BINARY_DIR) / "bin" / "gpurr";

// Starts bin/gpurr with `args`, stdin from `input`, in `cwd`, with `env`
// set on top of this process's environment. Output goes to files in `io`,
// read back by finish().
pid_t start(const std::vector<std::string>& args, const fs::path& io, const std::string& input,
            const std::map<std::string, std::string>& env, const fs::path& cwd) {
  writeText(io / "stdin", input);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int in = ::open((io / "stdin").c_str(), O_RDONLY);
    const int out = ::open((io / "stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open((io / "stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (::chdir(cwd.c_str()) != 0) ::_exit(99);
    // A job's variables make gpurr one rank of a job: only where a test sets them.
    for (const char* v : {"RANK", "SLURM_PROCID", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "SLURM_NTASKS",
                          "SLURM_STEP_NUM_TASKS"}) {
      ::unsetenv(v);
    }
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv{const_cast<char*>(kGpurr.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(kGpurr.c_str(), argv.data());
    ::_exit(98);
  }
  return pid;
}

Result finish(pid_t pid, const fs::path& io) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
  r.out = readText(io / "stdout");
  r.err = readText(io / "stderr");
  return r;
}

// A sandbox: a working directory, a fake recorder library (any existing file
// will do: nothing here initialises CUDA) and a place for stdio files.
struct Sandbox {
  TempDir tmp;
  fs::path work = tmp / "work";
  fs::path io = tmp / "io";
  fs::path lib = tmp / "libgpurr_recorder.so";
  std::map<std::string, std::string> env;
  Sandbox() {
    fs::create_directories(work);
    fs::create_directories(io);
    writeText(lib, "not really a library");
    env["GPURR_RECORDER_LIB"] = lib.string();
  }
  Result run(const std::vector<std::string>& args, const std::string& input = "") {
    return finish(start(args, io, input, env, work), io);
  }
  // gpurr record -o OUT -- sh -c SCRIPT
  Result record(const std::string& out, const std::string& script,
                std::vector<std::string> options = {}) {
    std::vector<std::string> args{"record", "-o", out};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {"--", "sh", "-c", script});
    return run(args);
  }
};

bool waitFor(const fs::path& file, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!fs::exists(file)) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------- the command

TEST_CASE("record passes the command's exit code through") {
  Sandbox s;
  for (int code : {0, 3, 42}) {
    const Result r = s.record("out.gpurr", "exit " + std::to_string(code));
    CHECK(r.code == code);
    // Without a driver the up-front line says why instead (test below).
    if (!gpurr::cli::missingCudaDriver()) CHECK_THAT(r.err, Catch::Contains("no CUDA process ran (no trace written)"));
    CHECK_FALSE(fs::exists(s.work / "out.gpurr"));
  }
}

TEST_CASE("record reports death by a signal as 128 + signal, like a shell") {
  Sandbox s;
  const Result r = s.record("out.gpurr", "kill -TERM $$");
  CHECK(r.code == 128 + SIGTERM);
  CHECK_THAT(r.err, Catch::Contains("killed by signal 15"));
}

TEST_CASE("signals sent to gpurr reach the command, whose handler decides the exit code") {
  Sandbox s;
  const int sig = GENERATE(SIGTERM, SIGHUP, SIGINT, SIGQUIT);
  CAPTURE(sig);
  const fs::path ready = s.tmp / "ready";
  const fs::path handled = s.tmp / "handled";
  // `wait` returns as soon as a trapped signal arrives; a plain `sleep` in the
  // foreground would delay the trap until it ends.
  const std::string script = "trap 'echo $(( $(cat " + quoted(handled.string()) +
                             " 2>/dev/null || echo 0) + 1 )) > " + quoted(handled.string()) +
                             "; kill $child; exit 7' HUP INT QUIT TERM; sleep 30 & child=$!; "
                             "touch " + quoted(ready.string()) + "; wait";
  const pid_t pid = start({"record", "-o", "out.gpurr", "--", "sh", "-c", script}, s.io, "", s.env,
                          s.work);
  REQUIRE(waitFor(ready, std::chrono::seconds(20)));
  ::kill(pid, sig);
  const Result r = finish(pid, s.io);
  CHECK(r.code == 7);
  // Forwarded once: the handler ran exactly one time.
  CHECK(readText(handled) == "1\n");
}

TEST_CASE("Ctrl-C at the terminal is not forwarded: the command got it from the terminal") {
  Sandbox s;
  const fs::path ready = s.tmp / "ready";
  const fs::path got = s.tmp / "got-sigint";
  // The command leaves gpurr's session (setsid), so the terminal's SIGINT
  // reaches gpurr alone: the command sees one only if gpurr passes it on,
  // which it must not do for a signal the terminal sent to the whole group.
  const std::string script = "trap 'touch " + quoted(got.string()) + "; exit 5' INT; touch " +
                             quoted(ready.string()) + "; sleep 1 & wait; exit 0";
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("GPURR_RECORDER_LIB", s.lib.c_str(), 1);
    if (::chdir(s.work.c_str()) != 0) ::_exit(99);
    ::execl(kGpurr.c_str(), kGpurr.c_str(), "record", "-o", "out.gpurr", "--", "setsid", "sh", "-c",
            script.c_str(), static_cast<char*>(nullptr));
    ::_exit(98);
  }
  REQUIRE(waitFor(ready, std::chrono::seconds(20)));
  const char ctrlC = 0x03;
  REQUIRE(::write(master, &ctrlC, 1) == 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(master);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // gpurr survived its SIGINT and passed the exit code on
  CHECK_FALSE(fs::exists(got));
}

TEST_CASE("stdin, stdout and stderr pass through untouched") {
  Sandbox s;
  const Result r = s.run({"record", "-o", "out.gpurr", "--", "sh", "-c",
                          "cat; printf 'no newline'; echo to-stderr >&2"},
                         "line one\nline two\n");
  CHECK(r.code == 0);
  CHECK(r.out == "line one\nline two\nno newline");  // gpurr adds nothing to stdout
  // gpurr's own lines come after the command's output, except the one that
  // says, before it starts, that this machine has no CUDA driver.
  std::string err = r.err;
  if (gpurr::cli::missingCudaDriver()) {
    REQUIRE_THAT(err, Catch::StartsWith("gpurr: no CUDA driver on this machine"));
    err.erase(0, err.find('\n') + 1);
  }
  CHECK_THAT(err, Catch::StartsWith("to-stderr\n"));
}

TEST_CASE("without a CUDA driver, record says so up front in one line, runs the command and passes its exit code") {
  if (!gpurr::cli::missingCudaDriver()) {
    WARN("this machine has a CUDA driver: nothing to check");
    return;
  }
  Sandbox s;
  const Result r = s.run({"record", "-o", "out.gpurr", "--", "sh", "-c", "echo ran; exit 7"});
  CHECK(r.code == 7);
  CHECK(r.out == "ran\n");
  CHECK_THAT(r.err, Catch::StartsWith("gpurr: no CUDA driver on this machine (libcuda.so.1: ") &&
                        Catch::Contains("nothing will be recorded") && !Catch::Contains("no CUDA process ran"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // that line alone
  CHECK_FALSE(fs::exists(s.work / "out.gpurr"));
}

TEST_CASE("everything after -- reaches the command unchanged (options and -- included)") {
  Sandbox s;
  const Result r = s.run({"record", "-o", "out.gpurr", "--", "sh", "-c", "printf '[%s]' \"$@\"", "sh",
                          "--sync", "-o", "x y", "--", "--force", ""});
  CHECK(r.code == 0);
  CHECK(r.out == "[--sync][-o][x y][--][--force][]");
  CHECK_FALSE(fs::exists(s.work / "x y"));
}

TEST_CASE("a missing command is a usage error") {
  Sandbox s;
  for (auto args : {std::vector<std::string>{"record", "-o", "x.gpurr", "--"},
                    std::vector<std::string>{"record", "-o", "x.gpurr"}}) {
    const Result r = s.run(args);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("no command given after --"));
  }
}

TEST_CASE("a command that does not exist exits 127, like a shell") {
  Sandbox s;
  const Result r = s.run({"record", "-o", "x.gpurr", "--", "gpurr-no-such-command", "arg"});
  CHECK(r.code == 127);
  CHECK_THAT(r.err, Catch::Contains("cannot run 'gpurr-no-such-command': command not found"));
  // Nothing is left behind: no trace, no staging directory.
  CHECK(fs::is_empty(s.work));
  const Result notExecutable = s.run({"record", "-o", "x.gpurr", "--", s.lib.string()});
  CHECK(notExecutable.code == 126);
  CHECK_THAT(notExecutable.err, Catch::Contains("Permission denied"));
}

TEST_CASE("an existing OUT is refused without --force, and the command is not run") {
  Sandbox s;
  makeTrace(s.work / "out.gpurr", 2, 64);
  const Result r = s.record("out.gpurr", "touch ran");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("out.gpurr already exists"));
  CHECK_THAT(r.err, Catch::Contains("--force"));
  CHECK_FALSE(fs::exists(s.work / "ran"));
  CHECK(trace::TraceReader(s.work / "out.gpurr").launchCount() == 2);
}

TEST_CASE("with --force a trace is replaced, never other data") {
  Sandbox s;
  const fs::path fake = s.tmp / "fake.gpurr";
  makeTrace(fake, 5, 64);
  makeTrace(s.work / "out.gpurr", 2, 64);
  const std::string copy = "cp -r " + quoted(fake.string()) + " \"$GPURR_OUTPUT/proc0.gpurr\"";
  Result r = s.record("out.gpurr", copy, {"--force"});
  CHECK(r.code == 0);
  CHECK(trace::TraceReader(s.work / "out.gpurr").launchCount() == 5);

  fs::create_directories(s.work / "mine");
  writeText(s.work / "mine" / "thesis.tex", "precious");
  r = s.record("mine", copy, {"--force"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("is not a gpurr trace; not replacing it"));
  CHECK(readText(s.work / "mine" / "thesis.tex") == "precious");
}

TEST_CASE("bad options are usage errors found before the command starts") {
  Sandbox s;
  Result r = s.record("out.gpurr", "touch ran", {"--kernels", "gemm(("});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--kernels: invalid regular expression 'gemm(('"));
  r = s.record("out.gpurr", "touch ran", {"--launches", "10:5"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--launches"));
  for (const char* steps : {"9:3", "1:2:0", "7", "x:", "99999999999999999999:"}) {
    r = s.record("out.gpurr", "touch ran", {"--steps", steps});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("--steps: '" + std::string(steps) + "' is not A:B or A:B:N"));
  }
  for (const char* step : {"-3", "x", "1.5"}) {
    r = s.record("out.gpurr", "touch ran", {"--until-step", step});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("--until-step: expected a whole number 0 or more, got '" + std::string(step)));
  }
  r = s.record("out.gpurr", "touch ran", {"--no-such-flag"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown option '--no-such-flag'"));
  // The command's own options without -- before the command.
  r = s.run({"record", "-o", "out.gpurr", "sh", "-c", "touch ran"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown option '-c'; to give options to the command, put -- "
                                    "before it"));
  CHECK_FALSE(fs::exists(s.work / "ran"));
}

TEST_CASE("a missing recorder library is a clear error") {
  Sandbox s;
  s.env["GPURR_RECORDER_LIB"] = (s.tmp / "nowhere" / "libgpurr_recorder.so").string();
  const Result r = s.record("out.gpurr", "touch ran");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("nowhere/libgpurr_recorder.so (from GPURR_RECORDER_LIB) does "
                                    "not exist"));
  CHECK_FALSE(fs::exists(s.work / "ran"));
}

TEST_CASE("the command sees the injection and option variables, and only the options given") {
  Sandbox s;
  s.env["GPURR_SYNC"] = "1";  // left over in the user's environment
  s.env["GPURR_KERNELS"] = "stale";
  const std::string dump = "env | grep -E '^(GPURR_|CUDA_INJECTION64_PATH)' | sort > " +
                           quoted((s.tmp / "env").string()) +
                           "; test -d \"$GPURR_OUTPUT\" && touch " +
                           quoted((s.tmp / "staging-exists").string());
  Result r = s.record("out.gpurr", dump, {"--launches", "100:200", "--capture-host-data"});
  CHECK(r.code == 0);
  std::string env = readText(s.tmp / "env");
  CHECK_THAT(env, Catch::Contains("CUDA_INJECTION64_PATH=" + s.lib.string() + "\n"));
  CHECK_THAT(env, Catch::Contains("GPURR_LAUNCHES=100:200\n"));
  CHECK_THAT(env, Catch::Contains("GPURR_CAPTURE_HOST_DATA=1\n"));
  CHECK_THAT(env, Catch::Contains("GPURR_TOOL_VERSION=" GPURR_VERSION "\n"));
  CHECK_THAT(env, !Catch::Contains("GPURR_SYNC"));
  CHECK_THAT(env, !Catch::Contains("GPURR_KERNELS"));
  const std::regex staging("GPURR_OUTPUT=" + s.work.string() + "/\\.out\\.gpurr\\.staging-\\w+\n");
  CHECK(std::regex_search(env, staging));
  CHECK(fs::exists(s.tmp / "staging-exists"));
  CHECK(fs::is_empty(s.work));  // the empty staging directory is gone

  r = s.record("out.gpurr", dump, {"--sync", "--kernels", "^_Z4gemm", "--steps", "::50"});
  env = readText(s.tmp / "env");
  CHECK_THAT(env, Catch::Contains("GPURR_STEPS=::50\n"));
  CHECK_THAT(env, Catch::Contains("GPURR_SYNC=1\n"));
  CHECK_THAT(env, Catch::Contains("GPURR_KERNELS=^_Z4gemm\n"));
  CHECK_THAT(env, !Catch::Contains("GPURR_LAUNCHES"));
}

TEST_CASE("the command runs with address-space randomisation off, unless --aslr") {
  Sandbox s;
  const fs::path file = s.tmp / "personality";
  const std::string dump = "cat /proc/self/personality > " + quoted(file.string());
  const auto noRandomize = [&] { return (std::stoul(readText(file), nullptr, 16) & ADDR_NO_RANDOMIZE) != 0; };
  Result r = s.record("out.gpurr", dump);
  CHECK(r.code == 0);
  // Where a seccomp filter forbids it, the run goes on with a warning.
  const bool refused = r.err.find("cannot turn off address-space randomisation") != std::string::npos;
  CHECK((noRandomize() || refused));
  if (noRandomize()) CHECK_THAT(r.err, !Catch::Contains("randomisation"));

  r = s.record("out.gpurr", dump, {"--aslr"});
  CHECK(r.code == 0);
  CHECK_THAT(r.err, !Catch::Contains("randomisation"));
  // Unless this test itself runs without randomisation, which its children inherit.
  if ((personality(0xffffffff) & ADDR_NO_RANDOMIZE) == 0) CHECK_FALSE(noRandomize());
}

TEST_CASE("one process's trace becomes OUT, and the summary reads it back") {
  Sandbox s;
  const fs::path fake = s.tmp / "fake.gpurr";
  makeTrace(fake, 3, 1024);
  const Result r = s.record(
      "run.gpurr", "cp -r " + quoted(fake.string()) + " \"$GPURR_OUTPUT/proc0.gpurr\"; exit 3");
  CHECK(r.code == 3);
  const fs::path out = s.work / "run.gpurr";
  REQUIRE(fs::is_directory(out));
  CHECK(trace::TraceReader(out).launchCount() == 3);
  CHECK_THAT(r.err, Catch::Contains("trace written to " + out.string() + "\n"));
  const std::string line = fmt::format("gpurr: 1 process, 3 launches, 6.0 KiB hashed, {} on disk\n",
                                       report::humanBytes(filesUnder(out)));
  CHECK_THAT(r.err, Catch::EndsWith(line));
  // Only the trace is left: the staging directory is gone.
  CHECK(std::distance(fs::directory_iterator(s.work), fs::directory_iterator()) == 1);
}

TEST_CASE("several processes' traces are kept side by side in OUT, by name") {
  Sandbox s;
  for (int rank : {0, 1, 2, 10}) makeTrace(s.tmp / fmt::format("rank{}.gpurr", rank), rank + 1, 512, rank);
  const Result r = s.record("ddp.gpurr", "for r in 10 2 0 1; do cp -r " + quoted(s.tmp.path().string()) +
                                             "/rank$r.gpurr \"$GPURR_OUTPUT/\"; done");
  CHECK(r.code == 0);
  const fs::path out = s.work / "ddp.gpurr";
  for (int rank : {0, 1, 2, 10}) {
    const trace::TraceReader reader(out / fmt::format("rank{}.gpurr", rank));
    CHECK(reader.header().rank == rank);
    CHECK(reader.launchCount() == static_cast<uint64_t>(rank + 1));
  }
  CHECK_THAT(r.err, Catch::Contains("4 traces written to " + out.string() +
                                    "/ (rank0.gpurr, rank1.gpurr, rank2.gpurr, rank10.gpurr)"));
  CHECK_THAT(r.err, Catch::Contains(fmt::format(
                        "gpurr: 4 processes, 17 launches, 17.0 KiB hashed, {} on disk\n",
                        report::humanBytes(filesUnder(out)))));
}

TEST_CASE("started once per rank, each gpurr record joins the job's directory OUT at the same time") {
  // As srun starts one gpurr per task: RANK and WORLD_SIZE (or SLURM_PROCID
  // and SLURM_NTASKS) in gpurr's own environment. The command plays the
  // recorder, which names the trace by the rank.
  Sandbox s;
  s.env["WORLD_SIZE"] = "3";
  for (int rank : {0, 1, 2}) makeTrace(s.tmp / fmt::format("rank{}.gpurr", rank), rank + 1, 512, rank);
  const std::string script = "while [ ! -e " + quoted((s.tmp / "go").string()) + " ]; do sleep 0.01; done; cp -r " +
                             quoted(s.tmp.path().string()) + "/rank${RANK:-$SLURM_PROCID}.gpurr \"$GPURR_OUTPUT/\"";
  auto startRank = [&](const char* var, int rank, std::vector<std::string> options = {}) {
    const fs::path io = s.tmp / fmt::format("io{}", rank);
    fs::create_directories(io);
    std::map<std::string, std::string> env = s.env;
    env[var] = std::to_string(rank);
    std::vector<std::string> args{"record", "-o", "job"};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {"--", "sh", "-c", script});
    return std::pair{start(args, io, "", env, s.work), io};
  };
  const auto [pid0, io0] = startRank("RANK", 0);
  const auto [pid1, io1] = startRank("RANK", 1);
  writeText(s.tmp / "go", "");  // both write and finish together
  const Result r0 = finish(pid0, io0), r1 = finish(pid1, io1);
  CHECK(r0.code == 0);
  CHECK(r1.code == 0);
  const fs::path out = s.work / "job";
  for (int rank : {0, 1}) CHECK(trace::TraceReader(out / fmt::format("rank{}.gpurr", rank)).header().rank == rank);
  CHECK_THAT(r0.err, Catch::Contains("rank0.gpurr written to " + out.string() + "/, the job's directory (RANK=0)"));
  CHECK_THAT(r1.err, Catch::Contains("gpurr: 1 process, 2 launches, "));
  CHECK(std::distance(fs::directory_iterator(s.work), fs::directory_iterator()) == 1);  // no staging left

  // srun's SLURM_PROCID names a rank as well.
  s.env.erase("WORLD_SIZE");
  s.env["SLURM_NTASKS"] = "3";
  const auto [pid2, io2] = startRank("SLURM_PROCID", 2);
  CHECK(finish(pid2, io2).code == 0);
  CHECK(trace::TraceReader(out / "rank2.gpurr").launchCount() == 3);

  // A rank whose trace is there already is refused before it runs, unless
  // --force, which replaces that rank's trace alone.
  fs::remove(s.tmp / "go");
  const auto [again, ioAgain] = startRank("RANK", 1);
  const Result refused = finish(again, ioAgain);
  CHECK(refused.code == 2);
  CHECK_THAT(refused.err, Catch::Contains((out / "rank1.gpurr").string() + " already exists"));
  writeText(s.tmp / "go", "");
  fs::remove_all(s.tmp / "rank1.gpurr");
  makeTrace(s.tmp / "rank1.gpurr", 7, 512, 1);
  const auto [forced, ioForced] = startRank("RANK", 1, {"--force"});
  CHECK(finish(forced, ioForced).code == 0);
  CHECK(trace::TraceReader(out / "rank1.gpurr").launchCount() == 7);
  CHECK(trace::TraceReader(out / "rank0.gpurr").launchCount() == 1);
  CHECK(fs::exists(out / "rank2.gpurr"));

  // OUT must be a directory of traces: a single trace is not joined.
  makeTrace(s.work / "one.gpurr", 1, 64);
  s.env["RANK"] = "0";
  const Result single = s.record("one.gpurr", "touch ran", {"--force"});
  CHECK(single.code == 2);
  CHECK_THAT(single.err, Catch::Contains("is not a directory of traces"));
  CHECK_FALSE(fs::exists(s.work / "ran"));

  // One task alone (an interactive `srun --pty bash` sets SLURM_PROCID=0):
  // no job, and OUT is the trace, as without the variables.
  s.env.erase("RANK");
  s.env["SLURM_PROCID"] = "0";
  s.env["SLURM_NTASKS"] = "1";
  const Result alone = s.record("alone.gpurr", "cp -r " + quoted((s.tmp / "rank0.gpurr").string()) +
                                                   " \"$GPURR_OUTPUT/\"");
  CHECK(alone.code == 0);
  CHECK(trace::TraceReader(s.work / "alone.gpurr").header().rank == 0);
}

TEST_CASE("a trace the recorder could not close is summarised with the reader's note") {
  Sandbox s;
  const fs::path fake = s.tmp / "fake.gpurr";
  makeTrace(fake, 4, 256);
  fs::remove(fake / "index");  // as when the process was killed
  const Result r = s.record("out.gpurr", "cp -r " + quoted(fake.string()) +
                                             " \"$GPURR_OUTPUT/proc0.gpurr\"; kill -KILL $$");
  CHECK(r.code == 128 + SIGKILL);
  CHECK_THAT(r.err, Catch::Contains("warning: " + (s.work / "out.gpurr").string() + ": "));
  CHECK_THAT(r.err, Catch::Contains("did not end cleanly"));
  CHECK_THAT(r.err, Catch::Contains("1 process, 4 launches, 2.0 KiB hashed"));
  CHECK_THAT(r.err, Catch::Contains(", 1 incomplete\n"));
}

TEST_CASE("without -o the trace is named after the command and the time, and said") {
  Sandbox s;
  const fs::path fake = s.tmp / "fake.gpurr";
  makeTrace(fake, 1, 64);
  const Result r = s.run({"record", "--", "sh", "-c",
                          "cp -r " + quoted(fake.string()) + " \"$GPURR_OUTPUT/proc0.gpurr\""});
  CHECK(r.code == 0);
  std::vector<fs::path> made;
  for (const auto& e : fs::directory_iterator(s.work)) made.push_back(e.path());
  REQUIRE(made.size() == 1);
  const std::string name = made[0].filename().string();
  CHECK(std::regex_match(name, std::regex(R"(sh-\d{8}-\d{6}\.gpurr)")));
  CHECK_THAT(r.err, Catch::Contains("recording to " + made[0].string()));
  CHECK(trace::TraceReader(made[0]).launchCount() == 1);
}

// ---------------------------------------------------------------- the parts

TEST_CASE("launch ranges are checked") {
  CHECK(checkLaunchRange("0:10").empty());
  CHECK(checkLaunchRange("1000:").empty());
  CHECK_FALSE(checkLaunchRange("10").empty());
  CHECK(checkLaunchRange(":10").empty());
  CHECK(checkLaunchRange(":").empty());
  CHECK_FALSE(checkLaunchRange("5:5").empty());
  CHECK_FALSE(checkLaunchRange("a:b").empty());
  CHECK_FALSE(checkLaunchRange("1:2:3").empty());
  CHECK_FALSE(checkLaunchRange("-1:4").empty());
}

TEST_CASE("kernel regular expressions are checked") {
  CHECK(checkKernelRegex("gemm|conv").empty());
  CHECK(checkKernelRegex("^_Z.*reduce").empty());
  CHECK_THAT(checkKernelRegex("[abc"), Catch::Contains("invalid regular expression '[abc'"));
  CHECK_FALSE(checkKernelRegex("").empty());
}

TEST_CASE("default output names are unique and shell-friendly") {
  TempDir tmp;
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 10;
  t.tm_mday = 22;
  t.tm_hour = 9;
  t.tm_min = 5;
  t.tm_sec = 7;
  t.tm_isdst = -1;
  const std::time_t when = std::mktime(&t);
  const fs::path first = defaultOutput({"/usr/bin/python3", "train.py"}, when, tmp.path());
  CHECK(first == tmp / "python3-20261122-090507.gpurr");
  fs::create_directory(first);
  CHECK(defaultOutput({"python3"}, when, tmp.path()) == tmp / "python3-20261122-090507-2.gpurr");
  CHECK(defaultOutput({"./my run$"}, when, tmp.path()).filename() == "my_run_-20261122-090507.gpurr");
  CHECK(defaultOutput({".hidden"}, when, tmp.path()).filename() ==
        "trace.hidden-20261122-090507.gpurr");
}

TEST_CASE("the recorder library is found next to the executable, or where the variable says") {
  TempDir tmp;
  fs::create_directories(tmp / "bin");
  fs::create_directories(tmp / "lib");
  const fs::path exe = tmp / "bin" / "gpurr";
  CHECK_THROWS_WITH(recorderLibrary(exe, nullptr),
                    Catch::Contains("lib/libgpurr_recorder.so does not exist"));
  writeText(tmp / "lib" / "libgpurr_recorder.so", "x");
  CHECK(recorderLibrary(exe, nullptr) == tmp / "lib" / "libgpurr_recorder.so");
  CHECK(recorderLibrary(exe, "") == tmp / "lib" / "libgpurr_recorder.so");
  writeText(tmp / "other.so", "x");
  CHECK(recorderLibrary(exe, (tmp / "other.so").c_str()) == tmp / "other.so");
  CHECK_THROWS_WITH(recorderLibrary(exe, (tmp / "missing.so").c_str()),
                    Catch::Contains("(from GPURR_RECORDER_LIB) does not exist"));
  CHECK_THROWS(recorderLibrary(exe, (tmp / "lib").c_str()));  // a directory
}

TEST_CASE("staged traces are listed in natural order, other files ignored") {
  TempDir tmp;
  for (const char* name : {"rank10.gpurr", "rank2.gpurr", "rank0.gpurr", "proc1.gpurr"}) {
    fs::create_directory(tmp / name);
  }
  writeText(tmp / "file.gpurr", "not a directory");
  fs::create_directory(tmp / "other");
  std::vector<std::string> names;
  for (const fs::path& p : stagedTraces(tmp.path())) names.push_back(p.filename().string());
  CHECK(names == std::vector<std::string>{"proc1.gpurr", "rank0.gpurr", "rank2.gpurr", "rank10.gpurr"});
}

TEST_CASE("placing traces: one, several, none, replacing, leftovers") {
  TempDir tmp;
  const fs::path out = tmp / "out.gpurr";
  SECTION("one trace becomes OUT") {
    fs::create_directory(tmp / "staging");
    makeTrace(tmp / "staging" / "proc0.gpurr", 2, 64);
    const Placement p = placeTraces(tmp / "staging", out, false);
    CHECK(p.traces == std::vector<fs::path>{out});
    CHECK_FALSE(p.directoryOfTraces);
    CHECK(p.leftovers.empty());
    CHECK_FALSE(fs::exists(tmp / "staging"));
    CHECK(trace::TraceReader(out).launchCount() == 2);
  }
  SECTION("several traces are kept by name") {
    fs::create_directory(tmp / "staging");
    makeTrace(tmp / "staging" / "proc1.gpurr", 1, 64);
    makeTrace(tmp / "staging" / "proc0.gpurr", 2, 64);
    const Placement p = placeTraces(tmp / "staging", out, false);
    CHECK(p.directoryOfTraces);
    CHECK(p.traces == std::vector<fs::path>{out / "proc0.gpurr", out / "proc1.gpurr"});
    CHECK(trace::TraceReader(out / "proc0.gpurr").launchCount() == 2);
    CHECK(trace::TraceReader(out / "proc1.gpurr").launchCount() == 1);
    CHECK_FALSE(fs::exists(tmp / "staging"));
  }
  SECTION("no trace: nothing is made and the empty staging directory goes") {
    fs::create_directory(tmp / "staging");
    const Placement p = placeTraces(tmp / "staging", out, false);
    CHECK(p.traces.empty());
    CHECK_FALSE(fs::exists(out));
    CHECK_FALSE(fs::exists(tmp / "staging"));
  }
  SECTION("an existing OUT is replaced only when asked") {
    makeTrace(out, 7, 64);
    fs::create_directory(tmp / "staging");
    makeTrace(tmp / "staging" / "rank0.gpurr", 1, 64);
    CHECK_THROWS_AS(placeTraces(tmp / "staging", out, false), fs::filesystem_error);
    CHECK(trace::TraceReader(out).launchCount() == 7);
    placeTraces(tmp / "staging", out, true);
    CHECK(trace::TraceReader(out).launchCount() == 1);
  }
  SECTION("files that are not traces stay in the staging directory and are reported") {
    fs::create_directory(tmp / "staging");
    makeTrace(tmp / "staging" / "proc0.gpurr", 1, 64);
    writeText(tmp / "staging" / "core", "x");
    const Placement p = placeTraces(tmp / "staging", out, false);
    CHECK(p.traces == std::vector<fs::path>{out});
    CHECK(p.leftovers == std::vector<fs::path>{tmp / "staging" / "core"});
    CHECK(fs::exists(tmp / "staging" / "core"));
  }
}

TEST_CASE("what --force may replace") {
  TempDir tmp;
  makeTrace(tmp / "t.gpurr", 1, 64);
  CHECK(replaceable(tmp / "t.gpurr"));
  fs::create_directories(tmp / "multi" / "rank0.gpurr");
  fs::create_directories(tmp / "multi" / "rank1.gpurr");
  CHECK(replaceable(tmp / "multi"));
  fs::create_directory(tmp / "empty");
  CHECK(replaceable(tmp / "empty"));
  writeText(tmp / "multi" / "notes.txt", "mine");
  CHECK_FALSE(replaceable(tmp / "multi"));
  writeText(tmp / "file", "mine");
  CHECK_FALSE(replaceable(tmp / "file"));
  fs::create_directory_symlink(tmp / "t.gpurr", tmp / "link");
  CHECK_FALSE(replaceable(tmp / "link"));
}

TEST_CASE("the summary counts processes, launches, bytes hashed and size on disk") {
  TempDir tmp;
  const fs::path out = tmp / "out";
  makeTrace(out / "rank0.gpurr", 3, 1000);
  makeTrace(out / "rank1.gpurr", 2, 1000);
  makeTrace(out / "rank2.gpurr", 1, 1 << 20);
  fs::remove(out / "rank2.gpurr" / "index");
  fs::create_directories(out / "rank3.gpurr");
  writeText(out / "rank3.gpurr" / "version", "garbage");
  const std::vector<fs::path> traces{out / "rank0.gpurr", out / "rank1.gpurr", out / "rank2.gpurr",
                                     out / "rank3.gpurr"};
  const RecordSummary s = summarise(traces);
  REQUIRE(s.traces.size() == 4);
  CHECK(s.traces[0].readable);
  CHECK(s.traces[0].launches == 3);
  CHECK(s.traces[0].bytesHashed == 6000);
  CHECK(s.traces[0].damage.empty());
  CHECK(s.traces[1].bytesHashed == 4000);
  CHECK(s.traces[2].readable);
  CHECK(s.traces[2].launches == 1);
  CHECK_THAT(s.traces[2].damage, Catch::Contains("did not end cleanly"));
  CHECK_FALSE(s.traces[3].readable);
  CHECK_THAT(s.traces[3].error, Catch::Contains("rank3.gpurr"));
  CHECK(s.diskBytes == filesUnder(out));
  CHECK(summaryLine(s) == fmt::format("4 processes, 6 launches, {} hashed, {} on disk, 1 incomplete, "
                                      "1 unreadable",
                                      report::humanBytes(10000 + (2 << 20)),
                                      report::humanBytes(filesUnder(out))));
  const RecordSummary one = summarise({out / "rank1.gpurr"});
  CHECK_THAT(summaryLine(one), Catch::StartsWith("1 process, 2 launches, 3.9 KiB hashed, "));
}

// ---------------------------------------------------------------- processes

TEST_CASE("terminal signals are not forwarded twice, kill() from elsewhere is") {
  siginfo_t info{};
  info.si_code = SI_KERNEL;  // Ctrl-C, Ctrl-\, hangup: the whole group has it
  CHECK_FALSE(cli::shouldForward(info, 1234));
  info.si_code = SI_USER;
  info.si_pid = 999;  // `kill PID` from another shell
  CHECK(cli::shouldForward(info, 1234));
  info.si_pid = 1234;  // the child signalling its own process group
  CHECK_FALSE(cli::shouldForward(info, 1234));
  info.si_code = SI_QUEUE;
  info.si_pid = 999;
  CHECK(cli::shouldForward(info, 1234));
}

TEST_CASE("environment changes replace, add and remove variables") {
  const std::vector<std::string> base{"PATH=/bin", "GPURR_SYNC=1", "HOME=/root", "GPURR_SYNCX=2"};
  const auto env = cli::applyEnv(base, {{"GPURR_SYNC", "", true},
                                        {"HOME", "/home/u"},
                                        {"CUDA_INJECTION64_PATH", "/lib/x.so"}});
  CHECK(env == std::vector<std::string>{"PATH=/bin", "GPURR_SYNCX=2", "HOME=/home/u",
                                        "CUDA_INJECTION64_PATH=/lib/x.so"});
}

TEST_CASE("the recorder is preloaded after the caller's LD_PRELOAD, once") {
  const std::string lib = "/opt/gpurr/lib/libgpurr_recorder.so";
  CHECK(preloadWith(nullptr, lib) == lib);
  CHECK(preloadWith("", lib) == lib);
  CHECK(preloadWith("/usr/lib/libjemalloc.so", lib) == "/usr/lib/libjemalloc.so:" + lib);
  CHECK(preloadWith("a.so b.so", lib) == "a.so b.so:" + lib);
  CHECK(preloadWith(("a.so:" + lib).c_str(), lib) == "a.so:" + lib);
  CHECK(preloadWith((lib + " b.so").c_str(), lib) == lib + " b.so");
  CHECK(preloadWith("/opt/gpurr/lib/libgpurr_recorder.so.old", lib) ==
        "/opt/gpurr/lib/libgpurr_recorder.so.old:" + lib);
}

TEST_CASE("only an ELF recorder library is preloaded") {
  const fs::path dir = fs::temp_directory_path() / ("gpurr-elf-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "empty.so").close();
  std::ofstream(dir / "elf.so") << "\x7f" "ELF rest";
  CHECK_FALSE(isElf(dir / "empty.so"));
  CHECK_FALSE(isElf(dir / "missing.so"));
  CHECK(isElf(dir / "elf.so"));
  fs::remove_all(dir);
}

TEST_CASE("snapshot and determinism and full recording options are checked before the command starts") {
  Sandbox s;
  Result r = s.record("out.gpurr", "touch ran", {"--snapshot", "3,,4"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--snapshot: empty item in '3,,4'"));
  r = s.record("out.gpurr", "touch ran", {"--snapshot", "conv(("});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("'conv((' is neither a launch number nor a valid regular expression"));
  r = s.record("out.gpurr", "touch ran", {"--snapshot-memory", "0", "--snapshot", "1"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--snapshot-memory 0"));
  r = s.record("out.gpurr", "touch ran", {"--check-determinism"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("select them with --launches A:B, --kernels REGEX or --snapshot SEL"));
  r = s.record("out.gpurr", "touch ran", {"--kernels", "gemm", "--check-determinism=1"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("from 2 to 1000"));
  CHECK_FALSE(fs::exists(s.work / "ran"));
}

TEST_CASE("snapshot and determinism and full recording options reach the recorder") {
  Sandbox s;
  s.env["GPURR_SNAPSHOT"] = "stale";
  s.env["GPURR_FULL"] = "1";
  const std::string dump = "env | grep -E '^GPURR_' | sort > " + quoted((s.tmp / "env").string());
  Result r = s.record("out.gpurr", dump, {"--launches", "0:9", "--check-determinism"});
  CHECK(r.code == 0);
  std::string env = readText(s.tmp / "env");
  CHECK_THAT(env, Catch::Contains("GPURR_CHECK_DETERMINISM=10\n"));
  CHECK_THAT(env, !Catch::Contains("GPURR_SNAPSHOT"));
  CHECK_THAT(env, !Catch::Contains("GPURR_FULL"));

  r = s.record("out.gpurr", dump, {"--snapshot", "12", "--check-determinism=3"});
  CHECK(r.code == 0);
  env = readText(s.tmp / "env");
  CHECK_THAT(env, Catch::Contains("GPURR_CHECK_DETERMINISM=3\n") && Catch::Contains("GPURR_SNAPSHOT=12\n"));

  r = s.record("out.gpurr", dump,
               {"--kernels", "gemm", "--check-determinism=4", "--snapshot", "7,100:200,gemm", "--snapshot-memory",
                "512", "--full"});
  CHECK(r.code == 0);
  env = readText(s.tmp / "env");
  CHECK_THAT(env, Catch::Contains("GPURR_CHECK_DETERMINISM=4\n"));
  CHECK_THAT(env, Catch::Contains("GPURR_SNAPSHOT=7,100:200,gemm\n"));
  CHECK_THAT(env, Catch::Contains("GPURR_SNAPSHOT_MEMORY_MB=512\n"));
  CHECK_THAT(env, Catch::Contains("GPURR_FULL=1\n"));
}

TEST_CASE("snapshot selections and determinism counts are checked") {
  CHECK(checkSnapshotSelection("7").empty());
  CHECK(checkSnapshotSelection("100:200,5:,:3,gemm|conv").empty());
  CHECK(checkSnapshotSelection("sm90:gemm").empty());  // letters: a pattern
  CHECK_THAT(checkSnapshotSelection(""), Catch::Contains("empty selection"));
  CHECK_THAT(checkSnapshotSelection("1,"), Catch::Contains("empty item"));
  CHECK_THAT(checkSnapshotSelection("5:5"), Catch::Contains("'5:5' is not a launch range"));
  CHECK_THAT(checkSnapshotSelection("99999999999999999999"), Catch::Contains("too large"));
  CHECK_THAT(checkSnapshotSelection("[abc"), Catch::Contains("valid regular expression"));
  CHECK(checkDeterminismOptions(10, true, false, false).empty());
  CHECK(checkDeterminismOptions(2, false, true, false).empty());
  CHECK(checkDeterminismOptions(5, false, false, true).empty());
  CHECK_FALSE(checkDeterminismOptions(1, true, true, false).empty());
  CHECK_FALSE(checkDeterminismOptions(1001, true, true, false).empty());
  CHECK_FALSE(checkDeterminismOptions(10, false, false, false).empty());
}

TEST_CASE("the summary counts snapshot bytes and the launches checked for determinism") {
  TempDir tmp;
  const fs::path out = tmp / "out.gpurr";
  {
    trace::TraceWriter w(out, trace::Header{});
    const std::vector<uint8_t> bytes(100, 1);
    const trace::BlobRef blob = w.putBlob(bytes);
    uint64_t seq = 0;
    for (uint32_t distinct : {1u, 3u, 0u}) {
      trace::KernelLaunch k;
      k.function = "_Z1kv";
      trace::RangeDigest r;
      r.range = {0x1000, 100, 1, 0};
      r.snapshot = blob;
      k.inputs.push_back(r);
      k.outputs.push_back(r);
      k.outputs.push_back(trace::RangeDigest{{0x2000, 50, 2, 0}, 0, {}, std::nullopt});
      if (distinct) k.annotations.push_back(trace::DeterminismCheck{10, distinct});
      w.append(trace::Event{seq++, seq, 0, k});
    }
    w.close();
  }
  const RecordSummary s = summarise({out});
  REQUIRE(s.traces.size() == 1);
  CHECK(s.traces[0].snapshotBytes == 600);
  CHECK(s.traces[0].determinismChecked == 2);
  CHECK(s.traces[0].nondeterministic == 1);
  CHECK_THAT(summaryLine(s), Catch::Contains(", 600 B in snapshots, 2 launches checked for determinism "
                                             "(1 nondeterministic)"));
  // Nothing of the kind: nothing said.
  makeTrace(tmp / "plain.gpurr", 2, 1000);
  const std::string plain = summaryLine(summarise({tmp / "plain.gpurr"}));
  CHECK_THAT(plain, !Catch::Contains("snapshots"));
  CHECK_THAT(plain, !Catch::Contains("determinism"));
}

TEST_CASE("the program's Python environment's CUPTI: its bin/ on PATH, VIRTUAL_ENV, CONDA_PREFIX, gpurr's own",
          "[record][cupti]") {
  TempDir dir;
  // env/bin/python3 and env/lib/python3.12/site-packages/nvidia/<sub>/libcupti.so.13
  auto makeEnv = [&](const std::string& name, const std::string& sub) {
    const fs::path env = dir / name;
    fs::create_directories(env / "bin");
    writeText(env / "bin" / "python3", "#!/bin/sh\n");
    fs::permissions(env / "bin" / "python3", fs::perms::owner_all);
    const fs::path lib = env / "lib" / "python3.12" / "site-packages" / "nvidia" / sub / "lib";
    fs::create_directories(lib);
    writeText(lib / "libcupti.so.13", "");
    return (lib / "libcupti.so.13").string();
  };
  const std::string venv = makeEnv("venv", "cu13");
  const std::string conda = makeEnv("conda", "cuda_cupti");  // the older wheels' folder
  fs::create_directories(dir / "bare" / "bin");
  std::map<std::string, std::string> env;
  auto getenv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  const fs::path gpurr = dir / "elsewhere" / "bin" / "gpurr";

  env["PATH"] = (dir / "bare" / "bin").string() + ":" + (dir / "venv" / "bin").string();
  CHECK(pythonCupti({"python3", "train.py"}, gpurr, getenv) == venv);
  CHECK(pythonCupti({(dir / "conda" / "bin" / "python3").string()}, gpurr, getenv) == conda);
  env["PATH"] = (dir / "bare" / "bin").string();
  CHECK(pythonCupti({"python3"}, gpurr, getenv).empty());
  env["CONDA_PREFIX"] = (dir / "conda").string();
  CHECK(pythonCupti({"python3"}, gpurr, getenv) == conda);
  env["VIRTUAL_ENV"] = (dir / "venv").string();
  CHECK(pythonCupti({"python3"}, gpurr, getenv) == venv);
  // gpurr installed by pip: site-packages/gpurr/bin/gpurr, the wheel's CUPTI beside it.
  env.clear();
  const fs::path site = dir / "venv" / "lib" / "python3.12" / "site-packages";
  CHECK(pythonCupti({"./a.out"}, site / "gpurr" / "bin" / "gpurr", getenv) == venv);
  CHECK(pythonCupti({"./a.out"}, gpurr, getenv).empty());
}
