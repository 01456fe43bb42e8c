// TraceWriter: frames events into blocks, compresses them on a background
// thread and appends them to the events file; writes blobs and the index.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "trace_format/codec.h"
#include "trace_format/container.h"
#include "trace_format/trace.h"

namespace gpurr::trace {
namespace fs = std::filesystem;
namespace schema = capnp_schema;

namespace {

// kj output stream appending to a byte vector.
class ByteSink final : public kj::OutputStream {
 public:
  explicit ByteSink(std::vector<uint8_t>& out) : out_(out) {}
  void write(const void* buffer, size_t size) override {
    const auto* p = static_cast<const uint8_t*>(buffer);
    out_.insert(out_.end(), p, p + size);
  }

 private:
  std::vector<uint8_t>& out_;
};

// Builds one message in a reusable, pre-zeroed first segment, so that
// serialising an ordinary event allocates nothing.
class Scratch {
 public:
  Scratch() : words_(kWords) {}

  template <typename Fill>
  void serialize(std::vector<uint8_t>& out, Fill&& fill) {
    {
      capnp::MallocMessageBuilder builder(kj::arrayPtr(words_.data(), words_.size()));
      fill(builder);
      ByteSink sink(out);
      capnp::writeMessage(sink, builder);
      // Re-zero what the builder used of the first segment.
      auto segments = builder.getSegmentsForOutput();
      if (segments.size() > 0 && segments[0].begin() == words_.data()) {
        std::memset(words_.data(), 0, segments[0].size() * sizeof(capnp::word));
      } else {
        std::memset(words_.data(), 0, words_.size() * sizeof(capnp::word));
      }
    }
  }

 private:
  static constexpr size_t kWords = 4096;
  std::vector<capnp::word> words_;
};

void writeAll(int fd, const uint8_t* data, size_t size, const fs::path& file) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw TraceError(fmt::format("{}: write failed: {}", file.string(), std::strerror(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// A trace can hold training data and module images: its files are readable
// by their owner only (0600) and its directories 0700, whatever the umask.
constexpr mode_t kFileMode = 0600;
constexpr mode_t kDirMode = 0700;

// Creates `file` for writing with mode kFileMode exactly. Throws TraceError.
int createPrivate(const fs::path& file, int flags) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, kFileMode);
  if (fd < 0) {
    throw TraceError(fmt::format("{}: cannot create: {}", file.string(), std::strerror(errno)));
  }
  // The umask may have taken bits from the owner's; an existing file keeps
  // the mode it had. Either way, set it.
  if (::fchmod(fd, kFileMode) != 0) {
    const int err = errno;
    ::close(fd);
    throw TraceError(fmt::format("{}: cannot set its mode: {}", file.string(), std::strerror(err)));
  }
  return fd;
}

// Creates directory `dir` (its parents as any directory) and gives it mode
// kDirMode. An existing directory is made private too.
void createPrivateDirectory(const fs::path& dir) {
  std::error_code ec;
  if (dir.has_parent_path()) fs::create_directories(dir.parent_path(), ec);
  if (::mkdir(dir.c_str(), kDirMode) != 0 && errno != EEXIST) {
    throw TraceError(fmt::format("{}: cannot create: {}", dir.string(), std::strerror(errno)));
  }
  if (::chmod(dir.c_str(), kDirMode) != 0) {
    throw TraceError(fmt::format("{}: cannot set its mode: {}", dir.string(), std::strerror(errno)));
  }
}

// Writes `file` atomically (temporary file, then rename): `fill(fd, tmp)`
// writes its contents. Throws TraceError.
template <typename Fill>
void writeAtomically(const fs::path& file, Fill fill) {
  const fs::path tmp = file.string() + ".tmp";
  const int fd = createPrivate(tmp, O_TRUNC);
  try {
    fill(fd, tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    throw TraceError(fmt::format("{}: cannot rename: {}", file.string(), std::strerror(errno)));
  }
}

void writeFileAtomic(const fs::path& file, std::span<const uint8_t> bytes) {
  writeAtomically(file, [&](int fd, const fs::path& tmp) { writeAll(fd, bytes.data(), bytes.size(), tmp); });
}

// Compresses `bytes` with `cctx` into `file`, atomically, a chunk at a time:
// the file is written while zstd's workers compress the rest, and no buffer
// of the compressed size is needed. Returns the compressed size.
uint64_t writeCompressedAtomic(const fs::path& file, ZSTD_CCtx* cctx, std::span<const uint8_t> bytes) {
  uint64_t written = 0;
  writeAtomically(file, [&](int fd, const fs::path& tmp) {
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
    ZSTD_CCtx_setPledgedSrcSize(cctx, bytes.size());  // the reader needs the size in the frame
    std::vector<uint8_t> chunk(ZSTD_CStreamOutSize() * 8);
    ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
    size_t left = 0;
    do {
      ZSTD_outBuffer out{chunk.data(), chunk.size(), 0};
      left = ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end);
      if (ZSTD_isError(left)) throw TraceError(fmt::format("zstd: {}", ZSTD_getErrorName(left)));
      writeAll(fd, chunk.data(), out.pos, tmp);
      written += out.pos;
    } while (left != 0);
  });
  return written;
}

struct Block {
  std::vector<uint8_t> frames;
  BlockInfo info;
};

}  // namespace

struct TraceWriter::Impl {
  fs::path dir;
  WriterOptions options;
  int eventsFd = -1;
  Scratch scratch;       // the owner's, for events
  Scratch blockScratch;  // the compressing thread's, for block headers
  std::vector<uint8_t> compressed;  // the compressing thread's, for frames
  ZSTD_CCtx* cctx = nullptr;
  ZSTD_CCtx* blobCctx = nullptr;  // the owner's, for putBlob: its workers live as long as the writer
  bool closed = false;

