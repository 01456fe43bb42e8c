// CPU reference of the buffer hash; see FORMAT.md ("Buffer hash").
#include "trace_format/hash.h"

#include <array>
#include <cstring>

#include "trace_format/hash_primitives.h"

namespace gpurr::hash {

uint64_t hashChunk(std::span<const uint8_t> data, uint64_t chunkIndex) {
  std::array<uint64_t, kLanes> lane;
  for (uint32_t l = 0; l < kLanes; ++l) lane[l] = laneSeed(chunkIndex, l);

  // Word w goes to lane w % kLanes; each lane sees its words in order.
  const uint64_t len = data.size();
  const uint64_t fullWords = len / kWordBytes;
  for (uint64_t w = 0; w < fullWords; ++w) {
    uint64_t lo, hi;
    std::memcpy(&lo, data.data() + w * kWordBytes, 8);
    std::memcpy(&hi, data.data() + w * kWordBytes + 8, 8);
    uint64_t& s = lane[w % kLanes];
    s = step(s, lo, hi);
  }
  if (len % kWordBytes != 0) {  // last partial word, zero-padded
    uint8_t word[kWordBytes] = {};
    std::memcpy(word, data.data() + fullWords * kWordBytes, len % kWordBytes);
    uint64_t lo, hi;
    std::memcpy(&lo, word, 8);
    std::memcpy(&hi, word + 8, 8);
    uint64_t& s = lane[fullWords % kLanes];
    s = step(s, lo, hi);
  }

  // Balanced binary tree over the lanes, neighbours combined in order.
  for (uint32_t level = 0, width = kLanes; width > 1; ++level, width /= 2) {
    for (uint32_t i = 0; i < width / 2; ++i) {
      lane[i] = combineLanes(lane[2 * i], lane[2 * i + 1], level);
    }
  }
  return finishChunk(lane[0], len);
}

std::vector<uint64_t> chunkDigests(std::span<const uint8_t> data) {
  std::vector<uint64_t> out;
  out.reserve((data.size() + kChunkBytes - 1) / kChunkBytes);
  for (uint64_t off = 0, c = 0; off < data.size(); off += kChunkBytes, ++c) {
    out.push_back(hashChunk(data.subspan(off, std::min<uint64_t>(kChunkBytes, data.size() - off)), c));
  }
  return out;
}

uint64_t foldChunks(std::span<const uint64_t> chunks, uint64_t totalLength) {
  uint64_t s = bufferSeed(totalLength);
  for (uint64_t c = 0; c < chunks.size(); ++c) s = foldChunk(s, chunks[c], c);
  return finishBuffer(s);
}

uint64_t hashBuffer(std::span<const uint8_t> data) {
  return foldChunks(chunkDigests(data), data.size());
}

}  // namespace gpurr::hash
