// The launch fast path of scanEvents (scan.cpp): reads the few fields a
// scan needs of a kernel-launch frame straight from the Cap'n Proto wire
// format. Internal to trace_format/; only scan.cpp includes it.
//
// A kernel launch is nearly every event of a trace. Decoding one through the
// generated accessors costs a dozen out-of-line calls; this reads the few
// fields a scan needs straight from the Cap'n Proto wire format
// (https://capnproto.org/encoding.html), at the offsets the schema gives
// them (trace.capnp; the generated accessors name the same indices). It
// handles single-segment frames with plain struct and list pointers, checks
// every pointer against the segment, and returns false for anything else
// (far pointers, unexpected pointer kinds): the caller then decodes the
// frame with Cap'n Proto, which either reads it or reports it corrupt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "trace_format/scan.h"

namespace gpurr::trace::wire {

// RangeDigest.bound as stored; a value a newer gpurr added reads as the
// allocation's (the widest).
inline RangeBound bound(uint16_t stored) { return stored == 1 ? RangeBound::kBlock : RangeBound::kAllocation; }

struct Segment {
  const uint64_t* begin;
  const uint64_t* end;
};

struct Struct {
  const uint8_t* data = nullptr;
  size_t dataBytes = 0;
  const uint64_t* pointers = nullptr;
  size_t pointerCount = 0;

