// The ranks of a directory comparison (ranks.h): counts, the ranks missing
// from a run, the traces that did not end cleanly and those that could not
// be read.
#include "report/ranks.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "diff/model.h"

namespace gpurr::report {

namespace {

std::string listed(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}


}  // namespace

void printRanks(std::ostream& os, const Style& st, const RunComparison& c) {
  if (!c.directories) return;
  if (c.onlyA.empty() && c.onlyB.empty() && c.incompleteA.empty() && c.incompleteB.empty() && c.unreadable.empty())
    return;
  os << st.yellow(fmt::format("ranks: {} in {}, {} in {}", c.tracesA, c.a, c.tracesB, c.b)) << '\n';
  // Present in the other run only: missing from this one.
  for (const auto& [names, run] : {std::pair{&c.onlyB, &c.a}, std::pair{&c.onlyA, &c.b}}) {
    if (!names->empty()) os << st.yellow(fmt::format("  missing in {}: {}", *run, listed(*names))) << '\n';
  }
  // With the operations each kept: of ranks cut short together (a rank
  // killed, the others then ended by their launcher), the one that kept
  // far fewer is likely the one that died first.
  for (const auto& [traces, run] : {std::pair{&c.incompleteA, &c.a}, std::pair{&c.incompleteB, &c.b}}) {
    // A line for each cause, those whose recording did not end cleanly first.
    std::vector<std::pair<std::string, std::string>> causes;  // (cause, how far read)
    for (const IncompleteTrace& t : *traces) {
      const std::pair cause{t.cause, t.readsTo};
      if (std::ranges::find(causes, cause) == causes.end()) causes.push_back(cause);
    }
    const std::string unclosed = trace::Damage{}.cause();  // "the recording did not end cleanly"
    std::ranges::stable_partition(causes, [&](const auto& x) { return x.first == unclosed; });
    for (const auto& [cause, readsTo] : causes) {
      std::vector<std::string> kept;
      for (const IncompleteTrace& t : *traces) {
        if (t.cause != cause || t.readsTo != readsTo) continue;
        const auto p = std::find_if(c.processes.begin(), c.processes.end(),
                                    [&](const diff::ProcessDiff& d) { return d.name == t.name; });
        const uint64_t ops = p == c.processes.end() ? 0 : traces == &c.incompleteA ? p->opsA : p->opsB;
        kept.push_back(p == c.processes.end() ? t.name
                       : ops == 0             ? t.name + " (no operation kept)"
                                              : fmt::format("{} ({} kept)", t.name, diff::plural(ops, "operation")));
      }
      os << st.yellow(fmt::format("  incomplete in {}: {} ({}: compared up to {})", *run, listed(kept), cause,
                                  readsTo))
         << '\n';
    }
  }
  for (const IncompleteTrace& t : c.unreadable) {
    os << st.yellow(fmt::format("  unreadable: {}, not compared: {}", t.name, t.detail)) << '\n';
  }
}

nlohmann::ordered_json ranksJson(const RunComparison& c) {
  using Json = nlohmann::ordered_json;
  if (!c.directories) return nullptr;
  auto incomplete = [](const std::vector<IncompleteTrace>& traces) {
    Json out = Json::array();
    for (const IncompleteTrace& t : traces) out.push_back({{"process", t.name}, {"detail", t.detail}});
    return out;
  };
  return Json{{"a", c.tracesA},
              {"b", c.tracesB},
              {"missing", {{"a", c.onlyB}, {"b", c.onlyA}}},
              {"incomplete", {{"a", incomplete(c.incompleteA)}, {"b", incomplete(c.incompleteB)}}},
              {"unreadable", incomplete(c.unreadable)}};
}

}  // namespace gpurr::report
