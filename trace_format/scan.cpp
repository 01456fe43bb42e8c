// scanEvents: the summary decode behind gpurr diff's whole-trace passes. It
// walks the blocks that TraceReader validated when it opened the trace, with
// one reusable decompression context and buffers, and reads only the fields
// ScanEvent exposes. Every Cap'n Proto or zstd failure is a TraceError.
#include "trace_format/scan.h"

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_d_stableOutBuffer
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "trace_format/codec.h"
#include "trace_format/container.h"
#include "trace_format/frame_buffer.h"
#include "trace_format/framing.h"
#include "trace_format/scan_wire.h"

namespace gpurr::trace {
namespace fs = std::filesystem;
namespace schema = capnp_schema;

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads and decompresses the blocks of one trace, reusing every buffer.
class BlockSource {
 public:
  explicit BlockSource(const TraceReader& reader)
      : reader_(reader), path_(reader.path() / container::kEventsFile), dctx_(ZSTD_createDCtx()) {
    fd_.fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_.fd < 0) {
      throw TraceError(fmt::format("{}: cannot open: {}", path_.string(), std::strerror(errno)));
    }
    if (!dctx_) throw TraceError("out of memory for a zstd context");
  }
  ~BlockSource() {
    offerLast();
    ZSTD_freeDCtx(dctx_);
  }

  const fs::path& path() const { return path_; }
  const fs::path& trace() const { return reader_.path(); }

  // Decompresses block `i` in one call; returns its frames.
  kj::ArrayPtr<const capnp::word> load(size_t i) {
    const BlockInfo& b = reader_.blocks().at(i);
    offerLast();
    readCompressed(b);
    const size_t count = b.uncompressedSize / 8;
    const size_t n = ZSTD_decompressDCtx(dctx_, words_.data(), b.uncompressedSize,
                                         compressed_.data(), compressed_.size());
    if (ZSTD_isError(n) || n != b.uncompressedSize) {
      throw CorruptBlock(reader_.path(), b.fileOffset, ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short frame");
    }
    return kj::arrayPtr(words_.data(), count);
  }

  // Streaming alternative to load(): start() reads block `i`'s compressed
  // bytes, then each feed() decompresses a little more straight into place,
  // so that frames are decoded while they are still in the cache. Returns
  // the number of whole words produced so far.
  size_t start(size_t i) {
    const BlockInfo& b = reader_.blocks().at(i);
    offerLast();
    block_ = &b;
    out_ = {nullptr, 0, 0};
    // A block a scan of this trace kept (RecentBlocks): complete already.
    if ((kept_ = reader_.recentBlocks().find(i))) {
      out_ = {nullptr, b.uncompressedSize, b.uncompressedSize};
      return out_.pos / 8;
    }
    readCompressed(b);
    ZSTD_DCtx_reset(dctx_, ZSTD_reset_session_only);
    ZSTD_DCtx_setParameter(dctx_, ZSTD_d_stableOutBuffer, 1);
    in_ = {compressed_.data(), 0, 0};
    out_ = {words_.data(), b.uncompressedSize, 0};
    index_ = i;
    return 0;
  }

  size_t feed() {
    constexpr size_t kStep = 32 << 10;  // compressed bytes per step: ~200 KiB of frames
    if (out_.pos == out_.size) return out_.pos / 8;
    const size_t before = out_.pos;
    while (out_.pos == before) {
      if (in_.size == compressed_.size() && in_.pos == in_.size) {
        throw CorruptBlock(reader_.path(), block_->fileOffset, "short frame");
      }
      in_.size = std::min(compressed_.size(), in_.size + kStep);
      const size_t r = ZSTD_decompressStream(dctx_, &out_, &in_);
      if (ZSTD_isError(r)) {
        throw CorruptBlock(reader_.path(), block_->fileOffset, ZSTD_getErrorName(r));
      }
    }
    return out_.pos / 8;
  }

  const capnp::word* words() const { return kept_ ? kept_->data() : words_.data(); }
  // Hands the frames decoded last to `other`, taking its buffer for the next.
  void swapWords(FrameBuffer& other) {
    if (kept_) {  // shared with the trace's kept blocks: a copy
      other.reserve(out_.size / 8);
      std::memcpy(other.data(), kept_->data(), out_.size);
      kept_.reset();
      return;
    }
    words_.swap(other);
    index_ = SIZE_MAX;  // nothing to offer
  }
  // After the frames of the block started last failed to decode, before it
  // was decompressed to its end: decompresses the rest, so that a frame
  // whose bytes changed since they were written fails its checksum
  // (CorruptBlock). One that does not is as its writer wrote it.
  void throwIfCorrupt() {
    if (block_ == nullptr || kept_) return;
    while (!complete()) feed();
  }
  // Whether the block started last was decompressed to its end.
  bool complete() const { return out_.size != 0 && out_.pos == out_.size; }

 private:
  // The block decompressed last, if complete, to the trace's kept blocks.
  void offerLast() {
    if (kept_) {
      kept_.reset();
    } else if (index_ != SIZE_MAX && complete()) {
      reader_.recentBlocks().offer(index_, out_.size, words_);
    }
    index_ = SIZE_MAX;
  }

  void readCompressed(const BlockInfo& b) {
    compressed_.resize(b.compressedSize);
    preadAll(fd_.fd, compressed_.data(), compressed_.size(), b.frameOffset, path_);
    if (b.uncompressedSize % 8 != 0 || b.uncompressedSize > container::kMaxBlockBytes) {
      throw CorruptBlock(reader_.path(), b.fileOffset, fmt::format("it declares {} bytes", b.uncompressedSize));
    }
    if (const std::string problem =
            container::frameSizeProblem(compressed_.data(), compressed_.size(), b.uncompressedSize);
        !problem.empty()) {
      throw CorruptBlock(reader_.path(), b.fileOffset, problem);
    }
    const size_t count = b.uncompressedSize / 8;
    words_.reserve(count);
  }

  const BlockInfo* block_ = nullptr;
  size_t index_ = SIZE_MAX;  // block_'s, until its frames are handed on
  std::shared_ptr<const FrameBuffer> kept_;  // block_'s frames, when a scan kept them
  ZSTD_inBuffer in_{};
  ZSTD_outBuffer out_{};
  const TraceReader& reader_;
  fs::path path_;
  Fd fd_;
  ZSTD_DCtx* dctx_;
  std::vector<uint8_t> compressed_;
  FrameBuffer words_;
};

DeviceRange range(schema::DeviceRange::Reader r) {
  return {r.getAddress(), r.getSize(), r.getAllocation(), r.getOffset()};
}

// Struct-list elements read in place. Cap'n Proto lays out a struct list as
// elements of one fixed step (data section, then pointers), and checks the
// whole list's bounds when the list pointer is followed; reading fields at
// their schema offsets then saves an out-of-line call per element. Used only
// for a list whose elements are laid out that way and whose first element
// reads the same through the generated accessors (`same`); anything else
// goes through the accessors.
struct InPlace {
  const uint8_t* base = nullptr;
  size_t step = 0, dataBytes = 0, pointerBytes = 0;

