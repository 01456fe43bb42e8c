// The operations around the first divergence of two runs, side by side: what a
// report shows so that the divergent launch is seen in its context (what ran
// just before it in both runs, and what read its outputs afterwards).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "common/demangle.h"
#include "diff/report.h"

namespace gpurr::report {

// Reads the operations (launches, copies, memsets, graph launches) of the
// traces `traceA` and `traceB` from `window` operations before the first
// divergence of `process` (one process of a comparison, compare.h) to
// `window` rows after it, decoding only the blocks it needs. When the
// process has no first divergence (identical runs) the timeline is empty:
// `rows` is [] and `a`, `b` are null. Throws trace::TraceError when a trace
// cannot be read, and std::invalid_argument when `process` names operations
// the traces lack (a diff of other traces).
//
// The object:
//   process      the process entry's `name` ("" for two traces)
//   window       as given
//   path         the first divergence is a path divergence (a stretch)
//   a, b         {trace, anchorSeq, anchorIndex}: the trace read and the
//                divergent operation's event number and operation index in
//                that run (anchorSeq null: a stretch empty on that side)
//   rows         array, in host order; each row:
//     offset     rows from the divergent one (0; negative before it); an
//                elided row counts as one
//     divergent  true on the first divergence's row
//     stretch    true on rows of a stretch taken by one run alone (a path
//                divergence); paired only by position within the stretch
//     elided     present on a row standing for stretch operations not shown:
//                {a, b} counts per side (such a row has null `a` and `b`)
//     sameOperation  bool when both sides are present, else null
//     inputsEqual, outputsEqual
//                bool when both sides are present outside a stretch, else
//                null
//     a, b       the operation in each run, or null:
//       seq, index, launchIndex (null when not a launch), kind ("launch",
//       "memcpy", "memset", "graph"), name (mangled kernel name, or
//       "memcpy HtoD"...), demangled, short (demangled without return type
//       and parameter list, long template arguments elided), grid, block
//       (arrays of 3; launches only), stream (the recorded handle),
//       streamOrdinal (the diff's stream number where the diff names an
//       operation on that stream, on either side before the divergence;
//       0 for the default stream; else null), hashed, inputs, outputs
//       (arrays of {address, allocation, offset, size, digest (16 hex
//       digits), same}:
//       `same` is whether the other side's range at the same position has
//       the same digest, null when unpaired or in a stretch), annotations (as in
//       `gpurr dump --json`: kind algorithm, rng, frameworkOp, note,
//       determinism), origin (where it came from in the program, as
//       `gpurr dump --json` writes it: op, opStack, phase, forwardOp,
//       module, file, line, step, stepLaunch; null when not recorded).
nlohmann::json timelineAround(const std::filesystem::path& traceA,
                              const std::filesystem::path& traceB,
                              const diff::ProcessDiff& process, size_t window = 12);

// A demangled kernel name made short enough for a table cell: no return
// type, no parameter list, nested template arguments elided, at most `max`
// characters. Plain (unmangled) names are cut in the middle.
std::string shortKernelName(const std::string& mangledOrPlain, size_t max = 72);

// The demangled name, or the name itself when it is not a mangled C++ name.
using gpurr::demangled;

}  // namespace gpurr::report
