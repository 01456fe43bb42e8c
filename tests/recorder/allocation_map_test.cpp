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
