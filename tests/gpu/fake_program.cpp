// fake_program NAME: stands in for the GPU test program NAME on a machine
// without a GPU, to test the suite's harness (run.sh, check_program.sh,
// compare_traces.py, expectations.txt) on the CPU. It prints what the real
// program would print and, when run under `gpurr record` (GPURR_OUTPUT set),
// writes the trace the recorder would write: the real program's kernels,
// differing between runs exactly where the real program's do (through the
// process id). FAKE_BROKEN=1 makes every run identical, as a recorder that
// hashed nothing would.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "trace_format/trace.h"

using namespace gpurr::trace;

namespace {

struct FakeLaunch {
  std::string function;
  uint32_t scalar = 0;
  uint64_t in = 0, out = 0;  // digests of its input and output range
};

// `graph`: a CUDA graph launch at the end, as torch.compile's
// reduce-overhead mode (and capture_global) makes, its nodes read: it hashes
// the one allocation they point into.
void writeTrace(const std::filesystem::path& dir, const std::vector<FakeLaunch>& launches, bool graph, int32_t rank) {
  Header header;
  header.rank = rank;
  TraceWriter w(dir, header);
  uint64_t seq = 0;
  Allocation a;
  a.ordinal = 1;
  a.address = 0x7f0000000000 + (static_cast<uint64_t>(getpid()) << 21);  // differs per run
  a.size = 1 << 20;
  w.append(Event{seq++, 0, 0, a});
  for (const FakeLaunch& l : launches) {
    KernelLaunch k;
    k.function = l.function;
    k.grid = {256, 1, 1};
    k.block = {256, 1, 1};
    k.params.resize(12);
    std::memcpy(k.params.data(), &a.address, 8);
    std::memcpy(k.params.data() + 8, &l.scalar, 4);
    k.paramLayout = {{0, 8}, {8, 4}};
    k.pointers = {{0, 1, 0}};
    RangeDigest r;
    r.range = {a.address, 4096, 1, 0};
    r.digest = l.in;
    k.inputs = {r};
    r.digest = l.out;
    k.outputs = {r};
    w.append(Event{seq++, seq, 0, k});
  }
  if (graph) {
    GraphLaunch g{0x900, 0, static_cast<uint32_t>(launches.size()), {}, {}};
    g.outputs = {{{a.address, a.size, 1, 0}, 0x5151, {}}};
    w.append(Event{seq++, seq, 0, g});
  }
  w.close();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fake_program NAME\n");
    return 2;
  }
  const std::string name = argv[1];
  const bool broken = std::getenv("FAKE_BROKEN") != nullptr;
  const uint64_t run = broken ? 1 : static_cast<uint64_t>(getpid());  // what differs between runs
  std::vector<FakeLaunch> launches;
  if (name == "atomic_reduce") {
    launches = {{"_Z22fill_from_host_patternPfPKfmm", 1, 10, 11}, {"_Z13reduce_atomicPKfmPf", 2, 11, 100 + run}};
  } else if (name == "uninit_read") {
    launches = {{"_Z8scribblePjij", static_cast<uint32_t>(run), 0, 200 + run},
                {"_Z11read_uninitPKjPji", 0, 300 + run, 400 + run},
                {"_Z18deterministic_tailPji", 0, 5, 6}};
  } else if (name == "framework") {  // tests/gpu/frameworks: Triton's kernels, then a graph
    for (uint32_t i = 0; i < 5; ++i) launches.push_back({"triton_poi_fused_add_0", i, i, i + 1});
  } else {
    for (uint32_t i = 0; i < 20; ++i) launches.push_back({"_Z6kernelPfj", i, i, i + 1});
  }
  if (const char* out = std::getenv("GPURR_OUTPUT"); out != nullptr && *out != '\0') {
    // Named as the recorder names a process's trace: by its RANK when set.
    const char* rank = std::getenv("RANK");
    const bool ranked = rank != nullptr && *rank != '\0';
    const std::string file = (ranked ? "rank" + std::string(rank) : std::string("proc0")) + ".gpurr";
    writeTrace(std::filesystem::path(out) / file, launches, name == "framework" || name == "capture_global",
               ranked ? std::atoi(rank) : -1);
  }
  std::printf("%s: fake output\n", name.c_str());
  return 0;
}
