// The header fields two runs differ in: shown above the report, and those
// that can change results marked so.
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
