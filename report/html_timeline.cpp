// The HTML page's timeline: the operations around the first divergence in
// both runs, as lanes at a glance and as a table, side by side.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "report/html_page.h"
#include "report/timeline.h"

namespace gpurr::report::html {

// ------------------------------------------------------------ timeline

namespace {

string digestChips(const json* ranges, const char* label) {
  const auto list = objects(ranges);
  if (list.empty()) return "";
  string s = fmt::format("<span class=\"muted\">{}</span> ", label);
  for (const json* r : list) {
    const string digest = textOr(r, "digest", "?");
    const auto same = flag(r, "same");
    const char* cls = !same ? "" : *same ? " same" : " diff";
    s += fmt::format("<span class=\"dg{}\" title=\"{} {} {}\">{}</span>", cls, e(rangeWhere(r)),
                     e(humanBytes(count(r, "size").value_or(0))), e(digest), e(digest.substr(0, 8)));
  }
  return s;
}

// Names of the streams in the timeline: "s2" where the diff numbers the
// stream; otherwise "x1", "x2"..., one name for the two runs' streams of the
// same matched operations, so that lanes line up across runs.
class StreamNames {
 public:
  explicit StreamNames(const std::vector<const json*>& rows) {
    for (const json* row : rows) {
      const json* a = object(row, "a");
      const json* b = object(row, "b");
      if (a && b && flag(row, "sameOperation").value_or(false) && !count(a, "streamOrdinal") &&
          !count(b, "streamOrdinal")) {
        const auto ha = handle(*a), hb = handle(*b);
        auto ia = names_.find({'a', ha}), ib = names_.find({'b', hb});
        if (ia != names_.end() && ib == names_.end()) names_[{'b', hb}] = ia->second;
        if (ib != names_.end() && ia == names_.end()) names_[{'a', ha}] = ib->second;
        if (ia == names_.end() && ib == names_.end()) names_[{'a', ha}] = names_[{'b', hb}] = next();
      }
    }
    for (const json* row : rows) {
      for (const char* side : {"a", "b"}) {
        const json* op = object(row, side);
        if (op && !count(op, "streamOrdinal") && !names_.count({side[0], handle(*op)})) {
          names_[{side[0], handle(*op)}] = next();
        }
      }
    }
  }

  string name(const json& op, char side) const {
    if (auto ord = count(op, "streamOrdinal")) return fmt::format("s{}", *ord);
    auto it = names_.find({side, handle(op)});
    return it == names_.end() ? "?" : it->second;
  }

  string chip(const json& op, char side) const {
    const string n = name(op, side);
    const auto ord = count(op, "streamOrdinal");
    const string title = ord ? fmt::format("stream {} (handle {:#x})", *ord, handle(op))
                             : fmt::format("a stream the diff does not number (handle {:#x})", handle(op));
    uint64_t colour = ord ? *ord : 0;
    if (!ord) {
      for (char c : n) colour = colour * 31 + static_cast<unsigned char>(c);
    }
    return fmt::format("<span class=\"s\" style=\"background:{}\" title=\"{}\">{}</span>", streamColor(colour),
                       e(title), e(n));
  }

