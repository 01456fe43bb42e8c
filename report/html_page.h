// What the sections of the HTML page share: the page being written, the words
// for operations, annotations and origins, safe access to the keys of the
// objects the page shows as they are (the timeline, the replay), and one
// function per section (html.cpp puts them in order).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "diff/report.h"
#include "report/bisect_report.h"
#include "report/html.h"
#include "report/job.h"
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
// The timeline and the replay's object are shown as they are: every access
// checks that the key exists and has the expected type, and treats anything
// else as absent.
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
string e(std::string_view s);  // escapeHtml, of valid UTF-8
string plural(uint64_t n, const char* one, const char* many);
string joined(const std::vector<string>& words);  // with spaces
string citation(string source);
// An operation of the diff.
string kernelShort(const diff::OpInfo& op);
string kernelFull(const diff::OpInfo& op);
std::optional<trace::Origin> originOf(const diff::OpInfo& op);  // with an op or a source line
string originText(const diff::OpInfo& op);
json annotationsJson(const diff::OpInfo& op);  // as `gpurr dump --json` writes them
string rangeWhere(const trace::DeviceRange& r);
// An operation of the timeline (timeline.h).
string dims(const json* d);
string kernelShort(const json& op);
string kernelFull(const json& op);
std::optional<trace::Origin> originOf(const json* op);
string originText(const json& op);
string rangeWhere(const json* r);
// Annotations (kinds as in docs/JSON.md).
string annotationText(const json& a);
string annotationShort(const json& a);
const char* annotationLabel(const string& kind);
string opStackText(const trace::Origin& o);
const char* streamColor(uint64_t ordinal);

// ------------------------------------------------------------ shared by sections
// The process whose first divergence the page leads with: in a job, the
// earliest origin (leadProcess); otherwise the first that diverged.
const diff::ProcessDiff* firstDifferingProcess(const Report& report);
// The job's view the page was given or computed (renderHtml sets it), or null.
inline const JobView* jobOf(const Report& report) { return report.job && *report.job ? &**report.job : nullptr; }
string divergenceWhere(const diff::FirstDivergence& d);
bool hasReplaySection(const Report& report);

// ------------------------------------------------------------ sections, in page order
struct Headline {
  string cls;    // ok, bad, warn
  string title;  // one line
};
Headline headline(const Report& report);
// `job`: the job's view of a comparison of per-rank directories, or null.
void renderHeader(Page& page, const Report& report, const JobView* job);  // html_header.cpp
void renderRuns(Page& page, const Report& report);        // html_header.cpp
void renderJob(Page& page, const Report& report, const JobView* job);     // html_job.cpp
void renderCause(Page& page, const Report& report);       // html_cause.cpp
void renderKnown(Page& page, const diff::FirstDivergence& d);  // html_known.cpp
void renderReplay(Page& page, const Report& report);      // html_replay.cpp
void renderTimeline(Page& page, const Report& report);    // html_timeline.cpp
void renderBlast(Page& page, const Report& report);       // html_blast.cpp
void renderEnvironment(Page& page, const Report& report);  // html_blast.cpp

}  // namespace gpurr::report::html
