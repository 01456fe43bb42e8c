// timelineAround: the two runs' operations around their first divergence,
// read from the traces with as few block decodes as the window allows.
#include "report/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "report/event_json.h"
#include "report/words.h"
#include "report/text.h"
#include "trace_format/scan.h"
#include "trace_format/trace.h"

namespace gpurr::report {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace gpurr::trace;

// ------------------------------------------------------------ what the diff says

struct Stretch {
  uint64_t aBegin = 0, aCount = 0, bBegin = 0, bCount = 0;
};

std::optional<Stretch> stretchOf(const diff::PathDivergence& p) {
  if (p.aCount == 0 && p.bCount == 0) return std::nullopt;
  return Stretch{p.aBegin, p.aCount, p.bBegin, p.bCount};
}

// Stream ordinals the diff printed, learnt from every operation it names:
// seq -> ordinal, per side.
void collectOrdinals(const diff::OpInfo& op, std::unordered_map<uint64_t, uint32_t>& out) {
  out.emplace(op.seq, op.stream);
}

void collectStretchOrdinals(const diff::PathDivergence& stretch, std::unordered_map<uint64_t, uint32_t>& a,
                            std::unordered_map<uint64_t, uint32_t>& b) {
  for (const diff::OpInfo& op : stretch.aOps) collectOrdinals(op, a);
  for (const diff::OpInfo& op : stretch.bOps) collectOrdinals(op, b);
}

// ------------------------------------------------------------ one operation as JSON

json rangeJson(const DeviceRange& r, uint64_t digest) {
  return json{{"address", r.address}, {"allocation", r.allocation}, {"offset", r.offset},
              {"size", r.size}, {"digest", hex16(digest)}, {"same", nullptr}};
}

json rangeList(const std::vector<RangeDigest>& ranges) {
  json out = json::array();
  for (const RangeDigest& r : ranges) out.push_back(rangeJson(r.range, r.digest));
  return out;
}

const char* memcpyName(MemcpyKind kind) {
  switch (kind) {
    case MemcpyKind::kHostToDevice: return "memcpy HtoD";
    case MemcpyKind::kDeviceToHost: return "memcpy DtoH";
    case MemcpyKind::kDeviceToDevice: return "memcpy DtoD";
    case MemcpyKind::kHostToHost: return "memcpy HtoH";
    case MemcpyKind::kPeer: return "memcpy peer";
    case MemcpyKind::kUnknown: break;
  }
  return "memcpy";
}

json dims(const Dim3& d) { return json::array({d.x, d.y, d.z}); }

// The operation, with the same inputs and outputs the diff compares: a
// copy writes its destination and reads its source only when that is
// device memory; a memset writes its range.
json opJson(const Event& e, uint64_t index, std::optional<uint64_t> launchIndex) {
  json j{{"seq", e.seq}, {"index", index}, {"launchIndex", nullptr}};
  json inputs = json::array(), outputs = json::array(), annotations = json::array();
  uint64_t stream = 0;
  bool hashed = true;
  if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) {
    j["kind"] = "launch";
    if (launchIndex) j["launchIndex"] = *launchIndex;
    j["name"] = k->function;
    j["demangled"] = demangled(k->function);
    j["short"] = shortKernelName(k->function);
    j["grid"] = dims(k->grid);
    j["block"] = dims(k->block);
    stream = k->stream;
    hashed = k->hashed;
    inputs = rangeList(k->inputs);
    outputs = rangeList(k->outputs);
    for (const Annotation& a : k->annotations) annotations.push_back(json(toJson(a)));
  } else if (const auto* m = std::get_if<Memcpy>(&e.payload)) {
    j["kind"] = "memcpy";
    j["name"] = j["demangled"] = j["short"] = memcpyName(m->kind);
    stream = m->stream;
    if (readsDeviceMemory(m->kind)) {
      inputs.push_back(rangeJson(m->src, m->digest));
    }
    outputs.push_back(rangeJson(m->dst, m->digest));
  } else if (const auto* s = std::get_if<Memset>(&e.payload)) {
    j["kind"] = "memset";
    j["name"] = j["demangled"] = j["short"] = "memset";
    stream = s->stream;
    outputs.push_back(rangeJson(s->dst, s->digest));
  } else if (const auto* g = std::get_if<GraphLaunch>(&e.payload)) {
    j["kind"] = "graph";
    j["name"] = j["demangled"] = j["short"] = describe(*g);
    stream = g->stream;
    inputs = rangeList(g->inputs);
    outputs = rangeList(g->outputs);
  } else if (const auto* c = std::get_if<Collective>(&e.payload)) {
    j["kind"] = "collective";
    j["name"] = j["demangled"] = j["short"] = describe(*c);
    stream = c->stream;
    inputs = rangeList(c->inputs);
    outputs = rangeList(c->outputs);
  }
  j["stream"] = stream;
  j["streamOrdinal"] = nullptr;
  j["hashed"] = hashed;
  j["inputs"] = std::move(inputs);
  j["outputs"] = std::move(outputs);
  j["annotations"] = std::move(annotations);
  j["origin"] = e.origin ? json(toJson(*e.origin)) : json(nullptr);
  return j;
}

