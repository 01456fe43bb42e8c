// Tests of `gpurr record` that need no GPU. The command-level cases run the
// real bin/gpurr on `sh -c` scripts: exit codes, signals, pass-through of
// stdin/stdout, usage errors. The recorder's part (writing
// $GPURR_OUTPUT/<name>.gpurr) is played by the scripts, which copy fake
// traces made here with TraceWriter, so the staging, placement and summary
// logic runs exactly as after a real recording. The command's parts alone:
// record_parts_test.cpp.
#include <nlohmann/json.hpp>

#include <sstream>

#include "tests/record/record_harness.h"

using namespace gpurr;
using namespace gpurr::cli::record;
using namespace gpurr::record_testing;

// ---------------------------------------------------------------- the command

TEST_CASE("record passes the command's exit code through") {
  Sandbox s;
  for (int code : {0, 3, 42}) {
    const Result r = s.record("out.gpurr", "exit " + std::to_string(code));
    CHECK(r.code == code);
    // (Without a driver, and no recorder named by GPURR_RECORDER_LIB, the
    // up-front line says why instead: test below.)
    CHECK_THAT(r.err, Catch::Contains("no trace written (no CUDA process ran, or a warning above says why)"));
    CHECK_FALSE(fs::exists(s.work / "out.gpurr"));
  }
}

TEST_CASE("record dies of the signal that killed the command so that its parent sees the command's death") {
  Sandbox s;
  const Result r = s.record("out.gpurr", "kill -TERM $$");
  CHECK(r.code == 1000 + SIGTERM);  // the harness's code for a death by a signal
  // One the recorder takes first, and writes what it holds: it says so.
  CHECK_THAT(r.err, Catch::Contains("killed by signal 15 (Terminated): the recorder takes this signal first and "
                                    "writes what it holds before the program ends"));
  const Result killed = s.record("killed.gpurr", "kill -KILL $$");
  CHECK(killed.code == 1000 + SIGKILL);
  CHECK_THAT(killed.err, Catch::Contains("killed by signal 9 (Killed)\n"));
}

TEST_CASE("signals sent to gpurr reach the command, whose handler decides the exit code") {
  Sandbox s;
  const int sig = GENERATE(SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2);
  CAPTURE(sig);
  const fs::path ready = s.tmp / "ready";
  const fs::path handled = s.tmp / "handled";
  // `wait` returns as soon as a trapped signal arrives; a plain `sleep` in the
  // foreground would delay the trap until it ends.
  const std::string script = "trap 'echo $(( $(cat " + quoted(handled.string()) +
                             " 2>/dev/null || echo 0) + 1 )) > " + quoted(handled.string()) +
                             "; kill $child; exit 7' HUP INT QUIT TERM USR1 USR2; sleep 30 & child=$!; "
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
  // gpurr's own lines come after the command's output (the one that says,
  // before it starts, that this machine has no CUDA driver, is not said for
  // a recorder library GPURR_RECORDER_LIB names, as the sandbox's).
  CHECK_THAT(r.err, Catch::StartsWith("to-stderr\n"));
}

