// libgpurr_torch_cuda.so: the blocks PyTorch's CUDA caching allocator hands
// out and takes back, reported to the recorder so a launch's ranges end with
// the tensor's block instead of running on to the segment's end
// (FORMAT.md, RangeBound). Loaded by the PyTorch layer, only into the
// PyTorch version it was built against. The tracker can only be attached
// once the allocator has started (it attaches to the devices it has then):
// the layer tries when Python starts CUDA (torch.cuda._lazy_call) and, for
// CUDA started from C++ alone (torch.ops.aten.empty, compiled code,
// extensions), at each op until it has.
//
// The tracker runs under the allocator's lock: it only calls the recorder,
// which takes a lock of its own and never calls PyTorch.
#include <dlfcn.h>

#include <c10/cuda/CUDACachingAllocator.h>

#include <atomic>
#include <exception>
#include <mutex>

#include "recorder/framework_api.h"

namespace {
decltype(&gpurr_framework_block) reportBlock = nullptr;
std::atomic<int> outcome{1};  // gpurr_torch_cuda_try_install's answer, once it is not 1
std::mutex installing;
}  // namespace

// Attaches the block tracker once the caching allocator has started.
// 0: attached; 1: the allocator has not started yet (ask again later);
// -1: the recorder lacks the function; -2: this allocator takes no trackers
// (backend:cudaMallocAsync, where every tensor is its own allocation and
// needs none).
extern "C" __attribute__((visibility("default"))) int gpurr_torch_cuda_try_install(void* recorder) {
  if (const int known = outcome.load(std::memory_order_acquire); known != 1) return known;
  c10::cuda::CUDACachingAllocator::CUDAAllocator* allocator = c10::cuda::CUDACachingAllocator::get();
  if (allocator == nullptr || !allocator->initialized()) return 1;
  std::lock_guard lock(installing);
  if (outcome.load() != 1) return outcome.load();
  reportBlock = reinterpret_cast<decltype(&gpurr_framework_block)>(dlsym(recorder, "gpurr_framework_block"));
  if (reportBlock == nullptr) return outcome = -1;
  using c10::CachingDeviceAllocator::TraceEntry;
  try {
    c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker([](const TraceEntry& e) {
      switch (e.action_) {
        case TraceEntry::ALLOC:
          reportBlock(e.addr_, e.size_, 1);
          break;
        case TraceEntry::FREE_REQUESTED:
          // The program is done with the block (FREE_COMPLETED follows, once
          // the streams it was recorded on are too; the allocator hands the
          // block out again only after that).
          reportBlock(e.addr_, 0, 0);
          break;
        default:
          break;
      }
    });
  } catch (const std::exception&) {
    outcome = -2;
    return -2;
  }
  outcome = 0;
  return 0;
}
