// The header fields two runs differ in: shown above the report, and those
// that can change results marked so (another command line, compared with
// --force, among them).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>

#include "diff/diff.h"
#include "diff/environment.h"
#include "trace_format/trace.h"

using namespace gpurr;
namespace fs = std::filesystem;

TEST_CASE("runs recorded with different hash selections say so, and that results do not depend on it") {
  trace::Header a, b;
  b.options.steps = "1:2";
  a.options.kernelRegex = "gemm";
  const std::vector<diff::EnvDifference> env = diff::compareHeaders(a, b);
  REQUIRE(env.size() == 2);
  CHECK(env[0].field == "recorded with --kernels");
  CHECK(env[0].a == "gemm");
  CHECK(env[0].b == "(all)");
  CHECK_FALSE(env[0].affectsResults);
  CHECK(env[1].field == "recorded with --steps");
  CHECK(env[1].a == "(all)");
  CHECK(env[1].b == "1:2");
  b.options = a.options;
  CHECK(diff::compareHeaders(a, b).empty());
}

TEST_CASE("another command line can change results, Python's -u cannot") {
  trace::Header a, b;
  a.commandLine = {"/usr/bin/python3", "train.py", "--lr", "0.1"};
  b.commandLine = {"/usr/bin/python3", "-u", "train.py", "--lr", "0.1"};  // as torchrun starts it
  std::vector<diff::EnvDifference> env = diff::compareHeaders(a, b);
  REQUIRE(env.size() == 1);
  CHECK(env[0].field == "command line");
  CHECK_FALSE(env[0].affectsResults);
  b.commandLine.back() = "0.2";  // compared with --force
  env = diff::compareHeaders(a, b);
  REQUIRE(env.size() == 1);
  CHECK(env[0].affectsResults);
}

TEST_CASE("the interpreter's spelling and a script named relative to the working directory change no program") {
  trace::Header a, b;
  a.workingDirectory = b.workingDirectory = "/home/user/project";
  a.commandLine = {"python", "launch.py", "scripts/train.py", "--data", "/data/set"};
  b.commandLine = {"/venv/bin/python3", "-u", "/home/user/project/launch.py", "/home/user/project/scripts/train.py",
                   "--data", "/data/set"};  // torchrun's sys.executable, with the paths spelt out
  CHECK(diff::programOf(a) == diff::programOf(b));
  std::vector<diff::EnvDifference> env = diff::compareHeaders(a, b);
  REQUIRE(env.size() == 1);
  CHECK(env[0].field == "command line");
  CHECK_FALSE(env[0].affectsResults);
  b.workingDirectory = "/home/user/other";  // its relative scripts are other files
  b.commandLine = a.commandLine;
  CHECK(diff::programOf(a) != diff::programOf(b));
  b.workingDirectory = a.workingDirectory;
  b.commandLine = {"bash", "launch.sh"};
  a.commandLine = {"sh", "launch.sh"};  // another interpreter than Python's is another program
  CHECK(diff::programOf(a) != diff::programOf(b));
}

// A launch whose outputs differ from identical inputs, in runs whose
// environments differ: the environment is the cause only where the field
// can change that launch. NCCL's variables change NCCL's work alone.
TEST_CASE("NCCL's variables are no cause of a divergence in a kernel of the program's own") {
  const fs::path root = fs::temp_directory_path() / ("gpurr-env-cause-" + std::to_string(getpid()));
  auto write = [&](const std::string& name, const std::string& var, const std::string& value, uint64_t digest) {
    trace::Header h;
    h.environment = {{var, value}};
    fs::remove_all(root / name);
    trace::TraceWriter w(root / name, h);
    const trace::Allocation buffer{1, 0x7f0000000000, 4096, trace::AllocationKind::kDevice, 0, 0};
    w.append(trace::Event{0, 1, 0, buffer, std::nullopt});
    trace::KernelLaunch k;
    k.function = "_Z9histogramPf";
    k.grid = {8, 1, 1};
    k.block = {128, 1, 1};
    trace::appendPointerParam(k, buffer.address, buffer.ordinal, 0);
    k.outputs = {{{buffer.address, 4096, buffer.ordinal, 0}, digest, {}, std::nullopt}};
    w.append(trace::Event{1, 2, 0, k, std::nullopt});
    w.close();
    return root / name;
  };
  auto cause = [&](const std::string& var) {
    trace::TraceReader a(write("a.gpurr", var, "1", 7)), b(write("b.gpurr", var, "2", 8));
    const diff::ProcessDiff d = diff::diffTraces(a, b, diff::DiffOptions{}, nullptr);
    REQUIRE(d.firstDivergence.has_value());
    return d.firstDivergence->cause;
  };
  CHECK(cause("NCCL_ALGO") == diff::Cause::kNondeterministicKernel);
  CHECK(cause("CUBLAS_WORKSPACE_CONFIG") == diff::Cause::kEnvironment);
  // What a library logs, or how gloo reaches the other ranks, is context.
  CHECK(cause("NCCL_DEBUG") == diff::Cause::kNondeterministicKernel);
  CHECK(cause("GLOO_SOCKET_IFNAME") == diff::Cause::kNondeterministicKernel);
  fs::remove_all(root);
}

TEST_CASE("variables that only set what a library logs are shown for context alone") {
  trace::Header a, b;
  a.environment = {{"NCCL_DEBUG", "INFO"}, {"TORCH_DISTRIBUTED_DEBUG", "DETAIL"}, {"TORCH_LOGS", "+dynamo"}};
  b.environment = {{"GLOO_SOCKET_IFNAME", "lo"}};
  const std::vector<diff::EnvDifference> env = diff::compareHeaders(a, b);
  REQUIRE(env.size() == 4);
  for (const diff::EnvDifference& e : env) {
    INFO(e.field);
    // DETAIL wraps every process group in one that issues checking collectives of its own.
    CHECK(e.affectsResults == (e.field == "env TORCH_DISTRIBUTED_DEBUG"));
  }
}
