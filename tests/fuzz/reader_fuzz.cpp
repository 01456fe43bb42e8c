// Fuzz target for TraceReader: a valid base trace (examples/synthetic.gpurr)
// with one or more of its files replaced by the fuzz input, then read the way
// `gpurr info`, `dump` and `diff` read it (header, every block, every event
// through forEach and through scanEvents, every referenced blob). A
// TraceError is the expected answer to bad input; any other exception, a
// crash, a sanitizer report, a hang or a huge allocation is a bug in the
// reader.
//
// Input layout (reader_fuzz.h lists the modes): the first byte picks a mode,
// the rest is its payload. Modes that replace a compressed file leave the
// zstd checksum to stop most mutations, so two modes let the harness do the
// compression: the fuzzer then mutates the Cap'n Proto frames of a block, or
// the stored bytes of a blob, directly.
#include "tests/fuzz/reader_fuzz.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace_format/scan.h"
#include "trace_format/trace.h"

namespace gpurr::fuzz {
namespace fs = std::filesystem;
using namespace gpurr::trace;

namespace {

// Sizes above these are read by the harness only through forEach, which
// reuses one Event: readAll and readBlock hold every event of a block at
// once, which is their documented cost, not a reader bug.
constexpr uint64_t kMaxMaterialisedBytes = 1 << 20;
constexpr size_t kMaxBlobReads = 64;

std::vector<uint8_t> readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeFile(const fs::path& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

void put32(std::vector<uint8_t>& out, size_t at, uint32_t v) { std::memcpy(&out[at], &v, 4); }
void put64(std::vector<uint8_t>& out, size_t at, uint64_t v) { std::memcpy(&out[at], &v, 8); }

// Little-endian reads from the input, zero past its end.
struct Cursor {
  std::span<const uint8_t> data;
  uint64_t take(size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!data.empty()) {
        v |= uint64_t{data[0]} << (8 * i);
        data = data.subspan(1);
      }
    }
    return v;
  }
};

// The base trace, held in memory and written afresh for every input.
struct Base {
  std::map<std::string, std::vector<uint8_t>> files;  // relative path -> bytes
  std::vector<std::string> blobs;                     // relative paths, sorted
  fs::path work;                                      // per-process, on /dev/shm
};

Base& base() {
  static Base b = [] {
    Base out;
    const char* env = std::getenv("GPURR_FUZZ_BASE");
    const fs::path dir = env && *env ? fs::path(env) : fs::path(GPURR_FUZZ_BASE);
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      const std::string rel = fs::relative(entry.path(), dir).generic_string();
      out.files[rel] = readFile(entry.path());
      if (rel.rfind("blobs/", 0) == 0) out.blobs.push_back(rel);
    }
    std::sort(out.blobs.begin(), out.blobs.end());  // numbered as the corpus generator does
    if (!out.files.count("events") || out.blobs.empty()) {
      throw std::runtime_error(dir.string() + ": base trace needs events and at least one blob");
    }
    // Warnings (events of unknown kinds) are expected answers: keep quiet.
    setWarningSink([](const std::string&) {});
    // The base trace must read cleanly, blobs included, or every input would
    // test only error paths.
    TraceReader reader(dir);
    size_t blobsRead = 0;
    reader.forEach([&](const Event& e) {
      if (const auto* m = std::get_if<ModuleLoad>(&e.payload)) blobsRead += !reader.readBlob(m->cubin).empty();
      if (const auto* c = std::get_if<Memcpy>(&e.payload); c && c->data) {
        blobsRead += !reader.readBlob(*c->data).empty();
      }
      return true;
    });
    if (blobsRead == 0) throw std::runtime_error(dir.string() + ": base trace refers to no blob");
    // The block header the harness encodes must be the writer's: compare it
    // with the base trace's first block.
    const BlockInfo& b0 = reader.blocks().at(0);
    const std::vector<uint8_t> mine = encodeBlockHeader(b0);
    const std::vector<uint8_t>& events = out.files["events"];
    if (events.size() < mine.size() || !std::equal(mine.begin(), mine.end(), events.begin())) {
      throw std::runtime_error("the block header layout changed: update encodeBlockHeader");
    }
    // Memory-backed when possible: every input writes a whole trace.
    const char* tmp = std::getenv("GPURR_FUZZ_TMP");
    const fs::path root = tmp && *tmp                      ? fs::path(tmp)
                          : fs::is_directory("/dev/shm") ? fs::path("/dev/shm")
                                                         : fs::temp_directory_path();
    std::string templ = (root / "gpurr-fuzz-XXXXXX").string();
    if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp " + templ);
    out.work = templ;
    // Removed at exit through a copy that is never destroyed: the static
    // Base is destroyed before functions registered during its construction.
    static const fs::path* const work = new fs::path(templ);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(*work, ec);
    });
    return out;
  }();
  return b;
}

