// The `gpurr record` tests' harness: the real bin/gpurr run on `sh -c`
// scripts in a sandbox directory, and fake traces made with TraceWriter
// that the scripts copy where a recorded process would leave its trace.
#pragma once

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

namespace gpurr::record_testing {

namespace fs = std::filesystem;
using gpurr::testing::TempDir;
using gpurr::testing::readText;
using gpurr::testing::writeText;

// Single quotes for sh.
inline std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A trace as a recorded process would leave it: `launches` kernel launches,
// each with one input and one output range of `rangeBytes`; the program's
// command line and environment as given.
inline void makeTrace(const fs::path& dir, int launches, uint64_t rangeBytes, int32_t rank = -1,
                      std::vector<std::string> commandLine = {"python", "train.py"},
                      std::vector<trace::KeyValue> environment = {}) {
  trace::Header h;
  h.toolVersion = GPURR_VERSION;
  h.commandLine = std::move(commandLine);
  h.environment = std::move(environment);
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

inline uint64_t filesUnder(const fs::path& dir) {
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

inline const fs::path kGpurr = fs::path(GPURR_BINARY_DIR) / "bin" / "gpurr";

// Starts bin/gpurr with `args`, stdin from `input`, in `cwd`, with `env`
// set on top of this process's environment. Output goes to files in `io`,
// read back by finish().
inline pid_t start(const std::vector<std::string>& args, const fs::path& io, const std::string& input,
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
    ::unsetenv("GPURR_RECORDER_LIB");  // the sandbox's, unless a test erased it
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv{const_cast<char*>(kGpurr.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(kGpurr.c_str(), argv.data());
    ::_exit(98);
  }
  return pid;
}

inline Result finish(pid_t pid, const fs::path& io) {
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

// Whether `done()` became true within `limit`, asked every 10 ms.
template <typename Done>
bool waitUntil(Done&& done, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

inline bool waitFor(const fs::path& file, std::chrono::seconds limit) {
  return waitUntil([&] { return fs::exists(file); }, limit);
}

}  // namespace gpurr::record_testing
