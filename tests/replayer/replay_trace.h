// Small traces for the replayer's CPU tests, written with TraceWriter: a few
// allocations, a module image (arbitrary bytes: planning never runs it) and
// launches whose inputs carry snapshots.
#pragma once

#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "trace_format/hash.h"
#include "trace_format/trace.h"

namespace gpurr::testing {

// Deterministic bytes that look like data.
inline std::vector<uint8_t> patternBytes(uint64_t seed, size_t n) {
  std::vector<uint8_t> out(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    out[i] = static_cast<uint8_t>(x >> 56);
  }
  return out;
}

inline trace::Header replayHeader() {
  trace::Header h;
  h.toolVersion = "0.1.0";
  h.commandLine = {"python", "train.py", "--lr", "0.1"};
  h.gpus = {{0, "NVIDIA H100 80GB HBM3", "GPU-00000000-1111-2222-3333-444444444444", 132, 9, 0,
             85520809984ULL, "0000:19:00.0"}};
  h.driverVersion = 13000;
  return h;
}

// Writes events one after another with increasing seq numbers.
class ReplayTraceBuilder {
 public:
  ReplayTraceBuilder(const std::filesystem::path& dir, trace::Header header = replayHeader())
      : writer_(dir, header) {}

  trace::TraceWriter& writer() { return writer_; }
  uint64_t nextSeq() const { return seq_; }

  uint64_t add(trace::Payload payload, std::optional<trace::Origin> origin = std::nullopt) {
    writer_.append(trace::Event{seq_, 1000 * seq_, 0, std::move(payload), std::move(origin)});
    return seq_++;
  }

  uint64_t alloc(uint32_t ordinal, uint64_t address, uint64_t size,
                 trace::AllocationKind kind = trace::AllocationKind::kDevice) {
    return add(trace::Allocation{ordinal, address, size, kind, 0, 0});
  }

  uint64_t module(uint32_t ordinal, std::vector<uint8_t> image = patternBytes(99, 1000)) {
    return add(trace::ModuleLoad{ordinal, writer_.putBlob(image), 90});
  }

  // A digest of `bytes` at `address` (allocation `ordinal`, offset
  // `offset`), with a snapshot when `snapshot` is set.
  trace::RangeDigest digest(uint32_t ordinal, uint64_t address, uint64_t offset, const std::vector<uint8_t>& bytes,
                            bool snapshot) {
    trace::RangeDigest r;
    r.range = {address, bytes.size(), ordinal, offset};
    r.chunkDigests = hash::chunkDigests(bytes);
    r.digest = hash::foldChunks(r.chunkDigests, bytes.size());
    if (snapshot) r.snapshot = writer_.putBlob(bytes);
    return r;
  }

  void close() { writer_.close(); }

 private:
  trace::TraceWriter writer_;
  uint64_t seq_ = 0;
};

// Appends an 8-byte pointer parameter (recorded as a PointerParam) to `k`.
inline void addPointer(trace::KernelLaunch& k, uint32_t ordinal, uint64_t base, uint64_t offset) {
  trace::appendPointerParam(k, base + offset, ordinal, offset);
}

inline void addScalar(trace::KernelLaunch& k, uint32_t value) { trace::appendParam(k, &value, 4, 4); }

}  // namespace gpurr::testing