  template <typename T>
  T get(size_t i, size_t byteOffset) const {
    if (byteOffset + sizeof(T) > dataBytes) return T(0);  // field absent: its default
    T v;
    std::memcpy(&v, base + i * step + byteOffset, sizeof(T));
    return v;
  }
  bool hasPointer(size_t i, size_t index) const {
    if ((index + 1) * 8 > pointerBytes) return false;
    uint64_t w;
    std::memcpy(&w, base + i * step + dataBytes + index * 8, 8);
    return w != 0;
  }
};

template <typename List>
bool inPlace(List list, InPlace& out) {
  if (list.size() == 0) return false;
  const capnp::AnyStruct::Reader first(list[0]);
  const auto data = first.getDataSection();
  out.base = data.begin();
  out.dataBytes = data.size();
  out.pointerBytes = first.getPointerSection().size() * 8;
  out.step = out.dataBytes + out.pointerBytes;
  if (list.size() > 1) {
    const capnp::AnyStruct::Reader second(list[1]);
    if (second.getDataSection().begin() != out.base + out.step) return false;
  }
  return true;
}

using wire::bound;

void digests(capnp::List<schema::RangeDigest>::Reader in, std::vector<ScanRange>& out) {
  codec::requireElementData(in);
  out.resize(in.size());
  InPlace raw;
  if (inPlace(in, raw)) {
    // RangeDigest: address @0 (byte 0), size @1 (8), allocation @2 (16),
    // bound @7 (20), offset @3 (24), digest @4 (32); chunkDigests is pointer 0.
    auto read = [&](size_t i, ScanRange& o) {
      o.range = {raw.get<uint64_t>(i, 0), raw.get<uint64_t>(i, 8), raw.get<uint32_t>(i, 16),
                 raw.get<uint64_t>(i, 24), bound(raw.get<uint16_t>(i, 20))};
      o.digest = raw.get<uint64_t>(i, 32);
      o.hasChunkDigests = raw.hasPointer(i, 0);
    };
    auto r = in[0];
    read(0, out[0]);
    const ScanRange& f = out[0];
    if (f.range.address == r.getAddress() && f.range.size == r.getSize() &&
        f.range.allocation == r.getAllocation() && f.range.offset == r.getOffset() &&
        f.range.bound == bound(static_cast<uint16_t>(r.getBound())) &&
        f.digest == r.getDigest() && f.hasChunkDigests == r.hasChunkDigests()) {
      for (size_t i = 1; i < in.size(); ++i) read(i, out[i]);
      return;
    }
  }
  for (size_t i = 0; i < in.size(); ++i) {
    auto r = in[i];
    out[i].range = {r.getAddress(), r.getSize(), r.getAllocation(), r.getOffset(),
                    bound(static_cast<uint16_t>(r.getBound()))};
    out[i].digest = r.getDigest();
    out[i].hasChunkDigests = r.hasChunkDigests();
  }
}

void pointerParams(capnp::List<schema::PointerParam>::Reader in, std::vector<PointerParam>& out) {
  codec::requireElementData(in);
  out.resize(in.size());
  InPlace raw;
  if (inPlace(in, raw)) {
    // PointerParam: byteOffset @0 (byte 0), allocation @1 (4), offset @2 (8).
    auto read = [&](size_t i) {
      return PointerParam{raw.get<uint32_t>(i, 0), raw.get<uint32_t>(i, 4), raw.get<uint64_t>(i, 8)};
    };
    auto r = in[0];
    out[0] = read(0);
    if (out[0] == PointerParam{r.getByteOffset(), r.getAllocation(), r.getOffset()}) {
      for (size_t i = 1; i < in.size(); ++i) out[i] = read(i);
      return;
    }
  }
  for (size_t i = 0; i < in.size(); ++i) {
    out[i] = {in[i].getByteOffset(), in[i].getAllocation(), in[i].getOffset()};
  }
}

Dim3 dim(schema::Dim3::Reader d) { return {d.getX(), d.getY(), d.getZ()}; }

std::string_view view(capnp::Text::Reader t) { return {t.cStr(), t.size()}; }

uint64_t siteOf(schema::Origin::Reader o) {
  return originSite(view(o.getOp()), static_cast<Phase>(o.getPhase()), view(o.getForwardOp()), view(o.getModule()),
                    view(o.getFile()), o.getLine());
}

using Function = codec::FunctionEntry;

// Scratch storage behind one ScanEvent's spans.
struct Scratch {
  std::vector<ScanRange> inputs, outputs, reads;
  std::vector<PointerParam> pointers;
  std::vector<Function> functions;
};

// False for an event of a kind this gpurr does not know (only `e.seq` is
// set): the caller skips it.
bool decode(schema::Event::Reader in, Scratch& s, ScanEvent& e) {
  e.seq = in.getSeq();
  e.thread = in.getThread();
  e.captured = false;
  e.benchmarking = in.hasOrigin() && in.getOrigin().getBenchmarking();
  e.site = in.hasOrigin() ? siteOf(in.getOrigin()) : 0;
  e.step = in.hasOrigin() ? in.getOrigin().getStep() : -1;
  s.reads.clear();
  switch (in.which()) {
    case schema::Event::LAUNCH: {
      auto l = in.getLaunch();
      const uint32_t id = l.getFunction();
      if (id >= s.functions.size()) {
        throw TraceError(fmt::format("launch refers to function #{} but its block declares {}",
                                     id, s.functions.size()));
      }
      e.function = s.functions[id].name;
      e.functionId = id;
      e.module = s.functions[id].module;
      e.stream = l.getStream();
      e.grid = dim(l.getGrid());
      e.block = dim(l.getBlock());
      e.cluster = l.hasCluster() ? dim(l.getCluster()) : Dim3{0, 0, 0};
      e.sharedMemBytes = l.getSharedMemBytes();
      auto params = l.getParams();
      e.params = {reinterpret_cast<const uint8_t*>(params.begin()), params.size()};
      pointerParams(l.getPointers(), s.pointers);
      e.pointers = s.pointers;
      digests(l.getInputs(), s.inputs);
      digests(l.getOutputs(), s.outputs);
      digests(l.getReads(), s.reads);
      e.hashed = !l.getNotHashed();
      e.captured = l.getCaptured();
      e.hasAnnotations = l.hasAnnotations();
      break;
    }
    case schema::Event::MEMCPY: {
      auto m = in.getMemcpy();
      e.stream = m.getStream();
      e.memcpyKind = static_cast<MemcpyKind>(static_cast<uint16_t>(m.getKind()));
      e.size = m.getSize();
      e.hasData = m.hasData();
      e.async = m.getAsync();
      e.captured = m.getCaptured();
      s.outputs.resize(1);
      s.outputs[0] = {range(m.getDst()), m.getDigest(), false};
      s.inputs.resize(1);
      s.inputs[0] = {range(m.getSrc()), m.getDigest(), false};
      break;
    }
    case schema::Event::MEMSET: {
      auto m = in.getMemset();
      e.stream = m.getStream();
      e.value = m.getValue();
      e.elementSize = m.getElementSize();
      e.captured = m.getCaptured();
      s.inputs.clear();
      s.outputs.resize(1);
      s.outputs[0] = {range(m.getDst()), m.getDigest(), false};
      break;
    }
    case schema::Event::ALLOC: {
      auto a = in.getAlloc();
      e.ordinal = a.getOrdinal();
      e.address = a.getAddress();
      e.size = a.getSize();
      e.allocationKind = static_cast<AllocationKind>(static_cast<uint16_t>(a.getKind()));
      e.stream = a.getStream();
      break;
    }
    case schema::Event::FREE: {
      auto f = in.getFree();
      e.ordinal = f.getOrdinal();
      e.address = f.getAddress();
      break;
    }
    case schema::Event::MODULE:
      e.ordinal = in.getModule().getOrdinal();
      e.imageDigest = in.getModule().getDigest();
      break;
    case schema::Event::SYNC:
      e.stream = in.getSync().getStream();
      e.syncEvent = in.getSync().getEvent();
      e.syncKind = static_cast<SyncKind>(static_cast<uint16_t>(in.getSync().getKind()));
      break;
    case schema::Event::GRAPH: {
      auto g = in.getGraph();
      e.stream = g.getStream();
      e.nodeCount = g.getNodeCount();
      e.captured = g.getCaptured();
      digests(g.getInputs(), s.inputs);
      digests(g.getOutputs(), s.outputs);
      break;
    }
    case schema::Event::COLLECTIVE: {
      auto c = in.getCollective();
      e.stream = c.getStream(), e.communicator = c.getCommunicator(), e.collectiveSequence = c.getSequence();
      e.collectiveSource = CollectiveSource(std::min<uint16_t>(uint16_t(c.getSource()), 1));  // newer: framework
      e.collectiveOp = c.getOp() <= schema::CollectiveOp::BARRIER ? CollectiveOp(c.getOp()) : CollectiveOp::kOther;
      e.call = c.getCall().cStr(), e.dataType = c.getDataType().cStr(), e.reduceOp = c.getReduceOp().cStr();
      e.processGroup = c.getProcessGroup().cStr(), e.count = c.getCount(), e.rank = c.getRank();
      e.commSize = c.getSize(), e.peer = c.getPeer();
      digests(c.getInputs(), s.inputs), digests(c.getOutputs(), s.outputs);
      break;
    }
    case schema::Event::DROPPED: {
      auto d = in.getDropped();
      e.size = d.getLaunches() + d.getMemcpys() + d.getMemsets() + d.getAllocs() + d.getFrees() + d.getModules() +
               d.getSyncs() + d.getGraphs() + d.getCollectives();
      s.inputs.clear();
      s.outputs.clear();
      break;
    }
    default:
      return false;  // added by a newer gpurr (FORMAT.md §9)
  }
  // The schema's union order is Payload's alternative order.
  e.kind = static_cast<EventKind>(in.which());
  e.inputs = s.inputs;
  e.outputs = s.outputs;
  e.reads = s.reads;
  return true;
}


// Decodes a launch frame without Cap'n Proto; false when the frame is not a
// launch this path reads (the caller then decodes it the ordinary way).
[[gnu::always_inline]] inline bool fastLaunch(kj::ArrayPtr<const capnp::word> message, size_t headerWords, Scratch& s,
                ScanEvent& e) {
  const auto* words = reinterpret_cast<const uint64_t*>(message.begin());
  const wire::Segment seg{words + headerWords, words + message.size()};
  if (seg.begin >= seg.end) return false;
  wire::Struct frame, ev, l;
  if (wire::structAt(seg, seg.begin, frame) != wire::Read::kOk ||
      frame.get<uint16_t>(wire::frame::kWhich) != wire::frame::kEvent ||
      wire::structAt(seg, frame.pointer(0), ev) != wire::Read::kOk ||
      ev.get<uint16_t>(wire::event::kWhich) != wire::event::kLaunch) {
    return false;
  }
  if (wire::structAt(seg, ev.pointer(0), l) == wire::Read::kOther) return false;
  namespace f = wire::launch;
  Dim3 grid, block, cluster;
  std::span<const uint8_t> params;
  if (!wire::dim(seg, l.pointer(f::kGrid), grid, false) ||
      !wire::dim(seg, l.pointer(f::kBlock), block, false) ||
      !wire::dim(seg, l.pointer(f::kCluster), cluster, true) ||
      wire::bytesAt(seg, l.pointer(f::kParams), params) == wire::Read::kOther) {
    return false;
  }
  wire::StructList ptrs;
  if (wire::structListAt(seg, l.pointer(f::kPointers), ptrs) == wire::Read::kOther) return false;
  if (!wire::ranges(seg, l.pointer(f::kInputs), s.inputs) ||
      !wire::ranges(seg, l.pointer(f::kOutputs), s.outputs) ||
      !wire::ranges(seg, l.pointer(f::kReads), s.reads)) {
    return false;
  }
  s.pointers.resize(ptrs.count);
  for (size_t i = 0; i < ptrs.count; ++i) {
    // PointerParam: byteOffset (byte 0), allocation (4), offset (8).
    const wire::Struct p = ptrs.at(i);
    s.pointers[i] = {p.get<uint32_t>(0), p.get<uint32_t>(4), p.get<uint64_t>(8)};
  }
  const uint32_t id = l.get<uint32_t>(f::kFunction);
  if (id >= s.functions.size()) {
    throw TraceError(fmt::format("launch refers to function #{} but its block declares {}", id,
                                 s.functions.size()));
  }
  wire::Struct origin;
  if (wire::structAt(seg, ev.pointer(wire::event::kOrigin), origin) == wire::Read::kOther) return false;
  e.seq = ev.get<uint64_t>(wire::event::kSeq);
  e.thread = ev.get<uint32_t>(wire::event::kThread);
  e.benchmarking = origin.bit(wire::origin::kBenchmarkingBit);
  e.site = 0;
  e.step = -1;
  if (origin.data != nullptr) {
    namespace o = wire::origin;
    std::string_view op, forwardOp, module, file;
    if (!wire::textAt(seg, origin.pointer(o::kOp), op) ||
        !wire::textAt(seg, origin.pointer(o::kForwardOp), forwardOp) ||
        !wire::textAt(seg, origin.pointer(o::kModule), module) || !wire::textAt(seg, origin.pointer(o::kFile), file)) {
      return false;
    }
    e.site = originSite(op, static_cast<Phase>(origin.get<uint16_t>(o::kPhase)), forwardOp, module, file,
                        origin.get<uint32_t>(o::kLine));
    e.step = origin.get<int64_t>(o::kStep) ^ -1;  // stored XOR its default, -1
  }
  e.kind = EventKind::kLaunch;
  e.function = s.functions[id].name;
  e.functionId = id;
  e.module = s.functions[id].module;
  e.stream = l.get<uint64_t>(f::kStream);
  e.grid = grid;
  e.block = block;
  e.cluster = cluster;
  e.sharedMemBytes = l.get<uint32_t>(f::kSharedMem);
  e.params = params;
  e.pointers = s.pointers;
  e.hashed = !l.bit(f::kNotHashedBit);
  e.captured = l.bit(f::kCapturedBit);
  const uint64_t* annotations = l.pointer(f::kAnnotations);
  e.hasAnnotations = annotations != nullptr && *annotations != 0;
  e.inputs = s.inputs;
  e.outputs = s.outputs;
  e.reads = s.reads;
  return true;
}

capnp::ReaderOptions options(size_t words) {
  capnp::ReaderOptions o;
  o.traversalLimitInWords = std::max<uint64_t>(1024, uint64_t{words} * 4);
  o.nestingLimit = 32;
  return o;
}

// What a block held besides the events it emitted.
struct BlockStats {
  uint32_t unknown = 0;  // events of kinds this gpurr does not know
  uint64_t firstUnknown = 0;
  unsigned unknownKind = 0;
};

// Decodes block `i` with `source`, calling `emit` for each event with seq >=
// `fromSeq`; false when `emit` returned false (the block was not finished).
// Throws TraceError, naming the block, on anything corrupt; the events before
// it were emitted. The serial scan and the decoding threads share it, so
// both see the same events and fail alike.
template <typename Emit>
bool decodeBlock(BlockSource& source, const std::vector<BlockInfo>& blocks, size_t i,
                 uint64_t fromSeq, Scratch& scratch, ScanEvent& event, BlockStats& stats,
                 Emit&& emit) {
  const size_t total = blocks[i].uncompressedSize / 8;
  size_t available = source.start(i), pos = 0;
  scratch.functions.clear();
  uint32_t seen = 0;
  uint64_t names = 0;
  stats = {};
  try {
    // Each frame is a message: a segment table, then its segments.
    auto need = [&](size_t words) {
      if (words > total - pos) throw TraceError("a frame runs past the end of its block");
      while (available - pos < words) available = source.feed();
    };
    while (pos < total) {
      need(1);
      const uint32_t* table = reinterpret_cast<const uint32_t*>(source.words() + pos);
      const uint64_t segments = uint64_t{table[0]} + 1;
      if (segments > 512) throw TraceError("a frame declares too many segments");
      const size_t headerWords = static_cast<size_t>((segments + 2) / 2);
      need(headerWords);
      table = reinterpret_cast<const uint32_t*>(source.words() + pos);
      uint64_t words = headerWords;
      for (uint64_t k = 0; k < segments; ++k) words += table[1 + k];
      need(words);
      const auto frameWords = kj::arrayPtr(source.words() + pos, words);
      pos += words;
      // The names a block's launches take, counted once a launch (FORMAT.md
      // §10), as TraceReader counts the copies it makes.
      const auto named = [&] {
        if (event.kind != EventKind::kLaunch) return;
        if (const std::string problem = container::launchNamesProblem(names, event.function.size()); !problem.empty())
          throw TraceError(problem);
      };
      if (segments == 1 && fastLaunch(frameWords, headerWords, scratch, event)) {
        ++seen;
        event.blockIndex = i;
        named();
        if (event.seq >= fromSeq && !container::visiting(emit, event)) return false;
        continue;
      }
      capnp::FlatArrayMessageReader message(frameWords, options(words));
      auto frame = message.getRoot<schema::Frame>();
      if (frame.isFunction()) {
        codec::declareFunction(frame.getFunction(), scratch.functions);
      } else if (frame.isEvent()) {
        ++seen;
        event.blockIndex = i;
        auto in = frame.getEvent();
        if (!decode(in, scratch, event)) {
          if (stats.unknown++ == 0) {
            stats.firstUnknown = event.seq;
            stats.unknownKind = static_cast<unsigned>(in.which());
          }
          continue;
        }
        named();
        if (event.seq >= fromSeq && !container::visiting(emit, event)) return false;
      } else {
        throw TraceError("frame of unknown kind");
      }
    }
  } catch (const CorruptBlock&) {
    throw;
  } catch (const container::VisitorThrew& v) {
    container::rethrow(v, source.path(), blocks[i].fileOffset);
  } catch (const kj::Exception& e) {
    source.throwIfCorrupt();
    throw CorruptBlock(source.trace(), blocks[i].fileOffset, codec::problem(e));
  } catch (const TraceError& e) {
    source.throwIfCorrupt();
    throw CorruptBlock(source.trace(), blocks[i].fileOffset, e.what());
  }
  if (seen != blocks[i].eventCount) {
    throw CorruptBlock(source.trace(), blocks[i].fileOffset,
                       fmt::format("it holds {} events, its header says {}", seen, blocks[i].eventCount));
  }
  return true;
}

// One block decoded by a decoding thread: its events, with the storage
// their views point into (the frames, the function names, the ranges and
// pointer parameters), and the error that ended it, if any.
struct DecodedBlock {
  size_t index = SIZE_MAX;
  bool ready = false;
  bool complete = false;  // `words` holds the whole block
  FrameBuffer words;
  std::vector<Function> functions;
  std::vector<ScanEvent> events;
  std::vector<ScanRange> ranges;
  std::vector<PointerParam> pointers;
  // Where each event's ranges start in `ranges`, set while decoding (the
  // vectors grow) and turned into views at the end.
  struct Offsets {
    uint32_t inputs, outputs, reads, pointers;
  };
  std::vector<Offsets> offsets;
  BlockStats stats;
  std::exception_ptr error;

