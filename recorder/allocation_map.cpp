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

namespace {

uint64_t readerBit(uint32_t device) { return device < 64 ? uint64_t{1} << device : 0; }

}  // namespace

uint64_t AllocationMap::mappedRun(uint64_t address, uint64_t need) const {
  auto m = mapped_.upper_bound(address);
  if (m == mapped_.begin()) return 0;
  --m;
  if (address >= m->second.end) return 0;
  uint64_t end = address;
  for (; m != mapped_.end() && m->first <= end && (m->second.readers & need) == need; ++m) end = m->second.end;
  return end - address;
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
  r.device = a.device;
  r.readableBytes = a.address + a.size - address;
  if (a.kind == trace::AllocationKind::kVmm) {
    const uint64_t mapped = mappedRun(address, 0);
    if (mapped == 0) return std::nullopt;
    r.readableBytes = std::min(r.readableBytes, mapped);
  }
  return r;
}

std::optional<Resolved> AllocationMap::resolveFrom(uint64_t address, uint32_t device) const {
  std::optional<Resolved> r = resolve(address);
  if (!r) return r;
  switch (r->kind) {
    case trace::AllocationKind::kVmm: {
      const uint64_t bit = readerBit(device);
      r->readableBytes = bit == 0 ? 0 : std::min(r->readableBytes, mappedRun(address, bit));
      break;
    }
    case trace::AllocationKind::kHostMapped:
      r->readableBytes = 0;
      break;
    case trace::AllocationKind::kManaged:
      break;
    default:
      if (r->device != device) r->readableBytes = 0;
      break;
  }
  return r;
}

bool AllocationMap::readableFrom(uint64_t address, uint64_t size, uint32_t device) const {
  const std::optional<Resolved> r = resolveFrom(address, device);
  return r && r->readableBytes >= size && r->readableBytes > 0;
}

std::vector<std::pair<uint64_t, uint64_t>> AllocationMap::readableParts(const trace::Allocation& a,
                                                                        uint32_t device) const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  const uint64_t end = a.address + a.size;
  if (a.kind != trace::AllocationKind::kVmm) {
    const std::optional<Resolved> r = resolveFrom(a.address, device);
    if (r && r->readableBytes > 0) out.emplace_back(a.address, r->readableBytes);
    return out;
  }
  const uint64_t bit = readerBit(device);
  if (bit == 0) return out;
  auto m = mapped_.upper_bound(a.address);
  if (m != mapped_.begin() && std::prev(m)->second.end > a.address) --m;
  for (; m != mapped_.end() && m->first < end; ++m) {
    if ((m->second.readers & bit) == 0) continue;
    const uint64_t s = std::max(m->first, a.address), e = std::min(m->second.end, end);
    if (!out.empty() && out.back().first + out.back().second == s) {
      out.back().second = e - out.back().first;
    } else {
      out.emplace_back(s, e - s);
    }
  }
  return out;
}

void AllocationMap::splitAt(uint64_t address) {
  auto m = mapped_.upper_bound(address);
  if (m == mapped_.begin()) return;
  --m;
  if (m->first < address && address < m->second.end) {
    mapped_.emplace(address, Mapping{m->second.end, m->second.readers});
    m->second.end = address;
  }
}

void AllocationMap::coalesce(uint64_t from, uint64_t to) {
  auto it = mapped_.lower_bound(from);
  if (it != mapped_.begin()) --it;
  while (it != mapped_.end() && it->first <= to) {
    auto next = std::next(it);
    if (next != mapped_.end() && next->first == it->second.end && next->second.readers == it->second.readers) {
      it->second.end = next->second.end;
      mapped_.erase(next);
    } else {
      it = next;
    }
  }
}

void AllocationMap::map(uint64_t address, uint64_t size) {
  if (size == 0) return;
  unmap(address, size);  // a new mapping starts with no access
  mapped_.emplace(address, Mapping{address + size, 0});
  coalesce(address, address + size);
}

void AllocationMap::unmap(uint64_t address, uint64_t size) {
  if (size == 0) return;
  const uint64_t start = address, end = address + size;
  auto it = mapped_.upper_bound(start);
  if (it != mapped_.begin() && std::prev(it)->second.end > start) --it;
  while (it != mapped_.end() && it->first < end) {
    const uint64_t s = it->first;
    const Mapping m = it->second;
    it = mapped_.erase(it);
    if (s < start) mapped_.emplace(s, Mapping{start, m.readers});
    if (m.end > end) it = mapped_.emplace(end, m).first, ++it;
  }
}

void AllocationMap::setAccess(uint64_t address, uint64_t size, uint32_t device, bool readable) {
  const uint64_t bit = readerBit(device);
  if (size == 0 || bit == 0) return;
  const uint64_t end = address + size;
  splitAt(address);
  splitAt(end);
  for (auto it = mapped_.lower_bound(address); it != mapped_.end() && it->first < end; ++it) {
    it->second.readers = readable ? (it->second.readers | bit) : (it->second.readers & ~bit);
  }
  coalesce(address, end);
}

}  // namespace gpurr::recorder
