// WriteHistory: which bytes recorded operations have touched, against a
// byte-per-byte model; and the caching allocator's blocks starting untouched.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "recorder/framework_context.h"
#include "recorder/write_history.h"

using gpurr::recorder::WriteHistory;

TEST_CASE("WriteHistory says whether a range holds bytes not touched since they were handed out",
          "[recorder][first-use]") {
  WriteHistory h;
  CHECK(h.touch(100, 200));
  CHECK_FALSE(h.touch(100, 200));
  CHECK_FALSE(h.touch(120, 180));
  CHECK(h.touch(150, 250));   // 200-250 new
  CHECK(h.touch(300, 400));
  CHECK(h.touch(100, 400));   // the gap 250-300
  CHECK(h.intervals() == 1);
  h.forget(180, 220);
  CHECK(h.intervals() == 2);
  CHECK_FALSE(h.touch(100, 180));
  CHECK_FALSE(h.touch(220, 400));
  CHECK(h.touch(170, 190));
  CHECK_FALSE(h.touch(0, 0));

  // Against a model of every byte, with random touches and forgets.
  WriteHistory r;
  std::vector<bool> model(4096, false);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t b = rng() % 4096, e = b + 1 + rng() % std::min<uint64_t>(256, 4096 - b);
    if (rng() % 4 == 0) {
      r.forget(b, e);
      for (uint64_t x = b; x < e; ++x) model[x] = false;
      continue;
    }
    bool fresh = false;
    for (uint64_t x = b; x < e; ++x) fresh = fresh || !model[x], model[x] = true;
    REQUIRE(r.touch(b, e) == fresh);
  }
}

TEST_CASE("a block the caching allocator hands out, or takes back, starts untouched", "[recorder][first-use]") {
  namespace fw = gpurr::recorder::framework;
  using gpurr::recorder::writeHistory;
  fw::resetForTesting();
  const uint64_t segment = 0x7f0000000000;
  writeHistory().forget(segment, segment + (2 << 20));
  CHECK(writeHistory().touch(segment, segment + 4096));
  fw::blockEvent(segment + 1024, 1024, true);  // a tensor over a freed one's bytes
  CHECK(writeHistory().touch(segment + 1024, segment + 2048));
  CHECK_FALSE(writeHistory().touch(segment, segment + 1024));
  fw::blockEvent(segment + 1024, 0, false);  // freed
  CHECK(writeHistory().touch(segment + 1024, segment + 1536));
  fw::resetForTesting();
  writeHistory().forget(segment, segment + (2 << 20));
}
