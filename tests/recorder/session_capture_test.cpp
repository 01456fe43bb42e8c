// RecordSession (session_harness.h) around CUDA graphs: nothing enqueued on a
// stream being captured, graph launches hashed by their nodes, and the
// tracking of open captures.
#include "tests/recorder/session_harness.h"

using namespace gpurr;
using namespace gpurr::recorder;
using namespace gpurr::recorder::session_testing;

TEST_CASE("while a capture is open, one capture query per copy answers both \"captured?\" and \"may we enqueue?\"",
          "[recorder][session][capture]") {
  Harness h;
  std::vector<uint8_t> dev = randomBytes(4096, 5), out(512);
  h.memAlloc(dev);
  h.beginCapture(0x77);
  const int before = h.device->captureQueries;
  cuMemcpyDtoHAsync_v2_params p{out.data(), addr(dev.data()), out.size(), reinterpret_cast<CUstream>(0x9)};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2, &p, CUDA_SUCCESS, nullptr,
         [&] { std::memcpy(out.data(), dev.data(), out.size()); });
  CHECK(h.device->captureQueries - before == 1);
  h.endCapture(0x77);
  h.finishAndRead();
}

TEST_CASE("nothing is enqueued on a stream being captured", "[recorder][session]") {
  Harness h;
  h.device->functions[kAxpy] = axpyInfo(0);
  h.beginCapture(0x77);
  std::vector<uint8_t> x = randomBytes(1000, 6);
  h.memAlloc(x);
  uint64_t px = addr(x.data());
  float a = 1;
  int n = 1;
  void* args[] = {&px, &px, &a, &n};
  h.launch(kAxpy, args, 0x77);
  {
    cuMemsetD8Async_params p{px, 0, 10, reinterpret_cast<CUstream>(0x77)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, &p);
  }
  h.launch(kAxpy, args, 0x5);  // an ordinary launch: the first to run
  const auto events = h.finishAndRead();
  CHECK(h.calls.size() == 2);  // before and after the ordinary launch only
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(launches.size() == 2);
  // Captured into the graph, not run: marked so, with its capture, its
  // pointers resolved, nothing hashed.
  CHECK(launches[0].captured);
  CHECK(launches[0].captureId == 40 + 0x77);
  CHECK_FALSE(launches[0].hashed);
  CHECK(launches[0].pointers.size() == 2);
  CHECK(launches[0].inputs.empty());
  CHECK_FALSE(launches[1].captured);
  CHECK(launches[1].hashed);
  CHECK(eventsOf<trace::Memset>(events).at(0).digest == 0);
}

