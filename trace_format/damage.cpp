// What a damaged trace lost, in words: a block found corrupt (CorruptBlock,
// which a reader opened again reads the trace up to), and why a trace's
// events end early (Damage).
#include <fmt/format.h>

#include "trace_format/container.h"
#include "trace_format/trace.h"

namespace gpurr::trace {
namespace fs = std::filesystem;

CorruptBlock::CorruptBlock(const fs::path& trace, uint64_t blockOffset, const std::string& problem)
    : TraceError(fmt::format("{}: block at offset {} is corrupt: {}", (trace / container::kEventsFile).string(),
                             blockOffset, problem)),
      trace_(trace),
      at_{blockOffset, problem} {}

bool CorruptBlock::narrowed(const fs::path& trace, ReadLimit& limit) const {
  if (trace != trace_ || at_.blockOffset >= limit.blockOffset) return false;
  limit = at_;
  return true;
}

std::string Damage::cause() const {
  if (corruptBlock) return "damaged since it was written: a block of its events is corrupt";
  if (indexDamaged) return "damaged since it was written: its index does not fit its events";
  return "the recording did not end cleanly";
}

std::string Damage::readsTo() const { return corruptBlock ? "its corrupt block" : "its last complete block"; }

}  // namespace gpurr::trace
