// See cuda_driver.h.
#include "cli/cuda_driver.h"

#include <dlfcn.h>

namespace gpurr::cli {

std::optional<std::string> missingCudaDriver() {
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (lib != nullptr) {
    dlclose(lib);
    return std::nullopt;
  }
  const char* error = dlerror();  // clears it: read once
  std::string why = error != nullptr ? error : "not found";
  if (why.rfind("libcuda.so.1: ", 0) == 0) why.erase(0, 14);  // dlerror names the file too
  return "no CUDA driver on this machine (libcuda.so.1: " + why + ")";
}

}  // namespace gpurr::cli
