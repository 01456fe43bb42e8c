// The page-building helpers every section of the HTML page uses: safe access
// to the report's keys, the words for operations, annotations and origins,
// and escaping.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "report/html_page.h"
#include "diff/decode.h"
#include "report/event_json.h"
#include "report/terminal.h"
#include "report/timeline.h"
#include "trace_format/events.h"

namespace gpurr::report::html {

// ------------------------------------------------------------ safe access

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

std::string textOr(const json* j, const char* key, std::string fallback) {
  return text(j, key).value_or(std::move(fallback));
}
std::string textOr(const json& j, const char* key, std::string fallback) {
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

// ------------------------------------------------------------ words

string e(std::string_view s) {
  // Text from traces and logs may hold bytes that are not UTF-8, control
  // characters and bidirectional overrides (which would reverse the
  // headline): shown escaped, as the text report shows them.
  return escapeHtml(terminalText(s));
}

string plural(uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", withCommas(n), n == 1 ? one : many);
}

string joined(const std::vector<string>& words) {
  string s;
  for (const string& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
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

// "docs.pytorch.org/docs/...": a source is cited as text, never linked, so
// that the page holds no address a viewer could fetch.
string citation(string source) {
  for (const char* scheme : {"https://", "http://"}) {
    if (source.rfind(scheme, 0) == 0) source.erase(0, std::char_traits<char>::length(scheme));
  }
  return source;
}

// ------------------------------------------------------------ an operation of the diff

string kernelShort(const diff::OpInfo& op) { return shortKernelName(op.name); }

string kernelFull(const diff::OpInfo& op) { return demangled(op.name); }

std::optional<trace::Origin> originOf(const diff::OpInfo& op) {
  if (!op.origin || (op.origin->op.empty() && op.origin->file.empty())) return std::nullopt;
  return op.origin;
}

string originText(const diff::OpInfo& op) {
  const auto o = originOf(op);
  return o ? trace::describe(*o, op.kind == diff::OpKind::kLaunch ? trace::OriginStep::kLaunch
                                                                  : trace::OriginStep::kOperation)
           : "";
}

json annotationsJson(const diff::OpInfo& op) {
  json out = json::array();
  for (const trace::Annotation& a : op.annotations) out.push_back(json(toJson(a)));
  return out;
}

// "alloc#3+0x40"; a range outside known allocations (a host tensor) by its address.
string rangeWhere(const trace::DeviceRange& r) { return diff::rangeText(r); }

// ------------------------------------------------------------ an operation of the timeline

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

string rangeWhere(const json* r) {
  if (!r) return "?";
  const uint64_t alloc = count(r, "allocation").value_or(0), offset = count(r, "offset").value_or(0);
  if (alloc == 0) return fmt::format("{:#x}", count(r, "address").value_or(offset));
  return fmt::format("alloc#{}+{:#x}", alloc, offset);
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

// Stream colours: calm, distinct, readable white text.
const char* streamColor(uint64_t ordinal) {
  static const char* colors[] = {"#57606a", "#0b5cad", "#8250df", "#1a7f37", "#bc4c00",
                                 "#0e7490", "#a0306e", "#6e7781"};
  return colors[ordinal % std::size(colors)];
}



}  // namespace gpurr::report::html

namespace gpurr::report {

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

}  // namespace gpurr::report
