// RecordSession (session_harness.h) with --snapshot and --check-determinism:
// byte-exact copies of a launch's ranges, and re-runs from the same state.
#include "tests/recorder/session_harness.h"

using namespace gpurr;
using namespace gpurr::recorder;
using namespace gpurr::recorder::session_testing;

namespace {

size_t blobFiles(const std::filesystem::path& trace) {
  size_t n = 0;
  if (!std::filesystem::exists(trace / "blobs")) return 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(trace / "blobs"))
    if (e.is_regular_file()) ++n;
  return n;
}

const trace::RangeDigest& inAllocation(const std::vector<trace::RangeDigest>& list, uint32_t ordinal) {
  for (const auto& r : list)
    if (r.range.allocation == ordinal) return r;
  FAIL("no range in allocation " << ordinal);
  return list.front();
}

}  // namespace

TEST_CASE("snapshots: inputs before and outputs after a selected launch are byte-exact, other launches get none",
          "[recorder][session][snapshot]") {
  // Hashing is limited to launch 5: the snapshot selection hashes its own.
  Harness h({{"GPURR_SNAPSHOT", "0,^scale\\("}, {"GPURR_LAUNCHES", "5:6"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  constexpr uint64_t kScale = 0xF01;
  h.device->functions[kScale] = {"_Z5scalePfi", 0, {{0, 8}, {8, 4}}, true};
  std::vector<uint8_t> x = randomBytes(3000, 10), y = randomBytes(5000, 11);
  std::vector<float> z(2048);
  for (size_t i = 0; i < z.size(); ++i) z[i] = 0.5f * static_cast<float>(i);
  std::vector<uint8_t> zb(z.size() * 4);
  std::memcpy(zb.data(), z.data(), zb.size());
  h.memAlloc(x);
  h.memAlloc(y);
  h.memAlloc(zb);
  uint64_t px = addr(x.data()), py = addr(y.data()), pz = addr(zb.data());
  float a = 2.0f;
  int n = 10;
  void* args[] = {&px, &py, &a, &n};
  const std::vector<uint8_t> xBefore = x, yBefore = y;
  h.launch(kAxpy, args, 0x5, CUDA_SUCCESS, [&] { y[100] ^= 0x5a; });  // launch 0: selected by number
  const std::vector<uint8_t> yAfter0 = y;
  h.launch(kAxpy, args, 0x5, CUDA_SUCCESS, [&] { y[101] ^= 0x5a; });  // launch 1: not selected
  void* scaleArgs[] = {&pz, &n};
  const std::vector<uint8_t> zBefore = zb;
  h.launch(kScale, scaleArgs, 0x5, CUDA_SUCCESS, [&] { zb[4] ^= 1; });  // launch 2: selected by name
  const std::vector<uint8_t> zAfter = zb;
  h.launch(kAxpy, args, 0x5);  // launch 3: not selected

  trace::Header header;
  const auto events = h.finishAndRead(&header);
  CHECK(header.options.snapshot == "0,^scale\\(");
  trace::TraceReader reader(h.traceDir);
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(launches.size() == 4);

  const trace::KernelLaunch& k0 = launches[0];
  CHECK(k0.hashed);
  REQUIRE(k0.inputs.size() == 2);
  REQUIRE(k0.outputs.size() == 2);
  for (const auto* list : {&k0.inputs, &k0.outputs})
    for (const trace::RangeDigest& r : *list) REQUIRE(r.snapshot);
  CHECK(reader.readBlob(*inAllocation(k0.inputs, 1).snapshot) == xBefore);
  CHECK(reader.readBlob(*inAllocation(k0.inputs, 2).snapshot) == yBefore);
  CHECK(reader.readBlob(*inAllocation(k0.outputs, 1).snapshot) == xBefore);
  CHECK(reader.readBlob(*inAllocation(k0.outputs, 2).snapshot) == yAfter0);
  // The digests describe the same bytes as the snapshots.
  CHECK(inAllocation(k0.outputs, 2).digest == hash::hashBuffer(yAfter0));
  // Deduplicated: x unchanged by the launch is one blob.
  CHECK(inAllocation(k0.inputs, 1).snapshot == inAllocation(k0.outputs, 1).snapshot);

  CHECK_FALSE(launches[1].hashed);
  CHECK(launches[1].inputs.empty());
  CHECK(launches[3].inputs.empty());

  const trace::KernelLaunch& k2 = launches[2];
  CHECK(k2.hashed);
  REQUIRE(k2.inputs.size() == 1);
  REQUIRE(k2.outputs.size() == 1);
  REQUIRE(k2.inputs[0].snapshot);
  REQUIRE(k2.outputs[0].snapshot);
  CHECK(reader.readBlob(*k2.inputs[0].snapshot) == zBefore);
  CHECK(reader.readBlob(*k2.outputs[0].snapshot) == zAfter);
  // Float data is stored in byte planes.
  CHECK(k2.inputs[0].snapshot->encoding != trace::BlobEncoding::kRaw);

  // x, y before, y after, z before, z after.
  CHECK(blobFiles(h.traceDir) == 5);
  CHECK(h.device->copies == 6);
  CHECK(h.session->snapshotBudget().inUse() == 0);
  CHECK(h.warnings.empty());
}

TEST_CASE("snapshots: identical bytes are stored once across launches", "[recorder][session][snapshot]") {
  Harness h(std::map<std::string, std::string>{{"GPURR_SNAPSHOT", ":"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x = randomBytes(10000, 12), y(10000, 0);
  h.memAlloc(x);
  h.memAlloc(y);
  uint64_t px = addr(x.data()), py = addr(y.data());
  float a = 1.0f;
  int n = 1;
  void* args[] = {&px, &py, &a, &n};
  for (int i = 0; i < 3; ++i) h.launch(kAxpy, args, 0x1);  // writes nothing
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 3);
  for (const auto& k : launches) {
    REQUIRE(k.inputs.size() == 2);
    CHECK(k.inputs[0].snapshot == launches[0].inputs[0].snapshot);
    CHECK(k.outputs[1].snapshot == launches[0].inputs[1].snapshot);
  }
  CHECK(blobFiles(h.traceDir) == 2);
}

TEST_CASE("snapshots: the program waits for the writer at the memory bound and nothing is dropped",
          "[recorder][session][snapshot]") {
  Harness h({{"GPURR_SNAPSHOT", ":"}, {"GPURR_SNAPSHOT_MEMORY_MB", "1"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  h.device->copiesReleased = false;  // the GPU has not finished any copy yet
  std::vector<uint8_t> x = randomBytes(400 * 1024, 13), y = randomBytes(400 * 1024, 14);
  h.memAlloc(x);
  h.memAlloc(y);
  uint64_t px = addr(x.data()), py = addr(y.data());
  float a = 1.0f;
  int n = 1;
  void* args[] = {&px, &py, &a, &n};
  // One launch alone may take what it needs: nothing queued could make room.
  h.launch(kAxpy, args, 0x1, CUDA_SUCCESS, [&] { y[0] ^= 1; });
  CHECK(h.device->liveCopyBytes == 4 * 400 * 1024);

  std::atomic<bool> done{false};
  std::thread second([&] {
    h.launch(kAxpy, args, 0x1, CUDA_SUCCESS, [&] { y[1] ^= 1; });
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(done.load());  // waiting for the writer, not copying past the bound
  CHECK(h.device->liveCopyBytes == 4 * 400 * 1024);
  CHECK(h.session->snapshotBudget().waits() == 1);
  h.device->releaseCopies();
  second.join();
  CHECK(done.load());

  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  trace::TraceReader reader(h.traceDir);
  for (const auto& k : launches) {
    REQUIRE(k.outputs.size() == 2);
    for (const auto& r : k.outputs) REQUIRE(r.snapshot);
  }
  CHECK(reader.readBlob(*inAllocation(launches[1].outputs, 2).snapshot) == y);
  CHECK(h.device->peakLiveCopyBytes <= 4 * 400 * 1024);
  CHECK(h.device->liveCopyBytes == 0);
  CHECK(h.session->snapshotBudget().inUse() == 0);
}

TEST_CASE("determinism check: re-runs from the same state count distinct results and leave the program unaffected",
          "[recorder][session][determinism]") {
  Harness h({{"GPURR_LAUNCHES", "0:1"}, {"GPURR_CHECK_DETERMINISM", "6"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x = randomBytes(4096, 15), y = randomBytes(4096, 16);
  h.memAlloc(x);
  h.memAlloc(y);
  uint64_t px = addr(x.data()), py = addr(y.data());
  float a = 3.0f;
  int n = 7;
  void* args[] = {&px, &py, &a, &n};
  // An atomics-like kernel: three different results over the re-runs.
  uint32_t seen = 0;
  h.device->rerunKernel = [&](uint32_t run) {
    y[0] = static_cast<uint8_t>(run % 3);
    ++seen;
  };
  const std::vector<uint8_t> yBefore = y;
  h.launch(kAxpy, args, 0x7, CUDA_SUCCESS, [&] { y[0] = 0xEE; });
  h.launch(kAxpy, args, 0x7, CUDA_SUCCESS);  // not selected: not re-run

  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  CHECK(seen == 6);
  REQUIRE(h.device->reruns.size() == 1);
  const Relaunch& r = h.device->reruns[0];
  CHECK(r.function == kAxpy);
  CHECK(r.grid == trace::Dim3{4, 1, 1});
  CHECK(r.block == trace::Dim3{128, 1, 1});
  CHECK(r.sharedMemBytes == 256);
  CHECK(r.stream == 0x7);
  CHECK(r.kernelParams == args);
  CHECK_FALSE(r.cooperative);

  std::vector<trace::DeterminismCheck> checks;
  for (const auto& an : launches[0].annotations)
    if (auto* d = std::get_if<trace::DeterminismCheck>(&an)) checks.push_back(*d);
  REQUIRE(checks.size() == 1);
  CHECK(checks[0] == trace::DeterminismCheck{6, 3});
  for (const auto& an : launches[1].annotations) CHECK_FALSE(std::holds_alternative<trace::DeterminismCheck>(an));
  // The program's launch started from the state it would have had unrecorded.
  CHECK(inAllocation(launches[0].inputs, 2).digest == hash::hashBuffer(yBefore));
  CHECK(y[0] == 0xEE);
  CHECK(h.warnings.empty());
}

TEST_CASE("determinism check: a deterministic kernel gives one result", "[recorder][session][determinism]") {
  Harness h({{"GPURR_KERNELS", "axpy"}, {"GPURR_CHECK_DETERMINISM", "3"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> y = randomBytes(4096, 17);
  h.memAlloc(y);
  uint64_t py = addr(y.data());
  float a = 3.0f;
  int n = 7;
  void* args[] = {&py, &py, &a, &n};
  h.device->rerunKernel = [&](uint32_t) { y[5] = 42; };
  h.launch(kAxpy, args, 0x7);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 1);
  bool found = false;
  for (const auto& an : launches[0].annotations)
    if (auto* d = std::get_if<trace::DeterminismCheck>(&an)) {
      found = true;
      CHECK(*d == trace::DeterminismCheck{3, 1});
    }
  CHECK(found);
}

TEST_CASE("determinism check: skipped for a launch whose re-runs the checkpoint cannot undo",
          "[recorder][session][determinism]") {
  // Host memory (the checkpoint restores the device's), or a collective's
  // kernel, which would wait for other processes that never run it again.
  Harness h({{"GPURR_KERNELS", "axpy|nccl"}, {"GPURR_CHECK_DETERMINISM", "3"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  h.device->functions[kRead4] = read4Info();
  h.device->functions[kRead4].name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  std::vector<uint8_t> y = randomBytes(4096, 19), pinned = randomBytes(4096, 20);
  h.memAlloc(y);
  {
    void* p = pinned.data();
    cuMemHostAlloc_params params{&p, pinned.size(), CU_MEMHOSTALLOC_DEVICEMAP};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, &params);
  }
  uint64_t py = addr(y.data()), ph = addr(pinned.data()), none = 0;
  float a = 3.0f;
  int n = 7;
  void* hostArgs[] = {&ph, &py, &a, &n};
  void* deviceArgs[] = {&py, &py, &a, &n};
  void* ncclArgs[] = {&py, &none, &none, &none};
  h.launch(kAxpy, hostArgs, 0x7);
  h.launch(kRead4, ncclArgs, 0x7);
  h.launch(kAxpy, deviceArgs, 0x7);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 3);
  CHECK(h.device->reruns.size() == 1);  // the last one only
  auto note = [](const trace::KernelLaunch& k) {
    std::string all;
    for (const auto& an : k.annotations)
      if (const auto* n = std::get_if<trace::Note>(&an)) all += n->text + "\n";
    return all;
  };
  CHECK_THAT(note(launches[0]), Catch::Contains("determinism check skipped: it points into allocation 2 (host memory)"));
  CHECK_THAT(note(launches[1]), Catch::Contains("determinism check skipped: a collective's kernel"));
  CHECK(std::holds_alternative<trace::DeterminismCheck>(launches[2].annotations.back()));
}

TEST_CASE("determinism check: skipped while a graph is being captured, since it synchronises the context",
          "[recorder][session][determinism]") {
  Harness h(std::map<std::string, std::string>{{"GPURR_KERNELS", "axpy"}, {"GPURR_CHECK_DETERMINISM", "3"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> y = randomBytes(4096, 18);
  h.memAlloc(y);
  uint64_t py = addr(y.data());
  float a = 3.0f;
  int n = 7;
  void* args[] = {&py, &py, &a, &n};
  CUstream captureStream = reinterpret_cast<CUstream>(0x9);
  cuStreamBeginCapture_v2_params begin{captureStream, CU_STREAM_CAPTURE_MODE_GLOBAL};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &begin);
  h.launch(kAxpy, args, 0x7);  // on another stream, while the capture is open
  CUgraph graph = nullptr;
  cuStreamEndCapture_params end{captureStream, &graph};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, &end, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  h.launch(kAxpy, args, 0x7);  // the capture is over (invalidated, but over)
  // Another capture, whose end fails otherwise (work not joined back): the
  // stream captures no more all the same.
  h.device->capturing.insert(0x9);
  h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &begin);
  h.device->capturing.erase(0x9);
  h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, &end, CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
  h.launch(kAxpy, args, 0x7);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 3);
  CHECK(h.device->reruns.size() == 2);
  auto has = [](const trace::KernelLaunch& k, auto pred) {
    return std::any_of(k.annotations.begin(), k.annotations.end(), pred);
  };
  CHECK(has(launches[0], [](const trace::Annotation& an) {
    const auto* note = std::get_if<trace::Note>(&an);
    return note != nullptr && note->text.find("graph was being captured") != std::string::npos;
  }));
  CHECK(has(launches[1], [](const trace::Annotation& an) { return std::holds_alternative<trace::DeterminismCheck>(an); }));
}

TEST_CASE("determinism check: without --launches or --kernels it follows the snapshot selection",
          "[recorder][session][determinism]") {
  Harness h({{"GPURR_SNAPSHOT", "1"}, {"GPURR_CHECK_DETERMINISM", "4"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> y = randomBytes(4096, 18);
  h.memAlloc(y);
  uint64_t py = addr(y.data());
  float a = 2.0f;
  int n = 3;
  void* args[] = {&py, &py, &a, &n};
  h.device->rerunKernel = [&](uint32_t run) { y[9] = static_cast<uint8_t>(run); };
  for (int i = 0; i < 3; ++i) h.launch(kAxpy, args, 0x7);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 3);
  REQUIRE(h.device->reruns.size() == 1);
  for (size_t i = 0; i < launches.size(); ++i) {
    std::optional<trace::DeterminismCheck> check;
    for (const auto& an : launches[i].annotations)
      if (auto* d = std::get_if<trace::DeterminismCheck>(&an)) check = *d;
    INFO("launch " << i);
    if (i == 1) {
      REQUIRE(check);
      CHECK(*check == trace::DeterminismCheck{4, 4});
    } else {
      CHECK_FALSE(check);
    }
  }
}

TEST_CASE("determinism check: a checkpoint that cannot be saved warns once and recording goes on",
          "[recorder][session][determinism]") {
  Harness h({{"GPURR_LAUNCHES", "0:2"}, {"GPURR_CHECK_DETERMINISM", "10"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  h.device->failCheckpoint = true;
  std::vector<uint8_t> y = randomBytes(4096, 18);
  h.memAlloc(y);
  uint64_t py = addr(y.data());
  float a = 3.0f;
  int n = 7;
  void* args[] = {&py, &py, &a, &n};
  h.launch(kAxpy, args, 0x7, CUDA_SUCCESS, [&] { y[0] ^= 1; });
  h.launch(kAxpy, args, 0x7, CUDA_SUCCESS, [&] { y[0] ^= 2; });
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  for (const auto& k : launches) {
    CHECK(k.hashed);
    REQUIRE(k.outputs.size() == 1);
    for (const auto& an : k.annotations) CHECK_FALSE(std::holds_alternative<trace::DeterminismCheck>(an));
  }
  CHECK(launches[1].outputs[0].digest == hash::hashBuffer(y));
  REQUIRE(h.warnings.size() == 1);
  CHECK_THAT(h.warnings[0], Catch::Contains("cannot re-run launches to check their determinism"));
  CHECK_THAT(h.warnings[0], Catch::Contains("CUPTI_ERROR_NOT_SUPPORTED"));
}
