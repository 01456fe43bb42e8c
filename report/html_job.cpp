// The HTML page's job section, for directories of per-rank traces that ran
// collectives (report/job.h): the collectives the ranks issued differently,
// the earliest origins, the job's cause at a collective every rank sent
// identical data, the ranks side by side, and how the divergence spread.
#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "diff/wording.h"
#include "report/html_page.h"
#include "report/words.h"

namespace gpurr::report::html {

namespace {

// The rank's first divergent operation; run B's where run A has none there.
string whereInJob(const diff::FirstDivergence& d) { return shownSide(d) + divergenceWhere(d); }


string lineOf(const std::optional<trace::Origin>& o) {
  return o && !o->file.empty() ? trace::sourceLine(*o) : string();
}

string stepOf(const std::optional<trace::Origin>& o) { return o && o->step >= 0 ? std::to_string(o->step) : string(); }

// A divergence's line: both runs' where they issued it from other lines.
string linesOf(const diff::FirstDivergence& d) {
  return issuedElsewhere(d) ? fmt::format("run A {}, run B {}", lineOf(d.a.origin), lineOf(d.b.origin))
                            : lineOf(firstShown(d).origin);
}

void renderMismatches(Page& page, const JobView& job) {
  if (job.sizes) {
    std::string text = sizesText(*job.sizes);
    text[0] = 'T';
    page.addf("<div class=\"box warnbox\">{}.</div>\n", e(text));
  }
  for (const CollectiveMismatch& m : job.mismatches) {
    page.addf("<div class=\"box warnbox\"><b>Collective mismatch</b> in <code>{}</code>: communicator <code>{:016x}</code>, "
              "{} differs between ranks\n<table class=\"small\"><thead><tr><th>rank</th><th>process</th>"
              "<th>call</th><th>line</th></tr></thead><tbody>\n",
              e(m.run), m.communicator, e(mismatchedCall(m)));
    for (const CollectiveCallSite& s : m.calls) {
      page.addf("<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td></tr>\n", s.rank, e(s.process),
                e(s.call), s.file.empty() ? "" : e(trace::sourceLine(s.file, s.line)));
    }
    page.add("</tbody></table></div>\n");
  }
}

void renderOrigins(Page& page, const RunComparison& c, const JobView& job) {
  if (job.earliestOrigins.empty()) {
    if (!job.ranks.empty() && !job.cause) {
      std::string text = noOriginText(job);
      text[0] = 'N';
      page.addf("<div class=\"box warnbox\">{}.</div>\n", e(text));
    }
    return;
  }
  const size_t n = job.earliestOrigins.size();
  page.addf("<div class=\"box\"><b>{}</b>{}<ul class=\"evidence\">\n", n == 1 ? "Earliest origin" : "Earliest origins",
            n == 1 ? string()
            : job.sameCollective
                ? fmt::format(": {} ranks diverged before the same collective (after {}), independently", n,
                              plural(job.ranks[job.earliestOrigins[0]].collectivesBefore, "collective", "collectives"))
                : fmt::format(": {} ranks diverged independently (no collective carried one's divergence to another "
                              "before it diverged)",
                              n));
  for (size_t i : job.earliestOrigins) {
    const RankVerdict& v = job.ranks[i];
    const diff::FirstDivergence& d = *c.processes[v.process].firstDivergence;
    const string from = originText(firstShown(d));
    page.addf("<li>rank <b>{}</b> <code>{}</code>: {} <span class=\"muted\">(run A event #{})</span>{} &mdash; "
              "<span class=\"cause\">{}</span> {}</li>\n",
              v.rank, e(c.processes[v.process].name), e(whereInJob(d)), seqInA(d),
              from.empty() ? "" : " <span class=\"muted\">op " + e(from) + "</span>", e(diff::toString(d.cause)),
              e(d.summary));
  }
  page.add("</ul></div>\n");
}

void renderJobCause(Page& page, const JobView& job) {
  if (!job.cause) return;
  const diff::CollectiveVerdict& v = *job.cause;
  page.addf("<div class=\"box\"><div class=\"summary\"><span class=\"cause\">{}</span> {}</div>\n",
            e(diff::toString(v.cause)), e(v.summary));
  if (v.mechanism != v.cause) {
    page.addf("<p class=\"small\">At the collective itself: {}.</p>\n", e(diff::toString(v.mechanism)));
  }
  page.add("<ul class=\"evidence\">\n");
  for (const string& line : diff::sentences(v.evidence)) page.addf("<li>{}</li>\n", e(line));
  page.add("</ul></div>\n");
  page.addf("<div class=\"box fix\"><b>Fix:</b> {}</div>\n", e(v.fix));
}

// One row of the ranks table: its cells after the rank and process, with
// and without the run A event number, which a row of several ranks leaves
// out (each rank numbers its own events).
struct RankRow {
  size_t process;
  int32_t rank;
  string cells, cellsOfGroup;
};

RankRow rankRow(const RunComparison& c, const JobView& job, size_t p) {
  const diff::ProcessDiff& pd = c.processes[p];
  RankRow row{p, p < job.processRanks.size() ? job.processRanks[p] : -1, {}, {}};
  const RankVerdict* v = nullptr;
  for (const RankVerdict& r : job.ranks) v = r.process == p ? &r : v;
  if (!v) {
    // Identical where compared, and compared to the end of both traces.
    const bool identical = pd.identical && pd.gaps.empty();
    row.cells = fmt::format("<td class=\"{}\">{}</td><td colspan=\"4\" class=\"muted\">{}</td>",
                            identical ? "ok" : "", identical ? "identical" : "not known",
                            identical ? "no divergence" : "compared up to a gap in a trace");
    row.cellsOfGroup = row.cells;
    return row;
  }
  const diff::FirstDivergence& d = *pd.firstDivergence;
  string notes, notesOfGroup;
  for (const auto& [of, html] : {std::pair{&job.notes, &notes}, std::pair{&job.notesAlike, &notesOfGroup}}) {
    if (const auto n = of->find(p); n != of->end()) {
      for (const string& note : n->second) *html += fmt::format("<div class=\"muted\">{}</div>", e(note));
    }
  }
  const string after = plural(v->collectivesBefore, "collective", "collectives");
  auto rest = [&](const string& n) {
    return fmt::format("<td>{}</td><td>{}</td><td><span class=\"cause\">{}</span>{}</td>", e(linesOf(d)),
                       e(stepOf(firstShown(d).origin)), e(diff::toString(d.cause)), n);
  };
  const string role = fmt::format("<td class=\"{}\">{}</td>", v->origin ? "bad" : "", roleOf(*v));
  row.cells = fmt::format("{}<td>{} <span class=\"muted\">(run A event #{}, after {})</span></td>{}", role,
                          e(whereInJob(d)), seqInA(d), after, rest(notes));
  // A collective names the rank's place in it ("rank 3 of 64"): each its own.
  row.cellsOfGroup = fmt::format("{}<td>{} <span class=\"muted\">(after {})</span></td>{}", role,
                                 e(withOwnRankAs(divergenceWhere(d), row.rank, "its rank of ")), after,
                                 rest(notesOfGroup));
  return row;
}

// One row per rank, in rank order; ranks next to each other whose rows are
// alike but for their event numbers (a job's receivers of one collective)
// share one row.
void renderRanks(Page& page, const RunComparison& c, const JobView& job) {
  page.add("<h3>Ranks</h3>\n<table class=\"small\"><thead><tr><th>rank</th><th>process</th><th>role</th>"
           "<th>first divergent operation</th><th>line</th><th>step</th><th>cause</th></tr></thead><tbody>\n");
  std::vector<RankRow> rows;
  for (size_t p = 0; p < c.processes.size(); ++p) rows.push_back(rankRow(c, job, p));
  for (size_t i = 0; i < rows.size();) {
    size_t end = i + 1;
    while (end < rows.size() && rows[i].rank >= 0 && rows[end].rank >= 0 &&
           rows[end].cellsOfGroup == rows[i].cellsOfGroup) {
      ++end;
    }
    if (end - i == 1) {
      page.addf("<tr><td><b>{}</b></td><td><code>{}</code></td>{}</tr>\n", rows[i].rank,
                e(c.processes[rows[i].process].name), rows[i].cells);
    } else {
      std::vector<int32_t> ranks;
      for (size_t k = i; k < end; ++k) ranks.push_back(rows[k].rank);
      page.addf("<tr><td><b>{}</b></td><td><code>{}</code> and {} more</td>{}</tr>\n",
                e(rankList(ranks)),
                e(c.processes[rows[i].process].name), end - i - 1, rows[i].cellsOfGroup);
    }
    i = end;
  }
  page.add("</tbody></table>\n");
}

void renderSpread(Page& page, const JobView& job) {
  if (job.spread.empty()) return;
  page.add("<h3>How it spread</h3>\n<table class=\"small\"><thead><tr><th>collective</th><th>line</th><th>step</th>"
           "<th>from</th><th>to</th></tr></thead><tbody>\n");
  for (const SpreadStep& s : job.spread) {
    const string from = !s.from.empty()    ? ranksText(s.from)
                        : s.everyRankSentIdentical ? "no rank: every rank sent identical data"
                        : !s.divergedBefore.empty()
                            ? ranksText(s.divergedBefore) + " (diverged before it; what they sent was not hashed)"
                            : "no rank recorded in both runs sent other data";
    page.addf("<tr><td><code>{}</code>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", e(s.collective),
              s.issuedDifferently ? " <span class=\"muted\">(issued differently: the mismatch above)</span>" : "",
              e(lineOf(s.origin)), e(stepOf(s.origin)), e(from), e(ranksText(s.to)));
  }
  page.add("</tbody></table>\n");
}

}  // namespace

void renderJob(Page& page, const Report& report, const JobView* job) {
  if (!job || !report.diff) return;
  const RunComparison& c = *report.diff;
  page.addf("<section id=\"job\"><h2>Job: {} processes</h2>\n", c.processes.size());
  renderMismatches(page, *job);
  renderOrigins(page, c, *job);
  renderJobCause(page, *job);
  renderRanks(page, c, *job);
  renderSpread(page, *job);
  page.add("</section>\n");
}

}  // namespace gpurr::report::html
