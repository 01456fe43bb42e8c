// Decoding on several threads, and giving up the operations both runs agree
// on from the start, change nothing: the scan sees the same events and the
// same errors, and the diff gives the same report, as on one thread keeping
// every operation.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "diff/diff.h"
#include "diff/summary.h"
#include "diff/wording.h"
#include "trace_format/frame_buffer.h"
#include "trace_format/hash_primitives.h"
#include "trace_format/scan.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

struct Dir {
  fs::path root = fs::temp_directory_path() / ("gpurr-parallel-" + std::to_string(getpid()));
  Dir() { fs::create_directories(root); }
  ~Dir() { fs::remove_all(root); }
};

// What a program does differently in run B.
struct Variation {
  uint64_t perturb = UINT64_MAX;       // this launch's output differs
  uint64_t perturbLater = UINT64_MAX;  // and this one's, independently
  uint64_t extraKernel = UINT64_MAX;   // an extra launch before this one
  uint64_t secondThreadFrom = UINT64_MAX;  // launches from here alternate between two host threads
  bool runB = false;
};

// A training loop of `launches` kernel launches over 16 buffers, with copies,
// sets and synchronisations among them, in small blocks (many of them).
fs::path writeProgram(const fs::path& dir, uint64_t launches, const Variation& v, uint64_t seed) {
  fs::remove_all(dir);
  WriterOptions wo;
  wo.blockBytes = 8 << 10;
  TraceWriter w(dir, Header{}, wo);
  std::mt19937_64 rng(seed);
  uint64_t seq = 0;
  constexpr uint32_t kBuffers = 16;
  const uint64_t base = v.runB ? 0x7f5500000000ULL : 0x7f1200000000ULL;
  auto address = [&](uint32_t o) { return base + uint64_t{o} * 0x100000; };
  std::vector<uint64_t> content(kBuffers + 1);
  for (uint32_t o = 1; o <= kBuffers; ++o) {
    w.append(Event{seq++, seq, 1, Allocation{o, address(o), 65536, AllocationKind::kDevice, 0, 0}, {}});
    content[o] = hash::fmix(o);
  }
  const char* kernels[] = {"_Z4convPfPKf", "_Z4reluPfPKf", "_Z6linearPfPKfS1_", "_Z3addPfPKfS1_i"};
  auto launch = [&](uint64_t i, uint32_t kernel, uint32_t thread) {
    KernelLaunch k;
    k.function = kernels[kernel];
    k.stream = (v.runB ? 0x5500 : 0x7700) + thread;
    k.grid = {8u << kernel, 1, 1};
    k.block = {128, 1, 1};
    const uint32_t out = 1 + static_cast<uint32_t>(rng() % kBuffers);
    const uint32_t pointers = 2 + kernel % 2;
    appendPointerParam(k, address(out), out, 0);
    uint64_t derived = i * 31 + kernel;
    for (uint32_t p = 1; p < pointers; ++p) {
      const uint32_t in = 1 + static_cast<uint32_t>(rng() % kBuffers);
      appendPointerParam(k, address(in), in, 0);
      k.inputs.push_back({{address(in), 4096, in, 0}, content[in], {}, {}});
      derived = hash::fmix(derived ^ content[in]);
    }
    const uint32_t scalar = static_cast<uint32_t>(i % 7);
    appendParam(k, &scalar, 4, 4);
    if (v.runB && (i == v.perturb || i == v.perturbLater)) derived ^= 1;
    content[out] = derived;
    k.outputs.push_back({{address(out), 4096, out, 0}, derived, {}, {}});
    if (i % 13 == 0) k.outputs.back().chunkDigests = {derived, derived + 1};
    w.append(Event{seq++, seq, thread, k, {}});
  };
  for (uint64_t i = 0; i < launches; ++i) {
    const uint32_t thread = i >= v.secondThreadFrom && i % 2 == 1 ? 2 : 1;
    if (v.runB && i == v.extraKernel) {
      const uint32_t zero = 0;
      KernelLaunch k;
      k.function = "_Z5extraPf";
      k.stream = (v.runB ? 0x5500 : 0x7700) + thread;
      k.grid = {1, 1, 1};
      k.block = {32, 1, 1};
      appendParam(k, &zero, 4, 4);
      w.append(Event{seq++, seq, thread, k, {}});
    }
    const uint32_t kernel = static_cast<uint32_t>(rng() % 4);
    switch (rng() % 40) {
      case 0: {  // a batch copied in
        const uint32_t o = 1 + static_cast<uint32_t>(rng() % kBuffers);
        content[o] = hash::fmix(i);
        Memcpy m;
        m.kind = MemcpyKind::kHostToDevice;
        m.stream = (v.runB ? 0x5500u : 0x7700u) + thread;
        m.size = 4096;
        m.dst = {address(o), 4096, o, 0};
        m.src = {0x1000, 4096, 0, 0};
        m.digest = content[o];
        w.append(Event{seq++, seq, thread, m, {}});
        break;
      }
      case 1: {
        const uint32_t o = 1 + static_cast<uint32_t>(rng() % kBuffers);
        content[o] = 0;
        Memset m;
        m.stream = (v.runB ? 0x5500u : 0x7700u) + thread;
        m.dst = {address(o), 4096, o, 0};
        m.elementSize = 4;
        w.append(Event{seq++, seq, thread, m, {}});
        break;
      }
      case 2:
        w.append(Event{seq++, seq, thread,
                       Sync{SyncKind::kStreamSynchronize, (v.runB ? 0x5500u : 0x7700u) + thread, 0}, {}});
        break;
      default:
        break;
    }
    launch(i, kernel, thread);
  }
  w.close();
  return dir;
}

