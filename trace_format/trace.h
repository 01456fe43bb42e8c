// Writing and reading gpurr trace directories. The layout is specified in
// FORMAT.md; this is the only interface to it (nothing else sees Cap'n Proto).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "trace_format/events.h"

namespace gpurr::trace {

// A trace that cannot be written or read as asked. The message names the
// file and what is wrong with it; it is meant for the user as it is.
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A trace whose header and index read, and none of whose events can be
// read: its first block is corrupt (`gpurr verify` lists it as a problem).
class NoEventsReadable : public TraceError {
 public:
  using TraceError::TraceError;
};

// Where a reader stops reading a trace's events: before the block at
// `blockOffset` of the events file, found corrupt (`problem` says how).
struct ReadLimit {
  uint64_t blockOffset = UINT64_MAX;  // UINT64_MAX: every block
  std::string problem;
};

// A block of the events file that cannot be decoded: damaged since it was
// written (a flipped bit, a bad copy). The blocks before it can be read:
// open the trace again with narrowed() to read it as one cut short there.
class CorruptBlock : public TraceError {
 public:
  CorruptBlock(const std::filesystem::path& trace, uint64_t blockOffset, const std::string& problem);
  // Narrows `limit`, the limit a reader of `trace` had, to this block, where
  // this block is of that trace and before it; returns whether it did.
  bool narrowed(const std::filesystem::path& trace, ReadLimit& limit) const;

 private:
  std::filesystem::path trace_;
  ReadLimit at_;
};

// Runs `read(limits)` with a limit for each of `traces` that reads every
// block, and, where it meets a corrupt block of one of them, again with that
// trace's limit narrowed to the block (both, for one trace given twice),
// until it no longer does.
template <typename Read>
auto readingPastCorruptBlocks(const std::vector<std::filesystem::path>& traces, Read&& read) {
  std::vector<ReadLimit> limits(traces.size());
  for (;;) {
    try {
      return read(static_cast<const std::vector<ReadLimit>&>(limits));
    } catch (const CorruptBlock& e) {
      bool narrowed = false;
      for (size_t i = 0; i < traces.size(); ++i) narrowed = e.narrowed(traces[i], limits[i]) || narrowed;
      if (!narrowed) throw;
    }
  }
}

// Where one block of the events file is and what it holds.
struct BlockInfo {
  uint64_t fileOffset = 0;  // of the block header
  uint64_t firstSeq = 0;
  uint32_t eventCount = 0;
  uint32_t launchCount = 0;
  uint64_t firstTimeNs = 0;
  uint64_t lastTimeNs = 0;
  uint32_t compressedSize = 0;
  uint32_t uncompressedSize = 0;
  uint64_t frameOffset = 0;  // of its zstd frame, after the header
};

struct WriterOptions {
  // A block is closed once its uncompressed frames reach this size. Smaller
  // blocks lose less in a crash and seek finer; larger ones compress better.
  size_t blockBytes = 1 << 20;
  int zstdLevel = 1;
  // Compress and write blocks on a background thread, so append() never waits
  // for compression or the disk unless `maxQueuedBlocks` are already pending.
  bool background = true;
  size_t maxQueuedBlocks = 8;
};

// Appends events to a new trace directory. Not thread-safe: one owner calls it.
// Writing is deterministic: the same header, blobs and events give the same
// bytes in every file.
class TraceWriter {
 public:
  // Creates `dir` (which must not exist, or be an empty directory) and writes
  // the version marker and the header. Throws TraceError.
  TraceWriter(const std::filesystem::path& dir, const Header& header, WriterOptions options = {});
  ~TraceWriter();  // close(), with errors swallowed
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Stores `bytes` in the blob store unless an identical blob is already
  // there; returns its reference. `encoding` chooses the on-disk layout.
  BlobRef putBlob(std::span<const uint8_t> bytes, BlobEncoding encoding = BlobEncoding::kRaw);

  // Appends an event. Sequence numbers must increase. Throws TraceError when
  // an earlier block could not be written (e.g. the disk is full).
  // `functionIdentity`: for a launch, an address that stands for its
  // function's name, the same for every launch of that name and never for
  // another name while the writer lives (the recorder's kept kernel text):
  // the writer then finds the function by it and the launch's module, with
  // no look at the name (null: by the name).
  void append(const Event& event, const void* functionIdentity = nullptr);

