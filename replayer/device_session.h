// The GPU side shared by one-launch replay (execute.cpp) and whole-stream
// replay (stream_execute.cpp): the GPU of the recorded architecture and its
// context, address space reserved at the recorded addresses (elsewhere when
// taken), recorded images loaded, kernels launched with their recorded
// parameter bytes and attributes, and every resource released at the end.
// Driver calls go through tables resolved at run time, so CPU tests drive
// this with a fake driver.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "replayer/plan.h"
#include "replayer/verdict.h"
#include "trace_format/events.h"

namespace gpurr::kernels {
struct DriverApi;
class DeviceHasher;
}  // namespace gpurr::kernels

namespace gpurr::replay {

struct ReplayDriver;

// Where a region of recorded address space lies on this machine.
struct Placement {
  uint64_t recordedStart = 0;
  uint64_t size = 0;
  uint64_t newStart = 0;
  std::vector<uint32_t> allocations;  // ordinals of the ranges in it (0 = a loose range)
  bool relocated() const { return recordedStart != newStart; }
};

// A kernel launch as recorded, ready for cuLaunchKernelEx: configuration,
// launch attributes that apply in this process, and parameter bytes with
// pointer words already relocated.
struct PreparedLaunch {
  CUfunction function = nullptr;
  CUlaunchConfig config{};
  std::vector<CUlaunchAttribute> attrs;
  std::vector<uint8_t> params;
};

// Every GPU resource of one replay, released in reverse order of creation
// whatever way the replay ends (after a kernel fault the context is
// unusable; the releases then fail quietly).
class DeviceSession {
 public:
  DeviceSession(const kernels::DriverApi& api, const ReplayDriver& drv);
  ~DeviceSession();
  DeviceSession(const DeviceSession&) = delete;
  DeviceSession& operator=(const DeviceSession&) = delete;

  // cuInit, then the GPU asked for (`device` >= 0) or the first of the
  // recorded architecture, its primary context made current. A GPU of
  // another architecture is refused: a cubin is no bitwise replay elsewhere.
  // Throws ReplayError ("no GPU: ..." without a device).
  void open(const std::string& tracePath, uint32_t recordedArch, const std::optional<trace::GpuInfo>& recordedGpu,
            int device, std::vector<std::string>& warnings);
  const MachineInfo& machine() const { return machine_; }

  // Reserves and maps address space for `ranges`, grouped into granule
  // regions: every region at its recorded place first, then the refused ones
  // (and all of them with `forceRelocate`) elsewhere. Fills `map`, warns when
  // something moved. Call before anything else allocates.
  std::vector<Placement> place(std::span<const ReservedRange> ranges, bool forceRelocate, AddressMap& map,
                               std::vector<std::string>& warnings);
  uint64_t reservedBytes() const;

  // Enqueues zeroing of all reserved memory on the session's stream.
  void zeroReserved();

  // Creates the session's stream, two timing events and the hash kernel.
  void createStream();
  CUstream stream() const { return stream_; }
  CUevent startEvent() const { return start_; }
  CUevent stopEvent() const { return stop_; }
  kernels::DeviceHasher& hasher() { return *hasher_; }

  // Loads a recorded image (kept until the session ends) and finds a
  // function in it. Throw ReplayError naming the trace and module.
  CUmodule loadModule(const std::string& tracePath, uint32_t ordinal, std::span<const uint8_t> image);
  CUfunction function(CUmodule module, const std::string& name, const std::string& tracePath, uint32_t ordinal);

  // Sets the function attributes `launch` depended on (dynamic shared memory,
  // non-portable cluster size) and rebuilds its launch attributes for this
  // process, on the session's stream, with `params` as its parameter bytes.
  PreparedLaunch prepareLaunch(CUfunction function, const trace::KernelLaunch& launch, std::vector<uint8_t> params,
                               const AddressMap& map, std::vector<std::string>& warnings);
  // Enqueues it (CU_LAUNCH_PARAM_BUFFER_POINTER with the parameter bytes).
  CUresult launch(PreparedLaunch& launch) const;

  // A device buffer of the session (freed at its end); 0 when the GPU has no room.
  CUdeviceptr tryAlloc(uint64_t size);
  void freeBuffers();

  // Copies device memory to the host; throws ReplayError naming `what`.
  std::vector<uint8_t> download(uint64_t address, uint64_t size, const std::string& what) const;

  // Throws ReplayError "`what`: CUDA_ERROR_..." when `r` is not a success.
  void check(CUresult r, const std::string& what) const;

  const kernels::DriverApi& api;
  const ReplayDriver& drv;

 private:
  struct Reservation {
    CUdeviceptr ptr = 0;
    size_t size = 0;
    bool mapped = false;
  };
  MachineInfo machine_;
  CUdevice device_ = 0;
  bool contextRetained_ = false;
  std::vector<Reservation> reservations_;
  std::vector<CUdeviceptr> buffers_;
  std::vector<CUmodule> modules_;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr, stop_ = nullptr;
  std::unique_ptr<kernels::DeviceHasher> hasher_;
};

// Resolves the driver tables from libcuda.so.1; throws ReplayError ("no GPU:
// ...") where there is no driver.
void loadDriver(kernels::DriverApi& api, ReplayDriver& drv);

// "0 NVIDIA H100 80GB HBM3 (sm_90)" for messages.
std::string gpuLabel(const MachineInfo& m);

}  // namespace gpurr::replay
