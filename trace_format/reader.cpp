// TraceReader: validates a trace directory and decodes its blocks (where
// they are, and what damage cut from them, is framing.cpp's). Every check
// here guards against a corrupt or hostile file: sizes are bounded before
// anything is allocated, and every Cap'n Proto or zstd failure becomes a
// TraceError naming the file, or a CorruptBlock where it is one block's.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fmt/format.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <mutex>

#include "common/text.h"
#include "trace_format/codec.h"
#include "trace_format/container.h"
#include "trace_format/frame_buffer.h"
#include "trace_format/hash_primitives.h"
#include "trace_format/framing.h"
#include "trace_format/trace.h"

namespace gpurr::trace {
namespace fs = std::filesystem;
namespace schema = capnp_schema;

namespace {

// Runs `body`, turning Cap'n Proto's exceptions into a TraceError that says
// which file and what was being read.
template <typename Body>
auto guarded(const fs::path& file, std::string_view what, Body&& body) {
  try {
    return body();
  } catch (const kj::Exception& e) {
    throw TraceError(fmt::format("{}: corrupt {}: {}", file.string(), what, codec::problem(e)));
  } catch (const TraceError& e) {
    throw TraceError(fmt::format("{}: corrupt {}: {}", file.string(), what, e.what()));
  }
}

std::mutex& sinkMutex() {
  static std::mutex mu;
  return mu;
}

WarningSink& sink() {
  static WarningSink s;
  return s;
}

void warn(const std::string& message) {
  std::lock_guard lock(sinkMutex());
  if (sink()) {
    sink()(message);
  } else {
    std::fprintf(stderr, "gpurr: warning: %s\n", message.c_str());
  }
}

// The options for the frame at the start of `rest` (a block's remaining
// words): its limit counts the frame's own words, as its segment table
// gives them, not the rest of the block's. A small frame early in a block
// of 256 MiB could otherwise visit a gigabyte through pointers that all
// lead to one text.
capnp::ReaderOptions frameOptions(kj::ArrayPtr<const capnp::word> rest) {
  return readerOptions(std::min<size_t>(rest.size(), capnp::expectedSizeInWordsFromPrefix(rest)));
}

}  // namespace

struct TraceReader::Impl : Framing {
  fs::path dir;
  Header header;
  std::vector<HostRegion> hostRegions;
  int64_t stoppedAfterStep = -1;
  std::optional<RecorderMemory> recorderMemory;
  std::optional<LayerSteps> layerSteps;
  // `checksums` (compatVersion 13): file name -> XXH3-128 of its bytes.
  std::map<std::string, BlobId, std::less<>> checksums;
  // Events of unknown kinds per block (set when a block is decoded to its
  // end), and whether the warning about them was given.
  mutable std::unique_ptr<std::atomic<uint32_t>[]> unknownPerBlock;
  mutable std::atomic<bool> warnedUnknown{false};
  mutable RecentBlocks recent;
  // A block decompressed for event(): where each event's frame starts, and
  // the functions its launches name.
  struct Indexed {
    size_t block = SIZE_MAX;
    std::vector<capnp::word> words;
    std::vector<codec::FunctionEntry> functions;
    struct At {
      uint64_t seq;
      size_t offset;  // in words
    };
    std::vector<At> events;
  };
  // The blocks event() read last, the most recent first: two, for lookups
  // on either side of a block's end.
  mutable std::mutex lookupMu;
  mutable std::array<Indexed, 2> lookups;

  void readVersion() {
    File file(dir / container::kVersionFile);
    if (file.size() > 64) {
      throw TraceError(fmt::format("{}: not a gpurr version marker", file.path().string()));
    }
    std::string text(file.size(), '\0');
    file.read(0, text.data(), text.size());
    const std::string_view prefix = container::kVersionPrefix;
    uint32_t version = 0;
    const char* begin = text.data() + std::min(prefix.size(), text.size());
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(begin, end, version);
    if (text.compare(0, prefix.size(), prefix) != 0 || ec != std::errc() || ptr == begin ||
        std::string_view(ptr, end - ptr) != "\n") {
      throw TraceError(fmt::format("{}: not a gpurr version marker (expected \"{}{}\")",
                                   file.path().string(), prefix, kFormatVersion));
    }
    if (version > kFormatVersion) {
      throw TraceError(fmt::format(
          "{}: trace format {} was written by a newer gpurr; this gpurr reads format {}. "
          "Upgrade gpurr to read it.",
          dir.string(), version, kFormatVersion));
    }
    if (version < kFormatVersion) {
      throw TraceError(fmt::format("{}: trace format {} is no longer supported (this gpurr reads {})",
                                   dir.string(), version, kFormatVersion));
    }
  }