  void clear() {
    events.clear();
    ranges.clear();
    pointers.clear();
    offsets.clear();
    error = nullptr;
  }

  void add(const ScanEvent& e) {
    events.push_back(e);
    ScanEvent& c = events.back();
    if (c.kind != EventKind::kLaunch) {  // views a launch sets and other kinds leave as they were
      c.function = {};
      c.params = {};
      c.pointers = {};
    }
    Offsets o;
    o.inputs = static_cast<uint32_t>(ranges.size());
    ranges.insert(ranges.end(), c.inputs.begin(), c.inputs.end());
    o.outputs = static_cast<uint32_t>(ranges.size());
    ranges.insert(ranges.end(), c.outputs.begin(), c.outputs.end());
    o.reads = static_cast<uint32_t>(ranges.size());
    ranges.insert(ranges.end(), c.reads.begin(), c.reads.end());
    o.pointers = static_cast<uint32_t>(pointers.size());
    pointers.insert(pointers.end(), c.pointers.begin(), c.pointers.end());
    offsets.push_back(o);
  }

  void finish() {
    for (size_t k = 0; k < events.size(); ++k) {
      ScanEvent& e = events[k];
      const Offsets& o = offsets[k];
      e.inputs = {ranges.data() + o.inputs, e.inputs.size()};
      e.outputs = {ranges.data() + o.outputs, e.outputs.size()};
      e.reads = {ranges.data() + o.reads, e.reads.size()};
      e.pointers = {pointers.data() + o.pointers, e.pointers.size()};
      if (e.kind == EventKind::kLaunch) e.function = functions[e.functionId].name;
    }
  }
};

}  // namespace