std::vector<uint8_t> compress(std::span<const uint8_t> bytes) {
  std::vector<uint8_t> out(ZSTD_compressBound(bytes.size()));
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  const size_t n = ZSTD_compress2(cctx, out.data(), out.size(), bytes.data(), bytes.size());
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) throw std::runtime_error(ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

void removeAll(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

// Applies one mutation (modes other than kSeveral) to the trace in `dir`.
void apply(const fs::path& dir, Mode mode, std::span<const uint8_t> payload) {
  const Base& b = base();
  auto replace = [&](const std::string& rel, std::span<const uint8_t> bytes) {
    const fs::path p = dir / rel;
    removeAll(p);
    fs::create_directories(p.parent_path());
    writeFile(p, bytes);
  };
  switch (mode) {
    case Mode::kVersion: return replace("version", payload);
    // A header or index replaced without its checksums, so that the fuzzer
    // reaches their parsing rather than the digest that refuses them.
    case Mode::kHeader: removeAll(dir / "checksums"); return replace("header", payload);
    case Mode::kEvents: return replace("events", payload);
    case Mode::kIndex: removeAll(dir / "checksums"); return replace("index", payload);
    case Mode::kBlobFile:
    case Mode::kBlobContent: {
      Cursor c{payload};
      const std::string& rel = b.blobs[c.take(1) % b.blobs.size()];
      if (mode == Mode::kBlobFile) return replace(rel, c.data);
      return replace(rel, compress(c.data));
    }
    case Mode::kBlockFrames: {
      Cursor c{payload};
      BlockInfo info;
      info.eventCount = static_cast<uint32_t>(c.take(4));
      info.launchCount = static_cast<uint32_t>(c.take(4));
      info.firstSeq = c.take(8);
      info.firstTimeNs = c.take(8);
      info.lastTimeNs = c.take(8);
      const std::vector<uint8_t> frame = compress(c.data);
      info.compressedSize = static_cast<uint32_t>(frame.size());
      info.uncompressedSize = static_cast<uint32_t>(c.data.size());
      std::vector<uint8_t> events = encodeBlockHeader(info);
      events.insert(events.end(), frame.begin(), frame.end());
      removeAll(dir / "index");  // an index would describe the old events file
      removeAll(dir / "checksums");
      return replace("events", events);
    }
    case Mode::kOddEntry: {
      // Every path of the trace, its blob directories and the trace itself.
      std::vector<std::string> paths;
      for (const auto& [rel, bytes] : b.files) paths.push_back(rel);
      paths.push_back("blobs");
      for (const std::string& rel : b.blobs) paths.push_back(fs::path(rel).parent_path().string());
      Cursor c{payload};
      const fs::path p = dir / paths[c.take(1) % paths.size()];
      const uint64_t action = c.take(1) % 5;
      removeAll(p);
      std::error_code ec;
      if (action == 1) fs::create_directories(p, ec);
      if (action == 2) ::mkfifo(p.c_str(), 0600);
      if (action == 3) fs::create_symlink(p.filename(), p, ec);  // a loop
      if (action == 4) fs::create_symlink("/dev/zero", p, ec);
      return;
    }
    case Mode::kNotATrace: {
      removeAll(dir);
      return writeFile(dir, payload);
    }
    case Mode::kSeveral:
    case Mode::kCount:
      break;
  }
}

// A mutation that cannot be made (a path under a file that replaced its
// directory) leaves the trace as it is: only the reader is under test.
void applySafely(const fs::path& dir, Mode mode, std::span<const uint8_t> payload) {
  try {
    apply(dir, mode, payload);
  } catch (const std::exception&) {
  }
}

// Reads everything a user of the trace could ask for. Any failure must be a
// TraceError; the counts must agree where every block decoded.
void exercise(const fs::path& dir) {
  TraceReader reader(dir);
  const Header& h = reader.header();
  volatile size_t sink = h.toolVersion.size() + h.workingDirectory.size() + h.hostname.size();
  for (const auto& arg : h.commandLine) sink = sink + arg.size();
  for (const auto& kv : h.environment) sink = sink + kv.key.size() + kv.value.size();
  for (const auto& g : h.gpus) sink = sink + g.name.size() + g.uuid.size() + g.ccMajor;
  for (const auto& kv : h.libraries) sink = sink + kv.key.size() + kv.value.size();
  sink = sink + h.options.launchRange.size() + reader.damage().detail.size() +
         reader.eventsFileBytes() + reader.uncompressedBytes() + reader.launchCount();

  std::set<std::pair<BlobId, uint64_t>> seen;
  std::vector<BlobRef> refs;
  auto collect = [&](const BlobRef& ref) {
    if (refs.size() < kMaxBlobReads && seen.insert({ref.id, ref.size}).second) refs.push_back(ref);
  };
  auto collectDigests = [&](const std::vector<RangeDigest>& ranges) {
    for (const RangeDigest& r : ranges) {
      if (r.snapshot) collect(*r.snapshot);
    }
  };
  uint64_t visited = 0;
  bool complete = true;
  try {
    reader.forEach([&](const Event& e) {
      ++visited;
      sink = sink + e.seq + e.payload.index();
      if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) {
        sink = sink + k->function.size() + k->params.size() + k->annotations.size();
        collectDigests(k->inputs);
        collectDigests(k->outputs);
      } else if (const auto* g = std::get_if<GraphLaunch>(&e.payload)) {
        collectDigests(g->inputs);
        collectDigests(g->outputs);
      } else if (const auto* m = std::get_if<ModuleLoad>(&e.payload)) {
        collect(m->cubin);
      } else if (const auto* c = std::get_if<Memcpy>(&e.payload)) {
        if (c->data) collect(*c->data);
      }
      return true;
    });
  } catch (const TraceError&) {
    complete = false;
  }
  // Events of kinds this gpurr does not know are skipped, and counted.
  if (complete && visited + reader.unknownEventsSkipped() != reader.eventCount()) {
    std::fprintf(stderr, "forEach visited %llu events and skipped %llu, the reader counts %llu\n",
                 static_cast<unsigned long long>(visited),
                 static_cast<unsigned long long>(reader.unknownEventsSkipped()),
                 static_cast<unsigned long long>(reader.eventCount()));
    std::abort();
  }
  // The lighter read path of whole-trace passes (gpurr diff) must agree.
  uint64_t scanned = 0;
  bool scanComplete = true;
  try {
    scanEvents(reader, [&](const ScanEvent& e) {
      ++scanned;
      sink = sink + e.function.size() + e.params.size() + e.inputs.size() + e.outputs.size();
      return true;
    });
  } catch (const TraceError&) {
    scanComplete = false;
  }
  if (complete && scanComplete && scanned != visited) {
    std::fprintf(stderr, "scanEvents visited %llu events, forEach %llu\n",
                 static_cast<unsigned long long>(scanned), static_cast<unsigned long long>(visited));
    std::abort();
  }
  // Blocks one by one, so that those after a corrupt one are read too.
  const auto& blocks = reader.blocks();
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].uncompressedSize > kMaxMaterialisedBytes) continue;
    try {
      std::vector<Event> events;
      reader.readBlock(i, events);
      if (events.size() > blocks[i].eventCount) std::abort();
      if (!events.empty()) sink = sink + reader.blockOf(events.back().seq);
    } catch (const TraceError&) {
    }
  }
  if (complete && reader.uncompressedBytes() <= kMaxMaterialisedBytes) {
    try {
      sink = sink + reader.readAll().size();
    } catch (const TraceError&) {
    }
  }
  if (!blocks.empty()) {
    // Seeking into the middle stops early and must not disturb anything.
    try {
      uint64_t n = 0;
      reader.forEach([&](const Event&) { return ++n < 3; }, blocks[blocks.size() / 2].firstSeq);
    } catch (const TraceError&) {
    }
  }
  for (const BlobRef& ref : refs) {
    try {
      sink = sink + reader.hasBlob(ref.id);
      sink = sink + reader.readBlob(ref).size();
    } catch (const TraceError&) {
    }
  }
}

}  // namespace

