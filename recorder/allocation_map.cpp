// Interval map of live allocations and VMM mappings.
#include "recorder/allocation_map.h"

#include <algorithm>

namespace gpurr::recorder {

uint32_t AllocationMap::add(uint64_t address, uint64_t size, trace::AllocationKind kind, uint32_t device,
                            uint64_t stream, std::vector<trace::Free>* replaced) {
  const uint64_t end = address + std::max<uint64_t>(size, 1);
  // Drop every live allocation overlapping [address, end).
  auto it = byStart_.upper_bound(address);
  if (it != byStart_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.address + std::max<uint64_t>(prev->second.size, 1) > address) it = prev;
  }
  while (it != byStart_.end() && it->first < end) {
    if (replaced) replaced->push_back({it->second.ordinal, it->second.address});
    it = byStart_.erase(it);
  }
  trace::Allocation a;
  a.ordinal = nextOrdinal_++;
  a.address = address;
  a.size = size;
  a.kind = kind;
  a.device = device;
  a.stream = stream;
  byStart_.emplace(address, a);
  return a.ordinal;
}

std::optional<trace::Allocation> AllocationMap::remove(uint64_t address) {
  auto it = byStart_.find(address);
  if (it == byStart_.end()) return std::nullopt;
  trace::Allocation a = it->second;
  byStart_.erase(it);
  if (a.kind == trace::AllocationKind::kVmm) unmap(a.address, a.size);
  return a;
}

const trace::Allocation* AllocationMap::at(uint64_t address) const {
  auto it = byStart_.find(address);
  return it == byStart_.end() ? nullptr : &it->second;
}

std::optional<Resolved> AllocationMap::resolve(uint64_t address) const {
  auto it = byStart_.upper_bound(address);
  if (it == byStart_.begin()) return std::nullopt;
  const trace::Allocation& a = std::prev(it)->second;
  if (address >= a.address + a.size) return std::nullopt;
  Resolved r;
  r.ordinal = a.ordinal;
  r.allocationAddress = a.address;
  r.offset = address - a.address;
  r.kind = a.kind;
  r.readableBytes = a.address + a.size - address;
  if (a.kind == trace::AllocationKind::kVmm) {
    auto m = mapped_.upper_bound(address);
    if (m == mapped_.begin()) return std::nullopt;
    --m;
    if (address >= m->second) return std::nullopt;
    r.readableBytes = std::min(r.readableBytes, m->second - address);
  }
  return r;
}

void AllocationMap::map(uint64_t address, uint64_t size) {
  if (size == 0) return;
  uint64_t start = address, end = address + size;
  // Merge with every mapping that overlaps or touches [start, end).
  auto it = mapped_.upper_bound(start);
  if (it != mapped_.begin() && std::prev(it)->second >= start) --it;
  while (it != mapped_.end() && it->first <= end) {
    start = std::min(start, it->first);
    end = std::max(end, it->second);
    it = mapped_.erase(it);
  }
  mapped_.emplace(start, end);
}

void AllocationMap::unmap(uint64_t address, uint64_t size) {
  if (size == 0) return;
  const uint64_t start = address, end = address + size;
  auto it = mapped_.upper_bound(start);
  if (it != mapped_.begin() && std::prev(it)->second > start) --it;
  while (it != mapped_.end() && it->first < end) {
    const uint64_t s = it->first, e = it->second;
    it = mapped_.erase(it);
    if (s < start) mapped_.emplace(s, start);
    if (e > end) it = mapped_.emplace(end, e).first, ++it;
  }
}

}  // namespace gpurr::recorder
