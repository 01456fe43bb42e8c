// RecordSession (session_harness.h) on collectives: NCCL's calls and a
// framework's collectives recorded as operations with digests.
#include "tests/recorder/session_harness.h"

using namespace gpurr;
using namespace gpurr::recorder;
using namespace gpurr::recorder::session_testing;

TEST_CASE("a collective is an operation: the send buffer hashed before it, the receive buffer after", "[recorder][collective]") {
  Harness h;
  std::vector<uint8_t> send = randomBytes(4096, 7), recv = randomBytes(4096, 8);
  h.memAlloc(send);
  h.memAlloc(recv);
  const uint8_t uniqueId[128] = {1, 2, 3};
  const uint64_t id = communicatorIdFromUniqueId(uniqueId);
  CHECK(id == communicatorIdFromUniqueId(uniqueId));  // every rank gets the same id
  CollectiveRecorder& c = h.session->collectives();
  c.communicatorCreated(0x77, id, 1, 2);

  auto call = [&](const char* name, trace::CollectiveOp op, uint64_t sendBytes, uint64_t recvBytes) {
    CollectiveCall k;
    k.event.call = name;
    k.event.op = op;
    k.event.dataType = "float32";
    k.event.count = 1024;
    k.event.stream = 0x5;
    k.comm = 0x77;
    if (sendBytes) k.send = addr(send.data()), k.sendBytes = sendBytes;
    if (recvBytes) k.recv = addr(recv.data()), k.recvBytes = recvBytes;
    return k;
  };
  const std::vector<uint8_t> sendBefore = send;
  auto p = c.before(call("ncclAllReduce", trace::CollectiveOp::kAllReduce, 4096, 4096));
  send[0] ^= 1;  // NCCL may reuse the send buffer once it ran; the digest is of before
  recv[5] ^= 0xff;  // what the collective wrote
  const std::vector<uint8_t> recvAfter = recv;
  c.after(std::move(p), true);
  // A call that failed is not recorded.
  c.after(c.before(call("ncclAllReduce", trace::CollectiveOp::kAllReduce, 4096, 4096)), false);

  // A group: the receive buffers are hashed after the group's end.
  c.groupStart();
  c.after(c.before(call("ncclSend", trace::CollectiveOp::kSend, 4096, 0)), true);
  c.after(c.before(call("ncclRecv", trace::CollectiveOp::kRecv, 0, 4096)), true);
  recv[9] ^= 0xff;  // the group's work runs at its end
  const std::vector<uint8_t> recvAfterGroup = recv;
  c.groupEnd(true);
  // Pickled objects (torch.distributed's *_object* calls): not hashed.
  CollectiveRecorder::objectsOnThisThread(1);
  c.after(c.before(call("ncclAllGather", trace::CollectiveOp::kAllGather, 4096, 4096)), true);
  CollectiveRecorder::objectsOnThisThread(-1);
  // Another communicator at the same time: numbered on its own.
  c.communicatorCreated(0x88, id + 1, 0, 4);
  CollectiveCall other = call("ncclBroadcast", trace::CollectiveOp::kBroadcast, 4096, 4096);
  other.comm = 0x88;
  c.after(c.before(std::move(other)), true);

  const auto collectives = eventsOf<trace::Collective>(h.finishAndRead());
  REQUIRE(collectives.size() == 5);
  CHECK(collectives[3].call == "ncclAllGather");
  CHECK(collectives[3].inputs.empty());
  CHECK(collectives[3].outputs.empty());
  CHECK(collectives[4].communicator == id + 1);
  CHECK(collectives[4].sequence == 0);
  CHECK(collectives[4].size == 4);
  const trace::Collective& a = collectives[0];
  CHECK(a.call == "ncclAllReduce");
  CHECK(a.communicator == id);
  CHECK(a.rank == 1);
  CHECK(a.size == 2);
  CHECK(a.sequence == 0);
  CHECK(a.group == 0);
  CHECK(a.stream == 0x5);
  REQUIRE(a.inputs.size() == 1);
  CHECK(a.inputs[0].digest == hash::hashBuffer(sendBefore));
  CHECK(a.inputs[0].range.allocation == 1);
  REQUIRE(a.outputs.size() == 1);
  CHECK(a.outputs[0].digest == hash::hashBuffer(recvAfter));
  CHECK(a.outputs[0].range.allocation == 2);

  const trace::Collective& s = collectives[1];
  CHECK(s.op == trace::CollectiveOp::kSend);
  CHECK(s.sequence == 2);  // the failed call took number 1
  CHECK(s.group == 1);
  CHECK(s.outputs.empty());
  const trace::Collective& r = collectives[2];
  CHECK(r.op == trace::CollectiveOp::kRecv);
  CHECK(r.group == 1);
  CHECK(r.inputs.empty());
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0].digest == hash::hashBuffer(recvAfterGroup));
}