  // Reads `checksums` when the trace has one: lines as `xxhsum -H2` prints
  // them. Names this reader does not know are left alone.
  void readChecksums() {
    const fs::path path = dir / container::kChecksumsFile;
    std::error_code ec;
    if (!fs::exists(path, ec)) return;
    File file(path);
    if (file.size() > container::kMaxChecksumsBytes) {
      throw TraceError(fmt::format("{}: {} bytes, more than the {} a valid file can have", path.string(),
                                   file.size(), container::kMaxChecksumsBytes));
    }
    std::string text(file.size(), '\0');
    file.read(0, text.data(), text.size());
    std::string_view rest = text;
    for (size_t line = 1; !rest.empty(); ++line) {
      const size_t end = rest.find('\n');
      const std::string_view l = rest.substr(0, end);
      const bool plainName = std::ranges::none_of(l.substr(std::min<size_t>(34, l.size())),
                                                  [](char c) { return static_cast<unsigned char>(c) < 0x20; });
      const auto id = end != std::string_view::npos && l.size() > 34 && l.substr(32, 2) == "  " && plainName
                          ? BlobId::fromHex(l.substr(0, 32))
                          : std::nullopt;
      if (!id) {
        throw TraceError(fmt::format(
            "{}: line {} is not \"<32 hex digits>  <file>\" as `xxhsum -H2` prints it: the file is damaged "
            "(remove it to read the trace without checking its header and index)",
            path.string(), line));
      }
      if (!checksums.emplace(std::string(l.substr(34)), *id).second) {
        throw TraceError(fmt::format("{}: line {} names {} again: the file is damaged (remove it to read the trace "
                                     "without checking its header and index)",
                                     path.string(), line, l.substr(34)));
      }
      rest.remove_prefix(end + 1);
    }
    if (!checksums.contains(container::kHeaderFile)) {
      throw TraceError(fmt::format("{}: lists no {}: the file is damaged (remove it to read the trace without "
                                   "checking its header and index)",
                                   path.string(), container::kHeaderFile));
    }
  }

  // Throws when `checksums` records a digest for `file` that its bytes (read
  // into `words`) do not have; `consequence` ends the message.
  void checkSum(const File& file, const std::vector<capnp::word>& words, std::string_view consequence) const {
    const auto it = checksums.find(file.path().filename().string());
    if (it == checksums.end()) return;
    const BlobId got = blobIdOf({reinterpret_cast<const uint8_t*>(words.data()), file.size()});
    if (got != it->second) {
      throw TraceError(fmt::format("{}: damaged (or {} is): its XXH3-128 is {}, but {} records {}{}",
                                   file.path().string(), container::kChecksumsFile, got.hex(),
                                   container::kChecksumsFile, it->second.hex(), consequence));
    }
  }

  void readHeader() {
    File file(dir / container::kHeaderFile);
    const auto words = file.readWords(container::kMaxHeaderBytes);
    checkSum(file, words,
             ". Its fields (command line, environment, GPUs, library versions) cannot be trusted; remove the "
             "trace's checksums file to read it anyway");
    header = guarded(file.path(), "header", [&] {
      capnp::FlatArrayMessageReader message(kj::arrayPtr(words.data(), words.size()),
                                            readerOptions(words.size()));
      return codec::decodeHeader(message.getRoot<schema::Header>());
    });
    if (const uint64_t chunk = header.options.hashChunkBytes; chunk != 0 && chunk < 1024) {
      throw TraceError(fmt::format("{}: hashChunkBytes {} is below 1024 (FORMAT.md §3): a snapshot would be "
                                   "re-hashed in chunks of a few bytes, a digest each",
                                   file.path().string(), chunk));
    }
    if (header.options.hashChunkBytes == 0) header.options.hashChunkBytes = hash::kChunkBytes;  // 0 stands for it
    if (header.formatVersion != kFormatVersion) {
      throw TraceError(fmt::format("{}: header says format {}, version marker says {}",
                                   file.path().string(), header.formatVersion, kFormatVersion));
    }
  }

