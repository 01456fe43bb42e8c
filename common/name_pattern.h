// Regular expressions matched against names that a program or a trace gives
// (kernel names, op names). A demangled kernel name runs to tens of
// kilobytes, and libstdc++'s default matcher recurses once per character a
// `.*` consumes: on such a name it overflows the stack, in the recorded
// program's own thread for `--kernels`. Its breadth-first matcher (the
// `__polynomial` flag) recurses only as deep as the pattern is long, and is
// no slower on these patterns. It refuses back-references. Every name
// pattern is searched for (std::regex_search), never matched whole.
#pragma once

#include <regex>
#include <string>
#include <string_view>

namespace gpurr {

inline constexpr std::regex::flag_type kNamePattern = std::regex::ECMAScript
#ifdef __GLIBCXX__
                                                      | std::regex_constants::__polynomial
#endif
    ;

// `pattern` compiled for searching names. A leading `.*` changes nothing a
// search finds (it may match nothing) but makes it quadratic in the name's
// length: each place the search starts at runs it to the name's end. It is
// left out: `.*gemm.*` on a 20 KB name took seconds, and now as long as
// `gemm.*`. Throws std::regex_error as std::regex does.
inline std::regex namePattern(const std::string& pattern, std::regex::flag_type extra = {}) {
  size_t start = 0;
  while (pattern.compare(start, 2, ".*") == 0 &&
         (start + 2 == pattern.size() || std::string_view("*+?{").find(pattern[start + 2]) == std::string_view::npos))
    start += 2;
  return std::regex(pattern.substr(start), kNamePattern | extra);
}

// Why `pattern` cannot be a name pattern, in words for its user; empty when
// it can. Checked where the pattern is given, so that it is refused there.
inline std::string namePatternError(const std::string& pattern) {
  try {
    std::regex r(pattern, kNamePattern);
  } catch (const std::regex_error& e) {
    return e.code() == std::regex_constants::error_complexity ? "back-references (\\1) are not supported" : e.what();
  }
  return "";
}

}  // namespace gpurr
