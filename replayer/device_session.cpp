// The GPU side shared by one-launch and whole-stream replay (see
// device_session.h).
#include "replayer/device_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "kernels/device_hasher.h"
#include "kernels/driver_api.h"
#include "replayer/replay_driver.h"

namespace gpurr::replay {
namespace {
using namespace gpurr::trace;

std::string uuidText(const CUuuid& u) {
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", static_cast<unsigned char>(u.bytes[i]));
  }
  return s;
}

MachineInfo describeDevice(const kernels::DriverApi& api, CUdevice dev, int ordinal) {
  MachineInfo m;
  m.ordinal = static_cast<uint32_t>(ordinal);
  char name[256] = {};
  if (api.cuDeviceGetName(name, sizeof(name), dev) == CUDA_SUCCESS) m.name = name;
  CUuuid uuid{};
  if (api.cuDeviceGetUuid && api.cuDeviceGetUuid(&uuid, dev) == CUDA_SUCCESS) m.uuid = uuidText(uuid);
  int v = 0;
  if (api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == CUDA_SUCCESS) m.ccMajor = v;
  if (api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == CUDA_SUCCESS) m.ccMinor = v;
  if (api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == CUDA_SUCCESS) m.smCount = v;
  size_t mem = 0;
  if (api.cuDeviceTotalMem(&mem, dev) == CUDA_SUCCESS) m.memoryBytes = mem;
  char bus[64] = {};
  if (api.cuDeviceGetPCIBusId(bus, sizeof(bus), dev) == CUDA_SUCCESS) m.pciBusId = bus;
  int driver = 0;
  if (api.cuDriverGetVersion(&driver) == CUDA_SUCCESS) m.driverVersion = static_cast<uint32_t>(driver);
  return m;
}

}  // namespace

std::string gpuLabel(const MachineInfo& m) {
  return fmt::format("{} {} (sm_{}{})", m.ordinal, m.name, m.ccMajor, m.ccMinor);
}

void loadDriver(kernels::DriverApi& api, ReplayDriver& drv) {
  std::string error;
  if (!api.load(error) || !drv.load(error)) {
    throw ReplayError("no GPU: " + error + "; gpurr replay re-executes kernels and needs an NVIDIA GPU with its driver");
  }
}

DeviceSession::DeviceSession(const kernels::DriverApi& a, const ReplayDriver& d) : api(a), drv(d) {}

DeviceSession::~DeviceSession() {
  hasher_.reset();
  freeBuffers();
  if (start_) api.cuEventDestroy(start_);
  if (stop_) api.cuEventDestroy(stop_);
  if (stream_) drv.cuStreamDestroy(stream_);
  for (auto it = modules_.rbegin(); it != modules_.rend(); ++it) api.cuModuleUnload(*it);
  for (auto it = reservations_.rbegin(); it != reservations_.rend(); ++it) {
    if (it->mapped) drv.cuMemUnmap(it->ptr, it->size);
    drv.cuMemAddressFree(it->ptr, it->size);
  }
  if (contextRetained_) api.cuDevicePrimaryCtxRelease(device_);
}

void DeviceSession::check(CUresult r, const std::string& what) const {
  if (r != CUDA_SUCCESS) throw ReplayError(what + ": " + api.errorText(r));
}

