// RecordSession (session_harness.h) with deferred output hashes: merged
// batches, and what hashes a held-back range before anything may write it.
#include "tests/recorder/session_harness.h"

using namespace gpurr;
using namespace gpurr::recorder;
using namespace gpurr::recorder::session_testing;

namespace {

// A launch of axpy(out, in) on `stream` inside an op that reads `in` and
// makes `out` (`given` false: a new tensor, not hashed before the launch) or
// writes the `out` it is given (both blocks of the framework's allocator);
// `kernel` is what the launch writes.
void opLaunch(Harness& h, uint64_t stream, uint64_t out, uint64_t in, const std::function<void()>& kernel,
              bool given = false) {
  float a = 1.0f;
  int n = 16;
  void* args[] = {&out, &in, &a, &n};
  const int op = 0;
  framework::openScope(&op, "aten::add", framework::ScopeKind::kOp, -1, 0, nullptr, 0);
  std::vector<framework::Operand> operands{{in, false}};
  if (given) operands.push_back({out, true});
  framework::opOperands(&op, operands);
  h.launch(kAxpy, args, stream, CUDA_SUCCESS, kernel);
  framework::closeScope(&op);
}

// Buffers allocated through the session, each a block of the framework's allocator.
std::vector<std::vector<uint8_t>> blocks(Harness& h, size_t count, uint64_t seed) {
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < count; ++i) {
    out.push_back(randomBytes(4096, seed + i));
    h.memAlloc(out.back());
    framework::blockEvent(addr(out.back().data()), out.back().size(), true);
  }
  return out;
}

uint64_t digestOf(const std::vector<uint8_t>& bytes) { return hash::hashBuffer({bytes.data(), bytes.size()}); }

// The digest of the single output of a launch.
uint64_t outputDigest(const trace::KernelLaunch& k) {
  REQUIRE(k.outputs.size() == 1);
  return k.outputs[0].digest;
}

// A chain of `count` launches, each writing buffer i from buffer i - 1; the
// output digests, then those of the inputs hashed at their first use, and
// how many hash calls there were.
std::pair<std::vector<uint64_t>, size_t> recordChain(bool defer, size_t count) {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = defer;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, count + 1, 300);
  for (size_t i = 1; i <= count; ++i) {
    uint64_t out = addr(bufs[i].data()), in = addr(bufs[i - 1].data());
    opLaunch(h, 0x5, out, in, [&] {
      for (size_t b = 0; b < bufs[i].size(); ++b) bufs[i][b] = static_cast<uint8_t>(bufs[i - 1][b] + i);
    });
  }
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  std::vector<uint64_t> digests;
  for (const auto& k : launches) digests.push_back(outputDigest(k));
  for (const auto& k : launches) {
    for (const auto& r : k.inputs) digests.push_back(r.digest);
  }
  framework::resetForTesting();
  return {digests, h.calls.size()};
}

}  // namespace

TEST_CASE("deferred hashes: a dependent chain is hashed in merged batches, with the digests it had without",
          "[recorder][session][deferral]") {
  const auto [plain, plainCalls] = recordChain(false, 20);
  const auto [merged, mergedCalls] = recordChain(true, 20);
  REQUIRE(plain.size() == 21);  // 20 outputs, and buffer 0 at its first use
  CHECK(merged == plain);
  // Without deferral: the first use of buffer 0, then each launch's output,
  // 21 calls. With it: a batch every HashDeferral::kMaxLaunches launches
  // and the rest at the close (3), the first use of buffer 0 in the first
  // (launch 0 only reads it); the trace thread, when it waits for a batch
  // for long, may ask for one more.
  CHECK(plainCalls == 21);
  CHECK(mergedCalls >= 3);
  CHECK(mergedCalls <= 7);
}

