// Where the blocks of a trace's events file are, and what damage cut from
// them (framing.h); and what a damaged trace lost, in words (CorruptBlock,
// Damage).
#include "trace_format/framing.h"

#include <capnp/serialize.h>
#include <fmt/ranges.h>
#include <zstd.h>

#include <algorithm>

#include "common/text.h"
#include "trace_format/codec.h"
#include "trace_format/container.h"

namespace gpurr::trace {
namespace fs = std::filesystem;
namespace schema = capnp_schema;

namespace {

// What is wrong with the counts of block `b`, or with its sequence after
// the block `before` it (null for the first); empty when nothing is.
std::string sequenceProblem(const BlockInfo& b, const BlockInfo* before) {
  // Every frame takes at least 16 bytes (segment table and root pointer).
  if (b.eventCount == 0 || b.launchCount > b.eventCount || uint64_t{b.eventCount} * 16 > b.uncompressedSize) {
    return fmt::format("its counts are inconsistent: {} events, {} launches, {} bytes", b.eventCount,
                       b.launchCount, b.uncompressedSize);
  }
  if (before != nullptr && b.firstSeq < before->firstSeq + before->eventCount) {
    return fmt::format("it starts at event #{}, inside the block before it ({} events from #{})", b.firstSeq,
                       before->eventCount, before->firstSeq);
  }
  return "";
}

}  // namespace

void preadAll(int fd, void* out, size_t n, uint64_t offset, const fs::path& path) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw TraceError(fmt::format("{}: read failed at offset {}: {}", path.string(), offset,
                                   got < 0 ? std::strerror(errno) : "unexpected end of file"));
    }
    p += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
}

capnp::ReaderOptions readerOptions(size_t words) {
  capnp::ReaderOptions options;
  // Every word may be visited a few times (shared list elements); more means
  // an amplification attack.
  options.traversalLimitInWords = std::max<uint64_t>(1024, uint64_t{words} * 4);
  options.nestingLimit = 32;
  return options;
}

CorruptBlock::CorruptBlock(const fs::path& trace, uint64_t blockOffset, const std::string& problem)
    : TraceError(fmt::format("{}: block at offset {} is corrupt: {}", (trace / container::kEventsFile).string(),
                             blockOffset, problem)),
      trace_(trace),
      at_{blockOffset, problem} {}

bool CorruptBlock::narrowed(const fs::path& trace, ReadLimit& limit) const {
  if (trace != trace_ || at_.blockOffset >= limit.blockOffset) return false;
  limit = at_;
  return true;
}

std::string Damage::cause() const {
  if (corruptBlock) return "damaged since it was written: a block of its events is corrupt";
  if (indexDamaged) return "damaged since it was written: its index does not fit its events";
  return "the recording did not end cleanly";
}

std::string Damage::readsTo() const { return corruptBlock ? "its corrupt block" : "its last complete block"; }

std::optional<BlockInfo> Framing::blockHeaderAt(uint64_t offset, std::string& problem) const {
  uint32_t table[2];
  if (events.size() - offset < sizeof table) {
    problem = fmt::format("the events file ends at byte {}, {} it", events.size(),
                          events.size() == offset ? "before" : "inside");
    return std::nullopt;
  }
  events.read(offset, table, sizeof table);
  if (table[0] != 0 || table[1] == 0 || table[1] > container::kMaxBlockHeaderWords) {
    problem = "no block header there";
    return std::nullopt;
  }
  if ((events.size() - offset) / 8 < 1 + uint64_t{table[1]}) {
    problem = fmt::format("the events file ends at byte {}, inside it", events.size());
    return std::nullopt;
  }
  std::vector<capnp::word> words(1 + table[1]);
  events.read(offset, words.data(), words.size() * 8);
  BlockInfo info;
  try {
    capnp::FlatArrayMessageReader message(kj::arrayPtr(words.data(), words.size()), readerOptions(words.size()));
    auto h = message.getRoot<schema::BlockHeader>();
    if (h.getMagic() != container::kBlockMagic) {
      problem = "bad magic";
      return std::nullopt;
    }
    info = {offset,         h.getFirstSeq(),         h.getEventCount(),       h.getLaunchCount(),
            h.getFirstTimeNs(), h.getLastTimeNs(), h.getCompressedSize(), h.getUncompressedSize(),
            offset + words.size() * 8};
  } catch (const kj::Exception& e) {
    problem = codec::problem(e);
    return std::nullopt;
  }
  if (info.uncompressedSize > container::kMaxBlockBytes || info.uncompressedSize % 8 != 0) {
    problem = fmt::format("it declares {} bytes ({})", info.uncompressedSize,
                          info.uncompressedSize % 8 != 0 ? "not a whole number of 8-byte words"
                                                         : fmt::format("limit {}", container::kMaxBlockBytes));
    return std::nullopt;
  }
  return info;
}

