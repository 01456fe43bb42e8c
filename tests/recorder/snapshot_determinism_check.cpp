// Checks a trace recorded with --snapshot and --check-determinism on a GPU:
// every launch of KERNEL carries a determinism annotation of RUNS re-runs
// that is "deterministic" (one result) or "nondeterministic" (more than one)
// as EXPECT says, and snapshots of all its ranges whose bytes hash to the
// recorded digests; launches of other kernels carry neither.
//
//   snapshot_determinism_check TRACE KERNEL RUNS deterministic|nondeterministic
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trace_format/hash.h"
#include "trace_format/trace.h"

using namespace gpurr;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: snapshot_determinism_check TRACE KERNEL RUNS deterministic|nondeterministic\n");
    return 2;
  }
  const std::string kernel = argv[2], expect = argv[4];
  const uint32_t runs = static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10));
  int failures = 0, selected = 0;
  auto fail = [&](uint64_t seq, const std::string& what) {
    std::printf("  launch seq %llu: %s\n", static_cast<unsigned long long>(seq), what.c_str());
    ++failures;
  };
  try {
    trace::TraceReader reader(argv[1]);
    if (reader.header().options.checkDeterminism != runs)
      fail(0, "header options.checkDeterminism is " + std::to_string(reader.header().options.checkDeterminism));
    reader.forEach([&](const trace::Event& e) {
      const auto* k = std::get_if<trace::KernelLaunch>(&e.payload);
      if (k == nullptr) return true;
      const bool mine = k->function.find(kernel) != std::string::npos;
      const trace::DeterminismCheck* check = nullptr;
      for (const trace::Annotation& a : k->annotations)
        if (const auto* d = std::get_if<trace::DeterminismCheck>(&a)) check = d;
      size_t snapshots = 0;
      for (const auto* list : {&k->inputs, &k->outputs}) {
        for (const trace::RangeDigest& r : *list) {
          if (!r.snapshot) {
            if (mine) fail(e.seq, "range at offset " + std::to_string(r.range.offset) + " has no snapshot");
            continue;
          }
          ++snapshots;
          const std::vector<uint8_t> bytes = reader.readBlob(*r.snapshot);
          if (bytes.size() != r.range.size) fail(e.seq, "snapshot size differs from its range");
          if (hash::hashBuffer(bytes) != r.digest) fail(e.seq, "snapshot bytes do not hash to the range's digest");
        }
      }
      if (!mine) {
        if (check) fail(e.seq, k->function + " was re-run, but only " + kernel + " is selected");
        if (snapshots) fail(e.seq, k->function + " has snapshots, but only " + kernel + " is selected");
        return true;
      }
      ++selected;
      if (k->inputs.empty() || k->outputs.empty()) fail(e.seq, "not hashed");
      if (!check) {
        fail(e.seq, "no determinism annotation");
        return true;
      }
      std::printf("  %s: %u runs, %u distinct results\n", k->function.c_str(), check->runs, check->distinctResults);
      if (check->runs != runs) fail(e.seq, "runs " + std::to_string(check->runs));
      const bool deterministic = check->distinctResults == 1;
      if (check->distinctResults == 0 || deterministic != (expect == "deterministic"))
        fail(e.seq, std::to_string(check->distinctResults) + " distinct results, expected " + expect);
      return true;
    });
  } catch (const std::exception& e) {
    std::printf("  %s\n", e.what());
    return 1;
  }
  if (selected == 0) {
    std::printf("  no launch of %s in the trace\n", kernel.c_str());
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