TEST_CASE("captured launches take no launch number: --launches counts the launches that run",
          "[recorder][session]") {
  Harness h(std::map<std::string, std::string>{{"GPURR_LAUNCHES", "0:1"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  h.beginCapture(0x77);
  std::vector<uint8_t> x = randomBytes(1000, 6);
  h.memAlloc(x);
  uint64_t px = addr(x.data());
  float a = 1;
  int n = 1;
  void* args[] = {&px, &px, &a, &n};
  h.launch(kAxpy, args, 0x77);
  h.launch(kAxpy, args, 0x5);  // launch 0: selected
  h.launch(kAxpy, args, 0x5);  // launch 1: not
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 3);
  CHECK(launches[0].captured);
  CHECK(launches[1].hashed);
  CHECK_FALSE(launches[2].hashed);
}

TEST_CASE("copies, sets and graph launches on a stream being captured are marked captured: nothing hashed, kept or "
          "forgotten",
          "[recorder][session][capture]") {
  Harness h(std::map<std::string, std::string>{{"GPURR_CAPTURE_HOST_DATA", "1"}});
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x = randomBytes(8192, 93), y = randomBytes(8192, 94), host = randomBytes(64, 95);
  h.memAlloc(x);
  h.memAlloc(y);
  uint64_t px = addr(x.data()), py = addr(y.data());
  float a = 1.0f;
  int n = 16;
  void* args[] = {&px, &py, &a, &n};
  h.launch(kAxpy, args, 0x5);  // first uses: both hashed before, then touched on stream 5
  const size_t enqueued = h.calls.size();
  h.beginCapture(0x77);
  {
    cuMemcpyHtoDAsync_v2_params p{px, host.data(), host.size(), reinterpret_cast<CUstream>(0x77)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, &p);
  }
  {
    cuMemcpyDtoDAsync_v2_params p{py + 100, px, 50, reinterpret_cast<CUstream>(0x77)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2, &p);
  }
  {
    cuMemsetD8Async_params p{py, 1, 10, reinterpret_cast<CUstream>(0x77)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, &p);
  }
  {
    cuGraphLaunch_params g{reinterpret_cast<CUgraphExec>(0x6), reinterpret_cast<CUstream>(0x77)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &g);
  }
  CHECK(h.calls.size() == enqueued);  // nothing enqueued on the capturing stream
  h.endCapture(0x77);
  h.launch(kAxpy, args, 0x5);  // the captured work has not run: x and y are as launch 0 left them
  const auto events = h.finishAndRead();
  const auto copies = eventsOf<trace::Memcpy>(events);
  const auto sets = eventsOf<trace::Memset>(events);
  const auto graphs = eventsOf<trace::GraphLaunch>(events);
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(copies.size() == 2);
  REQUIRE(sets.size() == 1);
  REQUIRE(graphs.size() == 1);
  REQUIRE(launches.size() == 2);
  for (const auto& c : copies) {
    CHECK(c.captured);
    CHECK(c.captureId == 40 + 0x77);
    CHECK(c.digest == 0);
    CHECK_FALSE(c.data);  // the host bytes are read when the graph runs, not now
  }
  CHECK(copies[0].kind == trace::MemcpyKind::kHostToDevice);
  CHECK(copies[1].dst == trace::DeviceRange{py + 100, 50, 2, 100});
  CHECK(sets[0].captured);
  CHECK(sets[0].captureId == 40 + 0x77);
  CHECK(sets[0].digest == 0);
  CHECK(graphs[0].captured);
  CHECK(graphs[0].inputs.empty());
  CHECK(graphs[0].outputs.empty());
  for (const auto& e : events) {
    if (std::holds_alternative<trace::Memcpy>(e.payload) || std::holds_alternative<trace::Memset>(e.payload) ||
        std::holds_alternative<trace::GraphLaunch>(e.payload)) {
      CHECK_FALSE(trace::ranWhenRecorded(e.payload));
    }
  }
  CHECK(launches[0].inputs.size() == 2);
  CHECK(launches[1].inputs.empty());  // still last written, with a digest, by launch 0
}

namespace {
void instantiate(Harness& h, uint64_t graph, uint64_t exec) {
  CUgraphExec out = reinterpret_cast<CUgraphExec>(exec);
  cuGraphInstantiateWithFlags_params p{&out, reinterpret_cast<CUgraph>(graph), 0};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &p);
}
void launchGraph(Harness& h, uint64_t exec) {
  cuGraphLaunch_params p{reinterpret_cast<CUgraphExec>(exec), reinterpret_cast<CUstream>(0x5)};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &p);
}
std::vector<uint32_t> ordinals(const std::vector<trace::RangeDigest>& ranges) {
  std::vector<uint32_t> out;
  for (const auto& r : ranges) out.push_back(r.range.allocation);
  std::sort(out.begin(), out.end());  // ranges come in address order
  return out;
}
}  // namespace

