// Comparing two states of device buffers: which chunk digests differ, which
// bytes, and by how much element by element; and, for a set of ranges (a
// recording's and a replay's, or two replays'), a cheap digest check and a
// detailed report of where and by how much they differ.
//
// One comparison for the diff (diff/compare.cpp: where two runs' ranges
// differ) and the replayer (a replay's outputs against the recording's), so
// that both say the same of the same bytes. Sees trace_format's value types
// only: includes neither the diff's headers nor the replayer's.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trace_format/events.h"

namespace gpurr::compare {

// How the bytes of a buffer are read for an element-wise comparison.
enum class ElementType : uint8_t { kBytes, kFloat16, kBFloat16, kFloat32, kFloat64, kInt32 };
const char* toString(ElementType type);  // "float32"...
std::optional<ElementType> parseElementType(std::string_view name);  // "f32", "float32", "bf16"...
size_t elementSize(ElementType type);

// The element type to read a buffer as when none is known: float32 for sizes
// that are a multiple of 4 (training data is mostly float32), float16 for
// blobs stored as 2-byte planes, bytes otherwise. The guess is an assumption
// and reports say so.
ElementType guessElementType(uint64_t size, trace::BlobEncoding encoding);

// Element-wise difference of two buffers of the same size.
struct ElementDiff {
  ElementType type = ElementType::kBytes;
  bool assumed = false;          // the type was guessed, not known
  uint64_t elements = 0;         // whole elements compared
  uint64_t differing = 0;        // elements whose bits differ
  uint64_t firstDiffering = 0;   // index of the first, when differing > 0
  double maxAbs = 0;             // largest |a - b| over differing finite pairs
  uint64_t maxUlp = 0;           // largest distance in units in the last place
  uint64_t nanMismatches = 0;    // one side NaN, the other not (or different NaNs)
  uint64_t infMismatches = 0;    // an infinity against a different value
  uint64_t trailingBytes = 0;    // bytes past the last whole element (compared as bytes)
  uint64_t trailingDiffering = 0;
};

// Compares `a` and `b` (equal sizes) read as `type`.
ElementDiff compareElements(std::span<const uint8_t> a, std::span<const uint8_t> b, ElementType type,
                            bool assumed = false);

// Distance in units in the last place between two floats of the same type
// given as raw bits: how many representable values lie between them
// (+0 and -0 are 0 apart). Not meaningful for NaNs.
uint64_t ulpDistance32(uint32_t a, uint32_t b);
uint64_t ulpDistance64(uint64_t a, uint64_t b);
uint64_t ulpDistance16(uint16_t a, uint16_t b);

// The chunks whose digests differ, by index, in order; lists of different
// lengths compare nothing (none).
std::vector<uint64_t> differingChunks(std::span<const uint64_t> a, std::span<const uint64_t> b);

// Where two buffers of the same size differ, byte by byte: how many bytes,
// and the spans [begin, end) they make, merged.
struct ByteDiff {
  uint64_t differing = 0;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
};
ByteDiff compareBytes(std::span<const uint8_t> a, std::span<const uint8_t> b);

// "alloc#4+0x0 (4.0 MiB)", or the address of a range outside every allocation.
std::string describeRange(const trace::DeviceRange& range);

// One range's state: its digest, chunk digests when known, bytes when held.
struct RangeState {
  trace::DeviceRange range;
  uint64_t digest = 0;
  std::vector<uint64_t> chunkDigests;
  std::optional<std::vector<uint8_t>> bytes;
  // How a recording stored the bytes: a hint for guessing the element type.
  trace::BlobEncoding encoding = trace::BlobEncoding::kRaw;
};

// How one range differs between two states.
struct RangeComparison {
  size_t index = 0;          // position in the compared lists
  trace::DeviceRange range;  // as in the first state
  uint64_t digestA = 0, digestB = 0;
  bool equal = true;
  uint64_t chunks = 0;           // 0 when either side lacks chunk digests
  uint64_t differingChunks = 0;
  uint64_t firstDifferingChunk = 0;
  std::optional<ElementDiff> elements;  // when both sides held bytes
};

// The comparison of two states of the same ranges, in the same order.
class StateComparison {
 public:
  // Whether two states hold equal digests, range by range: the cheap check.
  static bool matches(std::span<const RangeState> a, std::span<const RangeState> b);

  // The detailed report. Bytes, when both sides hold them, are read as
  // `type`, or as guessElementType() when none is given.
  static StateComparison compare(std::span<const RangeState> a, std::span<const RangeState> b,
                                 std::optional<ElementType> type = std::nullopt);

  bool matches() const { return differing_ == 0; }
  size_t differing() const { return differing_; }
  const std::vector<RangeComparison>& ranges() const { return ranges_; }

  // One line per differing range: "alloc#4+0x0 (4.0 MiB): 1,021 of 1,048,576
  // float32 (assumed) differ, max |d| 3.1e-07, max 12 ulp".
  std::vector<std::string> describe() const;

 private:
  std::vector<RangeComparison> ranges_;
  size_t differing_ = 0;
};

// "1,021 of 1,048,576 float32 (assumed) differ, first at [17], max |d| 3.1e-07, max 12 ulp".
std::string describe(const ElementDiff& diff);

}  // namespace gpurr::compare