  bool readIndex() {
    const fs::path path = dir / container::kIndexFile;
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      if (checksums.contains(container::kIndexFile)) {
        throw TraceError(fmt::format("{}: missing, though {} lists it", path.string(), container::kChecksumsFile));
      }
      return false;
    }
    File file(path);
    const auto words = file.readWords(container::kMaxIndexBytes);
    checkSum(file, words, "");
    const bool vouched = checksums.contains(container::kIndexFile);
    std::vector<HostRegion> regions;
    int64_t stopped = -1;
    std::optional<RecorderMemory> memory;
    std::optional<LayerSteps> layer;
    std::vector<BlockInfo> entries = guarded(path, "index", [&] {
      capnp::FlatArrayMessageReader message(kj::arrayPtr(words.data(), words.size()),
                                            readerOptions(words.size()));
      const auto root = message.getRoot<schema::Index>();
      // Each block takes at least its header's segment table and root
      // pointer, 16 bytes, in the events file: a count beyond that (a list
      // of empty elements costs no bytes) is refused before anything is
      // stored for it. In an index `checksums` vouches for, the entries
      // past that many are only counted: the events file was cut short since.
      const uint64_t most = events.size() / 16, listed = root.getBlocks().size();
      if (listed > most && !vouched) {
        throw TraceError(fmt::format("lists {} blocks, more than the {} an events file of {} bytes can hold",
                                     listed, most, events.size()));
      }
      std::vector<BlockInfo> out;
      out.reserve(std::min(listed, most + 1));
      for (auto e : root.getBlocks()) {
        if (out.size() > most) {
          ++pastEnd.blocks;
          pastEnd.events += e.getEventCount();
          continue;
        }
        out.push_back({e.getFileOffset(), e.getFirstSeq(), e.getEventCount(), e.getLaunchCount(),
                       e.getFirstTimeNs(), e.getLastTimeNs(), e.getCompressedSize(),
                       e.getUncompressedSize()});
      }
      for (auto r : root.getHostRegions()) {
        if (r.getStart() >= r.getEnd()) {
          throw TraceError(fmt::format("host region [{:#x}, {:#x}) is empty", r.getStart(), r.getEnd()));
        }
        regions.push_back({r.getStart(), r.getEnd()});
      }
      stopped = root.getStoppedAfterStep();
      if (root.hasRecorderMemory()) {
        const auto m = root.getRecorderMemory();
        memory = RecorderMemory{m.getHostBytes(),      m.getQueueBytes(),  m.getSnapshotBytes(),
                                m.getWriterBytes(),    m.getPinnedHostBytes(), m.getDeviceBytes(),
                                m.getEventsDropped()};
      }
      if (root.hasLayerSteps()) {
        const auto l = root.getLayerSteps();
        layer = LayerSteps{l.getObserved(), l.getFollowed(), l.getUnmatched(), l.getTemplates(), l.getSwitches()};
      }
      return out;
    });
    // Sorted, overlapping ones merged: a lookup needs only the region before.
    std::sort(regions.begin(), regions.end(),
              [](const HostRegion& a, const HostRegion& b) { return a.start < b.start; });
    std::vector<HostRegion> merged;
    for (const HostRegion& r : regions) {
      if (!merged.empty() && r.start <= merged.back().end) {
        merged.back().end = std::max(merged.back().end, r.end);
      } else {
        merged.push_back(r);
      }
    }
    regions = std::move(merged);
    fitIndex(entries, vouched, path);
    blocks = std::move(entries);
    hostRegions = std::move(regions);
    stoppedAfterStep = stopped;
    recorderMemory = memory;
    layerSteps = layer;
    return true;
  }

  void noteUnknown(size_t block, uint32_t count, uint64_t firstSeq, unsigned kind) const {
    if (block < blocks.size() && unknownPerBlock) unknownPerBlock[block].store(count, std::memory_order_relaxed);
    if (count == 0 || warnedUnknown.exchange(true)) return;
    const uint32_t theirs = header.compatVersion;
    warn(fmt::format(
        "{}: skipped events of a kind this gpurr does not know (the first is event #{}, of kind "
        "{}): {}; this gpurr reads compatibility {}",
        dir.string(), firstSeq, kind,
        theirs > kCompatVersion
            ? fmt::format("the trace was written by a newer gpurr (compatibility {}), whose "
                          "additions older readers skip",
                          theirs)
            : fmt::format("the trace says compatibility {}, which should not hold them", theirs),
        kCompatVersion));
  }

