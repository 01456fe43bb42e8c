// A kernel reads memory that nothing wrote in this allocation: a
// stream-ordered allocation gets back the bytes a freed one left, and those
// bytes came from a kernel whose parameter is the process id, so they differ
// from run to run. Known behaviour: two recordings differ first at
// `scribble` (its parameter and output), then at `read_uninit`, whose input
// differs although every recorded write to its allocation (there is none)
// matched. Nothing else differs.
#include <unistd.h>

#include "common.h"

__global__ void scribble(unsigned* a, int n, unsigned salt) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = (static_cast<unsigned>(i) * 2654435761u) ^ salt;
}

__global__ void read_uninit(const unsigned* a, unsigned* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] ^ 0x5a5a5a5au;
}

__global__ void deterministic_tail(unsigned* b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = static_cast<unsigned>(i) * 3u;
}

int main() {
  requireGpu();
  const int n = 1 << 18;
  const size_t bytes = sizeof(unsigned) * n;
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  unsigned* out = zeroedAlloc<unsigned>(n);
  unsigned* tail = zeroedAlloc<unsigned>(n);

  unsigned* first = nullptr;
  CUDA_CHECK(cudaMallocAsync(&first, bytes, stream));
  CUDA_CHECK(cudaMemsetAsync(first, 0, bytes, stream));  // recorded: only `scribble` differs
  scribble<<<(n + 255) / 256, 256, 0, stream>>>(first, n, static_cast<unsigned>(getpid()) * 0x9E3779B9u);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaFreeAsync(first, stream));
  // Same stream, same size: the pool hands the freed block back as it is.
  unsigned* second = nullptr;
  CUDA_CHECK(cudaMallocAsync(&second, bytes, stream));
  read_uninit<<<(n + 255) / 256, 256, 0, stream>>>(second, out, n);
  deterministic_tail<<<(n + 255) / 256, 256, 0, stream>>>(tail, n);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(stream));
  unsigned sample = 0;
  CUDA_CHECK(cudaMemcpy(&sample, out + 1, sizeof sample, cudaMemcpyDeviceToHost));
  std::printf("uninit_read: reused the freed block: %s, out[1] %u\n",
              first == second ? "yes" : "no", sample);
  CUDA_CHECK(cudaFreeAsync(second, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return 0;
}
