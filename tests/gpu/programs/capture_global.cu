// One thread captures a CUDA graph in global mode (torch.cuda.graph's
// default) and keeps the capture open while another thread launches kernels
// that the recorder hashes, so the recorder's trace thread waits on its
// events during the capture. Global mode forbids "potentially unsafe" calls
// on every other thread in global mode: a recorder that made them there would
// invalidate the capture (cudaStreamEndCapture fails) or fail its own calls.
// The program itself makes none while the capture is open: the eager
// launches are only issued then (a synchronising call such as
// cudaStreamSynchronize would fail on any thread during a global-mode
// capture), and their stream is synchronised once the capture has ended.
// The graph is then launched; two recordings give the same output.
#include <atomic>
#include <thread>

#include "common.h"

__global__ void scale(float* a, int n, float factor) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] * factor + 1.0f;
}

int main() {
  requireGpu();
  const int n = 1 << 18;
  const int blocks = (n + 255) / 256;
  float* captured = zeroedAlloc<float>(n);
  float* eager = zeroedAlloc<float>(n);
  CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t cs, es;
  CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&es, cudaStreamNonBlocking));

  std::atomic<int> phase{0};  // 1: capture open, 2: eager work issued
  cudaGraph_t graph = nullptr;
  cudaError_t endStatus = cudaSuccess;
  std::thread capturer([&] {
    CUDA_CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < 4; ++i) scale<<<blocks, 256, 0, cs>>>(captured, n, 0.5f);
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
    endStatus = cudaStreamEndCapture(cs, &graph);
  });
  while (phase.load() != 1) std::this_thread::yield();
  // While the capture is open: eager launches, each hashed by the recorder.
  // Their stream is synchronised only after the capture ended: synchronising
  // calls are not permitted on any thread during a global-mode capture.
  for (int i = 0; i < 16; ++i) scale<<<blocks, 256, 0, es>>>(eager, n, 0.9f);
  CUDA_CHECK(cudaGetLastError());
  phase = 2;
  capturer.join();
  CUDA_CHECK(cudaStreamSynchronize(es));
  if (endStatus != cudaSuccess) {
    std::fprintf(stderr, "capture_global: cudaStreamEndCapture failed: %s (the capture was invalidated)\n",
                 cudaGetErrorString(endStatus));
    return 1;
  }
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphLaunch(exec, cs));
  CUDA_CHECK(cudaStreamSynchronize(cs));
  float host[2];
  CUDA_CHECK(cudaMemcpy(&host[0], captured + 7, sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&host[1], eager + 7, sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("capture_global: captured[7] %.9g eager[7] %.9g\n", host[0], host[1]);
  return 0;
}
