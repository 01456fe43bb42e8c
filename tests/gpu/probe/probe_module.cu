// Kernels the probes load with the driver API (cuModuleLoadData,
// cuLibraryLoadData), embedded as a fatbin in cupti_probe.
extern "C" __global__ void add_one(unsigned* p, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1u;
}

// Never launched before the lazy-loading probe launches it (one each).
extern "C" __global__ void fresh_a(unsigned* p) { p[threadIdx.x] = 0xa0u + threadIdx.x; }
extern "C" __global__ void fresh_b(unsigned* p) { p[threadIdx.x] = 0xb0u + threadIdx.x; }

__device__ unsigned long long globalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Waits until *flag is non-zero or timeout_ns passed; result: 1 saw the
// flag, 2 gave up.
extern "C" __global__ void spin_wait(volatile unsigned* flag, unsigned* result, unsigned long long timeout_ns) {
  const unsigned long long start = globalTimer();
  while (*flag == 0) {
    if (globalTimer() - start > timeout_ns) {
      *result = 2u;
      return;
    }
  }
  *result = 1u;
}

extern "C" __global__ void set_flag(volatile unsigned* flag) {
  __threadfence_system();
  *flag = 1u;
}
