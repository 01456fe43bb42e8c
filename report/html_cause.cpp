// The HTML page's first-divergence section: for each process, the divergent
// operation, its cause and evidence, the inputs, parameters and outputs that
// differ, and the stretch each run took alone on a path divergence.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "report/html_page.h"
#include "report/timeline.h"

namespace gpurr::report::html {

// ------------------------------------------------------------ cause

string rangeWhere(const json* r) {
  if (!r) return "?";
  const uint64_t alloc = count(r, "allocation").value_or(0), offset = count(r, "offset").value_or(0);
  if (alloc == 0) return fmt::format("{:#x}", count(r, "address").value_or(offset));
  return fmt::format("alloc#{}+{:#x}", alloc, offset);
}

namespace {

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

}  // namespace

void renderAnnotations(Page& page, const json* annotations, bool withOps) {
  for (const json* a : objects(annotations)) {
    const string kind = textOr(a, "kind");
    if (!withOps && kind == "frameworkOp") continue;
    page.addf("<span class=\"chip {}\" title=\"{}\">{} {}</span>", annotationLabel(kind), e(kind),
              annotationLabel(kind), e(annotationText(*a)));
  }
}

namespace {

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

}  // namespace

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

}  // namespace gpurr::report::html
