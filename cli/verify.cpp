// gpurr verify TRACE: checks a trace's integrity end to end. The reader checks
// what it reads when it reads it (the header and the index against their
// checksums among it); this reads everything: the index against
// the blocks, every block decoded, every blob re-hashed against its content
// address, every snapshot re-hashed against the digest recorded with it;
// for a directory of per-process traces, each of them.
#include <fmt/format.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "cli/commands.h"
#include "common/parallel.h"
#include "report/compare.h"
#include "report/event_json.h"
#include "report/text.h"
#include "trace_format/hash.h"
#include "trace_format/hash_primitives.h"
#include "trace_format/trace.h"

namespace gpurr::cli {
using namespace gpurr::report;
namespace {
using namespace gpurr::trace;
namespace fs = std::filesystem;

struct VerifyOptions {
  std::string trace;
  bool json = false;
};

struct Report {
  std::vector<std::string> problems;
  std::vector<std::string> notes;
  uint64_t blocks = 0, events = 0, unknownEvents = 0;
  uint64_t blobs = 0, blobBytes = 0, unreferencedBlobs = 0;
  uint64_t snapshots = 0;
};

// The buffer hash of FORMAT.md §8, with the chunk size the trace declares
// (65536, §8's, in every trace gpurr records).
struct Digests {
  uint64_t digest = 0;
  std::vector<uint64_t> chunks;
};

Digests digestsOf(std::span<const uint8_t> bytes, uint64_t chunkBytes) {
  Digests d;
  for (uint64_t off = 0, c = 0; off < bytes.size(); off += chunkBytes, ++c) {
    d.chunks.push_back(hash::hashChunk(bytes.subspan(off, std::min<uint64_t>(chunkBytes, bytes.size() - off)), c));
  }
  d.digest = hash::foldChunks(d.chunks, bytes.size());
  return d;
}

// A snapshot and where it was recorded.
struct Snapshot {
  RangeDigest range;
  uint64_t seq;
  std::string what;  // "input 0 of launch"
};

struct Refs {
  std::map<BlobId, std::vector<BlobRef>> blobs;  // distinct references per id
  std::vector<Snapshot> snapshots;
};

void addBlob(Refs& refs, const BlobRef& ref) {
  auto& v = refs.blobs[ref.id];
  if (std::find(v.begin(), v.end(), ref) == v.end()) v.push_back(ref);
}

void addRanges(Refs& refs, const std::vector<RangeDigest>& ranges, uint64_t seq, const char* kind,
               const char* event) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (!ranges[i].snapshot) continue;
    addBlob(refs, *ranges[i].snapshot);
    refs.snapshots.push_back({ranges[i], seq, fmt::format("{} {} of the {}", kind, i, event)});
  }
}

// Every block decoded on its own, so that one bad block does not hide the
// others; the block's header fields checked against what it holds.
void checkBlocks(const TraceReader& reader, Report& report, Refs& refs) {
  const auto& blocks = reader.blocks();
  report.blocks = blocks.size();
  // Numbered among those written, where damage cut the events short.
  const uint64_t written = std::max<uint64_t>(blocks.size(), reader.damage().blocksWritten);
  std::vector<Event> events;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const BlockInfo& b = blocks[i];
    events.clear();
    try {
      reader.readBlock(i, events);
    } catch (const TraceError& e) {
      report.problems.push_back(fmt::format("block {} of {}: {}", i + 1, written, e.what()));
      continue;
    }
    report.events += events.size();
    const std::string where = fmt::format("events: block {} of {} at offset {}", i + 1, written, b.fileOffset);
    uint32_t launches = 0;
    for (const Event& e : events) {
      if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) {
        ++launches;
        addRanges(refs, k->inputs, e.seq, "input", "launch");
        addRanges(refs, k->outputs, e.seq, "output", "launch");
      } else if (const auto* g = std::get_if<GraphLaunch>(&e.payload)) {
        addRanges(refs, g->inputs, e.seq, "input", "graph launch");
        addRanges(refs, g->outputs, e.seq, "output", "graph launch");
      } else if (const auto* m = std::get_if<ModuleLoad>(&e.payload)) {
        // An image not kept (a trace not recorded for replay) has size 0 and
        // no id: it refers to no blob.
        if (m->cubin.size != 0) addBlob(refs, m->cubin);
      } else if (const auto* c = std::get_if<Memcpy>(&e.payload)) {
        if (c->data) addBlob(refs, *c->data);
      }
    }
    // Events of kinds this gpurr does not know are skipped (counted apart).
    if (!events.empty() && events.front().seq == b.firstSeq) {
      if (events.front().timeNs != b.firstTimeNs) {
        report.problems.push_back(fmt::format("{}: its header says the first event is at {} ns, "
                                              "the event says {}",
                                              where, b.firstTimeNs, events.front().timeNs));
      }
    } else if (!events.empty() && events.size() == b.eventCount) {
      report.problems.push_back(fmt::format("{}: its header says the first event is #{}, it is #{}",
                                            where, b.firstSeq, events.front().seq));
    }
    if (events.size() == b.eventCount && !events.empty() && events.back().timeNs != b.lastTimeNs) {
      report.problems.push_back(fmt::format("{}: its header says the last event is at {} ns, "
                                            "the event says {}",
                                            where, b.lastTimeNs, events.back().timeNs));
    }
    if (events.size() == b.eventCount && launches != b.launchCount) {
      report.problems.push_back(fmt::format("{}: its header counts {} launches, it holds {}", where,
                                            b.launchCount, launches));
    }
  }
  report.unknownEvents = reader.unknownEventsSkipped();
}

