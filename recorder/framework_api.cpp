// The exported C functions of framework_api.h, forwarding to
// framework_context (the static core's symbols are not exported).
#include "recorder/framework_api.h"

#include <vector>

#include "recorder/framework_context.h"

namespace fw = gpurr::recorder::framework;

#define GPURR_EXPORT extern "C" __attribute__((visibility("default")))

GPURR_EXPORT int gpurr_framework_api_version(void) { return GPURR_FRAMEWORK_API_VERSION; }

GPURR_EXPORT void gpurr_framework_open_scope(const void* id, const char* name, int kind, int64_t sequence,
                                             uint64_t sequence_thread, const char* file, uint32_t line,
                                             int in_place) {
  const auto k = kind == 1 ? fw::ScopeKind::kBackwardNode : kind == 2 ? fw::ScopeKind::kRange : fw::ScopeKind::kOp;
  using gpurr::trace::InPlace;
  const auto p = in_place == 1 ? InPlace::kNo : in_place == 2 ? InPlace::kYes : InPlace::kUnknown;
  fw::openScope(id, name, k, sequence, sequence_thread, file, line, p);
}

GPURR_EXPORT void gpurr_framework_close_scope(const void* id) { fw::closeScope(id); }

GPURR_EXPORT void gpurr_framework_op_operands(const void* id, const uint64_t* addresses, const uint8_t* written,
                                              uint32_t count) {
  thread_local std::vector<fw::Operand> operands;
  operands.resize(count);
  for (uint32_t i = 0; i < count; ++i) operands[i] = {addresses[i], written[i] != 0};
  fw::opOperands(id, operands);
}

GPURR_EXPORT void gpurr_framework_enter_module(const char* path) { fw::enterModule(path); }

GPURR_EXPORT void gpurr_framework_exit_module(void) { fw::exitModule(); }

GPURR_EXPORT void gpurr_framework_set_step(int64_t step) { fw::setStep(step); }

GPURR_EXPORT void gpurr_framework_stop_after_step(int64_t step) { fw::stopAfterStep(step); }

GPURR_EXPORT int gpurr_framework_attribution(int mode) {
  if (mode < 0 || mode > 2) return 0;
  return fw::setAttribution(static_cast<fw::Attribution>(mode)) ? 1 : 0;
}

GPURR_EXPORT int gpurr_framework_diverged(void) { return fw::divergedSinceLastCall() ? 1 : 0; }

GPURR_EXPORT void gpurr_framework_on_diverged(void (*observe)(void)) { fw::setOnDiverged(observe); }

GPURR_EXPORT void gpurr_framework_block(uint64_t address, uint64_t size, int allocated) {
  fw::blockEvent(address, size, allocated != 0);
}
