// Batch packing and host-side folding for the device hash.
#include "kernels/hash_plan.h"

#include "trace_format/hash.h"
#include "trace_format/hash_primitives.h"

namespace gpurr::kernels {

uint64_t chunkCount(uint64_t length) { return (length + hash::kChunkBytes - 1) / hash::kChunkBytes; }

HashPlan planHashBatch(std::span<const HashRequest> requests) {
  HashPlan plan;
  planHashBatch(requests, plan);
  return plan;
}

void planHashBatch(std::span<const HashRequest> requests, HashPlan& plan) {
  plan.firstSlot.clear();
  plan.ranges.clear();
  plan.totalSlots = 0;
  plan.firstSlot.reserve(requests.size());
  plan.ranges.reserve(requests.size());
  for (const HashRequest& r : requests) {
    plan.firstSlot.push_back(plan.totalSlots);
    if (r.length == 0) continue;
    plan.ranges.push_back({r.address, r.length, plan.totalSlots});
    plan.totalSlots += chunkCount(r.length);
  }
}

uint64_t foldRequest(const HashPlan& plan, std::span<const HashRequest> requests, size_t index,
                     std::span<const uint64_t> chunkDigests) {
  const uint64_t length = requests[index].length;
  return hash::foldChunks(chunkDigests.subspan(plan.firstSlot[index], chunkCount(length)), length);
}

}  // namespace gpurr::kernels
