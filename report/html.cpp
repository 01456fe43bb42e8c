// renderHtml: a bisect or diff report as one self-contained page. The page is
// read by people who were not there when the runs were recorded, maybe
// offline or from an attachment: everything it needs is inline, nothing is
// fetched, and no script is needed to read it.
#include "report/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/text.h"
#include "report/timeline.h"
#include "trace_format/events.h"

namespace gpurr::report {
namespace {

using json = nlohmann::json;

// ------------------------------------------------------------ safe access
// The report may come from an older or partial writer: every access checks
// that the key exists and has the expected type, and treats anything else
// as absent.

const json* get(const json* j, const char* key) {
  if (!j || !j->is_object()) return nullptr;
  auto it = j->find(key);
  if (it == j->end() || it->is_null()) return nullptr;
  return &*it;
}
const json* get(const json& j, const char* key) { return get(&j, key); }

const json* object(const json* j, const char* key) {
  const json* v = get(j, key);
  return v && v->is_object() ? v : nullptr;
}
const json* object(const json& j, const char* key) { return object(&j, key); }

const json* array(const json* j, const char* key) {
  const json* v = get(j, key);
  return v && v->is_array() ? v : nullptr;
}
const json* array(const json& j, const char* key) { return array(&j, key); }

std::optional<std::string> text(const json* j, const char* key) {
  const json* v = get(j, key);
  if (v && v->is_string()) return v->get<std::string>();
  return std::nullopt;
}
std::optional<std::string> text(const json& j, const char* key) { return text(&j, key); }

std::string textOr(const json* j, const char* key, std::string fallback = "") {
  return text(j, key).value_or(std::move(fallback));
}
std::string textOr(const json& j, const char* key, std::string fallback = "") {
  return textOr(&j, key, std::move(fallback));
}

std::optional<double> number(const json* j, const char* key) {
  const json* v = get(j, key);
  if (v && v->is_number()) return v->get<double>();
  return std::nullopt;
}
std::optional<double> number(const json& j, const char* key) { return number(&j, key); }

std::optional<uint64_t> count(const json* j, const char* key) {
  const json* v = get(j, key);
  if (v && v->is_number_unsigned()) return v->get<uint64_t>();
  if (v && v->is_number_integer() && v->get<int64_t>() >= 0) return static_cast<uint64_t>(v->get<int64_t>());
  if (v && v->is_number_float() && v->get<double>() >= 0 && v->get<double>() < 1.8e19) {
    return static_cast<uint64_t>(v->get<double>());
  }
  return std::nullopt;
}
std::optional<uint64_t> count(const json& j, const char* key) { return count(&j, key); }

std::optional<bool> flag(const json* j, const char* key) {
  const json* v = get(j, key);
  if (v && v->is_boolean()) return v->get<bool>();
  return std::nullopt;
}
std::optional<bool> flag(const json& j, const char* key) { return flag(&j, key); }

// Array elements that are objects (anything else is skipped).
std::vector<const json*> objects(const json* arr) {
  std::vector<const json*> out;
  if (!arr || !arr->is_array()) return out;
  for (const json& e : *arr) {
    if (e.is_object()) out.push_back(&e);
  }
  return out;
}

std::vector<std::string> strings(const json* arr) {
  std::vector<std::string> out;
  if (!arr || !arr->is_array()) return out;
  for (const json& e : *arr) {
    if (e.is_string()) out.push_back(e.get<std::string>());
  }
  return out;
}

// ------------------------------------------------------------ formatting

using std::string;

string e(std::string_view s) { return escapeHtml(s); }

using text::humanBytes;
using text::withCommas;

string plural(uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", withCommas(n), n == 1 ? one : many);
}

string dims(const json* d) {
  if (!d || !d->is_array() || d->size() != 3) return "?";
  string out;
  for (const json& x : *d) {
    if (!out.empty()) out += ",";
    out += x.is_number() ? x.dump() : "?";
  }
  return "(" + out + ")";
}

const char* causeName(const string& cause) {
  static const std::pair<const char*, const char*> names[] = {
      {"environment", "environment"},
      {"hostInput", "host input"},
      {"rngState", "RNG state"},
      {"scalarParameters", "scalar parameters"},
      {"algorithmChoice", "algorithm choice"},
      {"reordered", "reordered"},
      {"nondeterministicKernel", "nondeterministic kernel"},
      {"uninitialisedMemory", "uninitialised memory"},
      {"unknown", "unknown"}};
  for (const auto& [k, v] : names) {
    if (cause == k) return v;
  }
  return nullptr;
}

string causeText(const string& cause) {
  const char* n = causeName(cause);
  return n ? n : cause;
}

// "docs.pytorch.org/docs/...": a source is cited as text, never linked, so
// that the page holds no address a viewer could fetch.
string citation(string source) {
  for (const char* scheme : {"https://", "http://"}) {
    if (source.rfind(scheme, 0) == 0) source.erase(0, std::char_traits<char>::length(scheme));
  }
  return source;
}

string kernelShort(const json& op) {
  if (auto s = text(op, "short")) return *s;
  if (auto n = text(op, "name")) return shortKernelName(*n);
  return "?";
}

string kernelFull(const json& op) {
  if (auto d = text(op, "demangled")) return *d;
  if (auto n = text(op, "name")) return demangled(*n);
  return "?";
}

// "launch #3" or "memcpy HtoD (operation #7)", as gpurr diff titles them.
string opTitle(const json& op) {
  const string kind = textOr(op, "kind");
  if (kind == "launch") {
    if (auto li = count(op, "launchIndex")) return fmt::format("launch #{}", *li);
    return "launch";
  }
  const string name = kind == "graph" ? "graph launch" : textOr(op, "name", kind.empty() ? "operation" : kind);
  if (auto i = count(op, "index")) return fmt::format("{} (operation #{})", name, *i);
  return name;
}

// An annotation in a few words (kinds as in docs/JSON.md).
string annotationText(const json& a) {
  const string kind = textOr(a, "kind");
  if (kind == "algorithm") {
    string s = fmt::format("{} {} chose {}", textOr(a, "library", "library"), textOr(a, "call"),
                           textOr(a, "algorithm", "?"));
    const auto candidates = objects(array(a, "candidates"));
    if (!candidates.empty()) {
      string list;
      for (const json* c : candidates) {
        if (!list.empty()) list += ", ";
        list += textOr(c, "algorithm", "?");
        if (auto t = number(c, "timeMs")) list += fmt::format(" {:.3f} ms", *t);
      }
      s += fmt::format(" (autotuned among {}: {})", candidates.size(), list);
    }
    return s;
  }
  if (kind == "rng") {
    string s = fmt::format("{} generator", textOr(a, "source", "RNG"));
    if (auto g = text(a, "generator"); g && !g->empty()) s += " " + *g;
    if (const json* seed = get(a, "seed"); seed && seed->is_number()) s += " seed " + seed->dump();
    if (const json* offset = get(a, "offset"); offset && offset->is_number()) s += " offset " + offset->dump();
    return s;
  }
  if (kind == "frameworkOp") return textOr(a, "name", "?");
  if (kind == "note") return textOr(a, "text");
  if (kind == "determinism") {
    const uint64_t runs = count(a, "runs").value_or(0), distinct = count(a, "distinctResults").value_or(0);
    return fmt::format("re-run {} times in process: {}", runs, plural(distinct, "distinct result", "distinct results"));
  }
  return kind;
}

// The same in fewer words, for a table cell (the full text is its tooltip).
string annotationShort(const json& a) {
  const string kind = textOr(a, "kind");
  if (kind == "algorithm") return fmt::format("algo {} {}", textOr(a, "library"), textOr(a, "algorithm", "?"));
  if (kind == "frameworkOp") return textOr(a, "name", "?");
  if (kind == "determinism") {
    return fmt::format("re-run {}x: {} distinct", count(a, "runs").value_or(0), count(a, "distinctResults").value_or(0));
  }
  if (kind == "rng") {
    string s = "rng " + textOr(a, "source");
    if (const json* seed = get(a, "seed"); seed && seed->is_number()) s += " seed " + seed->dump();
    if (const json* offset = get(a, "offset"); offset && offset->is_number()) s += " offset " + offset->dump();
    return s;
  }
  return textOr(a, "text", kind);
}

const char* annotationLabel(const string& kind) {
  if (kind == "algorithm") return "algo";
  if (kind == "rng") return "rng";
  if (kind == "frameworkOp") return "op";
  if (kind == "determinism") return "re-run";
  return "note";
}

// An operation's `origin` (docs/JSON.md), when it has one with an op or a
// source line.
std::optional<trace::Origin> originOf(const json* op) {
  const json* o = object(op, "origin");
  if (!o) return std::nullopt;
  trace::Origin r;
  r.op = textOr(o, "op");
  r.opStack = strings(array(o, "opStack"));
  const string phase = textOr(o, "phase");
  r.phase = phase == "forward" ? trace::Phase::kForward : phase == "backward" ? trace::Phase::kBackward : trace::Phase::kUnknown;
  r.forwardOp = textOr(o, "forwardOp");
  r.module = textOr(o, "module");
  r.file = textOr(o, "file");
  r.line = static_cast<uint32_t>(std::min<uint64_t>(count(o, "line").value_or(0), UINT32_MAX));
  const json* step = get(o, "step");
  r.step = step && step->is_number_integer() ? step->get<int64_t>() : -1;
  r.stepLaunch = count(o, "stepLaunch").value_or(0);
  if (r.op.empty() && r.file.empty()) return std::nullopt;
  return r;
}

string originText(const json& op) {
  const auto o = originOf(&op);
  return o ? trace::describe(*o, textOr(op, "kind") == "launch" ? trace::OriginStep::kLaunch
                                                                : trace::OriginStep::kOperation)
           : "";
}

// The origin's op stack, outermost first, for a tooltip.
string opStackText(const trace::Origin& o) {
  string s;
  for (const string& x : o.opStack) s += (s.empty() ? "" : " > ") + x;
  return s;
}

// ------------------------------------------------------------ page pieces

constexpr const char* kStyle = R"css(
:root{--fg:#1f2328;--muted:#636c76;--line:#d8dee4;--soft:#f6f8fa;--bad:#c62828;--bad-bg:#fdecea;
--ok:#1a7f37;--ok-bg:#e8f5ec;--warn:#9a6700;--warn-bg:#fff8c5;--accent:#0b5cad;--mono:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI","DejaVu Sans",Arial,sans-serif}
main{max-width:1180px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:22px;margin:4px 0 6px;line-height:1.3}
h2{font-size:17px;margin:0 0 10px;padding-bottom:6px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:16px 0 6px}
section{margin:26px 0}
code,.mono{font-family:var(--mono);font-size:13px}
.muted{color:var(--muted)}
.small{font-size:13px}
header.verdict{border-radius:8px;padding:16px 20px;border:1px solid var(--line);border-left:8px solid var(--muted);background:var(--soft)}
header.verdict.v-bad{border-left-color:var(--bad);background:var(--bad-bg)}
header.verdict.v-ok{border-left-color:var(--ok);background:var(--ok-bg)}
header.verdict.v-warn{border-left-color:var(--warn);background:var(--warn-bg)}
header.verdict.v-bad h1{color:#8c1d18}
.kicker{font-size:12px;letter-spacing:.06em;text-transform:uppercase;color:var(--muted)}
nav{margin:12px 0 0;font-size:13px}
nav a{color:var(--accent);text-decoration:none;margin-right:14px}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;vertical-align:top;padding:5px 8px;border-bottom:1px solid var(--line)}
th{font-size:12px;font-weight:600;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
dl.facts{display:grid;grid-template-columns:110px 1fr;gap:4px 14px;margin:0}
dl.facts dt{color:var(--muted);font-size:13px;padding-top:1px}
dl.facts dd{margin:0;overflow-wrap:anywhere}
.cause{display:inline-block;font-weight:600;color:#fff;background:var(--bad);border-radius:4px;padding:1px 8px;font-size:13px}
.summary{font-size:16px;margin:6px 0 10px}
ul.evidence{margin:4px 0 0;padding-left:20px}
.box{border:1px solid var(--line);border-radius:8px;padding:12px 16px;margin:10px 0}
.fix{border-left:5px solid var(--ok);background:var(--ok-bg)}
.warnbox{border-left:5px solid var(--warn);background:var(--warn-bg)}
.chip{display:inline-block;border:1px solid var(--line);border-radius:10px;padding:0 7px;margin:1px 2px 1px 0;font-size:12px;background:#fff;white-space:nowrap}
.chip.algo{border-color:#8fb8e6;background:#eef5fd}
.chip.rng{border-color:#d2a8ff;background:#f6efff}
.chip.op{border-color:#c9d1d9}
.dg{font-family:var(--mono);font-size:12px;padding:0 4px;border-radius:3px;background:var(--soft);margin-right:3px;white-space:nowrap}
.dg.diff{background:var(--bad);color:#fff;font-weight:600}
.dg.same{color:var(--ok)}
table.tl{table-layout:fixed}
table.tl td{padding:4px 8px;font-size:13px}
table.tl col.off{width:54px}
table.tl td.off{font-family:var(--mono);color:var(--muted);text-align:right}
table.tl td.op{overflow:hidden}
table.tl .name{font-family:var(--mono);font-size:13px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
table.tl .meta{color:var(--muted);font-size:12px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
table.tl tr.div td{background:var(--bad-bg);border-top:2px solid var(--bad);border-bottom:2px solid var(--bad)}
table.tl tr.div td.off{color:var(--bad);font-weight:700}
table.tl tr.stretch td{background:var(--warn-bg)}
table.tl tr.elided td{text-align:center;color:var(--muted);font-style:italic}
table.tl tr.after td.op{opacity:.92}
table.tl td.none{color:var(--muted);font-style:italic}
.tag{font-size:11px;font-weight:700;color:#fff;background:var(--bad);border-radius:3px;padding:0 5px;margin-right:6px;vertical-align:1px}
.tag.path{background:var(--warn)}
.tag.also{background:#8250df}
.s{display:inline-block;min-width:22px;text-align:center;border-radius:3px;font-size:11px;font-weight:600;padding:0 4px;margin-right:6px;color:#fff}
.meter{height:10px;background:var(--soft);border:1px solid var(--line);border-radius:5px;overflow:hidden;max-width:420px}
.meter>span{display:block;height:100%;background:var(--bad)}
.cols{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:16px}
.cols .chip,dd .chip{white-space:normal}
.cols .mono{overflow-wrap:anywhere}
table.tl .anns{line-height:1.35}
table.tl .anns .chip{max-width:100%;overflow:hidden;text-overflow:ellipsis;vertical-align:bottom}
.ok{color:var(--ok)}.bad{color:var(--bad)}
pre{font-family:var(--mono);font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere;max-height:360px;overflow:auto;margin:0}
table.lanes{width:auto;border-collapse:separate;border-spacing:3px 4px;margin:4px 0 0}
table.lanes th{font-size:12px;text-transform:none;letter-spacing:0;padding:0 10px 0 0;border:0;white-space:nowrap;color:var(--muted)}
.c{display:inline-block;width:18px;height:16px;padding:0;border-radius:3px;border:0;vertical-align:middle}
table.lanes td.c{display:table-cell;border-bottom:0;font-size:11px;text-align:center;color:var(--muted);line-height:1}
.c.eq{background:#9fd5b0}.c.ne{background:var(--bad)}.c.path{background:#e3b341}.c.unk{background:#c9d1d9}
.c.d{box-shadow:0 0 0 2px #fff,0 0 0 4px var(--fg)}
.legend .c{margin:0 4px 0 12px}.legend .c:first-child{margin-left:0}
footer{margin-top:36px;color:var(--muted);font-size:12px;border-top:1px solid var(--line);padding-top:10px}
)css";

// Stream colours: calm, distinct, readable white text.
const char* streamColor(uint64_t ordinal) {
  static const char* colors[] = {"#57606a", "#0b5cad", "#8250df", "#1a7f37", "#bc4c00",
                                 "#0e7490", "#a0306e", "#6e7781"};
  return colors[ordinal % std::size(colors)];
}

class Page {
 public:
  string html;
  void add(std::string_view s) { html += s; }
  template <typename... Args>
  void addf(fmt::format_string<Args...> f, Args&&... args) {
    html += fmt::format(f, std::forward<Args>(args)...);
  }
};

// ------------------------------------------------------------ header

struct Headline {
  string cls;    // ok, bad, warn
  string title;  // one line
};

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

// ------------------------------------------------------------ cause

string rangeWhere(const json* r) {
  if (!r) return "?";
  const uint64_t alloc = count(r, "allocation").value_or(0), offset = count(r, "offset").value_or(0);
  if (alloc == 0) return fmt::format("{:#x}", count(r, "address").value_or(offset));
  return fmt::format("alloc#{}+{:#x}", alloc, offset);
}

string spansText(const json* spans) {
  if (!spans || !spans->is_array() || spans->empty()) return "";
  string s;
  size_t shown = 0;
  for (const json& sp : *spans) {
    if (!sp.is_array() || sp.size() != 2 || !sp[0].is_number_unsigned() || !sp[1].is_number_unsigned()) continue;
    if (shown == 4) break;
    s += fmt::format("{}{:#x}-{:#x}", shown ? ", " : "", sp[0].get<uint64_t>(), sp[1].get<uint64_t>());
    ++shown;
  }
  if (spans->size() > shown && shown > 0) s += fmt::format(" and {} more", spans->size() - shown);
  return s;
}

void renderRanges(Page& page, const char* what, const json* differing) {
  const auto ranges = objects(differing);
  if (ranges.empty()) return;
  page.addf("<table class=\"small\"><thead><tr><th>{}</th><th>where</th><th>size</th><th>chunks differing</th><th>bytes differing</th><th>float32 values differing</th><th>max |d|</th></tr></thead><tbody>\n", what);
  for (const json* r : ranges) {
    const json* a = object(r, "a");
    const uint64_t size = count(a, "size").value_or(0);
    const uint64_t chunkBytes = count(r, "chunkBytes").value_or(0);
    string chunks = "-";
    if (chunkBytes > 0) {
      chunks = fmt::format("{} of {}", withCommas(count(r, "differingChunks").value_or(0)),
                           withCommas(count(r, "chunks").value_or(0)));
    }
    string bytes = "-", floats = "-", maxd = "-";
    const string spans = spansText(array(r, "differingSpans"));
    if (const json* v = object(r, "values")) {
      bytes = fmt::format("{} of {}", withCommas(count(v, "differingBytes").value_or(0)), withCommas(size));
      floats = fmt::format("{} of {}", withCommas(count(v, "differingFloat32").value_or(0)),
                           withCommas(count(v, "float32Values").value_or(0)));
      if (auto m = number(v, "maxAbsDiff")) maxd = fmt::format("{:.3g}", *m);
    }
    string where = rangeWhere(a);
    const json* b = object(r, "b");
    if (b && rangeWhere(b) != where) where += " / B " + rangeWhere(b);
    page.addf("<tr><td>{} {}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td></tr>\n",
              what, count(r, "index").value_or(0), e(where), humanBytes(size), e(chunks), e(bytes),
              spans.empty() ? "" : "<div class=\"muted\">at " + e(spans) + "</div>", e(floats), e(maxd));
    if (const json* un = object(r, "unwrittenBytes")) {
      page.addf("<tr><td></td><td colspan=\"6\" class=\"muted\">never written before this launch: {} in run A, {} in run B</td></tr>\n",
                humanBytes(count(un, "a").value_or(0)), humanBytes(count(un, "b").value_or(0)));
    }
    page.addf("<tr><td></td><td colspan=\"6\" class=\"muted\">digest A <span class=\"dg\">{}</span> B <span class=\"dg diff\">{}</span></td></tr>\n",
              e(textOr(r, "digestA", "?")), e(textOr(r, "digestB", "?")));
  }
  page.add("</tbody></table>\n");
}

void renderAnnotations(Page& page, const json* annotations, bool withOps) {
  for (const json* a : objects(annotations)) {
    const string kind = textOr(a, "kind");
    if (!withOps && kind == "frameworkOp") continue;
    page.addf("<span class=\"chip {}\" title=\"{}\">{} {}</span>", annotationLabel(kind), e(kind),
              annotationLabel(kind), e(annotationText(*a)));
  }
}

void renderOpFacts(Page& page, const json& op, const char* label) {
  page.addf("<dt>{}</dt><dd>", label);
  if (textOr(op, "kind") == "launch") {
    page.addf("<code>{}</code> <span class=\"muted small\">grid {} block {} &middot; event #{}</span>", e(kernelFull(op)),
              e(dims(get(op, "grid"))), e(dims(get(op, "block"))), count(op, "seq").value_or(0));
  } else {
    page.addf("{} <span class=\"muted small\">event #{}</span>", e(textOr(op, "name", "?")), count(op, "seq").value_or(0));
  }
  if (const json* ann = array(op, "annotations"); ann && !ann->empty()) {
    page.add("<div>");
    renderAnnotations(page, ann, true);
    page.add("</div>");
  }
  page.add("</dd>\n");
}

// Where the divergent operation came from in the program: one row when both
// runs say the same, else one line per run.
void renderOrigins(Page& page, const json* a, const json* b) {
  const string ta = a ? originText(*a) : "", tb = b ? originText(*b) : "";
  if (ta.empty() && tb.empty()) return;
  const auto stack = originOf(a ? a : b);
  const string title = stack ? opStackText(*stack) : "";
  if (ta == tb) {
    page.addf("<dt>op</dt><dd class=\"origin\" title=\"{}\">{}</dd>\n", e(title), e(ta));
    return;
  }
  page.addf("<dt>op</dt><dd class=\"origin\"><div>run A: {}</div><div>run B: {}</div></dd>\n",
            e(ta.empty() ? "(not recorded)" : ta), e(tb.empty() ? "(not recorded)" : tb));
}

void renderStretch(Page& page, const json& stretch) {
  // A reordering: the stretch's operations are at another place of the other run.
  const json* moved = object(stretch, "reordered");
  page.add("<div class=\"cols\">\n");
  for (const char* side : {"a", "b"}) {
    const json* s = object(stretch, side);
    const uint64_t n = count(s, "count").value_or(0);
    const string elsewhere =
        moved && n == 0 ? fmt::format("nothing here: the reordered operations are among its operations #{} to #{}",
                                      count(object(moved, side), "firstIndex").value_or(0),
                                      count(object(moved, side), "endIndex").value_or(1) - 1)
                        : "";
    page.addf("<div class=\"box\"><h3 style=\"margin-top:0\">run {}{}: {}</h3>\n", side[0] == 'a' ? 'A' : 'B',
              moved ? "" : " alone",
              !elsewhere.empty() ? elsewhere : n == 0 ? string("nothing") : plural(n, "operation", "operations"));
    const auto ops = objects(array(s, "ops"));
    for (const json* op : ops) {
      const string from = originText(*op);
      page.addf("<div class=\"mono small\">#{} {}</div><div class=\"small muted\">{}{}</div>", count(op, "seq").value_or(0),
                e(textOr(op, "kind") == "launch" ? kernelShort(*op) : textOr(op, "name", "?")),
                textOr(op, "kind") == "launch" ? "grid " + e(dims(get(op, "grid"))) + " block " + e(dims(get(op, "block"))) : "",
                from.empty() ? "" : "<div class=\"origin\">op " + e(from) + "</div>");
      if (const json* ann = array(op, "annotations"); ann && !ann->empty()) {
        page.add("<div>");
        renderAnnotations(page, ann, true);
        page.add("</div>");
      }
    }
    if (n > ops.size()) page.addf("<div class=\"muted small\">... {} more</div>", withCommas(n - ops.size()));
    page.add("</div>\n");
  }
  page.add("</div>\n");
}

void renderFirst(Page& page, const json& first) {
  const bool path = flag(first, "path").value_or(false);
  const json* a = object(first, "a");
  const json* b = object(first, "b");
  const string cause = textOr(first, "cause");
  page.add("<div class=\"summary\">");
  if (!cause.empty()) page.addf("<span class=\"cause\">{}</span> ", e(causeText(cause)));
  page.addf("{}</div>\n", e(textOr(first, "summary")));
  const string mechanism = textOr(first, "mechanism");
  if (!mechanism.empty() && mechanism != cause) {
    page.addf("<p class=\"small\">At the operation itself: {}.</p>\n", e(causeText(mechanism)));
  }

  page.add("<dl class=\"facts\">\n");
  if (path) {
    const json* op = a ? a : b;
    page.addf("<dt>where</dt><dd>the runs {} at {}</dd>\n",
              cause == "reordered" ? "do the same operations in another order" : "take different paths",
              op ? e(opTitle(*op)) : "?");
  } else if (a) {
    const json* stream = get(a, "stream");
    page.addf("<dt>where</dt><dd>{}{} <span class=\"muted\">(run A event #{}, run B event #{})</span></dd>\n",
              e(opTitle(*a)), stream && stream->is_number() ? " on stream " + stream->dump() : "",
              count(a, "seq").value_or(0), b ? count(b, "seq").value_or(0) : 0);
  }
  if (!path && a) {
    renderOpFacts(page, *a, textOr(a, "kind") == "launch" ? "kernel" : "operation");
    renderOrigins(page, a, b);
  }
  if (!path) {
    const json* inputs = object(first, "inputs");
    if (inputs) {
      const bool identical = flag(inputs, "identical").value_or(true);
      const uint64_t n = count(inputs, "count").value_or(0);
      if (identical) {
        page.addf("<dt>inputs</dt><dd class=\"ok\">{}</dd>\n",
                  n == 0 ? string("none recorded")
                         : fmt::format("identical ({}, {} hashed)", plural(n, "buffer", "buffers"),
                                       humanBytes(count(inputs, "bytes").value_or(0))));
      } else {
        page.addf("<dt>inputs</dt><dd class=\"bad\">{} of {} differ</dd>\n",
                  objects(array(inputs, "differing")).size(), n);
      }
    }
    if (const json* params = object(first, "params")) {
      if (flag(params, "identical").value_or(true)) {
        if (!a || textOr(a, "kind") == "launch") page.add("<dt>params</dt><dd class=\"ok\">identical after pointer normalisation</dd>\n");
      } else {
        page.addf("<dt>params</dt><dd class=\"bad\">{} differ</dd>\n",
                  plural(objects(array(params, "differing")).size(), "parameter", "parameters"));
      }
    }
    if (const json* outputs = object(first, "outputs")) {
      const size_t differing = objects(array(outputs, "differing")).size();
      page.addf("<dt>outputs</dt><dd class=\"{}\">{} of {} differ</dd>\n", differing ? "bad" : "", differing,
                count(outputs, "count").value_or(differing));
    }
  }
  if (const json* checks = object(first, "determinismCheck")) {
    for (const char* side : {"a", "b"}) {
      const json* c = object(checks, side);
      if (!c) continue;
      const uint64_t runs = count(c, "runs").value_or(0), distinct = count(c, "distinctResults").value_or(0);
      page.addf("<dt>re-runs</dt><dd>run {}: the recorder re-ran it {} times: {} &rarr; <b>{}</b></dd>\n",
                side[0] == 'a' ? 'A' : 'B', runs, plural(distinct, "distinct result", "distinct results"),
                distinct > 1 ? "intrinsic" : "deterministic on these inputs");
    }
  }
  page.add("</dl>\n");

  if (const json* stretch = object(first, "stretch"); stretch && path) renderStretch(page, *stretch);

  const auto evidence = strings(array(first, "evidence"));
  if (!evidence.empty()) {
    page.add("<h3>Evidence</h3><ul class=\"evidence\">\n");
    for (const string& line : evidence) page.addf("<li>{}</li>\n", e(line));
    page.add("</ul>\n");
  }
  if (const json* inputs = object(first, "inputs"); inputs && !objects(array(inputs, "differing")).empty()) {
    page.add("<h3>Inputs that differ</h3>\n");
    renderRanges(page, "input", array(inputs, "differing"));
  }
  if (const json* params = object(first, "params"); params && !objects(array(params, "differing")).empty()) {
    page.add("<h3>Parameters that differ</h3>\n<table class=\"small\"><thead><tr><th>parameter</th><th>bytes</th><th>meaning</th><th>run A</th><th>run B</th></tr></thead><tbody>\n");
    for (const json* p : objects(array(params, "differing"))) {
      const json* idx = get(p, "param");
      const string name = idx && idx->is_number_integer() && idx->get<int64_t>() >= 0 ? "param " + idx->dump() : "raw bytes";
      const uint64_t offset = count(p, "offset").value_or(0), size = count(p, "size").value_or(0);
      page.addf("<tr><td>{}</td><td><code>{:#x}-{:#x}</code></td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td></tr>\n",
                e(name), offset, offset + size, e(textOr(p, "meaning")), e(textOr(p, "a")), e(textOr(p, "b")));
    }
    page.add("</tbody></table>\n");
  }
  if (const json* outputs = object(first, "outputs"); outputs && !objects(array(outputs, "differing")).empty()) {
    page.add("<h3>Outputs that differ</h3>\n");
    renderRanges(page, "output", array(outputs, "differing"));
  }
  // Algorithm and RNG annotations: what a cause like algorithm choice or
  // RNG state rests on, shown side by side.
  bool any = false;
  for (const json* op : {a, b}) {
    for (const json* ann : objects(array(op, "annotations"))) {
      const string kind = textOr(ann, "kind");
      any = any || kind == "algorithm" || kind == "rng";
    }
  }
  if (any && !path) {
    page.add("<h3>Algorithm and RNG annotations</h3><dl class=\"facts\">\n");
    for (const json* op : {a, b}) {
      if (!op) continue;
      page.addf("<dt>run {}</dt><dd>", op == a ? 'A' : 'B');
      for (const json* ann : objects(array(op, "annotations"))) {
        const string kind = textOr(ann, "kind");
        if (kind == "algorithm" || kind == "rng") {
          page.addf("<div><span class=\"chip {}\">{}</span> {}</div>", annotationLabel(kind), annotationLabel(kind),
                    e(annotationText(*ann)));
        }
      }
      page.add("</dd>\n");
    }
    page.add("</dl>\n");
  }
}

void renderKnown(Page& page, const json& first) {
  const auto known = objects(array(first, "known"));
  page.add("<h3>Known culprit and fix</h3>\n");
  if (known.empty()) {
    page.add("<p class=\"muted small\">No entry of the known-culprits table matches this divergence.</p>\n");
    return;
  }
  for (const json* k : known) {
    page.add("<div class=\"box fix\">\n");
    page.addf("<div><b>{}</b>", e(textOr(k, "op", textOr(k, "id", "?"))));
    if (auto by = text(k, "matchedBy")) {
      const string where = textOr(k, "matched");
      page.addf(" <span class=\"muted small\">(matched by {}{})</span>", e(*by), where.empty() ? "" : ": " + e(where));
    }
    page.add("</div>\n");
    if (auto why = text(k, "why")) page.addf("<p class=\"small\" style=\"margin:6px 0\">{}</p>\n", e(*why));
    if (auto arg = text(k, "argument"); arg && !arg->empty()) {
      page.addf("<div><b>Applies when</b> {}: the recording does not show arguments</div>\n", e(*arg));
    }
    if (auto fix = text(k, "fix")) page.addf("<div><b>Fix:</b> {}</div>\n", e(*fix));
    if (auto src = text(k, "source"); src && !src->empty()) {
      page.addf("<div class=\"muted small\">source: {}</div>\n", e(citation(*src)));
    }
    page.add("</div>\n");
  }
}

void renderCause(Page& page, const json& report) {
  const json* diff = object(report, "diff");
  if (!diff) return;
  const auto processes = objects(array(diff, "processes"));
  const bool several = processes.size() > 1;
  bool opened = false;
  auto open = [&] {
    if (!opened) page.add("<section id=\"cause\"><h2>First divergence and cause</h2>\n");
    opened = true;
  };
  for (const string& side : {string("onlyInA"), string("onlyInB")}) {
    for (const string& name : strings(array(diff, side.c_str()))) {
      open();
      page.addf("<div class=\"box warnbox\">process <code>{}</code> was recorded in run {} only</div>\n", e(name),
                side == "onlyInA" ? 'A' : 'B');
    }
  }
  for (const json* p : processes) {
    const json* first = object(p, "firstDivergence");
    const string name = textOr(p, "name");
    const auto warnings = strings(array(p, "warnings"));
    if (!first && !several && warnings.empty()) continue;
    open();
    if (several) page.addf("<h3>process <code>{}</code></h3>\n", e(name.empty() ? "?" : name));
    for (const string& w : warnings) page.addf("<div class=\"box warnbox small\">warning: {}</div>\n", e(w));
    if (!first) {
      if (flag(p, "identical").value_or(false)) {
        const json* ops = object(p, "operations");
        page.addf("<p class=\"ok\">identical: {} operations match, with equal parameters and outputs</p>\n",
                  withCommas(count(ops, "matched").value_or(0)));
      }
      continue;
    }
    renderFirst(page, *first);
    renderKnown(page, *first);
  }
  if (opened) page.add("</section>\n");
}

// ------------------------------------------------------------ replay

// The outputs that differ between two states of a replay (docs: replayer/README.md).
void renderReplayComparison(Page& page, const json* c, const string& title) {
  if (!c || flag(c, "matches").value_or(true)) return;
  page.addf("<h3>{}</h3>\n<table class=\"small\"><thead><tr><th>output</th><th>size</th><th>chunks differing</th>"
            "<th>elements differing</th><th>max |d|</th><th>max ulp</th></tr></thead><tbody>\n", e(title));
  for (const json* r : objects(array(c, "ranges"))) {
    if (flag(r, "equal").value_or(false)) continue;
    const json* range = object(r, "range");
    const json* el = object(r, "elements");
    string elements = "-", maxd = "-", ulp = "-";
    if (el) {
      elements = fmt::format("{} of {} {}{}", withCommas(count(el, "differing").value_or(0)),
                             withCommas(count(el, "elements").value_or(0)), textOr(el, "type", "?"),
                             flag(el, "assumed").value_or(false) ? " (assumed)" : "");
      if (auto m = number(el, "maxAbsDiff")) maxd = fmt::format("{:.3g}", *m);
      if (auto u = number(el, "maxUlp")) ulp = fmt::format("{:.0f}", *u);
    }
    const string chunks = count(r, "chunks") ? fmt::format("{} of {}", withCommas(count(r, "differingChunks").value_or(0)),
                                                           withCommas(*count(r, "chunks")))
                                             : "-";
    page.addf("<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", e(rangeWhere(range)),
              humanBytes(count(range, "size").value_or(0)), e(chunks), e(elements), e(maxd), e(ulp));
  }
  page.add("</tbody></table>\n");
}

void renderReplay(Page& page, const json& report, bool bisect) {
  const json* replay = object(report, "replay");
  const auto error = text(report, "replayError");
  const json* confirmation = object(report, "confirmation");
  const auto reproduced = flag(report, "reproduced");
  if (!hasReplaySection(report, bisect)) return;
  page.add("<section id=\"replay\"><h2>Replay</h2>\n");
  if (confirmation || reproduced) {
    page.add("<dl class=\"facts\">");
    string run = "the run with snapshots";
    if (auto k = count(report, "snapshotLaunch")) run += fmt::format(" (of launch #{})", *k);
    string what;
    if (reproduced) {
      what = *reproduced ? run + " diverges at the same operation: reproduced"
                         : run + " does not diverge at the same operation: not reproduced";
    } else {
      what = run + " was compared with run 1";
    }
    page.addf("<dt>confirmation</dt><dd><span class=\"{}\">{}</span>", reproduced && !*reproduced ? "bad" : "", e(what));
    for (const char* key : {"confirmation", "confirmationOther"}) {
      const json* c = object(report, key);
      if (!c) continue;
      const char* against = key == string("confirmation") ? "against run 1" : "against the other run of the pair";
      if (const json* p = firstDifferingProcess(c)) {
        const json* f = object(p, "firstDivergence");
        page.addf("<div class=\"small muted\">{}: first divergence at {}: {}</div>", against, e(divergenceWhere(*f)),
                  e(textOr(f, "summary")));
      } else if (flag(c, "identical").value_or(false)) {
        page.addf("<div class=\"small muted\">{}: identical</div>", against);
      }
    }
    page.add("</dd></dl>\n");
  }
  if (replay) {
    const string replayVerdict = textOr(replay, "verdict");
    const uint64_t runs = count(replay, "runs").value_or(0), distinct = count(replay, "distinctResults").value_or(0);
    const char* cls = replayVerdict == "equal" || replayVerdict == "unrecorded" ? "ok" : "bad";
    page.add("<dl class=\"facts\">\n");
    page.addf("<dt>verdict</dt><dd class=\"{}\"><b>{}</b>{}</dd>\n", cls, e(replayVerdict.empty() ? "?" : replayVerdict),
              replayVerdict == "nondeterministic" ? " &rarr; the kernel is intrinsically nondeterministic on these inputs" : "");
    if (auto seq = count(replay, "seq")) {
      const auto trace = text(replay, "trace");
      page.addf("<dt>launch</dt><dd>event #{} <code>{}</code>{}</dd>\n", *seq,
                e(shortKernelName(textOr(replay, "function", "?"), 100)),
                trace ? " <span class=\"muted\">of</span> <code>" + e(*trace) + "</code>" : "");
    }
    page.addf("<dt>results</dt><dd>{} in {} re-executions from the recorded inputs</dd>\n",
              plural(distinct, "distinct result", "distinct results"), withCommas(runs));
    if (auto s = text(replay, "summary"); s && !count(replay, "runsMatchingRecording")) {
      page.addf("<dt>summary</dt><dd>{}</dd>\n", e(*s));
    }
    if (const json* per = array(replay, "runsPerResult"); per && !per->empty()) {
      std::vector<uint64_t> counts;
      for (const json& c : *per) {
        if (c.is_number_unsigned()) counts.push_back(c.get<uint64_t>());
      }
      std::sort(counts.rbegin(), counts.rend());
      string list;
      for (size_t i = 0; i < counts.size() && i < 12; ++i) list += (i ? ", " : "") + std::to_string(counts[i]);
      if (counts.size() > 12) list += ", ...";
      page.addf("<dt>runs per result</dt><dd>{}</dd>\n", e(list));
    }
    if (auto m = count(replay, "runsMatchingRecording")) {
      page.addf("<dt>vs recording</dt><dd>{} of {} equal to the recorded outputs</dd>\n", withCommas(*m), withCommas(runs));
    } else if (const json* vs = object(replay, "vsRecording")) {
      page.addf("<dt>vs recording</dt><dd>{}</dd>\n", flag(vs, "matches").value_or(false) ? "equal" : "different");
    }
    if (const json* gpu = object(replay, "gpu")) page.addf("<dt>GPU</dt><dd>{}</dd>\n", e(textOr(gpu, "name", "?")));
    page.add("</dl>\n");
    renderReplayComparison(page, object(replay, "acrossRuns"),
                           fmt::format("Run 1 against run {}, the first that differed", count(replay, "acrossRunsOther").value_or(0) + 1));
    renderReplayComparison(page, object(replay, "vsRecording"), "Run 1 against the recording");
    page.add("<dl class=\"facts\">\n");
    for (const string& w : strings(array(replay, "warnings"))) page.addf("<dt>warning</dt><dd>{}</dd>\n", e(w));
    page.add("</dl>\n");
  } else if (error) {
    page.addf("<div class=\"box warnbox\">Replay did not run: {}</div>\n", e(*error));
  } else if (bisect) {
    page.add("<p class=\"muted\">Replay was not attempted.</p>\n");
  }
  page.add("</section>\n");
}

// ------------------------------------------------------------ timeline

string digestChips(const json* ranges, const char* label) {
  const auto list = objects(ranges);
  if (list.empty()) return "";
  string s = fmt::format("<span class=\"muted\">{}</span> ", label);
  for (const json* r : list) {
    const string digest = textOr(r, "digest", "?");
    const auto same = flag(r, "same");
    const char* cls = !same ? "" : *same ? " same" : " diff";
    s += fmt::format("<span class=\"dg{}\" title=\"{} {} {}\">{}</span>", cls, e(rangeWhere(r)),
                     e(humanBytes(count(r, "size").value_or(0))), e(digest), e(digest.substr(0, 8)));
  }
  return s;
}

// Names of the streams in the timeline: "s2" where the diff numbers the
// stream; otherwise "x1", "x2"..., one name for the two runs' streams of the
// same matched operations, so that lanes line up across runs.
class StreamNames {
 public:
  explicit StreamNames(const std::vector<const json*>& rows) {
    for (const json* row : rows) {
      const json* a = object(row, "a");
      const json* b = object(row, "b");
      if (a && b && flag(row, "sameOperation").value_or(false) && !count(a, "streamOrdinal") &&
          !count(b, "streamOrdinal")) {
        const auto ha = handle(*a), hb = handle(*b);
        auto ia = names_.find({'a', ha}), ib = names_.find({'b', hb});
        if (ia != names_.end() && ib == names_.end()) names_[{'b', hb}] = ia->second;
        if (ib != names_.end() && ia == names_.end()) names_[{'a', ha}] = ib->second;
        if (ia == names_.end() && ib == names_.end()) names_[{'a', ha}] = names_[{'b', hb}] = next();
      }
    }
    for (const json* row : rows) {
      for (const char* side : {"a", "b"}) {
        const json* op = object(row, side);
        if (op && !count(op, "streamOrdinal") && !names_.count({side[0], handle(*op)})) {
          names_[{side[0], handle(*op)}] = next();
        }
      }
    }
  }

  string name(const json& op, char side) const {
    if (auto ord = count(op, "streamOrdinal")) return fmt::format("s{}", *ord);
    auto it = names_.find({side, handle(op)});
    return it == names_.end() ? "?" : it->second;
  }

  string chip(const json& op, char side) const {
    const string n = name(op, side);
    const auto ord = count(op, "streamOrdinal");
    const string title = ord ? fmt::format("stream {} (handle {:#x})", *ord, handle(op))
                             : fmt::format("a stream the diff does not number (handle {:#x})", handle(op));
    uint64_t colour = ord ? *ord : 0;
    if (!ord) {
      for (char c : n) colour = colour * 31 + static_cast<unsigned char>(c);
    }
    return fmt::format("<span class=\"s\" style=\"background:{}\" title=\"{}\">{}</span>", streamColor(colour),
                       e(title), e(n));
  }

 private:
  static uint64_t handle(const json& op) { return count(op, "stream").value_or(0); }
  string next() { return fmt::format("x{}", ++unnumbered_); }
  std::map<std::pair<char, uint64_t>, string> names_;
  int unnumbered_ = 0;
};

// The timeline at a glance: one lane per run and stream, one cell per row,
// coloured by whether the operation's outputs equal the other run's.
void renderLanes(Page& page, const std::vector<const json*>& rows, const StreamNames& streams) {
  struct Lane {
    char side;
    string stream;
  };
  std::vector<Lane> lanes;
  for (const char* side : {"a", "b"}) {
    for (const json* row : rows) {
      const json* op = object(row, side);
      if (!op) continue;
      const string label = streams.name(*op, side[0]);
      if (std::none_of(lanes.begin(), lanes.end(), [&](const Lane& l) { return l.side == side[0] && l.stream == label; })) {
        lanes.push_back({side[0], label});
      }
    }
  }
  if (lanes.empty()) return;
  page.add("<table class=\"lanes\" aria-label=\"lanes\"><tbody>\n");
  for (const Lane& lane : lanes) {
    page.addf("<tr><th>run {} &middot; {}</th>", lane.side == 'a' ? 'A' : 'B', e(lane.stream));
    const char side[2] = {lane.side, 0};
    for (const json* row : rows) {
      const bool divergent = flag(row, "divergent").value_or(false);
      const string edge = divergent ? " d" : "";
      if (object(row, "elided")) {
        page.addf("<td class=\"c gap{}\" title=\"more of the stretch\">&hellip;</td>", edge);
        continue;
      }
      const json* op = object(row, side);
      if (!op || streams.name(*op, lane.side) != lane.stream) {
        page.addf("<td class=\"c{}\"></td>", edge);
        continue;
      }
      const auto equal = flag(row, "outputsEqual");
      const char* cls = equal ? (*equal ? "eq" : "ne") : flag(row, "stretch").value_or(false) ? "path" : "unk";
      const string from = originText(*op);
      page.addf("<td class=\"c {}{}\" title=\"#{} {}{}\"></td>", cls, edge, count(op, "seq").value_or(0),
                e(textOr(*op, "kind") == "launch" ? kernelShort(*op) : textOr(*op, "name", "?")),
                from.empty() ? "" : e("\n" + from));
    }
    page.add("</tr>\n");
  }
  page.add("</tbody></table>\n<p class=\"small muted legend\"><span class=\"c eq\"></span> outputs equal in both runs "
           "<span class=\"c ne\"></span> outputs differ <span class=\"c path\"></span> one run's path only "
           "<span class=\"c d\"></span> the first divergence</p>\n");
}

// How a row relates to the divergences the diff found.
enum class Mark { kNone, kFirst, kIndependent };

string timelineCell(const json* op, char side, Mark mark, bool stretchRow, const StreamNames& streams) {
  if (!op) return stretchRow ? "<td class=\"op none\">&mdash; (not in this run)</td>" : "<td class=\"op none\"></td>";
  string s = "<td class=\"op\">";
  s += "<div class=\"name\" title=\"" + e(kernelFull(*op)) + "\">";
  if (mark == Mark::kFirst) s += stretchRow ? "<span class=\"tag path\">PATH</span>" : "<span class=\"tag\">DIVERGES</span>";
  if (mark == Mark::kIndependent) {
    s += "<span class=\"tag also\" title=\"an independent divergence: its outputs differ but it reads no data derived "
         "from the first\">ALSO</span>";
  }
  s += streams.chip(*op, side);
  s += fmt::format("<span class=\"muted\">#{}</span> ", count(op, "seq").value_or(0));
  s += e(textOr(*op, "kind") == "launch" ? kernelShort(*op) : textOr(*op, "name", "?")) + "</div>";
  string meta;
  if (textOr(*op, "kind") == "launch") {
    if (auto li = count(op, "launchIndex")) meta += fmt::format("launch #{} &middot; ", *li);
    meta += "grid " + e(dims(get(op, "grid"))) + " block " + e(dims(get(op, "block")));
  }
  if (flag(op, "hashed") == false) meta += " &middot; not hashed";
  if (!meta.empty()) s += "<div class=\"meta\">" + meta + "</div>";
  // Where it came from: the op, its module and line, the step; the whole
  // origin and the op stack as the tooltip.
  if (const auto o = originOf(op)) {
    string where;
    if (o->phase == trace::Phase::kBackward) where += o->forwardOp.empty() ? " backward" : " backward of " + e(o->forwardOp);
    if (!o->module.empty()) where += " &middot; " + e(o->module);
    if (!o->file.empty()) {
      const size_t slash = o->file.rfind('/');
      where += " &middot; " + e(fmt::format("{}:{}", slash == string::npos ? o->file : o->file.substr(slash + 1), o->line));
    }
    if (o->step >= 0) where += fmt::format(" &middot; step {}", o->step);
    const string title = originText(*op) +
                         (o->opStack.empty() ? "" : "\n" + opStackText(*o));
    s += fmt::format("<div class=\"meta origin\" title=\"{}\"><span class=\"chip op\">{}</span>{}</div>", e(title),
                     e(o->op.empty() ? "(no op)" : o->op), where);
  }
  if (const auto anns = objects(array(op, "annotations")); !anns.empty()) {
    s += "<div class=\"anns\">";
    for (const json* a : anns) {
      const string kind = textOr(a, "kind");
      s += fmt::format("<span class=\"chip {}\" title=\"{}\">{}</span> ", annotationLabel(kind), e(annotationText(*a)),
                       e(annotationShort(*a)));
    }
    s += "</div>";
  }
  const string in = digestChips(array(op, "inputs"), "in"), out = digestChips(array(op, "outputs"), "out");
  if (!in.empty() || !out.empty()) s += "<div class=\"meta\">" + in + (in.empty() || out.empty() ? "" : " &nbsp; ") + out + "</div>";
  s += "</td>";
  return s;
}

// A trace path as a column heading: its last two components (the run and
// the process), the whole path as the tooltip.
string traceLabel(const json* side) {
  const string path = textOr(side, "trace");
  if (path.empty()) return "";
  size_t cut = path.find_last_of('/');
  if (cut != string::npos && cut > 0) cut = path.find_last_of('/', cut - 1);
  const string tail = cut == string::npos ? path : "..." + path.substr(cut);
  return fmt::format("<span class=\"muted\" style=\"text-transform:none\" title=\"{}\">{}</span>", e(path), e(tail));
}

void renderTimeline(Page& page, const json& report) {
  const json* t = object(report, "timeline");
  if (!t) return;
  const auto rows = objects(array(t, "rows"));
  const string processName = textOr(t, "process");
  page.addf("<section id=\"timeline\"><h2>Timeline around the first divergence{}</h2>\n",
            processName.empty() ? "" : " in process <code>" + e(processName) + "</code>");
  if (rows.empty()) {
    page.add("<p class=\"muted\">No divergence: nothing to show.</p></section>\n");
    return;
  }
  const json* ta = object(t, "a");
  const json* tb = object(t, "b");
  page.addf("<p class=\"small muted\">Operations in host order, run A on the left and run B on the right, paired by position "
            "relative to the divergence{}. Digests are the first 8 hex digits; <span class=\"dg diff\">red</span> differs from "
            "the other run, <span class=\"dg same\">green</span> is equal. Hover a name for the full kernel.</p>\n",
            flag(t, "path").value_or(false) ? " (a stretch taken by one run alone is shaded)" : "");
  const StreamNames streams(rows);
  renderLanes(page, rows, streams);
  page.add("<table class=\"tl\"><colgroup><col class=\"off\"><col><col></colgroup>\n");
  page.addf("<thead><tr><th>&Delta;</th><th>run A {}</th><th>run B {}</th></tr></thead><tbody>\n", traceLabel(ta),
            traceLabel(tb));
  // The diff's independent divergences, by event number on each side.
  std::vector<uint64_t> independentA, independentB;
  const string& process = processName;
  for (const json* p : objects(array(object(report, "diff"), "processes"))) {
    if (textOr(p, "name") != process) continue;
    for (const json* i : objects(array(object(p, "blastRadius"), "independent"))) {
      if (auto seq = count(object(i, "a"), "seq")) independentA.push_back(*seq);
      if (auto seq = count(object(i, "b"), "seq")) independentB.push_back(*seq);
    }
  }
  auto markOf = [&](const json* row, const char* side) {
    if (flag(row, "divergent").value_or(false)) return Mark::kFirst;
    const auto seq = count(object(row, side), "seq");
    const auto& list = side[0] == 'a' ? independentA : independentB;
    return seq && std::find(list.begin(), list.end(), *seq) != list.end() ? Mark::kIndependent : Mark::kNone;
  };
  for (const json* row : rows) {
    const bool divergent = flag(row, "divergent").value_or(false);
    const bool stretch = flag(row, "stretch").value_or(false);
    const auto offset = number(row, "offset");
    const string off = offset ? fmt::format("{:+.0f}", *offset) : "";
    if (const json* elided = object(row, "elided")) {
      page.addf("<tr class=\"elided stretch\"><td class=\"off\"></td><td>... {} more in run A</td><td>... {} more in run B</td></tr>\n",
                withCommas(count(elided, "a").value_or(0)), withCommas(count(elided, "b").value_or(0)));
      continue;
    }
    string cls = divergent ? "div" : stretch ? "stretch" : (offset && *offset > 0 ? "after" : "");
    if (divergent && stretch) cls += " stretch";
    page.addf("<tr class=\"{}\"{}><td class=\"off\">{}</td>{}{}</tr>\n", cls, divergent ? " id=\"divergent-row\"" : "",
              divergent ? "0" : off, timelineCell(object(row, "a"), 'a', markOf(row, "a"), stretch, streams),
              timelineCell(object(row, "b"), 'b', markOf(row, "b"), stretch, streams));
  }
  page.add("</tbody></table>\n</section>\n");
}

// ------------------------------------------------------------ blast radius

void renderBlast(Page& page, const json& report) {
  const json* diff = object(report, "diff");
  const json* p = firstDifferingProcess(diff);
  if (!p) return;
  const json* b = object(p, "blastRadius");
  const string name = textOr(p, "name");
  page.addf("<section id=\"blast\"><h2>Blast radius{}</h2>\n", name.empty() ? "" : " in process <code>" + e(name) + "</code>");
  if (!b) {
    page.add("<p class=\"muted\">Not reported.</p></section>\n");
    return;
  }
  const uint64_t later = count(b, "laterOperations").value_or(0), tainted = count(b, "taintedOperations").value_or(0);
  const uint64_t laterL = count(b, "laterLaunches").value_or(0), taintedL = count(b, "taintedLaunches").value_or(0);
  if (later == 0) {
    page.add("<p>No later operations.</p>\n");
  } else {
    page.addf("<p><b>{} of {}</b> later operations{} read data derived from the divergent output.</p>\n",
              withCommas(tainted), withCommas(later),
              laterL ? fmt::format(" ({} of {} launches)", withCommas(taintedL), withCommas(laterL)) : string());
    page.addf("<div class=\"meter\" title=\"{} of {}\"><span style=\"width:{:.1f}%\"></span></div>\n", tainted, later,
              100.0 * static_cast<double>(std::min(tainted, later)) / static_cast<double>(later));
  }
  const uint64_t divergent = count(b, "laterDivergentOperations").value_or(0);
  const uint64_t independent = count(b, "independentCount").value_or(0);
  if (independent == 0) {
    page.addf("<p>{}</p>\n", divergent == 0 ? "No later divergence."
                             : divergent == 1 ? "No independent divergence: the one later divergent operation reads data derived from it."
                                              : fmt::format("No independent divergence: all {} later divergent operations read data derived from it.",
                                                            withCommas(divergent)));
  } else {
    page.addf("<p class=\"bad\"><b>{}</b> not explained by the first:</p>\n<ul class=\"evidence\">\n",
              plural(independent, "independent divergence", "independent divergences"));
    for (const json* i : objects(array(b, "independent"))) {
      const json* ia = object(i, "a");
      const json* ib = object(i, "b");
      const json* op = ia ? ia : ib;
      page.addf("<li><b>{}</b> <code>{}</code> <span class=\"muted\">(run A #{}, run B #{})</span>: {}</li>\n",
                op ? e(opTitle(*op)) : "?", op ? e(kernelShort(*op)) : "", ia ? count(ia, "seq").value_or(0) : 0,
                ib ? count(ib, "seq").value_or(0) : 0, e(textOr(i, "reason")));
    }
    if (independent > objects(array(b, "independent")).size()) {
      page.addf("<li class=\"muted\">... {} more</li>\n", independent - objects(array(b, "independent")).size());
    }
    page.add("</ul>\n");
  }
  if (const json* paths = object(p, "pathDivergences")) {
    const uint64_t n = count(paths, "count").value_or(0);
    const bool firstIsPath = flag(object(p, "firstDivergence"), "path").value_or(false);
    if (n > (firstIsPath ? 1u : 0u)) page.addf("<p>{} in all.</p>\n", plural(n, "path divergence", "path divergences"));
  }
  page.add("</section>\n");
}

// ------------------------------------------------------------ environment

void renderEnvironment(Page& page, const json& report) {
  const json* diff = object(report, "diff");
  const json* compared = object(report, "compared");
  if (!diff && compared) {
    const auto env = objects(array(compared, "environmentDifferences"));
    page.add("<section id=\"environment\"><h2>Environment</h2>\n");
    if (env.empty()) {
      page.add("<p class=\"ok\">No difference in the recorded environment.</p>\n</section>\n");
      return;
    }
    page.add("<p class=\"small\">These differ between the runs, without changing their results:</p>\n"
             "<table><thead><tr><th>field</th><th>run 1</th><th>other run</th></tr></thead><tbody>\n");
    for (const json* d : env) {
      string field = textOr(d, "field", "?");
      if (!textOr(d, "process").empty()) field = textOr(d, "process") + ": " + field;
      const string other = count(d, "run") ? fmt::format("run {}: ", *count(d, "run")) : "";
      page.addf("<tr><td><code>{}</code></td><td><code>{}</code></td><td>{}<code>{}</code></td></tr>\n", e(field),
                e(textOr(d, "a", "(unset)")), e(other), e(textOr(d, "b", "(unset)")));
    }
    page.add("</tbody></table>\n</section>\n");
    return;
  }
  if (!diff) return;
  page.add("<section id=\"environment\"><h2>Environment</h2>\n");
  bool any = false;
  for (const json* p : objects(array(diff, "processes"))) {
    const auto env = objects(array(p, "environment"));
    if (env.empty()) continue;
    if (!any) page.add("<table><thead><tr><th>field</th><th>run A</th><th>run B</th><th></th></tr></thead><tbody>\n");
    any = true;
    for (const json* d : env) {
      const bool affects = flag(d, "affectsResults").value_or(true);
      string field = textOr(d, "field", "?");
      if (!textOr(p, "name").empty()) field = textOr(p, "name") + ": " + field;
      auto value = [&](const char* side) {
        const auto v = text(d, side);
        return v ? "<code>" + e(*v) + "</code>" : string("<span class=\"muted\">(unset)</span>");
      };
      page.addf("<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td class=\"{} small\">{}</td></tr>\n", e(field),
                value("a"), value("b"), affects ? "bad" : "muted", affects ? "can change results" : "context");
    }
  }
  if (any) {
    page.add("</tbody></table>\n");
  } else {
    page.add("<p class=\"ok\">No difference in the recorded environment: same GPU model, driver, libraries and "
             "determinism-relevant variables.</p>\n");
  }
  page.add("</section>\n");
}

}  // namespace

std::string escapeHtml(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string renderHtml(const nlohmann::json& report) {
  static const json empty = json::object();
  const json& r = report.is_object() ? report : empty;
  const bool bisect = r.contains("verdict") || r.contains("runs") || r.contains("command");
  Page page;
  const Headline h = headline(r);
  page.add("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
  page.add("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
  page.addf("<title>gpurr: {}</title>\n", e(h.title));
  page.addf("<style>{}</style>\n</head>\n<body>\n<main>\n", kStyle);
  renderHeader(page, r, bisect);
  renderRuns(page, r);
  renderCause(page, r);
  renderReplay(page, r, bisect);
  renderTimeline(page, r);
  renderBlast(page, r);
  renderEnvironment(page, r);
  page.add("<footer>Made by gpurr. Event numbers (#) are as <code>gpurr dump --range N</code> shows them; launch numbers count "
           "launches from 0 in each run.</footer>\n");
  page.add("</main>\n</body>\n</html>\n");
  return page.html;
}

}  // namespace gpurr::report
