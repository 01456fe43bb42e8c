// The places two templates the framework context follows have in common
// (framework_context.cpp): where both begin with the same operations, given
// the same weights, and have there the same op issued from other lines (a
// step that evaluates and then trains, and one that only trains: the same
// forward, called from the evaluation's line in one), a step that has run
// those operations so far may be of either kind. Such a place gives its op
// without a line rather than one template's guess. Other ops there are left
// to the template followed: a template of the steps before the program
// changed for good, followed no more, shares the first operations of the
// steps after it, but not their ops.
#pragma once

#include <algorithm>
#include <cstddef>

#include "trace_format/events.h"

namespace gpurr::recorder::framework {

// Whether origins `a` and `b` are of the same op, module and phase issued
// from other lines.
inline bool otherLineOnly(const trace::Origin& a, const trace::Origin& b) {
  return (a.file != b.file || a.line != b.line) && a.op == b.op && a.opStack == b.opStack && a.phase == b.phase &&
         a.forwardOp == b.forwardOp && a.module == b.module && a.inPlace == b.inPlace;
}

// Sets each place's `shared` in `templates` (each with `ops`, whose entries
// have `key`, `weight`, `kept` and `shared`): the origin without its line,
// kept for the process by `keep`, where another template shares the place;
// null elsewhere.
template <typename Templates, typename Keep>
void markShared(Templates& templates, Keep keep) {
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
