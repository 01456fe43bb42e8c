// LaunchCall: a kernel launch as one callback (driver or runtime) describes
// it, read from the call's parameters before anything is recorded: the
// function, grid, block, shared memory, stream, attributes, and the
// parameter pointers the launch path packs and scans.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <cstdint>

#include "recorder/callback_table.h"
#include "trace_format/trace.h"

namespace gpurr::recorder {

struct LaunchCall {
  Handler handler = Handler::kLaunchKernel;  // the driver call it amounts to
  bool perThread = false;
  uint64_t function = 0;  // CUfunction or CUkernel; 0 when unknown
  // A runtime call's host entry function, to resolve to `function`
  // (ModuleRecorder::runtimeFunction); 0 when there is none.
  uint64_t hostFunction = 0;
  trace::KernelLaunch launch;  // grid, block, shared memory, stream, attributes
  void** kernelParams = nullptr;
  void** extra = nullptr;
  const CUlaunchAttribute* attrs = nullptr;
  uint32_t numAttrs = 0;
  void setAttributes(const CUlaunchAttribute* attrs, unsigned count);
  // Moves what the call set in `launch` (grid, block, cluster, shared
  // memory, stream, attributes) into `k`, whose containers keep their
  // capacity.
  void moveInto(trace::KernelLaunch& k);
};

// The trace's name of the launch API of a driver handler.
trace::LaunchApi launchApi(Handler h, bool perThread);

// A driver launch callback's call (`h`: kLaunchKernel, kLaunchKernelEx or
// kLaunchCooperative); false when it names no launch configuration.
bool driverLaunchCall(Handler h, bool perThread, const CUpti_CallbackData& cb, LaunchCall& call);
// A runtime launch callback's call; `function` is set for a CUkernel only,
// `hostFunction` otherwise.
LaunchCall runtimeLaunchCall(const RuntimeEntry& e, const CUpti_CallbackData& cb);

}  // namespace gpurr::recorder
