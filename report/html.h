// One self-contained HTML page for a bisect or diff report: what a user opens
// in a browser (offline, or attached to a bug report) to see which launch
// diverged, why, what replay found, and the launches around it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace gpurr::report {

// Renders `report` (the object `gpurr bisect` writes to report.json, or one
// holding only `diff` and `timeline` for `gpurr diff --html`) as one HTML5
// document: inline CSS, no script needed to read it, no external reference
// of any kind (it renders offline). Every text taken from the report is
// HTML-escaped. Missing, null or mistyped keys leave their section out or
// say what is unknown; it never throws on any JSON input.
std::string renderHtml(const nlohmann::json& report);

// `text` with & < > " ' replaced by character references.
std::string escapeHtml(std::string_view text);

}  // namespace gpurr::report