uint64_t originSite(std::string_view op, Phase phase, std::string_view forwardOp, std::string_view module,
                    std::string_view file, uint32_t line) {
  uint64_t code = XXH3_64bits_withSeed(op.data(), op.size(), static_cast<uint64_t>(phase));
  for (std::string_view text : {forwardOp, module}) code = XXH3_64bits_withSeed(text.data(), text.size(), code);
  const uint64_t h = XXH3_64bits_withSeed(file.data(), file.size(), code ^ line);
  const uint64_t site = (h & ~uint64_t{0xffffffff}) | (op.empty() ? 0 : (code & 0xffffffff) | 1);
  return site != 0 ? site : uint64_t{1} << 32;
}

unsigned scanThreads(unsigned requested) {
  if (requested != 0) return requested;
  return std::max(1u, std::thread::hardware_concurrency());
}

struct EventScanner::Impl {
  const TraceReader& reader;
  const uint64_t fromSeq;
  size_t next = 0;  // the block the caller visits next
  size_t end = 0;
  bool stopped = false;

  // Without decoding threads: the caller's thread decodes as it visits.
  std::unique_ptr<BlockSource> source;
  Scratch scratch;
  ScanEvent event;

  // With them: block i is decoded into slots[i % slots.size()] by whichever
  // thread claimed it, at most slots.size() blocks ahead of the caller.
  std::vector<std::thread> workers;
  std::vector<std::unique_ptr<DecodedBlock>> slots;
  std::mutex mu;
  std::condition_variable cv;
  size_t claimed = 0;
  bool quit = false;

