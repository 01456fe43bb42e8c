// Philox state in kernel parameters (see rng_params.h).
#include "recorder/rng_params.h"

#include <cstdio>
#include <cstring>

namespace gpurr::recorder {

namespace {
// ATen/cuda/detail/PhiloxCudaStateRaw.cuh: offset_intragraph_ became a
// uint64_t in PyTorch 2.10 (pytorch/pytorch#164515), which grew the struct
// from 24 to 32 bytes and moved captured_ from byte 20 to 24.
constexpr PhiloxLayout kPhiloxBefore210{24, 4, 20};
constexpr PhiloxLayout kPhiloxSince210{32, 8, 24};

// (major, minor) of "2.11.0+cu130", "2.10.0a0+git1234"; nullopt if unreadable.
std::optional<std::pair<int, int>> majorMinor(const std::string& version) {
  int major = 0, minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) return std::nullopt;
  return std::pair{major, minor};
}
}  // namespace

std::optional<PhiloxLayout> philoxLayout(const std::optional<std::string>& torchVersion, uint32_t size) {
  const std::optional<std::pair<int, int>> v = torchVersion ? majorMinor(*torchVersion) : std::nullopt;
  if (!v) {
    for (const PhiloxLayout& l : {kPhiloxBefore210, kPhiloxSince210})
      if (l.size == size) return l;
    return std::nullopt;
  }
  const PhiloxLayout l = *v >= std::pair{2, 10} ? kPhiloxSince210 : kPhiloxBefore210;
  if (l.size != size) return std::nullopt;  // a layout this version should not have: do not guess
  return l;
}

std::vector<PhiloxParam> philoxParams(const std::string& mangledName, std::span<const trace::ParamInfo> layout,
                                      const std::optional<std::string>& torchVersion) {
  std::vector<PhiloxParam> out;
  if (mangledName.find("PhiloxCudaState") == std::string::npos) return out;  // cheap filter
  const std::vector<std::string> params = demangledParameters(demangled(mangledName));
  if (params.size() != layout.size()) return out;  // cannot tell which is which
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& p = params[i];
    if (p.size() < 15 || p.compare(p.size() - 15, 15, "PhiloxCudaState") != 0) continue;
    if (std::optional<PhiloxLayout> l = philoxLayout(torchVersion, layout[i].size))
      out.push_back({layout[i].offset, *l});
  }
  return out;
}

std::vector<trace::RngState> decodePhilox(std::span<const uint8_t> params, std::span<const PhiloxParam> found) {
  std::vector<trace::RngState> out;
  for (const auto& [off, layout] : found) {
    if (uint64_t{off} + layout.size > params.size()) continue;
    trace::RngState r;
    r.source = "philox";
    std::memcpy(&r.seed, params.data() + off, 8);
    std::memcpy(&r.offset, params.data() + off + 8, 8);
    uint64_t intragraph = 0;  // little-endian: the low bytes of either width
    std::memcpy(&intragraph, params.data() + off + 16, layout.intragraphBytes);
    const bool captured = params[off + layout.capturedByte] != 0;
    // Captured into a graph: seed and offset are device pointers, read at
    // replay of the graph; the values here are those addresses.
    r.generator = captured ? "captured (seed/offset are device pointers; intragraph offset " +
                                 std::to_string(intragraph) + ")"
                           : "";
    r.paramOffset = off;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace gpurr::recorder