  // The block being filled, and its function table.
  Block current;
  std::unordered_map<std::string, uint32_t> functionIds;  // key: module '\0' name
  std::string functionKey;
  // The same ids by the caller's identity of a name (append) and the module.
  struct Identity {
    const void* name;
    uint32_t module;
    bool operator==(const Identity&) const = default;
  };
  struct IdentityHash {
    size_t operator()(const Identity& i) const {
      return std::hash<const void*>()(i.name) ^ (size_t{i.module} * 0x9e3779b97f4a7c15ull);
    }
  };
  std::unordered_map<Identity, uint32_t, IdentityHash> functionIdsByIdentity;
  uint64_t lastSeq = 0;
  bool anyEvent = false;
  uint64_t eventsWritten = 0;

  // Shared with the compression thread; guarded by `mu`.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Block> queue;
  bool busy = false;  // the thread is working on a block taken from `queue`
  bool stop = false;
  std::string error;  // first write error, reported to the owner
  std::vector<BlockInfo> index;
  std::vector<HostRegion> hostRegions;
  int64_t stoppedAfterStep = -1;
  std::optional<RecorderMemory> recorderMemory;
  std::optional<LayerSteps> layerSteps;
  uint64_t fileOffset = 0;
  uint64_t bytesWritten = 0;
  BlobId headerSum, indexSum;  // XXH3-128 of the header and index files
  std::set<BlobId> blobs;  // only touched by the owner
  std::thread worker;

