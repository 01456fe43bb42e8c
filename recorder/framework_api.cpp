// The exported C functions of framework_api.h, forwarding to
// framework_context (the static core's symbols are not exported).
#include "recorder/framework_api.h"

#include <exception>
#include <string>
#include <vector>

#include "recorder/collectives.h"
#include "recorder/framework_context.h"
#include "recorder/thread_local_ref.h"
#include "trace_format/hash.h"

namespace fw = gpurr::recorder::framework;

#define GPURR_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
// The calls that reach this thread's state are ignored once its
// thread_locals are gone (thread_local_ref.h): the main thread's at exit(),
// before C's exit handlers and static destructors run.
bool ended() { return gpurr::recorder::threadFlags().ended; }
}  // namespace

GPURR_EXPORT int gpurr_framework_api_version(void) { return GPURR_FRAMEWORK_API_VERSION; }

GPURR_EXPORT void gpurr_framework_open_scope(const void* id, const char* name, int kind, int64_t sequence,
                                             uint64_t sequence_thread, const char* file, uint32_t line,
                                             int in_place) {
  if (ended()) return;
  const auto k = kind == 1   ? fw::ScopeKind::kBackwardNode
                 : kind == 2 ? fw::ScopeKind::kRange
                 : kind == 3 ? fw::ScopeKind::kBenchmark
                             : fw::ScopeKind::kOp;
  using gpurr::trace::InPlace;
  const auto p = in_place == 1 ? InPlace::kNo : in_place == 2 ? InPlace::kYes : InPlace::kUnknown;
  fw::openScope(id, name, k, sequence, sequence_thread, file, line, p);
}

GPURR_EXPORT void gpurr_framework_close_scope(const void* id) {
  if (!ended()) fw::closeScope(id);
}

GPURR_EXPORT void gpurr_framework_op_operands(const void* id, const uint64_t* addresses, const uint8_t* written,
                                              uint32_t count) {
  if (ended()) return;
  thread_local gpurr::recorder::EndsWithThread<std::vector<fw::Operand>> tlsOperands;
  std::vector<fw::Operand>& operands = gpurr::recorder::threadLocalRef(tlsOperands);
  operands.resize(count);
  for (uint32_t i = 0; i < count; ++i) operands[i] = {addresses[i], written[i] != 0};
  fw::opOperands(id, operands);
}

GPURR_EXPORT void gpurr_framework_enter_module(const char* path) {
  if (!ended()) fw::enterModule(path);
}

GPURR_EXPORT void gpurr_framework_exit_module(void) {
  if (!ended()) fw::exitModule();
}

GPURR_EXPORT int gpurr_framework_recomputing(void) { return !ended() && fw::recomputing() ? 1 : 0; }

GPURR_EXPORT void gpurr_framework_set_step(int64_t step) { fw::setStep(step); }

GPURR_EXPORT void gpurr_framework_stop_after_step(int64_t step) { fw::stopAfterStep(step); }

GPURR_EXPORT void gpurr_framework_finish(void) { fw::finishRecording(); }

GPURR_EXPORT void gpurr_framework_flush(void) { fw::flushRecording(); }

GPURR_EXPORT int gpurr_framework_attribution(int mode) {
  if (mode < 0 || mode > 2) return 0;
  return fw::setAttribution(static_cast<fw::Attribution>(mode)) ? 1 : 0;
}

GPURR_EXPORT int gpurr_framework_diverged(void) { return fw::divergedSinceLastCall() ? 1 : 0; }

GPURR_EXPORT int gpurr_framework_step_learned(void) { return static_cast<int>(fw::lastStepLearned()); }

GPURR_EXPORT void gpurr_framework_on_diverged(void (*observe)(void)) { fw::setOnDiverged(observe); }

GPURR_EXPORT void gpurr_framework_parameters(const uint64_t* ranges, uint32_t count) {
  fw::setParameters(std::span<const uint64_t>(ranges, ranges == nullptr ? 0 : size_t{count} * 2));
}

GPURR_EXPORT void gpurr_framework_sequence_source(void (*now)(uint64_t* thread, int64_t* sequence)) {
  fw::setSequenceSource(now);
}

GPURR_EXPORT void gpurr_framework_grad_mode_source(int (*enabled)(void)) { fw::setGradModeSource(enabled); }

GPURR_EXPORT void gpurr_framework_block(uint64_t address, uint64_t size, int allocated) {
  fw::blockEvent(address, size, allocated != 0);
}

GPURR_EXPORT uint64_t gpurr_framework_hash_host(const void* data, uint64_t size) {
  return gpurr::hash::hashBuffer({static_cast<const uint8_t*>(data), static_cast<size_t>(size)});
}

