// renderHtml on reports built from the golden diff cases and bisect-shaped
// fixtures: sections present or absent as the report says, escaping of what
// comes from the traces, no external reference, and no crash on any
// missing, null or mistyped key of the objects it shows as they are (the
// replay's, the timeline's).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <regex>
#include <string>
#include <vector>

#include "model_util.h"
#include "report_test_util.h"

using namespace gpurr;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A report for a golden case: `base` (a fixture with the bisect keys, or
// none for a diff-only report) plus the case's diff and timeline.
testutil::TestReport reportFor(const std::string& name, const std::string& base = "") {
  const fs::path dir = testutil::caseDir(name);
  testutil::TestReport report;
  // Two traces, or two directories of per-process traces.
  report.diff = fs::exists(dir / "a.gpurr") ? testutil::compare(dir / "a.gpurr", dir / "b.gpurr")
                                            : testutil::compare(dir / "a", dir / "b");
  report.timeline = testutil::timelineOf(*report.diff);
  if (!base.empty()) report.bisect = testutil::bisectFrom(testutil::loadJson(testutil::fixture(base)));
  return report;
}

bool has(const std::string& html, const std::string& s) { return html.find(s) != std::string::npos; }

bool hasSection(const std::string& html, const std::string& id) {
  return has(html, "<section id=\"" + id + "\"");
}

// Everything a browser could fetch, or run, from the page.
void requireSelfContained(const std::string& html) {
  std::string lower = html;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* bad : {"http:", "https:", "ftp:", "file:", "data:", "//", "src=", "url(", "@import", "<link",
                          "<img", "<script", "<iframe", "<object", "<embed", "srcset", "@font-face"}) {
    INFO(bad);
    // "//" may appear in text, never in markup: checked on attribute values below.
    if (std::string(bad) == "//") continue;
    CHECK_FALSE(has(lower, bad));
  }
  const std::regex attr(R"re(\b(href|action|formaction|poster|background|xlink:href)\s*=\s*"([^"]*)")re");
  for (auto it = std::sregex_iterator(lower.begin(), lower.end(), attr); it != std::sregex_iterator(); ++it) {
    INFO((*it)[0].str());
    CHECK((*it)[2].str().rfind("#", 0) == 0);
  }
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(has(html, "</html>"));
  // Every in-page link has its target.
  const std::regex link(R"re(href="#([^"]*)")re");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), link); it != std::sregex_iterator(); ++it) {
    INFO((*it)[0].str());
    CHECK(has(html, "id=\"" + (*it)[1].str() + "\""));
  }
}

}  // namespace

TEST_CASE("a diverged bisect report with replay: every section, the divergent launch marked") {
  const std::string html = reportFor("nondeterministic_kernel", "bisect_replayed.json").html();
  requireSelfContained(html);
  for (const char* id : {"runs", "cause", "replay", "timeline", "blast", "environment"}) {
    INFO(id);
    CHECK(hasSection(html, id));
  }
  CHECK(has(html, "gpurr bisect report"));
  CHECK(has(html, "<h1>Diverged at launch #3 at::native::indexFuncLargeIndex&lt;float&gt; \u2014 nondeterministic kernel</h1>"));
  CHECK(has(html, "<code>python train.py --steps 1</code>"));
  CHECK(has(html, "<code>gpurr record --kernels index.* --sync</code>"));
  CHECK(has(html, "gpurr-bisect/run3.log"));
  // Cause and evidence.
  CHECK(has(html, "nondeterministic kernel: same inputs and parameters, different outputs"));
  CHECK(has(html, "all 3 inputs are identical (digests equal)"));
  CHECK(has(html, "identical (3 buffers, 9.0 KiB hashed)"));
  CHECK(has(html, "<td>output 0</td><td><code>alloc#4+0x0</code></td><td>4.0 KiB</td><td>3 of 4</td>"));
  CHECK(has(html, "4 of 1,024"));
  CHECK(has(html, "5.96e-08"));
  CHECK(has(html, "the recorder re-ran it 50 times: 31 distinct results"));
  // Known culprit, cited without a link.
  CHECK(has(html, "<b>Fix:</b> torch.use_deterministic_algorithms(True)"));
  // Replay.
  CHECK(has(html, "<b>nondeterministic</b>"));
  CHECK(has(html, "31 distinct results in 50 re-executions from the recorded inputs"));
  CHECK(has(html, "<a href=\"#divergent-row\">"));
  CHECK(has(html, "<dt>runs per result</dt><dd>5, 4, 3, 3, 2, 2, 2, 2, 2, 1, 1, 1, ...</dd>"));
  CHECK(has(html, "2 of 50 equal to the recorded outputs"));
  CHECK(has(html, "<h3>Run 1 against run 8, the first that differed</h3>"));
  CHECK(has(html, "<td><code>alloc#4+0x0</code></td><td>4.0 KiB</td><td>2 of 4</td><td>3 of 1,024 f32 (assumed)</td><td>5.96e-08</td><td>1</td>"));
  CHECK_FALSE(has(html, "Run 1 against the recording"));
  CHECK(has(html, "the run with snapshots (of launch #3) diverges at the same operation: reproduced"));
  CHECK(has(html, "<td>3 <span class=\"chip\" title=\"recorded with --snapshot 3\">snapshots 3</span></td>"));
  CHECK(has(html, "<span class=\"muted\">written to</span> <code>gpurr-bisect</code>"));
  // Timeline: one divergent row, with the differing output digest marked.
  CHECK(has(html, "id=\"divergent-row\""));
  CHECK(html.find("id=\"divergent-row\"") == html.rfind("id=\"divergent-row\""));
  const size_t row = html.find("id=\"divergent-row\"");
  const size_t rowEnd = html.find("</tr>", row);
  const std::string divergent = html.substr(row, rowEnd - row);
  CHECK(has(divergent, "DIVERGES"));
  CHECK(has(divergent, "at::native::indexFuncLargeIndex&lt;float&gt;"));
  CHECK(has(divergent, "class=\"dg diff\""));
  CHECK(has(divergent, "class=\"dg same\""));
  CHECK(has(divergent, "re-run 50 times in process: 31 distinct results"));
  // Where it came from: the op row, the culprit's match, the timeline's
  // label (the op stack in its tooltip).
  CHECK(has(html, "<dt>op</dt><dd class=\"origin\" title=\"autograd::engine::evaluate_function: IndexSelectBackward0 "
                  "&gt; IndexSelectBackward0 &gt; aten::index_select_backward &gt; aten::index_add_\">aten::index_add_ "
                  "(backward of aten::index_select) in net.embed, train.py:17, step 0 (launch 4 of the step)</dd>"));
  CHECK(has(html, "(matched by framework op: aten::index_add_, backward of aten::index_select at train.py:17)"));
  CHECK(has(divergent, "<span class=\"chip op\">aten::index_add_</span> backward of aten::index_select &middot; "
                       "net.embed &middot; train.py:17 &middot; step 0</div>"));
  CHECK(has(html, "<span class=\"chip op\">aten::mm</span> &middot; net.fc &middot; train.py:16 &middot; step 0</div>"));
  // Blast radius.
  CHECK(has(html, "<b>2 of 2</b> later operations (1 of 1 launches) read data derived from the divergent output."));
  CHECK(has(html, "No independent divergence: all 2 later divergent operations read data derived from it."));
  CHECK(has(html, "No difference in the recorded environment"));
}

TEST_CASE("a diverged report whose replay failed says why") {
  const std::string html = reportFor("nondeterministic_kernel", "bisect_replay_failed.json").html();
  requireSelfContained(html);
  CHECK(hasSection(html, "replay"));
  CHECK(has(html, "Replay did not run: no GPU: libcuda.so.1 could not be loaded"));
  CHECK_FALSE(has(html, "runs per result"));
  CHECK_FALSE(has(html, "confirmation"));
}

TEST_CASE("a path divergence: both stretches with their algorithm choices") {
  const std::string html = reportFor("algorithm_choice").html();
  requireSelfContained(html);
  CHECK(has(html, "Diverged: the runs take different paths at launch #1"));
  CHECK(has(html, "algorithm choice"));
  CHECK(has(html, "run A alone: 1 operation"));
  CHECK(has(html, "run B alone: 3 operations"));
  CHECK(has(html, "cudnn cudnnBackendExecute chose engine=12 (FFT) (autotuned among 3: engine=3 0.041 ms"));
  CHECK(has(html, "cudnn_fft_cgemm_batched_kernel"));
  CHECK(has(html, "<span class=\"tag path\">PATH</span>"));
  CHECK(has(html, "(not in this run)"));
  CHECK(has(html, "<td class=\"c path d\" title=\"#10 cudnn_fft_r2c_nhwc_input_transform_kernel\"></td>"));
  CHECK(has(html, "source: docs.pytorch.org/docs/stable/notes/randomness.html"));
  // A diff-only report has no runs and no replay.
  CHECK(has(html, "gpurr diff report"));
  CHECK_FALSE(hasSection(html, "runs"));
  CHECK_FALSE(hasSection(html, "replay"));
  CHECK(hasSection(html, "timeline"));
}

TEST_CASE("a reordering: the same operations in another order, both ends shown") {
  const std::string html = reportFor("reordered").html();
  requireSelfContained(html);
  CHECK(has(html, "Diverged: the runs do the same operations in another order at memset (operation #11)"));
  CHECK(has(html, "<span class=\"cause\">reordered</span>"));
  CHECK(has(html, "reordered: run B does this operation 1 operation later"));
  CHECK(has(html, "the runs do the same operations in another order at memset"));
  CHECK(has(html, "run A: 1 operation"));
  CHECK(has(html, "run B: nothing here: the reordered operations are among its operations #11 to #12"));
  CHECK(has(html, "host thread 0 issued its own operations in another order"));
  CHECK_FALSE(has(html, "alone:"));
}

TEST_CASE("parameters and environment differences") {
  const std::string rng = reportFor("rng_state").html();
  requireSelfContained(rng);
  CHECK(has(rng, "<h3>Parameters that differ</h3>"));
  CHECK(has(rng, "philox seed/offset"));
  CHECK(has(rng, "philox generator cuda:0 seed 2718281828 offset 8"));
  CHECK(has(rng, "<h3>Algorithm and RNG annotations</h3>"));
  CHECK(has(rng, ">aten::native_dropout inside aten::dropout (forward) in net.drop, train.py:16, step 0 (launch 3 of "
                 "the step)</dd>"));
  // Origins that differ between the runs: one line per run.
  const std::string adam = reportFor("scalar_parameters").html();
  requireSelfContained(adam);
  CHECK(has(adam, "<dt>op</dt><dd class=\"origin\"><div>run A: aten::_fused_adam_ (optimizer step Adam.step), "
                  "train.py:27, step 100 (launch 3 of the step)</div><div>run B: aten::_fused_adam_ (optimizer step "
                  "Adam.step), train.py:27, step 101 (launch 3 of the step)</div></dd>"));
  const std::string env = reportFor("environment").html();
  requireSelfContained(env);
  CHECK(has(env, "<code>env CUBLAS_WORKSPACE_CONFIG</code></td><td><code>:4096:8</code></td><td><span class=\"muted\">(unset)</span>"));
  CHECK(has(env, "At the operation itself: nondeterministic kernel."));
  const std::string uninit = reportFor("uninitialised_memory").html();
  CHECK(has(uninit, "<h3>Inputs that differ</h3>"));
  CHECK(has(uninit, "never written before this launch"));
  const std::string two = reportFor("two_independent").html();
  CHECK(has(two, "<b>3 independent divergences</b> not explained by the first:"));
  CHECK(has(two, "and 2 more like it (the same op, line and reason), the last in step 0 (run A #19, run B #19)"));
  CHECK(has(two, "at::cuda::kernelHistogram1D&lt;float&gt;"));
  // The independent divergence is marked in the timeline, on both sides.
  size_t also = 0;
  for (size_t at = two.find("class=\"tag also\""); at != std::string::npos; at = two.find("class=\"tag also\"", at + 1)) ++also;
  CHECK(also == 2);
  // The lanes: one per run and stream, the divergent column outlined.
  CHECK(has(two, "<tr><th>run A &middot; s1</th><td class=\"c eq\" title=\"#7 fill_kernel\naten::fill_ (forward), "
                 "train.py:12, step 0 (launch 1 of the step)\"></td>"));
  CHECK(has(two, "<td class=\"c ne d\" title=\"#13 at::native::indexFuncLargeIndex&lt;float&gt;\naten::index_add_ "
                 "(backward of aten::index_select) in net.embed, train.py:17, step 0 (launch 4 of the step)\"></td>"));
  CHECK_FALSE(has(two, "run A &middot; s2"));
}

TEST_CASE("several processes: one cause section per process") {
  const std::string html = reportFor("processes").html();
  requireSelfContained(html);
  CHECK(has(html, "<h3>process <code>rank0.gpurr</code></h3>"));
  CHECK(has(html, "<h3>process <code>rank1.gpurr</code></h3>"));
  CHECK(has(html, "identical: 9 operations match"));
  CHECK(has(html, "<h2>Timeline around the first divergence in process <code>rank1.gpurr</code></h2>"));
  CHECK(has(html, "<h2>Blast radius in process <code>rank1.gpurr</code></h2>"));
}

TEST_CASE("a job of ranks that ran collectives: the job section, ranks side by side, how it spread") {
  // Not requireSelfContained: the processes' causes say "received different
  // data: another rank...", which its search for "data:" takes for a URL.
  const std::string html = reportFor("collectives").html();
  CHECK(hasSection(html, "job"));
  CHECK(has(html, "<a href=\"#job\">Job</a>"));
  CHECK(has(html, "<h2>Job: 2 processes</h2>"));
  // The mismatch of run B, each rank's call.
  CHECK(has(html, "collectives/b</code>: communicator <code>0b0b1d5ec0dd1e55</code>, collective #1 differs between ranks"));
  CHECK(has(html, "<code>ncclAllReduce sum 512 float32 (rank 1 of 2, communicator 0b0b1d5ec0dd1e55, #1)</code>"));
  // The earliest origin, and the ranks side by side.
  CHECK(has(html, "<b>Earliest origin</b><ul class=\"evidence\">\n<li>rank <b>1</b> <code>rank1.gpurr</code>"));
  CHECK(has(html, "<th>rank</th><th>process</th><th>role</th><th>first divergent operation</th><th>line</th>"
                  "<th>step</th><th>cause</th>"));
  CHECK(has(html, "<tr><td><b>0</b></td><td><code>rank0.gpurr</code></td><td class=\"\">receiver</td>"));
  CHECK(has(html, "<tr><td><b>1</b></td><td><code>rank1.gpurr</code></td><td class=\"bad\">origin</td>"));
  CHECK(has(html, "<td>train.py:28</td><td>0</td><td><span class=\"cause\">host input</span></td></tr>"));
  // The receiver's note says where its divergence came from.
  CHECK(has(html, "<td>train.py:30</td><td>0</td><td><span class=\"cause\">collective</span><div class=\"muted\">a "
                  "receiver: rank 1 sent other data to the collective that brought the divergence here (run A #4); it "
                  "began there</div></td></tr>"));
  // How it spread: the first all-reduce, from rank 1 to rank 0.
  CHECK(has(html, "<h3>How it spread</h3>"));
  CHECK(has(html, "<tr><td><code>ncclAllReduce sum 1024 float32 (communicator 5eed0c0111ec71f5, #0)</code></td>"
                  "<td>train.py:30</td><td>0</td><td>rank 1</td><td>rank 0</td></tr>"));
  // The job comes before the processes' causes.
  CHECK(html.find("<section id=\"job\"") < html.find("<section id=\"cause\""));
  // The page leads with the origin, as the text report does: its headline
  // is rank 1's first divergence (a host input), and its cause comes first.
  CHECK(has(html, "<h1>Diverged at memcpy HtoD (operation #0) \u2014 host input</h1>"));
  CHECK(html.find("<h3>process <code>rank1.gpurr</code>") < html.find("<h3>process <code>rank0.gpurr</code>"));
}

TEST_CASE("a rank compared up to where its trace ends is not known in the ranks table, not identical") {
  testutil::TestReport report = reportFor("collectives");
  for (const char* gaps : {"", "run B's trace ends (its recording did not end cleanly) where the other's does"}) {
    diff::ProcessDiff rank{};
    rank.name = "rank2.gpurr";
    rank.rankA = rank.rankB = 2;
    rank.identical = true;
    if (*gaps) rank.gaps = {gaps};
    report.diff->processes.resize(2);
    report.diff->processes.push_back(rank);
    const std::string html = report.html();
    CHECK(has(html, *gaps ? "<tr><td><b>2</b></td><td><code>rank2.gpurr</code></td><td class=\"\">not known</td>"
                          : "<tr><td><b>2</b></td><td><code>rank2.gpurr</code></td><td class=\"ok\">identical</td>"));
  }
}

TEST_CASE("a comparison of directories without collectives has no job section") {
  const std::string html = reportFor("processes").html();
  CHECK_FALSE(hasSection(html, "job"));
  CHECK_FALSE(has(html, "href=\"#job\""));
}

TEST_CASE("a report that was not reproduced") {
  testutil::TestReport report = reportFor("nondeterministic_kernel", "bisect_not_reproduced.json");
  report.confirmation = testutil::compare(testutil::caseDir("identical") / "a.gpurr", testutil::caseDir("identical") / "b.gpurr");
  const std::string html = report.html();
  requireSelfContained(html);
  CHECK(has(html, "<header class=\"verdict v-warn\""));
  CHECK(has(html, "Not reproduced: a further run did not diverge at the same operation (first seen at launch #3"));
  CHECK(has(html, "the run with snapshots does not diverge at the same operation: not reproduced"));
  CHECK(has(html, "against run 1: identical"));
  CHECK(has(html, "Replay was not attempted."));
}

TEST_CASE("identical runs: the verdict, and no cause, timeline rows or blast radius") {
  // gpurr bisect writes no diff and no timeline for identical runs, and
  // what it compared instead.
  testutil::TestReport report;
  report.bisect = testutil::bisectFrom(testutil::loadJson(testutil::fixture("bisect_identical.json")));
  const std::string html = report.html();
  requireSelfContained(html);
  CHECK(has(html, "<header class=\"verdict v-ok\""));
  CHECK(has(html, "Identical: 2 runs produced the same bits"));
  CHECK_FALSE(hasSection(html, "cause"));
  CHECK_FALSE(hasSection(html, "blast"));
  CHECK_FALSE(hasSection(html, "timeline"));
  CHECK_FALSE(hasSection(html, "replay"));
  CHECK(hasSection(html, "runs"));
  CHECK(has(html, "Compared: 2 runs, each 1 process, 5 launches (5 hashed), 3 copies, 1 memsets, 44.0 KiB hashed."));
  CHECK(has(html, "<td><code>command line</code></td><td><code>python train.py</code></td><td>run 2: <code>python train.py --seed=1</code></td>"));
  // A diff-only report of identical traces: an empty timeline.
  const std::string diffOnly = reportFor("identical").html();
  requireSelfContained(diffOnly);
  CHECK(has(diffOnly, "Identical: the runs produced the same bits"));
  CHECK(has(diffOnly, fmt::format("identical: {} operations match, with equal parameters and outputs",
                                  reportFor("identical").diff->processes.front().matched)));
  CHECK_FALSE(hasSection(diffOnly, "cause"));
  CHECK_FALSE(has(diffOnly, "divergent-row"));
  CHECK(has(diffOnly, "No divergence: nothing to show."));
  CHECK(has(diffOnly, "No difference in the recorded environment"));
}

TEST_CASE("runs identical up to where one trace ends early: not known, not diverged") {
  testutil::TestReport report = reportFor("identical");
  report.diff->processes.front().gaps = {"run B's trace ends (its recording did not end cleanly)"};
  REQUIRE(report.diff->unknown());
  const std::string html = report.html();
  requireSelfContained(html);
  CHECK(has(html, "<header class=\"verdict v-warn\""));
  CHECK(has(html, "Not known: the runs agree in all that was compared"));
  CHECK(has(html, "not known: 9 operations match, with equal parameters and outputs, up to where run B&#39;s trace "
                  "ends"));
  CHECK_FALSE(has(html, "Diverged"));
  CHECK_FALSE(has(html, "identical: 9 operations match"));
}

TEST_CASE("a failed bisect: why, and the end of the failed run's log") {
  testutil::TestReport report;
  report.bisect = testutil::bisectFrom(testutil::loadJson(testutil::fixture("bisect_failed.json")));
  const std::string html = report.html();
  requireSelfContained(html);
  CHECK(has(html, "<header class=\"verdict v-bad\""));
  CHECK(has(html, "<h1>Failed: run 1: the command exited with status 1 (gpurr-bisect/run1.log)</h1>"));
  CHECK(has(html, "<pre>run 1 exited with status 1; the end of gpurr-bisect/run1.log:\n  File &quot;train.py&quot;, line 3\n    import torch &lt;&amp; broken"));
  CHECK(has(html, "(not traced)"));
  CHECK_FALSE(hasSection(html, "cause"));
  CHECK_FALSE(hasSection(html, "replay"));
  CHECK_FALSE(hasSection(html, "timeline"));
}

TEST_CASE("text from the traces is escaped: a kernel named <script>") {
  const testutil::TempDir tmp("html_escape");
  testutil::LongRuns runs;
  runs.divergeAt = 200;
  runs.kernel0 = "<script>alert(\"gpurr\")</script>&kernel<'x'>";
  runs.write(tmp.path / "a.gpurr", tmp.path / "b.gpurr");
  testutil::TestReport report;
  report.diff = testutil::compare(tmp.path / "a.gpurr", tmp.path / "b.gpurr");
  report.timeline = testutil::timelineOf(*report.diff);
  REQUIRE(report.diff->processes[0].firstDivergence->a.name == runs.kernel0);
  report.bisect.emplace();
  report.bisect->verdict = "";
  report.bisect->command = {"python", "<b>train</b>.py"};
  const std::string html = report.html();
  requireSelfContained(html);
  CHECK(has(html, "&lt;script&gt;alert(&quot;gpurr&quot;)&lt;/script&gt;&amp;kernel&lt;&#39;x&#39;&gt;"));
  CHECK(has(html, "&lt;b&gt;train&lt;/b&gt;.py"));
  CHECK_FALSE(has(html, "<b>train"));
}

TEST_CASE("escapeHtml") {
  CHECK(report::escapeHtml("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
  CHECK(report::escapeHtml("") == "");
}

namespace {

std::string escapeKey(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

void pointers(const json& j, const std::string& at, std::vector<std::string>& out) {
  out.push_back(at);
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) pointers(it.value(), at + "/" + escapeKey(it.key()), out);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) pointers(j[i], at + "/" + std::to_string(i), out);
  }
}

}  // namespace

TEST_CASE("missing, null and mistyped keys of the replay and the timeline never break the page") {
  for (const char* name : {"nondeterministic_kernel", "algorithm_choice", "reordered", "two_independent"}) {
    testutil::TestReport report = reportFor(name, "bisect_replayed.json");
    report.confirmation = report.diff;
    // The objects the page shows as they are: what `gpurr replay --json`
    // wrote, and the timeline.
    json full{{"replay", json(*report.bisect->replay)}, {"timeline", report.timeline}};
    auto render = [&] {
      report.bisect->replay = gpurr::report::Json(full["replay"]);
      report.timeline = full["timeline"];
      return report.html();
    };
    std::vector<std::string> paths;
    pointers(full, "", paths);
    // One of each other type: null, string, negative and fractional numbers,
    // array, object, bool.
    const std::vector<json> replacements = {nullptr, "x<y>", -1, 1.5, json::array({1, "a", nullptr}),
                                            json::object(), true};
    size_t renders = 0;
    // Each change is made in place and undone, so that no render sees two.
    for (const std::string& p : paths) {
      if (p.empty()) continue;
      const json::json_pointer ptr(p);
      const json::json_pointer parentPtr = ptr.parent_pointer();
      json& parent = full.at(parentPtr);
      const json saved = full.at(ptr);
      {
        INFO(name << " without " << p);
        if (parent.is_object()) {
          parent.erase(ptr.back());
        } else {
          parent.erase(std::stoul(ptr.back()));
        }
        std::string html;
        REQUIRE_NOTHROW(html = render());
        CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
        if (parent.is_object()) {
          parent[ptr.back()] = saved;
        } else {
          parent.insert(parent.begin() + static_cast<std::ptrdiff_t>(std::stoul(ptr.back())), saved);
        }
      }
      for (const json& r : replacements) {
        full.at(ptr) = r;
        INFO(name << " with " << p << " = " << r.dump());
        REQUIRE_NOTHROW(render());
        ++renders;
      }
      full.at(ptr) = saved;
    }
    CHECK(renders > 1000);
  }
  // A report of nothing, with a timeline of any type.
  for (const json& odd : {json(), json::array(), json("report"), json(42), json::object()}) {
    testutil::TestReport report;
    report.timeline = odd;
    const std::string html = report.html();
    CHECK(has(html, "No verdict"));
    requireSelfContained(html);
  }
}