TEST_CASE("deferred hashes: an input only read at its first use waits in the batch until a launch may write it",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 3, 700);
  const uint64_t x = addr(bufs[0].data()), y = addr(bufs[1].data()), z = addr(bufs[2].data());
  const std::vector<uint8_t> xBefore = bufs[0];
  const size_t callsBefore = h.calls.size();
  // Launch 0 reads x at its first use and makes y: nothing is enqueued.
  opLaunch(h, 0x5, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 5); });
  CHECK(h.calls.size() == callsBefore);
  // Launch 1 writes x (the op is given it to write): x's digest of before
  // launch 1, and y's, are enqueued before it; z, read at its first use,
  // waits.
  opLaunch(h, 0x5, x, z, [&] { std::fill(bufs[0].begin(), bufs[0].end(), 6); }, true);
  CHECK(h.calls.size() == callsBefore + 1);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  REQUIRE(launches[0].inputs.size() == 1);
  CHECK(launches[0].inputs[0].digest == digestOf(xBefore));
  REQUIRE(launches[1].inputs.size() == 1);
  CHECK(launches[1].inputs[0].digest == digestOf(bufs[2]));
  CHECK(outputDigest(launches[1]) == digestOf(bufs[0]));
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: a flush the trace thread asks for waits for an API call and not a resource callback",
          "[recorder][session][deferral]") {
  // A module loading inside cuModuleLoadData (or inside the recorder's own
  // function lookup), a stream or graph node being made: the driver is in
  // the middle of a call of its own there.
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 2, 750);
  opLaunch(h, 0x5, addr(bufs[1].data()), addr(bufs[0].data()), [&] { bufs[1][0] ^= 1; });
  const size_t callsBefore = h.calls.size();
  HashDeferral::asked().store(true);
  const std::vector<uint8_t> image = {1, 2, 3, 4};
  CUpti_ModuleResourceData m{9, image.size(), reinterpret_cast<const char*>(image.data())};
  CUpti_ResourceData r{h.ctx, {nullptr}, &m};
  h.session->onCallback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED, &r);
  CUpti_ResourceData stream{h.ctx, {reinterpret_cast<CUstream>(0x7)}, nullptr};
  h.session->onCallback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_STREAM_CREATED, &stream);
  CHECK(h.calls.size() == callsBefore);
  CHECK(HashDeferral::asked().load());
  cuCtxGetDevice_params p{};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice, &p);  // the program's next call
  CHECK(h.calls.size() == callsBefore + 1);
  CHECK_FALSE(HashDeferral::asked().load());
  REQUIRE(eventsOf<trace::KernelLaunch>(h.finishAndRead()).size() == 1);
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: once the recorder closes a batch is flushed as its ranges come",
          "[recorder][session][deferral]") {
  // A launch on another thread already past the session's end check when
  // it finished: nothing would flush its batch again, and the trace thread
  // would wait on it for good.
  std::vector<HashCall> calls;
  FakeDevice device;
  device.calls = &calls;
  device.deferHashes = true;
  HashDeferral deferral(device, [](std::span<const trace::DeviceRange>, const std::string&) {});
  const std::vector<uint8_t> a = randomBytes(64, 1);
  const trace::DeviceRange r{addr(a.data()), a.size()};
  std::string error;
  std::unique_ptr<PendingHashes> held = deferral.add(0xC0, 0x5, std::span(&r, 1), false, false, error);
  REQUIRE(held);
  CHECK(deferral.anyOpen());
  deferral.close();
  CHECK_FALSE(deferral.anyOpen());
  std::unique_ptr<PendingHashes> late = deferral.add(0xC0, 0x5, std::span(&r, 1), false, false, error);
  REQUIRE(late);
  CHECK_FALSE(deferral.anyOpen());
  std::vector<kernels::HashResult> out;
  REQUIRE(late->wait(out, error));
  REQUIRE(held->wait(out, error));
  CHECK(calls.size() == 2);
}

// What a thread does as it ends, after its other thread_locals were
// destroyed (made before them, so destroyed after them).
struct AtThreadEnd {
  std::function<void()> run;
  ~AtThreadEnd() {
    if (run) run();
  }
};
thread_local AtThreadEnd atThreadEnd;

