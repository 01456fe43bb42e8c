// The recorder's map of live device memory: every allocation the program made
// (of any kind) as an interval, with its ordinal, plus which parts of VMM
// reservations are mapped. Pointer parameters and copies are resolved against
// it. Pure logic: not thread-safe (the session locks around it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "trace_format/events.h"

namespace gpurr::recorder {

struct LiveAllocation {
  trace::Allocation info;  // ordinal, address, size, kind, device, stream
};

// What an address resolves to.
struct Resolved {
  uint32_t ordinal = 0;
  uint64_t allocationAddress = 0;
  uint64_t offset = 0;          // from the allocation's start
  uint64_t readableBytes = 0;   // from the address to the end of what can be read
  trace::AllocationKind kind = trace::AllocationKind::kDevice;
};

class AllocationMap {
 public:
  // Adds an allocation and returns its ordinal (1, 2, 3...). An allocation
  // that overlaps live ones replaces them (the driver reused the addresses:
  // a free was missed), and they are reported through `replaced`.
  uint32_t add(uint64_t address, uint64_t size, trace::AllocationKind kind, uint32_t device, uint64_t stream,
               std::vector<trace::Free>* replaced = nullptr);

  // Removes the allocation that starts at `address`; returns it, or nothing
  // when none starts there.
  std::optional<trace::Allocation> remove(uint64_t address);

  // The allocation containing `address`, with what can be read from it.
  // VMM reservations are readable only where mapped (contiguously from
  // `address`); addresses in unmapped parts resolve to nothing.
  std::optional<Resolved> resolve(uint64_t address) const;

  // The allocation starting exactly at `address`, if any.
  const trace::Allocation* at(uint64_t address) const;

  // VMM: [address, address + size) is now mapped / unmapped.
  void map(uint64_t address, uint64_t size);
  void unmap(uint64_t address, uint64_t size);

  size_t size() const { return byStart_.size(); }
  uint32_t lastOrdinal() const { return nextOrdinal_ - 1; }
  template <typename F>
  void forEach(F f) const {
    for (const auto& [start, a] : byStart_) f(a);
  }

 private:
  std::map<uint64_t, trace::Allocation> byStart_;
  std::map<uint64_t, uint64_t> mapped_;  // start -> end, disjoint, coalesced
  uint32_t nextOrdinal_ = 1;
};

}  // namespace gpurr::recorder