  void compressAndWrite(Block& block, std::vector<uint8_t>& buffer) {
    // Block header first, then the frame, in one write.
    std::vector<uint8_t> headerBytes;
    // Reused, and only ever grown: zero-filling a fresh buffer for every
    // block cost a tenth of the compression itself.
    const size_t bound = ZSTD_compressBound(block.frames.size());
    if (compressed.size() < bound) compressed.resize(bound);
    const size_t n = ZSTD_compress2(cctx, compressed.data(), compressed.size(), block.frames.data(),
                                    block.frames.size());
    if (ZSTD_isError(n)) {
      throw TraceError(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
    }
    block.info.compressedSize = static_cast<uint32_t>(n);
    block.info.uncompressedSize = static_cast<uint32_t>(block.frames.size());
    blockScratch.serialize(headerBytes, [&](capnp::MessageBuilder& b) {
      auto h = b.initRoot<schema::BlockHeader>();
      h.setMagic(container::kBlockMagic);
      h.setCompressedSize(block.info.compressedSize);
      h.setUncompressedSize(block.info.uncompressedSize);
      h.setFirstSeq(block.info.firstSeq);
      h.setEventCount(block.info.eventCount);
      h.setLaunchCount(block.info.launchCount);
      h.setFirstTimeNs(block.info.firstTimeNs);
      h.setLastTimeNs(block.info.lastTimeNs);
    });
    buffer.clear();
    buffer.insert(buffer.end(), headerBytes.begin(), headerBytes.end());
    buffer.insert(buffer.end(), compressed.begin(), compressed.begin() + n);
    writeAll(eventsFd, buffer.data(), buffer.size(), dir / container::kEventsFile);
    std::lock_guard lock(mu);
    block.info.fileOffset = fileOffset;
    fileOffset += buffer.size();
    bytesWritten += buffer.size();
    index.push_back(block.info);
  }

  // Background thread: compress and write queued blocks in order.
  void run() {
    std::vector<uint8_t> buffer;
    std::unique_lock lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;
      Block block = std::move(queue.front());
      queue.pop_front();
      busy = true;
      lock.unlock();
      std::string failure;
      try {
        if (error.empty()) compressAndWrite(block, buffer);
      } catch (const std::exception& e) {
        failure = e.what();
      }
      lock.lock();
      if (!failure.empty() && error.empty()) error = failure;
      busy = false;
      cv.notify_all();
    }
  }

  void throwIfFailed() {
    std::lock_guard lock(mu);
    if (!error.empty()) throw TraceError(error);
  }

  // Hands the current block to the thread (or writes it inline).
  void sealBlock() {
    if (current.info.eventCount == 0 && current.frames.empty()) return;
    Block block = std::move(current);
    current = Block{};
    current.frames.reserve(options.blockBytes + options.blockBytes / 8);
    functionIds.clear();
    functionIdsByIdentity.clear();
    if (!options.background) {
      std::vector<uint8_t> buffer;
      compressAndWrite(block, buffer);
      return;
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return queue.size() < options.maxQueuedBlocks || !error.empty(); });
    if (!error.empty()) throw TraceError(error);
    queue.push_back(std::move(block));
    cv.notify_all();
  }

