// A kernel launch call's parameters as its CUPTI callback gives them (see
// launch_call.h): the driver's cuLaunchKernel / cuLaunchKernelEx /
// cuLaunchCooperativeKernel, the runtime's cudaLaunchKernel family.
#include "recorder/launch_call.h"

#include <cuda_runtime_api.h>

#include <cstddef>

#include "recorder/callback_data.h"

namespace gpurr::recorder {

namespace {

// __cudaLaunchKernel's parameters (the launch nvcc's <<<>>> emits in CUDA
// 13), in the order crt/device_functions.h declares them;
// generated_cuda_runtime_api_meta.h has no struct for it. cudaKernel_t is a
// CUkernel (both are CUkern_st*).
struct CudaLaunchKernelHandleParams {
  cudaKernel_t kernel;
  dim3 gridDim;
  dim3 blockDim;
  void** args;
  size_t sharedMem;
  cudaStream_t stream;
};

// cudaLaunchKernelExC's attributes are the driver's, field for field.
static_assert(sizeof(cudaLaunchAttribute) == sizeof(CUlaunchAttribute));
static_assert(offsetof(cudaLaunchAttribute, val) == offsetof(CUlaunchAttribute, value));
static_assert(static_cast<int>(cudaLaunchAttributeClusterDimension) ==
              static_cast<int>(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION));

// The fields cuLaunchKernel's and cuLaunchCooperativeKernel's parameter
// structs share (generated_cuda_meta.h), by name.
template <typename P>
void readLaunchParams(const P& p, LaunchCall& call) {
  trace::KernelLaunch& k = call.launch;
  call.function = u64(p.f);
  k.grid = {p.gridDimX, p.gridDimY, p.gridDimZ};
  k.block = {p.blockDimX, p.blockDimY, p.blockDimZ};
  k.sharedMemBytes = p.sharedMemBytes;
  k.stream = u64(p.hStream);
  call.kernelParams = p.kernelParams;
}

}  // namespace

trace::LaunchApi launchApi(Handler h, bool perThread) {
  switch (h) {
    case Handler::kLaunchKernelEx:
      return perThread ? trace::LaunchApi::kLaunchKernelExPtsz : trace::LaunchApi::kLaunchKernelEx;
    case Handler::kLaunchCooperative:
      return perThread ? trace::LaunchApi::kLaunchCooperativePtsz : trace::LaunchApi::kLaunchCooperative;
    default:
      return perThread ? trace::LaunchApi::kLaunchKernelPtsz : trace::LaunchApi::kLaunchKernel;
  }
}

void LaunchCall::setAttributes(const CUlaunchAttribute* a, unsigned n) {
  attrs = a;
  numAttrs = a != nullptr ? n : 0;
  for (unsigned i = 0; i < numAttrs; ++i) {
    trace::LaunchAttribute la;
    la.id = static_cast<uint32_t>(a[i].id);
    const auto* v = reinterpret_cast<const uint8_t*>(&a[i].value);
    la.value.assign(v, v + sizeof(a[i].value));
    launch.attributes.push_back(std::move(la));
    if (a[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
      launch.cluster = {a[i].value.clusterDim.x, a[i].value.clusterDim.y, a[i].value.clusterDim.z};
  }
}

void LaunchCall::moveInto(trace::KernelLaunch& k) {
  k.grid = launch.grid;
  k.block = launch.block;
  k.cluster = launch.cluster;
  k.sharedMemBytes = launch.sharedMemBytes;
  k.stream = launch.stream;
  k.attributes.swap(launch.attributes);
}

bool driverLaunchCall(Handler h, bool perThread, const CUpti_CallbackData& cb, LaunchCall& call) {
  call.handler = h;
  call.perThread = perThread;
  trace::KernelLaunch& k = call.launch;
  if (h == Handler::kLaunchKernelEx) {
    const auto& p = params<cuLaunchKernelEx_params>(cb);
    if (p.config == nullptr) return false;
    const CUlaunchConfig& c = *p.config;
    call.function = u64(p.f);
    k.grid = {c.gridDimX, c.gridDimY, c.gridDimZ};
    k.block = {c.blockDimX, c.blockDimY, c.blockDimZ};
    k.sharedMemBytes = c.sharedMemBytes;
    k.stream = u64(c.hStream);
    call.setAttributes(c.attrs, c.numAttrs);
    call.kernelParams = p.kernelParams;
    call.extra = p.extra;
  } else if (h == Handler::kLaunchCooperative) {
    readLaunchParams(params<cuLaunchCooperativeKernel_params>(cb), call);
  } else {
    const auto& p = params<cuLaunchKernel_params>(cb);
    readLaunchParams(p, call);
    call.extra = p.extra;
  }
  return true;
}

LaunchCall runtimeLaunchCall(const RuntimeEntry& e, const CUpti_CallbackData& cb) {
  LaunchCall call;
  call.perThread = e.perThread;
  trace::KernelLaunch& k = call.launch;
  auto plain = [&](const void* func, dim3 grid, dim3 block, void** args, size_t shm, cudaStream_t stream) {
    call.hostFunction = u64(func);
    k.grid = {grid.x, grid.y, grid.z};
    k.block = {block.x, block.y, block.z};
    k.sharedMemBytes = static_cast<uint32_t>(shm);
    k.stream = u64(stream);
    call.kernelParams = args;
  };
  switch (e.launch) {
    case RuntimeLaunch::kLaunchKernel: {
      const auto& p = params<cudaLaunchKernel_v7000_params>(cb);
      call.handler = Handler::kLaunchKernel;
      plain(p.func, p.gridDim, p.blockDim, p.args, p.sharedMem, p.stream);
      break;
    }
    case RuntimeLaunch::kLaunchCooperative: {
      const auto& p = params<cudaLaunchCooperativeKernel_v9000_params>(cb);
      call.handler = Handler::kLaunchCooperative;
      plain(p.func, p.gridDim, p.blockDim, p.args, p.sharedMem, p.stream);
      break;
    }
    case RuntimeLaunch::kLaunchKernelHandle: {
      const auto& p = params<CudaLaunchKernelHandleParams>(cb);
      call.handler = Handler::kLaunchKernel;
      plain(nullptr, p.gridDim, p.blockDim, p.args, p.sharedMem, p.stream);
      call.function = u64(p.kernel);  // a CUkernel, described as the driver's are
      break;
    }
    case RuntimeLaunch::kLaunchKernelExC: {
      const auto& p = params<cudaLaunchKernelExC_v11060_params>(cb);
      call.handler = Handler::kLaunchKernelEx;
      if (p.config == nullptr) break;
      const cudaLaunchConfig_t& c = *p.config;
      plain(p.func, c.gridDim, c.blockDim, p.args, c.dynamicSmemBytes, c.stream);
      call.setAttributes(reinterpret_cast<const CUlaunchAttribute*>(c.attrs), c.numAttrs);
      break;
    }
    case RuntimeLaunch::kNone:
      break;
  }
  return call;
}

}  // namespace gpurr::recorder
