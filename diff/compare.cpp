// Comparison of one pair of operations (compare.h): ranges from chunk
// digests and snapshots, parameters with pointers normalised.
#include "diff/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "common/demangle.h"
#include "compare/compare.h"
#include "diff/decode.h"
#include "diff/philox.h"

namespace gpurr::diff {
using namespace gpurr::trace;

namespace {

std::string hexBytes(std::span<const uint8_t> bytes) {
  std::string out;
  for (uint8_t b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

// Merges [begin, end) into sorted `spans`.
void addSpan(std::vector<std::pair<uint64_t, uint64_t>>& spans, uint64_t begin, uint64_t end) {
  if (!spans.empty() && spans.back().second >= begin) {
    spans.back().second = std::max(spans.back().second, end);
  } else {
    spans.emplace_back(begin, end);
  }
}

// A snapshot's bytes; none where its blob cannot be read, which `run` keeps
// to say once.
std::optional<std::vector<uint8_t>> readSnapshot(Run& run, const BlobRef& ref) {
  try {
    return run.reader->readBlob(ref);
  } catch (const TraceError& e) {
    if (std::find(run.unreadableBlobs.begin(), run.unreadableBlobs.end(), e.what()) == run.unreadableBlobs.end()) {
      run.unreadableBlobs.push_back(e.what());
    }
    return std::nullopt;
  }
}

// Where two corresponding ranges differ, from chunk digests or snapshots.
RangeDifference compareRange(const Context& ctx, size_t index, const RangeDigest& ra,
                             const RangeDigest& rb) {
  RangeDifference d;
  d.index = index;
  d.a = ra.range;
  d.b = rb.range;
  d.digestA = ra.digest;
  d.digestB = rb.digest;
  if (ra.range.bound != rb.range.bound) {
    d.boundsDiffer = true;  // different bytes by construction: nothing to locate
    return d;
  }
  const uint64_t size = std::min(ra.range.size, rb.range.size);
  if (!ra.chunkDigests.empty() && ra.chunkDigests.size() == rb.chunkDigests.size() &&
      ctx.chunkBytes > 0) {
    d.chunkBytes = ctx.chunkBytes;
    d.chunks = ra.chunkDigests.size();
    for (const uint64_t c : compare::differingChunks(ra.chunkDigests, rb.chunkDigests)) {
      ++d.differingChunks;
      addSpan(d.spans, c * ctx.chunkBytes, std::min<uint64_t>((c + 1) * ctx.chunkBytes, size));
    }
  }
  if (ra.snapshot && rb.snapshot && ra.snapshot->size == rb.snapshot->size &&
      ra.snapshot->size <= (uint64_t{1} << 30)) {
    // The last pair of snapshots compared, on this thread (ranks are diffed
    // on threads of their own): a pair the runs' ranges share again and
    // again (the same buffer snapshotted at every launch) is read once.
    struct Compared {
      const TraceReader *readerA, *readerB;
      BlobRef a, b;
      RangeDifference::Values values;
      std::vector<std::pair<uint64_t, uint64_t>> spans;
    };
    thread_local std::optional<Compared> last;
    if (!last || last->readerA != ctx.a.reader || last->readerB != ctx.b.reader || last->a != *ra.snapshot ||
        last->b != *rb.snapshot) {
      last.reset();
      // A snapshot that cannot be read only costs detail: the digests
      // still decide.
      const auto ba = readSnapshot(ctx.a, *ra.snapshot);
      const auto bb = readSnapshot(ctx.b, *rb.snapshot);
      if (ba && bb) {
        // Bytes, and float32 values (a difference involving an infinity or
        // a NaN counts, but gives no magnitude).
        compare::ByteDiff bytes = compare::compareBytes(*ba, *bb);
        const compare::ElementDiff floats = compare::compareElements(*ba, *bb, compare::ElementType::kFloat32);
        last = Compared{ctx.a.reader, ctx.b.reader, *ra.snapshot, *rb.snapshot,
                        {bytes.differing, floats.elements, floats.differing, floats.maxAbs}, std::move(bytes.spans)};
      }
    }
    if (last) {
      d.values = last->values;
      d.spans = last->spans;
    }
  }
  if (d.spans.empty()) d.spans.emplace_back(0, size);
  return d;
}

uint64_t normalisedOrdinal(const Run& run, uint32_t ordinal) { return run.ordinals(ordinal); }

// ParamDifference::words: the 8-byte words of two parameters that differ
// outside pointers (by byte: pointer[at + j]), as little-endian values, the
// first few.
std::string differingWords(std::span<const uint8_t> a, std::span<const uint8_t> b, const std::vector<bool>& pointer,
                           size_t at) {
  constexpr size_t kShown = 6;
  std::string out;
  size_t count = 0;
  for (size_t w = 0; w < a.size(); w += 8) {
    const size_t n = std::min<size_t>(8, a.size() - w);
    bool differs = false;
    for (size_t j = w; j < w + n; ++j) differs |= !pointer[at + j] && a[j] != b[j];
    if (!differs || ++count > kShown) continue;
    uint64_t x = 0, y = 0;
    std::memcpy(&x, a.data() + w, n);
    std::memcpy(&y, b.data() + w, n);
    out += fmt::format("{}+{:#x} A {:#0{}x} B {:#0{}x}", out.empty() ? "" : ", ", w, x, 2 + 2 * n, y, 2 + 2 * n);
  }
  if (count > kShown) out += fmt::format(" and {} more word{}", count - kShown, count - kShown == 1 ? "" : "s");
  return out;
}

std::string notAPointer(const KernelLaunch& k, uint32_t at) {
  const std::optional<uint64_t> u = wordAt(k, at);
  return u ? fmt::format("{:#018x} (not a pointer)", *u) : "not a pointer";
}

}  // namespace

std::optional<uint64_t> wordAt(const KernelLaunch& k, uint32_t at) {
  if (uint64_t{at} + 8 > k.params.size()) return std::nullopt;
  uint64_t u;
  std::memcpy(&u, k.params.data() + at, 8);
  return u;
}

bool sameRange(const Context& ctx, const DeviceRange& a, const DeviceRange& b) {
  if (a.size != b.size) return false;
  if (a.allocation == 0 || b.allocation == 0) return a.allocation == b.allocation;
  return normalisedOrdinal(ctx.a, a.allocation) == normalisedOrdinal(ctx.b, b.allocation) &&
         a.offset == b.offset;
}

// Differing ranges of two lists; true when all are identical. Ranges pair by
// allocation identity and offset wherever they sit in the lists (FORMAT.md
// lists them in address order, which differs between runs when the
// allocator hands the same buffers out at other addresses). Those left
// over pair by their place among the left-over ones when the lists are of
// one length (a range that moved to another allocation is compared with
// its counterpart); in lists of different lengths (a pointer seen in one
// run only) each is one run's alone (RangeDifference::a or ::b empty).
bool compareRanges(const Context& ctx, const std::vector<RangeDigest>& a,
                   const std::vector<RangeDigest>& b, std::vector<RangeDifference>& out) {
  std::vector<size_t> pairOfA(a.size(), b.size());
  std::vector<bool> pairedB(b.size(), false);
  // What sameRange() compares, as a key: size, and allocation identity and
  // offset (neither, for a range outside every allocation).
  using Key = std::tuple<uint64_t, bool, uint64_t, uint64_t>;
  const auto key = [](const Run& run, const DeviceRange& r) {
    return r.allocation == 0 ? Key{r.size, false, 0, 0}
                             : Key{r.size, true, normalisedOrdinal(run, r.allocation), r.offset};
  };
  // Most lists are in the same order in both runs: the same place first,
  // then the next ones, wrapping around. Short lists are searched; long ones
  // (a damaged trace's thousands of ranges) looked up.
  if (b.size() <= 32) {
    for (size_t i = 0; i < a.size(); ++i) {
      for (size_t k = 0; k < b.size(); ++k) {
        const size_t j = (i + k) % b.size();
        if (pairedB[j] || key(ctx.a, a[i].range) != key(ctx.b, b[j].range)) continue;
        pairOfA[i] = j;
        pairedB[j] = true;
        break;
      }
    }
  } else {
    std::map<Key, std::set<size_t>> unpairedB;
    for (size_t j = 0; j < b.size(); ++j) unpairedB[key(ctx.b, b[j].range)].insert(j);
    for (size_t i = 0; i < a.size(); ++i) {
      const auto found = unpairedB.find(key(ctx.a, a[i].range));
      if (found == unpairedB.end() || found->second.empty()) continue;
      auto at = found->second.lower_bound(i);
      if (at == found->second.end()) at = found->second.begin();
      pairOfA[i] = *at;
      pairedB[*at] = true;
      found->second.erase(at);
    }
  }
  if (a.size() == b.size()) {
    size_t j = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      if (pairOfA[i] != b.size()) continue;
      while (pairedB[j]) ++j;
      pairOfA[i] = j;
      pairedB[j] = true;
    }
  }
  bool same = a.size() == b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    const size_t j = pairOfA[i];
    if (j == b.size()) {
      RangeDifference d;
      d.index = i;
      d.a = a[i].range, d.digestA = a[i].digest;
      out.push_back(d);
      continue;
    }
    if (a[i].digest == b[j].digest && sameRange(ctx, a[i].range, b[j].range)) continue;
    same = false;
    out.push_back(compareRange(ctx, i, a[i], b[j]));
  }
  for (size_t j = 0; j < b.size(); ++j) {
    if (pairedB[j]) continue;
    RangeDifference d;
    d.index = j;
    d.b = b[j].range, d.digestB = b[j].digest;
    out.push_back(d);
  }
  return same;
}

// The meaning of a pointer that `with` has at `at` and `without` has not:
// a stale address inside a parameter passed by value that is no pointer itself
// (a struct), whatever the other run's word holds, 0 included; else (a
// parameter of its own) a pointer that points elsewhere or is null.
bool sameParameters(const Context& ctx, const Event& a, const Event& b) {
  const auto* ka = std::get_if<KernelLaunch>(&a.payload);
  const auto* kb = std::get_if<KernelLaunch>(&b.payload);
  if (ka && kb) return std::ranges::all_of(compareParams(ctx, *ka, *kb), isHostParameter);
  const auto* sa = std::get_if<Memset>(&a.payload);
  const auto* sb = std::get_if<Memset>(&b.payload);
  return !(sa && sb) || sa->value == sb->value;
}

ParamMeaning pointerMeaning(const KernelLaunch& with, const KernelLaunch& without, uint32_t at) {
  const int32_t p = parameterAt(with, at);
  const bool inStruct = p >= 0 && with.paramLayout[p].size > 8;
  return inStruct && wordAt(without, at) ? ParamMeaning::kStaleAddress : ParamMeaning::kPointer;
}

std::unordered_map<uint32_t, const PointerParam*> pointersByOffset(const KernelLaunch& launch) {
  std::unordered_map<uint32_t, const PointerParam*> out;
  for (const PointerParam& p : launch.pointers) out[p.byteOffset] = &p;
  return out;
}

std::vector<uint32_t> staleWordAllocations(const KernelLaunch& with, const KernelLaunch& without) {
  const auto inWithout = pointersByOffset(without);
  std::vector<uint32_t> out;
  for (const PointerParam& p : with.pointers) {
    if (inWithout.contains(p.byteOffset)) continue;
    if (pointerMeaning(with, without, p.byteOffset) == ParamMeaning::kStaleAddress) out.push_back(p.allocation);
  }
  std::ranges::sort(out);
  return out;
}

bool throughStaleWord(const RangeDifference& d, const std::vector<uint32_t>& staleA,
                      const std::vector<uint32_t>& staleB) {
  if ((d.a.size != 0) == (d.b.size != 0)) return false;
  const DeviceRange& alone = d.a.size != 0 ? d.a : d.b;
  const std::vector<uint32_t>& through = d.a.size != 0 ? staleA : staleB;
  return alone.allocation != 0 && std::ranges::binary_search(through, alone.allocation);
}

// Parameter differences after pointer normalisation, grouped by parameter.
std::vector<ParamDifference> compareParams(const Context& ctx, const KernelLaunch& a,
                                           const KernelLaunch& b) {
  std::vector<ParamDifference> out;
  // Pointers: compared as (allocation, offset).
  std::vector<bool> isPointer(std::max(a.params.size(), b.params.size()), false);
  const auto atA = pointersByOffset(a), atB = pointersByOffset(b);
  for (const PointerParam& pa : a.pointers) {
    const auto found = atB.find(pa.byteOffset);
    const PointerParam* pb = found != atB.end() ? found->second : nullptr;
    for (uint32_t i = pa.byteOffset; i < pa.byteOffset + 8 && i < isPointer.size(); ++i) isPointer[i] = true;
    const bool same = pb && ctx.a.ordinals(pa.allocation) == ctx.b.ordinals(pb->allocation) &&
                      pa.offset == pb->offset;
    if (same) continue;
    ParamDifference d;
    d.offset = pa.byteOffset;
    d.size = 8;
    d.param = parameterAt(a, pa.byteOffset);
    d.a = fmt::format("alloc#{}+{:#x}", pa.allocation, pa.offset);
    d.b = pb ? fmt::format("alloc#{}+{:#x}", pb->allocation, pb->offset) : notAPointer(b, pa.byteOffset);
    d.meaning = pb ? ParamMeaning::kPointer : pointerMeaning(a, b, pa.byteOffset);
    out.push_back(d);
  }
  for (const PointerParam& pb : b.pointers) {
    if (atA.contains(pb.byteOffset)) continue;
    for (uint32_t i = pb.byteOffset; i < pb.byteOffset + 8 && i < isPointer.size(); ++i) isPointer[i] = true;
    out.push_back({pb.byteOffset, 8, parameterAt(a, pb.byteOffset), notAPointer(a, pb.byteOffset),
                   fmt::format("alloc#{}+{:#x}", pb.allocation, pb.offset), pointerMeaning(b, a, pb.byteOffset)});
  }
  // Other bytes: each differing parameter of the layout, or each run of
  // differing bytes when there is no layout.
  const size_t n = std::max(a.params.size(), b.params.size());
  // The type of parameter p as the kernel's demangled name says ("" when
  // its list does not match the layout), read at the first need.
  std::optional<std::vector<std::string>> types;
  auto parameterType = [&](int32_t p) -> std::string_view {
    if (!types) {
      types = demangledParameters(demangled(a.function));
      if (types->size() != a.paramLayout.size()) types->clear();
    }
    return static_cast<size_t>(p) < types->size() ? std::string_view((*types)[p]) : std::string_view();
  };
  auto byteAt = [](const std::vector<uint8_t>& v, size_t i) -> int { return i < v.size() ? v[i] : -1; };
  // The source of an RNG state whose bytes hold byte `at` (rngWindow), on
  // either side; nullptr when none does.
  auto rngSourceAt = [&](size_t at) -> const std::string* {
    for (const KernelLaunch* k : {&a, &b}) {
      if (const RngState* r = rngStateIn(*k, at, at + 1)) return &r->source;
    }
    return nullptr;
  };
  // The aligned word at `at` of `run`'s launch holds a host address
  // (ParamMeaning::kHostAddresses): a value from 4 GiB up to the top of user space, or one
  // in the host memory the process had mapped readable (the trace's host
  // regions: a heap below 4 GiB, as a non-PIE Python's is).
  auto hostAddress = [](const Run& run, const std::vector<uint8_t>& v, size_t at) {
    uint64_t u = 0;
    if (at + 8 > v.size()) return false;
    std::memcpy(&u, v.data() + at, 8);
    if (u >= (1ULL << 32) && u < (1ULL << 47)) return true;
    if (run.reader == nullptr) return false;
    const std::vector<HostRegion>& regions = run.reader->hostRegions();
    auto next = std::upper_bound(regions.begin(), regions.end(), u,
                                 [](uint64_t x, const HostRegion& r) { return x < r.start; });
    return next != regions.begin() && u < std::prev(next)->end;
  };
  size_t i = 0;
  while (i < n) {
    if (isPointer[i] || byteAt(a.params, i) == byteAt(b.params, i)) {
      ++i;
      continue;
    }
    const int32_t p = parameterAt(a, i);
    size_t begin = i, end = i + 1;
    if (p >= 0) {
      begin = a.paramLayout[p].offset;
      end = begin + a.paramLayout[p].size;
    } else {
      while (end < n && !isPointer[end] && byteAt(a.params, end) != byteAt(b.params, end)) ++end;
    }
    auto slice = [&](const std::vector<uint8_t>& v) {
      if (begin >= v.size()) return std::string("(absent)");
      const size_t n = std::min(end, v.size()) - begin;
      // A scalar is shown as its value read both ways a kernel might use it.
      if (n == 4) {
        uint32_t u;
        float f;
        std::memcpy(&u, v.data() + begin, 4);
        std::memcpy(&f, v.data() + begin, 4);
        return fmt::format("{:#010x} (int {}, float {:g})", u, static_cast<int32_t>(u), f);
      }
      if (n == 8) {
        uint64_t u;
        std::memcpy(&u, v.data() + begin, 8);
        return fmt::format("{:#018x} (int {})", u, static_cast<int64_t>(u));
      }
      return hexBytes(std::span<const uint8_t>(v).subspan(begin, n));
    };
    // Is every differing byte in an RNG state's bytes (whatever they read
    // as: a 53-bit seed may lie where host addresses do) or in a word that
    // holds host addresses on both sides? A parameter of the layout holds
    // one only in a whole word of its own (a 4-byte int beside another makes
    // a word that may read as an address), and never when the kernel's
    // signature types it as a number. The RNG state then, if any byte is
    // its, else host addresses.
    const bool mayHoldAddresses = p < 0 || !arithmeticType(parameterType(p));
    bool other = false;
    const std::string* rng = nullptr;
    for (size_t j = begin; j < end && !other; ++j) {
      if (isPointer[j] || byteAt(a.params, j) == byteAt(b.params, j)) continue;
      if (const std::string* source = rngSourceAt(j)) {
        rng = source;
        continue;
      }
      const size_t w = j & ~size_t{7};
      other = !(mayHoldAddresses && (p < 0 || (w >= begin && w + 8 <= end)) && hostAddress(ctx.a, a.params, w) &&
                hostAddress(ctx.b, b.params, w));
    }
    ParamDifference& d = out.emplace_back(ParamDifference{
        static_cast<uint32_t>(begin), static_cast<uint32_t>(end - begin), p, slice(a.params), slice(b.params),
        other               ? ParamMeaning::kNone
        : rng != nullptr    ? ParamMeaning::kRngState
                            : ParamMeaning::kHostAddresses,
        other || rng == nullptr ? std::string() : *rng});
    if (end - begin > 16 && end <= std::min(a.params.size(), b.params.size())) {
      d.words = differingWords(std::span(a.params).subspan(begin, end - begin),
                               std::span(b.params).subspan(begin, end - begin),
                               isPointer, begin);
    }
    i = end;
  }
  std::sort(out.begin(), out.end(),
            [](const ParamDifference& x, const ParamDifference& y) { return x.offset < y.offset; });
  return out;
}

}  // namespace gpurr::diff