// ------------------------------------------------------------ reading one side

struct Side {
  fs::path path;
  std::optional<uint64_t> anchorSeq;  // unknown for a stretch empty on this side
  uint64_t anchorIndex = 0;
  std::optional<uint64_t> anchorLaunch;  // the anchor's launch number, the recorder's (OpInfo::launchIndex)
  std::unordered_map<uint64_t, uint32_t> ordinalsBySeq;  // from the diff
  std::map<uint64_t, json> ops;                           // by operation index
};

// Event number of operation `target`, counting backwards from the anchor
// (whose index and seq the diff gives): decodes the anchor's block and as
// many earlier ones as the window reaches into.
uint64_t seqBefore(const TraceReader& reader, const Side& side, uint64_t target) {
  const uint64_t need = side.anchorIndex - target;
  if (need == 0) return *side.anchorSeq;
  uint64_t counted = 0;
  std::vector<Event> events;
  for (size_t b = reader.blockOf(*side.anchorSeq) + 1; b-- > 0;) {
    if (b >= reader.blocks().size()) continue;
    events.clear();
    reader.readBlock(b, events);
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if (it->seq >= *side.anchorSeq || !isOperation(*it)) continue;
      if (++counted == need) return it->seq;
    }
  }
  throw std::invalid_argument(fmt::format(
      "{}: the diff places event #{} at operation {}, but only {} operations precede it: the diff "
      "was made from other traces",
      reader.path().string(), *side.anchorSeq, side.anchorIndex, counted));
}

// Event number of operation `target` by counting from the start (a side
// whose divergence is an empty stretch has no event to start from).
std::optional<uint64_t> seqByCount(const TraceReader& reader, uint64_t target) {
  std::optional<uint64_t> found;
  uint64_t count = 0;
  scanEvents(reader, [&](const ScanEvent& e) {
    if (!isOperation(e)) return true;
    if (count++ == target) {
      found = e.seq;
      return false;
    }
    return true;
  });
  return found;
}

// Launches recorded before event `seq`: the block index counts launches per
// block, so only the block holding `seq` is decoded.
uint64_t launchesBefore(const TraceReader& reader, uint64_t seq) {
  const auto& blocks = reader.blocks();
  const size_t blk = std::min(reader.blockOf(seq), blocks.size());
  uint64_t n = 0;
  for (size_t i = 0; i < blk; ++i) n += blocks[i].launchCount;
  if (blk < blocks.size()) {
    std::vector<Event> events;
    reader.readBlock(blk, events);
    for (const Event& e : events) {
      if (e.seq < seq && std::holds_alternative<KernelLaunch>(e.payload)) ++n;
    }
  }
  return n;
}

