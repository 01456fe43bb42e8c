// The CUDA driver entry points replay needs beyond kernels/driver_api.h
// (virtual memory management, cuLaunchKernelEx, function attributes, streams),
// resolved at run time from libcuda.so.1 like that table, so that `gpurr`
// starts, and says clearly that replay needs a GPU, on machines without a
// driver.
#pragma once

#include <cuda.h>

#include <string>

namespace gpurr::replay {

#define GPURR_REPLAY_DRIVER_FUNCTIONS(X) \
  X(cuMemAddressReserve)                 \
  X(cuMemAddressFree)                    \
  X(cuMemCreate)                         \
  X(cuMemRelease)                        \
  X(cuMemMap)                            \
  X(cuMemUnmap)                          \
  X(cuMemSetAccess)                      \
  X(cuMemGetAllocationGranularity)       \
  X(cuMemsetD8Async)                     \
  X(cuMemsetD16Async)                    \
  X(cuMemsetD32Async)                    \
  X(cuMemcpyHtoDAsync)                   \
  X(cuMemcpyDtoDAsync)                   \
  X(cuMemcpyDtoHAsync)                   \
  X(cuLaunchKernelEx)                    \
  X(cuFuncSetAttribute)                  \
  X(cuFuncGetAttribute)                  \
  X(cuStreamCreate)                      \
  X(cuStreamDestroy)

struct ReplayDriver {
#define GPURR_DECLARE_REPLAY_FN(name) decltype(&::name) name = nullptr;
  GPURR_REPLAY_DRIVER_FUNCTIONS(GPURR_DECLARE_REPLAY_FN)
#undef GPURR_DECLARE_REPLAY_FN

  // Opens libcuda.so.1 and resolves every function. Returns false with a
  // reason in `error` when the driver is absent or too old (VMM and
  // cuLaunchKernelEx need CUDA 12.0).
  bool load(std::string& error);
};

}  // namespace gpurr::replay
