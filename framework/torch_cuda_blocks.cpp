// libgpurr_torch_cuda.so: the blocks PyTorch's CUDA caching allocator hands
// out and takes back, reported to the recorder so a launch's ranges end with
// the tensor's block instead of running on to the segment's end
// (FORMAT.md, RangeBound). Loaded by the PyTorch layer once CUDA is
// initialised (the allocator attaches trackers to the devices it has then),
// only into the PyTorch version it was built against.
//
// The tracker runs under the allocator's lock: it only calls the recorder,
// which takes a lock of its own and never calls PyTorch.
#include <dlfcn.h>

#include <c10/cuda/CUDACachingAllocator.h>

#include <exception>

#include "recorder/framework_api.h"

namespace {
decltype(&gpurr_framework_block) reportBlock = nullptr;
bool installed = false;
}  // namespace

// 0: installed; -1: the recorder lacks the function; -2: this allocator
// takes no trackers (backend:cudaMallocAsync, where every tensor is its own
// allocation and needs none).
extern "C" __attribute__((visibility("default"))) int gpurr_torch_cuda_install(void* recorder) {
  if (installed) return 0;
  reportBlock = reinterpret_cast<decltype(&gpurr_framework_block)>(dlsym(recorder, "gpurr_framework_block"));
  if (reportBlock == nullptr) return -1;
  using c10::CachingDeviceAllocator::TraceEntry;
  try {
    c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker([](const TraceEntry& e) {
      switch (e.action_) {
        case TraceEntry::ALLOC:
          reportBlock(e.addr_, e.size_, 1);
          break;
        case TraceEntry::FREE_REQUESTED:
        case TraceEntry::FREE_COMPLETED:
          reportBlock(e.addr_, 0, 0);
          break;
        default:
          break;
      }
    });
  } catch (const std::exception&) {
    return -2;
  }
  installed = true;
  return 0;
}
