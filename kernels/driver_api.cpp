// Run-time resolution of the driver entry points (see driver_api.h).
#include "kernels/driver_api.h"

#include <dlfcn.h>

#include <string_view>

namespace gpurr::kernels {

namespace {
#define GPURR_STRINGIFY_EXPANDED(x) GPURR_STRINGIFY(x)
#define GPURR_STRINGIFY(x) #x

// Functions introduced after CUDA 12.0 that gpurr can live without.
bool optional(std::string_view name) {
  return name == "cuFuncGetName" || name == "cuFuncGetParamInfo" || name == "cuKernelGetName" ||
         name == "cuKernelGetParamInfo" || name == "cuKernelGetFunction" || name == "cuFuncGetModule" ||
         name == "cuStreamGetCaptureInfo" || name == "cuFuncLoad";
}
}  // namespace

void* openCudaDriver(std::string& error) {
  // RTLD_NOLOAD first: inside a CUDA program the driver is already there.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) {
    const char* why = dlerror();
    error = std::string("cannot load the CUDA driver (libcuda.so.1): ") + (why ? why : "not found");
  }
  return lib;
}

bool DriverApi::load(std::string& error) {
  void* lib = openCudaDriver(error);
  if (lib == nullptr) return false;
#define GPURR_RESOLVE_DRIVER_FN(name)                                                        \
  name = reinterpret_cast<decltype(name)>(dlsym(lib, GPURR_STRINGIFY_EXPANDED(name)));       \
  if (name == nullptr && !optional(#name)) {                                                 \
    error = std::string("the CUDA driver lacks ") + GPURR_STRINGIFY_EXPANDED(name) +         \
            " (driver too old?)";                                                            \
    return false;                                                                            \
  }
  GPURR_DRIVER_FUNCTIONS(GPURR_RESOLVE_DRIVER_FN)
#undef GPURR_RESOLVE_DRIVER_FN
  return true;
}

FirstDevice openFirstDevice(DriverApi& api) {
  FirstDevice d;
  int devices = 0;
  if (!api.load(d.error)) {
    d.absent = true;
    return d;
  }
  if (api.cuInit(0) != CUDA_SUCCESS || api.cuDeviceGetCount(&devices) != CUDA_SUCCESS || devices == 0) {
    d.absent = true;
    d.error = "no CUDA device";
    return d;
  }
  CUresult r = api.cuDeviceGet(&d.device, 0);
  if (r == CUDA_SUCCESS) r = api.cuDevicePrimaryCtxRetain(&d.context, d.device);
  if (r == CUDA_SUCCESS) r = api.cuCtxSetCurrent(d.context);
  if (r != CUDA_SUCCESS) {
    d.error = "cannot make device 0's primary context current: " + api.errorText(r);
    return d;
  }
  d.ok = true;
  return d;
}

std::string DriverApi::errorText(CUresult result) const {
  const char* text = nullptr;
  if (cuGetErrorString != nullptr) cuGetErrorString(result, &text);
  return "CUDA error " + std::to_string(static_cast<int>(result)) + (text ? std::string(" (") + text + ")" : "");
}

}  // namespace gpurr::kernels