void readSide(Side& side, const std::vector<uint64_t>& wanted) {
  if (wanted.empty()) return;
  const TraceReader reader(side.path);
  const uint64_t lo = wanted.front(), hi = wanted.back();
  std::optional<uint64_t> start;
  if (side.anchorSeq && lo <= side.anchorIndex) {
    start = seqBefore(reader, side, lo);
  } else {
    start = seqByCount(reader, lo);
  }
  if (!start) return;  // the run has no operation `lo`: its side stays empty
  // Launch numbers as the recorder gave them: counted from the anchor's,
  // which the diff knows, over the launches it numbered (not those captured
  // into a graph; those it set aside too). Without a launch as anchor, from
  // the trace's start.
  uint64_t counted = 0;
  std::optional<uint64_t> countedAtAnchor;
  std::unordered_map<uint64_t, uint64_t> recorded;  // by operation index: numbers the trace gives (compatVersion 13)
  std::unordered_map<uint64_t, uint32_t> ordinalsByHandle{{0, 0}};
  uint64_t index = lo;
  size_t next = 0;  // position in `wanted`
  reader.forEach(
      [&](const Event& e) {
        const auto* k = std::get_if<KernelLaunch>(&e.payload);
        const uint64_t number = counted;
        if (k && !k->captured) ++counted;
        if (!isOperation(e)) return true;
        if (side.anchorSeq && e.seq == *side.anchorSeq && k) countedAtAnchor = number;
        if (side.anchorSeq && index == side.anchorIndex && e.seq != *side.anchorSeq) {
          throw std::invalid_argument(fmt::format(
              "{}: the diff places event #{} at operation {}, but operation {} is event #{}: the diff "
              "was made from other traces",
              reader.path().string(), *side.anchorSeq, side.anchorIndex, index, e.seq));
        }
        if (next < wanted.size() && wanted[next] == index) {
          side.ops.emplace(index, opJson(e, index, k ? std::optional<uint64_t>(number) : std::nullopt));
          if (k && k->number != kNoLaunchNumber) recorded[index] = k->number;
          ++next;
        }
        auto known = side.ordinalsBySeq.find(e.seq);
        if (known != side.ordinalsBySeq.end()) {
          std::visit(
              [&](const auto& p) {
                if constexpr (requires { p.stream; }) ordinalsByHandle.emplace(p.stream, known->second);
              },
              e.payload);
        }
        ++index;
        return index <= hi;
      },
      *start);
  const uint64_t base = side.anchorLaunch && countedAtAnchor && *side.anchorLaunch >= *countedAtAnchor
                            ? *side.anchorLaunch - *countedAtAnchor
                            : launchesBefore(reader, *start);
  for (auto& [i, op] : side.ops) {
    if (auto r = recorded.find(i); r != recorded.end()) {
      op["launchIndex"] = r->second;
    } else if (op["launchIndex"].is_number()) {
      op["launchIndex"] = op["launchIndex"].get<uint64_t>() + base;
    }
    auto it = ordinalsByHandle.find(op["stream"].get<uint64_t>());
    if (it != ordinalsByHandle.end()) op["streamOrdinal"] = it->second;
  }
}

// ------------------------------------------------------------ pairing

struct PlannedRow {
  std::optional<uint64_t> a, b;
  bool divergent = false, stretch = false;
  bool elided = false;
  uint64_t elidedA = 0, elidedB = 0;
};