 private:
  static uint64_t handle(const json& op) { return count(op, "stream").value_or(0); }
  string next() { return fmt::format("x{}", ++unnumbered_); }
  std::map<std::pair<char, uint64_t>, string> names_;
  int unnumbered_ = 0;
};

// The timeline at a glance: one lane per run and stream, one cell per row,
// coloured by whether the operation's outputs equal the other run's.
void renderLanes(Page& page, const std::vector<const json*>& rows, const StreamNames& streams) {
  struct Lane {
    char side;
    string stream;
  };
  std::vector<Lane> lanes;
  for (const char* side : {"a", "b"}) {
    for (const json* row : rows) {
      const json* op = object(row, side);
      if (!op) continue;
      const string label = streams.name(*op, side[0]);
      if (std::none_of(lanes.begin(), lanes.end(), [&](const Lane& l) { return l.side == side[0] && l.stream == label; })) {
        lanes.push_back({side[0], label});
      }
    }
  }
  if (lanes.empty()) return;
  page.add("<table class=\"lanes\" aria-label=\"lanes\"><tbody>\n");
  for (const Lane& lane : lanes) {
    page.addf("<tr><th>run {} &middot; {}</th>", lane.side == 'a' ? 'A' : 'B', e(lane.stream));
    const char side[2] = {lane.side, 0};
    for (const json* row : rows) {
      const bool divergent = flag(row, "divergent").value_or(false);
      const string edge = divergent ? " d" : "";
      if (object(row, "elided")) {
        page.addf("<td class=\"c gap{}\" title=\"more of the stretch\">&hellip;</td>", edge);
        continue;
      }
      const json* op = object(row, side);
      if (!op || streams.name(*op, lane.side) != lane.stream) {
        page.addf("<td class=\"c{}\"></td>", edge);
        continue;
      }
      const auto equal = flag(row, "outputsEqual");
      const char* cls = equal ? (*equal ? "eq" : "ne") : flag(row, "stretch").value_or(false) ? "path" : "unk";
      const string from = originText(*op);
      page.addf("<td class=\"c {}{}\" title=\"#{} {}{}\"></td>", cls, edge, count(op, "seq").value_or(0),
                e(textOr(*op, "kind") == "launch" ? kernelShort(*op) : textOr(*op, "name", "?")),
                from.empty() ? "" : e("\n" + from));
    }
    page.add("</tr>\n");
  }
  page.add("</tbody></table>\n<p class=\"small muted legend\"><span class=\"c eq\"></span> outputs equal in both runs "
           "<span class=\"c ne\"></span> outputs differ <span class=\"c path\"></span> one run's path only "
           "<span class=\"c d\"></span> the first divergence</p>\n");
}

// How a row relates to the divergences the diff found.
enum class Mark { kNone, kFirst, kIndependent };

string timelineCell(const json* op, char side, Mark mark, bool stretchRow, const StreamNames& streams) {
  if (!op) return stretchRow ? "<td class=\"op none\">&mdash; (not in this run)</td>" : "<td class=\"op none\"></td>";
  string s = "<td class=\"op\">";
  s += "<div class=\"name\" title=\"" + e(kernelFull(*op)) + "\">";
  if (mark == Mark::kFirst) s += stretchRow ? "<span class=\"tag path\">PATH</span>" : "<span class=\"tag\">DIVERGES</span>";
  if (mark == Mark::kIndependent) {
    s += "<span class=\"tag also\" title=\"an independent divergence: its outputs differ but it reads no data derived "
         "from the first\">ALSO</span>";
  }
  s += streams.chip(*op, side);
  s += fmt::format("<span class=\"muted\">#{}</span> ", count(op, "seq").value_or(0));
  s += e(textOr(*op, "kind") == "launch" ? kernelShort(*op) : textOr(*op, "name", "?")) + "</div>";
  string meta;
  if (textOr(*op, "kind") == "launch") {
    if (auto li = count(op, "launchIndex")) meta += fmt::format("launch #{} &middot; ", *li);
    meta += "grid " + e(dims(get(op, "grid"))) + " block " + e(dims(get(op, "block")));
  }
  if (flag(op, "hashed") == false) meta += " &middot; not hashed";
  if (!meta.empty()) s += "<div class=\"meta\">" + meta + "</div>";
  // Where it came from: the op, its module and line, the step; the whole
  // origin and the op stack as the tooltip.
  if (const auto o = originOf(op)) {
    string where;
    if (o->phase == trace::Phase::kBackward) where += o->forwardOp.empty() ? " backward" : " backward of " + e(o->forwardOp);
    if (!o->module.empty()) where += " &middot; " + e(o->module);
    if (!o->file.empty()) where += " &middot; " + e(trace::sourceLine(*o));
    if (o->step >= 0) where += fmt::format(" &middot; step {}", o->step);
    const string title = originText(*op) +
                         (o->opStack.empty() ? "" : "\n" + opStackText(*o));
    s += fmt::format("<div class=\"meta origin\" title=\"{}\"><span class=\"chip op\">{}</span>{}</div>", e(title),
                     e(o->op.empty() ? "(no op)" : o->op), where);
  }
  if (const auto anns = objects(array(op, "annotations")); !anns.empty()) {
    s += "<div class=\"anns\">";
    for (const json* a : anns) {
      const string kind = textOr(a, "kind");
      s += fmt::format("<span class=\"chip {}\" title=\"{}\">{}</span> ", annotationLabel(kind), e(annotationText(*a)),
                       e(annotationShort(*a)));
    }
    s += "</div>";
  }
  const string in = digestChips(array(op, "inputs"), "in"), out = digestChips(array(op, "outputs"), "out");
  if (!in.empty() || !out.empty()) s += "<div class=\"meta\">" + in + (in.empty() || out.empty() ? "" : " &nbsp; ") + out + "</div>";
  s += "</td>";
  return s;
}

// A trace path as a column heading: its last two components (the run and
// the process), the whole path as the tooltip.
string traceLabel(const json* side) {
  const string path = textOr(side, "trace");
  if (path.empty()) return "";
  size_t cut = path.find_last_of('/');
  if (cut != string::npos && cut > 0) cut = path.find_last_of('/', cut - 1);
  const string tail = cut == string::npos ? path : "..." + path.substr(cut);
  return fmt::format("<span class=\"muted\" style=\"text-transform:none\" title=\"{}\">{}</span>", e(path), e(tail));
}

}  // namespace

void renderTimeline(Page& page, const Report& report) {
  const json* t = report.timeline.is_object() ? &report.timeline : nullptr;
  if (!t) return;
  const auto rows = objects(array(t, "rows"));
  const string processName = textOr(t, "process");
  page.addf("<section id=\"timeline\"><h2>Timeline around the first divergence{}</h2>\n",
            processName.empty() ? "" : " in process <code>" + e(processName) + "</code>");
  if (rows.empty()) {
    page.add("<p class=\"muted\">No divergence: nothing to show.</p></section>\n");
    return;
  }
  const json* ta = object(t, "a");
  const json* tb = object(t, "b");
  page.addf("<p class=\"small muted\">Operations in host order, run A on the left and run B on the right, paired by position "
            "relative to the divergence{}. Digests are the first 8 hex digits; <span class=\"dg diff\">red</span> differs from "
            "the other run, <span class=\"dg same\">green</span> is equal. Hover a name for the full kernel.</p>\n",
            flag(t, "path").value_or(false) ? " (a stretch taken by one run alone is shaded)" : "");
  const StreamNames streams(rows);
  renderLanes(page, rows, streams);
  page.add("<table class=\"tl\"><colgroup><col class=\"off\"><col><col></colgroup>\n");
  page.addf("<thead><tr><th>&Delta;</th><th>run A {}</th><th>run B {}</th></tr></thead><tbody>\n", traceLabel(ta),
            traceLabel(tb));
  // The diff's independent divergences, by event number on each side.
  std::vector<uint64_t> independentA, independentB;
  if (report.diff) {
    for (const diff::ProcessDiff& p : report.diff->processes) {
      if (p.name != processName) continue;
      for (const diff::IndependentDivergence& i : p.blast.independent) {
        if (!i.a.name.empty()) independentA.push_back(i.a.seq);
        if (!i.b.name.empty()) independentB.push_back(i.b.seq);
      }
    }
  }
  auto markOf = [&](const json* row, const char* side) {
    if (flag(row, "divergent").value_or(false)) return Mark::kFirst;
    const auto seq = count(object(row, side), "seq");
    const auto& list = side[0] == 'a' ? independentA : independentB;
    return seq && std::find(list.begin(), list.end(), *seq) != list.end() ? Mark::kIndependent : Mark::kNone;
  };
  for (const json* row : rows) {
    const bool divergent = flag(row, "divergent").value_or(false);
    const bool stretch = flag(row, "stretch").value_or(false);
    const auto offset = number(row, "offset");
    const string off = offset ? fmt::format("{:+.0f}", *offset) : "";
    if (const json* elided = object(row, "elided")) {
      page.addf("<tr class=\"elided stretch\"><td class=\"off\"></td><td>... {} more in run A</td><td>... {} more in run B</td></tr>\n",
                withCommas(count(elided, "a").value_or(0)), withCommas(count(elided, "b").value_or(0)));
      continue;
    }
    string cls = divergent ? "div" : stretch ? "stretch" : (offset && *offset > 0 ? "after" : "");
    if (divergent && stretch) cls += " stretch";
    page.addf("<tr class=\"{}\"{}><td class=\"off\">{}</td>{}{}</tr>\n", cls, divergent ? " id=\"divergent-row\"" : "",
              divergent ? "0" : off, timelineCell(object(row, "a"), 'a', markOf(row, "a"), stretch, streams),
              timelineCell(object(row, "b"), 'b', markOf(row, "b"), stretch, streams));
  }
  page.add("</tbody></table>\n</section>\n");
}

}  // namespace gpurr::report::html
