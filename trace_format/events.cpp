// Names of enum values, blob addresses and blob encodings.
#include "trace_format/events.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/text.h"
#include "trace_format/container.h"
#include "trace_format/trace.h"

namespace gpurr::trace {

std::string BlobId::hex() const { return fmt::format("{:016x}{:016x}", high, low); }

std::optional<BlobId> BlobId::fromHex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  BlobId id;
  for (size_t i = 0; i < 32; ++i) {
    const char c = hex[i];
    uint64_t v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    uint64_t& half = i < 16 ? id.high : id.low;
    half = (half << 4) | v;
  }
  return id;
}

BlobId blobIdOf(std::span<const uint8_t> bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return BlobId{h.high64, h.low64};
}

namespace {

size_t planesOf(BlobEncoding encoding) {
  switch (encoding) {
    case BlobEncoding::kBytePlanes4:
      return 4;
    case BlobEncoding::kBytePlanes2:
      return 2;
    case BlobEncoding::kRaw:
      return 1;
  }
  throw TraceError(fmt::format("unknown blob encoding {}", static_cast<unsigned>(encoding)));
}

// The transposes work on tiles of kTile elements: a tile's words are read
// once and each plane's bytes written as one run, so that the compiler
// vectorises the loops and the k output (or input) streams, n bytes apart,
// are touched a run at a time. Words are little-endian, as in FORMAT.md.
static_assert(std::endian::native == std::endian::little, "byte planes assume a little-endian host");
constexpr size_t kTile = 256;

// Elements [begin, end) of n.
template <typename Word>
void splitPlanes(const uint8_t* in, uint8_t* out, size_t n, size_t begin, size_t end) {
  constexpr size_t k = sizeof(Word);
  size_t e = begin;
  for (; e + kTile <= end; e += kTile) {
    Word words[kTile];
    uint8_t planes[k][kTile];
    std::memcpy(words, in + e * k, sizeof words);
    for (size_t p = 0; p < k; ++p) {
      for (size_t i = 0; i < kTile; ++i) planes[p][i] = static_cast<uint8_t>(words[i] >> (8 * p));
    }
    for (size_t p = 0; p < k; ++p) std::memcpy(out + p * n + e, planes[p], kTile);
  }
  for (; e < end; ++e) {
    for (size_t p = 0; p < k; ++p) out[p * n + e] = in[e * k + p];
  }
}

template <typename Word>
void joinPlanes(const uint8_t* in, uint8_t* out, size_t n, size_t begin, size_t end) {
  constexpr size_t k = sizeof(Word);
  size_t e = begin;
  for (; e + kTile <= end; e += kTile) {
    uint8_t planes[k][kTile];
    Word words[kTile];
    for (size_t p = 0; p < k; ++p) std::memcpy(planes[p], in + p * n + e, kTile);
    for (size_t i = 0; i < kTile; ++i) words[i] = planes[0][i];
    for (size_t p = 1; p < k; ++p) {
      for (size_t i = 0; i < kTile; ++i) words[i] |= static_cast<Word>(static_cast<Word>(planes[p][i]) << (8 * p));
    }
    std::memcpy(out + e * k, words, sizeof words);
  }
  for (; e < end; ++e) {
    for (size_t p = 0; p < k; ++p) out[e * k + p] = in[p * n + e];
  }
}

// Runs `transpose(in, out, n, begin, end)` over all n elements: a large blob
// in slices on several threads (container::kParallelBlobBytes).
template <typename Transpose>
void overElements(Transpose transpose, const uint8_t* in, uint8_t* out, size_t n, size_t k) {
  const size_t threads = n * k < container::kParallelBlobBytes ? 1 : container::blobThreads();
  const size_t slice = (n / threads + kTile - 1) / kTile * kTile;
  std::vector<std::thread> others;
  for (size_t t = 1; t < threads; ++t) {
    const size_t begin = std::min(n, t * slice), end = std::min(n, begin + slice);
    others.emplace_back([=] { transpose(in, out, n, begin, end); });
  }
  transpose(in, out, n, 0, std::min(n, slice));
  for (std::thread& t : others) t.join();
}

}  // namespace

// Byte planes: for elements of k bytes, all first bytes, then all second
// bytes, ...; a tail shorter than one element stays at the end unchanged.
// Exponent bytes of floats line up and compress far better this way.
std::span<const uint8_t> encodeBlob(std::span<const uint8_t> bytes, BlobEncoding encoding, std::span<uint8_t> out) {
  const size_t k = planesOf(encoding);
  if (out.size() != bytes.size()) throw TraceError("encodeBlob: the output's size differs from the input's");
  const size_t n = bytes.size() / k, body = n * k;
  if (k == 4) overElements(splitPlanes<uint32_t>, bytes.data(), out.data(), n, k);
  if (k == 2) overElements(splitPlanes<uint16_t>, bytes.data(), out.data(), n, k);
  if (k == 1) std::memcpy(out.data(), bytes.data(), body);
  std::memcpy(out.data() + body, bytes.data() + body, bytes.size() - body);
  return out;
}

