// Loading and matching the known-culprits file.
#include "diff/culprits.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/name_pattern.h"
#include "common/text.h"

namespace gpurr::diff {
namespace fs = std::filesystem;

namespace {

std::optional<Cause> causeNamed(const std::string& name) {
  for (Cause c : {Cause::kEnvironment, Cause::kHostInput, Cause::kRngState,
                  Cause::kScalarParameters, Cause::kAlgorithmChoice, Cause::kReordered,
                  Cause::kNondeterministicKernel, Cause::kUninitialisedMemory}) {
    if (name == jsonName(c)) return c;
  }
  return std::nullopt;
}

}  // namespace

Culprits Culprits::load(const fs::path& file) {
  std::error_code ec;
  if (fs::is_directory(file, ec)) {
    throw std::runtime_error(fmt::format("{}: a directory, not the known-culprits file (a JSON file)", file.string()));
  }
  std::ifstream in(file);
  if (!in) {
    throw std::runtime_error(fmt::format("{}: cannot read the known-culprits file", file.string()));
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    // Without the library's tag ("[json.exception.parse_error.101] ").
    std::string what = e.what();
    if (const size_t tag = what.find("] "); what.rfind("[json.exception.", 0) == 0 && tag != std::string::npos) {
      what = what.substr(tag + 2);
    }
    throw std::runtime_error(fmt::format("{}: not valid JSON: {}", file.string(), what));
  }
  if (!doc.is_object() || !doc.contains("entries") || !doc["entries"].is_array()) {
    throw std::runtime_error(
        fmt::format("{}: expected an object with an \"entries\" array", file.string()));
  }
  Culprits out;
  size_t n = 0;
  for (const auto& e : doc["entries"]) {
    ++n;
    auto where = [&](const std::string& problem) {
      return std::runtime_error(fmt::format("{}: entry {}: {}", file.string(), n, problem));
    };
    if (!e.is_object()) throw where("not an object");
    auto text = [&](const char* key) -> std::string {
      if (!e.contains(key)) return "";
      if (!e[key].is_string()) throw where(fmt::format("\"{}\" must be a string", key));
      return e[key].get<std::string>();
    };
    Entry entry;
    entry.id = text("id");
    entry.kernelPattern = text("kernel");
    entry.frameworkOpPattern = text("frameworkOp");
    entry.forwardOpPattern = text("forwardOp");
    entry.library = text("library");
    entry.environment = text("environment");
    entry.op = text("op");
    entry.why = text("why");
    entry.fix = text("fix");
    entry.source = text("source");
    entry.argument = text("argument");
    if (entry.id.empty() || entry.op.empty() || entry.fix.empty()) {
      throw where("\"id\", \"op\" and \"fix\" are required");
    }
    if (entry.kernelPattern.empty() && entry.frameworkOpPattern.empty() && entry.forwardOpPattern.empty() &&
        entry.library.empty() && entry.environment.empty()) {
      throw where(fmt::format("{}: needs one of \"kernel\", \"frameworkOp\", \"forwardOp\", "
                              "\"library\", \"environment\" to match on",
                              entry.id));
    }
    try {
      if (!entry.kernelPattern.empty()) entry.kernel = namePattern(entry.kernelPattern);
      if (!entry.frameworkOpPattern.empty()) {
        entry.frameworkOp = namePattern(entry.frameworkOpPattern);
      }
      if (!entry.forwardOpPattern.empty()) {
        entry.forwardOp = namePattern(entry.forwardOpPattern);
      }
    } catch (const std::regex_error& err) {
      throw where(fmt::format("{}: invalid regular expression: {}", entry.id, err.what()));
    }
    if (e.contains("causes")) {
      if (!e["causes"].is_array()) throw where("\"causes\" must be an array of cause names");
      for (const auto& c : e["causes"]) {
        const auto cause = c.is_string() ? causeNamed(c.get<std::string>()) : std::nullopt;
        if (!cause) throw where(fmt::format("{}: unknown cause {}", entry.id, c.dump()));
        entry.causes.push_back(*cause);
      }
    }
    out.entries_.push_back(std::move(entry));
  }
  return out;
}

fs::path Culprits::defaultPath() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "share/gpurr/known_culprits.json";
  return exe.parent_path().parent_path() / "share" / "gpurr" / "known_culprits.json";
}

