// The fake driver callback_bench records through: no GPU, device memory is
// host memory, and the "GPU" is a thread that runs the enqueued work in
// order behind the host (the hash kernel hashes on the CPU). It counts what
// the recorder asks of it on the program's threads: GPU operations, waits,
// allocations, capture queries and capture-mode exchanges, hash launches,
// and heap allocations inside the recorder's callbacks.
#pragma once

#include <cuda.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "kernels/driver_api.h"

namespace gpurr::bench {

// The kernel: a name as long as PyTorch's elementwise kernels' (the
// recorder copies and hashes names), with the layout of linear(out, x, w, n).
inline constexpr const char* kKernelName =
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIfffNS0_15binary_internal10MulFunctorIfEEEESt5"
    "arrayIPcLm3EEEEviT0_T1_";

// A second kernel, with the parameters of PyTorch's elementwise kernels on
// strided tensors (TensorIterator's): three pointers and an
// OffsetCalculator of 25 dimensions, each a divisor (divisor, magic number,
// shift) and three strides. Most of its 8-byte words are small nonzero
// integers, which the recorder must rule out as pointers.
inline const auto kWideKernel = reinterpret_cast<CUfunction>(0x200);
struct OffsetCalculator {
  int32_t dims = 3;
  uint32_t sizes[25][3];
  uint32_t strides[25][3];
  OffsetCalculator() {
    for (uint32_t d = 0; d < 25; ++d) {
      const bool used = d < static_cast<uint32_t>(dims);
      sizes[d][0] = used ? 64 : 1, sizes[d][1] = used ? 0x80000001u : 1, sizes[d][2] = used ? 6 : 0;
      for (uint32_t& stride : strides[d]) stride = used ? 4u << (6 * d) : 0;
    }
  }
};

// Set while the program's thread is inside the recorder's callbacks, and not
// inside the fake driver.
extern thread_local constinit bool inCallbacks;

// The fake GPU: a queue of work run by its own thread, in order. Like a
// GPU's, it holds a bounded number of operations: beyond kQueueDepth, an
// enqueue waits for room (so the program cannot run further ahead of the
// GPU than a real one can).
struct FakeGpu {
  static constexpr size_t kQueueDepth = 1024;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool stop = false;
  std::thread worker;
  std::atomic<uint64_t> enqueued{0}, waits{0}, allocations{0};
  std::atomic<uint64_t> captureQueries{0}, modeExchanges{0}, heapAllocations{0}, hashLaunches{0};
  std::atomic<bool> counting{false};

  FakeGpu() {
    worker = std::thread([this] {
      std::unique_lock lock(mu);
      for (;;) {
        cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;
        auto op = std::move(queue.front());
        lock.unlock();
        op();
        lock.lock();
        queue.pop_front();
        cv.notify_all();
      }
    });
  }
  ~FakeGpu() {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  // Whether the calling thread is a program thread being counted.
  bool onProgram() const;
  // Work the recorder enqueues (counted on the program's threads), and the
  // program's own (`program`: not counted).
  template <typename Op>
  void push(Op&& op, bool program = false) {
    if (!program && onProgram()) ++enqueued;
    const bool inside = std::exchange(inCallbacks, false);  // the fake GPU's allocations are not the recorder's
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return queue.size() < kQueueDepth; });
      queue.emplace_back(std::forward<Op>(op));
      cv.notify_all();
    }
    inCallbacks = inside;
  }
  void drain() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return queue.empty(); });
  }
};
// The fake GPU the driver below enqueues on (set by the benchmark).
extern FakeGpu* gpu;
// Set on the program's threads, whose driver calls are counted.
extern thread_local constinit bool programThread;

// The fake driver's entry points.
kernels::DriverApi fakeApi();

}  // namespace gpurr::bench