TEST_CASE("a graph launch hashes what its nodes point into, once the graph's nodes are known",
          "[recorder][session][graph]") {
  Harness h;
  h.device->functions[kRead4] = read4Info();
  std::vector<uint8_t> a = randomBytes(4096, 61), b = randomBytes(4096, 62), c = randomBytes(4096, 63),
                       d = randomBytes(4096, 64);
  for (auto* buffer : {&a, &b, &c, &d}) h.memAlloc(*buffer);
  // Graph 0x60: a kernel taking pointers into a (past its start) and b, and
  // a number; a set of d; an event node, counted, touching nothing.
  uint64_t pa = addr(a.data()) + 256, pb = addr(b.data()), number = 7, nothing = 0;
  void* args[] = {&pa, &pb, &number, &nothing};
  Device::GraphNodes nodes;
  nodes.count = 3;
  nodes.kernels.push_back({kRead4, args, nullptr});
  nodes.addresses.push_back(addr(d.data()));
  h.device->graphs[0x60] = nodes;
  instantiate(h, 0x60, 0xE1);
  instantiate(h, 0x61, 0xE2);  // a graph the recorder cannot follow
  launchGraph(h, 0xE1);
  launchGraph(h, 0xE2);
  {
    // A node of 0xE1 changed: from now on it may touch anything.
    cuGraphExecKernelNodeSetParams_v2_params p{reinterpret_cast<CUgraphExec>(0xE1), nullptr, nullptr};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2, &p);
  }
  launchGraph(h, 0xE1);
  {
    // Updated from 0x60 again: known again.
    cuGraphExecUpdate_v2_params p{reinterpret_cast<CUgraphExec>(0xE1), reinterpret_cast<CUgraph>(0x60), nullptr};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2, &p);
  }
  launchGraph(h, 0xE1);
  {
    cuGraphExecDestroy_params p{reinterpret_cast<CUgraphExec>(0xE1)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy, &p);
  }
  launchGraph(h, 0xE1);  // destroyed: the handle may name a graph instantiated unseen

  const auto events = h.finishAndRead();
  const auto graphs = eventsOf<trace::GraphLaunch>(events);
  REQUIRE(graphs.size() == 5);
  // Known: from each pointer to its allocation's end, as a launch's pointers.
  CHECK(graphs[0].nodeCount == 3);
  CHECK(ordinals(graphs[0].outputs) == std::vector<uint32_t>{1, 2, 4});
  const auto inA = std::find_if(graphs[0].outputs.begin(), graphs[0].outputs.end(),
                                [](const trace::RangeDigest& r) { return r.range.allocation == 1; });
  REQUIRE(inA != graphs[0].outputs.end());
  CHECK(inA->range == trace::DeviceRange{pa, 4096 - 256, 1, 256});
  CHECK(ordinals(graphs[0].inputs) == std::vector<uint32_t>{1, 2, 4});  // first uses
  // Unknown, changed, destroyed: every allocation, node count 0.
  for (size_t i : {1, 2, 4}) {
    CHECK(graphs[i].nodeCount == 0);
    CHECK(ordinals(graphs[i].outputs) == std::vector<uint32_t>{1, 2, 3, 4});
  }
  CHECK(graphs[3].nodeCount == 3);
  CHECK(ordinals(graphs[3].outputs) == std::vector<uint32_t>{1, 2, 4});
  std::lock_guard lock(h.warningsMu);
  REQUIRE(h.warnings.size() == 1);
  CHECK_THAT(h.warnings[0], Catch::Contains("a CUDA graph's nodes cannot all be followed (it holds a conditional "
                                            "node): its launches hash every allocation"));
}

TEST_CASE("a graph launch whose nodes touch nothing of the program's hashes nothing and keeps the history",
          "[recorder][session][graph]") {
  Harness h;
  h.device->functions[kAxpy] = axpyInfo(0);
  std::vector<uint8_t> x = randomBytes(8192, 65), y = randomBytes(8192, 66);
  h.memAlloc(x);
  h.memAlloc(y);
  uint64_t px = addr(x.data()), py = addr(y.data());
  float alpha = 1.0f;
  int n = 16;
  void* args[] = {&px, &py, &alpha, &n};
  h.launch(kAxpy, args, 0x5);  // first uses: hashed before
  Device::GraphNodes empty;
  empty.count = 2;  // say, a host node and an event record
  h.device->graphs[0x70] = empty;
  instantiate(h, 0x70, 0xE3);
  const size_t enqueued = h.calls.size();
  launchGraph(h, 0xE3);
  CHECK(h.calls.size() == enqueued);
  h.launch(kAxpy, args, 0x5);
  const auto events = h.finishAndRead();
  const auto graphs = eventsOf<trace::GraphLaunch>(events);
  REQUIRE(graphs.size() == 1);
  CHECK(graphs[0].nodeCount == 2);
  CHECK(graphs[0].outputs.empty());
  const auto launches = eventsOf<trace::KernelLaunch>(events);
  REQUIRE(launches.size() == 2);
  CHECK(launches[1].inputs.empty());  // still vouched for by launch 0's digests
}

