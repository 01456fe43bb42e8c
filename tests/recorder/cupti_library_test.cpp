// CUPTI and its checkpoint library found as the recorder finds them, in the
// CUDA 13 toolkit installed on this machine (both load without a GPU).
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>

#include "recorder/cupti_library.h"

using namespace gpurr::recorder;

namespace {

// A getenv that reads `env` (kept alive by the caller).
auto getenvOf(const std::map<std::string, std::string>& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST_CASE("CUPTI and the checkpoint API are found in the CUDA toolkit", "[recorder][cupti]") {
  const std::map<std::string, std::string> env = {{"CUDA_HOME", GPURR_CUDA_ROOT}};
  std::string error;
  const std::optional<CuptiLibrary> c = loadCupti(getenvOf(env), error);
  INFO(error);
  REQUIRE(c);
  CHECK(c->subscribe != nullptr);
  CHECK(c->path.find("libcupti.so") != std::string::npos);
  // The checkpoint entry points are exported by libcheckpoint.so, not by
  // libcupti.so.13: found beside it.
  CHECK(c->checkpoint.save != nullptr);
  CHECK(c->checkpoint.restore != nullptr);
  CHECK(c->checkpoint.free != nullptr);
  CHECK(c->checkpoint.resultString != nullptr);
  REQUIRE_FALSE(c->checkpointPath.empty());
  CHECK(std::filesystem::path(c->checkpointPath).filename() == "libcheckpoint.so");
  CHECK(std::filesystem::equivalent(std::filesystem::path(c->checkpointPath).parent_path(),
                                    std::filesystem::path(c->path).parent_path()));
}

TEST_CASE("the CUPTI search order: GPURR_CUPTI, the program's Python environment, each CUDA root, the system",
          "[recorder][cupti]") {
  const std::map<std::string, std::string> env = {
      {"GPURR_CUPTI", "/chosen/libcupti.so.13"},
      {"GPURR_PYTHON_CUPTI", "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13"},
      {"CUDA_HOME", "/opt/cuda-x"}};
  const std::vector<CuptiCandidate> c = cuptiCandidates(getenvOf(env));
  REQUIRE(c.size() == 9);
  CHECK(c[0].path == "/chosen/libcupti.so.13");
  CHECK(c[0].where == "GPURR_CUPTI");
  CHECK(c[1].path == "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13");
  CHECK(c[1].where == "the program's Python environment");
  CHECK(c[2].path == "/opt/cuda-x/lib64/libcupti.so.13");
  CHECK(c[2].where == "the CUDA toolkit (CUDA_HOME)");
  CHECK(c[3].path == "/opt/cuda-x/lib/libcupti.so.13");
  CHECK(c[4].path == "/opt/cuda-x/extras/CUPTI/lib64/libcupti.so.13");
  CHECK(c[5].path == "/usr/local/cuda/lib64/libcupti.so.13");
  CHECK(c[8].path == "libcupti.so.13");
  CHECK(c[8].where == "the system's library path");
}

TEST_CASE("CUPTI from the program's Python environment comes before the toolkit's", "[recorder][cupti]") {
  // The nvidia-cuda-cupti wheel that PyTorch 2.11 (cu130) installs.
  const std::string wheel = GPURR_TEST_VENV_CUPTI;
  INFO("scripts/setup.sh installs PyTorch with its nvidia-cuda-cupti wheel");
  REQUIRE(std::filesystem::exists(wheel));
  const std::map<std::string, std::string> env = {{"GPURR_PYTHON_CUPTI", wheel}, {"CUDA_HOME", GPURR_CUDA_ROOT}};
  std::string error;
  const std::optional<CuptiLibrary> c = loadCupti(getenvOf(env), error);
  INFO(error);
  REQUIRE(c);
  // ctest runs each test case in a process of its own, which holds no
  // libcupti yet; run together with the case above, the toolkit's is loaded.
  if (c->where == "the program's own copy") {
    WARN("this process had loaded a libcupti already: run this case alone");
    return;
  }
  CHECK(std::filesystem::equivalent(c->path, wheel));
  CHECK(c->where == "the program's Python environment");
}
