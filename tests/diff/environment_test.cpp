// The header fields two runs differ in: shown above the report, and those
// that can change results marked so (another command line, compared with
// --force, among them).
#include <catch2/catch.hpp>

#include "diff/diff.h"

using namespace gpurr;

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