// Everything a scan gives of an event, as text.
std::string text(const ScanEvent& e) {
  std::ostringstream os;
  os << e.seq << ' ' << static_cast<int>(e.kind) << ' ' << e.thread << ' ' << e.stream << ' ' << e.blockIndex;
  auto ranges = [&](const char* what, std::span<const ScanRange> rs) {
    os << ' ' << what;
    for (const ScanRange& r : rs) {
      os << fmt::format(" {:x}:{}:{}+{}:{}={:x}{}", r.range.address, r.range.size, r.range.allocation,
                        r.range.offset, static_cast<int>(r.range.bound), r.digest,
                        r.hasChunkDigests ? "c" : "");
    }
  };
  switch (e.kind) {
    case EventKind::kLaunch:
      os << ' ' << e.function << ' ' << e.functionId << ' ' << e.module << ' ' << e.grid.x << ','
         << e.grid.y << ',' << e.grid.z << ' ' << e.block.x << ',' << e.block.y << ',' << e.block.z
         << ' ' << e.cluster.x << ',' << e.cluster.y << ',' << e.cluster.z << ' ' << e.sharedMemBytes
         << ' ' << e.hashed << e.captured << e.hasAnnotations << " params";
      for (uint8_t b : e.params) os << fmt::format("{:02x}", b);
      os << " ptrs";
      for (const PointerParam& p : e.pointers) os << ' ' << p.byteOffset << ':' << p.allocation << '+' << p.offset;
      ranges("in", e.inputs);
      ranges("out", e.outputs);
      ranges("reads", e.reads);
      break;
    case EventKind::kMemcpy:
      os << ' ' << static_cast<int>(e.memcpyKind) << ' ' << e.size << ' ' << e.hasData;
      ranges("in", e.inputs);
      ranges("out", e.outputs);
      break;
    case EventKind::kMemset:
      os << ' ' << e.value << ' ' << e.elementSize;
      ranges("out", e.outputs);
      break;
    case EventKind::kAllocation:
      os << ' ' << e.ordinal << ' ' << e.address << ' ' << e.size << ' '
         << static_cast<int>(e.allocationKind);
      break;
    case EventKind::kSync:
      os << ' ' << static_cast<int>(e.syncKind) << ' ' << e.syncEvent;
      break;
    default:
      break;
  }
  return os.str();
}

// The events a scan visits (at most `limit`), and the error that ended it.
struct Seen {
  std::vector<std::string> events;
  std::string error;
};