// Captures are tracked by the recorder's own callbacks of the calls that
// begin and end them (CaptureTracker): while none is open, a launch asks the
// driver nothing about captures; while one may be, every launch asks as
// before, on every stream (a stream joins a capture by waiting on an event
// of a captured one).
namespace {
struct CaptureCase {
  Harness h;
  std::vector<uint8_t> x = randomBytes(1000, 61);
  uint64_t px = 0;
  float a = 1;
  int n = 1;
  void* args[4] = {&px, &px, &a, &n};
  CaptureCase() {
    h.device->functions[kAxpy] = axpyInfo(0);
    h.memAlloc(x);
    px = addr(x.data());
  }
  // The capture queries one launch on `stream` makes.
  int queriesOfLaunch(uint64_t stream) {
    const int before = h.device->captureQueries;
    h.launch(kAxpy, args, stream);
    return h.device->captureQueries - before;
  }
  size_t open() { return h.device->captures().openCount(); }
};

void runtimeBegin(Harness& h, uint64_t stream, cudaError_t result = cudaSuccess,
                  const std::function<void()>& inside = {}) {
  cudaStreamBeginCapture_v10000_params p{reinterpret_cast<cudaStream_t>(stream), cudaStreamCaptureModeGlobal};
  h.runtimeCall(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, &p, result, inside);
}
void runtimeEnd(Harness& h, uint64_t stream, const std::function<void()>& inside = {}) {
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture_v10000_params p{reinterpret_cast<cudaStream_t>(stream), &graph};
  h.runtimeCall(CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, &p, cudaSuccess, inside);
}
}  // namespace

TEST_CASE("capture tracking: no capture open, no capture query", "[recorder][session][capture]") {
  CaptureCase c;
  CHECK(c.queriesOfLaunch(0x5) == 0);
  CHECK(c.queriesOfLaunch(0) == 0);
  const auto launches = eventsOf<trace::KernelLaunch>(c.h.finishAndRead());
  REQUIRE(launches.size() == 2);
  CHECK(launches[1].hashed);
  CHECK_FALSE(launches[1].captured);
}

TEST_CASE("capture tracking: a capture begun and ended through the runtime API only",
          "[recorder][session][capture]") {
  CaptureCase c;
  runtimeBegin(c.h, 0x77, cudaSuccess, [&] { c.h.device->capturing.insert(0x77); });
  CHECK(c.open() == 1);
  CHECK(c.queriesOfLaunch(0x5) == 2);  // ENTER and EXIT, as before
  CHECK(c.queriesOfLaunch(0x77) == 1);  // captured: nothing to hash at EXIT
  runtimeEnd(c.h, 0x77, [&] { c.h.device->capturing.erase(0x77); });
  CHECK(c.open() == 0);
  CHECK(c.queriesOfLaunch(0x5) == 0);
  const auto launches = eventsOf<trace::KernelLaunch>(c.h.finishAndRead());
  REQUIRE(launches.size() == 3);
  CHECK_FALSE(launches[0].captured);
  CHECK(launches[1].captured);
  CHECK(launches[1].captureId == 40 + 0x77);
  CHECK_FALSE(launches[2].captured);
}

TEST_CASE("capture tracking: a capture begun and ended through the driver API only",
          "[recorder][session][capture]") {
  CaptureCase c;
  c.h.beginCapture(0x77);
  CHECK(c.open() == 1);
  CHECK(c.queriesOfLaunch(0x5) == 2);
  CHECK(c.queriesOfLaunch(0x77) == 1);
  c.h.endCapture(0x77);
  CHECK(c.open() == 0);
  CHECK(c.queriesOfLaunch(0x5) == 0);
  const auto launches = eventsOf<trace::KernelLaunch>(c.h.finishAndRead());
  REQUIRE(launches.size() == 3);
  CHECK(launches[1].captured);
}

