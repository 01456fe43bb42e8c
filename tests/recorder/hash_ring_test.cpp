// HashRing against a model: batches never overlap a batch still in flight,
// room comes back in order, and a full ring says so instead of waiting.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "recorder/hash_ring.h"

using gpurr::recorder::HashRing;

TEST_CASE("the hash ring hands out room in order and takes it back in order", "[recorder][ring]") {
  HashRing ring(10, 100, 3);
  auto a = ring.take(4, 40), b = ring.take(4, 40);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->firstRange == 0);
  CHECK(b->firstRange == 4);
  CHECK(b->firstDigest == 40);
  CHECK_FALSE(ring.take(4, 40));  // 2 descriptors left at the end, none before
  CHECK_FALSE(ring.fits(11, 1));
  ring.giveBack(b->sequence);     // not the oldest: nothing comes back yet
  CHECK_FALSE(ring.take(4, 40));
  ring.giveBack(a->sequence);
  CHECK(ring.inFlight() == 0);
  auto c = ring.take(10, 100);
  REQUIRE(c);
  CHECK(c->sequence == 2);
  CHECK_FALSE(ring.take(1, 1));
}

TEST_CASE("hash ring batches never overlap one in flight", "[recorder][ring]") {
  HashRing ring(64, 1000, 16);
  std::mt19937_64 rng(11);
  struct Held {
    uint64_t r0, r1, d0, d1;
  };
  std::map<uint64_t, Held> held;
  for (int i = 0; i < 100000; ++i) {
    if (!held.empty() && (rng() % 3 == 0 || held.size() == 16)) {
      auto it = held.begin();
      std::advance(it, rng() % held.size());
      ring.giveBack(it->first);
      held.erase(it);
      continue;
    }
    const uint64_t nr = 1 + rng() % 20, nd = 1 + rng() % 300;
    auto b = ring.take(nr, nd);
    if (!b) {
      REQUIRE((!held.empty() || !ring.fits(nr, nd)));
      continue;
    }
    REQUIRE(b->firstRange + nr <= 64);
    REQUIRE(b->firstDigest + nd <= 1000);
    for (const auto& [seq, h] : held) {
      REQUIRE((b->firstRange + nr <= h.r0 || h.r1 <= b->firstRange));
      REQUIRE((b->firstDigest + nd <= h.d0 || h.d1 <= b->firstDigest));
    }
    held[b->sequence] = {b->firstRange, b->firstRange + nr, b->firstDigest, b->firstDigest + nd};
  }
}