  void drain() {
    if (!options.background) return;
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return (queue.empty() && !busy) || !error.empty(); });
    if (!error.empty()) throw TraceError(error);
  }

  uint32_t functionId(const KernelLaunch& launch, const void* identity) {
    if (identity == nullptr) return functionId(launch);
    const auto found = functionIdsByIdentity.try_emplace(Identity{identity, launch.module}, 0);
    if (found.second) found.first->second = functionId(launch);
    return found.first->second;
  }

  uint32_t functionId(const KernelLaunch& launch) {
    functionKey.assign(reinterpret_cast<const char*>(&launch.module), sizeof(launch.module));
    functionKey += launch.function;
    // No structured binding: clang before 16 cannot capture one in a lambda.
    const auto emplaced = functionIds.try_emplace(functionKey, functionIds.size());
    const uint32_t id = emplaced.first->second;
    if (emplaced.second) {
      scratch.serialize(current.frames, [&](capnp::MessageBuilder& b) {
        auto f = b.initRoot<schema::Frame>().initFunction();
        f.setId(id);
        f.setModule(launch.module);
        f.setName(kj::StringPtr(launch.function.c_str(), launch.function.size()));
      });
    }
    return id;
  }

  void writeIndex() {
    std::vector<uint8_t> bytes;
    capnp::MallocMessageBuilder builder;
    auto root = builder.initRoot<schema::Index>();
    auto entries = root.initBlocks(index.size());
    for (size_t i = 0; i < index.size(); ++i) {
      const BlockInfo& b = index[i];
      auto e = entries[i];
      e.setFileOffset(b.fileOffset);
      e.setFirstSeq(b.firstSeq);
      e.setEventCount(b.eventCount);
      e.setLaunchCount(b.launchCount);
      e.setFirstTimeNs(b.firstTimeNs);
      e.setLastTimeNs(b.lastTimeNs);
      e.setCompressedSize(b.compressedSize);
      e.setUncompressedSize(b.uncompressedSize);
    }
    if (!hostRegions.empty()) {
      auto regions = root.initHostRegions(hostRegions.size());
      for (size_t i = 0; i < hostRegions.size(); ++i) {
        regions[i].setStart(hostRegions[i].start);
        regions[i].setEnd(hostRegions[i].end);
      }
    }
    root.setStoppedAfterStep(stoppedAfterStep);
    if (recorderMemory) {
      auto m = root.initRecorderMemory();
      m.setHostBytes(recorderMemory->hostBytes);
      m.setQueueBytes(recorderMemory->queueBytes);
      m.setSnapshotBytes(recorderMemory->snapshotBytes);
      m.setWriterBytes(recorderMemory->writerBytes);
      m.setPinnedHostBytes(recorderMemory->pinnedHostBytes);
      m.setDeviceBytes(recorderMemory->deviceBytes);
      m.setEventsDropped(recorderMemory->eventsDropped);
    }
    if (layerSteps) {
      auto l = root.initLayerSteps();
      l.setObserved(layerSteps->observed);
      l.setFollowed(layerSteps->followed);
      l.setUnmatched(layerSteps->unmatched);
      l.setTemplates(layerSteps->templates);
      l.setSwitches(layerSteps->switches);
    }
    ByteSink sink(bytes);
    capnp::writeMessage(sink, builder);
    writeFileAtomic(dir / container::kIndexFile, bytes);
    bytesWritten += bytes.size();
    indexSum = blobIdOf(bytes);
  }

  // Last of all: the XXH3-128 of `header` and `index`, as `xxhsum -H2`
  // prints them, so that readers can tell a damaged one (FORMAT.md §5).
  void writeChecksums() {
    const std::string text = fmt::format("{}  {}\n{}  {}\n", headerSum.hex(), container::kHeaderFile,
                                         indexSum.hex(), container::kIndexFile);
    writeFileAtomic(dir / container::kChecksumsFile,
                    {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
    bytesWritten += text.size();
  }
};

TraceWriter::TraceWriter(const fs::path& dir, const Header& header, WriterOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  w.dir = dir;
  w.options = options;
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec))) {
    throw TraceError(fmt::format("{}: already exists; choose another output or remove it",
                                 dir.string()));
  }
  createPrivateDirectory(dir);
  createPrivateDirectory(dir / container::kBlobDir);

  const std::string version = fmt::format("{}{}\n", container::kVersionPrefix, kFormatVersion);
  writeFileAtomic(dir / container::kVersionFile,
                  {reinterpret_cast<const uint8_t*>(version.data()), version.size()});
  {
    capnp::MallocMessageBuilder builder;
    Header h = header;
    h.formatVersion = kFormatVersion;
    h.compatVersion = kCompatVersion;
    codec::encodeHeader(h, builder.initRoot<schema::Header>());
    std::vector<uint8_t> bytes;
    ByteSink sink(bytes);
    capnp::writeMessage(sink, builder);
    writeFileAtomic(dir / container::kHeaderFile, bytes);
    w.bytesWritten += bytes.size() + version.size();
    w.headerSum = blobIdOf(bytes);
  }
  const fs::path events = dir / container::kEventsFile;
  w.eventsFd = createPrivate(events, O_TRUNC | O_APPEND);
  w.cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(w.cctx, ZSTD_c_compressionLevel, options.zstdLevel);
  ZSTD_CCtx_setParameter(w.cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(w.cctx, ZSTD_c_contentSizeFlag, 1);
  w.blobCctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(w.blobCctx, ZSTD_c_compressionLevel, options.zstdLevel);
  ZSTD_CCtx_setParameter(w.blobCctx, ZSTD_c_checksumFlag, 1);
  w.current.frames.reserve(options.blockBytes + options.blockBytes / 8);
  if (options.background) w.worker = std::thread([&w] { w.run(); });
}

TraceWriter::~TraceWriter() {
  if (!impl_) return;
  try {
    close();
  } catch (...) {
    // Destructors must not throw; callers who care call close() themselves.
  }
  Impl& w = *impl_;
  if (w.worker.joinable()) {
    {
      std::lock_guard lock(w.mu);
      w.stop = true;
    }
    w.cv.notify_all();
    w.worker.join();
  }
  if (w.eventsFd >= 0) ::close(w.eventsFd);
  ZSTD_freeCCtx(w.cctx);
  ZSTD_freeCCtx(w.blobCctx);
}

