// Run-time resolution of the replay's driver entry points (see replay_driver.h).
#include "replayer/replay_driver.h"

#include <dlfcn.h>

#include "kernels/driver_api.h"

namespace gpurr::replay {

#define GPURR_REPLAY_STRINGIFY_EXPANDED(x) GPURR_REPLAY_STRINGIFY(x)
#define GPURR_REPLAY_STRINGIFY(x) #x

bool ReplayDriver::load(std::string& error) {
  void* lib = kernels::openCudaDriver(error);
  if (lib == nullptr) return false;
  // Names go through the preprocessor first, so that cuda.h's versioned
  // aliases (cuStreamDestroy -> cuStreamDestroy_v2) are looked up.
#define GPURR_RESOLVE_REPLAY_FN(name)                                                              \
  name = reinterpret_cast<decltype(name)>(dlsym(lib, GPURR_REPLAY_STRINGIFY_EXPANDED(name)));      \
  if (name == nullptr) {                                                                           \
    error = std::string("the CUDA driver lacks ") + GPURR_REPLAY_STRINGIFY_EXPANDED(name) +        \
            " (replay needs a CUDA 12.0 or newer driver)";                                         \
    return false;                                                                                  \
  }
  GPURR_REPLAY_DRIVER_FUNCTIONS(GPURR_RESOLVE_REPLAY_FN)
#undef GPURR_RESOLVE_REPLAY_FN
  return true;
}

}  // namespace gpurr::replay