Seen scan(const TraceReader& r, unsigned decoders, uint64_t fromSeq = 0, size_t limit = SIZE_MAX) {
  Seen out;
  try {
    scanEvents(r, [&](const ScanEvent& e) {
      out.events.push_back(text(e));
      return out.events.size() < limit;
    }, fromSeq, decoders);
  } catch (const TraceError& e) {
    out.error = e.what();
  }
  return out;
}

// Everything the diff reports, as text.
std::string text(const diff::ProcessDiff& d) {
  std::ostringstream os;
  auto op = [&](const diff::OpInfo& o) {
    os << " op " << o.seq << '/' << o.index << '/' << o.launchIndex << '/' << o.stream << '/' << o.name;
  };
  os << d.identical << ' ' << d.opsA << ' ' << d.opsB << ' ' << d.matched << ' ' << d.alignmentBounded
     << ' ' << d.pathDivergenceCount << '\n';
  for (const std::string& w : d.warnings) os << "warning " << w << '\n';
  if (d.firstDivergence) {
    const diff::FirstDivergence& f = *d.firstDivergence;
    os << "first " << f.path << ' ' << diff::jsonName(f.cause) << ' ' << f.summary;
    op(f.a);
    op(f.b);
    os << " in " << f.inputsIdentical << f.inputs.size() << " params " << f.paramsIdentical
       << f.params.size() << " out " << f.outputs.size() << '\n';
    for (const diff::Evidence& e : f.evidence) os << "evidence " << diff::sentence(e) << '\n';
  }
  for (const diff::PathDivergence& p : d.pathDivergences) {
    os << "path " << p.aBegin << '+' << p.aCount << ' ' << p.bBegin << '+' << p.bCount << ' '
       << p.readsTainted;
    for (const auto& o : p.aOps) op(o);
    for (const auto& o : p.bOps) op(o);
    os << '\n';
  }
  const diff::BlastRadius& b = d.blast;
  os << "blast " << b.laterOps << ' ' << b.taintedOps << ' ' << b.laterLaunches << ' '
     << b.taintedLaunches << ' ' << b.divergentOps << ' ' << b.explainedOps << ' '
     << b.independentCount << '\n';
  for (const diff::IndependentDivergence& i : b.independent) {
    os << "independent " << i.path << ' ' << i.reason;
    op(i.a);
    op(i.b);
    os << '\n';
  }
  return os.str();
}

}  // namespace

TEST_CASE("decoding threads change nothing a scan sees", "[scan][parallel]") {
  Dir dir;
  Variation v;
  v.secondThreadFrom = 1500;
  const TraceReader r(writeProgram(dir.root / "a.gpurr", 3000, v, 7));
  REQUIRE(r.blocks().size() > 50);
  const Seen serial = scan(r, 0);
  REQUIRE(serial.error.empty());
  REQUIRE(serial.events.size() == r.eventCount());
  for (unsigned decoders : {1u, 2u, 3u, 8u}) {
    INFO(decoders << " decoding threads");
    const Seen parallel = scan(r, decoders);
    CHECK(parallel.error.empty());
    CHECK(parallel.events == serial.events);
    // From an event in the middle of a block, and stopping early.
    const uint64_t from = r.blocks()[r.blocks().size() / 2].firstSeq + 3;
    CHECK(scan(r, decoders, from).events == scan(r, 0, from).events);
    CHECK(scan(r, decoders, from, 777).events == scan(r, 0, from, 777).events);
    CHECK(scan(r, decoders, 0, 5).events == scan(r, 0, 0, 5).events);
  }
}