void DeviceSession::open(const std::string& tracePath, uint32_t recordedArch,
                         const std::optional<GpuInfo>& recordedGpu, int device, std::vector<std::string>& warnings) {
  if (CUresult r = api.cuInit(0); r != CUDA_SUCCESS) {
    throw ReplayError("no GPU: cuInit failed: " + api.errorText(r) +
                      "; gpurr replay re-executes kernels and needs an NVIDIA GPU with its driver");
  }
  int count = 0;
  if (CUresult r = api.cuDeviceGetCount(&count); r != CUDA_SUCCESS || count == 0) {
    throw ReplayError("no GPU: the CUDA driver sees no device (" +
                      (r != CUDA_SUCCESS ? api.errorText(r) : std::string("0 devices")) +
                      "); gpurr replay re-executes kernels and needs an NVIDIA GPU");
  }
  std::vector<std::pair<CUdevice, MachineInfo>> devices;
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    if (api.cuDeviceGet(&dev, i) != CUDA_SUCCESS) continue;
    devices.emplace_back(dev, describeDevice(api, dev, i));
  }
  if (devices.empty()) throw ReplayError("no GPU: the CUDA driver lists devices but hands out none");
  const std::string recorded = recordedGpu ? fmt::format("{} (sm_{})", recordedGpu->name, recordedArch)
                                           : fmt::format("sm_{}", recordedArch);
  auto archOf = [](const MachineInfo& m) { return m.ccMajor * 10 + m.ccMinor; };
  // A cubin runs only on its own architecture, and even PTX compiled for
  // another one is no bitwise replay.
  const std::pair<CUdevice, MachineInfo>* chosen = nullptr;
  if (device >= 0) {
    if (device >= static_cast<int>(devices.size())) {
      throw ReplayError(fmt::format("--device {}: this machine has {} GPU(s)", device, devices.size()));
    }
    chosen = &devices[device];
    if (recordedArch != 0 && archOf(chosen->second) != recordedArch) {
      throw ReplayError(fmt::format("{}: recorded on {}, but GPU {} is another architecture; a recorded "
                                    "kernel replays bitwise only on its own architecture",
                                    tracePath, recorded, gpuLabel(chosen->second)));
    }
  } else if (recordedArch == 0) {
    warnings.push_back("the trace does not say which GPU architecture it was recorded on; replaying on GPU 0");
    chosen = &devices.front();
  } else {
    for (const auto& d : devices) {
      if (archOf(d.second) == recordedArch) {
        chosen = &d;
        break;
      }
    }
    if (chosen == nullptr) {
      std::string here;
      for (const auto& d : devices) here += (here.empty() ? "" : ", ") + gpuLabel(d.second);
      throw ReplayError(fmt::format("{}: recorded on {}, but this machine has {}: a recorded kernel replays "
                                    "bitwise only on a GPU of the recording's architecture",
                                    tracePath, recorded, here));
    }
  }
  device_ = chosen->first;
  machine_ = chosen->second;
  CUcontext ctx = nullptr;
  check(api.cuDevicePrimaryCtxRetain(&ctx, device_), "creating a context on GPU " + gpuLabel(machine_));
  contextRetained_ = true;
  check(api.cuCtxSetCurrent(ctx), "making the context current");
}

std::vector<Placement> DeviceSession::place(std::span<const ReservedRange> ranges, bool forceRelocate,
                                            AddressMap& map, std::vector<std::string>& warnings) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  size_t granularity = 0;
  check(drv.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        "querying the memory mapping granularity");
  if (granularity == 0 || (granularity & (granularity - 1)) != 0) granularity = 2 << 20;
  const std::vector<Region> regions = groupIntoRegions(ranges, granularity);
  // Every region at its recorded place first, then the ones that did not fit
  // anywhere else, so that a relocated region cannot take a place that
  // another region was recorded at.
  std::vector<CUdeviceptr> placed(regions.size(), 0);
  if (!forceRelocate) {
    for (size_t i = 0; i < regions.size(); ++i) {
      CUdeviceptr got = 0;
      const CUresult r = drv.cuMemAddressReserve(&got, regions[i].size, granularity, regions[i].start, 0);
      if (r != CUDA_SUCCESS) continue;
      // The address is only a hint: anything else means it was taken.
      if (got != regions[i].start) {
        drv.cuMemAddressFree(got, regions[i].size);
        continue;
      }
      placed[i] = got;
      reservations_.push_back({got, regions[i].size, false});
    }
  }
  for (size_t i = 0; i < regions.size(); ++i) {
    if (placed[i] != 0) continue;
    const Region& region = regions[i];
    CUdeviceptr got = 0;
    check(drv.cuMemAddressReserve(&got, region.size, granularity, 0, 0),
          fmt::format("reserving {} of device address space", humanBytes(region.size)));
    if (got == region.start) {
      // --relocate asked for another place: hold this one while taking a second.
      CUdeviceptr other = 0;
      const CUresult r = drv.cuMemAddressReserve(&other, region.size, granularity, 0, 0);
      drv.cuMemAddressFree(got, region.size);
      check(r, fmt::format("reserving {} of device address space", humanBytes(region.size)));
      got = other;
    }
    placed[i] = got;
    reservations_.push_back({got, region.size, false});
  }
  std::vector<Placement> placements;
  for (size_t i = 0; i < regions.size(); ++i) {
    map.place(regions[i].start, regions[i].size, placed[i]);
    Placement p{regions[i].start, regions[i].size, placed[i], {}};
    for (size_t m : regions[i].members) p.allocations.push_back(ranges[m].allocation);
    placements.push_back(std::move(p));
  }

  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (Reservation& res : reservations_) {
    if (res.mapped) continue;
    CUmemGenericAllocationHandle handle = 0;
    check(drv.cuMemCreate(&handle, res.size, &prop, 0),
          fmt::format("allocating {} of GPU memory for the recorded ranges", humanBytes(res.size)));
    const CUresult mapped = drv.cuMemMap(res.ptr, res.size, 0, handle, 0);
    // The mapping keeps the memory alive; the handle is not needed after it.
    drv.cuMemRelease(handle);
    check(mapped, fmt::format("mapping {} at {:#x}", humanBytes(res.size), res.ptr));
    res.mapped = true;
    check(drv.cuMemSetAccess(res.ptr, res.size, &access, 1), fmt::format("enabling access to {:#x}", res.ptr));
  }
  if (map.moved()) {
    size_t moved = 0;
    for (const Placement& p : placements) moved += p.relocated();
    warnings.push_back(fmt::format(
        "{} of {} address region(s) could not be placed at their recorded addresses{}; pointer parameters "
        "were rewritten, but pointers stored inside device buffers cannot be",
        moved, placements.size(), forceRelocate ? " (--relocate)" : ""));
  }
  return placements;
}