std::vector<PlannedRow> plan(uint64_t ia0, uint64_t ib0, bool path, const std::vector<Stretch>& stretches,
                             size_t window, std::optional<uint64_t> opsA, std::optional<uint64_t> opsB) {
  std::vector<PlannedRow> rows;
  // Before the first divergence every operation is matched one to one.
  for (size_t k = window; k > 0; --k) {
    PlannedRow r;
    if (ia0 >= k) r.a = ia0 - k;
    if (ib0 >= k) r.b = ib0 - k;
    if (r.a || r.b) rows.push_back(r);
  }
  auto stretchAt = [&](uint64_t ia, uint64_t ib) -> const Stretch* {
    for (const Stretch& s : stretches) {
      if (s.aBegin == ia && s.bBegin == ib) return &s;
    }
    return nullptr;
  };
  uint64_t ia = ia0, ib = ib0;
  size_t after = 0;  // rows shown after the divergence
  bool first = true;
  while (first || after < window) {
    const bool endA = opsA && ia >= *opsA, endB = opsB && ib >= *opsB;
    if (!first && endA && endB) break;
    const Stretch* s = stretchAt(ia, ib);
    if (s && (path || !first)) {
      const uint64_t longest = std::max(s->aCount, s->bCount);
      const uint64_t shown = std::min<uint64_t>(longest, std::max<size_t>(window, 1));
      for (uint64_t i = 0; i < shown; ++i) {
        PlannedRow r;
        if (i < s->aCount) r.a = s->aBegin + i;
        if (i < s->bCount) r.b = s->bBegin + i;
        r.stretch = true;
        r.divergent = first && i == 0;
        rows.push_back(r);
      }
      if (longest > shown) {
        PlannedRow r;
        r.elided = true;
        r.stretch = true;
        r.elidedA = s->aCount - std::min(s->aCount, shown);
        r.elidedB = s->bCount - std::min(s->bCount, shown);
        rows.push_back(r);
      }
      if (!first) after += shown;
      ia += s->aCount;
      ib += s->bCount;
    } else {
      PlannedRow r;
      if (!endA) r.a = ia;
      if (!endB) r.b = ib;
      r.divergent = first;
      rows.push_back(r);
      if (!first) ++after;
      ++ia;
      ++ib;
    }
    first = false;
  }
  return rows;
}

bool sameOperation(const json& a, const json& b) {
  return a.value("kind", "") == b.value("kind", "") && a.value("name", "") == b.value("name", "") &&
         a.value("grid", json()) == b.value("grid", json()) && a.value("block", json()) == b.value("block", json());
}

// Marks each range whose counterpart in the other run has the same digest;
// returns whether the lists are equal. A range's counterpart is the one of
// the same allocation, offset and size (two runs may list a launch's ranges
// in another order: the diff pairs them by place, not by position), else
// the one left at the same place among those left.
bool markSame(json& mine, json& theirs) {
  const auto key = [](const json& r) { return std::tuple(r["allocation"], r["offset"], r["size"]); };
  std::vector<size_t> partner(mine.size(), SIZE_MAX);
  std::vector<bool> taken(theirs.size(), false);
  for (size_t i = 0; i < mine.size(); ++i) {
    for (size_t j = 0; j < theirs.size(); ++j) {
      if (!taken[j] && key(mine[i]) == key(theirs[j])) {
        partner[i] = j;
        taken[j] = true;
        break;
      }
    }
  }
  std::vector<size_t> leftMine, leftTheirs;
  for (size_t i = 0; i < mine.size(); ++i)
    if (partner[i] == SIZE_MAX) leftMine.push_back(i);
  for (size_t j = 0; j < theirs.size(); ++j)
    if (!taken[j]) leftTheirs.push_back(j);
  for (size_t k = 0; k < leftMine.size() && k < leftTheirs.size(); ++k) {
    partner[leftMine[k]] = leftTheirs[k];
    taken[leftTheirs[k]] = true;
  }
  bool all = mine.size() == theirs.size();
  for (json& r : theirs) r["same"] = false;
  for (size_t i = 0; i < mine.size(); ++i) {
    const bool same = partner[i] != SIZE_MAX && mine[i]["digest"] == theirs[partner[i]]["digest"];
    mine[i]["same"] = same;
    if (partner[i] != SIZE_MAX) theirs[partner[i]]["same"] = same;
    all = all && same;
  }
  return all;
}