TEST_CASE("a corrupt block fails alike with and without decoding threads", "[scan][parallel]") {
  Dir dir;
  const fs::path t = writeProgram(dir.root / "a.gpurr", 3000, Variation{}, 8);
  uint64_t offset = 0;
  {
    const TraceReader r(t);
    const BlockInfo& b = r.blocks()[r.blocks().size() * 2 / 3];
    offset = b.fileOffset + b.compressedSize / 2 + 64;  // inside its compressed frames
  }
  int failed = 0;
  for (int flip : {0x01, 0x40, 0xff}) {
    const fs::path events = t / "events";
    REQUIRE(fs::exists(events));
    const int fd = ::open(events.c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    uint8_t byte = 0;
    REQUIRE(::pread(fd, &byte, 1, static_cast<off_t>(offset)) == 1);
    byte ^= static_cast<uint8_t>(flip);
    REQUIRE(::pwrite(fd, &byte, 1, static_cast<off_t>(offset)) == 1);
    ::close(fd);
    std::unique_ptr<TraceReader> r;
    try {
      r = std::make_unique<TraceReader>(t);
    } catch (const TraceError&) {
      continue;  // refused when opened: nothing to scan
    }
    const Seen serial = scan(*r, 0);
    INFO("flip " << flip << ": " << serial.error);
    failed += !serial.error.empty();
    CHECK(serial.events.size() < r->eventCount());
    for (unsigned decoders : {1u, 3u}) {
      const Seen parallel = scan(*r, decoders);
      CHECK(parallel.error == serial.error);
      CHECK(parallel.events == serial.events);
    }
    offset += 97;
  }
  CHECK(failed > 0);
}

TEST_CASE("decoding threads and giving up the agreed start change no diff", "[diff][parallel]") {
  Dir dir;
  struct Case {
    const char* name;
    uint64_t launches;
    Variation b;
  };
  auto with = [](auto f) {
    Variation v;
    f(v);
    return v;
  };
  const std::vector<Case> cases = {
      {"identical", 20000, Variation{}},
      {"late output", 20000, with([](Variation& v) { v.perturb = 19000; })},
      {"early output", 20000, with([](Variation& v) { v.perturb = 40; })},
      {"output at a chunk's end", 20000, with([](Variation& v) { v.perturb = 8191; })},
      {"two independent", 20000, with([](Variation& v) { v.perturb = 12000, v.perturbLater = 18500; })},
      {"extra kernel", 20000, with([](Variation& v) { v.extraKernel = 17000; })},
      {"extra kernel then output", 20000,
       with([](Variation& v) { v.extraKernel = 9000, v.perturbLater = 15000; })},
      // A second host thread after the agreed start was given up: the
      // canonical order starts after it, however much of it was given up.
      {"second thread late", 20000, with([](Variation& v) { v.secondThreadFrom = 18000, v.perturb = 19000; })},
      // ... and after a divergence.
      {"second thread after a divergence", 20000,
       with([](Variation& v) { v.secondThreadFrom = 15000, v.perturb = 9000; })},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Variation va = c.b;
    va.runB = false;
    Variation vb = c.b;
    vb.runB = true;
    const TraceReader ra(writeProgram(dir.root / "a.gpurr", c.launches, va, 11));
    const TraceReader rb(writeProgram(dir.root / "b.gpurr", c.launches, vb, 11));
    diff::DiffOptions reference;
    reference.threads = 1;
    reference.dropAgreed = false;
    const std::string expected = text(diff::diffTraces(ra, rb, reference, nullptr));
    for (unsigned threads : {1u, 2u, 4u}) {
      for (bool drop : {false, true}) {
        diff::DiffOptions o;
        o.threads = threads;
        o.dropAgreed = drop;
        INFO(threads << " threads, drop " << drop);
        CHECK(text(diff::diffTraces(ra, rb, o, nullptr)) == expected);
      }
    }
    if (std::string(c.name) == "identical") CHECK(expected.rfind("1 ", 0) == 0);
    if (std::string(c.name) == "late output") CHECK(expected.find("nondeterministicKernel") != std::string::npos);
  }
}

TEST_CASE("random programs: decoding threads and giving up the agreed start change no diff", "[diff][parallel]") {
  // Where a second host thread shows up, and where run B's outputs or
  // kernels first differ, drawn at random: one before the other (in turn),
  // inside the first chunk of operations or past it.
  Dir dir;
  constexpr uint64_t kLaunches = 6000;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    std::mt19937_64 rng(seed);
    uint64_t first = rng() % kLaunches, second = rng() % kLaunches;
    if (first > second) std::swap(first, second);
    const bool threadFirst = seed % 2 == 0;
    Variation v;
    v.secondThreadFrom = threadFirst ? first : second;
    const uint64_t divergence = threadFirst ? second : first;
    (seed % 4 < 2 ? v.perturb : v.extraKernel) = divergence;
    v.perturbLater = rng() % 2 == 0 ? divergence + rng() % (kLaunches - divergence) : UINT64_MAX;
    INFO("seed " << seed << ": second thread from " << v.secondThreadFrom << ", outputs at " << v.perturb << " and "
                 << v.perturbLater << ", extra kernel at " << v.extraKernel);
    Variation vb = v;
    vb.runB = true;
    const TraceReader ra(writeProgram(dir.root / "a.gpurr", kLaunches, v, seed));
    const TraceReader rb(writeProgram(dir.root / "b.gpurr", kLaunches, vb, seed));
    diff::DiffOptions reference;
    reference.threads = 1;
    reference.dropAgreed = false;
    const std::string expected = text(diff::diffTraces(ra, rb, reference, nullptr));
    for (unsigned threads : {1u, 2u, 4u}) {
      diff::DiffOptions o;
      o.threads = threads;
      INFO(threads << " threads");
      CHECK(text(diff::diffTraces(ra, rb, o, nullptr)) == expected);
    }
  }
}

