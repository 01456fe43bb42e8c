// The CPU buffer hash: pinned test vectors (the device kernel must produce the
// same values), the structure FORMAT.md specifies, and the properties that
// make it useful for locating differences.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <set>

#include "trace_format/hash.h"
#include "trace_format/hash_primitives.h"

using namespace gpurr::hash;

namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t mul = 31, uint8_t add = 7) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * mul + add + (i >> 8));
  return v;
}

// FORMAT.md's definition written out plainly, lane by lane, to hold the
// optimised reference to the text of the spec.
uint64_t specChunk(const std::vector<uint8_t>& chunk, uint64_t c) {
  const uint64_t len = chunk.size();
  const uint64_t words = (len + kWordBytes - 1) / kWordBytes;
  std::vector<uint64_t> lanes(kLanes);
  for (uint32_t l = 0; l < kLanes; ++l) {
    uint64_t s = laneSeed(c, l);
    for (uint64_t w = l; w < words; w += kLanes) {
      uint8_t word[16] = {};
      std::memcpy(word, chunk.data() + w * 16, std::min<uint64_t>(16, len - w * 16));
      uint64_t lo, hi;
      std::memcpy(&lo, word, 8);
      std::memcpy(&hi, word + 8, 8);
      s = step(s, lo, hi);
    }
    lanes[l] = s;
  }
  for (uint32_t level = 0; lanes.size() > 1; ++level) {
    std::vector<uint64_t> next;
    for (size_t i = 0; i < lanes.size(); i += 2) next.push_back(combineLanes(lanes[i], lanes[i + 1], level));
    lanes = next;
  }
  return finishChunk(lanes[0], len);
}

uint64_t specBuffer(const std::vector<uint8_t>& data) {
  uint64_t s = bufferSeed(data.size());
  for (uint64_t off = 0, c = 0; off < data.size(); off += kChunkBytes, ++c) {
    std::vector<uint8_t> chunk(data.begin() + off,
                               data.begin() + std::min<uint64_t>(off + kChunkBytes, data.size()));
    s = foldChunk(s, specChunk(chunk, c), c);
  }
  return finishBuffer(s);
}

}  // namespace

TEST_CASE("buffer hash matches its pinned test vectors") {
  // These values define the hash. Changing them breaks every recorded trace
  // and the device kernel: don't, unless the format version changes too.
  const std::map<size_t, uint64_t> expected = {
#include "hash_vectors.inc"
  };
  for (const auto& [size, digest] : expected) {
    INFO("size " << size);
    CHECK(hashBuffer(pattern(size)) == digest);
  }
}

TEST_CASE("buffer hash follows the structure written in FORMAT.md") {
  for (size_t size : {0, 1, 15, 16, 17, 255, 4096, 4097, 65535, 65536, 65537, 200000, 262144}) {
    INFO("size " << size);
    const auto data = pattern(size, 77, 3);
    CHECK(hashBuffer(data) == specBuffer(data));
  }
}

TEST_CASE("chunk digests locate a change and fold into the buffer digest") {
  auto data = pattern(5 * kChunkBytes + 123);
  const auto before = chunkDigests(data);
  REQUIRE(before.size() == 6);
  CHECK(foldChunks(before, data.size()) == hashBuffer(data));
  data[3 * kChunkBytes + 77] ^= 0x01;
  const auto after = chunkDigests(data);
  for (size_t c = 0; c < before.size(); ++c) CHECK((before[c] != after[c]) == (c == 3));
}

TEST_CASE("buffer hash depends on order, position and length") {
  const auto base = pattern(3 * kChunkBytes);
  const uint64_t h = hashBuffer(base);

  SECTION("swapping two 16-byte words changes it") {
    for (size_t a : {size_t{0}, size_t{16}, size_t{4096}, kChunkBytes - 16}) {
      auto v = base;
      const size_t b = a + 256 * 16;  // same lane, next step
      std::swap_ranges(v.begin() + a, v.begin() + a + 16, v.begin() + b);
      CHECK(hashBuffer(v) != h);
    }
  }
  SECTION("swapping two chunks changes it") {
    auto v = base;
    v[5] ^= 0x20;  // the pattern repeats every chunk: make the first one differ
    const uint64_t before = hashBuffer(v);
    std::swap_ranges(v.begin(), v.begin() + kChunkBytes, v.begin() + kChunkBytes);
    CHECK(hashBuffer(v) != before);
  }
  SECTION("equal changes in two places do not cancel") {
    auto v = base;
    v[100] ^= 0x40;
    v[100 + kChunkBytes] ^= 0x40;
    CHECK(hashBuffer(v) != h);
    auto w = base;
    w[100] ^= 0x40;
    w[100 + 64 * 16] ^= 0x40;  // same lane rotation distance would cancel a XOR hash
    CHECK(hashBuffer(w) != h);
  }
  SECTION("trailing zeros change it") {
    auto v = base;
    v.push_back(0);
    CHECK(hashBuffer(v) != h);
  }
  SECTION("all zero buffers of different lengths differ") {
    std::set<uint64_t> seen;
    for (size_t n = 0; n < 40; ++n) seen.insert(hashBuffer(std::vector<uint8_t>(n, 0)));
    CHECK(seen.size() == 40);
  }
}

TEST_CASE("every single-bit flip in a chunk changes its digest") {
  auto data = pattern(4096);
  const uint64_t h = hashBuffer(data);
  std::set<uint64_t> seen{h};
  for (size_t bit = 0; bit < data.size() * 8; bit += 7) {
    data[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    seen.insert(hashBuffer(data));
    data[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
  CHECK(seen.size() == 1 + (data.size() * 8 + 6) / 7);
}

TEST_CASE("a word at any offset from a 16-byte boundary is assembled from the two aligned blocks that hold it") {
  const std::vector<uint8_t> bytes = pattern(32, 37, 11);
  uint64_t a[4];
  std::memcpy(a, bytes.data(), 32);
  for (uint32_t shift = 0; shift < 16; ++shift) {
    uint64_t want[2], lo = 0, hi = 0;
    std::memcpy(want, bytes.data() + shift, 16);
    shiftedWord(a[0], a[1], a[2], a[3], shift, lo, hi);
    CHECK(lo == want[0]);
    CHECK(hi == want[1]);
  }
}