namespace {

// Where a match was found, in the program's terms:
// "aten::index_add_, backward of aten::index_select at train.py:17" (by its
// op), "backward of aten::index_select at train.py:17 (aten::index_add_)"
// (by its forward op).
std::string matchedText(const trace::Origin& o, bool byForwardOp) {
  const bool backward = o.phase == trace::Phase::kBackward && !o.forwardOp.empty();
  std::string s = byForwardOp ? "backward of " + o.forwardOp
                              : o.op + (backward ? ", backward of " + o.forwardOp : std::string());
  if (const std::string at = trace::sourceLine(o); !at.empty()) s += " at " + at;
  if (byForwardOp && !o.op.empty()) s += " (" + o.op + ")";
  return text::oneLine(std::move(s));
}

// The framework op of an operation: its origin's, else a FrameworkOp
// annotation's (as trace::frameworkOpOf for an event).
std::string frameworkOpOf(const OpInfo& op) {
  if (op.origin && !op.origin->op.empty()) return op.origin->op;
  for (const trace::Annotation& a : op.annotations) {
    if (const auto* f = std::get_if<trace::FrameworkOp>(&a)) return f->name;
  }
  return {};
}

// How strong a match is: by what the program called first.
int strength(const std::string& by) {
  for (int i = 0; const char* name : {"framework op", "forward op", "kernel", "library", "environment"}) {
    if (by == name) return i;
    ++i;
  }
  return 5;
}

}  // namespace

std::vector<CulpritMatch> Culprits::match(const FirstDivergence& d,
                                          const std::vector<EnvDifference>& environment) const {
  std::vector<CulpritMatch> out;
  std::vector<const OpInfo*> ops = {&d.a, &d.b};
  if (d.stretch) {
    for (const OpInfo& o : d.stretch->aOps) ops.push_back(&o);
    for (const OpInfo& o : d.stretch->bOps) ops.push_back(&o);
  }
  std::erase_if(ops, [](const OpInfo* op) { return op->name.empty(); });
  std::vector<std::string> kernels;  // each op's name demangled, once
  for (const OpInfo* op : ops) kernels.push_back(op->kind == OpKind::kLaunch ? demangled(op->name) : "");
  for (const Entry& e : entries_) {
    if (!e.causes.empty()) {
      bool applies = false;
      for (Cause c : e.causes) applies = applies || c == d.cause || c == d.mechanism;
      if (!applies) continue;
    }
    std::string by, matched;
    // The framework op: the origin's, else (traces without one) a FrameworkOp
    // annotation's.
    for (const OpInfo* op : ops) {
      if (!by.empty() || !e.frameworkOp) break;
      if (op->origin && !op->origin->op.empty()) {
        if (std::regex_search(op->origin->op, *e.frameworkOp)) {
          by = "framework op";
          matched = matchedText(*op->origin, false);
        }
        continue;
      }
      for (const trace::Annotation& a : op->annotations) {
        const auto* f = std::get_if<trace::FrameworkOp>(&a);
        if (f && by.empty() && std::regex_search(f->name, *e.frameworkOp)) by = "framework op";
      }
    }
    // In backward, the forward op whose gradient it computes.
    for (const OpInfo* op : ops) {
      if (!by.empty() || !e.forwardOp) break;
      const auto& o = op->origin;
      if (o && o->phase == trace::Phase::kBackward && !o->forwardOp.empty() &&
          std::regex_search(o->forwardOp, *e.forwardOp)) {
        by = "forward op";
        matched = matchedText(*o, true);
      }
    }
    // The kernel name stands for the op: for an entry that names ops, only
    // where the framework op is unknown (a kernel can serve several ops).
    const bool namesOps = e.frameworkOp || e.forwardOp;
    for (size_t i = 0; i < ops.size(); ++i) {
      const OpInfo* op = ops[i];
      if (!by.empty() || !e.kernel) break;
      if (namesOps && !frameworkOpOf(*op).empty()) continue;
      if (op->kind == OpKind::kLaunch && std::regex_search(kernels[i], *e.kernel)) {
        by = "kernel";
        if (op->origin) matched = matchedText(*op->origin, false);  // where it ran: a compiled region, an op
      }
    }
    for (const OpInfo* op : ops) {
      if (!by.empty() || e.library.empty()) break;
      for (const trace::Annotation& a : op->annotations) {
        const auto* g = std::get_if<trace::AlgorithmChoice>(&a);
        if (g && g->library == e.library) by = "library";
      }
    }
    if (by.empty() && !e.environment.empty()) {
      for (const EnvDifference& env : environment) {
        if (env.field == "env " + e.environment) by = "environment";
      }
    }
    if (by.empty()) continue;
    out.push_back({e.id, e.op, e.why, e.fix, e.source, by, matched, e.argument});
  }
  std::stable_sort(out.begin(), out.end(), [](const CulpritMatch& x, const CulpritMatch& y) {
    return strength(x.matchedBy) < strength(y.matchedBy);
  });
  return out;
}

}  // namespace gpurr::diff