namespace {

// The event gpurr_framework_collective's arguments describe.
gpurr::trace::Collective describeCollective(const char* call, int op, const char* process_group,
                                            const char* communicator_key, int32_t rank, int32_t size,
                                            int64_t sequence, const char* data_type, uint64_t count,
                                            const char* reduce_op, int32_t peer, const uint64_t* inputs,
                                            uint32_t input_count, const uint64_t* outputs, uint32_t output_count) {
  auto text = [](const char* s) { return std::string(s != nullptr ? s : ""); };
  auto ranges = [](const uint64_t* triples, uint32_t n) {
    std::vector<gpurr::trace::RangeDigest> out(n);
    for (uint32_t i = 0; i < n; ++i) {
      out[i].range = {triples[3 * i], triples[3 * i + 1], 0, 0};
      out[i].digest = triples[3 * i + 2];
    }
    return out;
  };
  gpurr::trace::Collective c;
  c.source = gpurr::trace::CollectiveSource::kFramework;
  c.call = text(call);
  c.op = op >= 0 && op <= static_cast<int>(gpurr::trace::CollectiveOp::kBarrier) ? static_cast<gpurr::trace::CollectiveOp>(op)
                                                                                  : gpurr::trace::CollectiveOp::kOther;
  c.processGroup = text(process_group);
  const std::string key = text(communicator_key);
  c.communicator = gpurr::recorder::communicatorIdFromUniqueId({reinterpret_cast<const uint8_t*>(key.data()), key.size()});
  c.rank = rank;
  c.size = size;
  c.frameworkSequence = sequence;
  c.dataType = text(data_type);
  c.count = count;
  c.reduceOp = text(reduce_op);
  c.peer = peer;
  c.inputs = ranges(inputs, input_count);
  c.outputs = ranges(outputs, output_count);
  return c;
}

}  // namespace

GPURR_EXPORT void gpurr_framework_collective(const char* call, int op, const char* process_group,
                                             const char* communicator_key, int32_t rank, int32_t size,
                                             int64_t sequence, const char* data_type, uint64_t count,
                                             const char* reduce_op, int32_t peer, const uint64_t* inputs,
                                             uint32_t input_count, const uint64_t* outputs, uint32_t output_count,
                                             uint64_t device_inputs, uint64_t device_outputs, const char* file,
                                             uint32_t line) {
  gpurr::recorder::CollectiveRecorder* r = gpurr::recorder::activeCollectives();
  if (r == nullptr || ended()) return;
  try {
    r->frameworkCollective(describeCollective(call, op, process_group, communicator_key, rank, size, sequence,
                                              data_type, count, reduce_op, peer, inputs, input_count, outputs,
                                              output_count),
                           file, line, device_inputs, device_outputs);
  } catch (const std::exception&) {
  }
}

GPURR_EXPORT uint64_t gpurr_framework_collective_pending(const char* call, int op, const char* process_group,
                                                        const char* communicator_key, int32_t rank, int32_t size,
                                                        int64_t sequence, const char* data_type, uint64_t count,
                                                        const char* reduce_op, int32_t peer, const uint64_t* inputs,
                                                        uint32_t input_count, const uint64_t* outputs,
                                                        uint32_t output_count, uint64_t device_inputs,
                                                        const char* file, uint32_t line) {
  gpurr::recorder::CollectiveRecorder* r = gpurr::recorder::activeCollectives();
  if (r == nullptr || ended()) return 0;
  try {
    return r->frameworkPending(describeCollective(call, op, process_group, communicator_key, rank, size, sequence,
                                                  data_type, count, reduce_op, peer, inputs, input_count, outputs,
                                                  output_count),
                               file, line, device_inputs);
  } catch (const std::exception&) {
    return 0;
  }
}

GPURR_EXPORT int gpurr_framework_collective_done(uint64_t ticket) {
  gpurr::recorder::CollectiveRecorder* r = gpurr::recorder::activeCollectives();
  return r != nullptr && !ended() && r->frameworkDone(ticket) ? 1 : 0;
}

GPURR_EXPORT uint64_t gpurr_framework_hash_device(uint64_t stream, const uint64_t* ranges, uint32_t count) {
  gpurr::recorder::CollectiveRecorder* r = gpurr::recorder::activeCollectives();
  if (r == nullptr || count == 0 || ended()) return 0;
  std::vector<std::pair<uint64_t, uint64_t>> tensors(count);
  for (uint32_t i = 0; i < count; ++i) tensors[i] = {ranges[2 * i], ranges[2 * i + 1]};
  try {
    return r->hashFrameworkTensors(stream, tensors);
  } catch (const std::exception&) {
    return 0;
  }
}

GPURR_EXPORT void gpurr_framework_collectives_of_objects(int delta) {
  gpurr::recorder::CollectiveRecorder::objectsOnThisThread(delta);
}

GPURR_EXPORT void gpurr_framework_hash_drop(uint64_t handle) {
  if (gpurr::recorder::CollectiveRecorder* r = gpurr::recorder::activeCollectives()) r->dropFrameworkHashes(handle);
}
