// Writing then reading gives back every event exactly; writing is
// deterministic; seeking finds the right block; blobs are deduplicated and
// stored in their encodings.
#include <catch2/catch.hpp>

#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "test_util.h"
#include "trace_format/container.h"
#include "trace_format/frame_buffer.h"
#include "trace_format/scan.h"
#include "trace_format/trace.h"

using namespace gpurr::trace;
using gpurr::testing::readFile;
using gpurr::testing::TempDir;
namespace fs = std::filesystem;

namespace {

Header sampleHeader() {
  Header h;
  h.toolVersion = "test";
  h.commandLine = {"python", "train.py", "--lr", "0.1"};
  h.workingDirectory = "/work";
  h.environment = {{"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}, {"PYTHONHASHSEED", "1"}};
  h.hostname = "node7";
  h.pid = 77;
  h.rank = 3;
  h.startTimeNs = 123456789;
  h.gpus = {{0, "NVIDIA H100", "GPU-abc", 132, 9, 0, 80ULL << 30, "0000:01:00.0"},
            {1, "NVIDIA H100", "GPU-def", 132, 9, 0, 80ULL << 30, "0000:02:00.0"}};
  h.driverVersion = 13000;
  h.cudaRuntimeVersion = 13000;
  h.cudnnVersion = 91300;
  h.cublasVersion = 130100;
  h.libraries = {{"nccl", "2.27.3"}};
  h.options.sync = true;
  h.options.captureHostData = true;
  h.options.launchRange = "10:20";
  h.options.kernelRegex = "gemm";
  h.options.snapshot = "15";
  h.options.checkDeterminism = 5;
  h.options.hashInputs = false;
  h.pointersResolved = false;
  return h;
}

RangeDigest range(uint64_t addr, uint32_t alloc, uint64_t digest) {
  RangeDigest r;
  r.range = {addr, 4096, alloc, addr & 0xfff};
  r.digest = digest;
  return r;
}

// One event of every kind, every field set to something other than its default.
std::vector<Event> everyKind(TraceWriter& w) {
  std::vector<Event> out;
  uint64_t seq = 5;
  auto add = [&](Payload p) {
    out.push_back(Event{seq, seq * 1000, static_cast<uint32_t>(seq % 3), std::move(p)});
    seq += 2;  // sequence numbers may skip
  };
  const BlobRef cubin = w.putBlob(std::vector<uint8_t>{0x7f, 'E', 'L', 'F', 1, 2, 3});
  add(Allocation{1, 0x7000, 1 << 20, AllocationKind::kVmm, 1, 0x42});
  add(ModuleLoad{1, cubin, 90, 0x5eedc0de0ddba11});

  KernelLaunch k;
  k.api = LaunchApi::kLaunchKernelExPtsz;
  k.context = 0xc0;
  k.stream = 0x5;
  k.module = 1;
  k.function = "_Z6kernelPfS_i";
  k.grid = {10, 20, 30};
  k.block = {128, 2, 1};
  k.cluster = {2, 1, 1};
  k.sharedMemBytes = 4096;
  k.number = 41;  // the recorder's number (compatVersion 13)
  k.attributes = {{4, {1, 2, 3}}, {7, {}}};
  k.params = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  k.paramLayout = {{0, 8}, {8, 8}, {16, 4}};
  k.pointers = {{0, 1, 0x10}, {8, 1, 0x20}};
  k.inputs = {range(0x7010, 1, 11), range(0x7020, 1, 12)};
  k.inputs[0].chunkDigests = {1, 2, 3};
  k.inputs[0].range.bound = RangeBound::kBlock;
  k.inputs[1].snapshot = w.putBlob(std::vector<uint8_t>(4096, 9), BlobEncoding::kBytePlanes4);
  k.outputs = {range(0x7020, 1, 13)};
  k.reads = {range(0x7010, 1, 0)};
  k.reads[0].range.bound = RangeBound::kBlock;
  k.annotations = {
      AlgorithmChoice{"cudnn", "cudnnBackendExecute", "engine=12",
                      {{"knob.split_k", "4"}, {"shape", "8x3x224x224"}},
                      {{"engine=12", 0.25f}, {"engine=3", 0.5f}}},
      RngState{"philox", "cuda:0", 42, 128, 16},
      FrameworkOp{"aten::index_add_"},
      Note{"hello"},
      DeterminismCheck{10, 3}};
  k.hashed = false;
  add(k);
  out.back().origin = Origin{"aten::index_add_",
                             {"autograd::engine::evaluate_function: IndexSelectBackward0", "aten::index_add_"},
                             Phase::kBackward, "aten::index_select", "Net.embed", "/src/train.py", 42, 3, 36, InPlace::kYes};
  out.back().origin->byPlace = true;  // compatVersion 14

  KernelLaunch plain;  // defaults everywhere, same function: reuses its id
  plain.function = "_Z6kernelPfS_i";
  add(plain);
  out.back().origin = Origin{"CachingAutotuner.benchmark_all_configs", {"CachingAutotuner.benchmark_all_configs"}};
  out.back().origin->benchmarking = true;

  Memcpy m;
  m.kind = MemcpyKind::kHostToDevice;
  m.stream = 5;
  m.async = true;
  m.size = 4096;
  m.dst = {0x7000, 4096, 1, 0};
  m.src = {0x1000, 4096, 0, 0};
  m.digest = 0xfeed;
  m.data = w.putBlob(std::vector<uint8_t>(4096, 1));
  add(m);
  out.back().origin = Origin{"aten::copy_", {"aten::to", "aten::copy_"}, Phase::kForward, "", "", "", 0, 0, 0};
  add(Memcpy{});
  add(Memset{9, true, {0x7000, 64, 1, 0}, 0xff, 4, 0xbeef});
  add(Sync{SyncKind::kStreamWaitEvent, 5, 0xe});
  GraphLaunch g;
  g.graphExec = 0x99;
  g.stream = 5;
  g.nodeCount = 17;
  g.inputs = {range(0x7000, 1, 21)};
  g.outputs = {range(0x7000, 1, 22)};
  add(g);
  Collective c;
  c.source = CollectiveSource::kNccl;
  c.call = "ncclReduceScatter";
  c.op = CollectiveOp::kReduceScatter;
  c.communicator = 0x1234567890abcdefULL;
  c.rank = 1;
  c.size = 4;
  c.dataType = "bfloat16";
  c.count = 512;
  c.reduceOp = "avg";
  c.stream = 5;
  c.sequence = 7;
  c.group = 2;
  c.inputs = {range(0x7000, 1, 23)};
  c.outputs = {range(0x7400, 1, 24)};
  add(c);
  Collective f;  // a framework's view, with its own fields
  f.source = CollectiveSource::kFramework;
  f.call = "c10d::broadcast_";
  f.op = CollectiveOp::kBroadcast;
  f.peer = 0;
  f.processGroup = "0";
  f.frameworkSequence = 12;
  add(f);
  out.back().origin = Origin{"c10d::broadcast_", {"c10d::broadcast_"}, Phase::kForward, "", "", "/src/train.py", 7, 0, 0};
  add(Free{1, 0x7000});
  return out;
}

KernelLaunch launchNumbered(uint64_t i) {
  KernelLaunch k;
  k.function = "kernel_" + std::to_string(i % 7);
  k.grid = {static_cast<uint32_t>(i % 1000 + 1), 1, 1};
  k.params.resize(16);
  std::memcpy(k.params.data(), &i, 8);
  k.outputs = {range(0x1000 + i, 1, i * 0x9E3779B97F4A7C15ULL)};
  return k;
}

// A trace of `n` launches numbered 0, 2, 4... in blocks of about 1 KiB.
fs::path numberedTrace(const fs::path& dir, uint64_t n) {
  WriterOptions options;
  options.blockBytes = 1024;
  TraceWriter w(dir, sampleHeader(), options);
  for (uint64_t i = 0; i < n; ++i) w.append(Event{i * 2, i, 0, launchNumbered(i)});
  return dir;  // the destructor closes the trace
}

}  // namespace

TEST_CASE("every event kind survives a write and a read") {
  TempDir tmp;
  std::vector<Event> events;
  {
    TraceWriter w(tmp / "t.gpurr", sampleHeader());
    events = everyKind(w);
    for (const Event& e : events) w.append(e);
    w.close();
  }
  TraceReader r(tmp / "t.gpurr");
  Header expectedHeader = sampleHeader();
  CHECK(r.header() == expectedHeader);
  CHECK(r.damage().unclosed == false);
  CHECK(r.damage().detail.empty());
  CHECK(r.eventCount() == events.size());
  CHECK(r.launchCount() == 2);
  const std::vector<Event> back = r.readAll();
  REQUIRE(back.size() == events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    INFO("event " << i << " (" << kindName(events[i].payload) << ")");
    CHECK(back[i] == events[i]);
  }
  // The summary pass (its launch fast path included) sees the same ranges,
  // and the same operations.
  size_t i = 0;
  scanEvents(r, [&](const ScanEvent& e) {
    CHECK(e.benchmarking == (events[i].origin && events[i].origin->benchmarking));
    CHECK(isOperation(e) == isOperation(events[i]));
    if (const auto* k = std::get_if<KernelLaunch>(&events[i++].payload)) {
      INFO("launch " << e.seq);
      REQUIRE(e.reads.size() == k->reads.size());
      for (size_t j = 0; j < e.reads.size(); ++j) CHECK(e.reads[j].range == k->reads[j].range);
      CHECK(e.outputs.size() == k->outputs.size());
    } else if (const auto* s = std::get_if<Sync>(&events[i - 1].payload)) {
      CHECK(e.syncKind == s->kind);
      CHECK(e.stream == s->stream);
      CHECK(e.syncEvent == s->event);
    }
    return true;
  });
  CHECK(i == events.size());
}

TEST_CASE("blobs are content-addressed, deduplicated and verified") {
  TempDir tmp;
  std::vector<uint8_t> floats(1000 * 4);
  for (size_t i = 0; i < floats.size(); ++i) floats[i] = static_cast<uint8_t>(i * 37 % 251);
  floats.push_back(7);  // a tail shorter than one element
  BlobRef a, b, c;
  {
    TraceWriter w(tmp / "t.gpurr", sampleHeader());
    a = w.putBlob(floats, BlobEncoding::kBytePlanes4);
    b = w.putBlob(floats, BlobEncoding::kBytePlanes4);
    c = w.putBlob(std::vector<uint8_t>{});
  }
  CHECK(a == b);
  CHECK(a.size == floats.size());
  size_t files = 0;
  for (auto& e : fs::recursive_directory_iterator(tmp / "t.gpurr/blobs")) files += e.is_regular_file();
  CHECK(files == 2);
  TraceReader r(tmp / "t.gpurr");
  CHECK(r.readBlob(a) == floats);
  CHECK(r.readBlob(c).empty());
  CHECK(r.hasBlob(a.id));
  CHECK(decodeBlob(encodeBlob(floats, BlobEncoding::kBytePlanes2), BlobEncoding::kBytePlanes2) == floats);
  CHECK(BlobId::fromHex(a.id.hex()) == a.id);
  CHECK_FALSE(BlobId::fromHex("xyz").has_value());
}

TEST_CASE("byte planes are FORMAT.md's transpose at every length, tails and slices on threads included") {
  // The definition, a byte at a time: element e's byte p goes to p * n + e.
  auto planes = [](const std::vector<uint8_t>& bytes, size_t k) {
    const size_t n = bytes.size() / k;
    std::vector<uint8_t> out(bytes);
    for (size_t e = 0; e < n; ++e) {
      for (size_t p = 0; p < k; ++p) out[p * n + e] = bytes[e * k + p];
    }
    return out;
  };
  for (size_t k : {2, 4}) {
    const BlobEncoding encoding = k == 4 ? BlobEncoding::kBytePlanes4 : BlobEncoding::kBytePlanes2;
    for (size_t size : {0, 1, 3, 5, 511, 1024, 1027, 2048, 4096 + 2, 65536 + 3, (6 << 20) + 1203}) {
      std::vector<uint8_t> bytes(size);
      for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(i * 131 % 251 + i / 251);
      INFO("k " << k << ", " << size << " bytes");
      const std::vector<uint8_t> encoded = encodeBlob(bytes, encoding);
      CHECK(encoded == planes(bytes, k));
      CHECK(decodeBlob(encoded, encoding) == bytes);
    }
  }
}

TEST_CASE("a large blob, compressed by several threads, reads back and is written the same every time") {
  TempDir tmp;
  // 6 MiB of float-like bytes: above the size from which putBlob compresses
  // in parallel, with a varying low byte so that it does not compress away.
  std::vector<uint8_t> bytes(6 << 20);
  uint64_t x = 88172645463325252ULL;
  for (size_t i = 0; i < bytes.size(); i += 4) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    bytes[i] = static_cast<uint8_t>(x);
    bytes[i + 1] = static_cast<uint8_t>(x >> 8 & 0x0f);
    bytes[i + 2] = 0x80;
    bytes[i + 3] = 0x3f;
  }
  BlobRef refs[2];
  for (int i = 0; i < 2; ++i) {
    TraceWriter w(tmp / (i == 0 ? "a.gpurr" : "b.gpurr"), sampleHeader());
    refs[i] = w.putBlob(bytes, BlobEncoding::kBytePlanes4);
  }
  REQUIRE(refs[0] == refs[1]);
  CHECK(TraceReader(tmp / "a.gpurr").readBlob(refs[0]) == bytes);
  const fs::path rel = fs::relative(container::blobPath(tmp / "a.gpurr", refs[0].id), tmp / "a.gpurr");
  CHECK(readFile(tmp / "a.gpurr" / rel) == readFile(tmp / "b.gpurr" / rel));
  CHECK(fs::file_size(tmp / "a.gpurr" / rel) < bytes.size() * 3 / 4);
}

TEST_CASE("writing the same events twice gives identical bytes") {
  TempDir tmp;
  for (const char* name : {"a.gpurr", "b.gpurr"}) {
    WriterOptions options;
    options.blockBytes = 700;
    TraceWriter w(tmp / name, sampleHeader(), options);
    for (const Event& e : everyKind(w)) w.append(e);
    for (uint64_t i = 100; i < 400; ++i) w.append(Event{i, i, 0, launchNumbered(i)});
    w.close();
  }
  size_t files = 0;
  for (auto& e : fs::recursive_directory_iterator(tmp / "a.gpurr")) {
    if (!e.is_regular_file()) continue;
    const fs::path rel = fs::relative(e.path(), tmp / "a.gpurr");
    INFO(rel.string());
    CHECK(readFile(e.path()) == readFile(tmp / "b.gpurr" / rel));
    ++files;
  }
  CHECK(files >= 5);
}

TEST_CASE("a launch's function found by the caller's identity of its name is the one its name gives") {
  // Three names, two modules, blocks of a few launches each (every block
  // declares its functions anew): a trace written with identities must be
  // byte for byte the one written without, and read back with every name.
  TempDir tmp;
  const std::string names[] = {"_Z6kernelPf", "_Z11elementwisePfS_i", "_Z6reducePKfPf"};
  auto launches = [&](TraceWriter& w, bool withIdentity) {
    for (uint64_t i = 0; i < 600; ++i) {
      KernelLaunch k;
      k.function = names[i % 3];
      k.module = static_cast<uint32_t>(1 + (i / 3) % 2);  // each name in both modules, in turn
      appendParam(k, &i, sizeof(i), 8);
      w.append(Event{i, i, 0, k}, withIdentity ? static_cast<const void*>(&names[i % 3]) : nullptr);
    }
  };
  for (const char* name : {"by_name.gpurr", "by_identity.gpurr"}) {
    WriterOptions options;
    options.blockBytes = 2048;  // about a dozen launches a block
    TraceWriter w(tmp / name, sampleHeader(), options);
    launches(w, std::string(name) == "by_identity.gpurr");
    w.close();
  }
  for (auto& e : fs::recursive_directory_iterator(tmp / "by_name.gpurr")) {
    if (!e.is_regular_file()) continue;
    const fs::path rel = fs::relative(e.path(), tmp / "by_name.gpurr");
    INFO(rel.string());
    CHECK(readFile(e.path()) == readFile(tmp / "by_identity.gpurr" / rel));
  }
  TraceReader r(tmp / "by_identity.gpurr");
  REQUIRE(r.blocks().size() > 10);
  uint64_t i = 0;
  r.forEach([&](const Event& e) {
    const auto& k = std::get<KernelLaunch>(e.payload);
    CHECK(k.function == names[i % 3]);
    CHECK(k.module == 1 + (i / 3) % 2);
    ++i;
    return true;
  });
  CHECK(i == 600);
}

TEST_CASE("the seek index jumps to any event") {
  TempDir tmp;
  const uint64_t n = 3000;
  TraceReader r(numberedTrace(tmp / "t.gpurr", n));
  REQUIRE(r.blocks().size() > 20);
  CHECK(r.eventCount() == n);
  for (uint64_t from : {uint64_t{0}, uint64_t{1}, uint64_t{777}, uint64_t{2 * n - 2}, uint64_t{5000}}) {
    std::vector<uint64_t> seen;
    r.forEach(
        [&](const Event& e) {
          seen.push_back(e.seq);
          return seen.size() < 5;
        },
        from);
    INFO("from " << from);
    REQUIRE_FALSE(seen.empty());
    const uint64_t first = (from + 1) / 2 * 2;  // the first even number >= from
    CHECK(seen.front() == first);
    for (size_t i = 1; i < seen.size(); ++i) CHECK(seen[i] == seen[i - 1] + 2);
  }
  size_t count = 0;
  r.forEach([&](const Event&) { return ++count, true; }, 2 * n);
  CHECK(count == 0);
  // The block that blockOf names really holds the event.
  for (uint64_t seq : {uint64_t{0}, uint64_t{1000}, uint64_t{2 * n - 2}}) {
    std::vector<Event> block;
    r.readBlock(r.blockOf(seq), block);
    CHECK(block.front().seq <= seq);
    CHECK(block.back().seq >= seq);
  }
}

TEST_CASE("one event looked up by its number in any order across blocks and again") {
  TempDir tmp;
  const uint64_t n = 3000;
  TraceReader r(numberedTrace(tmp / "t.gpurr", n));
  REQUIRE(r.blocks().size() > 20);
  const std::vector<Event> all = r.readAll();
  // Neighbours on either side of a block's end, a jump back, far ones, the
  // same one twice; the odd numbers are in no block.
  const uint64_t edge = r.blocks()[5].firstSeq;
  for (uint64_t seq : {edge, edge - 2, edge, edge - 2, uint64_t{0}, 2 * n - 2, edge + 2, uint64_t{0}}) {
    INFO("seq " << seq);
    const std::optional<Event> e = r.event(seq);
    REQUIRE(e.has_value());
    CHECK(*e == all[seq / 2]);
  }
  for (uint64_t seq : {uint64_t{1}, edge - 1, 2 * n - 1, 2 * n, uint64_t{1} << 40}) {
    INFO("seq " << seq);
    CHECK_FALSE(r.event(seq).has_value());
  }
  r.keepRecentBlocks(0);  // gives the blocks back: found again
  CHECK(r.event(edge) == all[edge / 2]);
}

TEST_CASE("sequence numbers must increase") {
  TempDir tmp;
  TraceWriter w(tmp / "t.gpurr", sampleHeader());
  w.append(Event{5, 0, 0, Sync{}});
  CHECK_THROWS_AS(w.append(Event{5, 0, 0, Sync{}}), TraceError);
}

TEST_CASE("the writer refuses to overwrite an existing trace") {
  TempDir tmp;
  { TraceWriter w(tmp / "t.gpurr", sampleHeader()); }
  CHECK_THROWS_WITH(TraceWriter(tmp / "t.gpurr", sampleHeader()),
                    Catch::Contains("already exists"));
}

TEST_CASE("the step after which the recorder stopped the program is kept in the index") {
  TempDir tmp;
  {
    TraceWriter w(tmp / "stopped.gpurr", sampleHeader());
    w.append(Event{1, 0, 0, Sync{}});
    w.setStoppedAfterStep(19);
    w.close();
    TraceWriter plain(tmp / "plain.gpurr", sampleHeader());
    plain.append(Event{1, 0, 0, Sync{}});
    plain.close();
  }
  CHECK(TraceReader(tmp / "stopped.gpurr").stoppedAfterStep() == 19);
  CHECK(TraceReader(tmp / "plain.gpurr").stoppedAfterStep() == -1);
  fs::remove(tmp / "stopped.gpurr" / "index");  // a recording that did not end cleanly has no index
  fs::remove(tmp / "stopped.gpurr" / "checksums");
  CHECK(TraceReader(tmp / "stopped.gpurr").stoppedAfterStep() == -1);
}

TEST_CASE("how the framework layer attributed the steps, and the recorder's memory, are kept in the index") {
  TempDir tmp;
  const LayerSteps steps{.observed = 3, .followed = 95, .unmatched = 2, .templates = 2, .switches = 19};
  const RecorderMemory memory{.hostBytes = 7, .queueBytes = 4, .snapshotBytes = 2, .writerBytes = 1,
                              .pinnedHostBytes = 8, .deviceBytes = 16, .eventsDropped = 5};
  {
    TraceWriter w(tmp / "told.gpurr", sampleHeader());
    w.append(Event{1, 0, 0, Sync{}});
    w.setLayerSteps(steps);
    w.setRecorderMemory(memory);
    w.close();
    TraceWriter plain(tmp / "plain.gpurr", sampleHeader());
    plain.append(Event{1, 0, 0, Sync{}});
    plain.close();
  }
  const TraceReader told(tmp / "told.gpurr");
  CHECK(told.layerSteps() == steps);
  CHECK(told.recorderMemory() == memory);
  const TraceReader plain(tmp / "plain.gpurr");
  CHECK_FALSE(plain.layerSteps());
  CHECK_FALSE(plain.recorderMemory());
}

TEST_CASE("a later scan reads the blocks an earlier one kept, and sees the same events, with decoding threads or not") {
  TempDir tmp;
  WriterOptions options;
  options.blockBytes = 1024;
  const uint64_t n = 3000;
  {
    TraceWriter w(tmp / "t.gpurr", sampleHeader(), options);
    for (uint64_t i = 0; i < n; ++i) w.append(Event{i, i, 0, launchNumbered(i)});
  }
  // What a scan sees of each event: its number, kernel, grid, parameters and digest.
  auto scan = [](const TraceReader& r, uint64_t from, unsigned decoders) {
    std::vector<std::string> seen;
    scanEvents(r, [&](const ScanEvent& e) {
      seen.push_back(fmt::format("{} {} {} {:02x} {:x}", e.seq, e.function, e.grid.x, fmt::join(e.params, ""),
                                 e.outputs.empty() ? 0 : e.outputs[0].digest));
      return true;
    }, from, decoders);
    return seen;
  };
  const TraceReader plain(tmp / "t.gpurr");
  const std::vector<std::string> all = scan(plain, 0, 0);
  REQUIRE(all.size() == n);
  const size_t blocks = plain.blocks().size();
  REQUIRE(blocks > 20);
  uint64_t lastFive = 0;
  for (size_t i = blocks - 5; i < blocks; ++i) lastFive += plain.blocks()[i].uncompressedSize;

  for (unsigned decoders : {0u, 2u}) {
    INFO("decoders " << decoders);
    const TraceReader r(tmp / "t.gpurr");
    r.keepRecentBlocks(lastFive);
    CHECK(scan(r, 0, decoders) == all);
    // The last five blocks are kept, no earlier one.
    for (size_t i = 0; i < blocks; ++i) CHECK((r.recentBlocks().find(i) != nullptr) == (i >= blocks - 5));
    // Read again, whole or from inside the kept blocks, with the other path.
    CHECK(scan(r, 0, 2 - decoders) == all);
    const uint64_t from = r.blocks()[blocks - 3].firstSeq + 1;
    CHECK(scan(r, from, decoders) == std::vector<std::string>(all.begin() + static_cast<ptrdiff_t>(from), all.end()));
    CHECK(r.recentBlocks().find(blocks - 1) != nullptr);
    r.keepRecentBlocks(0);
    CHECK(r.recentBlocks().find(blocks - 1) == nullptr);
    CHECK(scan(r, 0, decoders) == all);
  }
  // A budget below one block keeps nothing; by default nothing is kept.
  plain.keepRecentBlocks(1);
  CHECK(scan(plain, 0, 0) == all);
  for (size_t i = 0; i < blocks; ++i) CHECK(plain.recentBlocks().find(i) == nullptr);
}

TEST_CASE("an origin's text names the op the program called, and a library's file from its package") {
  Origin o{"aten::copy_", {"Optimizer.step#AdamW.step", "aten::mul_", "aten::to", "aten::_to_copy", "aten::copy_"},
           Phase::kForward, "", "", "/work/tiny_mlp.py", 14, 0, 43};
  CHECK(describe(o, OriginStep::kOperation) ==
        "aten::copy_ inside aten::mul_ (optimizer step AdamW.step), tiny_mlp.py:14, step 0 (after 43 launches of the "
        "step)");
  o = Origin{"aten::random_", {"aten::random_"}, Phase::kForward, "", "",
             "/venv/lib/python3.12/site-packages/lightning/pytorch/utilities/combined_loader.py", 43, 0, 0};
  CHECK(describe(o, OriginStep::kNone) ==
        "aten::random_ (forward), lightning/pytorch/utilities/combined_loader.py:43");
  // In backward, the forward op names what the program called.
  o = Origin{"aten::mm", {"MmBackward0", "aten::mm"}, Phase::kBackward, "aten::linear", "Net.fc", "train.py", 9, 2, 5};
  CHECK(describe(o) == "aten::mm (backward of aten::linear) in Net.fc, train.py:9, step 2 (launch 6 of the step)");
  CHECK(sourceLine(Origin{}).empty());
}
