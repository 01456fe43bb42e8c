// One self-contained HTML page for a bisect or diff report: what a user opens
// in a browser (offline, or attached to a bug report) to see which launch
// diverged, why, what replay found, and the launches around it.
#pragma once

#include <string>
#include <string_view>

#include "report/bisect_report.h"

namespace gpurr::report {

// Renders `report` (the comparison, the timeline around its first
// divergence, and what a bisect found, any of them absent) as one HTML5
// document: inline CSS, no script needed to read it, no external reference
// of any kind (it renders offline). Every text shown is HTML-escaped. The
// replay and timeline objects are read key by key: a missing, null or
// mistyped key leaves its part out or says what is unknown; it never throws.
std::string renderHtml(const Report& report);

// `text` with & < > " ' replaced by character references.
std::string escapeHtml(std::string_view text);

}  // namespace gpurr::report