  // Decompresses block `i` into `words` (its header declares a whole number
  // of them).
  void decompress(size_t i, std::vector<capnp::word>& words) const {
    const BlockInfo& b = blocks[i];
    std::vector<uint8_t> compressed(b.compressedSize);
    events.read(b.frameOffset, compressed.data(), compressed.size());
    if (const std::string problem =
            container::frameSizeProblem(compressed.data(), compressed.size(), b.uncompressedSize);
        !problem.empty()) {
      throw CorruptBlock(dir, b.fileOffset, problem);
    }
    // Assigned, not resized: resize() needs a movable element, capnp::word
    // is not, and clang rejects it.
    words = std::vector<capnp::word>(b.uncompressedSize / 8);
    const size_t n = ZSTD_decompress(words.data(), b.uncompressedSize, compressed.data(),
                                     compressed.size());
    // The frame's checksum covers what its writer compressed: where it
    // fails, or the frame ends short, the bytes changed since.
    if (ZSTD_isError(n) || n != b.uncompressedSize) {
      throw CorruptBlock(dir, b.fileOffset, ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short frame");
    }
  }

  // Runs `body`, which reads block `i`'s frames: what is wrong with them
  // (Cap'n Proto's exceptions, a TraceError) makes the block corrupt.
  template <typename Body>
  auto blockGuarded(size_t i, Body&& body) const {
    try {
      return body();
    } catch (const CorruptBlock&) {
      throw;
    } catch (const container::VisitorThrew& v) {
      container::rethrow(v, events.path(), blocks[i].fileOffset);
    } catch (const kj::Exception& e) {
      throw CorruptBlock(dir, blocks[i].fileOffset, codec::problem(e));
    } catch (const TraceError& e) {
      throw CorruptBlock(dir, blocks[i].fileOffset, e.what());
    }
  }

  // Decompresses block `i` into `out` and finds its frames: each event's
  // by its number, each function it declares decoded (events are decoded
  // one at a time, by event()).
  void index(size_t i, Indexed& out) const {
    out.block = SIZE_MAX;  // until it is whole: a corrupt block throws
    out.functions.clear();
    out.events.clear();
    decompress(i, out.words);
    blockGuarded(i, [&] {
      kj::ArrayPtr<const capnp::word> rest(out.words.data(), out.words.size());
      while (rest.size() > 0) {
        capnp::FlatArrayMessageReader message(rest, frameOptions(rest));
        auto frame = message.getRoot<schema::Frame>();
        if (frame.isFunction()) {
          codec::declareFunction(frame.getFunction(), out.functions);
        } else if (frame.isEvent()) {
          const uint64_t seq = frame.getEvent().getSeq();
          if (!out.events.empty() && seq <= out.events.back().seq) {
            throw TraceError(fmt::format("event seq {} out of order", seq));
          }
          out.events.push_back({seq, static_cast<size_t>(rest.begin() - out.words.data())});
        } else {
          throw TraceError("frame of unknown kind");
        }
        rest = kj::arrayPtr(message.getEnd(), rest.end());
      }
    });
    out.block = i;
  }

  // Event `seq` of block `x`, if it holds one of a kind this gpurr knows.
  std::optional<Event> eventIn(const Indexed& x, uint64_t seq) const {
    const auto at = std::ranges::lower_bound(x.events, seq, {}, &Indexed::At::seq);
    if (at == x.events.end() || at->seq != seq) return std::nullopt;
    return blockGuarded(x.block, [&] {
      kj::ArrayPtr<const capnp::word> rest(x.words.data() + at->offset, x.words.data() + x.words.size());
      capnp::FlatArrayMessageReader message(rest, frameOptions(rest));
      std::optional<Event> out(std::in_place);
      if (!codec::decodeEvent(message.getRoot<schema::Frame>().getEvent(), x.functions, *out)) out.reset();
      return out;
    });
  }

  // Decodes block `i`, calling `visit(event)` for each event (reusing `event`);
  // returns false when `visit` asked to stop.
  template <typename Visit>
  bool decodeBlock(size_t i, Event& event, Visit&& visit) const {
    std::vector<capnp::word> words;
    decompress(i, words);
    const BlockInfo& b = blocks[i];
    return blockGuarded(i, [&] {
      std::vector<codec::FunctionEntry> functions;
      kj::ArrayPtr<const capnp::word> rest(words.data(), words.size());
      uint32_t seen = 0, unknown = 0;
      uint64_t nextSeq = b.firstSeq, firstUnknown = 0;
      unsigned unknownKind = 0;
      // A launch names its function by the block's number for it, and is
      // decoded with the name copied in: the copies may take no more than a
      // block may hold, or a name of megabytes launched thousands of times
      // in a few kilobytes of trace would take gigabytes to read.
      uint64_t names = 0;
      while (rest.size() > 0) {
        capnp::FlatArrayMessageReader message(rest, frameOptions(rest));
        auto frame = message.getRoot<schema::Frame>();
        if (frame.isFunction()) {
          codec::declareFunction(frame.getFunction(), functions);
        } else if (frame.isEvent()) {
          auto in = frame.getEvent();
          if (in.isLaunch() && in.getLaunch().getFunction() < functions.size()) {
            const std::string problem =
                container::launchNamesProblem(names, functions[in.getLaunch().getFunction()].name.size());
            if (!problem.empty()) throw TraceError(problem);
          }
          const bool known = codec::decodeEvent(in, functions, event);
          if (++seen > b.eventCount || event.seq < nextSeq) {
            throw TraceError(fmt::format("event seq {} out of order or beyond the block's {} events",
                                         event.seq, b.eventCount));
          }
          nextSeq = event.seq + 1;
          if (!known) {
            // Added by a newer gpurr: skipped (FORMAT.md §9).
            if (unknown++ == 0) {
              firstUnknown = event.seq;
              unknownKind = static_cast<unsigned>(in.which());
            }
          } else if (!container::visiting(visit, event)) {
            return false;
          }
        } else {
          throw TraceError("frame of unknown kind");
        }
        rest = kj::arrayPtr(message.getEnd(), rest.end());
      }
      if (seen != b.eventCount) {
        throw TraceError(fmt::format("holds {} events, its header says {}", seen, b.eventCount));
      }
      noteUnknown(i, unknown, firstUnknown, unknownKind);
      return true;
    });
  }
};

TraceReader::TraceReader(const fs::path& dir, const ReadLimit& limit) : impl_(std::make_unique<Impl>()) {
  Impl& r = *impl_;
  r.dir = dir;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    throw TraceError(fmt::format("{}: no such trace{}", dir.string(), stagedTracesHint(dir)));
  }
  if (!fs::is_directory(dir, ec)) {
    throw TraceError(fmt::format("{}: not a gpurr trace (a trace is a directory)", dir.string()));
  }
  if (!fs::exists(dir / container::kVersionFile, ec)) {
    if (ec) throw TraceError(fmt::format("{}: cannot read it: {}", dir.string(), ec.message()));  // permissions
    // A directory of per-process traces (what `gpurr record` writes when
    // several processes ran): say so, and how to name one of them.
    const auto inside = directoryTraces(dir);
    if (!inside.empty()) {
      throw TraceError(fmt::format("{}: a directory of {} per-process trace{} ({}{}), not one trace: name one of "
                                   "them ({}), or give the directory to gpurr info, verify or diff",
                                   dir.string(), inside.size(), inside.size() == 1 ? "" : "s", inside.front().first,
                                   inside.size() > 1 ? ", ..." : "", inside.front().second.string()));
    }
    throw TraceError(fmt::format("{}: not a gpurr trace (no version marker){}{}", dir.string(), earlierAttempts(dir),
                                 stagedTracesHint(dir)));
  }
  r.readVersion();
  r.readChecksums();
  r.readHeader();
  r.events = File(dir / container::kEventsFile);
  bool indexed = false;
  std::string indexProblem;
  try {
    indexed = r.readIndex();
  } catch (const TraceError& e) {
    indexProblem = e.what();
  }
  if (!indexed) {
    r.blocks.clear();
    r.scanBlocks();
    // The index is written last: without one the recording did not end
    // cleanly; with a damaged one it cannot be told whether it did.
    r.damage.indexDamaged = !indexProblem.empty();
    r.damage.detail = indexProblem.empty()
                          ? "the recording did not end cleanly (no index): " + r.damage.detail +
                                "; events the recorder had not yet written when the process ended, if any, are lost"
                          : indexProblem + "; ignored the index and scanned the blocks instead: " + r.damage.detail;
  }
  // The events end at the earlier cut: the blocks the later one would keep
  // are not all read, and one account says how far they were.
  r.cutAt(limit.blockOffset < r.indexCut.blockOffset ? limit : r.indexCut);
  r.checkSequence();
  // Nothing to read: an error, not a trace of no events.
  if (r.damage.corruptBlock && r.blocks.empty()) {
    throw NoEventsReadable(fmt::format("{}: {}", dir.string(), r.damage.detail));
  }
  r.unknownPerBlock = std::make_unique<std::atomic<uint32_t>[]>(r.blocks.size());
  for (size_t i = 0; i < r.blocks.size(); ++i) r.unknownPerBlock[i].store(0);
}

