// Regular expressions matched against names that a program or a trace gives
// (kernel names, op names). A demangled kernel name runs to tens of
// kilobytes, and libstdc++'s default matcher recurses once per character a
// `.*` consumes: on such a name it overflows the stack, in the recorded
// program's own thread for `--kernels`. Its breadth-first matcher (the
// `__polynomial` flag) recurses only as deep as the pattern is long, and is
// no slower on these patterns. It refuses back-references.
#pragma once

#include <regex>
#include <string>

namespace gpurr {

inline constexpr std::regex::flag_type kNamePattern = std::regex::ECMAScript
#ifdef __GLIBCXX__
                                                      | std::regex_constants::__polynomial
#endif
    ;

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