// A blob file no event refers to: its encoding is unknown, so each one is
// tried; it is sound when one of them gives bytes with the file's name.
bool unreferencedBlobMatches(const TraceReader& reader, const BlobId& id, const fs::path& file,
                             std::string& error) {
  std::vector<uint8_t> head(32);  // a zstd frame header is at most 18 bytes
  {
    std::ifstream in(file, std::ios::binary);
    in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
  }
  const unsigned long long size = ZSTD_getFrameContentSize(head.data(), head.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
    error = "not a zstd frame with its content size";
    return false;
  }
  for (BlobEncoding e : {BlobEncoding::kRaw, BlobEncoding::kBytePlanes4, BlobEncoding::kBytePlanes2}) {
    try {
      reader.readBlob(BlobRef{id, size, e});
      return true;
    } catch (const TraceError& ex) {
      error = ex.what();
    }
  }
  if (error.find("does not match its name") != std::string::npos) {
    error = "its content does not match its name (in any encoding)";
  }
  return false;
}

// A blob whose decoded bytes this process could not hold: not checked.
std::string tooLarge(const std::string& blob, uint64_t size) {
  return fmt::format("{}: {} bytes decoded, more than this process could allocate: not checked", blob,
                     withCommas(size));
}

void checkBlobs(const TraceReader& reader, Report& report, const Refs& refs) {
  const fs::path root = reader.path() / "blobs";
  std::set<BlobId> present;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    // Absent is no problem by itself (a trace with no blob; git keeps no
    // empty folder): every referenced blob is reported missing below.
    if (fs::exists(fs::symlink_status(root, ec))) report.problems.push_back("blobs/: not a directory");
  } else {
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const fs::path rel = fs::relative(it->path(), reader.path(), ec);
      const std::string name = it->path().filename().string();
      if (it->is_directory(ec)) {
        if (it.depth() != 0 || name.size() != 2 || !BlobId::fromHex(name + std::string(30, '0'))) {
          report.problems.push_back(fmt::format("{}: a directory the blob store does not have", rel.string()));
          it.disable_recursion_pending();
        }
        continue;
      }
      const auto id = BlobId::fromHex(name);
      if (!it->is_regular_file(ec) || it.depth() != 1 || !id || id->hex() != name ||
          it->path().parent_path().filename() != name.substr(0, 2)) {
        report.problems.push_back(fmt::format(
            "{}: not a blob{}", rel.string(),
            name.ends_with(".tmp") ? " (a blob write that did not finish)" : ""));
        continue;
      }
      present.insert(*id);
      ++report.blobs;
      report.blobBytes += it->file_size(ec);
      if (refs.blobs.count(*id) != 0) continue;  // checked below, as referenced
      ++report.unreferencedBlobs;
      std::string error;
      if (!unreferencedBlobMatches(reader, *id, it->path(), error)) {
        // The reader's messages name the file already.
        report.problems.push_back(error.find(it->path().string()) != std::string::npos
                                      ? error
                                      : fmt::format("{}: {}", rel.string(), error));
      }
    }
    if (ec) report.problems.push_back(fmt::format("blobs/: cannot list: {}", ec.message()));
  }
  for (const auto& [id, list] : refs.blobs) {
    const std::string rel = fmt::format("blobs/{}/{}", id.hex().substr(0, 2), id.hex());
    if (present.count(id) == 0) {
      report.problems.push_back(fmt::format("{}: missing (an event refers to it)", rel));
      continue;
    }
    for (const BlobRef& ref : list) {
      try {
        reader.readBlob(ref);  // checks the size and the content address
      } catch (const TraceError& e) {
        report.problems.push_back(e.what());
      } catch (const std::bad_alloc&) {
        report.notes.push_back(tooLarge(rel, ref.size));
      }
    }
  }
}

