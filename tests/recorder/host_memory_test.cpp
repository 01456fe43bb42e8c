// The recorded process's readable host memory (host_memory.h), which the
// trace's index keeps so that the diff can tell host addresses in kernel
// parameters from values.
#include <sys/mman.h>

#include <catch2/catch.hpp>
#include <memory>
#include <sstream>

#include "recorder/host_memory.h"

using gpurr::trace::HostRegion;
using gpurr::recorder::readableHostRegions;

namespace {

bool contains(const std::vector<HostRegion>& regions, const void* p) {
  const auto a = reinterpret_cast<uint64_t>(p);
  for (const HostRegion& r : regions) {
    if (a >= r.start && a < r.end) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("host regions: readable mappings of a maps listing, adjacent ones merged") {
  // Lines as proc(5) shows them, from a recorded Python (non-PIE, its heap
  // below 4 GiB) with the CUDA driver's reservation of device addresses.
  std::istringstream maps(
      "00400000-00420000 r--p 00000000 08:01 1234 /usr/bin/python3.12\n"
      "00420000-00700000 r-xp 00020000 08:01 1234 /usr/bin/python3.12\n"
      "00a00000-00a10000 rw-p 00000000 00:00 0 \n"
      "07000000-0a000000 rw-p 00000000 00:00 0                          [heap]\n"
      "200000000-7ffce0000000 ---p 00000000 00:00 0 \n"
      "not a mapping\n"
      "7ffff7dd0000-7ffff7dd1000 r--s 00000000 00:05 7 /dev/nvidiactl\n"
      "7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0                  [stack]\n");
  CHECK(readableHostRegions(maps) == std::vector<HostRegion>{{0x400000, 0x700000},
                                                             {0xa00000, 0xa10000},
                                                             {0x7000000, 0xa000000},
                                                             {0x7ffff7dd0000, 0x7ffff7dd1000},
                                                             {0x7ffffffde000, 0x7ffffffff000}});
}

TEST_CASE("host regions of this process hold its stack and heap, not memory it cannot read") {
  const int local = 0;
  const auto heap = std::make_unique<int>(0);
  void* none = mmap(nullptr, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(none != MAP_FAILED);
  const std::vector<HostRegion> regions = readableHostRegions();
  CHECK(contains(regions, &local));
  CHECK(contains(regions, heap.get()));
  static const char text[] = "a constant";  // the executable's read-only data
  CHECK(contains(regions, text));
  CHECK_FALSE(contains(regions, static_cast<char*>(none) + 4096));
  CHECK_FALSE(contains(regions, nullptr));
  munmap(none, 1 << 20);
}