TEST_CASE("a diff of a corrupt trace fails alike on one thread and on several", "[diff][parallel]") {
  Dir dir;
  Variation va, vb;
  vb.runB = true;
  const fs::path a = writeProgram(dir.root / "a.gpurr", 20000, va, 12);
  const fs::path b = writeProgram(dir.root / "b.gpurr", 20000, vb, 12);
  // Damage one run, then both (run A's damage comes later in the trace).
  auto damage = [](const fs::path& t, double where) {
    const TraceReader r(t);
    const BlockInfo& blk = r.blocks()[static_cast<size_t>(static_cast<double>(r.blocks().size()) * where)];
    const uint64_t offset = blk.fileOffset + blk.compressedSize / 2 + 64;
    const fs::path events = t / "events";
    const int fd = ::open(events.c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    uint8_t byte = 0;
    REQUIRE(::pread(fd, &byte, 1, static_cast<off_t>(offset)) == 1);
    byte ^= 0xff;
    REQUIRE(::pwrite(fd, &byte, 1, static_cast<off_t>(offset)) == 1);
    ::close(fd);
  };
  auto error = [&](unsigned threads) {
    const TraceReader ra(a), rb(b);
    diff::DiffOptions o;
    o.threads = threads;
    try {
      diff::diffTraces(ra, rb, o, nullptr);
    } catch (const TraceError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  damage(b, 0.5);
  const std::string one = error(1);
  CHECK(one.find("b.gpurr") != std::string::npos);
  for (unsigned threads : {2u, 4u}) CHECK(error(threads) == one);
  damage(a, 0.8);
  const std::string both = error(1);
  CHECK(both == one);  // run B's damage comes first
  for (unsigned threads : {2u, 4u}) CHECK(error(threads) == both);
}

TEST_CASE("the summary keeps each trace's last blocks from where the runs first differ, none where they agree",
          "[diff][parallel]") {
  Dir dir;
  for (unsigned threads : {1u, 2u}) {
    for (bool differ : {false, true}) {
      INFO(threads << " threads, " << (differ ? "differing" : "agreeing"));
      Variation va, vb;
      vb.runB = true;
      if (differ) vb.perturb = 19000;
      const TraceReader ra(writeProgram(dir.root / "a.gpurr", 20000, va, 11));
      const TraceReader rb(writeProgram(dir.root / "b.gpurr", 20000, vb, 11));
      diff::Run a, b;
      a.reader = &ra;
      b.reader = &rb;
      diff::summariseBoth(a, b, threads, true);
      for (const TraceReader* r : {&ra, &rb}) {
        const size_t last = r->blocks().size() - 1;
        // On two threads, a run read to its end before the other shows the
        // difference keeps nothing: only agreeing runs are sure to keep none.
        if (threads == 1 || !differ) CHECK((r->recentBlocks().find(last) != nullptr) == differ);
        CHECK(r->recentBlocks().find(0) == nullptr);  // before the difference
        r->keepRecentBlocks(0);
      }
    }
  }
}
