// The end of the HTML page: the blast radius of the first divergence (what
// read its outputs, what diverged independently) and the environment
// differences.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "report/html_page.h"
#include "report/words.h"

namespace gpurr::report::html {

// ------------------------------------------------------------ blast radius

void renderBlast(Page& page, const Report& report) {
  const diff::ProcessDiff* p = firstDifferingProcess(report);
  if (!p) return;
  const diff::BlastRadius& b = p->blast;
  page.addf("<section id=\"blast\"><h2>Blast radius{}</h2>\n", p->name.empty() ? "" : " in process <code>" + e(p->name) + "</code>");
  const uint64_t later = b.laterOps, tainted = b.taintedOps;
  const uint64_t laterL = b.laterLaunches, taintedL = b.taintedLaunches;
  if (later == 0) {
    page.add("<p>No later operations.</p>\n");
  } else {
    page.addf("<p><b>{} of {}</b> later operations{} read data derived from the divergent output.</p>\n",
              withCommas(tainted), withCommas(later),
              laterL ? fmt::format(" ({} of {} launches)", withCommas(taintedL), withCommas(laterL)) : string());
    page.addf("<div class=\"meter\" title=\"{} of {}\"><span style=\"width:{:.1f}%\"></span></div>\n", tainted, later,
              100.0 * static_cast<double>(std::min(tainted, later)) / static_cast<double>(later));
  }
  const uint64_t divergent = b.divergentOps;
  const uint64_t independent = b.independentCount;
  if (independent == 0) {
    page.addf("<p>{}</p>\n", divergent == 0 ? "No later divergence."
                             : divergent == 1 ? "No independent divergence: the one later divergent operation reads data derived from it."
                                              : fmt::format("No independent divergence: all {} later divergent operations read data derived from it.",
                                                            withCommas(divergent)));
  } else {
    page.addf("<p class=\"bad\"><b>{}</b> not explained by the first{}:</p>\n<ul class=\"evidence\">\n",
              plural(independent, "independent divergence", "independent divergences"), e(repeatsFirst(b)));
    for (const diff::IndependentDivergence& i : b.independent) {
      const diff::OpInfo* ia = i.a.name.empty() ? nullptr : &i.a;
      const diff::OpInfo* ib = i.b.name.empty() ? nullptr : &i.b;
      const diff::OpInfo* op = ia ? ia : ib;
      page.addf("<li><b>{}</b> <code>{}</code> <span class=\"muted\">({})</span>: {}{}</li>\n",
                op ? e(opTitleNamed(*op)) : "?", op ? e(kernelShort(*op)) : "", e(whereBoth(i)), e(i.reason),
                i.more > 0 ? "<br><span class=\"muted\">" + e(moreLikeItText(i)) + "</span>" : string());
    }
    if (const uint64_t unlisted = b.unlisted(); unlisted > 0) {
      page.addf("<li class=\"muted\">... and {} more at other places</li>\n", withCommas(unlisted));
    }
    page.add("</ul>\n");
  }
  const uint64_t n = p->pathDivergenceCount;
  if (n > (p->firstDivergence->path ? 1u : 0u)) page.addf("<p>{} in all.</p>\n", plural(n, "path divergence", "path divergences"));
  page.add("</section>\n");
}

// ------------------------------------------------------------ environment

void renderEnvironment(Page& page, const Report& report) {
  const RunComparison* diff = report.diff;
  const BisectFacts* bisect = report.bisect;
  if (!diff && bisect && bisect->compared) {
    const auto& env = bisect->compared->environment;
    page.add("<section id=\"environment\"><h2>Environment</h2>\n");
    if (env.empty()) {
      page.add("<p class=\"ok\">No difference in the recorded environment.</p>\n</section>\n");
      return;
    }
    page.add("<p class=\"small\">These differ between the runs, without changing their results:</p>\n"
             "<table><thead><tr><th>field</th><th>run 1</th><th>other run</th></tr></thead><tbody>\n");
    for (const Compared::Difference& d : env) {
      const string field = d.process.empty() ? d.field.field : d.process + ": " + d.field.field;
      page.addf("<tr><td><code>{}</code></td><td><code>{}</code></td><td>{}<code>{}</code></td></tr>\n", e(field),
                e(d.field.a.value_or("(unset)")), e(fmt::format("run {}: ", d.run)), e(d.field.b.value_or("(unset)")));
    }
    page.add("</tbody></table>\n</section>\n");
    return;
  }
  if (!diff) return;
  page.add("<section id=\"environment\"><h2>Environment</h2>\n");
  bool any = false;
  for (const diff::ProcessDiff& p : diff->processes) {
    if (p.environment.empty()) continue;
    if (!any) page.add("<table><thead><tr><th>field</th><th>run A</th><th>run B</th><th></th></tr></thead><tbody>\n");
    any = true;
    for (const diff::EnvDifference& d : p.environment) {
      const string field = p.name.empty() ? d.field : p.name + ": " + d.field;
      auto value = [&](const std::optional<string>& v) {
        return v ? "<code>" + e(*v) + "</code>" : string("<span class=\"muted\">(unset)</span>");
      };
      page.addf("<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td class=\"{} small\">{}</td></tr>\n", e(field),
                value(d.a), value(d.b), d.affectsResults ? "bad" : "muted",
                d.affectsResults ? "can change results" : "context");
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

}  // namespace gpurr::report::html