TraceReader::~TraceReader() = default;
TraceReader::TraceReader(TraceReader&&) noexcept = default;
TraceReader& TraceReader::operator=(TraceReader&&) noexcept = default;

const fs::path& TraceReader::path() const { return impl_->dir; }
const Header& TraceReader::header() const { return impl_->header; }
const std::vector<BlockInfo>& TraceReader::blocks() const { return impl_->blocks; }
const Damage& TraceReader::damage() const { return impl_->damage; }
const std::vector<HostRegion>& TraceReader::hostRegions() const { return impl_->hostRegions; }
const std::optional<RecorderMemory>& TraceReader::recorderMemory() const { return impl_->recorderMemory; }
const std::optional<LayerSteps>& TraceReader::layerSteps() const { return impl_->layerSteps; }
int64_t TraceReader::stoppedAfterStep() const { return impl_->stoppedAfterStep; }
uint64_t TraceReader::eventCount() const { return impl_->eventCount; }
uint64_t TraceReader::launchCount() const { return impl_->launchCount; }
uint64_t TraceReader::eventsFileBytes() const { return impl_->events.size(); }
uint64_t TraceReader::uncompressedBytes() const { return impl_->uncompressedBytes; }

void TraceReader::readBlock(size_t index, std::vector<Event>& out) const {
  if (index >= impl_->blocks.size()) {
    throw TraceError(fmt::format("{}: no block {}", impl_->dir.string(), index));
  }
  Event event;
  impl_->decodeBlock(index, event, [&](const Event& e) {
    out.push_back(e);
    return true;
  });
}

