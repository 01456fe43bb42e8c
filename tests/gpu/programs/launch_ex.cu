// Kernels launched through cuLaunchKernelEx: the driver entry point called
// directly (found with cudaGetDriverEntryPointByVersion, so the program does
// not link libcuda), with launch attributes (a thread-block cluster on
// sm_90+, a stream priority), and through the runtime's cudaLaunchKernelEx.
// Deterministic: two recordings match at every launch, and the recorder must
// see launch attributes and parameters the same way both times.
#include <cuda.h>

#include "common.h"

__global__ void affine(float* y, const float* x, float a, float b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}

struct Params {  // passed by value: pointers inside a struct
  const float* x;
  float* y;
  int n;
  float scale;
};

__global__ void by_struct(Params p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.y[i] = p.x[i] * p.scale;
}

using LaunchKernelEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);

int main() {
  requireGpu();
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &entry, 12000, cudaEnableDefault,
                                              &found));
  if (found != cudaDriverEntryPointSuccess || entry == nullptr) {
    std::fprintf(stderr, "cuLaunchKernelEx not found in the driver\n");
    return 1;
  }
  const auto launchEx = reinterpret_cast<LaunchKernelEx>(entry);
  int device = 0, major = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));

  const int n = 1 << 20;
  const int threads = 256, blocks = n / threads;  // even: clusters of 2 fit
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i % 977) * 0.25f;
  float* x = zeroedAlloc<float>(n);
  float* y = zeroedAlloc<float>(n);
  float* z = zeroedAlloc<float>(n);
  CUDA_CHECK(cudaMemcpy(x, host.data(), sizeof(float) * n, cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, 0));

  cudaFunction_t affineFn;
  CUDA_CHECK(cudaGetFuncBySymbol(&affineFn, reinterpret_cast<const void*>(&affine)));
  CUlaunchAttribute attrs[2] = {};
  unsigned numAttrs = 0;
  attrs[numAttrs].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attrs[numAttrs++].value.priority = 0;
  if (major >= 9) {
    attrs[numAttrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[numAttrs].value.clusterDim.x = 2;
    attrs[numAttrs].value.clusterDim.y = 1;
    attrs[numAttrs++].value.clusterDim.z = 1;
  }
  CUlaunchConfig config{};
  config.gridDimX = blocks;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = threads;
  config.blockDimY = config.blockDimZ = 1;
  config.hStream = reinterpret_cast<CUstream>(stream);
  config.attrs = attrs;
  config.numAttrs = numAttrs;
  float a = 1.5f, b = -2.0f;
  int count = n;
  for (int i = 0; i < 4; ++i) {
    void* args[] = {&y, &x, &a, &b, &count};
    const CUresult r = launchEx(&config, reinterpret_cast<CUfunction>(affineFn), args, nullptr);
    if (r != CUDA_SUCCESS) {
      std::fprintf(stderr, "cuLaunchKernelEx failed: error %d\n", static_cast<int>(r));
      return 1;
    }
    a += 0.25f;
  }

  // The runtime's extensible launch, which reaches the driver as cuLaunchKernelEx too.
  cudaLaunchConfig_t rtConfig{};
  rtConfig.gridDim = dim3(blocks);
  rtConfig.blockDim = dim3(threads);
  rtConfig.stream = stream;
  cudaLaunchAttribute rtAttr{};
  rtAttr.id = cudaLaunchAttributePriority;
  rtAttr.val.priority = 0;
  rtConfig.attrs = &rtAttr;
  rtConfig.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&rtConfig, by_struct, Params{y, z, n, 0.5f}));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaMemcpy(host.data(), z, sizeof(float) * n, cudaMemcpyDeviceToHost));
  double checksum = 0;
  for (float v : host) checksum += v;
  std::printf("launch_ex: clusters %s, checksum %.17g\n", major >= 9 ? "2x1x1" : "none", checksum);
  return 0;
}