uint64_t DeviceSession::reservedBytes() const {
  uint64_t bytes = 0;
  for (const Reservation& r : reservations_) bytes += r.size;
  return bytes;
}

void DeviceSession::zeroReserved() {
  for (const Reservation& res : reservations_) {
    check(drv.cuMemsetD8Async(res.ptr, 0, res.size, stream_), "zeroing the reserved memory");
  }
}

void DeviceSession::createStream() {
  check(drv.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "creating a stream");
  check(api.cuEventCreate(&start_, CU_EVENT_DEFAULT), "creating an event");
  check(api.cuEventCreate(&stop_, CU_EVENT_DEFAULT), "creating an event");
  std::string error;
  hasher_ = kernels::DeviceHasher::create(api, error);
  if (!hasher_) throw ReplayError("loading the hash kernel: " + error);
}

CUmodule DeviceSession::loadModule(const std::string& tracePath, uint32_t ordinal, std::span<const uint8_t> image) {
  CUmodule module = nullptr;
  if (CUresult r = api.cuModuleLoadData(&module, image.data()); r != CUDA_SUCCESS) {
    const std::string hint = r == CUDA_ERROR_NO_BINARY_FOR_GPU
                                 ? fmt::format(" (the image has no code for sm_{}{})", machine_.ccMajor, machine_.ccMinor)
                                 : "";
    throw ReplayError(
        fmt::format("{}: loading the image of module #{}{}: {}", tracePath, ordinal, hint, api.errorText(r)));
  }
  modules_.push_back(module);
  return module;
}

CUfunction DeviceSession::function(CUmodule module, const std::string& name, const std::string& tracePath,
                                   uint32_t ordinal) {
  CUfunction function = nullptr;
  if (CUresult r = api.cuModuleGetFunction(&function, module, name.c_str()); r != CUDA_SUCCESS) {
    throw ReplayError(
        fmt::format("{}: module #{} has no function {}: {}", tracePath, ordinal, name, api.errorText(r)));
  }
  return function;
}

