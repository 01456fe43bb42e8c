// Tests of `gpurr record`'s parts that need no GPU: option checks, output
// names, finding the recorder library, placing and summarising traces, the
// process helpers, and the options that reach the recorder
// (record_harness.h).
#include "tests/record/record_harness.h"

using namespace gpurr;
using namespace gpurr::cli::record;
using namespace gpurr::record_testing;

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

TEST_CASE("the staging directory is named after OUT, and found while it exists") {
  TempDir tmp;
  const fs::path out = tmp / "run1.gpurr";
  CHECK(stagingDirectory(out).empty());
  std::string templ = stagingTemplate(out);
  CHECK(templ == (tmp / ".run1.gpurr.staging-XXXXXX").string());
  REQUIRE(mkdtemp(templ.data()) != nullptr);
  fs::create_directory(tmp / ".run10.gpurr.staging-abcdef");  // another run's
  CHECK(stagingDirectory(out) == fs::path(templ));
  CHECK(stagingDirectory(tmp / "run2.gpurr").empty());
}

TEST_CASE("reading OUT of a gpurr record killed before it moved its traces there names the staged ones") {
  TempDir tmp;
  const fs::path out = tmp / "run1.gpurr";
  fs::create_directory(out);  // taken at the start, empty until the end
  std::string templ = stagingTemplate(out);
  REQUIRE(mkdtemp(templ.data()) != nullptr);
  CHECK(trace::stagedTracesHint(out).empty());  // nothing staged yet
  for (const char* name : {"proc0.gpurr", "proc1.gpurr"}) {
    trace::TraceWriter w(fs::path(templ) / name, trace::Header{});
    w.close();
  }
  const std::string hint = fmt::format("; `gpurr record -o {}` left what it recorded in {} (it is still running, or "
                                       "was killed before it moved its traces there): give {}/proc0.gpurr, or that "
                                       "directory for all 2 traces",
                                       out.string(), templ, templ);
  CHECK(trace::stagedTracesHint(out) == hint);
  CHECK_THROWS_WITH(trace::TraceReader(out), out.string() + ": not a gpurr trace (no version marker)" + hint);
  fs::remove(out);
  CHECK_THROWS_WITH(trace::TraceReader(out), out.string() + ": no such trace" + hint);
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
  fs::remove(out / "rank2.gpurr" / "checksums");
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
  CHECK_THAT(env, !Catch::Contains("GPURR_FLUSH_MS"));

  // A run with a stop file is watched as it is written: its blocks are
  // closed four times a second.
  r = s.record("out.gpurr", dump, {"--stop-file", (s.tmp / "stop").string()});
  CHECK(r.code == 0);
  env = readText(s.tmp / "env");
  CHECK_THAT(env, Catch::Contains("GPURR_FLUSH_MS=250\n"));
  CHECK_THAT(env, Catch::Contains("GPURR_STOP_FILE=" + (s.tmp / "stop").string() + "\n"));
  CHECK_THAT(env, !Catch::Contains("GPURR_START_GATE"));
  CHECK_THAT(env, !Catch::Contains("GPURR_QUICK_EXIT"));

  r = s.record("out.gpurr", dump, {"--until-step", "3", "--quick-exit"});
  CHECK(r.code == 0);
  env = readText(s.tmp / "env");
  CHECK_THAT(env, Catch::Contains("GPURR_QUICK_EXIT=1\n"));
  CHECK_THAT(env, Catch::Contains("GPURR_UNTIL_STEP=3\n"));

  // A run held at its start until a file exists.
  r = s.record("out.gpurr", dump, {"--start-gate", (s.tmp / "gate").string()});
  CHECK(r.code == 0);
  env = readText(s.tmp / "env");
  CHECK_THAT(env, Catch::Contains("GPURR_START_GATE=" + (s.tmp / "gate").string() + "\n"));
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