  // Ends the current block and waits until every block is on disk.
  void flush();

  // The host regions close() writes into the index (empty by default).
  void setHostRegions(std::vector<HostRegion> regions);
  // The training step after which the recorder stopped the program (record
  // --until-step), which close() writes into the index; -1 (the default)
  // when the program ends by itself.
  void setStoppedAfterStep(int64_t step);
  // The memory the recorder held, which close() writes into the index
  // (none by default).
  void setRecorderMemory(const RecorderMemory& memory);
  // How the framework layer attributed the steps, which close() writes into
  // the index (none by default).
  void setLayerSteps(const LayerSteps& steps);
  // Host memory this writer holds at most: the blocks queued for
  // compression and the one being filled.
  uint64_t memoryBound() const;
  // flush(), then writes the seek index. Further appends are errors.
  void close();

  uint64_t eventsWritten() const;
  uint64_t bytesWritten() const;  // compressed events plus header and blobs

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What the reader found missing at the end of a trace whose writer did not
// close it (killed, crashed, disk full), or left unread at a corrupt block.
struct Damage {
  bool unclosed = false;        // no index: the recording did not end cleanly
  bool indexDamaged = false;    // ... or an index that does not fit the events: the trace was damaged since
  uint64_t discardedBytes = 0;  // trailing bytes of an incomplete block
  uint32_t discardedEvents = 0; // events in it, when its header was intact
  bool corruptBlock = false;    // the events end at a block found corrupt (ReadLimit): damaged since
  uint64_t blocksWritten = 0;   // ... of this many the index lists or the walk found (0: none cut)
  std::string detail;           // human-readable, empty when undamaged

  // Whether the events read end before those the recorder wrote: not where
  // only the index is damaged and every block was read (the index is
  // written last, once every block is).
  bool incomplete() const { return corruptBlock || (unclosed && (!indexDamaged || discardedBytes > 0)); }
  // Why, for a report: "the recording did not end cleanly", or "damaged
  // since it was written: ..." (a corrupt block, an index that does not fit).
  std::string cause() const;
  // How far they were read: "its last complete block", "its corrupt block".
  std::string readsTo() const;
};

class RecentBlocks;

// Reads a trace directory. Opening validates the version, the header and the
// framing of every block (headers only); decoding a block validates its
// contents. Every problem is a TraceError naming the file; nothing crashes.
class TraceReader {
 public:
  // With a limit (a CorruptBlock met before), the events are read up to
  // that block, as those of a trace cut short there (damage()).
  explicit TraceReader(const std::filesystem::path& dir, const ReadLimit& limit = {});
  ~TraceReader();
  TraceReader(TraceReader&&) noexcept;
  TraceReader& operator=(TraceReader&&) noexcept;

  const std::filesystem::path& path() const;
  const Header& header() const;
  const std::vector<BlockInfo>& blocks() const;
  const Damage& damage() const;
  // The recorded process's readable host memory when the recording ended,
  // sorted, overlapping and adjacent regions merged; empty when the trace has no index (it did not end cleanly) or
  // its recorder wrote none (compatVersion < 6).
  const std::vector<HostRegion>& hostRegions() const;
  // The training step after which gpurr stopped the recorded program
  // (record --until-step); -1 when it ended by itself, or when the trace has
  // no index (compatVersion < 8, or it did not end cleanly).
  int64_t stoppedAfterStep() const;
  // The memory the recorder held (compatVersion 9); nothing when the trace
  // has no index or its writer reported none.
  const std::optional<RecorderMemory>& recorderMemory() const;
  // How the framework layer attributed the steps (compatVersion 10);
  // nothing when the trace has no index or no step was completed.
  const std::optional<LayerSteps>& layerSteps() const;
  uint64_t eventCount() const;
  uint64_t launchCount() const;
  uint64_t eventsFileBytes() const;   // compressed, on disk
  uint64_t uncompressedBytes() const; // of all blocks' frames

  // Decodes block `index`, appending its events to `out`.
  void readBlock(size_t index, std::vector<Event>& out) const;

  // Calls `visit` for every event with seq >= `fromSeq`, in order, reusing
  // one Event object; stops early when `visit` returns false.
  void forEach(const std::function<bool(const Event&)>& visit, uint64_t fromSeq = 0) const;

