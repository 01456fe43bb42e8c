// The recorder's interval map: lookups, overlaps, frees and VMM mappings.
#include <catch2/catch.hpp>

#include "recorder/allocation_map.h"

using namespace gpurr;
using namespace gpurr::recorder;
using trace::AllocationKind;

TEST_CASE("allocations resolve by interval and get ordinals in order", "[recorder][allocmap]") {
  AllocationMap m;
  CHECK(m.add(0x1000, 0x100, AllocationKind::kDevice, 0, 0) == 1);
  CHECK(m.add(0x2000, 0x800, AllocationKind::kAsync, 0, 7) == 2);
  auto r = m.resolve(0x2010);
  REQUIRE(r);
  CHECK(r->ordinal == 2);
  CHECK(r->offset == 0x10);
  CHECK(r->readableBytes == 0x7f0);
  CHECK(r->kind == AllocationKind::kAsync);
  CHECK(m.resolve(0x1000)->ordinal == 1);
  CHECK(m.resolve(0x10ff)->ordinal == 1);
  CHECK_FALSE(m.resolve(0x1100));  // one past the end
  CHECK_FALSE(m.resolve(0xfff));
  CHECK_FALSE(m.resolve(0x1800));  // the gap between them
}

TEST_CASE("the allocations' extent bounds every address that resolves", "[recorder][allocmap]") {
  AllocationMap m;
  using Extent = std::pair<uint64_t, uint64_t>;
  CHECK(m.extent() == Extent{0, 0});
  CHECK_FALSE(m.resolve(0));
  m.add(0x30000, 0x1000, AllocationKind::kDevice, 0, 0);
  m.add(0x10000, 0x100, AllocationKind::kDevice, 0, 0);  // added later, lower
  CHECK(m.extent() == Extent{0x10000, 0x31000});
  CHECK(m.resolve(0x10000));
  CHECK_FALSE(m.resolve(0xffff));
  CHECK(m.resolve(0x30fff));
  CHECK_FALSE(m.resolve(0x31000));
  CHECK_FALSE(m.resolve(~uint64_t{0}));
  m.remove(0x30000);
  CHECK(m.extent() == Extent{0x10000, 0x10100});
  CHECK_FALSE(m.resolve(0x30000));
  m.add(0x40000, 0, AllocationKind::kDevice, 0, 0);  // empty: holds no address
  CHECK(m.extent() == Extent{0x10000, 0x40000});
  CHECK_FALSE(m.resolve(0x40000));
}

TEST_CASE("a freed allocation no longer resolves and its ordinal is not reused", "[recorder][allocmap]") {
  AllocationMap m;
  m.add(0x1000, 0x100, AllocationKind::kDevice, 0, 0);
  auto freed = m.remove(0x1000);
  REQUIRE(freed);
  CHECK(freed->ordinal == 1);
  CHECK_FALSE(m.resolve(0x1010));
  CHECK_FALSE(m.remove(0x1000));
  CHECK_FALSE(m.remove(0x5000));
  CHECK(m.add(0x1000, 0x100, AllocationKind::kDevice, 0, 0) == 2);  // same address, new ordinal
}

TEST_CASE("an allocation overlapping live ones replaces them", "[recorder][allocmap]") {
  AllocationMap m;
  m.add(0x1000, 0x100, AllocationKind::kDevice, 0, 0);
  m.add(0x1100, 0x100, AllocationKind::kDevice, 0, 0);
  m.add(0x3000, 0x100, AllocationKind::kDevice, 0, 0);
  std::vector<trace::Free> replaced;
  CHECK(m.add(0x1080, 0x100, AllocationKind::kDevice, 0, 0, &replaced) == 4);
  REQUIRE(replaced.size() == 2);
  CHECK(replaced[0].ordinal == 1);
  CHECK(replaced[1].ordinal == 2);
  CHECK(m.size() == 2);
  CHECK(m.resolve(0x1100)->ordinal == 4);
  CHECK(m.resolve(0x3000)->ordinal == 3);
}

TEST_CASE("VMM reservations are readable only where mapped", "[recorder][allocmap]") {
  AllocationMap m;
  const uint64_t base = 0x7f0000000000;
  m.add(base, 8 << 20, AllocationKind::kVmm, 0, 0);
  CHECK_FALSE(m.resolve(base));  // reserved, nothing mapped yet
  m.map(base, 2 << 20);
  m.map(base + (2 << 20), 2 << 20);  // adjacent mappings coalesce
  auto r = m.resolve(base + 100);
  REQUIRE(r);
  CHECK(r->ordinal == 1);
  CHECK(r->readableBytes == (4u << 20) - 100);
  CHECK_FALSE(m.resolve(base + (5 << 20)));
  m.map(base + (6 << 20), 2 << 20);
  CHECK(m.resolve(base + (6 << 20))->readableBytes == 2u << 20);
  CHECK(m.resolve(base + (6 << 20))->offset == 6u << 20);
  m.unmap(base + (1 << 20), 2 << 20);  // a hole in the middle
  CHECK(m.resolve(base)->readableBytes == 1u << 20);
  CHECK_FALSE(m.resolve(base + (2 << 20)));
  CHECK(m.resolve(base + (3 << 20))->readableBytes == 1u << 20);
  m.remove(base);
  CHECK_FALSE(m.resolve(base + (6 << 20)));
  // A new reservation at the same place starts unmapped.
  m.add(base, 8 << 20, AllocationKind::kVmm, 0, 0);
  CHECK_FALSE(m.resolve(base + (6 << 20)));
}

