// renderHtml: a bisect or diff report as one self-contained page. The page is
// read by people who were not there when the runs were recorded, maybe
// offline or from an attachment: everything it needs is inline, nothing is
// fetched, and no script is needed to read it. Each section is written by
// its own file (html_page.h lists them); this one puts them in order.
#include "report/html.h"

#include <optional>

#include "report/html_page.h"

namespace gpurr::report {
namespace {

constexpr const char* kStyle = R"css(
:root{--fg:#1f2328;--muted:#636c76;--line:#d8dee4;--soft:#f6f8fa;--bad:#c62828;--bad-bg:#fdecea;
--ok:#1a7f37;--ok-bg:#e8f5ec;--warn:#9a6700;--warn-bg:#fff8c5;--accent:#0b5cad;--mono:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI","DejaVu Sans",Arial,sans-serif}
main{max-width:1180px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:22px;margin:4px 0 6px;line-height:1.3}
h2{font-size:17px;margin:0 0 10px;padding-bottom:6px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:16px 0 6px}
section{margin:26px 0}
code,.mono{font-family:var(--mono);font-size:13px}
.muted{color:var(--muted)}
.small{font-size:13px}
header.verdict{border-radius:8px;padding:16px 20px;border:1px solid var(--line);border-left:8px solid var(--muted);background:var(--soft)}
header.verdict.v-bad{border-left-color:var(--bad);background:var(--bad-bg)}
header.verdict.v-ok{border-left-color:var(--ok);background:var(--ok-bg)}
header.verdict.v-warn{border-left-color:var(--warn);background:var(--warn-bg)}
header.verdict.v-bad h1{color:#8c1d18}
.kicker{font-size:12px;letter-spacing:.06em;text-transform:uppercase;color:var(--muted)}
nav{margin:12px 0 0;font-size:13px}
nav a{color:var(--accent);text-decoration:none;margin-right:14px}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;vertical-align:top;padding:5px 8px;border-bottom:1px solid var(--line)}
th{font-size:12px;font-weight:600;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
dl.facts{display:grid;grid-template-columns:110px 1fr;gap:4px 14px;margin:0}
dl.facts dt{color:var(--muted);font-size:13px;padding-top:1px}
dl.facts dd{margin:0;overflow-wrap:anywhere}
.cause{display:inline-block;font-weight:600;color:#fff;background:var(--bad);border-radius:4px;padding:1px 8px;font-size:13px}
.summary{font-size:16px;margin:6px 0 10px}
ul.evidence{margin:4px 0 0;padding-left:20px}
.box{border:1px solid var(--line);border-radius:8px;padding:12px 16px;margin:10px 0}
.fix{border-left:5px solid var(--ok);background:var(--ok-bg)}
.warnbox{border-left:5px solid var(--warn);background:var(--warn-bg)}
.chip{display:inline-block;border:1px solid var(--line);border-radius:10px;padding:0 7px;margin:1px 2px 1px 0;font-size:12px;background:#fff;white-space:nowrap}
.chip.algo{border-color:#8fb8e6;background:#eef5fd}
.chip.rng{border-color:#d2a8ff;background:#f6efff}
.chip.op{border-color:#c9d1d9}
.dg{font-family:var(--mono);font-size:12px;padding:0 4px;border-radius:3px;background:var(--soft);margin-right:3px;white-space:nowrap}
.dg.diff{background:var(--bad);color:#fff;font-weight:600}
.dg.same{color:var(--ok)}
table.tl{table-layout:fixed}
table.tl td{padding:4px 8px;font-size:13px}
table.tl col.off{width:54px}
table.tl td.off{font-family:var(--mono);color:var(--muted);text-align:right}
table.tl td.op{overflow:hidden}
table.tl .name{font-family:var(--mono);font-size:13px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
table.tl .meta{color:var(--muted);font-size:12px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
table.tl tr.div td{background:var(--bad-bg);border-top:2px solid var(--bad);border-bottom:2px solid var(--bad)}
table.tl tr.div td.off{color:var(--bad);font-weight:700}
table.tl tr.stretch td{background:var(--warn-bg)}
table.tl tr.elided td{text-align:center;color:var(--muted);font-style:italic}
table.tl tr.after td.op{opacity:.92}
table.tl td.none{color:var(--muted);font-style:italic}
.tag{font-size:11px;font-weight:700;color:#fff;background:var(--bad);border-radius:3px;padding:0 5px;margin-right:6px;vertical-align:1px}
.tag.path{background:var(--warn)}
.tag.also{background:#8250df}
.s{display:inline-block;min-width:22px;text-align:center;border-radius:3px;font-size:11px;font-weight:600;padding:0 4px;margin-right:6px;color:#fff}
.meter{height:10px;background:var(--soft);border:1px solid var(--line);border-radius:5px;overflow:hidden;max-width:420px}
.meter>span{display:block;height:100%;background:var(--bad)}
.cols{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:16px}
.cols .chip,dd .chip{white-space:normal}
.cols .mono{overflow-wrap:anywhere}
table.tl .anns{line-height:1.35}
table.tl .anns .chip{max-width:100%;overflow:hidden;text-overflow:ellipsis;vertical-align:bottom}
.ok{color:var(--ok)}.bad{color:var(--bad)}.warn{color:var(--warn)}
pre{font-family:var(--mono);font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere;max-height:360px;overflow:auto;margin:0}
table.lanes{width:auto;border-collapse:separate;border-spacing:3px 4px;margin:4px 0 0}
table.lanes th{font-size:12px;text-transform:none;letter-spacing:0;padding:0 10px 0 0;border:0;white-space:nowrap;color:var(--muted)}
.c{display:inline-block;width:18px;height:16px;padding:0;border-radius:3px;border:0;vertical-align:middle}
table.lanes td.c{display:table-cell;border-bottom:0;font-size:11px;text-align:center;color:var(--muted);line-height:1}
.c.eq{background:#9fd5b0}.c.ne{background:var(--bad)}.c.path{background:#e3b341}.c.unk{background:#c9d1d9}
.c.d{box-shadow:0 0 0 2px #fff,0 0 0 4px var(--fg)}
.legend .c{margin:0 4px 0 12px}.legend .c:first-child{margin-left:0}
footer{margin-top:36px;color:var(--muted);font-size:12px;border-top:1px solid var(--line);padding-top:10px}
)css";

}  // namespace

std::string renderHtml(const Report& given) {
  using namespace html;
  // The job's view first: the page leads with its earliest origin.
  const std::optional<JobView> computed = given.diff && !given.job ? jobView(*given.diff) : std::nullopt;
  const std::optional<JobView>& job = given.job ? *given.job : computed;
  Report report = given;
  report.job = &job;
  Page page;
  const Headline h = headline(report);
  page.add("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
  page.add("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
  page.addf("<title>gpurr: {}</title>\n", e(h.title));
  page.addf("<style>{}</style>\n</head>\n<body>\n<main>\n", kStyle);
  renderHeader(page, report, job ? &*job : nullptr);
  renderRuns(page, report);
  renderJob(page, report, job ? &*job : nullptr);
  renderCause(page, report);
  renderReplay(page, report);
  renderTimeline(page, report);
  renderBlast(page, report);
  renderEnvironment(page, report);
  page.add("<footer>Made by gpurr. Event numbers (#) are as <code>gpurr dump --range N</code> shows them; launch numbers count "
           "launches from 0 in each run.</footer>\n");
  page.add("</main>\n</body>\n</html>\n");
  return page.html;
}

}  // namespace gpurr::report
