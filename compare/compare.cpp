// Comparison of two states of device buffers (compare.h).
#include "compare/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/text.h"

namespace gpurr::compare {
namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Signed position of a float on the number line, from its sign and magnitude
// bits, so that neighbouring floats are 1 apart.
int64_t orderedKey(uint64_t bits, unsigned width) {
  const uint64_t sign = uint64_t{1} << (width - 1);
  const uint64_t mag = bits & (sign - 1);
  return (bits & sign) ? -static_cast<int64_t>(mag) : static_cast<int64_t>(mag);
}

uint64_t keyDistance(int64_t a, int64_t b) {
  return a > b ? static_cast<uint64_t>(a) - static_cast<uint64_t>(b)
               : static_cast<uint64_t>(b) - static_cast<uint64_t>(a);
}

double halfToDouble(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else if (exp == 31) {
    v = mant ? std::nan("") : INFINITY;
  } else {
    v = std::ldexp(mant + 1024, exp - 25);
  }
  return (h & 0x8000) ? -v : v;
}

double bf16ToDouble(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

using text::humanBytes;
using text::withCommas;

// Folds one differing pair of floating-point values into `d`.
void addFloatPair(ElementDiff& d, double a, double b, uint64_t ulp) {
  if (std::isnan(a) || std::isnan(b)) {
    ++d.nanMismatches;
    return;
  }
  if (std::isinf(a) || std::isinf(b)) {
    ++d.infMismatches;
    return;
  }
  d.maxAbs = std::max(d.maxAbs, std::fabs(a - b));
  d.maxUlp = std::max(d.maxUlp, ulp);
}

}  // namespace

const char* toString(ElementType type) {
  switch (type) {
    case ElementType::kBytes: return "bytes";
    case ElementType::kFloat16: return "float16";
    case ElementType::kBFloat16: return "bfloat16";
    case ElementType::kFloat32: return "float32";
    case ElementType::kFloat64: return "float64";
    case ElementType::kInt32: return "int32";
  }
  return "?";
}

std::optional<ElementType> parseElementType(std::string_view name) {
  if (name == "u8" || name == "bytes" || name == "byte") return ElementType::kBytes;
  if (name == "f16" || name == "float16" || name == "half") return ElementType::kFloat16;
  if (name == "bf16" || name == "bfloat16") return ElementType::kBFloat16;
  if (name == "f32" || name == "float32" || name == "float") return ElementType::kFloat32;
  if (name == "f64" || name == "float64" || name == "double") return ElementType::kFloat64;
  if (name == "i32" || name == "int32" || name == "int") return ElementType::kInt32;
  return std::nullopt;
}

size_t elementSize(ElementType type) {
  switch (type) {
    case ElementType::kBytes: return 1;
    case ElementType::kFloat16:
    case ElementType::kBFloat16: return 2;
    case ElementType::kFloat32:
    case ElementType::kInt32: return 4;
    case ElementType::kFloat64: return 8;
  }
  return 1;
}

ElementType guessElementType(uint64_t size, trace::BlobEncoding encoding) {
  if (encoding == trace::BlobEncoding::kBytePlanes2 && size % 2 == 0) return ElementType::kFloat16;
  if (size % 4 == 0) return ElementType::kFloat32;
  return ElementType::kBytes;
}

uint64_t ulpDistance32(uint32_t a, uint32_t b) { return keyDistance(orderedKey(a, 32), orderedKey(b, 32)); }
uint64_t ulpDistance64(uint64_t a, uint64_t b) { return keyDistance(orderedKey(a, 64), orderedKey(b, 64)); }
uint64_t ulpDistance16(uint16_t a, uint16_t b) { return keyDistance(orderedKey(a, 16), orderedKey(b, 16)); }

ElementDiff compareElements(std::span<const uint8_t> a, std::span<const uint8_t> b, ElementType type,
                            bool assumed) {
  ElementDiff d;
  d.type = type;
  d.assumed = assumed;
  const uint64_t n = std::min(a.size(), b.size());
  const size_t width = elementSize(type);
  d.elements = n / width;
  for (uint64_t i = 0; i < d.elements; ++i) {
    const uint8_t* pa = a.data() + i * width;
    const uint8_t* pb = b.data() + i * width;
    if (std::memcmp(pa, pb, width) == 0) continue;
    if (d.differing++ == 0) d.firstDiffering = i;
    switch (type) {
      case ElementType::kBytes:
        d.maxAbs = std::max(d.maxAbs, std::fabs(static_cast<double>(*pa) - static_cast<double>(*pb)));
        break;
      case ElementType::kInt32:
        d.maxAbs = std::max(d.maxAbs, std::fabs(static_cast<double>(load<int32_t>(pa)) - static_cast<double>(load<int32_t>(pb))));
        break;
      case ElementType::kFloat32: {
        const uint32_t x = load<uint32_t>(pa), y = load<uint32_t>(pb);
        addFloatPair(d, load<float>(pa), load<float>(pb), ulpDistance32(x, y));
        break;
      }
      case ElementType::kFloat64: {
        const uint64_t x = load<uint64_t>(pa), y = load<uint64_t>(pb);
        addFloatPair(d, load<double>(pa), load<double>(pb), ulpDistance64(x, y));
        break;
      }
      case ElementType::kFloat16: {
        const uint16_t x = load<uint16_t>(pa), y = load<uint16_t>(pb);
        addFloatPair(d, halfToDouble(x), halfToDouble(y), ulpDistance16(x, y));
        break;
      }
      case ElementType::kBFloat16: {
        const uint16_t x = load<uint16_t>(pa), y = load<uint16_t>(pb);
        addFloatPair(d, bf16ToDouble(x), bf16ToDouble(y), ulpDistance16(x, y));
        break;
      }
    }
  }
  d.trailingBytes = n - d.elements * width;
  for (uint64_t i = d.elements * width; i < n; ++i) d.trailingDiffering += a[i] != b[i];
  return d;
}

std::vector<uint64_t> differingChunks(std::span<const uint64_t> a, std::span<const uint64_t> b) {
  std::vector<uint64_t> out;
  if (a.size() != b.size()) return out;
  for (uint64_t c = 0; c < a.size(); ++c) {
    if (a[c] != b[c]) out.push_back(c);
  }
  return out;
}

ByteDiff compareBytes(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  ByteDiff out;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] == b[i]) continue;
    ++out.differing;
    if (!out.spans.empty() && out.spans.back().second == i) {
      out.spans.back().second = i + 1;
    } else {
      out.spans.emplace_back(i, i + 1);
    }
  }
  return out;
}