void TraceReader::forEach(const std::function<bool(const Event&)>& visit, uint64_t fromSeq) const {
  Event event;
  for (size_t i = blockOf(fromSeq); i < impl_->blocks.size(); ++i) {
    const bool more = impl_->decodeBlock(i, event, [&](const Event& e) {
      return e.seq < fromSeq || visit(e);
    });
    if (!more) return;
  }
}

std::optional<Event> TraceReader::event(uint64_t seq) const {
  if (impl_->blocks.empty()) return std::nullopt;
  const size_t block = blockOf(seq);
  std::lock_guard lock(impl_->lookupMu);
  auto& lookups = impl_->lookups;
  if (lookups[0].block != block) {
    std::swap(lookups[0], lookups[1]);
    if (lookups[0].block != block) impl_->index(block, lookups[0]);
  }
  return impl_->eventIn(lookups[0], seq);
}

std::vector<Event> TraceReader::readAll() const {
  std::vector<Event> out;
  for (size_t i = 0; i < impl_->blocks.size(); ++i) readBlock(i, out);
  return out;
}

size_t TraceReader::blockOf(uint64_t seq) const {
  // Block i holds the events from its firstSeq up to the next block's.
  const auto& blocks = impl_->blocks;
  auto it = std::upper_bound(blocks.begin(), blocks.end(), seq,
                             [](uint64_t s, const BlockInfo& b) { return s < b.firstSeq; });
  if (it == blocks.begin()) return 0;
  return static_cast<size_t>(std::prev(it) - blocks.begin());
}

uint64_t TraceReader::unknownEventsSkipped() const {
  uint64_t n = 0;
  for (size_t i = 0; i < impl_->blocks.size(); ++i) n += impl_->unknownPerBlock[i].load();
  return n;
}