TEST_CASE("without a CUDA driver, record says so up front in one line, runs the command and passes its exit code") {
  if (!gpurr::cli::missingCudaDriver()) {
    WARN("this machine has a CUDA driver: nothing to check");
    return;
  }
  Sandbox s;
  s.env.erase("GPURR_RECORDER_LIB");  // the recorder beside gpurr, which needs the driver
  const Result r = s.run({"record", "-o", "out.gpurr", "--", "sh", "-c", "echo ran; exit 7"});
  CHECK(r.code == 7);
  CHECK(r.out == "ran\n");
  CHECK_THAT(r.err, Catch::StartsWith("gpurr: no CUDA driver on this machine (libcuda.so.1: ") &&
                        Catch::Contains("nothing will be recorded") && !Catch::Contains("no trace written"));
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
  // Refused alike with and without --force, and --force is not offered.
  for (const std::vector<std::string>& options : {std::vector<std::string>{"--force"}, std::vector<std::string>{}}) {
    r = s.record("mine", copy, options);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("mine exists and is not a gpurr trace; choose another -o OUT (gpurr replaces "
                                      "only a trace, with --force)"));
    CHECK_THAT(r.err, !Catch::Contains("add --force"));
  }
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
  for (const char* steps : {"1:2:0", "7", "x:", "99999999999999999999:"}) {
    r = s.record("out.gpurr", "touch ran", {"--steps", steps});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("--steps: '" + std::string(steps) + "' is not A:B or A:B:N"));
  }
  for (const char* steps : {"9:3", "5:5:2"}) {
    r = s.record("out.gpurr", "touch ran", {"--steps", steps});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("--steps: '" + std::string(steps) + "' selects no step (B must be larger than A)"));
  }
  for (const char* step : {"-3", "x", "1.5"}) {
    r = s.record("out.gpurr", "touch ran", {"--until-step", step});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("--until-step: expected a whole number 0 or more, got '" + std::string(step)));
  }
  for (const char* mib : {"-1", "x"}) {
    for (const char* option : {"--trace-queue", "--snapshot-memory"}) {
      r = s.record("out.gpurr", "touch ran", {option, mib});
      CHECK(r.code == 2);
      CHECK_THAT(r.err, Catch::Contains(std::string(option) + ": expected a whole number 0 or more"));
    }
  }
  // An empty output name (an unset variable, `-o "$OUT"`) is not the default name.
  r = s.run({"record", "-o", "", "--", "sh", "-c", "touch ran"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--output: expected a path, got ''"));
  // The output's name forgotten: `--` taken for it.
  r = s.run({"record", "-o", "--", "touch", "ran"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("-o --: a trace's name that starts with '-' looks like a missing -o value"));
  CHECK_FALSE(fs::exists(s.work / "--"));
  CHECK_FALSE(fs::exists(s.work / "ran"));
  r = s.record("out.gpurr", "touch ran", {"--check-determinism=0", "--launches", "0:1"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--check-determinism=0: give the number of re-runs, from 2 to 1000"));
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

TEST_CASE("gpurr's lines after the program start a line of their own where stderr is a file the program left open") {
  Sandbox s;
  const fs::path fake = s.tmp / "fake.gpurr";
  makeTrace(fake, 1, 1024);
  // A progress bar cut short: its last line has no newline.
  const Result r = s.record("run.gpurr", "cp -r " + quoted(fake.string()) +
                                             " \"$GPURR_OUTPUT/proc0.gpurr\"; printf '\\r 99%%|' >&2");
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("\r 99%|\ngpurr: trace written to "));
  // One ended with a newline gets no blank line.
  const Result whole = s.record("whole.gpurr", "cp -r " + quoted(fake.string()) +
                                                   " \"$GPURR_OUTPUT/proc0.gpurr\"; printf 'done\\n' >&2");
  CHECK_THAT(whole.err, Catch::Contains("done\ngpurr: trace written to "));
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

TEST_CASE("a second gpurr record into an OUT another is writing is refused before its program runs, --force or not") {
  Sandbox s;
  makeTrace(s.tmp / "one.gpurr", 2, 64);
  const fs::path io = s.tmp / "first";
  fs::create_directories(io);
  const std::string script = "while [ ! -e " + quoted((s.tmp / "go").string()) + " ]; do sleep 0.01; done; cp -r " +
                             quoted((s.tmp / "one.gpurr").string()) + " \"$GPURR_OUTPUT/\"";
  const pid_t first = start({"record", "-o", "out.gpurr", "--", "sh", "-c", script}, io, "", s.env, s.work);
  REQUIRE(waitFor(s.work / "out.gpurr", std::chrono::seconds(20)));  // taken as its program starts
  // ... and its staging directory made just after.
  REQUIRE(waitUntil([&] { return !trace::stagingDirectory(s.work / "out.gpurr").empty(); }, std::chrono::seconds(20)));
  for (const std::vector<std::string>& options : {std::vector<std::string>{}, std::vector<std::string>{"--force"}}) {
    const Result second = s.record("out.gpurr", "touch ran", options);
    CHECK(second.code == 2);
    CHECK_THAT(second.err, Catch::Contains("out.gpurr is being written by a gpurr record that is still running (its "
                                            "traces gather in " + (s.work / ".out.gpurr.staging-").string()));
    CHECK_FALSE(fs::exists(s.work / "ran"));
  }
  writeText(s.tmp / "go", "");
  CHECK(finish(first, io).code == 0);
  CHECK(trace::TraceReader(s.work / "out.gpurr").launchCount() == 2);
}

TEST_CASE("an OUT a killed gpurr record took is replaced with --force only") {
  Sandbox s;
  // What a gpurr record killed with its program leaves: OUT taken, empty,
  // and its staging directory beside it, which no process holds.
  fs::create_directories(s.work / "out.gpurr");
  fs::create_directories(s.work / ".out.gpurr.staging-abc123");
  const Result plain = s.record("out.gpurr", "touch ran");
  CHECK(plain.code == 2);
  CHECK_THAT(plain.err, Catch::Contains("out.gpurr already exists: a gpurr record that was stopped before it ended "
                                         "took it (what it recorded is in " +
                                         (s.work / ".out.gpurr.staging-abc123").string()));
  CHECK_FALSE(fs::exists(s.work / "ran"));
  const Result forced = s.record("out.gpurr", "touch ran", {"--force"});
  CHECK(forced.code == 0);
  CHECK(fs::exists(s.work / "ran"));
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

  // A launcher that sets LOCAL_RANK and no size: its processes join OUT as
  // well, rather than race to become it.
  s.env.erase("SLURM_NTASKS");
  s.env["NODE_RANK"] = "0";
  const std::string local = "cp -r " + quoted(s.tmp.path().string()) +
                            "/rank${LOCAL_RANK}.gpurr \"$GPURR_OUTPUT/node0-local${LOCAL_RANK}.gpurr\"";
  std::vector<std::pair<pid_t, fs::path>> locals;
  for (int rank : {0, 1}) {
    const fs::path io = s.tmp / fmt::format("local{}", rank);
    fs::create_directories(io);
    std::map<std::string, std::string> env = s.env;
    env["LOCAL_RANK"] = std::to_string(rank);
    locals.emplace_back(start({"record", "-o", "local", "--", "sh", "-c", local}, io, "", env, s.work), io);
  }
  for (const auto& [pid, io] : locals) CHECK(finish(pid, io).code == 0);
  for (int rank : {0, 1}) CHECK(fs::exists(s.work / "local" / fmt::format("node0-local{}.gpurr", rank)));
  s.env.erase("NODE_RANK");
  s.env["SLURM_NTASKS"] = "3";
  fs::remove_all(s.work / "local");

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

  // A restarted job's rank (torchrun --max-restarts starts every rank again
  // after one failed): the earlier attempt's trace is kept in attempts/,
  // out of the job's view, and this attempt's takes its name; the
  // directory is still one that --force may replace.
  fs::remove_all(s.tmp / "rank1.gpurr");
  makeTrace(s.tmp / "rank1.gpurr", 9, 512, 1);
  s.env["TORCHELASTIC_RESTART_COUNT"] = "1";
  const auto [restarted, ioRestarted] = startRank("RANK", 1);
  CHECK(finish(restarted, ioRestarted).code == 0);
  s.env.erase("TORCHELASTIC_RESTART_COUNT");
  CHECK(trace::TraceReader(out / "rank1.gpurr").launchCount() == 9);
  CHECK(trace::TraceReader(out / "attempts" / "0" / "rank1.gpurr").launchCount() == 7);
  CHECK(replaceable(out));

  // Two processes given one rank, started together (so that neither is
  // refused before it runs): the one that finishes second cannot place its
  // trace; it says which trace is in the way and where its own is, and
  // exits with its program's status all the same (0 here).
  fs::remove(s.tmp / "go");
  fs::remove_all(out / "rank2.gpurr");
  auto startTwin = [&](const char* name) {
    const fs::path io = s.tmp / name;
    fs::create_directories(io);
    std::map<std::string, std::string> env = s.env;
    env["SLURM_PROCID"] = "2";
    return std::pair{start({"record", "-o", "job", "--", "sh", "-c", script}, io, "", env, s.work), io};
  };
  const auto [twinA, ioTwinA] = startTwin("twinA");
  const auto [twinB, ioTwinB] = startTwin("twinB");
  writeText(s.tmp / "go", "");
  const Result first = finish(twinA, ioTwinA), second = finish(twinB, ioTwinB);
  CHECK(first.code == 0);
  CHECK(second.code == 0);
  const std::string clash = first.err + second.err;
  CHECK_THAT(clash, Catch::Contains("rank2.gpurr is there already: another process of the job wrote it, given the "
                                    "same rank"));
  CHECK_THAT(clash, Catch::Contains("the recorded traces are still in "));

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
  fs::remove(fake / "checksums");
  const Result r = s.record("out.gpurr", "cp -r " + quoted(fake.string()) +
                                             " \"$GPURR_OUTPUT/proc0.gpurr\"; kill -KILL $$");
  CHECK(r.code == 1000 + SIGKILL);
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

TEST_CASE("a command line and environment that are not UTF-8 leave every JSON output valid JSON") {
  // Bytes from another encoding (Latin-1 here) reach the trace unchanged.
  Sandbox s;
  const fs::path a = s.work / "a.gpurr", b = s.work / "b.gpurr";
  makeTrace(a, 3, 64, -1, {"python", "train.py", "caf\xe9"}, {{"CUBLAS_WORKSPACE_CONFIG", "\xff:4096:8"}});
  makeTrace(b, 3, 64, -1, {"python", "train.py", "caf\xe9"}, {{"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}});
  const std::vector<std::vector<std::string>> commands{{"info", "--json", "a.gpurr"},
                                                       {"info", "--json", "."},
                                                       {"verify", "--json", "a.gpurr"},
                                                       {"diff", "--json", "a.gpurr", "b.gpurr"},
                                                       {"dump", "--json", "a.gpurr"}};
  for (const auto& args : commands) {
    CAPTURE(args);
    const Result r = s.run(args);
    CHECK(r.code <= 1);
    CHECK(r.err.empty());
    if (args[0] == "dump") {
      std::istringstream lines(r.out);
      for (std::string line; std::getline(lines, line);) CHECK_NOTHROW(nlohmann::json::parse(line));
    } else {
      CHECK_NOTHROW(nlohmann::json::parse(r.out));
    }
  }
  const nlohmann::json info = nlohmann::json::parse(s.run({"info", "--json", "a.gpurr"}).out);
  CHECK(info.dump().find("caf\xef\xbf\xbd") != std::string::npos);  // U+FFFD in place of the byte
}

TEST_CASE("a trace cut short under --until-step: the stop is said to be unknown, not missing") {
  // A rank stopped by gpurr, then killed while it shut down (its launcher
  // ending the job when another rank crashed): a trace without its index.
  Sandbox s;
  makeTrace(s.tmp / "cut.gpurr", 2, 64);
  fs::remove(s.tmp / "cut.gpurr" / "index");
  fs::remove(s.tmp / "cut.gpurr" / "checksums");
  const Result r = s.record("out.gpurr", "cp -r " + quoted((s.tmp / "cut.gpurr").string()) + " \"$GPURR_OUTPUT/\"",
                            {"--until-step", "1"});
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("warning: --until-step 1: whether gpurr stopped the program is not known: its "
                                    "trace was cut short"));
  CHECK_THAT(r.err, !Catch::Contains("the program was not stopped"));
}