std::vector<uint8_t> encodeBlob(std::span<const uint8_t> bytes, BlobEncoding encoding) {
  std::vector<uint8_t> out(bytes.size());
  encodeBlob(bytes, encoding, out);
  return out;
}

std::vector<uint8_t> decodeBlob(std::span<const uint8_t> stored, BlobEncoding encoding) {
  const size_t k = planesOf(encoding);
  std::vector<uint8_t> out(stored.size());
  const size_t n = stored.size() / k, body = n * k;
  if (k == 4) overElements(joinPlanes<uint32_t>, stored.data(), out.data(), n, k);
  if (k == 2) overElements(joinPlanes<uint16_t>, stored.data(), out.data(), n, k);
  if (k == 1) std::memcpy(out.data(), stored.data(), body);
  std::memcpy(out.data() + body, stored.data() + body, stored.size() - body);
  return out;
}

uint32_t appendParam(KernelLaunch& launch, const void* bytes, uint32_t size, uint32_t align) {
  const size_t at = (launch.params.size() + align - 1) / align * align;
  launch.params.resize(at + size);
  std::memcpy(launch.params.data() + at, bytes, size);
  launch.paramLayout.push_back({static_cast<uint32_t>(at), size});
  return static_cast<uint32_t>(at);
}

uint32_t appendPointerParam(KernelLaunch& launch, uint64_t address, uint32_t ordinal,
                            uint64_t offset) {
  const uint32_t at = appendParam(launch, &address, 8, 8);
  launch.pointers.push_back({at, ordinal, offset});
  return at;
}

const char* toString(AllocationKind kind) {
  switch (kind) {
    case AllocationKind::kDevice: return "device";
    case AllocationKind::kAsync: return "async";
    case AllocationKind::kVmm: return "vmm";
    case AllocationKind::kManaged: return "managed";
    case AllocationKind::kHostMapped: return "host-mapped";
    case AllocationKind::kModuleGlobal: return "module-global";
    case AllocationKind::kOther: return "other";
  }
  return "unknown";
}

const char* toString(LaunchApi api) {
  switch (api) {
    case LaunchApi::kLaunchKernel: return "cuLaunchKernel";
    case LaunchApi::kLaunchKernelEx: return "cuLaunchKernelEx";
    case LaunchApi::kLaunchCooperative: return "cuLaunchCooperativeKernel";
    case LaunchApi::kLaunchKernelPtsz: return "cuLaunchKernel_ptsz";
    case LaunchApi::kLaunchKernelExPtsz: return "cuLaunchKernelEx_ptsz";
    case LaunchApi::kLaunchCooperativePtsz: return "cuLaunchCooperativeKernel_ptsz";
    case LaunchApi::kLaunchHost: return "cuLaunchHostFunc";
  }
  return "unknown";
}

const char* toString(MemcpyKind kind) {
  switch (kind) {
    case MemcpyKind::kHostToDevice: return "HtoD";
    case MemcpyKind::kDeviceToHost: return "DtoH";
    case MemcpyKind::kDeviceToDevice: return "DtoD";
    case MemcpyKind::kHostToHost: return "HtoH";
    case MemcpyKind::kPeer: return "peer";
    case MemcpyKind::kUnknown: return "unknown";
  }
  return "unknown";
}

const char* toString(RangeBound bound) {
  return bound == RangeBound::kBlock ? "block" : "allocation";
}

const char* toString(Phase phase) {
  switch (phase) {
    case Phase::kUnknown: return "unknown";
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
  }
  return "unknown";
}

const char* toString(InPlace inPlace) {
  switch (inPlace) {
    case InPlace::kUnknown: return "unknown";
    case InPlace::kNo: return "no";
    case InPlace::kYes: return "yes";
  }
  return "unknown";
}

std::string describe(const GraphLaunch& g) {
  if (g.nodeCount == 0) return "graph launch";
  return fmt::format("graph launch ({} node{})", g.nodeCount, g.nodeCount == 1 ? "" : "s");
}

std::string describe(const Collective& c) {
  std::string s = c.call.empty() ? toString(c.op) : c.call;
  if (!c.reduceOp.empty()) s += " " + c.reduceOp;
  s += fmt::format(" {} {}", c.count, c.dataType.empty() ? "elements" : c.dataType);
  if (c.peer >= 0) s += fmt::format(" {} {}", c.op == CollectiveOp::kSend || c.op == CollectiveOp::kRecv ? "peer" : "root", c.peer);
  s += fmt::format(" (rank {} of {}, ", c.rank, c.size);
  if (!c.processGroup.empty()) s += fmt::format("process group {}, ", c.processGroup);
  return s + fmt::format("communicator {:016x}, #{})", c.communicator, c.sequence);
}