  Impl(const TraceReader& r, uint64_t from) : reader(r), fromSeq(from) {}

  void work() {
    std::optional<BlockSource> src;
    Scratch s;
    ScanEvent ev;
    std::exception_ptr openError;
    try {
      src.emplace(reader);
    } catch (...) {
      openError = std::current_exception();
    }
    for (;;) {
      size_t i;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return quit || claimed >= end || claimed < next + slots.size(); });
        if (quit || claimed >= end) return;
        i = claimed++;
      }
      DecodedBlock& d = *slots[i % slots.size()];
      offer(d);
      d.clear();
      try {
        if (openError) std::rethrow_exception(openError);
        decodeBlock(*src, reader.blocks(), i, fromSeq, s, ev, d.stats, [&](const ScanEvent& e) {
          d.add(e);
          return true;
        });
      } catch (...) {
        d.error = std::current_exception();
      }
      d.complete = src && src->complete();
      if (src) src->swapWords(d.words);
      std::swap(d.functions, s.functions);
      d.finish();
      {
        std::lock_guard lock(mu);
        d.index = i;
        d.ready = true;
      }
      cv.notify_all();
    }
  }

  // A decoded block's frames, once no one reads them, to the trace's kept
  // blocks (RecentBlocks).
  void offer(DecodedBlock& d) {
    if (d.complete) reader.recentBlocks().offer(d.index, reader.blocks()[d.index].uncompressedSize, d.words);
    d.complete = false;
  }

  ~Impl() {
    {
      std::lock_guard lock(mu);
      quit = true;
    }
    cv.notify_all();
    for (std::thread& t : workers) t.join();
    for (auto& d : slots) offer(*d);  // the last blocks, read or decoded ahead
  }
};

