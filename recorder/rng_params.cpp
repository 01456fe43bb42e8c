// Philox state in kernel parameters (see rng_params.h).
#include "recorder/rng_params.h"

#include <cxxabi.h>

#include <cstdlib>
#include <cstring>
#include <memory>

namespace gpurr::recorder {

namespace {
// at::PhiloxCudaState: {uint64 seed_ | int64* ptr; uint64 offset_ | int64* ptr;
// uint32 offset_intragraph_; bool captured_}, 24 bytes.
constexpr uint32_t kPhiloxBytes = 24;
constexpr uint32_t kCapturedByte = 20;

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}
}  // namespace

std::vector<std::string> demangledParameters(std::string_view d) {
  std::vector<std::string> out;
  if (d.empty() || d.back() != ')') return out;
  // The parameter list is the last top-level parenthesised group.
  int depth = 0;
  size_t open = std::string_view::npos;
  for (size_t i = d.size(); i-- > 0;) {
    if (d[i] == ')') ++depth;
    else if (d[i] == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string_view::npos) return out;
  const std::string_view list = d.substr(open + 1, d.size() - open - 2);
  int nest = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '(' || c == '<' || c == '[') ++nest;
    else if (c == ')' || c == '>' || c == ']') --nest;
    else if (c == ',' && nest == 0) {
      const std::string_view p = trim(list.substr(start, i - start));
      if (!p.empty() && p != "void") out.emplace_back(p);
      start = i + 1;
    }
  }
  return out;
}

std::vector<uint32_t> philoxParamOffsets(const std::string& mangledName, std::span<const trace::ParamInfo> layout) {
  std::vector<uint32_t> out;
  if (mangledName.find("PhiloxCudaState") == std::string::npos) return out;  // cheap filter
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(mangledName.c_str(), nullptr, nullptr, &status), &std::free);
  if (status != 0 || !demangled) return out;
  const std::vector<std::string> params = demangledParameters(demangled.get());
  if (params.size() != layout.size()) return out;  // cannot tell which is which
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& p = params[i];
    if (p.size() >= 15 && p.compare(p.size() - 15, 15, "PhiloxCudaState") == 0 && layout[i].size == kPhiloxBytes)
      out.push_back(layout[i].offset);
  }
  return out;
}

std::vector<trace::RngState> decodePhilox(std::span<const uint8_t> params, std::span<const uint32_t> offsets) {
  std::vector<trace::RngState> out;
  for (uint32_t off : offsets) {
    if (uint64_t{off} + kPhiloxBytes > params.size()) continue;
    trace::RngState r;
    r.source = "philox";
    std::memcpy(&r.seed, params.data() + off, 8);
    std::memcpy(&r.offset, params.data() + off + 8, 8);
    uint32_t intragraph = 0;
    std::memcpy(&intragraph, params.data() + off + 16, 4);
    const bool captured = params[off + kCapturedByte] != 0;
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
