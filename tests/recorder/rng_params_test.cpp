// PhiloxCudaState parameters found by demangled type and parameter layout.
#include <catch2/catch.hpp>

#include <cstring>

#include "recorder/rng_params.h"

using namespace gpurr;
using namespace gpurr::recorder;

TEST_CASE("top-level parameters of demangled names", "[recorder][rng]") {
  CHECK(demangledParameters("void at::native::kernel<float>(long, at::PhiloxCudaState, float*)") ==
        std::vector<std::string>{"long", "at::PhiloxCudaState", "float*"});
  CHECK(demangledParameters("void (anonymous namespace)::f<main::{lambda(int)#1}>(main::{lambda(int)#1}, "
                            "std::pair<int, int>, void (*)(int, int))") ==
        std::vector<std::string>{"main::{lambda(int)#1}", "std::pair<int, int>", "void (*)(int, int)"});
  CHECK(demangledParameters("f()").empty());
  CHECK(demangledParameters("f(void)").empty());
  CHECK(demangledParameters("not a function").empty());
  CHECK(demangledParameters("").empty());
}

TEST_CASE("Philox state is located and decoded", "[recorder][rng]") {
  const std::vector<trace::ParamInfo> layout = {{0, 8}, {8, 24}, {32, 8}};
  const auto offsets = philoxParamOffsets("_ZN2at6native6kernelIfEEvlNS_15PhiloxCudaStateEPf", layout);
  REQUIRE(offsets == std::vector<uint32_t>{8});
  // Not Philox, or a layout that does not fit the parameter list: nothing.
  CHECK(philoxParamOffsets("_Z1fPfi", std::vector<trace::ParamInfo>{{0, 8}, {8, 4}}).empty());
  CHECK(philoxParamOffsets("_ZN2at6native6kernelIfEEvlNS_15PhiloxCudaStateEPf", std::vector<trace::ParamInfo>{{0, 8}}).empty());
  CHECK(philoxParamOffsets("_ZN2at6native6kernelIfEEvlNS_15PhiloxCudaStateEPf", std::vector<trace::ParamInfo>{{0, 8}, {8, 16}, {24, 8}}).empty());

  std::vector<uint8_t> params(40, 0);
  const uint64_t seed = 42, offset = 1234;
  std::memcpy(params.data() + 8, &seed, 8);
  std::memcpy(params.data() + 16, &offset, 8);
  auto states = decodePhilox(params, offsets);
  REQUIRE(states.size() == 1);
  CHECK(states[0].source == "philox");
  CHECK(states[0].seed == 42);
  CHECK(states[0].offset == 1234);
  CHECK(states[0].paramOffset == 8);
  CHECK(states[0].generator.empty());

  params[8 + 20] = 1;  // captured_: seed and offset are device pointers
  states = decodePhilox(params, offsets);
  REQUIRE(states.size() == 1);
  CHECK(states[0].generator.find("captured") != std::string::npos);
  CHECK(decodePhilox(std::span(params).first(20), offsets).empty());  // too short: no read past the end
}