TEST_CASE("a collective carries the c10d op, line and step it ran in, and no phase outside a backward node",
          "[recorder][collective]") {
  framework::resetForTesting();
  Harness h;
  std::vector<uint8_t> buffer = randomBytes(4096, 9);
  h.memAlloc(buffer);
  CollectiveRecorder& c = h.session->collectives();
  c.communicatorCreated(0x77, 42, 0, 2);
  auto allReduce = [&] {
    CollectiveCall k;
    k.event.call = "ncclAllReduce";
    k.event.op = trace::CollectiveOp::kAllReduce;
    k.event.count = 1024;
    k.comm = 0x77;
    k.send = k.recv = addr(buffer.data());
    k.sendBytes = k.recvBytes = buffer.size();
    c.after(c.before(std::move(k)), true);
  };
  static int op;
  framework::setStep(3);
  framework::openScope(&op, "c10d::allreduce_", framework::ScopeKind::kOp, 7, 1, "/w/train.py", 12);
  allReduce();
  framework::closeScope(&op);
  framework::setStep(4);
  allReduce();
  const auto events = h.finishAndRead();
  framework::resetForTesting();
  std::vector<trace::Event> collectives;
  for (const trace::Event& e : events) {
    if (std::holds_alternative<trace::Collective>(e.payload)) collectives.push_back(e);
  }
  REQUIRE(collectives.size() == 2);
  REQUIRE(collectives[0].origin);
  CHECK(collectives[0].origin->op == "c10d::allreduce_");
  CHECK(collectives[0].origin->file == "/w/train.py");
  CHECK(collectives[0].origin->line == 12);
  CHECK(collectives[0].origin->step == 3);
  // Inside an op but no backward node: no phase claimed (autograd's hooks,
  // where DDP issues its all-reduces, run outside every node's scope).
  CHECK(collectives[0].origin->phase == trace::Phase::kUnknown);
  REQUIRE(collectives[1].origin);
  CHECK(collectives[1].origin->op.empty());
  CHECK(collectives[1].origin->step == 4);
}

TEST_CASE("a framework's collective of device tensors: sent hashed on its stream before the call, received after",
          "[recorder][collective]") {
  Harness h;
  std::vector<uint8_t> bucket = randomBytes(4096, 11), gathered = randomBytes(8192, 12);
  h.memAlloc(bucket);
  h.memAlloc(gathered);
  CollectiveRecorder& c = h.session->collectives();
  auto event = [](const char* call, trace::CollectiveOp op) {
    trace::Collective e;
    e.source = trace::CollectiveSource::kFramework;
    e.call = call;
    e.op = op;
    e.communicator = 99;
    return e;
  };
  // An asynchronous all-reduce in place: what it sends hashed now; what it
  // receives listed by the layer without a digest.
  const std::vector<uint8_t> sent = bucket;
  const std::pair<uint64_t, uint64_t> bucketRange{addr(bucket.data()), bucket.size()};
  const uint64_t handle = c.hashFrameworkTensors(0x5, std::span(&bucketRange, 1));
  REQUIRE(handle != 0);
  bucket[3] ^= 0xff;  // the backend writes the sum later
  trace::Collective reduce = event("c10d::allreduce_", trace::CollectiveOp::kAllReduce);
  trace::RangeDigest host, received;
  host.range = {0x1000, 64, 0, 0};  // a host tensor, hashed by the layer
  host.digest = 0x1234;
  received.range = {addr(bucket.data()), bucket.size(), 0, 0};
  reduce.inputs.push_back(host);
  reduce.outputs.push_back(received);
  c.frameworkCollective(reduce, "/w/train.py", 7, handle, 0);
  // A synchronous all-gather: what it received hashed after the call.
  const std::pair<uint64_t, uint64_t> gatheredRange{addr(gathered.data()), gathered.size()};
  const uint64_t before = c.hashFrameworkTensors(0x6, std::span(&bucketRange, 1));
  gathered[100] ^= 0xff;
  const uint64_t after = c.hashFrameworkTensors(0x6, std::span(&gatheredRange, 1));
  c.frameworkCollective(event("all_gather", trace::CollectiveOp::kAllGather), nullptr, 0, before, after);
  // A handle no call took, and memory the recorder does not know: nothing.
  c.dropFrameworkHashes(c.hashFrameworkTensors(0x5, std::span(&bucketRange, 1)));
  const std::pair<uint64_t, uint64_t> unknown{0xdead0000, 64};
  CHECK(c.hashFrameworkTensors(0x5, std::span(&unknown, 1)) == 0);

  const auto collectives = eventsOf<trace::Collective>(h.finishAndRead());
  REQUIRE(collectives.size() == 2);
  const trace::Collective& a = collectives[0];
  CHECK(a.stream == 0x5);
  REQUIRE(a.inputs.size() == 2);
  CHECK(a.inputs[0].digest == 0x1234);
  CHECK(a.inputs[1].digest == hash::hashBuffer(sent));
  CHECK(a.inputs[1].range.allocation != 0);
  CHECK(a.inputs[0].range.allocation == 0);  // host memory
  REQUIRE(a.outputs.size() == 1);
  CHECK(a.outputs[0].digest == 0);
  CHECK(a.outputs[0].range.allocation == a.inputs[1].range.allocation);  // listed by address, resolved
  const trace::Collective& g = collectives[1];
  CHECK(g.stream == 0x6);
  REQUIRE(g.inputs.size() == 1);
  CHECK(g.inputs[0].digest == hash::hashBuffer(bucket));
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.outputs[0].digest == hash::hashBuffer(gathered));
  CHECK(g.sequence == 1);
}

TEST_CASE("a split communicator's id depends on its parent, color and split only", "[recorder][collective]") {
  const uint64_t parent = 0x1234;
  CHECK(communicatorIdFromSplit(parent, 0, 1) == communicatorIdFromSplit(parent, 0, 1));
  CHECK(communicatorIdFromSplit(parent, 0, 1) != communicatorIdFromSplit(parent, 1, 1));
  CHECK(communicatorIdFromSplit(parent, 0, 1) != communicatorIdFromSplit(parent, 0, 2));
  CHECK(communicatorIdFromSplit(parent, 0, 1) != communicatorIdFromSplit(parent + 1, 0, 1));
  CHECK(communicatorIdFromSplit(parent, 0, 1) != 0);
}

// Deferred output hashes (hash_deferral.h): the fake device hashes host
// memory when a hash is enqueued, so a digest taken too late shows the
// bytes of whatever wrote the range since.
