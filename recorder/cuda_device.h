// Device implemented with the CUDA driver (resolved at run time): function
// descriptions, capture checks, graph nodes, re-runs, system description.
// Hashes and snapshot copies go to the context's own hashing state
// (context_hashing.h: the hash kernel and a hash ring of pinned,
// device-mapped host memory), made on the context's first hash.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kernels/driver_api.h"
#include "recorder/cupti_library.h"
#include "recorder/device.h"

namespace gpurr::recorder {

struct ContextHashing;

class CudaDevice : public Device {
 public:
  // Null with a reason when the driver cannot be resolved.
  static std::unique_ptr<CudaDevice> create(std::string& error);
  // With a given driver table (tests substitute their own functions).
  static std::unique_ptr<CudaDevice> create(const kernels::DriverApi& api);
  ~CudaDevice() override;

  bool describeFunction(uint64_t function, FunctionInfo& out) override;
  uint64_t runtimeFunction(uint64_t hostFunction) override;
  StreamCapture captureState(uint64_t stream) override;
  bool graphNodes(uint64_t graph, GraphNodes& out, std::string& error) override;
  std::unique_ptr<PendingHashes> hash(uint64_t context, uint64_t stream,
                                      std::span<const kernels::HashRequest> requests, bool synchronous,
                                      std::string& error) override;
  bool defersHashes() override { return true; }
  std::unique_ptr<PendingCopy> copyToHost(uint64_t context, uint64_t stream, uint64_t address, uint64_t size,
                                          bool synchronous, std::string& error) override;
  bool rerunLaunch(uint64_t context, const Relaunch& launch, std::span<const kernels::HashRequest> outputs,
                   uint32_t runs, std::vector<std::vector<uint64_t>>& digests, std::string& error) override;
  uint32_t currentDevice() override;
  uint64_t streamContext(uint64_t stream) override;
  bool blockingStream(uint64_t stream) override;
  bool awaitHashesInFlight(std::string& why) override;
  bool addressRange(uint64_t address, uint64_t& base, uint64_t& size) override;

  void setCheckpointApi(const CheckpointApi& api) { checkpoint_ = api; }
  // cuLaunchKernelEx, which the driver table does not hold (null in tests
  // that give their own table, unless set).
  void setLaunchKernelEx(decltype(&::cuLaunchKernelEx) f) { launchKernelEx_ = f; }
  void describeSystem(trace::Header& header) override;
  void contextDestroying(uint64_t context) override;
  MemoryUse memoryUse() override;
  // How long the trace thread waits for one hash before leaving its digests
  // out (120 s; tests shorten it).
  void setHashWaitLimit(std::chrono::milliseconds limit) { hashWaitLimit_ = limit; }
  // Pinned snapshot staging a context may hold, in use or kept for reuse
  // (the snapshot memory bound, GPURR_SNAPSHOT_MEMORY_MB; 256 MiB unless
  // set). Copies in flight may take more; what they give back beyond it is
  // freed.
  void setStagingLimit(uint64_t bytes) { stagingLimit_ = bytes; }

 private:
  CudaDevice() = default;
  // Each context's hashing state, made on its first hash or copy.
  std::shared_ptr<ContextHashing> stateFor(uint64_t context, std::string& error);
  bool addGraphNodes(CUgraph graph, GraphNodes& out, std::string& error, int depth);

  kernels::DriverApi api_;
  CheckpointApi checkpoint_;
  decltype(&::cuLaunchKernelEx) launchKernelEx_ = nullptr;
  std::chrono::milliseconds hashWaitLimit_{std::chrono::seconds(120)};
  uint64_t stagingLimit_ = uint64_t{256} << 20;
  std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<ContextHashing>> contexts_;
  MemoryUse peak_;  // under mu_: memoryUse()'s largest sum, contexts destroyed since included
  uint64_t pinnedGone_ = 0, deviceGone_ = 0;  // under mu_: what destroyed contexts held at most
};

}  // namespace gpurr::recorder
