// The recorder's map of live device memory: every allocation the program made
// (of any kind) as an interval, with its ordinal, plus which parts of VMM
// reservations are mapped and which devices may read them. Pointer parameters
// and copies are resolved against it, and it says which ranges a device can
// read (only those are hashed). Pure logic: not thread-safe (the session
// locks around it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
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
  // resolve(): from the address to the end of the allocation, or of the
  // mapped part of a VMM reservation. resolveFrom(): from the address to the
  // end of what the device asked about can read; 0 when it can read nothing
  // there.
  uint64_t readableBytes = 0;
  trace::AllocationKind kind = trace::AllocationKind::kDevice;
  uint32_t device = 0;          // the allocation's device (VMM: the reserving context's)
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

  // The allocation containing `address`, with what is mapped from it. VMM
  // reservations count only where mapped (contiguously from `address`);
  // addresses in unmapped parts resolve to nothing.
  std::optional<Resolved> resolve(uint64_t address) const;

  // As resolve(), with `readableBytes` what a kernel on `device` (a CUdevice
  // ordinal) is known to be able to read from `address` on:
  // - device, stream-ordered, module-global and imported (kOther) memory:
  //   all of it when the allocation belongs to `device`, nothing when it
  //   belongs to another device (peer access is not tracked);
  // - VMM: the mapped part whose access flags (cuMemSetAccess) let `device`
  //   read; a mapping starts with no access;
  // - host memory (kHostMapped): nothing;
  // - managed memory: all of it.
  std::optional<Resolved> resolveFrom(uint64_t address, uint32_t device) const;

  // Whether all of [address, address + size) lies in one allocation that a
  // kernel on `device` can read.
  bool readableFrom(uint64_t address, uint64_t size, uint32_t device) const;

  // The parts of `a` (a live allocation) that a kernel on `device` can read,
  // as (address, size), in address order.
  std::vector<std::pair<uint64_t, uint64_t>> readableParts(const trace::Allocation& a, uint32_t device) const;

  // [lowest start, highest end) of the live allocations ((0, 0) when there
  // are none): no address outside it resolves. They do not overlap, so the
  // first and the last bound them all.
  std::pair<uint64_t, uint64_t> extent() const {
    if (byStart_.empty()) return {0, 0};
    const trace::Allocation& last = byStart_.rbegin()->second;
    return {byStart_.begin()->first, last.address + last.size};
  }
  // The allocation starting exactly at `address`, if any.
  const trace::Allocation* at(uint64_t address) const;

  // VMM: [address, address + size) is now mapped (accessible to no device
  // yet) / unmapped.
  void map(uint64_t address, uint64_t size);
  void unmap(uint64_t address, uint64_t size);
  // VMM (cuMemSetAccess): the mapped parts of [address, address + size) are
  // now readable by `device`, or not. Devices from 64 on are never counted
  // as readers (their ranges are not hashed).
  void setAccess(uint64_t address, uint64_t size, uint32_t device, bool readable);

  size_t size() const { return byStart_.size(); }
  uint32_t lastOrdinal() const { return nextOrdinal_ - 1; }
  template <typename F>
  void forEach(F f) const {
    for (const auto& [start, a] : byStart_) f(a);
  }

 private:
  struct Mapping {
    uint64_t end = 0;
    uint64_t readers = 0;  // bit d: device d may read
  };
  // Bytes from `address` to the end of the run of touching mappings that
  // all have the readers in `need` (0: any mapping); 0 when unmapped.
  uint64_t mappedRun(uint64_t address, uint64_t need) const;
  void splitAt(uint64_t address);
  void coalesce(uint64_t from, uint64_t to);

  std::map<uint64_t, trace::Allocation> byStart_;
  // start -> mapping; disjoint; touching mappings with the same readers are
  // merged.
  std::map<uint64_t, Mapping> mapped_;
  uint32_t nextOrdinal_ = 1;
};

}  // namespace gpurr::recorder
