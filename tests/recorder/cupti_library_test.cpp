// CUPTI and its checkpoint library found as the recorder finds them, in the
// CUDA 13 toolkit installed on this machine (both load without a GPU).
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>

#include "recorder/cupti_library.h"

using namespace gpurr::recorder;

TEST_CASE("CUPTI and the checkpoint API are found in the CUDA toolkit", "[recorder][cupti]") {
  const std::map<std::string, std::string> env = {{"CUDA_HOME", GPURR_CUDA_ROOT}};
  auto getenv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  std::string error;
  const std::optional<CuptiLibrary> c = loadCupti(getenv, error);
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

TEST_CASE("the CUPTI search order: GPURR_CUPTI, the loader's path, then each CUDA root's folders",
          "[recorder][cupti]") {
  auto getenv = [](const char* name) -> const char* {
    if (std::string(name) == "GPURR_CUPTI") return "/venv/nvidia/cu13/lib/libcupti.so.13";
    return std::string(name) == "CUDA_HOME" ? "/opt/cuda-x" : nullptr;
  };
  const std::vector<std::string> c = cuptiCandidates(getenv);
  REQUIRE(c.size() == 8);
  CHECK(c[0] == "/venv/nvidia/cu13/lib/libcupti.so.13");
  CHECK(c[1] == "libcupti.so.13");
  CHECK(c[2] == "/opt/cuda-x/lib64/libcupti.so.13");
  CHECK(c[3] == "/opt/cuda-x/lib/libcupti.so.13");
  CHECK(c[4] == "/opt/cuda-x/extras/CUPTI/lib64/libcupti.so.13");
  CHECK(c[5] == "/usr/local/cuda/lib64/libcupti.so.13");
}
