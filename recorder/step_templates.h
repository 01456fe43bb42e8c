// The templates the framework context follows (framework_context.cpp):
// steps learned whole, each its operations in order with their origins,
// and the places two of them have in common. Where both begin with the
// same operations, given the same weights, and have there the same op
// issued from other lines (a step that evaluates and then trains, and one
// that only trains: the same forward, called from the evaluation's line in
// one), a step that has run those operations so far may be of either kind.
// Such a place gives its op without a line rather than one template's
// guess. Other ops there are left to the template followed: a template of
// the steps before the program changed for good, followed no more, shares
// the first operations of the steps after it, but not their ops.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "recorder/weights.h"
#include "trace_format/events.h"

namespace gpurr::recorder::framework {

// What a backward node's launches are attributed to: its forward op.
struct ForwardOp {
  std::string op;
  std::string module;
  const char* file = nullptr;
  uint32_t line = 0;
  uint64_t thread = 0, serial = 0;  // the scope `op` names
};

// The templates: steps learned whole, each its operations in order with
// their origins. A training loop's steps are mostly alike, but some differ
// in a way that comes again: a step that logs its loss (a copy to the host),
// one that evaluates, one whose scaler skips the optimizer. Each such kind
// of step that the layer learned is followed by its own template.
struct Learned {
  uint64_t key = 0;
  trace::Origin origin;
  std::vector<uint8_t> roles;  // a launch's operand roles, when learned
  std::optional<Weight> weight;  // a launch's
  // A launch's with a weight, on the step's thread: the autograd counter at
  // it, and the number below which its op and those before made their nodes
  // (its op may make its own after it), both from the step's (Learning).
  int64_t counter = -1, madeBefore = -1;
  const trace::Origin* kept = nullptr;  // `origin` kept for the process (keptOrigin), once in a template
  // Where another template has the same operations up to this place, given
  // the same weights, and here the same op from another line (a step that
  // evaluates, then trains, and one that trains: the same forward, called
  // from other lines), a step that has run them so far may be either: the
  // origin without its line, kept for the process, instead of `kept`
  // (markShared). Null elsewhere.
  const trace::Origin* shared = nullptr;
};
// A learned step's forward op on the step's thread, by its autograd
// sequence number from the step's first, with the name of the backward
// node it made (once the step's backward ran it): for the backward of the
// ops a step ran while the recorder followed, when it then stopped
// matching (followedForward). At most kMaxSequenced a step.
struct SequencedOp {
  ForwardOp op;
  std::string node;
};
using Sequenced = std::unordered_map<int64_t, SequencedOp>;
constexpr size_t kMaxSequenced = size_t{1} << 17;
struct Template {
  std::vector<uint64_t> keys;  // its operations' keys, apart: what a miss compares
  std::vector<Learned> ops;
  uint64_t used = 0;  // the step it was last followed in: the least recent goes first
  Sequenced sequenced;
};

// Whether origins `a` and `b` are of the same op, module and phase issued
// from other lines.
inline bool otherLineOnly(const trace::Origin& a, const trace::Origin& b) {
  return (a.file != b.file || a.line != b.line) && a.op == b.op && a.opStack == b.opStack && a.phase == b.phase &&
         a.forwardOp == b.forwardOp && a.module == b.module && a.inPlace == b.inPlace;
}

// Sets each place's `shared` in `templates`: the origin without its line,
// kept for the process by `keep`, where another template shares the place;
// null elsewhere.
template <typename Keep>
void markShared(std::vector<Template>& templates, Keep keep) {
  for (auto& t : templates) {
    for (auto& op : t.ops) op.shared = nullptr;
  }
  for (size_t i = 0; i < templates.size(); ++i) {
    for (size_t j = 0; j < templates.size(); ++j) {
      if (i == j) continue;
      for (size_t k = 0; k < std::min(templates[i].ops.size(), templates[j].ops.size()); ++k) {
        auto &x = templates[i].ops[k], &y = templates[j].ops[k];
        if (x.key != y.key || x.weight != y.weight) break;
        if (x.shared == nullptr && otherLineOnly(*x.kept, *y.kept)) {
          trace::Origin lineless = *x.kept;
          lineless.file.clear();
          lineless.line = 0;
          x.shared = keep(lineless);
        }
      }
    }
  }
}

}  // namespace gpurr::recorder::framework
