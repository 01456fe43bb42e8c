// Stage 3, after the alignment: where several alignments are equally short,
// the one whose matched operations agree. Myers' algorithm places an extra
// operation among operations of the same identity (one more launch of a
// loop's kernel, a block of a model called twice) at either end of them,
// or splits it, as all are scripts of the fewest edits; the report would
// then name an operation both runs made.
#pragma once

#include "diff/align.h"
#include "diff/model.h"

namespace gpurr::diff {

// Aligns again each region of stretches (those a few matched operations
// apart, with a margin of matched operations either side), by dynamic
// programming: the fewest edits first, as before; among those, the most
// matched pairs whose framework origins agree (op, module, source line,
// step); then whose counts within their step agree, so that an extra
// operation among repeated ones is the last of them. A region changes only
// where that is strictly better than the alignment it had. The last stretch of a run cut
// short (`cutLast`) is left alone: it is what the other run did after the
// cut. Bounded: regions of at most a few million cells, origins of at most
// 2^16 operations read in all.
void breakTies(Alignment& alignment, const Run& a, const Run& b, bool cutLast);

}  // namespace gpurr::diff
