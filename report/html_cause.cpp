// The HTML page's first-divergence section: for each process, the divergent
// operation, its cause and evidence, the inputs, parameters and outputs that
// differ, and the stretch each run took alone on a path divergence.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "report/html_page.h"
#include "report/job.h"
#include "report/text.h"
#include "diff/wording.h"
#include "report/words.h"

namespace gpurr::report::html {
using diff::FirstDivergence;
using diff::OpInfo;
using diff::OpKind;
using diff::ProcessDiff;
using diff::RangeDifference;

namespace {

void renderAnnotations(Page& page, const json& annotations, bool withOps) {
  for (const json* a : objects(&annotations)) {
    const string kind = textOr(a, "kind");
    if (!withOps && kind == "frameworkOp") continue;
    page.addf("<span class=\"chip {}\" title=\"{}\">{} {}</span>", annotationLabel(kind), e(kind),
              annotationLabel(kind), e(annotationText(*a)));
  }
}

void renderRanges(Page& page, const char* what, const std::vector<RangeDifference>& ranges) {
  if (ranges.empty()) return;
  page.addf("<table class=\"small\"><thead><tr><th>{}</th><th>where</th><th>size</th><th>chunks differing</th><th>bytes differing</th><th>float32 values differing</th><th>max |d|</th></tr></thead><tbody>\n", what);
  for (const RangeDifference& r : ranges) {
    const uint64_t size = r.a.size;
    string chunks = "-";
    if (r.chunkBytes > 0) chunks = fmt::format("{} of {}", withCommas(r.differingChunks), withCommas(r.chunks));
    string bytes = "-", floats = "-", maxd = "-";
    const string spans = spansText(r, 4);
    if (r.values) {
      bytes = fmt::format("{} of {}", withCommas(r.values->differingBytes), withCommas(size));
      floats = fmt::format("{} of {}", withCommas(r.values->differingFloats), withCommas(r.values->floats));
      maxd = fmt::format("{:.3g}", r.values->maxAbsDiff);
    }
    string where = rangeWhere(r.a);
    if (rangeWhere(r.b) != where) where += " / B " + rangeWhere(r.b);
    page.addf("<tr><td>{} {}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td></tr>\n",
              what, r.index, e(where), humanBytes(size), e(chunks), e(bytes),
              spans.empty() ? "" : "<div class=\"muted\">at " + e(spans) + "</div>", e(floats), e(maxd));
    if (r.writtenChecked) {
      page.addf("<tr><td></td><td colspan=\"6\" class=\"muted\">never written before this launch: {} in run A, {} in run B</td></tr>\n",
                humanBytes(r.unwrittenA), humanBytes(r.unwrittenB));
    }
    page.addf("<tr><td></td><td colspan=\"6\" class=\"muted\">digest A <span class=\"dg\">{}</span> B <span class=\"dg diff\">{}</span></td></tr>\n",
              hex16(r.digestA), hex16(r.digestB));
  }
  page.add("</tbody></table>\n");
}

void renderOpFacts(Page& page, const OpInfo& op, const char* label) {
  page.addf("<dt>{}</dt><dd>", label);
  if (op.kind == OpKind::kLaunch) {
    page.addf("<code>{}</code> <span class=\"muted small\">grid {} block {} &middot; event #{}</span>", e(kernelFull(op)),
              dim(op.grid), dim(op.block), op.seq);
  } else {
    page.addf("{} <span class=\"muted small\">event #{}</span>", e(op.name), op.seq);
  }
  if (!op.annotations.empty()) {
    page.add("<div>");
    renderAnnotations(page, annotationsJson(op), true);
    page.add("</div>");
  }
  page.add("</dd>\n");
}

// Where the divergent operation came from in the program: one row when both
// runs say the same, else one line per run.
void renderOrigins(Page& page, const OpInfo* a, const OpInfo* b) {
  const string ta = a ? originText(*a) : "", tb = b ? originText(*b) : "";
  if (ta.empty() && tb.empty()) return;
  const auto stack = originOf(a ? *a : *b);
  const string title = stack ? opStackText(*stack) : "";
  if (ta == tb) {
    page.addf("<dt>op</dt><dd class=\"origin\" title=\"{}\">{}</dd>\n", e(title), e(ta));
    return;
  }
  page.addf("<dt>op</dt><dd class=\"origin\"><div>run A: {}</div><div>run B: {}</div></dd>\n",
            e(ta.empty() ? "(not recorded)" : ta), e(tb.empty() ? "(not recorded)" : tb));
}

void renderStretch(Page& page, const diff::PathDivergence& stretch) {
  // A reordering: the stretch's operations are at another place of the other run.
  const auto& moved = stretch.reordered;
  page.add("<div class=\"cols\">\n");
  for (const bool isA : {true, false}) {
    const uint64_t n = isA ? stretch.aCount : stretch.bCount;
    const std::vector<OpInfo>& ops = isA ? stretch.aOps : stretch.bOps;
    const string elsewhere =
        moved && n == 0 ? fmt::format("nothing here: the reordered operations are among its operations #{} to #{}",
                                      isA ? moved->aBegin : moved->bBegin, (isA ? moved->aEnd : moved->bEnd) - 1)
                        : "";
    page.addf("<div class=\"box\"><h3 style=\"margin-top:0\">run {}{}: {}</h3>\n", isA ? 'A' : 'B',
              moved ? "" : " alone",
              !elsewhere.empty() ? elsewhere : n == 0 ? string("nothing") : plural(n, "operation", "operations"));
    for (const OpInfo& op : ops) {
      const string from = originText(op);
      const bool launch = op.kind == OpKind::kLaunch;
      page.addf("<div class=\"mono small\">#{} {}</div><div class=\"small muted\">{}{}</div>", op.seq,
                e(launch ? kernelShort(op) : op.name),
                launch ? "grid " + dim(op.grid) + " block " + dim(op.block) : "",
                from.empty() ? "" : "<div class=\"origin\">op " + e(from) + "</div>");
      if (!op.annotations.empty()) {
        page.add("<div>");
        renderAnnotations(page, annotationsJson(op), true);
        page.add("</div>");
      }
    }
    if (n > ops.size()) page.addf("<div class=\"muted small\">... {} more</div>", withCommas(n - ops.size()));
    page.add("</div>\n");
  }
  page.add("</div>\n");
}

void renderFirst(Page& page, const FirstDivergence& d) {
  const bool path = d.path;
  const OpInfo* a = shownOp(d, true);
  const OpInfo* b = shownOp(d, false);
  page.addf("<div class=\"summary\"><span class=\"cause\">{}</span> {}</div>\n", e(diff::toString(d.cause)),
            e(causeSummary(d)));
  if (d.mechanism != d.cause) {
    page.addf("<p class=\"small\">At the operation itself: {}.</p>\n", e(diff::toString(d.mechanism)));
  }

  page.add("<dl class=\"facts\">\n");
  if (path) {
    const OpInfo* op = a ? a : b;
    page.addf("<dt>where</dt><dd>the runs {} at {}</dd>\n",
              d.cause == diff::Cause::kReordered ? "do the same operations in another order" : "take different paths",
              op ? e(opTitleNamed(*op)) : "?");
  } else if (a) {
    page.addf("<dt>where</dt><dd>{} on stream {} <span class=\"muted\">(run A event #{}, run B event #{})</span></dd>\n",
              e(opTitleNamed(*a)), a->stream, a->seq, b ? b->seq : 0);
  }
  if (opUnobserved(d)) page.addf("<dt>unnamed</dt><dd>{}</dd>\n", e(unobservedText(d)));
  if (!path && a) {
    renderOpFacts(page, *a, a->kind == OpKind::kLaunch ? "kernel" : "operation");
    renderOrigins(page, a, b);
  }
  if (!path) {
    const uint64_t n = d.inputCount;
    if (d.inputsIdentical) {
      page.addf("<dt>inputs</dt><dd class=\"ok\">{}</dd>\n",
                n == 0 ? string("none recorded")
                       : fmt::format("identical ({}, {} hashed)", plural(n, "buffer", "buffers"), humanBytes(d.inputBytes)));
    } else {
      page.addf("<dt>inputs</dt><dd class=\"bad\">{} of {} differ</dd>\n", d.inputs.size(), n);
    }
    if (d.paramsIdentical) {
      if (!a || a->kind == OpKind::kLaunch) page.add("<dt>params</dt><dd class=\"ok\">identical after pointer normalisation</dd>\n");
    } else {
      page.addf("<dt>params</dt><dd class=\"bad\">{} differ</dd>\n", plural(d.params.size(), "parameter", "parameters"));
    }
    page.addf("<dt>outputs</dt><dd class=\"{}\">{} of {} differ</dd>\n", d.outputs.empty() ? "" : "bad", d.outputs.size(),
              d.outputCount);
  }
  for (const auto* check : {&d.determinismA, &d.determinismB}) {
    if (!*check) continue;
    const uint64_t runs = (*check)->runs, distinct = (*check)->distinctResults;
    page.addf("<dt>re-runs</dt><dd>run {}: the recorder re-ran it {} times: {} &rarr; <b>{}</b></dd>\n",
              check == &d.determinismA ? 'A' : 'B', runs, plural(distinct, "distinct result", "distinct results"),
              distinct > 1 ? "intrinsic" : "deterministic on these inputs");
  }
  page.add("</dl>\n");

  if (d.stretch && path) renderStretch(page, *d.stretch);

  const std::vector<string> evidence = evidenceSentences(d);
  if (!evidence.empty()) {
    page.add("<h3>Evidence</h3><ul class=\"evidence\">\n");
    for (const string& line : evidence) page.addf("<li>{}</li>\n", e(line));
    page.add("</ul>\n");
  }
  if (!d.inputs.empty()) {
    page.add("<h3>Inputs that differ</h3>\n");
    renderRanges(page, "input", d.inputs);
  }
  if (!d.params.empty()) {
    page.add("<h3>Parameters that differ</h3>\n<table class=\"small\"><thead><tr><th>parameter</th><th>bytes</th><th>meaning</th><th>run A</th><th>run B</th></tr></thead><tbody>\n");
    for (const diff::ParamDifference& p : d.params) {
      const string name = p.param >= 0 ? fmt::format("param {}", p.param) : "raw bytes";
      page.addf("<tr><td>{}</td><td><code>{:#x}-{:#x}</code></td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td></tr>\n",
                e(name), p.offset, uint64_t{p.offset} + p.size, e(meaningText(p)), e(p.a), e(p.b));
    }
    page.add("</tbody></table>\n");
  }
  if (!d.outputs.empty()) {
    page.add("<h3>Outputs that differ</h3>\n");
    renderRanges(page, "output", d.outputs);
  }
  // Algorithm and RNG annotations: what a cause like algorithm choice or
  // RNG state rests on, shown side by side.
  auto algorithmOrRng = [](const json* ann) {
    const string kind = textOr(ann, "kind");
    return kind == "algorithm" || kind == "rng";
  };
  const json annotationsA = a ? annotationsJson(*a) : json::array(), annotationsB = b ? annotationsJson(*b) : json::array();
  bool any = false;
  for (const json* anns : {&annotationsA, &annotationsB}) {
    for (const json* ann : objects(anns)) any = any || algorithmOrRng(ann);
  }
  if (any && !path) {
    page.add("<h3>Algorithm and RNG annotations</h3><dl class=\"facts\">\n");
    for (const OpInfo* op : {a, b}) {
      if (!op) continue;
      page.addf("<dt>run {}</dt><dd>", op == a ? 'A' : 'B');
      for (const json* ann : objects(op == a ? &annotationsA : &annotationsB)) {
        if (algorithmOrRng(ann)) {
          const string kind = textOr(ann, "kind");
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

void renderCause(Page& page, const Report& report) {
  const RunComparison* diff = report.diff;
  if (!diff) return;
  const bool several = diff->processes.size() > 1;
  bool opened = false;
  auto open = [&] {
    if (!opened) page.add("<section id=\"cause\"><h2>First divergence and cause</h2>\n");
    opened = true;
  };
  for (const auto* side : {&diff->onlyA, &diff->onlyB}) {
    for (const string& name : *side) {
      open();
      page.addf("<div class=\"box warnbox\">process <code>{}</code> was recorded in run {} only</div>\n", e(name),
                side == &diff->onlyA ? 'A' : 'B');
    }
  }
  for (const auto* side : {&diff->incompleteA, &diff->incompleteB}) {
    for (const IncompleteTrace& t : *side) {
      open();
      page.addf("<div class=\"box warnbox\">process <code>{}</code> of run {}: {}; compared up to {} "
                "<span class=\"muted small\">({})</span></div>\n",
                e(t.name), side == &diff->incompleteA ? 'A' : 'B', e(t.cause), e(t.readsTo), e(t.detail));
    }
  }
  for (const IncompleteTrace& t : diff->unreadable) {
    open();
    page.addf("<div class=\"box warnbox\">process <code>{}</code> could not be read, and was not compared "
              "<span class=\"muted small\">({})</span></div>\n",
              e(t.name), e(t.detail));
  }
  // Each process's part; parts alike but for the process's own rank are
  // shown once, the others named after it (a job's receivers of one
  // all-reduce).
  const size_t n = diff->processes.size();
  std::vector<string> parts(n), names(n);
  std::vector<int32_t> ranks(n);
  const std::vector<size_t> order = processOrder(*diff, jobOf(report));
  std::vector<bool> shown(n, false);
  for (size_t i = 0; i < n; ++i) {
    const ProcessDiff& p = diff->processes[i];
    names[i] = p.name;
    ranks[i] = p.rankA;
    const std::vector<string> paired = pairedDespiteLines(p);
    const std::optional<string> setAside = setAsideLine(p);
    if (!p.firstDivergence && !several && p.warnings.empty() && p.gaps.empty() && paired.empty() && !setAside) {
      shown[i] = true;  // nothing to show
      continue;
    }
    Page part;
    for (const string& w : p.warnings) part.addf("<div class=\"box warnbox small\">warning: {}</div>\n", e(w));
    for (const string& line : paired) part.addf("<p class=\"muted small\">paired: {}</p>\n", e(line));
    if (setAside) part.addf("<p class=\"muted small\">autotune: {}</p>\n", e(*setAside));
    if (p.firstDivergence) {
      renderFirst(part, *p.firstDivergence);
      renderKnown(part, *p.firstDivergence);
    } else if (p.identical && !p.gaps.empty()) {
      part.addf("<p class=\"warn\">not known: {} operations match, with equal parameters and outputs, up to where {}; "
                "nothing after it was compared</p>\n",
                withCommas(p.matched), e(p.gaps.front()));
    } else if (p.identical) {
      part.addf("<p class=\"ok\">identical: {} operations match, with equal parameters and outputs{}</p>\n",
                withCommas(p.matched), e(notHashed(p)));
    }
    parts[i] = std::move(part.html);
  }
  const std::vector<std::vector<size_t>> with = alikeReports(parts, ranks, order);
  for (const size_t i : order) {
    if (shown[i]) continue;
    open();
    if (several) page.addf("<h3>process <code>{}</code></h3>\n", e(names[i].empty() ? "?" : names[i]));
    page.add(parts[i]);
    for (size_t k : with[i]) shown[k] = true;
    if (several && !with[i].empty()) {
      page.addf("<p class=\"muted\">{}: the same as <code>{}</code>{}</p>\n",
                e(processesText(with[i], ranks, names)), e(names[i]), e(alikeText(parts, ranks, i, with[i])));
    }
  }
  if (opened) page.add("</section>\n");
}

}  // namespace gpurr::report::html
