// The top of the HTML page: the verdict in one line with the command and links
// to the sections below, and the runs a bisect recorded.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "report/html_page.h"
#include "report/timeline.h"

namespace gpurr::report::html {

// ------------------------------------------------------------ header

const json* firstDifferingProcess(const json* diff) {
  for (const json* p : objects(array(diff, "processes"))) {
    if (object(p, "firstDivergence")) return p;
  }
  return nullptr;
}

string divergenceWhere(const json& first) {
  const json* a = object(first, "a");
  const json* b = object(first, "b");
  const json* op = a ? a : b;
  if (!op) return "an unknown operation";
  string s = opTitle(*op);
  if (textOr(op, "kind") == "launch") s += " " + kernelShort(*op);
  return s;
}

Headline headline(const json& report) {
  const json* diff = object(report, "diff");
  string verdict = textOr(report, "verdict");
  if (verdict.empty() && diff) {
    if (auto identical = flag(diff, "identical")) verdict = *identical ? "identical" : "diverged";
  }
  const json* p = firstDifferingProcess(diff);
  const json* first = p ? object(p, "firstDivergence") : nullptr;
  string cause = first ? textOr(first, "cause") : "";
  if (verdict == "identical") {
    string s = "Identical: the runs produced the same bits";
    if (const json* runs = array(report, "runs"); runs && runs->size() > 1) {
      s = fmt::format("Identical: {} runs produced the same bits", runs->size());
    }
    return {"ok", s};
  }
  if (verdict == "diverged") {
    if (!first) return {"bad", "Diverged: the runs produced different bits"};
    string s = (cause == "reordered"                        ? "Diverged: the runs do the same operations in another order at "
                : flag(first, "path").value_or(false) ? "Diverged: the runs take different paths at "
                                                      : "Diverged at ") +
               divergenceWhere(*first);
    if (!cause.empty()) s += " \u2014 " + causeText(cause);
    return {"bad", s};
  }
  if (verdict == "notReproduced") {
    string s = "Not reproduced: a further run did not diverge at the same operation";
    if (first) s += " (first seen at " + divergenceWhere(*first) + ")";
    return {"warn", s};
  }
  if (verdict == "failed") {
    string why = textOr(report, "error");
    why = why.substr(0, why.find('\n'));
    return {"bad", "Failed: " + (why.empty() ? string("the runs could not be recorded or compared") : why)};
  }
  if (verdict.empty()) return {"warn", "No verdict: the report holds no comparison"};
  return {"warn", "Verdict: " + verdict};
}

// Whether renderReplay writes a section (the header links to it).
bool hasReplaySection(const json& report, bool bisect) {
  const bool any = object(report, "replay") || text(report, "replayError") || object(report, "confirmation") ||
                   flag(report, "reproduced");
  if (any) return true;
  const string verdict = textOr(report, "verdict");
  return bisect && report.contains("replay") && verdict != "identical" && verdict != "failed";
}

void renderHeader(Page& page, const json& report, bool bisect) {
  const Headline h = headline(report);
  page.addf("<header class=\"verdict v-{}\" id=\"verdict\">\n", h.cls);
  page.addf("<div class=\"kicker\">gpurr {} report</div>\n", bisect ? "bisect" : "diff");
  page.addf("<h1>{}</h1>\n", e(h.title));
  const json* diff = object(report, "diff");
  if (const json* p = firstDifferingProcess(diff)) {
    if (const json* first = object(p, "firstDivergence")) {
      if (auto s = text(first, "summary")) page.addf("<div class=\"small\">{}</div>\n", e(*s));
    }
  }
  const json* command = get(report, "command");
  string cmd;
  if (command && command->is_string()) cmd = command->get<string>();
  for (const string& part : strings(command)) cmd += (cmd.empty() ? "" : " ") + part;
  if (!cmd.empty()) page.addf("<div class=\"small\"><span class=\"muted\">command</span> <code>{}</code></div>\n", e(cmd));
  string options;
  for (const string& o : strings(array(report, "recordOptions"))) options += (options.empty() ? "" : " ") + o;
  if (!options.empty()) {
    page.addf("<div class=\"small\"><span class=\"muted\">recorded with</span> <code>gpurr record {}</code></div>\n",
              e(options));
  }
  if (auto dir = text(report, "directory")) {
    page.addf("<div class=\"small\"><span class=\"muted\">written to</span> <code>{}</code></div>\n", e(*dir));
  }
  if (auto error = text(report, "error"); error && !error->empty() && textOr(report, "verdict") != "failed") {
    page.addf("<div class=\"small\"><b>warning:</b> {}</div>\n", e(*error));
  }
  if (diff && !bisect) {
    page.addf("<div class=\"small\"><span class=\"muted\">compared</span> <code>{}</code> <span class=\"muted\">and</span> <code>{}</code></div>\n",
              e(textOr(diff, "a", "?")), e(textOr(diff, "b", "?")));
  }
  std::vector<std::pair<string, string>> links;
  if (array(report, "runs")) links.push_back({"runs", "Runs"});
  if (firstDifferingProcess(diff)) links.push_back({"cause", "Cause"});
  if (hasReplaySection(report, bisect)) links.push_back({"replay", "Replay"});
  if (const json* t = object(report, "timeline"); t && array(t, "rows") && !array(t, "rows")->empty()) {
    links.push_back({"timeline", "Timeline"});
    links.push_back({"divergent-row", "Divergent launch"});
  }
  if (firstDifferingProcess(diff)) links.push_back({"blast", "Blast radius"});
  if (diff || object(report, "compared")) links.push_back({"environment", "Environment"});
  if (links.size() > 1) {
    page.add("<nav>");
    for (const auto& [id, label] : links) page.addf("<a href=\"#{}\">{}</a>", id, label);
    page.add("</nav>\n");
  }
  page.add("</header>\n");
}

// ------------------------------------------------------------ runs

void renderRuns(Page& page, const json& report) {
  const json* runs = array(report, "runs");
  if (!runs) return;
  page.add("<section id=\"runs\"><h2>Runs</h2>\n");
  if (runs->empty()) {
    page.add("<p class=\"muted\">No run was recorded.</p></section>\n");
    return;
  }
  page.add("<table><thead><tr><th>run</th><th>trace</th><th>output</th><th>exit</th><th>time</th><th>launches</th></tr></thead><tbody>\n");
  size_t i = 0;
  for (const json& run : *runs) {
    ++i;
    if (!run.is_object()) continue;
    const json* exitCode = get(run, "exitCode");
    string exit = exitCode && exitCode->is_number_integer() ? exitCode->dump() : "?";
    const bool failed = exit != "0" && exit != "?";
    string label = std::to_string(i);
    if (auto snap = text(run, "snapshot"); snap && !snap->empty()) {
      label += " <span class=\"chip\" title=\"recorded with --snapshot " + e(*snap) + "\">snapshots " + e(*snap) + "</span>";
    }
    page.addf("<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td class=\"{}\">{}</td><td>{}</td><td>{}</td></tr>\n",
              label, e(textOr(run, "trace", "(not traced)")), e(textOr(run, "log", "-")), failed ? "bad" : "", e(exit),
              number(run, "seconds") ? fmt::format("{:.1f} s", *number(run, "seconds")) : "-",
              count(run, "launches") ? withCommas(*count(run, "launches")) : "-");
  }
  page.add("</tbody></table>\n");
  if (auto s = number(report, "seconds")) page.addf("<p class=\"muted small\">{:.1f} s in all.</p>\n", *s);
  if (const json* c = object(report, "compared")) {
    page.addf("<p>Compared: {} runs, each {}, {} launches ({} hashed), {} copies, {} memsets, {} hashed.</p>\n",
              count(c, "runs").value_or(runs->size()), plural(count(c, "processes").value_or(0), "process", "processes"),
              withCommas(count(c, "launches").value_or(0)), withCommas(count(c, "hashedLaunches").value_or(0)),
              withCommas(count(c, "copies").value_or(0)), withCommas(count(c, "memsets").value_or(0)),
              humanBytes(count(c, "bytesHashed").value_or(0)));
  }
  for (const string& failure : strings(array(report, "failures"))) {
    page.addf("<div class=\"box warnbox\"><pre>{}</pre></div>\n", e(failure));
  }
  page.add("</section>\n");
}

}  // namespace gpurr::report::html
