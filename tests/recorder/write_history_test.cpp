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
  CHECK(h.touch(100, 200, 1));
  CHECK_FALSE(h.touch(100, 200, 1));
  CHECK_FALSE(h.touch(120, 180, 1));
  CHECK(h.touch(150, 250, 1));   // 200-250 new
  CHECK(h.touch(300, 400, 1));
  CHECK(h.touch(100, 400, 1));   // the gap 250-300
  CHECK(h.intervals() == 1);
  h.forget(180, 220);
  CHECK(h.intervals() == 2);
  CHECK_FALSE(h.touch(100, 180, 1));
  CHECK_FALSE(h.touch(220, 400, 1));
  CHECK(h.touch(170, 190, 1));
  CHECK_FALSE(h.touch(0, 0, 1));
  h.clear();
  CHECK(h.intervals() == 0);
  CHECK(h.touch(100, 200, 1));

  // Against a model of every byte (0: untouched, else the stream that last
  // touched it), with random touches on three streams, forgets and clears.
  WriteHistory r;
  std::vector<uint64_t> model(4096, 0);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t b = rng() % 4096, e = b + 1 + rng() % std::min<uint64_t>(256, 4096 - b);
    if (rng() % 500 == 0) {
      r.clear();
      std::fill(model.begin(), model.end(), 0);
      continue;
    }
    if (rng() % 4 == 0) {
      r.forget(b, e);
      for (uint64_t x = b; x < e; ++x) model[x] = 0;
      continue;
    }
    const uint64_t stream = 1 + rng() % 3;
    bool fresh = false;
    for (uint64_t x = b; x < e; ++x) fresh = fresh || model[x] != stream, model[x] = stream;
    REQUIRE(r.touch(b, e, stream) == fresh);
  }
  CHECK(r.intervals() <= 4096);
}

TEST_CASE("bytes last touched on another stream are not taken on trust", "[recorder][first-use]") {
  // Only the program's synchronisation, if any, orders another stream's
  // write before this stream's read: the reader hashes them itself.
  WriteHistory h;
  CHECK(h.touch(0, 100, 1));
  CHECK_FALSE(h.touch(0, 100, 1));
  CHECK(h.touch(50, 60, 2));        // stream 2 reads what stream 1 wrote
  CHECK_FALSE(h.touch(50, 60, 2));
  CHECK(h.touch(0, 100, 1));        // and back
  CHECK_FALSE(h.touch(0, 100, 1));
  CHECK(h.intervals() == 1);        // joined again
}

TEST_CASE("a block the caching allocator hands out, or takes back, starts untouched", "[recorder][first-use]") {
  namespace fw = gpurr::recorder::framework;
  using gpurr::recorder::writeHistory;
  fw::resetForTesting();
  const uint64_t segment = 0x7f0000000000;
  writeHistory().forget(segment, segment + (2 << 20));
  CHECK(writeHistory().touch(segment, segment + 4096, 1));
  fw::blockEvent(segment + 1024, 1024, true);  // a tensor over a freed one's bytes
  CHECK(writeHistory().touch(segment + 1024, segment + 2048, 1));
  CHECK_FALSE(writeHistory().touch(segment, segment + 1024, 1));
  fw::blockEvent(segment + 1024, 0, false);  // freed
  CHECK(writeHistory().touch(segment + 1024, segment + 1536, 1));
  fw::resetForTesting();
  writeHistory().forget(segment, segment + (2 << 20));
}

TEST_CASE("WriteHistory keeps the fewest intervals: one per run of bytes last touched on one stream",
          "[recorder][first-use]") {
  // The model: the stream that last touched each byte (0: untouched).
  constexpr uint64_t kBytes = 96;
  std::vector<uint64_t> model(kBytes, 0);
  WriteHistory h;
  std::mt19937_64 rng(7);
  for (int step = 0; step < 20000; ++step) {
    const uint64_t begin = rng() % kBytes, end = begin + 1 + rng() % (kBytes - begin);
    const uint64_t stream = 1 + rng() % 3;
    if (rng() % 4 == 0) {
      h.forget(begin, end);
      std::fill(model.begin() + begin, model.begin() + end, 0);
    } else {
      bool fresh = false;
      for (uint64_t b = begin; b < end; ++b) fresh |= model[b] != stream;
      REQUIRE(h.touch(begin, end, stream) == fresh);
      std::fill(model.begin() + begin, model.begin() + end, stream);
    }
    // Kept as the fewest intervals: one per run of bytes of one stream.
    size_t runs = 0;
    for (uint64_t b = 0; b < kBytes; ++b)
      if (model[b] != 0 && (b == 0 || model[b - 1] != model[b])) ++runs;
    REQUIRE(h.intervals() == runs);
  }
}
