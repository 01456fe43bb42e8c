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

TEST_CASE("numbers among demangled parameter types", "[recorder][rng]") {
  for (const char* t : {"int", "unsigned long", "long long", "float", "bool", "c10::Half", "const int"})
    CHECK(arithmeticType(t));
  for (const char* t : {"float*", "int const*", "at::PhiloxCudaState", "std::array<char*, 3ul>",
                        "at::native::AddcmulFunctor<float>", "void (*)(int, int)", "integer", ""})
    CHECK_FALSE(arithmeticType(t));
}

TEST_CASE("Philox state is located and decoded", "[recorder][rng]") {
  // PyTorch before 2.10: 24 bytes, captured_ at byte 20.
  const std::optional<std::string> v29 = "2.9.1+cu128";
  const std::vector<trace::ParamInfo> layout = {{0, 8}, {8, 24}, {32, 8}};
  const auto found = philoxParams("_ZN2at6native6kernelIfEEvlNS_15PhiloxCudaStateEPf", layout, v29);
  REQUIRE(found == std::vector<PhiloxParam>{{8, {24, 4, 20}}});
  // Not Philox, or a layout that does not fit the parameter list: nothing.
  CHECK(philoxParams("_Z1fPfi", std::vector<trace::ParamInfo>{{0, 8}, {8, 4}}, v29).empty());
  CHECK(philoxParams("_ZN2at6native6kernelIfEEvlNS_15PhiloxCudaStateEPf", std::vector<trace::ParamInfo>{{0, 8}}, v29).empty());
  CHECK(philoxParams("_ZN2at6native6kernelIfEEvlNS_15PhiloxCudaStateEPf",
                     std::vector<trace::ParamInfo>{{0, 8}, {8, 16}, {24, 8}}, v29).empty());

  std::vector<uint8_t> params(40, 0);
  const uint64_t seed = 42, offset = 1234;
  std::memcpy(params.data() + 8, &seed, 8);
  std::memcpy(params.data() + 16, &offset, 8);
  auto states = decodePhilox(params, found);
  REQUIRE(states.size() == 1);
  CHECK(states[0].source == "philox");
  CHECK(states[0].seed == 42);
  CHECK(states[0].offset == 1234);
  CHECK(states[0].paramOffset == 8);
  CHECK(states[0].generator.empty());

  params[8 + 20] = 1;  // captured_: seed and offset are device pointers
  states = decodePhilox(params, found);
  REQUIRE(states.size() == 1);
  CHECK(states[0].generator.find("captured") != std::string::npos);
  CHECK(decodePhilox(std::span(params).first(20), found).empty());  // too short: no read past the end
}

TEST_CASE("the Philox layout follows the PyTorch version, its size checked", "[recorder][rng]") {
  const PhiloxLayout before{24, 4, 20}, since{32, 8, 24};
  CHECK(philoxLayout("2.9.1+cu128", 24) == before);
  CHECK(philoxLayout("1.13.1", 24) == before);
  CHECK(philoxLayout("2.10.0", 32) == since);
  CHECK(philoxLayout("2.11.0+cu130", 32) == since);
  CHECK(philoxLayout("2.12.0a0+git1234", 32) == since);
  CHECK(philoxLayout("3.0.0", 32) == since);
  // A size the version does not have: not decoded rather than misread.
  CHECK_FALSE(philoxLayout("2.11.0+cu130", 24));
  CHECK_FALSE(philoxLayout("2.9.1", 32));
  // No PyTorch version known (a program that loads libtorch from elsewhere): by size.
  CHECK(philoxLayout(std::nullopt, 24) == before);
  CHECK(philoxLayout(std::nullopt, 32) == since);
  CHECK(philoxLayout("not a version", 32) == since);
  CHECK_FALSE(philoxLayout(std::nullopt, 16));
}