PreparedLaunch DeviceSession::prepareLaunch(CUfunction function, const KernelLaunch& launch,
                                            std::vector<uint8_t> params, const AddressMap& map,
                                            std::vector<std::string>& warnings) {
  PreparedLaunch p;
  p.function = function;
  p.params = std::move(params);
  if (launch.sharedMemBytes > 0) {
    check(drv.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 static_cast<int>(launch.sharedMemBytes)),
          fmt::format("allowing {} of dynamic shared memory for {}", humanBytes(launch.sharedMemBytes),
                      launch.function));
  }
  Dim3 cluster = launch.cluster;
  bool clusterAttr = false, cooperativeAttr = false;
  for (const LaunchAttribute& a : launch.attributes) {
    if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION && a.value.size() >= 12) {
      std::memcpy(&cluster, a.value.data(), 12);
      clusterAttr = true;
    }
    cooperativeAttr |= a.id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  }
  int compiledClusterWidth = 0;
  drv.cuFuncGetAttribute(&compiledClusterWidth, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, function);
  const uint64_t clusterBlocks = uint64_t{cluster.x} * cluster.y * cluster.z;
  if (clusterBlocks > 8) {
    if (CUresult r = drv.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
        r != CUDA_SUCCESS) {
      warnings.push_back("cannot allow a non-portable cluster size of " + std::to_string(clusterBlocks) +
                         " blocks: " + api.errorText(r));
    }
  }
  for (const LaunchAttribute& a : launch.attributes) {
    if (!replayableAttribute(a.id)) continue;
    CUlaunchAttribute x{};
    x.id = static_cast<CUlaunchAttributeID>(a.id);
    std::memcpy(&x.value, a.value.data(), std::min(a.value.size(), sizeof(x.value)));
    if (a.id == CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW) {
      // A cache hint over a recorded address range: it moves with the range.
      const auto base = reinterpret_cast<uint64_t>(x.value.accessPolicyWindow.base_ptr);
      x.value.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(map.translate(base));
    }
    p.attrs.push_back(x);
  }
  const bool cooperative =
      launch.api == LaunchApi::kLaunchCooperative || launch.api == LaunchApi::kLaunchCooperativePtsz;
  if (cooperative && !cooperativeAttr) {
    CUlaunchAttribute x{};
    x.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    x.value.cooperative = 1;
    p.attrs.push_back(x);
  }
  if (clusterBlocks > 0 && !clusterAttr && compiledClusterWidth == 0) {
    CUlaunchAttribute x{};
    x.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    x.value.clusterDim.x = cluster.x;
    x.value.clusterDim.y = cluster.y;
    x.value.clusterDim.z = cluster.z;
    p.attrs.push_back(x);
  }
  p.config.gridDimX = launch.grid.x;
  p.config.gridDimY = launch.grid.y;
  p.config.gridDimZ = launch.grid.z;
  p.config.blockDimX = launch.block.x;
  p.config.blockDimY = launch.block.y;
  p.config.blockDimZ = launch.block.z;
  p.config.sharedMemBytes = launch.sharedMemBytes;
  p.config.hStream = stream_;
  return p;
}

CUresult DeviceSession::launch(PreparedLaunch& p) const {
  // Pointers into `p` are taken here, not kept in it, so that it can move.
  p.config.attrs = p.attrs.empty() ? nullptr : p.attrs.data();
  p.config.numAttrs = static_cast<unsigned>(p.attrs.size());
  size_t paramBytes = p.params.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, p.params.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &paramBytes,
                   CU_LAUNCH_PARAM_END};
  return drv.cuLaunchKernelEx(&p.config, p.function, nullptr, p.params.empty() ? nullptr : extra);
}

CUdeviceptr DeviceSession::tryAlloc(uint64_t size) {
  CUdeviceptr p = 0;
  if (api.cuMemAlloc(&p, size) != CUDA_SUCCESS) return 0;
  buffers_.push_back(p);
  return p;
}

void DeviceSession::freeBuffers() {
  for (CUdeviceptr p : buffers_) api.cuMemFree(p);
  buffers_.clear();
}

std::vector<uint8_t> DeviceSession::download(uint64_t address, uint64_t size, const std::string& what) const {
  std::vector<uint8_t> bytes(size);
  if (size == 0) return bytes;
  if (CUresult r = api.cuMemcpyDtoH(bytes.data(), address, size); r != CUDA_SUCCESS) {
    throw ReplayError(fmt::format("copying {} of {} at {:#x} back: {}", humanBytes(size), what, address,
                                  api.errorText(r)));
  }
  return bytes;
}

}  // namespace gpurr::replay