void TraceReader::noteUnknownEvents(size_t block, uint32_t count, uint64_t firstSeq,
                                    unsigned kind) const {
  impl_->noteUnknown(block, count, firstSeq, kind);
}

void TraceReader::keepRecentBlocks(uint64_t bytes) const {
  impl_->recent.setBudget(bytes);
  if (bytes == 0) {
    std::lock_guard lock(impl_->lookupMu);
    impl_->lookups = {};
  }
}

RecentBlocks& TraceReader::recentBlocks() const { return impl_->recent; }

WarningSink setWarningSink(WarningSink s) {
  std::lock_guard lock(sinkMutex());
  return std::exchange(sink(), std::move(s));
}

bool TraceReader::hasBlob(const BlobId& id) const {
  std::error_code ec;
  return fs::is_regular_file(container::blobPath(impl_->dir, id), ec);
}

std::vector<uint8_t> TraceReader::readBlob(const BlobRef& ref, uint64_t maxBytes) const {
  const fs::path path = container::blobPath(impl_->dir, ref.id);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw TraceError(fmt::format("{}: blob {} is missing from the trace", impl_->dir.string(),
                                 ref.id.hex()));
  }
  if (ref.size > maxBytes) {
    throw TraceError(fmt::format("{}: blob of {} bytes exceeds the limit of {}", path.string(),
                                 ref.size, maxBytes));
  }
  File file(path);
  std::vector<uint8_t> compressed(file.size());
  file.read(0, compressed.data(), compressed.size());
  const unsigned long long declared = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR || declared == ZSTD_CONTENTSIZE_UNKNOWN) {
    throw TraceError(fmt::format("{}: corrupt blob: not a zstd frame that states its size ({} bytes)", path.string(),
                                 compressed.size()));
  }
  if (declared != ref.size) {
    throw TraceError(fmt::format("{}: corrupt blob: holds {} bytes, the trace expects {}", path.string(), declared,
                                 ref.size));
  }
  // The buffer grows as zstd produces bytes instead of being sized from the
  // frame header: a header can claim 10 GiB in 15 bytes, the data cannot.
  // It starts at eight times the compressed size (enough at once for float
  // data, which compresses to about 0.85) and grows to one byte past the
  // expected size, to catch a longer frame.
  const uint64_t cap = std::min<uint64_t>(ref.size, UINT64_MAX - 1) + 1;
  const uint64_t first = std::min<uint64_t>(cap, std::max<uint64_t>(uint64_t{compressed.size()} * 8, 1 << 16));
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  std::vector<uint8_t> stored;
  ZSTD_inBuffer in{compressed.data(), compressed.size(), 0};
  size_t produced = 0;
  size_t left = 1;  // zero once the frame is complete
  while (left != 0) {
    if (produced == stored.size()) {
      if (stored.size() == cap) break;
      stored.resize(stored.empty() ? first : std::min<uint64_t>(cap, stored.size() * 2));
    } else if (in.pos == in.size) {
      break;  // zstd wants more input than the file has
    }
    ZSTD_outBuffer out{stored.data(), stored.size(), produced};
    left = ZSTD_decompressStream(dctx.get(), &out, &in);
    if (ZSTD_isError(left)) {
      throw TraceError(fmt::format("{}: corrupt blob: {}", path.string(), ZSTD_getErrorName(left)));
    }
    produced = out.pos;
    if (left == 0 && in.pos != in.size) {
      throw TraceError(fmt::format("{}: corrupt blob: data after the zstd frame", path.string()));
    }
  }
  if (left != 0 || produced != ref.size) {
    throw TraceError(fmt::format("{}: corrupt blob: holds {}{} bytes, the trace expects {}",
                                 path.string(), produced == cap ? "more than " : "",
                                 produced == cap ? ref.size : produced, ref.size));
  }
  stored.resize(produced);
  std::vector<uint8_t> bytes = ref.encoding == BlobEncoding::kRaw ? std::move(stored) : decodeBlob(stored, ref.encoding);
  if (blobIdOf(bytes) != ref.id) {
    throw TraceError(fmt::format("{}: corrupt blob: content does not match its name", path.string()));
  }
  return bytes;
}

}  // namespace gpurr::trace
