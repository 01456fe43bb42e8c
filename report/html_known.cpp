// The HTML page's known culprit: the entry of the known-culprits table that
// matches the first divergence, what it matched, and its fix.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "report/html_page.h"
#include "report/timeline.h"

namespace gpurr::report::html {

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

}  // namespace gpurr::report::html
