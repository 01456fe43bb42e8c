// gpu_probe: exits 0 when this machine has a usable NVIDIA GPU, 77 (the
// "skipped" code of ctest and run.sh) when it has none. The driver is opened
// with dlopen so that the probe itself starts on any machine.
#include <dlfcn.h>

#include <cstdio>

int main() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    std::printf("no GPU: cannot load libcuda.so.1 (%s)\n", dlerror());
    return 77;
  }
  using Init = int (*)(unsigned);
  using Count = int (*)(int*);
  const auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
  const auto count = reinterpret_cast<Count>(dlsym(driver, "cuDeviceGetCount"));
  int devices = 0;
  if (init == nullptr || count == nullptr || init(0) != 0 || count(&devices) != 0 || devices == 0) {
    std::printf("no GPU: the CUDA driver is installed but finds no usable device\n");
    return 77;
  }
  std::printf("%d GPU%s\n", devices, devices == 1 ? "" : "s");
  return 0;
}
