// The HTML page's known culprit: the entry of the known-culprits table that
// matches the first divergence, what it matched, and its fix.
#include <fmt/format.h>

#include <string>

#include "report/html_page.h"

namespace gpurr::report::html {

void renderKnown(Page& page, const diff::FirstDivergence& d) {
  page.add("<h3>Known culprit and fix</h3>\n");
  if (d.known.empty()) {
    page.add("<p class=\"muted small\">No entry of the known-culprits table matches this divergence.</p>\n");
    return;
  }
  for (const diff::CulpritMatch& k : d.known) {
    page.add("<div class=\"box fix\">\n");
    page.addf("<div><b>{}</b>", e(k.op));
    page.addf(" <span class=\"muted small\">(matched by {}{})</span>", e(k.matchedBy),
              k.matched.empty() ? "" : ": " + e(k.matched));
    page.add("</div>\n");
    page.addf("<p class=\"small\" style=\"margin:6px 0\">{}</p>\n", e(k.why));
    if (!k.argument.empty()) {
      page.addf("<div><b>Applies when</b> {}: the recording does not show arguments</div>\n", e(k.argument));
    }
    page.addf("<div><b>Fix:</b> {}</div>\n", e(k.fix));
    if (!k.source.empty()) page.addf("<div class=\"muted small\">source: {}</div>\n", e(citation(k.source)));
    page.add("</div>\n");
  }
}

}  // namespace gpurr::report::html