  template <typename T>
  T get(size_t byteOffset) const {  // absent field: zero (the default, before masking)
    if (byteOffset + sizeof(T) > dataBytes) return T(0);
    T v;
    std::memcpy(&v, data + byteOffset, sizeof(T));
    return v;
  }
  bool bit(size_t index) const {
    return index / 8 < dataBytes && ((data[index / 8] >> (index % 8)) & 1) != 0;
  }
  const uint64_t* pointer(size_t i) const { return i < pointerCount ? pointers + i : nullptr; }
};

enum class Read { kOk, kNull, kOther };

[[gnu::always_inline]] inline int64_t offsetOf(uint64_t w) { return static_cast<int32_t>(static_cast<uint32_t>(w)) >> 2; }

[[gnu::always_inline]] inline Read structAt(const Segment& seg, const uint64_t* p, Struct& out) {
  out = {};
  if (p == nullptr || *p == 0) return Read::kNull;
  const uint64_t w = *p;
  if ((w & 3) != 0) return Read::kOther;
  const uint64_t* target = p + 1 + offsetOf(w);
  const uint64_t dataWords = (w >> 32) & 0xffff, pointerCount = w >> 48;
  if (target < seg.begin || target > seg.end ||
      static_cast<uint64_t>(seg.end - target) < dataWords + pointerCount) {
    return Read::kOther;
  }
  out = {reinterpret_cast<const uint8_t*>(target), dataWords * 8, target + dataWords, pointerCount};
  return Read::kOk;
}

struct StructList {
  const uint64_t* first = nullptr;
  size_t count = 0, stepWords = 0, dataWords = 0, pointerCount = 0;
  Struct at(size_t i) const {
    const uint64_t* e = first + i * stepWords;
    return {reinterpret_cast<const uint8_t*>(e), dataWords * 8, e + dataWords, pointerCount};
  }
};

[[gnu::always_inline]] inline Read structListAt(const Segment& seg, const uint64_t* p, StructList& out) {
  out = {};
  if (p == nullptr || *p == 0) return Read::kNull;
  const uint64_t w = *p;
  if ((w & 3) != 1 || ((w >> 32) & 7) != 7) return Read::kOther;  // not an inline-composite list
  const uint64_t words = w >> 35;
  const uint64_t* tag = p + 1 + offsetOf(w);
  if (tag < seg.begin || tag >= seg.end || static_cast<uint64_t>(seg.end - tag) - 1 < words) {
    return Read::kOther;
  }
  const uint64_t t = *tag;
  if ((t & 3) != 0) return Read::kOther;
  const uint64_t count = (t >> 2) & 0x3fffffff, dataWords = (t >> 32) & 0xffff, pointerCount = t >> 48;
  if (count * (dataWords + pointerCount) > words) return Read::kOther;
  if (count > 0 && dataWords + pointerCount == 0) {
    throw TraceError("a list claims " + std::to_string(count) + " empty elements");
  }
  out = {tag + 1, count, dataWords + pointerCount, dataWords, pointerCount};
  return Read::kOk;
}

[[gnu::always_inline]] inline Read bytesAt(const Segment& seg, const uint64_t* p, std::span<const uint8_t>& out) {
  out = {};
  if (p == nullptr || *p == 0) return Read::kNull;
  const uint64_t w = *p;
  if ((w & 3) != 1 || ((w >> 32) & 7) != 2) return Read::kOther;  // not a list of bytes
  const uint64_t bytes = w >> 35;
  const uint64_t* target = p + 1 + offsetOf(w);
  if (target < seg.begin || target > seg.end ||
      static_cast<uint64_t>(seg.end - target) < (bytes + 7) / 8) {
    return Read::kOther;
  }
  out = {reinterpret_cast<const uint8_t*>(target), bytes};
  return Read::kOk;
}

// A Text: its bytes without the NUL that ends them; empty where null.
[[gnu::always_inline]] inline bool textAt(const Segment& seg, const uint64_t* p, std::string_view& out) {
  std::span<const uint8_t> bytes;
  if (bytesAt(seg, p, bytes) == Read::kOther) return false;
  out = {reinterpret_cast<const char*>(bytes.data()), bytes.empty() ? 0 : bytes.size() - 1};
  return true;
}

// Field offsets in bytes (bits for booleans), from trace.capnp's layout.
namespace frame { constexpr size_t kWhich = 0; constexpr uint16_t kEvent = 0; }
namespace event {
constexpr size_t kSeq = 0, kThread = 16, kWhich = 20, kOrigin = 1;
constexpr uint16_t kLaunch = 0;
}  // namespace event
namespace origin {
constexpr size_t kPhase = 0, kLine = 4, kStep = 8, kBenchmarkingBit = 192;
constexpr size_t kOp = 0, kForwardOp = 2, kModule = 3, kFile = 4;
}  // namespace origin
namespace launch {
constexpr size_t kFunction = 4, kStream = 16, kSharedMem = 24, kNotHashedBit = 16, kCapturedBit = 17;
constexpr size_t kGrid = 0, kBlock = 1, kCluster = 2, kParams = 4, kPointers = 6, kInputs = 7,
                 kOutputs = 8, kAnnotations = 9, kReads = 10;
}  // namespace launch

[[gnu::always_inline]] inline bool dim(const Segment& seg, const uint64_t* p, Dim3& out, bool nullIsZero) {
  Struct d;
  const Read r = structAt(seg, p, d);
  if (r == Read::kOther) return false;
  if (r == Read::kNull && nullIsZero) {
    out = {0, 0, 0};
    return true;
  }
  // Dim3's fields default to 1: stored XOR their default.
  out = {d.get<uint32_t>(0) ^ 1u, d.get<uint32_t>(4) ^ 1u, d.get<uint32_t>(8) ^ 1u};
  return true;
}

[[gnu::always_inline]] inline bool ranges(const Segment& seg, const uint64_t* p, std::vector<ScanRange>& out) {
  StructList list;
  if (structListAt(seg, p, list) == Read::kOther) return false;
  out.resize(list.count);
  for (size_t i = 0; i < list.count; ++i) {
    const Struct r = list.at(i);
    // RangeDigest: address (byte 0), size (8), allocation (16), bound (20),
    // offset (24), digest (32); chunkDigests is pointer 0.
    out[i].range = {r.get<uint64_t>(0), r.get<uint64_t>(8), r.get<uint32_t>(16), r.get<uint64_t>(24),
                    bound(r.get<uint16_t>(20))};
    out[i].digest = r.get<uint64_t>(32);
    const uint64_t* chunks = r.pointer(0);
    out[i].hasChunkDigests = chunks != nullptr && *chunks != 0;
  }
  return true;
}

}  // namespace gpurr::trace::wire