TEST_CASE("capture tracking: a runtime begin and end that reach the driver's callbacks too count once",
          "[recorder][session][capture]") {
  CaptureCase c;
  runtimeBegin(c.h, 0x77, cudaSuccess, [&] { c.h.beginCapture(0x77); });
  CHECK(c.open() == 1);
  CHECK(c.queriesOfLaunch(0x5) == 2);
  runtimeEnd(c.h, 0x77, [&] { c.h.endCapture(0x77); });
  CHECK(c.open() == 0);
  CHECK(c.queriesOfLaunch(0x5) == 0);
  // A driver begin seen without its runtime call, ended through the runtime.
  c.h.beginCapture(0x78);
  runtimeEnd(c.h, 0x78, [&] { c.h.device->capturing.erase(0x78); });
  CHECK(c.open() == 0);
  c.h.finishAndRead();
}

TEST_CASE("capture tracking: concurrent captures on two streams, ended in either order",
          "[recorder][session][capture]") {
  CaptureCase c;
  c.h.beginCapture(0x77);
  runtimeBegin(c.h, 0x88, cudaSuccess, [&] { c.h.device->capturing.insert(0x88); });
  CHECK(c.open() == 2);
  c.h.endCapture(0x77);
  CHECK(c.open() == 1);
  CHECK(c.queriesOfLaunch(0x5) == 2);  // 0x88 still captures
  CHECK(c.queriesOfLaunch(0x88) == 1);
  runtimeEnd(c.h, 0x88, [&] { c.h.device->capturing.erase(0x88); });
  CHECK(c.open() == 0);
  CHECK(c.queriesOfLaunch(0x5) == 0);
  // The per-thread default stream of two threads: two captures.
  {
    cuStreamBeginCapture_v2_params p{nullptr, CU_STREAM_CAPTURE_MODE_RELAXED};
    c.h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz, &p);
    std::thread other([&] { c.h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz, &p); });
    other.join();
    CHECK(c.open() == 2);
  }
  const auto launches = eventsOf<trace::KernelLaunch>(c.h.finishAndRead());
  REQUIRE(launches.size() == 3);
  CHECK(launches[1].captured);
  CHECK_FALSE(launches[2].captured);
}

TEST_CASE("capture tracking: a begin that fails leaves no capture open, unless its stream captures already",
          "[recorder][session][capture]") {
  CaptureCase c;
  cuStreamBeginCapture_v2_params p{reinterpret_cast<CUstream>(0x77), CU_STREAM_CAPTURE_MODE_GLOBAL};
  c.h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &p, CUDA_ERROR_INVALID_VALUE);
  CHECK(c.open() == 0);
  CHECK(c.queriesOfLaunch(0x5) == 0);
  runtimeBegin(c.h, 0x77, cudaErrorInvalidValue);
  CHECK(c.open() == 0);
  // A second begin on a stream already capturing fails; the first capture
  // is still open.
  c.h.beginCapture(0x77);
  c.h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &p, CUDA_ERROR_ILLEGAL_STATE);
  CHECK(c.open() == 1);
  CHECK(c.queriesOfLaunch(0x5) == 2);
  c.h.endCapture(0x77);
  CHECK(c.open() == 0);
  c.h.finishAndRead();
}

TEST_CASE("capture tracking: a begin whose result the recorder cannot see counts as open until its stream says",
          "[recorder][session][capture]") {
  CaptureCase c;
  cuStreamBeginCapture_v2_params p{reinterpret_cast<CUstream>(0x77), CU_STREAM_CAPTURE_MODE_GLOBAL};
  uint64_t correlation = 0;
  CUpti_CallbackData cb{};
  cb.functionName = "cuStreamBeginCapture_v2";
  cb.functionParams = &p;
  cb.functionReturnValue = nullptr;  // no result to read
  cb.context = c.h.ctx;
  cb.correlationData = &correlation;
  cb.callbackSite = CUPTI_API_ENTER;
  c.h.session->onCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &cb);
  CHECK(c.open() == 1);  // open from the begin's ENTER
  c.h.device->capturing.insert(0x77);
  cb.callbackSite = CUPTI_API_EXIT;
  c.h.session->onCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &cb);
  CHECK(c.open() == 1);  // the driver says the stream captures
  CHECK(c.queriesOfLaunch(0x77) == 1);
  c.h.endCapture(0x77);
  CHECK(c.open() == 0);
  const auto launches = eventsOf<trace::KernelLaunch>(c.h.finishAndRead());
  REQUIRE(launches.size() == 1);
  CHECK(launches[0].captured);
}
