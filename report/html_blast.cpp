// The end of the HTML page: the blast radius of the first divergence (what
// read its outputs, what diverged independently) and the environment
// differences.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "report/html_page.h"
#include "report/timeline.h"

namespace gpurr::report::html {

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

}  // namespace gpurr::report::html