std::string frameworkOpOf(const Event& event) {
  if (event.origin && !event.origin->op.empty()) return event.origin->op;
  if (const auto* k = std::get_if<KernelLaunch>(&event.payload)) {
    for (const Annotation& a : k->annotations) {
      if (const auto* f = std::get_if<FrameworkOp>(&a)) return f->name;
    }
  }
  return {};
}

std::string sourceLine(const Origin& o) { return sourceLine(o.file, o.line); }

std::string sourceLine(std::string_view file, uint32_t line) {
  if (file.empty()) return "";
  size_t from = file.rfind('/') + 1;  // 0 without a slash
  for (std::string_view packages : {"/site-packages/", "/dist-packages/"}) {
    if (const size_t at = file.rfind(packages); at != std::string_view::npos) from = at + packages.size();
  }
  return fmt::format("{}:{}", file.substr(from), line);
}

std::string describe(const Origin& o, OriginStep step) {
  std::string out = o.op.empty() ? "(no op)" : o.op;
  // The op the program called, where the innermost is another inside it
  // (aten::copy_ inside aten::mul_, aten::addmm inside aten::linear).
  if (const auto called = std::ranges::find_if(o.opStack, [](const std::string& s) { return s.starts_with("aten::"); });
      o.phase != Phase::kBackward && !o.op.empty() && called != o.opStack.end() && *called != o.op) {
    out += " inside " + *called;
  }
  if (o.phase == Phase::kBackward) {
    out += o.forwardOp.empty() ? " (backward)" : fmt::format(" (backward of {})", o.forwardOp);
  } else if (o.phase == Phase::kForward) {
    // An optimizer's step runs outside forward and backward: PyTorch's
    // optimizers open a profiler range named for it.
    const auto step =
        std::ranges::find_if(o.opStack, [](const std::string& s) { return s.starts_with("Optimizer.step#"); });
    out += step == o.opStack.end() ? " (forward)"
                                   : fmt::format(" (optimizer step {})", step->substr(step->find('#') + 1));
  }
  if (o.benchmarking) out += " (benchmarking candidates)";
  if (!o.module.empty()) out += " in " + o.module;
  if (!o.file.empty()) out += ", " + sourceLine(o);
  if (o.byPlace) out += " (by its place in a step observed earlier)";
  out = text::oneLine(std::move(out));
  if (o.step < 0 || step == OriginStep::kNone) return out;
  if (step == OriginStep::kLaunch) return out + fmt::format(", step {} (launch {} of the step)", o.step, o.stepLaunch + 1);
  if (o.stepLaunch == 0) return out + fmt::format(", step {} (before its first launch of the step)", o.step);
  return out + fmt::format(", step {} (after {} launch{} of the step)", o.step, o.stepLaunch,
                           o.stepLaunch == 1 ? "" : "es");
}

std::string describe(const EventsDropped& d) {
  std::string kinds;
  for (size_t i = 0; i < d.byKind.size(); ++i) {
    if (d.byKind[i] == 0) continue;
    kinds += (kinds.empty() ? "" : ", ") + std::to_string(d.byKind[i]) + " " + kEventKindNames[i] +
             (d.byKind[i] == 1 ? "" : i == 0 ? "es" : "s");
  }
  const uint64_t n = d.total();
  return std::to_string(n) + (n == 1 ? " event" : " events") + " dropped" + (kinds.empty() ? "" : " (" + kinds + ")");
}

const char* toString(SyncKind kind) {
  switch (kind) {
    case SyncKind::kContextSynchronize: return "ctx-sync";
    case SyncKind::kStreamSynchronize: return "stream-sync";
    case SyncKind::kEventRecord: return "event-record";
    case SyncKind::kEventSynchronize: return "event-sync";
    case SyncKind::kStreamWaitEvent: return "stream-wait-event";
    case SyncKind::kStreamQuery: return "stream-query";
    case SyncKind::kEventQuery: return "event-query";
  }
  return "unknown";
}

const char* toString(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kOther: return "other";
    case CollectiveOp::kAllReduce: return "allReduce";
    case CollectiveOp::kReduceScatter: return "reduceScatter";
    case CollectiveOp::kAllGather: return "allGather";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kReduce: return "reduce";
    case CollectiveOp::kSend: return "send";
    case CollectiveOp::kRecv: return "recv";
    case CollectiveOp::kAllToAll: return "allToAll";
    case CollectiveOp::kGather: return "gather";
    case CollectiveOp::kScatter: return "scatter";
    case CollectiveOp::kBarrier: return "barrier";
  }
  return "other";
}

const char* toString(CollectiveSource source) {
  return source == CollectiveSource::kFramework ? "framework" : "nccl";
}

const char* toString(BlobEncoding encoding) {
  switch (encoding) {
    case BlobEncoding::kRaw: return "raw";
    case BlobEncoding::kBytePlanes4: return "byte-planes-4";
    case BlobEncoding::kBytePlanes2: return "byte-planes-2";
  }
  return "unknown";
}

}  // namespace gpurr::trace