// What is wrong with the index's entry `b` for the block after the one
// that ends at `offset` of the events file (its header absent, invalid or
// different, its frame past the file's end); empty when it fits, with
// `offset` moved past the block and `b`'s frame found.
std::string Framing::entryProblem(BlockInfo& b, uint64_t& offset) const {
  if (b.fileOffset != offset) {
    return fmt::format("it places the block at offset {}, where the block before it ends at {}", b.fileOffset,
                       offset);
  }
  std::string problem;
  const auto info = blockHeaderAt(offset, problem);
  if (!info) return "its header: " + problem;
  if (info->firstSeq != b.firstSeq || info->eventCount != b.eventCount || info->launchCount != b.launchCount ||
      info->firstTimeNs != b.firstTimeNs || info->lastTimeNs != b.lastTimeNs ||
      info->compressedSize != b.compressedSize || info->uncompressedSize != b.uncompressedSize) {
    return "its header differs from the index's entry";
  }
  if (b.compressedSize > events.size() - info->frameOffset) {
    return fmt::format("its frame of {} bytes runs past the events file's end, at byte {}", b.compressedSize,
                       events.size());
  }
  b.frameOffset = info->frameOffset;
  offset = b.frameOffset + b.compressedSize;
  return "";
}

// Whether a zstd frame starts at `offset` of the events file.
bool Framing::frameAt(uint64_t offset) const {
  uint32_t magic = 0;
  if (events.size() - offset < sizeof magic) return false;
  events.read(offset, &magic, sizeof magic);
  return magic == ZSTD_MAGICNUMBER;
}

void Framing::fitIndex(std::vector<BlockInfo>& entries, bool vouched, const fs::path& path) {
  uint64_t offset = 0;
  std::vector<std::string> repaired;
  for (size_t i = 0; i < entries.size(); ++i) {
    BlockInfo& b = entries[i];
    std::string problem = entryProblem(b, offset);
    if (problem.empty()) continue;
    if (!vouched) {
      throw TraceError(fmt::format("{}: entry for offset {} does not fit the events file: {}", path.string(),
                                   b.fileOffset, problem));
    }
    // Its header alone damaged: its frame ends where the next block's
    // header begins (the last one's, where the file ends).
    const uint64_t end = i + 1 < entries.size() ? entries[i + 1].fileOffset : events.size();
    if (b.fileOffset == offset && end <= events.size() && end >= b.compressedSize &&
        end - b.compressedSize >= b.fileOffset + 16 && frameAt(end - b.compressedSize)) {
      b.frameOffset = end - b.compressedSize;
      offset = end;
      std::string why;
      if (blockHeaderAt(b.fileOffset, why)) why = "it differs from the index's entry";
      repaired.push_back(fmt::format("the header of block {} of {} (at offset {}) is damaged ({}): read by its "
                                     "index's entry",
                                     i + 1, entries.size(), b.fileOffset, why));
      continue;
    }
    indexCut = {b.fileOffset, std::move(problem)};
    break;
  }
  if (indexCut.blockOffset == UINT64_MAX && offset != events.size()) {
    if (!vouched) {
      throw TraceError(fmt::format("{}: covers {} bytes of an events file of {}", path.string(), offset,
                                   events.size()));
    }
    repaired.push_back(fmt::format("the {} bytes after its last block, which its index does not list, were not "
                                   "read (added since it was written)",
                                   text::withCommas(events.size() - offset)));
  }
  if (!repaired.empty()) damage.detail = fmt::format("{}: {}", events.path().string(), fmt::join(repaired, "; "));
}

// The size of a whole zstd frame at `offset` of the events file (looked
// for in the next 16 MiB, a block's frame being about 1 MiB); 0 where
// there is none, as where the writer stopped in the middle of one.
uint64_t Framing::frameSizeAt(uint64_t offset) const {
  std::vector<uint8_t> bytes(std::min<uint64_t>(events.size() - offset, 16 << 20));
  events.read(offset, bytes.data(), bytes.size());
  const size_t size = ZSTD_findFrameCompressedSize(bytes.data(), bytes.size());
  return ZSTD_isError(size) ? 0 : size;
}

