// libprobe_kernels.so: launches and allocations made through the CUDA
// runtime (the shared libcudart.so.13), for the probes that ask what the
// runtime raises. cupti_probe dlopens it by path after it has subscribed,
// so that the runtime's own start and fatbin registration are seen too.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

__global__ void rt_mark(unsigned* d, unsigned n, unsigned seed) {
  const unsigned i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x;
  if (i < n) d[i] = i + seed;
}

#define EXPORT extern "C" __attribute__((visibility("default")))

// <<<>>>: __cudaLaunchKernel in CUDA 13, with a known geometry (P2.9).
EXPORT int rt_chevron(unsigned* d, unsigned n, void* stream) {
  rt_mark<<<dim3(3, 2, 1), dim3(32, 2, 1), 48, static_cast<cudaStream_t>(stream)>>>(d, n, 0x5eedu);
  return static_cast<int>(cudaGetLastError());
}

EXPORT int rt_launch_kernel(unsigned* d, unsigned n) {
  unsigned seed = 1;
  void* args[] = {&d, &n, &seed};
  return static_cast<int>(cudaLaunchKernel(reinterpret_cast<const void*>(rt_mark), dim3(4), dim3(64), args, 0, nullptr));
}

EXPORT int rt_launch_kernel_exc(unsigned* d, unsigned n) {
  unsigned seed = 2;
  void* args[] = {&d, &n, &seed};
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(4);
  config.blockDim = dim3(64);
  return static_cast<int>(cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(rt_mark), args));
}

// The cudaKernel_t of rt_mark (what __cudaLaunchKernel should carry).
EXPORT int rt_get_kernel(void** kernel) {
  cudaKernel_t k = nullptr;
  const cudaError_t e = cudaGetKernel(&k, reinterpret_cast<const void*>(rt_mark));
  *kernel = reinterpret_cast<void*>(k);
  return static_cast<int>(e);
}

EXPORT int rt_sync() { return static_cast<int>(cudaDeviceSynchronize()); }

EXPORT const char* rt_error_name(int e) { return cudaGetErrorName(static_cast<cudaError_t>(e)); }

// One runtime allocation API each, allocate then free (P4.1, P4.4).
EXPORT int rt_alloc(const char* what) {
  const size_t bytes = size_t(4) << 20;
  cudaError_t e = cudaSuccess;
  void* p = nullptr;
  switch (what[0]) {
    case 'm':  // cudaMalloc
      if ((e = cudaMalloc(&p, bytes)) == cudaSuccess) e = cudaFree(p);
      break;
    case 'a': {  // cudaMallocAsync
      cudaStream_t s = nullptr;
      if ((e = cudaStreamCreate(&s)) != cudaSuccess) break;
      if ((e = cudaMallocAsync(&p, bytes, s)) == cudaSuccess) e = cudaFreeAsync(p, s);
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
      break;
    }
    case 'h':  // cudaMallocHost
      if ((e = cudaMallocHost(&p, bytes)) == cudaSuccess) e = cudaFreeHost(p);
      break;
    case 'H':  // cudaHostAlloc (PyTorch's CachingHostAllocator)
      if ((e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault)) == cudaSuccess) e = cudaFreeHost(p);
      break;
    case 'r': {  // cudaHostRegister
      p = std::aligned_alloc(4096, bytes);
      if ((e = cudaHostRegister(p, bytes, cudaHostRegisterDefault)) == cudaSuccess) e = cudaHostUnregister(p);
      std::free(p);
      break;
    }
    case 'g': {  // cudaMallocManaged
      if ((e = cudaMallocManaged(&p, bytes)) == cudaSuccess) e = cudaFree(p);
      break;
    }
    default:
      return -1;
  }
  return static_cast<int>(e);
}
