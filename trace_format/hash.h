// gpurr's buffer hash, CPU reference implementation. The device kernel in
// kernels/ computes the same function; tests hold the two to agree bit for bit.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace gpurr::hash {

// Digest of one chunk: `data` holds the chunk's bytes (at most kChunkBytes),
// `chunkIndex` its position in the buffer.
uint64_t hashChunk(std::span<const uint8_t> data, uint64_t chunkIndex);

// Digests of every chunk of `data`, in order (empty for an empty buffer).
std::vector<uint64_t> chunkDigests(std::span<const uint8_t> data);

// Buffer digest from its chunk digests and its total length in bytes.
uint64_t foldChunks(std::span<const uint64_t> chunks, uint64_t totalLength);

// Buffer digest of `data`: foldChunks(chunkDigests(data), data.size()).
uint64_t hashBuffer(std::span<const uint8_t> data);

}  // namespace gpurr::hash