EventScanner::EventScanner(const TraceReader& reader, uint64_t fromSeq, unsigned decoders)
    : impl_(std::make_unique<Impl>(reader, fromSeq)) {
  Impl& m = *impl_;
  const auto& blocks = reader.blocks();
  m.next = blocks.empty() ? 0 : reader.blockOf(fromSeq);
  m.end = blocks.size();
  m.claimed = m.next;
  decoders = static_cast<unsigned>(std::min<size_t>(decoders, m.end - m.next));
  // A decoded block in flight takes about its content's size, more with its
  // ranges: 1 GiB of content at most, so that blocks of 256 MiB (a crafted
  // trace's compress to almost nothing) are not held 2 x cores + 2 times.
  // A recorder's blocks of 1 MiB leave the decoders as many as asked for.
  constexpr uint64_t kInFlightBytes = uint64_t{1} << 30;
  uint64_t largest = 1;
  for (size_t b = m.next; b < m.end; ++b) largest = std::max<uint64_t>(largest, blocks[b].uncompressedSize);
  const uint64_t slotsAllowed = std::max<uint64_t>(4, kInFlightBytes / largest);
  decoders = static_cast<unsigned>(std::min<uint64_t>(decoders, (slotsAllowed - 2) / 2));
  if (decoders == 0) {
    m.source = std::make_unique<BlockSource>(reader);
    return;
  }
  m.slots.resize(2 * decoders + 2);
  for (auto& s : m.slots) s = std::make_unique<DecodedBlock>();
  for (unsigned t = 0; t < decoders; ++t) m.workers.emplace_back([&m] { m.work(); });
}

