// The top of the HTML page: the verdict in one line with the command and links
// to the sections below, and the runs a bisect recorded.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "report/html_page.h"
#include "report/words.h"

namespace gpurr::report::html {
using diff::FirstDivergence;
using diff::OpInfo;
using diff::ProcessDiff;

// ------------------------------------------------------------ header

const ProcessDiff* firstDifferingProcess(const Report& report) {
  return report.diff ? leadProcess(*report.diff, jobOf(report)) : nullptr;
}

string divergenceWhere(const FirstDivergence& d) {
  const OpInfo* op = shownOp(d, true) ? shownOp(d, true) : shownOp(d, false);
  if (!op) return "an unknown operation";
  string s = opTitleNamed(*op);
  if (op->kind == diff::OpKind::kLaunch) s += " " + kernelShort(*op);
  return s;
}

Headline headline(const Report& report) {
  const BisectFacts* bisect = report.bisect;
  string verdict = bisect ? bisect->verdict : "";
  if (verdict.empty() && report.diff) {
    verdict = report.diff->identical() ? "identical" : report.diff->unknown() ? "notKnown" : "diverged";
  }
  const ProcessDiff* p = firstDifferingProcess(report);
  const FirstDivergence* first = p ? &*p->firstDivergence : nullptr;
  if (verdict == "identical") {
    string s = "Identical: the runs produced the same bits";
    if (bisect && bisect->runs.size() > 1) s = fmt::format("Identical: {} runs produced the same bits", bisect->runs.size());
    if (bisect) s += stoppedRunsText(bisect->runs);  // runs gpurr stopped are identical up to there
    return {"ok", s};
  }
  if (verdict == "notKnown") {
    std::vector<string> why;
    if (const RunComparison* d = report.diff) {
      if (!d->onlyA.empty() || !d->onlyB.empty()) why.push_back("a process recorded in one run only");
      if (!d->unreadable.empty()) why.push_back("a trace that could not be read");
      const bool gaps = std::ranges::any_of(d->processes, [](const ProcessDiff& p) { return !p.gaps.empty(); });
      if (gaps || !d->incompleteA.empty() || !d->incompleteB.empty()) {
        why.push_back("a trace cut short or with events dropped");
      }
    }
    if (why.empty()) why.push_back("a trace cut short or with events dropped");
    return {"warn", fmt::format("Not known: the runs agree in all that was compared, but not all of them could be "
                                "compared ({}: see below)",
                                fmt::join(why, "; "))};
  }
  if (verdict == "diverged") {
    if (!first) return {"bad", "Diverged: the runs produced different bits"};
    string s = (first->cause == diff::Cause::kReordered ? "Diverged: the runs do the same operations in another order at "
                : first->path                          ? "Diverged: the runs take different paths at "
                                                       : "Diverged at ") +
               divergenceWhere(*first);
    s += string(" \u2014 ") + diff::toString(first->cause);
    return {"bad", s};
  }
  if (verdict == "notReproduced") {
    string s = "Not reproduced: a further run did not diverge at the same operation";
    if (first) s += " (first seen at " + divergenceWhere(*first) + ")";
    return {"warn", s};
  }
  if (verdict == "failed") {
    string why = bisect ? bisect->error : "";
    why = why.substr(0, why.find('\n'));
    return {"bad", "Failed: " + (why.empty() ? string("the runs could not be recorded or compared") : why)};
  }
  if (verdict.empty()) return {"warn", "No verdict: the report holds no comparison"};
  return {"warn", "Verdict: " + verdict};
}

// Whether renderReplay writes a section (the header links to it).
bool hasReplaySection(const Report& report) {
  const BisectFacts* b = report.bisect;
  if (!b) return false;
  if (b->replay || b->replayError || b->confirmation || b->reproduced) return true;
  return b->verdict != "identical" && b->verdict != "failed";
}

void renderHeader(Page& page, const Report& report, const JobView* job) {
  const BisectFacts* bisect = report.bisect;
  const Headline h = headline(report);
  page.addf("<header class=\"verdict v-{}\" id=\"verdict\">\n", h.cls);
  page.addf("<div class=\"kicker\">gpurr {} report</div>\n", bisect ? "bisect" : "diff");
  page.addf("<h1>{}</h1>\n", e(h.title));
  const ProcessDiff* first = firstDifferingProcess(report);
  if (first) {
    page.addf("<div class=\"small\">{}</div>\n", e(causeSummary(*first->firstDivergence)));
  } else if (report.diff && report.diff->identical()) {
    // How much was compared, as the text's verdict says.
    uint64_t matched = 0;
    for (const ProcessDiff& p : report.diff->processes) matched += p.matched;
    const size_t n = report.diff->processes.size();
    page.addf("<div class=\"small\">identical: {} operations match{}, with equal parameters and outputs{}</div>\n",
              withCommas(matched), n > 1 ? fmt::format(" in {} processes", n) : "",
              e(n == 1 ? notHashed(report.diff->processes.front()) : ""));
  }
  if (bisect) {
    if (const string cmd = joined(bisect->command); !cmd.empty()) {
      page.addf("<div class=\"small\"><span class=\"muted\">command</span> <code>{}</code></div>\n", e(cmd));
    }
    if (const string options = joined(bisect->recordOptions); !options.empty()) {
      page.addf("<div class=\"small\"><span class=\"muted\">recorded with</span> <code>gpurr record {}</code></div>\n",
                e(options));
    }
    if (!bisect->directory.empty()) {
      page.addf("<div class=\"small\"><span class=\"muted\">written to</span> <code>{}</code></div>\n",
                e(bisect->directory));
    }
    if (!bisect->error.empty() && bisect->verdict != "failed") {
      page.addf("<div class=\"small\"><b>warning:</b> {}</div>\n", e(bisect->error));
    }
  } else if (report.diff) {
    page.addf("<div class=\"small\"><span class=\"muted\">compared</span> <code>{}</code> <span class=\"muted\">and</span> <code>{}</code></div>\n",
              e(report.diff->a), e(report.diff->b));
  }
  std::vector<std::pair<string, string>> links;
  if (bisect) links.push_back({"runs", "Runs"});
  if (job) links.push_back({"job", "Job"});
  if (first) links.push_back({"cause", "Cause"});
  if (hasReplaySection(report)) links.push_back({"replay", "Replay"});
  if (const json* rows = array(report.timeline, "rows"); rows && !rows->empty()) {
    links.push_back({"timeline", "Timeline"});
    links.push_back({"divergent-row", "Divergent launch"});
  }
  if (first) links.push_back({"blast", "Blast radius"});
  if (report.diff || (bisect && bisect->compared)) links.push_back({"environment", "Environment"});
  if (links.size() > 1) {
    page.add("<nav>");
    for (const auto& [id, label] : links) page.addf("<a href=\"#{}\">{}</a>", id, label);
    page.add("</nav>\n");
  }
  page.add("</header>\n");
}

// ------------------------------------------------------------ runs

void renderRuns(Page& page, const Report& report) {
  if (!report.bisect) return;
  const BisectFacts& b = *report.bisect;
  page.add("<section id=\"runs\"><h2>Runs</h2>\n");
  if (b.runs.empty()) {
    page.add("<p class=\"muted\">No run was recorded.</p></section>\n");
    return;
  }
  page.add("<table><thead><tr><th>run</th><th>trace</th><th>output</th><th>exit</th><th>time</th><th>launches</th></tr></thead><tbody>\n");
  size_t i = 0;
  for (const RunInfo& run : b.runs) {
    string label = std::to_string(++i);
    if (!run.snapshot.empty()) {
      label += " <span class=\"chip\" title=\"recorded with --snapshot " + e(run.snapshot) + "\">snapshots " + e(run.snapshot) + "</span>";
    }
    if (run.stoppedAfterStep >= 0) {
      label += fmt::format(" <span class=\"chip\" title=\"{}\">stopped after step {}</span>",
                           !run.stoppedByBisect ? "gpurr record --until-step"
                           : b.confirmation != nullptr && i == b.runs.size()
                               ? "by gpurr bisect, after the step of the divergence it confirms"
                               : "by gpurr bisect, soon after its first divergence",
                           run.stoppedAfterStep);
    }
    if (run.startedBeside != 0) {
      label += fmt::format(" <span class=\"chip\" title=\"started while run {0} recorded, held at its first CUDA call "
                           "until run {0} had ended\">started during run {0}</span>",
                           run.startedBeside);
    }
    page.addf("<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td class=\"{}\">{}</td><td>{:.1f} s</td><td>{}</td></tr>\n",
              label, e(run.trace.empty() ? "(not traced)" : run.trace), e(run.log), run.exitCode != 0 ? "bad" : "",
              run.exitCode, run.seconds, withCommas(run.launches));
  }
  page.add("</tbody></table>\n");
  page.addf("<p class=\"muted small\">{:.1f} s in all.</p>\n", b.seconds);
  if (const auto& c = b.compared) {
    page.addf("<p>Compared: {} runs, each {}, {} launches ({} hashed), {} copies, {} memsets, {} hashed.</p>\n", c->runs,
              plural(c->processes, "process", "processes"), withCommas(c->launches), withCommas(c->hashedLaunches),
              withCommas(c->copies), withCommas(c->memsets), humanBytes(c->bytesHashed));
  }
  for (const string& failure : b.failures) page.addf("<div class=\"box warnbox\"><pre>{}</pre></div>\n", e(failure));
  page.add("</section>\n");
}

}  // namespace gpurr::report::html