std::string describeRange(const trace::DeviceRange& range) {
  if (range.allocation == 0) return fmt::format("{:#x} ({})", range.address, humanBytes(range.size));
  return fmt::format("alloc#{}+{:#x} ({})", range.allocation, range.offset, humanBytes(range.size));
}

bool StateComparison::matches(std::span<const RangeState> a, std::span<const RangeState> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].digest != b[i].digest || a[i].range.size != b[i].range.size) return false;
  }
  return true;
}

StateComparison StateComparison::compare(std::span<const RangeState> a, std::span<const RangeState> b,
                                         std::optional<ElementType> type) {
  StateComparison out;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    RangeComparison r;
    r.index = i;
    if (i >= a.size() || i >= b.size()) {
      // A range present on one side only differs by definition.
      r.range = i < a.size() ? a[i].range : b[i].range;
      r.equal = false;
      out.ranges_.push_back(r);
      ++out.differing_;
      continue;
    }
    const RangeState& x = a[i];
    const RangeState& y = b[i];
    r.range = x.range;
    r.digestA = x.digest;
    r.digestB = y.digest;
    r.equal = x.digest == y.digest && x.range.size == y.range.size;
    if (!x.chunkDigests.empty() && x.chunkDigests.size() == y.chunkDigests.size()) {
      r.chunks = x.chunkDigests.size();
      const std::vector<uint64_t> differing = differingChunks(x.chunkDigests, y.chunkDigests);
      r.differingChunks = differing.size();
      if (!differing.empty()) r.firstDifferingChunk = differing.front();
    }
    if (!r.equal && x.bytes && y.bytes && x.bytes->size() == y.bytes->size()) {
      const trace::BlobEncoding hint = x.encoding != trace::BlobEncoding::kRaw ? x.encoding : y.encoding;
      const ElementType t = type.value_or(guessElementType(x.bytes->size(), hint));
      r.elements = compareElements(*x.bytes, *y.bytes, t, !type.has_value());
    }
    if (!r.equal) ++out.differing_;
    out.ranges_.push_back(std::move(r));
  }
  return out;
}

std::string describe(const ElementDiff& d) {
  std::string s = fmt::format("{} of {} {}{} differ", withCommas(d.differing), withCommas(d.elements),
                              toString(d.type), d.assumed ? " (assumed)" : "");
  if (d.differing > 0) s += fmt::format(", first at [{}]", d.firstDiffering);
  const bool floating = d.type == ElementType::kFloat16 || d.type == ElementType::kBFloat16 ||
                        d.type == ElementType::kFloat32 || d.type == ElementType::kFloat64;
  if (d.differing > d.nanMismatches + d.infMismatches) {
    s += fmt::format(", max |d| {:.3g}", d.maxAbs);
    if (floating) s += fmt::format(", max {} ulp", withCommas(d.maxUlp));
  }
  if (d.nanMismatches) s += fmt::format(", {} NaN mismatches", withCommas(d.nanMismatches));
  if (d.infMismatches) s += fmt::format(", {} infinity mismatches", withCommas(d.infMismatches));
  if (d.trailingDiffering) {
    s += fmt::format(", {} of the {} trailing bytes differ", d.trailingDiffering, d.trailingBytes);
  }
  return s;
}

std::vector<std::string> StateComparison::describe() const {
  std::vector<std::string> lines;
  for (const RangeComparison& r : ranges_) {
    if (r.equal) continue;
    std::string line = describeRange(r.range) + ": ";
    if (r.elements) {
      line += compare::describe(*r.elements);
    } else {
      line += fmt::format("digest {:016x} vs {:016x}", r.digestA, r.digestB);
    }
    if (r.chunks > 0) {
      line += fmt::format("; {} of {} 64 KiB chunks differ, first chunk {}", r.differingChunks, r.chunks,
                          r.firstDifferingChunk);
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace gpurr::compare
