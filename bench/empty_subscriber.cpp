// An injection library (CUDA_INJECTION64_PATH) that subscribes to CUPTI as
// the recorder does (the same driver and runtime callbacks, the resource
// domain) and does nothing in its callback: what CUPTI's dispatch alone costs
// a program. bench/step_breakdown.sh's "cupti" variant runs the plain
// command with it, beside the recorder's variants.
#include <cupti.h>

#include "recorder/callback_table.h"

namespace {

void CUPTIAPI nothing(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  CUpti_SubscriberHandle subscriber = nullptr;
  if (cuptiSubscribe(&subscriber, nothing, nullptr) != CUPTI_SUCCESS) return 1;
  cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE);
  for (CUpti_CallbackId id : gpurr::recorder::subscribedDriverCallbacks()) {
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  }
  for (CUpti_CallbackId id : gpurr::recorder::subscribedRuntimeCallbacks()) {
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  }
  return 1;
}