// Up to the first divergence both runs issued the same operations in the same
// order, so a stream has the same ordinal (order of first use) in both: a
// number known on one side holds for the other side's stream of the same row.
void shareStreamOrdinals(json& rows) {
  std::unordered_map<uint64_t, json> byHandle[2];
  for (const json& row : rows) {
    const bool before = row["offset"].get<int64_t>() < 0 || (row["divergent"].get<bool>() && !row["stretch"].get<bool>());
    if (!before || row["a"].is_null() || row["b"].is_null()) continue;
    const json& oa = row["a"]["streamOrdinal"];
    const json& ob = row["b"]["streamOrdinal"];
    if (oa.is_null() && !ob.is_null()) byHandle[0].emplace(row["a"]["stream"].get<uint64_t>(), ob);
    if (ob.is_null() && !oa.is_null()) byHandle[1].emplace(row["b"]["stream"].get<uint64_t>(), oa);
  }
  for (json& row : rows) {
    for (int side = 0; side < 2; ++side) {
      json& op = row[side == 0 ? "a" : "b"];
      if (op.is_null() || !op["streamOrdinal"].is_null()) continue;
      auto it = byHandle[side].find(op["stream"].get<uint64_t>());
      if (it != byHandle[side].end()) op["streamOrdinal"] = it->second;
    }
  }
}

// ------------------------------------------------------------ names

// Cuts `s` in the middle to `max` characters, keeping both ends (kernel
// names say the most at their start and their end).
std::string cutMiddle(const std::string& s, size_t max) {
  if (s.size() <= max || max < 5) return s.size() <= max ? s : s.substr(0, characterStart(s, max));
  const size_t keep = max - 3;
  return s.substr(0, characterStart(s, keep - keep / 3)) + "..." +
         s.substr(characterStart(s, s.size() - keep / 3));
}

