// Numbers for people: the byte sizes and counts that gpurr's reports (text,
// replay, HTML) print, formatted one way everywhere, and text kept to a line. Header-only; every
// library that links gpurr_trace_format has fmt and this folder on its path.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <iterator>
#include <string>

namespace gpurr::text {

// `s` for a line of a report: its line feeds written \n, so that a name
// from a trace that holds one cannot start a line of its own.
inline std::string oneLine(std::string s) {
  for (size_t at = s.find('\n'); at != std::string::npos; at = s.find('\n', at + 2)) s.replace(at, 1, "\\n");
  return s;
}

// "48 B", "1.5 KiB", "4.0 MiB".
inline std::string humanBytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", v, kUnits[unit]);
}

// "1,234,567".
inline std::string withCommas(uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace gpurr::text