  // Event `seq`, or nothing when the trace holds none. The last two blocks
  // it decoded are kept (until keepRecentBlocks(0)), so that lookups close
  // together decode a block once.
  std::optional<Event> event(uint64_t seq) const;

  // All events (convenient for small traces and tests).
  std::vector<Event> readAll() const;

  // Index of the block holding `seq`, or that would hold it (binary search).
  size_t blockOf(uint64_t seq) const;

  // The decoded bytes of a blob, verified against its content address.
  // Throws TraceError when it is missing, corrupt or larger than `maxBytes`.
  std::vector<uint8_t> readBlob(const BlobRef& ref, uint64_t maxBytes = uint64_t{16} << 30) const;
  bool hasBlob(const BlobId& id) const;

  // Events of a kind this gpurr does not know (union members a newer gpurr
  // added, FORMAT.md §9) are skipped by every read path (forEach, readBlock,
  // scanEvents): the first one met makes one warning per trace, naming the
  // trace's compatVersion and this reader's (kCompatVersion). This counts
  // those skipped in the blocks decoded to their end so far: all of them
  // once a pass has read the whole trace.
  uint64_t unknownEventsSkipped() const;
  // Used by the read paths: block `block` holds `count` events of unknown
  // kinds, the first being event `firstSeq` of kind `kind` (its union
  // discriminant).
  void noteUnknownEvents(size_t block, uint32_t count, uint64_t firstSeq, unsigned kind) const;

  // Keeps the decompressed frames of the last blocks read, up to `bytes` of
  // them, for later scans of this trace not to decompress them again (0,
  // the default: none; what was kept is given back, event()'s blocks too).
  void keepRecentBlocks(uint64_t bytes) const;
  // Used by the scanners (frame_buffer.h).
  RecentBlocks& recentBlocks() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether `p` is one trace: a directory holding a version marker (not a
// directory of traces).
bool isTrace(const std::filesystem::path& p);

// Entry names in the order ranks are counted: a run of digits compares by
// its value, so rank2.gpurr comes before rank10.gpurr (and node1-local2
// before node1-local10); equal values, the one with fewer leading zeros first.
struct RankOrder {
  bool operator()(const std::string& x, const std::string& y) const;
};

// The traces of a directory of per-process traces (rank0.gpurr...), named
// by entry, in rank order; empty when `dir` holds none. Where it holds some,
// also its other directories named *.gpurr (no version marker: a process
// that left its trace unbegun or damaged), which the reader then refuses.
std::vector<std::pair<std::string, std::filesystem::path>> directoryTraces(const std::filesystem::path& dir);

// For a job directory that holds no trace of its own: "; the traces of the
// job's earlier attempts are in DIR/attempts/0 (give that directory)", where
// `gpurr record` kept those of a restarted job (attempts/<N>/, the last
// one named); empty otherwise.
std::string earlierAttempts(const std::filesystem::path& dir);

// Where `gpurr record -o OUT` gathers its processes' traces while the
// program runs, beside OUT: the mkdtemp template ".OUT.staging-XXXXXX", and
// the directory that exists now (empty when none).
std::string stagingTemplate(const std::filesystem::path& out);
std::filesystem::path stagingDirectory(const std::filesystem::path& out);

// For OUT that holds no trace: "; `gpurr record -o OUT` left what it
// recorded in its staging directory ... (give ...)", where one holds traces
// (a gpurr record still running, or killed before it moved them into OUT);
// empty otherwise.
std::string stagedTracesHint(const std::filesystem::path& out);

// Where the readers' warnings go (a trace with events of unknown kinds, once
// per trace): by default to stderr as "gpurr: warning: ...". An empty sink
// restores the default. Returns the previous sink.
using WarningSink = std::function<void(const std::string&)>;
WarningSink setWarningSink(WarningSink sink);

// Content address of `bytes` (XXH3-128).
BlobId blobIdOf(std::span<const uint8_t> bytes);

// Byte-plane transforms used by BlobEncoding::kBytePlanes*.
std::vector<uint8_t> encodeBlob(std::span<const uint8_t> bytes, BlobEncoding encoding);
// The same into `out` (as large as `bytes`); returns it.
std::span<const uint8_t> encodeBlob(std::span<const uint8_t> bytes, BlobEncoding encoding, std::span<uint8_t> out);
std::vector<uint8_t> decodeBlob(std::span<const uint8_t> stored, BlobEncoding encoding);

}  // namespace gpurr::trace
