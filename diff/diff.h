// gpurr_diff: compares two recordings of one process and finds the first
// operation whose output differs, why, and what it affected afterwards.
// Works on trace_format's value types and readers only.
#pragma once

#include <cstddef>
#include <vector>

#include "diff/align.h"
#include "diff/culprits.h"
#include "diff/report.h"
#include "trace_format/trace.h"

namespace gpurr::diff {

struct DiffOptions {
  AlignOptions align;
  size_t maxIndependent = 5;      // independent divergences listed (all are counted)
  size_t maxPathDivergences = 8;  // path divergences listed
  size_t maxStretchOps = 6;       // operations shown per side of a stretch
  // Threads that decompress and decode the traces' blocks (0: one per core;
  // 1: none besides the caller's). The result is the same for any number.
  unsigned threads = 0;
  // Give up the operations both runs agree on from the start as the summary
  // goes (memory: two long runs that agree up to a late divergence are
  // compared without holding every operation). The result is the same
  // either way; false keeps them all.
  bool dropAgreed = true;
  // The traces are one process of a job whose directories are compared:
  // the job's report says which rank sent a collective other data, so a
  // rank's own report does not send the user to the other ranks' traces.
  bool partOfJob = false;
};

// The header fields that differ: environment variables, GPUs, driver, CUDA,
// cuDNN, cuBLAS and other library versions (affectsResults), and the command
// line and recording options (context only).
std::vector<EnvDifference> compareHeaders(const trace::Header& a, const trace::Header& b);

// Compares the operations (launches, copies, sets, graph launches) of `a` and
// `b`. `culprits` may be null. Throws trace::TraceError on a corrupt trace.
ProcessDiff diffTraces(const trace::TraceReader& a, const trace::TraceReader& b,
                       const DiffOptions& options, const Culprits* culprits);

// Re-executions of the divergent launch from one run's own recorded state
// (the recorder's determinism check, or gpurr replay) gave different
// results: the kernel itself is nondeterministic. A verdict that rested on
// what differs between the runs' parameter bytes (which can hold
// uninitialised host bytes: docs/GPU_FACTS.md), or on nothing, becomes
// nondeterministic kernel; `proof` says what was re-executed, and the
// earlier evidence follows it. Returns whether the verdict changed.
bool provenNondeterministic(FirstDivergence& d, const std::string& proof);

}  // namespace gpurr::diff
