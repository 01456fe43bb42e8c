// The trace reader fuzz target, shared by the libFuzzer binary, the corpus
// replay test and the corpus generator.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trace_format/trace.h"

namespace gpurr::fuzz {

// What the first byte of an input does (taken modulo kCount).
enum class Mode : uint8_t {
  kVersion = 0,      // rest replaces `version`
  kHeader = 1,       // rest replaces `header`
  kEvents = 2,       // rest replaces `events` (the index stays)
  kIndex = 3,        // rest replaces `index`
  kBlobFile = 4,     // [blob #] rest replaces that blob's file as stored
  kBlockFrames = 5,  // [u32 events][u32 launches][u64 firstSeq][u64 firstTime]
                     // [u64 lastTime] rest: the uncompressed frames of the
                     // only block of `events`, compressed here; no index
  kBlobContent = 6,  // [blob #] rest: that blob's bytes before zstd
  kOddEntry = 7,     // [path #][action]: remove the path or put a directory,
                     // a fifo, a symlink loop or /dev/zero in its place
  kNotATrace = 8,    // the trace path is a regular file holding the rest
  kSeveral = 9,      // records [mode][u16 length][payload] of modes 0-8
  kCount = 10,
};

// The 64-byte header that precedes a block in `events` (FORMAT.md).
std::vector<uint8_t> encodeBlockHeader(const trace::BlockInfo& info);

// Builds the mutated trace for `input` and reads all of it; returns normally
// unless the reader misbehaves (then it throws something other than a
// TraceError, aborts, or a sanitizer stops the process).
void runOne(std::span<const uint8_t> input);

}  // namespace gpurr::fuzz