void Framing::scanBlocks() {
  damage.unclosed = true;
  uint64_t offset = 0;
  std::string corrupt;  // what is wrong with the header at `offset`
  while (offset < events.size()) {
    // A block whose header or frame runs past the end of the file is the
    // one the writer was appending when it stopped: discard it. Anything
    // else that is wrong is corruption: the blocks after it are not read.
    uint32_t table[2] = {0, 0};
    const uint64_t left = events.size() - offset;
    if (left >= sizeof table) events.read(offset, table, sizeof table);
    if (left < sizeof table || (table[0] == 0 && table[1] <= container::kMaxBlockHeaderWords &&
                                left < 8 * (1 + uint64_t{table[1]}))) {
      damage.discardedBytes = left;
      break;
    }
    const auto header = blockHeaderAt(offset, corrupt);
    if (!header) break;
    const BlockInfo& info = *header;
    if (info.compressedSize > events.size() - info.frameOffset) {
      // A whole frame there, though the header says it runs past the
      // end: the header is damaged, not cut short.
      if (const uint64_t whole = frameSizeAt(info.frameOffset); whole != 0) {
        corrupt = fmt::format("it declares a frame of {} bytes, past the file's end, where a whole frame of {} "
                              "bytes lies",
                              info.compressedSize, whole);
        break;
      }
      damage.discardedBytes = left;
      damage.discardedEvents = info.eventCount;
      break;
    }
    blocks.push_back(info);
    offset = info.frameOffset + info.compressedSize;
  }
  damage.detail = fmt::format("read {} complete block{}", blocks.size(), blocks.size() == 1 ? "" : "s");
  if (damage.discardedBytes > 0) {
    damage.detail += fmt::format("; discarded {} trailing bytes of an incomplete block", damage.discardedBytes);
    if (damage.discardedEvents > 0) {
      damage.detail += fmt::format(" ({} events)", damage.discardedEvents);
    }
  }
  if (!corrupt.empty()) {
    damage.detail += "; ";
    endBefore(blocks.size(), offset, corrupt);
  }
}

// Ends the events before block `kept` (its header at `offset`, which says
// `problem`), as those of a trace cut short there.
void Framing::endBefore(size_t kept, uint64_t offset, const std::string& problem) {
  damage.corruptBlock = true;
  damage.detail += fmt::format("the header of block {} (at offset {}) is corrupt ({}): ", kept + 1, offset, problem);
  const BlockInfo* last = kept == 0 ? nullptr : &blocks[kept - 1];
  damage.detail += !last ? "none of its events can be read"
                         : fmt::format("read the {} block{} before it; the events from #{} on are not read", kept,
                                       kept == 1 ? "" : "s", last->firstSeq + last->eventCount);
  blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(kept), blocks.end());
}

void Framing::checkSequence() {
  for (size_t i = 0; i < blocks.size(); ++i) {
    const BlockInfo& b = blocks[i];
    if (std::string problem = sequenceProblem(b, i > 0 ? &blocks[i - 1] : nullptr); !problem.empty()) {
      if (!damage.detail.empty()) damage.detail += "; ";
      endBefore(i, b.fileOffset, problem);
      return;
    }
    eventCount += b.eventCount;
    launchCount += b.launchCount;
    uncompressedBytes += b.uncompressedSize;
  }
}

void Framing::cutAt(const ReadLimit& limit) {
  const auto at = std::ranges::find_if(blocks, [&](const BlockInfo& b) { return b.fileOffset >= limit.blockOffset; });
  if (at == blocks.end()) return;
  const size_t kept = static_cast<size_t>(at - blocks.begin());
  uint64_t lost = pastEnd.events;
  for (auto b = at; b != blocks.end(); ++b) lost += b->eventCount;
  damage.blocksWritten = blocks.size() + pastEnd.blocks;
  const std::string note =
      fmt::format("block {} of {} is corrupt ({}): ", kept + 1, damage.blocksWritten, limit.problem) +
      (kept == 0 ? fmt::format("none of the {} event{} can be read", text::withCommas(lost), lost == 1 ? "" : "s")
                 : fmt::format("read the {} block{} before it; the {} event{} from event #{} on are not read", kept,
                               kept == 1 ? "" : "s", text::withCommas(lost), lost == 1 ? "" : "s", at->firstSeq));
  damage.corruptBlock = true;
  damage.detail = damage.detail.empty() ? note : damage.detail + "; " + note;
  blocks.erase(at, blocks.end());
}

}  // namespace gpurr::trace
