// The weight a launch is given: the first word of its parameter bytes that
// points into one of the framework's parameters (a model's weights, whose
// extents the framework layer reports). The templates the recorder follows
// (framework_context.h) keep each launch's, so that a step running the same
// kernels through another module of one kind (LayerDrop, an expert of its
// own) matches no template.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trace_format/events.h"

namespace gpurr::recorder::framework {

struct Weight {
  uint32_t offset;      // in the launch's parameter bytes
  uint64_t begin, end;  // the parameter's extent
  bool operator==(const Weight&) const = default;
};

// A launch's parameter bytes, and the pointers the recorder found in them
// (words that point into live device memory: the kernel's operands; empty
// where not known).
struct LaunchWords {
  std::span<const uint8_t> params;
  std::span<const trace::PointerParam> pointers;
  // Whether the word at `offset` points into live device memory.
  bool operand(uint32_t offset) const {
    for (const trace::PointerParam& p : pointers) {
      if (p.byteOffset == offset) return true;
    }
    return false;
  }
};

// The framework's parameters' extents. Not thread-safe: its owner locks.
class Weights {
 public:
  // From (address, size) pairs, replacing those before; overlapping ones
  // (a parameter given twice, views of one another) merged.
  void set(std::span<const uint64_t> ranges);
  bool empty() const { return extents_.empty(); }

  // The first 8-byte aligned word of `params` that points into a parameter:
  // only the first, since a struct passed by value (an optimizer's tensor
  // lists, a reduction's outputs) may hold in its unused slots, after those
  // it uses, whatever the stack held.
  std::optional<Weight> of(std::span<const uint8_t> params) const;
  // Where the word of `params` at `w`'s offset points: into `w`'s parameter
  // (kSame), into none of them (kNone: a stale slot, or a tensor of a model
  // the layer did not report), into another (kOther); or `params` end
  // before it (kShort).
  enum class Fit { kSame, kNone, kOther, kShort };
  Fit fit(const Weight& w, std::span<const uint8_t> params) const;
  // Why a launch given `words` did not take the place of one given `w`
  // (or none), for a note on the launch.
  std::string whyNot(const std::optional<Weight>& w, const LaunchWords& words) const;

 private:
  const std::pair<uint64_t, uint64_t>* at(uint64_t address) const;
  std::vector<std::pair<uint64_t, uint64_t>> extents_;  // [begin, end), by begin
};

}  // namespace gpurr::recorder::framework
