// Kernel names demangled, and their signatures read: the reports show
// demangled names, the recorder finds PyTorch's Philox state among a kernel's
// parameters by type, the diff tells a parameter that holds a value from one
// that may hold host bytes. Header-only, like text.h.
#pragma once

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gpurr {

// Demangled names longer than this are not used. Real kernel names demangle
// to tens of kilobytes at most; a name built from nested back-references
// (each template argument twice the one before) demangles to four times as
// much for every 40 more bytes, and everything that reads it (reports,
// pattern matching) would pay for it again.
inline constexpr size_t kMaxDemangledBytes = 1 << 20;

// The demangled C++ name, or the name itself when it is not a mangled one
// (or demangles to more than kMaxDemangledBytes).
inline std::string demangled(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status),
                                                &std::free);
  if (status != 0 || !d) return name;
  std::string_view text(d.get());
  return text.size() <= kMaxDemangledBytes ? std::string(text) : name;
}

// Top-level parameter types of a demangled function name ("f<a, b>(int, x::y)"
// -> {"int", "x::y"}); empty when it has none or cannot be parsed.
inline std::vector<std::string> demangledParameters(std::string_view d) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  };
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

// Whether a demangled parameter type is a number passed by value (`int`,
// `unsigned long`, `float`, `c10::Half`): its bytes are all value, never a
// host address or an unused part of a struct.
inline bool arithmeticType(std::string_view type) {
  static const std::set<std::string_view> types = {
      "bool",          "char",          "signed char",        "unsigned char",  "short",
      "unsigned short", "int",          "unsigned int",       "long",           "unsigned long",
      "long long",     "unsigned long long", "__int128",      "unsigned __int128", "float",
      "double",        "long double",   "c10::Half",          "c10::BFloat16",  "__half",
      "__nv_bfloat16", "wchar_t",       "char16_t",           "char32_t"};
  if (type.starts_with("const ")) type.remove_prefix(6);
  return types.contains(type);
}

}  // namespace gpurr