TEST_CASE("a VMM mapping is readable by a device only once cuMemSetAccess allows it", "[recorder][allocmap]") {
  AllocationMap m;
  const uint64_t base = 0x7f0000000000;
  m.add(base, 8 << 20, AllocationKind::kVmm, 0, 0);
  m.map(base, 4 << 20);
  m.map(base + (6 << 20), 2 << 20);
  // Mapped: it resolves (the pointer is known), but no device may read it.
  REQUIRE(m.resolve(base + 100));
  REQUIRE(m.resolveFrom(base + 100, 0));
  CHECK(m.resolveFrom(base + 100, 0)->readableBytes == 0);
  CHECK(m.readableParts(*m.at(base), 0).empty());
  CHECK_FALSE(m.readableFrom(base, 1, 0));

  m.setAccess(base + (1 << 20), 2 << 20, 0, true);   // the middle of the first mapping
  m.setAccess(base + (6 << 20), 2 << 20, 1, true);   // the second mapping, device 1 only
  CHECK(m.resolveFrom(base, 0)->readableBytes == 0);
  CHECK(m.resolveFrom(base + (1 << 20) + 8, 0)->readableBytes == (2u << 20) - 8);
  CHECK(m.resolveFrom(base + (1 << 20), 1)->readableBytes == 0);
  CHECK(m.resolveFrom(base + (6 << 20), 1)->readableBytes == 2u << 20);
  CHECK(m.resolveFrom(base + (6 << 20), 0)->readableBytes == 0);
  // The mapped extent itself is unchanged by access flags.
  CHECK(m.resolve(base)->readableBytes == 4u << 20);
  CHECK(m.readableFrom(base + (1 << 20), 2 << 20, 0));
  CHECK_FALSE(m.readableFrom(base + (1 << 20), (2 << 20) + 1, 0));
  using Parts = std::vector<std::pair<uint64_t, uint64_t>>;
  CHECK(m.readableParts(*m.at(base), 0) == Parts{{base + (1 << 20), 2 << 20}});
  CHECK(m.readableParts(*m.at(base), 1) == Parts{{base + (6 << 20), 2 << 20}});

  // Read-only for both, adjacent parts join; PROT_NONE takes it back.
  m.setAccess(base, 4 << 20, 1, true);
  m.setAccess(base, 1 << 20, 0, true);
  CHECK(m.resolveFrom(base, 0)->readableBytes == 3u << 20);
  CHECK(m.resolveFrom(base, 1)->readableBytes == 4u << 20);
  m.setAccess(base + (2 << 20), 1 << 20, 0, false);
  CHECK(m.resolveFrom(base, 0)->readableBytes == 2u << 20);
  CHECK(m.readableParts(*m.at(base), 0) == Parts{{base, 2 << 20}});

  // Unmapped and mapped again: no access.
  m.unmap(base, 4 << 20);
  m.map(base, 4 << 20);
  CHECK(m.resolveFrom(base, 1)->readableBytes == 0);
  // Device ordinals from 64 on are never readers.
  m.setAccess(base, 4 << 20, 64, true);
  CHECK(m.resolveFrom(base, 64)->readableBytes == 0);
}

TEST_CASE("host memory is readable by no device, other memory only by its own device", "[recorder][allocmap]") {
  AllocationMap m;
  m.add(0x1000, 0x100, AllocationKind::kDevice, 0, 0);
  m.add(0x2000, 0x100, AllocationKind::kHostMapped, 0, 0);
  m.add(0x3000, 0x100, AllocationKind::kAsync, 1, 7);
  m.add(0x4000, 0x100, AllocationKind::kOther, 1, 0);
  m.add(0x5000, 0x100, AllocationKind::kManaged, 1, 0);
  CHECK(m.resolveFrom(0x1010, 0)->readableBytes == 0xf0);
  CHECK(m.resolveFrom(0x1010, 1)->readableBytes == 0);
  CHECK(m.resolveFrom(0x2000, 0)->readableBytes == 0);
  CHECK(m.resolveFrom(0x2000, 0)->ordinal == 2);  // still a known pointer
  CHECK(m.resolve(0x2000)->readableBytes == 0x100);
  CHECK(m.resolveFrom(0x3000, 0)->readableBytes == 0);
  CHECK(m.resolveFrom(0x3000, 1)->readableBytes == 0x100);
  CHECK(m.resolveFrom(0x4000, 1)->readableBytes == 0x100);
  CHECK(m.resolveFrom(0x4000, 0)->device == 1);
  CHECK(m.resolveFrom(0x5000, 0)->readableBytes == 0x100);
  CHECK(m.readableParts(*m.at(0x2000), 0).empty());
  CHECK(m.readableParts(*m.at(0x3000), 1).size() == 1);
}