TEST_CASE("calls on a thread whose thread_locals are destroyed are not recorded but its frees flush first",
          "[recorder][session][deferral]") {
  // As the main thread at exit(): C's exit handlers run after its
  // thread_locals were destroyed, and some still call the driver.
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 2, 770);
  const uint64_t x = addr(bufs[0].data()), y = addr(bufs[1].data());
  size_t callsAtEnd = 0, callsAfterFree = 0;
  std::thread([&] {
    atThreadEnd.run = [&] {
      callsAtEnd = h.calls.size();
      uint64_t out = y, in = x;
      float a = 1.0f;
      int n = 16;
      void* args[] = {&out, &in, &a, &n};
      h.launch(kAxpy, args, 0x5, CUDA_SUCCESS, [&] { bufs[1][1] ^= 1; });  // not recorded
      cuMemFree_v2_params f{y};
      h.call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &f);
      callsAfterFree = h.calls.size();
    };
    opLaunch(h, 0x5, y, x, [&] { bufs[1][0] ^= 1; });  // held back
  }).join();
  CHECK(callsAfterFree == callsAtEnd + 1);  // the held-back hash, before the free
  REQUIRE(eventsOf<trace::KernelLaunch>(h.finishAndRead()).size() == 1);
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: a launch that writes a held-back range in place has it hashed first",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 2, 400);
  uint64_t y = addr(bufs[1].data()), x = addr(bufs[0].data());
  opLaunch(h, 0x5, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 1); });
  const std::vector<uint8_t> left = bufs[1];  // what launch 0 left
  const size_t callsBefore = h.calls.size();
  // Launch 1 updates y in place (the op writes it).
  opLaunch(h, 0x5, y, y, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 2); }, true);
  CHECK(h.calls.size() == callsBefore + 1);  // launch 0's output, enqueued before launch 1
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  CHECK(outputDigest(launches[0]) == digestOf(left));
  CHECK(outputDigest(launches[1]) == digestOf(bufs[1]));
  CHECK(outputDigest(launches[0]) != outputDigest(launches[1]));
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: an event record hashes what its stream holds back before another stream can wait on it",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 3, 500);
  uint64_t y = addr(bufs[1].data()), x = addr(bufs[0].data()), z = addr(bufs[2].data());
  opLaunch(h, 0xA, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 3); });
  const std::vector<uint8_t> left = bufs[1];
  const size_t callsBefore = h.calls.size();
  cuEventRecord_params record{reinterpret_cast<CUevent>(0xE1), reinterpret_cast<CUstream>(0xA)};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuEventRecord, &record);
  REQUIRE(h.calls.size() == callsBefore + 1);
  CHECK(h.calls.back().stream == 0xA);  // on the stream, before the event
  cuStreamWaitEvent_params wait{reinterpret_cast<CUstream>(0xB), reinterpret_cast<CUevent>(0xE1), 0};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent, &wait);
  // Stream B, ordered after the event, overwrites y from z.
  opLaunch(h, 0xB, y, z, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 4); }, true);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  CHECK(outputDigest(launches[0]) == digestOf(left));
  CHECK(outputDigest(launches[1]) == digestOf(bufs[1]));
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: what the legacy stream orders after a batch's writers has the batch hashed first",
          "[recorder][session][deferral]") {
  // A blocking stream's work waits for the legacy stream's before it, and
  // the legacy stream's for every blocking stream's (cuda.h,
  // CU_STREAM_NON_BLOCKING): a later write on a third stream can be ordered
  // after a held batch's writers without touching the program's ranges
  // before then.
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 4, 560);
  const uint64_t x = addr(bufs[0].data()), y = addr(bufs[1].data()), z = addr(bufs[2].data()),
                 w = addr(bufs[3].data());
  auto eventRecord = [&](uint64_t stream) {
    cuEventRecord_params record{reinterpret_cast<CUevent>(0xE1), reinterpret_cast<CUstream>(stream)};
    h.call(CUPTI_DRIVER_TRACE_CBID_cuEventRecord, &record);
  };
  // What was hashed since `before`, by stream.
  auto hashedOn = [&](size_t before) {
    std::vector<uint64_t> streams;
    for (size_t i = before; i < h.calls.size(); ++i) streams.push_back(h.calls[i].stream);
    return streams;
  };
  auto fill = [&](size_t b, uint8_t v) { return [&bufs, b, v] { std::fill(bufs[b].begin(), bufs[b].end(), v); }; };
  SECTION("a launch on the legacy stream hashes a blocking stream's batch first") {
    opLaunch(h, 0xA, y, x, fill(1, 1));
    const size_t before = h.calls.size();
    opLaunch(h, 0, w, z, fill(3, 2));  // reaches nothing of stream A's
    CHECK(hashedOn(before) == std::vector<uint64_t>{0xA});
  }
  SECTION("but not a non-blocking stream's") {
    h.device->nonBlocking.insert(0xA);
    opLaunch(h, 0xA, y, x, fill(1, 1));
    const size_t before = h.calls.size();
    opLaunch(h, 0, w, z, fill(3, 2));
    CHECK(hashedOn(before).empty());
  }
  SECTION("an event recorded on the legacy stream hashes a blocking stream's batch first") {
    opLaunch(h, 0xA, y, x, fill(1, 1));
    opLaunch(h, 0xC, w, z, fill(3, 2));
    h.device->nonBlocking.insert(0xC);
    const size_t before = h.calls.size();
    eventRecord(0);
    CHECK(hashedOn(before) == std::vector<uint64_t>{0xA});
  }
  SECTION("an event recorded on a blocking stream hashes the legacy stream's batch first") {
    opLaunch(h, 0, y, x, fill(1, 1));
    const size_t before = h.calls.size();
    eventRecord(0xA);
    CHECK(hashedOn(before) == std::vector<uint64_t>{0});
  }
  SECTION("but one recorded on a non-blocking stream does not") {
    h.device->nonBlocking.insert(0xA);
    opLaunch(h, 0, y, x, fill(1, 1));
    const size_t before = h.calls.size();
    eventRecord(0xA);
    CHECK(hashedOn(before).empty());
  }
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() >= 1);
  CHECK(outputDigest(launches[0]) == digestOf(bufs[1]));
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: another stream's launch that writes a held-back range has it hashed first",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 3, 550);
  uint64_t y = addr(bufs[1].data()), x = addr(bufs[0].data()), z = addr(bufs[2].data());
  opLaunch(h, 0xA, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 5); });
  const std::vector<uint8_t> left = bufs[1];
  opLaunch(h, 0xB, y, z, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 6); }, true);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  CHECK(outputDigest(launches[0]) == digestOf(left));
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: synchronisations, frees and capture begins hash what is held back first",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 2, 600);
  uint64_t y = addr(bufs[1].data()), x = addr(bufs[0].data());
  std::vector<std::vector<uint8_t>> left;
  // After each, what the launch wrote changes without a recorded launch (a
  // later program's write the call made safe): the digest is the launch's.
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"stream synchronize",
       [&] {
         cuStreamSynchronize_params p{reinterpret_cast<CUstream>(0x5)};
         h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, &p);
       }},
      {"context synchronize", [&] { h.call(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, nullptr); }},
      {"capture begin", [&] { h.beginCapture(0x5); }},
  };
  uint8_t value = 10;
  for (const auto& [name, makeCall] : calls) {
    INFO(name);
    opLaunch(h, 0x5, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), value); });
    left.push_back(bufs[1]);
    const size_t callsBefore = h.calls.size();
    makeCall();
    CHECK(h.calls.size() == callsBefore + 1);
    std::fill(bufs[1].begin(), bufs[1].end(), ++value);
    ++value;
  }
  // Inside the capture nothing is held back: a launch on another stream is
  // hashed at its EXIT.
  {
    opLaunch(h, 0x7, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 40); });
    left.push_back(bufs[1]);
    REQUIRE_FALSE(h.calls.empty());
    CHECK(h.calls.back().requests.at(0).address == y);
    h.endCapture(0x5);
  }
  // An unmap, which does not wait for the GPU: the hash kernels enqueued are
  // waited for, after the flush.
  opLaunch(h, 0x5, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 45); });
  left.push_back(bufs[1]);
  const size_t beforeUnmap = h.calls.size();
  cuMemUnmap_params u{y, bufs[1].size()};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &u);
  CHECK(h.device->awaited == std::vector<size_t>{beforeUnmap + 1});
  // A free of the range's allocation (cuMemFree waits for the GPU itself).
  opLaunch(h, 0x5, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 50); });
  left.push_back(bufs[1]);
  cuMemFree_v2_params f{y};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &f);
  std::fill(bufs[1].begin(), bufs[1].end(), 51);  // the memory's next owner
  CHECK(h.device->awaited.size() == 1);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == left.size());
  for (size_t i = 0; i < left.size(); ++i) {
    INFO("launch " << i);
    CHECK(outputDigest(launches[i]) == digestOf(left[i]));
  }
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: managed memory is hashed at once, so a host write after a sync does not reach the digest",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 1, 700);
  std::vector<uint8_t> m = randomBytes(4096, 701);
  CUdeviceptr pm = addr(m.data());
  const uint64_t x = addr(bufs[0].data());
  cuMemAllocManaged_params alloc{&pm, m.size(), CU_MEM_ATTACH_GLOBAL};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, &alloc);
  framework::blockEvent(pm, m.size(), true);
  opLaunch(h, 0x5, pm, x, [&] { std::fill(m.begin(), m.end(), 7); });
  REQUIRE_FALSE(h.calls.empty());
  CHECK(h.calls.back().requests.at(0).address == pm);  // at the launch's EXIT
  const std::vector<uint8_t> left = m;
  cuStreamSynchronize_params p{reinterpret_cast<CUstream>(0x5)};
  h.call(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, &p);
  std::fill(m.begin(), m.end(), 8);  // the host writes it
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 1);
  CHECK(outputDigest(launches[0]) == digestOf(left));
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: a batch that cannot be enqueued leaves each of its launches unhashed, with a note",
          "[recorder][session][deferral]") {
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 3, 800);
  uint64_t x = addr(bufs[0].data()), y = addr(bufs[1].data()), z = addr(bufs[2].data());
  opLaunch(h, 0x5, y, x, [&] { std::fill(bufs[1].begin(), bufs[1].end(), 1); });
  opLaunch(h, 0x5, z, x, [&] { std::fill(bufs[2].begin(), bufs[2].end(), 2); });
  h.device->refuseHashes = 1;  // the faulted context refuses the next hash
  h.call(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, nullptr);
  const auto launches = eventsOf<trace::KernelLaunch>(h.finishAndRead());
  REQUIRE(launches.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    INFO("launch " << i);
    CHECK_FALSE(launches[i].hashed);
    CHECK(launches[i].outputs.empty());
    CHECK(std::any_of(launches[i].annotations.begin(), launches[i].annotations.end(), [](const trace::Annotation& a) {
      const auto* n = std::get_if<trace::Note>(&a);
      return n != nullptr && n->text == "not hashed: refused";
    }));
  }
  framework::resetForTesting();
}

TEST_CASE("deferred hashes: the flush at Ctrl-C writes every launch with its digests into a trace left open",
          "[recorder][session][deferral]") {
  const auto [plain, plainCalls] = recordChain(false, 5);
  framework::resetForTesting();
  Harness h;
  h.device->deferHashes = true;
  h.device->functions[kAxpy] = axpyInfo(0);
  auto bufs = blocks(h, 6, 300);
  for (size_t i = 1; i <= 5; ++i) {
    opLaunch(h, 0x5, addr(bufs[i].data()), addr(bufs[i - 1].data()), [&] {
      for (size_t b = 0; b < bufs[i].size(); ++b) bufs[i][b] = static_cast<uint8_t>(bufs[i - 1][b] + i);
    });
  }
  h.session->flush();  // the batch still held back is hashed, and everything written
  trace::TraceReader reader(h.traceDir);
  CHECK(reader.damage().unclosed);  // the process would now die of SIGINT
  const auto launches = eventsOf<trace::KernelLaunch>(reader.readAll());
  REQUIRE(launches.size() == 5);
  for (size_t i = 0; i < 5; ++i) CHECK(outputDigest(launches[i]) == plain[i]);
  framework::resetForTesting();
}
