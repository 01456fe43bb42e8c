// Names and limits of the trace directory layout (FORMAT.md), shared by the
// writer and the reader. Private to trace_format.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <zstd.h>

#include "trace_format/events.h"
#include "trace_format/trace.h"

namespace gpurr::trace::container {

inline constexpr const char* kVersionFile = "version";
inline constexpr const char* kHeaderFile = "header";
inline constexpr const char* kEventsFile = "events";
inline constexpr const char* kIndexFile = "index";
inline constexpr const char* kChecksumsFile = "checksums";
inline constexpr const char* kBlobDir = "blobs";
inline constexpr const char* kVersionPrefix = "gpurr-trace ";

inline constexpr uint64_t kBlockMagic = 0x4b4c425252555047ULL;  // "GPURRBLK"

// Readers refuse anything larger: a corrupt size must not become a huge
// allocation.
inline constexpr uint64_t kMaxHeaderBytes = 16 << 20;
inline constexpr uint64_t kMaxIndexBytes = 256 << 20;
inline constexpr uint64_t kMaxChecksumsBytes = 64 << 10;
inline constexpr uint32_t kMaxBlockHeaderWords = 64;
inline constexpr uint64_t kMaxBlockBytes = 256 << 20;

// A blob from this size on is transformed (byte planes) and compressed by
// several threads, up to blobThreads(): one thread is far slower than a
// pinned device-to-host copy delivers a snapshot.
inline constexpr uint64_t kParallelBlobBytes = 4 << 20;
inline unsigned blobThreads() { return std::clamp(std::thread::hardware_concurrency(), 1u, 8u); }

// What is wrong with a block's zstd frame's own header against the block
// header's `uncompressedSize` (FORMAT.md §3: it carries the content size,
// and that size is the block's); empty when nothing is.
inline std::string frameSizeProblem(const void* frame, size_t size, uint64_t uncompressedSize) {
  const unsigned long long declared = ZSTD_getFrameContentSize(frame, size);
  if (declared == uncompressedSize) return "";
  if (declared == ZSTD_CONTENTSIZE_UNKNOWN) return "its zstd frame does not declare its content size";
  if (declared == ZSTD_CONTENTSIZE_ERROR) return "its zstd frame has no valid header";
  return fmt::format("its zstd frame declares {} bytes, its block header {}", declared, uncompressedSize);
}

// Adds a launch's function name of `bytes` to `names`, the bytes a block's
// launches name so far (each launch's counted once, FORMAT.md §10); what is
// wrong once they pass the limit, empty before.
inline std::string launchNamesProblem(uint64_t& names, size_t bytes) {
  names += bytes;
  if (names <= kMaxBlockBytes) return "";
  return fmt::format("its launches' function names, counted once a launch, take {} bytes and more, beyond the {} "
                     "a block may hold",
                     names, kMaxBlockBytes);
}

// What a visitor of a block's events threw, carried out of the block's
// decoding untouched: only the block's own faults make it corrupt.
struct VisitorThrew {
  std::exception_ptr error;
};

// Calls `visit(event)`, wrapping what it throws in VisitorThrew: rethrown
// by rethrow().
template <typename Visit, typename Event>
bool visiting(Visit& visit, Event& event) {
  try {
    return visit(event);
  } catch (...) {
    throw VisitorThrew{std::current_exception()};
  }
}

// Rethrows what a visitor of the block at `blockOffset` of `events` threw;
// a TraceError (what it found wrong with the events) names the block.
[[noreturn]] inline void rethrow(const VisitorThrew& v, const std::filesystem::path& events, uint64_t blockOffset) {
  try {
    std::rethrow_exception(v.error);
  } catch (const TraceError& e) {
    throw TraceError(fmt::format("{}: block at offset {}: {}", events.string(), blockOffset, e.what()));
  }
}

// blobs/<first two hex digits>/<all 32>
inline std::filesystem::path blobPath(const std::filesystem::path& dir, const BlobId& id) {
  const std::string hex = id.hex();
  return dir / kBlobDir / hex.substr(0, 2) / hex;
}

}  // namespace gpurr::trace::container
