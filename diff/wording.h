// The sentences of the diff's evidence: made from its data (Evidence,
// report.h) in this one place, for the text, JSON and HTML reports alike.
#pragma once

#include <string>
#include <vector>

#include "diff/report.h"

namespace gpurr::diff {

// What a parameter difference's bytes hold: "pointer", "philox seed/offset",
// "host addresses"...; "" when nothing is known.
std::string meaningText(ParamMeaning meaning, const std::string& rngSource);
std::string meaningText(const ParamDifference& p);

// The sentence a report prints for `e`.
std::string sentence(const Evidence& e);

// What to do about a collective whose reduction order changed.
std::string reductionOrderFix();

// Each one's sentence, in order.
std::vector<std::string> sentences(const std::vector<Evidence>& evidence);

}  // namespace gpurr::diff
