// The HTML page's replay section: whether a further run reproduced the
// divergence, and what re-executing the divergent launch found.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "report/html_page.h"
#include "report/words.h"
#include "report/timeline.h"

namespace gpurr::report::html {

// ------------------------------------------------------------ replay

namespace {

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

}  // namespace

void renderReplay(Page& page, const Report& report) {
  if (!hasReplaySection(report)) return;
  const BisectFacts& b = *report.bisect;
  // What `gpurr replay --json` wrote, read key by key.
  const json replayObject = b.replay ? json(*b.replay) : json(nullptr);
  const json* replay = replayObject.is_object() ? &replayObject : nullptr;
  const auto& error = b.replayError;
  const auto reproduced = b.reproduced;
  page.add("<section id=\"replay\"><h2>Replay</h2>\n");
  if (b.confirmation || reproduced) {
    page.add("<dl class=\"facts\">");
    string run = "the run with snapshots";
    if (b.snapshotLaunch) run += fmt::format(" (of launch #{})", *b.snapshotLaunch);
    string what;
    if (reproduced) {
      what = b.reproducedElsewhere
                 ? run + " diverges at another launch of the same op, for the same cause: reproduced"
             : *reproduced ? run + " diverges at the same operation: reproduced"
                           : run + " does not diverge at the same operation: not reproduced";
    } else {
      what = run + " was compared with run 1";
    }
    page.addf("<dt>confirmation</dt><dd><span class=\"{}\">{}</span>", reproduced && !*reproduced ? "bad" : "", e(what));
    for (const RunComparison* c : {b.confirmation, b.confirmationOther}) {
      if (!c) continue;
      const char* against = c == b.confirmation ? "against run 1" : "against the other run of the pair";
      if (const diff::ProcessDiff* p = leadProcess(*c, nullptr)) {
        const diff::FirstDivergence& f = *p->firstDivergence;
        page.addf("<div class=\"small muted\">{}: first divergence at {}: {}</div>", against, e(divergenceWhere(f)),
                  e(causeSummary(f)));
      } else if (c->identical()) {
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
  } else {
    page.add("<p class=\"muted\">Replay was not attempted.</p>\n");
  }
  page.add("</section>\n");
}

}  // namespace gpurr::report::html