void checkSnapshots(const TraceReader& reader, Report& report, const Refs& refs) {
  const uint64_t chunkBytes = reader.header().options.hashChunkBytes;
  // Each blob read and hashed once, however many ranges it is the snapshot
  // of (the same buffer at every launch): its size and digests.
  std::map<std::pair<BlobId, uint64_t>, std::optional<std::pair<uint64_t, Digests>>> hashed;
  for (const Snapshot& s : refs.snapshots) {
    auto [at, fresh] = hashed.try_emplace({s.range.snapshot->id, s.range.snapshot->size});
    if (fresh) {
      try {
        const std::vector<uint8_t> bytes = reader.readBlob(*s.range.snapshot);
        at->second.emplace(bytes.size(), digestsOf(bytes, chunkBytes));
      } catch (const TraceError&) {
        // reported with the blobs
      } catch (const std::bad_alloc&) {
        // noted with the blobs
      }
    }
    if (!at->second) continue;
    const auto& [size, d] = *at->second;
    ++report.snapshots;
    const std::string where = fmt::format("event #{}: snapshot of {} ({})", s.seq, s.what,
                                          s.range.snapshot->id.hex());
    if (size != s.range.range.size) {
      report.problems.push_back(fmt::format("{}: holds {} bytes, the range {}", where, size, s.range.range.size));
      continue;
    }
    if (s.range.digest != 0 && d.digest != s.range.digest) {
      report.problems.push_back(fmt::format("{}: hashes to {}, the recorded digest is {}", where,
                                            hex16(d.digest), hex16(s.range.digest)));
    }
    if (!s.range.chunkDigests.empty() && s.range.chunkDigests != d.chunks) {
      size_t bad = 0;
      for (size_t c = 0; c < std::min(d.chunks.size(), s.range.chunkDigests.size()); ++c) {
        bad += d.chunks[c] != s.range.chunkDigests[c];
      }
      report.problems.push_back(fmt::format(
          "{}: {} of its {} chunk digests differ from the recorded ones{}", where, bad,
          d.chunks.size(),
          d.chunks.size() != s.range.chunkDigests.size()
              ? fmt::format(" (the range has {} recorded)", s.range.chunkDigests.size())
              : ""));
    }
  }
}

Report verify(const TraceReader& reader) {
  Report report;
  if (reader.damage().unclosed) {  // no index, or one that does not fit
    report.problems.push_back(fmt::format("index: {}", reader.damage().detail));
  } else if (!reader.damage().detail.empty()) {  // events that do not fit the index, read up to there or around
    report.problems.push_back(reader.damage().detail);
  }
  // Without its checksums (written since compatVersion 13, FORMAT.md §5)
  // nothing vouches for the header and the index but the blocks they describe.
  if (std::error_code ec; !reader.damage().unclosed && !fs::exists(reader.path() / "checksums", ec)) {
    report.notes.push_back("no checksums file: the header and the index are checked against the blocks alone "
                           "(their other fields, the recorder's counts among them, are not vouched for)");
  }
  Refs refs;
  checkBlocks(reader, report, refs);
  checkBlobs(reader, report, refs);
  checkSnapshots(reader, report, refs);
  if (report.unknownEvents > 0) {
    report.notes.push_back(fmt::format(
        "{} of kinds this gpurr does not know (trace compatibility {}, this gpurr {}): skipped",
        withCommas(report.unknownEvents) + (report.unknownEvents == 1 ? " event" : " events"),
        reader.header().compatVersion, kCompatVersion));
  }
  if (report.unreferencedBlobs > 0) {
    report.notes.push_back(fmt::format("{} blob{} no event refers to", report.unreferencedBlobs,
                                       report.unreferencedBlobs == 1 ? "" : "s"));
  }
  return report;
}

// One trace verified: its report, or why it could not be opened.
struct Verified {
  std::string trace;
  std::optional<Report> report;
  std::string error;  // when it could not be opened
  int exitCode() const { return !report ? kExitTrouble : report->problems.empty() ? kExitOk : kExitDifferent; }
};