BlobRef TraceWriter::putBlob(std::span<const uint8_t> bytes, BlobEncoding encoding) {
  Impl& w = *impl_;
  BlobRef ref{blobIdOf(bytes), bytes.size(), encoding};
  if (w.blobs.count(ref.id) != 0) return ref;
  const fs::path file = container::blobPath(w.dir, ref.id);
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    createPrivateDirectory(file.parent_path());
    std::unique_ptr<uint8_t[]> encoded;
    std::span<const uint8_t> stored = bytes;
    if (encoding != BlobEncoding::kRaw) {
      encoded.reset(new uint8_t[bytes.size()]);  // not zero-filled: every byte is written
      stored = encodeBlob(bytes, encoding, {encoded.get(), bytes.size()});
    }
    // A large blob is compressed by several zstd workers. Same frame format;
    // the output does not depend on the number of workers, and a libzstd
    // without threads ignores the setting.
    const bool parallel = stored.size() >= container::kParallelBlobBytes;
    ZSTD_CCtx_setParameter(w.blobCctx, ZSTD_c_nbWorkers, parallel ? static_cast<int>(container::blobThreads()) : 0);
    const uint64_t n = writeCompressedAtomic(file, w.blobCctx, stored);
    std::lock_guard lock(w.mu);
    w.bytesWritten += n;
  }
  w.blobs.insert(ref.id);
  return ref;
}

void TraceWriter::append(const Event& event, const void* functionIdentity) {
  Impl& w = *impl_;
  if (w.closed) throw TraceError(fmt::format("{}: append after close", w.dir.string()));
  if (w.anyEvent && event.seq <= w.lastSeq) {
    throw TraceError(fmt::format("{}: event seq {} does not follow {}", w.dir.string(), event.seq,
                                 w.lastSeq));
  }
  w.throwIfFailed();
  const auto* launch = std::get_if<KernelLaunch>(&event.payload);
  const uint32_t fn = launch ? w.functionId(*launch, functionIdentity) : 0;
  w.scratch.serialize(w.current.frames, [&](capnp::MessageBuilder& b) {
    codec::encodeEvent(event, fn, b.initRoot<schema::Frame>().initEvent());
  });
  BlockInfo& info = w.current.info;
  if (info.eventCount == 0) {
    info.firstSeq = event.seq;
    info.firstTimeNs = event.timeNs;
  }
  info.lastTimeNs = event.timeNs;
  ++info.eventCount;
  if (launch) ++info.launchCount;
  w.lastSeq = event.seq;
  w.anyEvent = true;
  ++w.eventsWritten;
  if (w.current.frames.size() >= w.options.blockBytes) w.sealBlock();
}

void TraceWriter::flush() {
  Impl& w = *impl_;
  w.throwIfFailed();
  w.sealBlock();
  w.drain();
}

void TraceWriter::setHostRegions(std::vector<HostRegion> regions) { impl_->hostRegions = std::move(regions); }
void TraceWriter::setStoppedAfterStep(int64_t step) { impl_->stoppedAfterStep = step; }
void TraceWriter::setRecorderMemory(const RecorderMemory& memory) { impl_->recorderMemory = memory; }
void TraceWriter::setLayerSteps(const LayerSteps& steps) { impl_->layerSteps = steps; }
uint64_t TraceWriter::memoryBound() const {
  const WriterOptions& o = impl_->options;
  // Each block's frames (reserved with an eighth more) and its compressed copy.
  return (o.maxQueuedBlocks + 2) * (o.blockBytes + o.blockBytes / 8) * 2;
}

void TraceWriter::close() {
  Impl& w = *impl_;
  if (w.closed) return;
  w.closed = true;
  w.sealBlock();
  w.drain();
  w.writeIndex();
  w.writeChecksums();
}

uint64_t TraceWriter::eventsWritten() const { return impl_->eventsWritten; }

uint64_t TraceWriter::bytesWritten() const {
  std::lock_guard lock(impl_->mu);
  return impl_->bytesWritten;
}

}  // namespace gpurr::trace