// The text inside template brackets deeper than `depth`, replaced by "...".
std::string elideTemplates(const std::string& s, int depth) {
  std::string out;
  int level = 0;
  for (char c : s) {
    if (c == '<') {
      if (level == depth) out += "<...";
      if (level < depth) out += c;
      ++level;
    } else if (c == '>') {
      --level;
      if (level <= depth) out += c;
    } else if (level <= depth) {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string shortKernelName(const std::string& mangledOrPlain, size_t max) {
  std::string s = demangled(mangledOrPlain);
  if (s != mangledOrPlain) {
    // The parameter list: the last top-level (...) group.
    if (!s.empty() && s.back() == ')') {
      int level = 0;
      for (size_t i = s.size(); i-- > 0;) {
        if (s[i] == ')') ++level;
        if (s[i] == '(' && --level == 0) {
          s.erase(i);
          break;
        }
      }
    }
    // The return type: text before the last space outside brackets.
    int level = 0;
    size_t cut = std::string::npos;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '<' || s[i] == '(') ++level;
      if (s[i] == '>' || s[i] == ')') --level;
      if (s[i] == ' ' && level == 0) cut = i;
    }
    if (cut != std::string::npos && s.compare(cut + 1, std::string::npos, "") != 0 &&
        s.find("operator", cut) == std::string::npos) {
      s.erase(0, cut + 1);
    }
    for (int depth = 2; depth >= 1 && s.size() > max; --depth) s = elideTemplates(s, depth);
  }
  return cutMiddle(s, max);
}

json timelineAround(const fs::path& traceA, const fs::path& traceB, const diff::ProcessDiff& process, size_t window) {
  json out{{"process", process.name},
           {"window", window},
           {"path", false},
           {"a", nullptr},
           {"b", nullptr},
           {"rows", json::array()}};
  if (!process.firstDivergence) return out;
  const diff::FirstDivergence& first = *process.firstDivergence;

  Side a{traceA, {}, 0, {}, {}, {}}, b{traceB, {}, 0, {}, {}, {}};
  const bool path = first.path;
  const std::optional<Stretch> firstStretch = first.stretch ? stretchOf(*first.stretch) : std::nullopt;
  for (auto [side, isA] : {std::pair{&a, true}, std::pair{&b, false}}) {
    // A path divergence with nothing on one side starts that side at its stretch.
    if (const diff::OpInfo* op = shownOp(first, isA)) {
      side->anchorSeq = op->seq;
      side->anchorIndex = op->index;
      if (op->kind == diff::OpKind::kLaunch) side->anchorLaunch = op->launchIndex;
      collectOrdinals(*op, side->ordinalsBySeq);
    } else {
      side->anchorIndex = isA ? first.stretch->aBegin : first.stretch->bBegin;
    }
  }

  std::vector<Stretch> stretches;
  if (firstStretch) stretches.push_back(*firstStretch);
  if (first.stretch) collectStretchOrdinals(*first.stretch, a.ordinalsBySeq, b.ordinalsBySeq);
  for (const diff::PathDivergence& p : process.pathDivergences) {
    if (auto s = stretchOf(p)) stretches.push_back(*s);
    collectStretchOrdinals(p, a.ordinalsBySeq, b.ordinalsBySeq);
  }
  for (const diff::IndependentDivergence& i : process.blast.independent) {
    if (!i.a.name.empty()) collectOrdinals(i.a, a.ordinalsBySeq);
    if (!i.b.name.empty()) collectOrdinals(i.b, b.ordinalsBySeq);
  }
  const std::optional<uint64_t> opsA = process.opsA, opsB = process.opsB;

  const std::vector<PlannedRow> rows =
      plan(a.anchorIndex, b.anchorIndex, path && firstStretch, stretches, window, opsA, opsB);
  std::vector<uint64_t> wantA, wantB;
  for (const PlannedRow& r : rows) {
    if (r.a) wantA.push_back(*r.a);
    if (r.b) wantB.push_back(*r.b);
  }
  for (auto* w : {&wantA, &wantB}) {
    std::sort(w->begin(), w->end());
    w->erase(std::unique(w->begin(), w->end()), w->end());
  }
  readSide(a, wantA);
  readSide(b, wantB);

  out["path"] = path;
  out["a"] = json{{"trace", traceA.string()}, {"anchorSeq", a.anchorSeq ? json(*a.anchorSeq) : json()},
                  {"anchorIndex", a.anchorIndex}};
  out["b"] = json{{"trace", traceB.string()}, {"anchorSeq", b.anchorSeq ? json(*b.anchorSeq) : json()},
                  {"anchorIndex", b.anchorIndex}};
  json list = json::array();
  for (const PlannedRow& r : rows) {
    json row{{"offset", 0}, {"divergent", r.divergent}, {"stretch", r.stretch},
             {"sameOperation", nullptr}, {"inputsEqual", nullptr}, {"outputsEqual", nullptr},
             {"a", nullptr}, {"b", nullptr}};
    if (r.elided) {
      row["elided"] = json{{"a", r.elidedA}, {"b", r.elidedB}};
      list.push_back(std::move(row));
      continue;
    }
    auto ia = r.a ? a.ops.find(*r.a) : a.ops.end();
    auto ib = r.b ? b.ops.find(*r.b) : b.ops.end();
    if (ia == a.ops.end() && ib == b.ops.end()) continue;
    if (ia != a.ops.end()) row["a"] = ia->second;
    if (ib != b.ops.end()) row["b"] = ib->second;
    if (ia != a.ops.end() && ib != b.ops.end()) {
      row["sameOperation"] = sameOperation(row["a"], row["b"]);
      // Within a stretch the two sides are different operations: their
      // digests are not comparable.
      if (!r.stretch) {
        row["inputsEqual"] = markSame(row["a"]["inputs"], row["b"]["inputs"]);
        row["outputsEqual"] = markSame(row["a"]["outputs"], row["b"]["outputs"]);
      }
    }
    list.push_back(std::move(row));
  }
  // Offsets count shown rows (an elided row counts as one) from the divergent one.
  int64_t divergentRow = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i]["divergent"].get<bool>()) divergentRow = static_cast<int64_t>(i);
  }
  for (size_t i = 0; i < list.size(); ++i) list[i]["offset"] = static_cast<int64_t>(i) - divergentRow;
  shareStreamOrdinals(list);
  out["rows"] = std::move(list);
  return out;
}

}  // namespace gpurr::report
