// Parameter packing and pointer scanning.
#include "recorder/params.h"

#include <cuda.h>

#include <algorithm>
#include <cstring>

#include "recorder/thread_local_ref.h"

namespace gpurr::recorder {

std::vector<uint8_t> packParams(void* const* kernelParams, std::span<const trace::ParamInfo> layout) {
  std::vector<uint8_t> out;
  packParams(kernelParams, layout, out);
  return out;
}

void packParams(void* const* kernelParams, std::span<const trace::ParamInfo> layout, std::vector<uint8_t>& out) {
  size_t total = 0;
  for (const trace::ParamInfo& p : layout) total = std::max<size_t>(total, size_t{p.offset} + p.size);
  out.assign(total, 0);
  if (kernelParams == nullptr) return;
  for (size_t i = 0; i < layout.size(); ++i) {
    if (kernelParams[i] != nullptr) std::memcpy(out.data() + layout[i].offset, kernelParams[i], layout[i].size);
  }
}

std::optional<std::vector<uint8_t>> paramsFromExtra(void* const* extra) {
  if (extra == nullptr) return std::nullopt;
  const uint8_t* buffer = nullptr;
  size_t size = 0;
  bool haveSize = false;
  // Bounded: a malformed array must not walk memory forever.
  for (int i = 0; i < 64 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      buffer = static_cast<const uint8_t*>(extra[i + 1]);
    } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1] != nullptr) {
      std::memcpy(&size, extra[i + 1], sizeof(size));
      haveSize = true;
    }
  }
  if (buffer == nullptr || !haveSize) return std::nullopt;
  return std::vector<uint8_t>(buffer, buffer + size);
}

std::vector<ScannedPointer> scanPointers(std::span<const uint8_t> params, const AllocationMap& map,
                                         uint32_t device) {
  std::vector<ScannedPointer> out;
  scanPointers(params, map, device, out);
  return out;
}

namespace {

// The parameter word at byte `offset`, when it points into an allocation.
void addIfPointer(uint64_t word, size_t offset, const AllocationMap& map, uint32_t device,
                  std::vector<ScannedPointer>& out) {
  const std::optional<Resolved> r = map.resolveFrom(word, device);
  if (!r) return;
  ScannedPointer p;
  p.param = {static_cast<uint32_t>(offset), r->ordinal, r->offset};
  p.address = word;
  p.readableBytes = r->readableBytes;
  p.kind = r->kind;
  p.allocationDevice = r->device;
  out.push_back(p);
}

}  // namespace

void scanPointers(std::span<const uint8_t> params, const AllocationMap& map, uint32_t device,
                  std::vector<ScannedPointer>& out) {
  out.clear();
  // Most words are sizes, strides and flags, far from any allocation: ruled
  // out at once, without a lookup in the map, four at a time (one branch
  // for the four). A word w is in the extent [lo, hi) when w - lo < hi - lo
  // (0 never is: no allocation starts at 0).
  const auto [lo, hi] = map.extent();
  const uint64_t span = hi - lo;
  const size_t words = params.size() / 8;
  uint64_t w[4];
  size_t i = 0;
  for (; i + 4 <= words; i += 4) {
    std::memcpy(w, params.data() + i * 8, sizeof(w));
    if (!((w[0] - lo < span) | (w[1] - lo < span) | (w[2] - lo < span) | (w[3] - lo < span))) continue;
    for (size_t j = 0; j < 4; ++j)
      if (w[j] - lo < span) addIfPointer(w[j], (i + j) * 8, map, device, out);
  }
  for (; i < words; ++i) {
    std::memcpy(w, params.data() + i * 8, 8);
    if (w[0] - lo < span) addIfPointer(w[0], i * 8, map, device, out);
  }
}

std::vector<trace::DeviceRange> referencedRanges(std::span<const ScannedPointer> pointers,
                                                 const BlockLookup& blockAt) {
  std::vector<trace::DeviceRange> out;
  referencedRanges(pointers, blockAt, out);
  return out;
}

void referencedRanges(std::span<const ScannedPointer> pointers, const BlockLookup& blockAt,
                      std::vector<trace::DeviceRange>& out, std::vector<Block>* blocks) {
  thread_local EndsWithThread<std::vector<const ScannedPointer*>> tlsSorted;  // this thread's, capacity kept
  std::vector<const ScannedPointer*>& sorted = threadLocalRef(tlsSorted);
  sorted.clear();
  for (const ScannedPointer& p : pointers)
    if (p.readableBytes > 0) sorted.push_back(&p);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->address < b->address; });
  out.clear();
  out.reserve(sorted.size());
  if (blocks != nullptr) blocks->clear();
  for (const ScannedPointer* p : sorted) {
    if (!out.empty()) {
      const trace::DeviceRange& last = out.back();
      if (last.allocation == p->param.allocation && p->address < last.address + last.size) continue;
    }
    trace::DeviceRange r{p->address, p->readableBytes, p->param.allocation, p->param.offset};
    Block in{0, 0};
    if (blockAt) {
      if (const auto block = blockAt(p->address)) {
        r.size = std::min(r.size, block->first + block->second - p->address);
        r.bound = trace::RangeBound::kBlock;
        in = *block;
      }
    }
    out.push_back(r);
    if (blocks != nullptr) blocks->push_back(in);
  }
}

std::vector<OperandRole> operandRoles(std::span<const trace::DeviceRange> ranges,
                                      std::span<const framework::Operand> operands, const TensorExtent& extentOf) {
  std::vector<OperandRole> out;
  operandRoles(ranges, operands, extentOf, out);
  return out;
}

void operandRoles(std::span<const trace::DeviceRange> ranges, std::span<const framework::Operand> operands,
                  const TensorExtent& extentOf, std::vector<OperandRole>& out) {
  out.assign(ranges.size(), OperandRole::kUnknown);
  if (operands.empty()) return;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto extent = extentOf(ranges[i]);
    if (!extent) continue;
    bool read = false, written = false;
    for (const framework::Operand& o : operands) {
      if (o.address - extent->first >= extent->second) continue;
      (o.written ? written : read) = true;
    }
    out[i] = written ? OperandRole::kWritten : read ? OperandRole::kRead : OperandRole::kNotGiven;
  }
}

}  // namespace gpurr::recorder
