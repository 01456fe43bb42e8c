// What the sections of the HTML page share: the page being written, safe
// access to the report's keys, the words for operations, annotations and
// origins, and one function per section (html.cpp puts them in order).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "report/html.h"
#include "trace_format/events.h"

namespace gpurr::report::html {

using json = nlohmann::json;
using std::string;
using text::humanBytes;
using text::withCommas;

class Page {
 public:
  string html;
  void add(std::string_view s) { html += s; }
  template <typename... Args>
  void addf(fmt::format_string<Args...> f, Args&&... args) {
    html += fmt::format(f, std::forward<Args>(args)...);
  }
};

// ------------------------------------------------------------ safe access
// The report may come from an older or partial writer: every access checks
// that the key exists and has the expected type, and treats anything else
// as absent.
const json* get(const json* j, const char* key);
const json* get(const json& j, const char* key);
const json* object(const json* j, const char* key);
const json* object(const json& j, const char* key);
const json* array(const json* j, const char* key);
const json* array(const json& j, const char* key);
std::optional<std::string> text(const json* j, const char* key);
std::optional<std::string> text(const json& j, const char* key);
std::string textOr(const json* j, const char* key, std::string fallback = "");
std::string textOr(const json& j, const char* key, std::string fallback = "");
std::optional<double> number(const json* j, const char* key);
std::optional<double> number(const json& j, const char* key);
std::optional<uint64_t> count(const json* j, const char* key);
std::optional<uint64_t> count(const json& j, const char* key);
std::optional<bool> flag(const json* j, const char* key);
std::optional<bool> flag(const json& j, const char* key);
// Array elements that are objects (anything else is skipped).
std::vector<const json*> objects(const json* arr);
std::vector<std::string> strings(const json* arr);

// ------------------------------------------------------------ words
string e(std::string_view s);  // escapeHtml
string plural(uint64_t n, const char* one, const char* many);
string dims(const json* d);
string causeText(const string& cause);
string citation(string source);
string kernelShort(const json& op);
string kernelFull(const json& op);
string opTitle(const json& op);
string annotationText(const json& a);
string annotationShort(const json& a);
const char* annotationLabel(const string& kind);
std::optional<trace::Origin> originOf(const json* op);
string originText(const json& op);
string opStackText(const trace::Origin& o);
const char* streamColor(uint64_t ordinal);

// ------------------------------------------------------------ shared by sections
const json* firstDifferingProcess(const json* diff);
string divergenceWhere(const json& first);
string rangeWhere(const json* r);
bool hasReplaySection(const json& report, bool bisect);
void renderAnnotations(Page& page, const json* annotations, bool withOps);

// ------------------------------------------------------------ sections, in page order
struct Headline {
  string cls;    // ok, bad, warn
  string title;  // one line
};
Headline headline(const json& report);
void renderHeader(Page& page, const json& report, bool bisect);  // html_header.cpp
void renderRuns(Page& page, const json& report);                 // html_header.cpp
void renderCause(Page& page, const json& report);                // html_cause.cpp
void renderKnown(Page& page, const json& first);                 // html_known.cpp
void renderReplay(Page& page, const json& report, bool bisect);  // html_replay.cpp
void renderTimeline(Page& page, const json& report);             // html_timeline.cpp
void renderBlast(Page& page, const json& report);                // html_blast.cpp
void renderEnvironment(Page& page, const json& report);          // html_blast.cpp

}  // namespace gpurr::report::html