EventScanner::~EventScanner() = default;

bool EventScanner::next(const std::function<bool(const ScanEvent&)>& visit) {
  Impl& m = *impl_;
  if (m.stopped || m.next >= m.end) return false;
  const size_t i = m.next;
  if (m.source) {
    BlockStats stats;
    if (!decodeBlock(*m.source, m.reader.blocks(), i, m.fromSeq, m.scratch, m.event, stats, visit)) {
      m.stopped = true;
      return false;
    }
    m.reader.noteUnknownEvents(i, stats.unknown, stats.firstUnknown, stats.unknownKind);
    ++m.next;
    return true;
  }
  DecodedBlock& d = *m.slots[i % m.slots.size()];
  {
    std::unique_lock lock(m.mu);
    m.cv.wait(lock, [&] { return d.ready && d.index == i; });
  }
  for (const ScanEvent& e : d.events) {
    if (!visit(e)) {
      m.stopped = true;
      return false;
    }
  }
  if (d.error) {
    m.stopped = true;
    std::rethrow_exception(d.error);
  }
  m.reader.noteUnknownEvents(i, d.stats.unknown, d.stats.firstUnknown, d.stats.unknownKind);
  {
    std::lock_guard lock(m.mu);
    d.ready = false;
    ++m.next;
  }
  m.cv.notify_all();
  return true;
}

void scanEvents(const TraceReader& reader, const std::function<bool(const ScanEvent&)>& visit,
                uint64_t fromSeq, unsigned decoders) {
  EventScanner scanner(reader, fromSeq, decoders);
  while (scanner.next(visit)) {
  }
}

uint64_t decompressAll(const TraceReader& reader) {
  BlockSource source(reader);
  uint64_t bytes = 0;
  for (size_t i = 0; i < reader.blocks().size(); ++i) bytes += source.load(i).size() * 8;
  return bytes;
}

}  // namespace gpurr::trace
