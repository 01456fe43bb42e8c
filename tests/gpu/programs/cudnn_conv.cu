// A cuDNN convolution (NCHW float, implicit GEMM: a deterministic algorithm)
// followed by a bias kernel, three times. Two recordings match at every
// launch, including the kernels cuDNN launches itself.
#include <cudnn.h>

#include "common.h"

#define CUDNN_CHECK(call)                                                      \
  do {                                                                         \
    const cudnnStatus_t status_ = (call);                                      \
    if (status_ != CUDNN_STATUS_SUCCESS) {                                     \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                   cudnnGetErrorString(status_));                              \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

__global__ void init(float* a, int n, int seed) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = static_cast<float>((i * 7919 + seed * 104729) % 2001 - 1000) / 1000.0f;
}

__global__ void add_channel_bias(float* y, int channels, int plane, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += 0.01f * static_cast<float>((i / plane) % channels);
}

int main() {
  requireGpu();
  const int batch = 8, inC = 16, h = 32, w = 32, outC = 32, kh = 3, kw = 3;
  cudnnHandle_t handle;
  CUDNN_CHECK(cudnnCreate(&handle));
  cudnnTensorDescriptor_t xDesc, yDesc;
  cudnnFilterDescriptor_t wDesc;
  cudnnConvolutionDescriptor_t conv;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&xDesc));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&yDesc));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&wDesc));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(xDesc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, batch, inC, h, w));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(wDesc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, outC, inC, kh, kw));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH));  // no TF32
  int n, c, oh, ow;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv, xDesc, wDesc, &n, &c, &oh, &ow));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(yDesc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, oh, ow));
  const cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspaceBytes = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, xDesc, wDesc, conv, yDesc, algo,
                                                      &workspaceBytes));
  const int xN = batch * inC * h * w, wN = outC * inC * kh * kw, yN = n * c * oh * ow;
  float* x = zeroedAlloc<float>(xN);
  float* wt = zeroedAlloc<float>(wN);
  float* y = zeroedAlloc<float>(yN);
  void* workspace = workspaceBytes ? zeroedAlloc<uint8_t>(workspaceBytes) : nullptr;
  init<<<(xN + 255) / 256, 256>>>(x, xN, 1);
  init<<<(wN + 255) / 256, 256>>>(wt, wN, 2);
  CUDA_CHECK(cudaGetLastError());
  const float alpha = 1.0f, beta = 0.0f;
  for (int step = 0; step < 3; ++step) {
    CUDNN_CHECK(cudnnConvolutionForward(handle, &alpha, xDesc, x, wDesc, wt, conv, algo, workspace,
                                        workspaceBytes, &beta, yDesc, y));
    add_channel_bias<<<(yN + 255) / 256, 256>>>(y, c, oh * ow, yN);
    CUDA_CHECK(cudaGetLastError());
  }
  std::vector<float> host(yN);
  CUDA_CHECK(cudaMemcpy(host.data(), y, sizeof(float) * yN, cudaMemcpyDeviceToHost));
  double checksum = 0;
  for (float v : host) checksum += v;
  std::printf("cudnn_conv: cuDNN %zu, output %dx%dx%dx%d, checksum %.17g\n", cudnnGetVersion(), n, c,
              oh, ow, checksum);
  CUDNN_CHECK(cudnnDestroy(handle));
  return 0;
}