Verified verifyTrace(const std::string& trace) {
  Verified v{trace, std::nullopt, ""};
  try {
    const TraceReader reader(trace);
    v.report = verify(reader);
  } catch (const NoEventsReadable& e) {
    // A problem found, as a corrupt later block is: its header and index
    // read. Its line names the trace already.
    std::string problem = e.what();
    if (problem.starts_with(trace + ": ")) problem.erase(0, trace.size() + 2);
    v.report = Report{};
    v.report->problems.push_back(problem);
  } catch (const TraceError& e) {
    v.error = e.what();
  }
  return v;
}

Json verifiedJson(const Verified& v) {
  if (!v.report) return Json{{"trace", v.trace}, {"readable", false}, {"ok", false}, {"error", v.error}};
  const Report& r = *v.report;
  return Json{{"trace", v.trace},
              {"readable", true},
              {"ok", r.problems.empty()},
              {"blocks", r.blocks},
              {"events", r.events},
              {"eventsOfUnknownKind", r.unknownEvents},
              {"blobs", r.blobs},
              {"unreferencedBlobs", r.unreferencedBlobs},
              {"snapshots", r.snapshots},
              {"problems", r.problems},
              {"notes", r.notes}};
}

// Its problems and notes, a line each, then its summary line.
std::string verifiedText(const Verified& v) {
  if (!v.report) return fmt::format("{}: cannot be read: {}\n", v.trace, v.error);
  const Report& r = *v.report;
  std::string out;
  for (const std::string& p : r.problems) out += fmt::format("{}: {}\n", v.trace, p);
  for (const std::string& n : r.notes) out += fmt::format("{}: note: {}\n", v.trace, n);
  auto count = [](uint64_t n, std::string_view what) {
    return fmt::format("{} {}{}", withCommas(n), what, n == 1 ? "" : "s");
  };
  return out + fmt::format("{}: {}: {}, {}, {} ({}), {} checked\n", v.trace,
                           r.problems.empty() ? "ok" : count(r.problems.size(), "problem"), count(r.blocks, "block"),
                           count(r.events, "event"), count(r.blobs, "blob"), humanBytes(r.blobBytes),
                           count(r.snapshots, "snapshot"));
}

int run(const VerifyOptions& opts) {
  // A directory of per-process traces: each verified on a core of its own,
  // reported in rank order, then the directory's verdict.
  const auto traces = isTrace(opts.trace) ? std::vector<std::pair<std::string, fs::path>>{}
                                          : directoryTraces(opts.trace);
  if (!traces.empty()) {
    std::vector<Verified> all(traces.size());
    parallel::onEveryCore(traces.size(), [&](size_t i) { all[i] = verifyTrace(traces[i].second.string()); });
    int worst = kExitOk;
    size_t bad = 0;
    Json each = Json::array();
    for (const Verified& v : all) {
      worst = std::max(worst, v.exitCode());
      bad += v.exitCode() != kExitOk;
      if (opts.json) {
        each.push_back(verifiedJson(v));
      } else {
        std::cout << verifiedText(v);
      }
    }
    if (opts.json) {
      std::cout << report::jsonText(
                       Json{{"directory", opts.trace}, {"traces", traces.size()}, {"ok", bad == 0}, {"processes", each}})
                << '\n';
    } else {
      std::cout << fmt::format("{}: {} of {} traces ok\n", opts.trace, traces.size() - bad, traces.size());
    }
    return worst;
  }
  const Verified v = verifyTrace(opts.trace);
  if (opts.json) std::cout << report::jsonText(verifiedJson(v)) << '\n';
  if (!v.report) {
    std::cerr << "gpurr verify: error: " << v.error << "\n";
  } else if (!opts.json) {
    std::cout << verifiedText(v);
  }
  return v.exitCode();
}

}  // namespace

void addVerifyCommand(CLI::App& app, Action& chosen) {
  auto opts = std::make_shared<VerifyOptions>();
  CLI::App* cmd = app.add_subcommand(
      "verify",
      "Check a trace's integrity: the header and the index against their checksums, the\n"
      "index against the blocks, every block decoded, every blob re-hashed against its\n"
      "content address (XXH3-128), every snapshot re-hashed against the digest recorded\n"
      "with it. Prints one problem per line. Exit status 0: no problem, 1: problems found,\n"
      "2: usage error or a trace that cannot be opened. A directory of per-process traces:\n"
      "every trace, each on a core of its own.");
  cmd->add_option("trace", opts->trace, "Trace, or a directory of per-process traces")->required();
  cmd->add_flag("--json", opts->json, "Print one JSON object (keys documented in docs/JSON.md)");
  cmd->callback([opts, &chosen] { chosen = [opts] { return run(*opts); }; });
}

}  // namespace gpurr::cli