std::vector<uint8_t> encodeBlockHeader(const BlockInfo& info) {
  // A single-segment Cap'n Proto message (trace.capnp BlockHeader): segment
  // table, root struct pointer (6 data words, no pointers), data section.
  std::vector<uint8_t> out(64, 0);
  put32(out, 0, 0);  // segment count - 1
  put32(out, 4, 7);  // segment words
  put64(out, 8, uint64_t{6} << 32);
  put64(out, 16, 0x4b4c425252555047ULL);
  put32(out, 24, info.compressedSize);
  put32(out, 28, info.uncompressedSize);
  put64(out, 32, info.firstSeq);
  put32(out, 40, info.eventCount);
  put32(out, 44, info.launchCount);
  put64(out, 48, info.firstTimeNs);
  put64(out, 56, info.lastTimeNs);
  return out;
}

void runOne(std::span<const uint8_t> input) {
  const Base& b = base();
  const fs::path dir = b.work / "trace";
  removeAll(dir);
  fs::create_directories(dir);
  for (const auto& [rel, bytes] : b.files) {
    fs::create_directories((dir / rel).parent_path());
    writeFile(dir / rel, bytes);
  }
  Cursor c{input};
  const auto mode = static_cast<Mode>(c.take(1) % static_cast<uint64_t>(Mode::kCount));
  if (mode == Mode::kSeveral) {
    // Records of (mode, 16-bit length, payload), applied in order.
    while (!c.data.empty()) {
      const auto sub = static_cast<Mode>(c.take(1) % static_cast<uint64_t>(Mode::kSeveral));
      const uint64_t length = c.take(2);  // before data.size(): it shortens data
      const size_t n = std::min<size_t>(length, c.data.size());
      applySafely(dir, sub, c.data.first(n));
      c.data = c.data.subspan(n);
    }
  } else {
    applySafely(dir, mode, c.data);
  }
  try {
    exercise(dir);
  } catch (const TraceError&) {
    // The expected answer to bad input.
  }
}

}  // namespace gpurr::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpurr::fuzz::runOne({data, size});
  return 0;
}
