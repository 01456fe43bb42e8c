// The evidence lines of a first divergence as one text, for the diff's unit
// tests to search.
#pragma once

#include <string>

#include "diff/report.h"
#include "diff/wording.h"

namespace gpurr::testing {

inline std::string evidence(const diff::FirstDivergence& d) {
  std::string out;
  for (const diff::Evidence& e : d.evidence) out += diff::sentence(e) + "\n";
  return out;
}

}  // namespace gpurr::testing
