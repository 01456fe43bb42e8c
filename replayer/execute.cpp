// Replay execution on a GPU (see execute.h). Every driver call goes through
// tables resolved at run time (kernels/driver_api.h, replay_driver.h), so this
// code links into `gpurr` without making it depend on libcuda.
#include "replayer/execute.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "kernels/device_hasher.h"
#include "kernels/driver_api.h"
#include "replayer/replay_driver.h"
#include "trace_format/trace.h"

namespace gpurr::replay {
namespace {
using namespace gpurr::trace;
using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string uuidText(const CUuuid& u) {
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", static_cast<unsigned char>(u.bytes[i]));
  }
  return s;
}

// Every GPU resource of one replay, released in reverse order of creation
// whatever way the replay ends (a failed launch leaves the context unusable;
// the releases then fail quietly).
struct Session {
  const kernels::DriverApi& api;
  const ReplayDriver& drv;
  CUdevice device = 0;
  bool contextRetained = false;
  struct Reservation {
    CUdeviceptr ptr = 0;
    size_t size = 0;
    bool mapped = false;
  };
  std::vector<Reservation> reservations;
  std::vector<CUdeviceptr> staging;  // pristine device copies of the inputs
  CUmodule module = nullptr;
  CUstream stream = nullptr;
  CUevent start = nullptr, stop = nullptr;
  std::unique_ptr<kernels::DeviceHasher> hasher;

  Session(const kernels::DriverApi& a, const ReplayDriver& d) : api(a), drv(d) {}
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() {
    hasher.reset();
    for (CUdeviceptr p : staging) api.cuMemFree(p);
    if (start) api.cuEventDestroy(start);
    if (stop) api.cuEventDestroy(stop);
    if (stream) drv.cuStreamDestroy(stream);
    if (module) api.cuModuleUnload(module);
    for (auto it = reservations.rbegin(); it != reservations.rend(); ++it) {
      if (it->mapped) drv.cuMemUnmap(it->ptr, it->size);
      drv.cuMemAddressFree(it->ptr, it->size);
    }
    if (contextRetained) api.cuDevicePrimaryCtxRelease(device);
  }

  void check(CUresult r, const std::string& what) const {
    if (r != CUDA_SUCCESS) throw ReplayError(what + ": " + api.errorText(r));
  }
};

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

std::string gpuLabel(const MachineInfo& m) {
  return fmt::format("{} {} (sm_{}{})", m.ordinal, m.name, m.ccMajor, m.ccMinor);
}

// Chooses the GPU: the one asked for, or the first of the recording's
// architecture. A cubin runs only on its own architecture, and even PTX
// compiled for another one is no bitwise replay.
std::pair<CUdevice, MachineInfo> chooseDevice(const kernels::DriverApi& api, const ReplayPlan& plan,
                                              const ReplayOptions& options, std::vector<std::string>& warnings) {
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
  const std::string recorded =
      plan.recordedGpu ? fmt::format("{} (sm_{})", plan.recordedGpu->name, plan.recordedArch)
                       : fmt::format("sm_{}", plan.recordedArch);
  auto archOf = [](const MachineInfo& m) { return m.ccMajor * 10 + m.ccMinor; };
  if (options.device >= 0) {
    if (options.device >= static_cast<int>(devices.size())) {
      throw ReplayError(fmt::format("--device {}: this machine has {} GPU(s)", options.device, devices.size()));
    }
    const auto& chosen = devices[options.device];
    if (plan.recordedArch != 0 && archOf(chosen.second) != plan.recordedArch) {
      throw ReplayError(fmt::format("{}: recorded on {}, but GPU {} is another architecture; a recorded "
                                    "kernel replays bitwise only on its own architecture",
                                    plan.tracePath, recorded, gpuLabel(chosen.second)));
    }
    return chosen;
  }
  if (plan.recordedArch == 0) {
    warnings.push_back("the trace does not say which GPU architecture it was recorded on; replaying on GPU 0");
    return devices.front();
  }
  for (const auto& d : devices) {
    if (archOf(d.second) == plan.recordedArch) return d;
  }
  std::string here;
  for (const auto& d : devices) here += (here.empty() ? "" : ", ") + gpuLabel(d.second);
  throw ReplayError(fmt::format("{}: recorded on {}, but this machine has {}: a recorded kernel replays "
                                "bitwise only on a GPU of the recording's architecture",
                                plan.tracePath, recorded, here));
}

std::vector<uint8_t> download(const kernels::DriverApi& api, uint64_t address, uint64_t size) {
  std::vector<uint8_t> bytes(size);
  if (size == 0) return bytes;
  if (CUresult r = api.cuMemcpyDtoH(bytes.data(), address, size); r != CUDA_SUCCESS) {
    throw ReplayError(fmt::format("copying {} of output at {:#x} back: {}", humanBytes(size), address,
                                  api.errorText(r)));
  }
  return bytes;
}

}  // namespace

ReplayOutcome executeReplay(const TraceReader& reader, const ReplayPlan& plan, const ReplayOptions& options) {
  kernels::DriverApi api;
  ReplayDriver drv;
  std::string error;
  if (!api.load(error) || !drv.load(error)) {
    throw ReplayError("no GPU: " + error + "; gpurr replay re-executes kernels and needs an NVIDIA GPU with its driver");
  }
  return executeReplay(reader, plan, options, api, drv);
}

ReplayOutcome executeReplay(const TraceReader& reader, const ReplayPlan& plan, const ReplayOptions& options,
                            const kernels::DriverApi& api, const ReplayDriver& drv) {
  const auto t0 = Clock::now();
  ReplayOutcome out;
  out.warnings = plan.warnings;
  const uint32_t repeat = std::max<uint32_t>(options.repeat, 1);
  std::string error;
  if (CUresult r = api.cuInit(0); r != CUDA_SUCCESS) {
    throw ReplayError("no GPU: cuInit failed: " + api.errorText(r) +
                      "; gpurr replay re-executes kernels and needs an NVIDIA GPU with its driver");
  }
  auto [device, machine] = chooseDevice(api, plan, options, out.warnings);
  out.machine = machine;

  Session s(api, drv);
  s.device = device;
  CUcontext ctx = nullptr;
  s.check(api.cuDevicePrimaryCtxRetain(&ctx, device), "creating a context on GPU " + gpuLabel(machine));
  s.contextRetained = true;
  s.check(api.cuCtxSetCurrent(ctx), "making the context current");

  // Address space first, before the image, the hash kernel or anything else
  // can take the recorded addresses.
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granularity = 0;
  s.check(drv.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          "querying the memory mapping granularity");
  if (granularity == 0 || (granularity & (granularity - 1)) != 0) granularity = 2 << 20;
  const std::vector<Region> regions = groupIntoRegions(plan.ranges, granularity);
  AddressMap map;
  // Every region at its recorded place first, then the ones that did not fit
  // anywhere else, so that a relocated region cannot take a place that
  // another region was recorded at.
  std::vector<CUdeviceptr> placed(regions.size(), 0);
  if (!options.forceRelocate) {
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
      s.reservations.push_back({got, regions[i].size, false});
    }
  }
  for (size_t i = 0; i < regions.size(); ++i) {
    if (placed[i] != 0) continue;
    const Region& region = regions[i];
    CUdeviceptr got = 0;
    s.check(drv.cuMemAddressReserve(&got, region.size, granularity, 0, 0),
            fmt::format("reserving {} of device address space", humanBytes(region.size)));
    if (got == region.start) {
      // --relocate asked for another place: hold this one while taking a second.
      CUdeviceptr other = 0;
      const CUresult r = drv.cuMemAddressReserve(&other, region.size, granularity, 0, 0);
      drv.cuMemAddressFree(got, region.size);
      s.check(r, fmt::format("reserving {} of device address space", humanBytes(region.size)));
      got = other;
    }
    placed[i] = got;
    s.reservations.push_back({got, region.size, false});
  }
  for (size_t i = 0; i < regions.size(); ++i) {
    map.place(regions[i].start, regions[i].size, placed[i]);
    Placement p{regions[i].start, regions[i].size, placed[i], {}};
    for (size_t m : regions[i].members) p.allocations.push_back(plan.ranges[m].allocation);
    out.placements.push_back(std::move(p));
  }
  out.relocated = map.moved();

  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (Session::Reservation& res : s.reservations) {
    CUmemGenericAllocationHandle handle = 0;
    s.check(drv.cuMemCreate(&handle, res.size, &prop, 0),
            fmt::format("allocating {} of GPU memory for the recorded ranges", humanBytes(res.size)));
    const CUresult mapped = drv.cuMemMap(res.ptr, res.size, 0, handle, 0);
    // The mapping keeps the memory alive; the handle is not needed after it.
    drv.cuMemRelease(handle);
    s.check(mapped, fmt::format("mapping {} at {:#x}", humanBytes(res.size), res.ptr));
    res.mapped = true;
    s.check(drv.cuMemSetAccess(res.ptr, res.size, &access, 1), fmt::format("enabling access to {:#x}", res.ptr));
  }
  if (out.relocated) {
    size_t moved = 0;
    for (const Placement& p : out.placements) moved += p.relocated();
    out.warnings.push_back(fmt::format(
        "{} of {} address region(s) could not be placed at their recorded addresses{}; pointer parameters "
        "were rewritten, but pointers stored inside device buffers cannot be",
        moved, out.placements.size(), options.forceRelocate ? " (--relocate)" : ""));
  }

  // The recorded image and function.
  const std::vector<uint8_t> image = reader.readBlob(plan.module.image);
  if (CUresult r = api.cuModuleLoadData(&s.module, image.data()); r != CUDA_SUCCESS) {
    s.module = nullptr;
    const std::string hint = r == CUDA_ERROR_NO_BINARY_FOR_GPU
                                 ? fmt::format(" (the image has no code for sm_{}{})", machine.ccMajor, machine.ccMinor)
                                 : "";
    throw ReplayError(fmt::format("{}: loading the image of module #{}{}: {}", plan.tracePath, plan.module.ordinal,
                                  hint, api.errorText(r)));
  }
  CUfunction function = nullptr;
  if (CUresult r = api.cuModuleGetFunction(&function, s.module, plan.launch.function.c_str()); r != CUDA_SUCCESS) {
    throw ReplayError(fmt::format("{}: module #{} has no function {}: {}", plan.tracePath, plan.module.ordinal,
                                  plan.launch.function, api.errorText(r)));
  }

  // Function attributes the launch depended on.
  const KernelLaunch& launch = plan.launch;
  if (launch.sharedMemBytes > 0) {
    s.check(drv.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   static_cast<int>(launch.sharedMemBytes)),
            fmt::format("allowing {} of dynamic shared memory", humanBytes(launch.sharedMemBytes)));
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
      out.warnings.push_back("cannot allow a non-portable cluster size of " + std::to_string(clusterBlocks) +
                             " blocks: " + api.errorText(r));
    }
  }

  std::vector<CUlaunchAttribute> attrs;
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
    attrs.push_back(x);
  }
  const bool cooperative = launch.api == LaunchApi::kLaunchCooperative || launch.api == LaunchApi::kLaunchCooperativePtsz;
  if (cooperative && !cooperativeAttr) {
    CUlaunchAttribute x{};
    x.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    x.value.cooperative = 1;
    attrs.push_back(x);
  }
  if (clusterBlocks > 0 && !clusterAttr && compiledClusterWidth == 0) {
    CUlaunchAttribute x{};
    x.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    x.value.clusterDim.x = cluster.x;
    x.value.clusterDim.y = cluster.y;
    x.value.clusterDim.z = cluster.z;
    attrs.push_back(x);
  }

  s.check(drv.cuStreamCreate(&s.stream, CU_STREAM_NON_BLOCKING), "creating a stream");
  s.check(api.cuEventCreate(&s.start, CU_EVENT_DEFAULT), "creating an event");
  s.check(api.cuEventCreate(&s.stop, CU_EVENT_DEFAULT), "creating an event");
  s.hasher = kernels::DeviceHasher::create(api, error);
  if (!s.hasher) throw ReplayError("loading the hash kernel: " + error);

  // Inputs, read once; relocation cannot reach pointers stored inside them.
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<DeviceRange> inputRanges;
  for (const InputRestore& in : plan.inputs) {
    inputs.push_back(reader.readBlob(in.snapshot));
    inputRanges.push_back(relocateRange(in.range, map));
    out.restoredBytes += in.range.size;
    if (out.relocated) {
      if (auto stored = findStoredPointers(in.range, inputs.back(), map)) {
        out.warnings.push_back(fmt::format(
            "input {} holds {} word(s) that point into relocated memory (first at +{:#x}): pointers stored in "
            "device memory cannot be rewritten, so the kernel may use the recorded addresses",
            describeRange(in.range), stored->count, stored->firstOffset));
      }
    }
  }
  // Pristine device copies of the inputs, so that each run restores them at
  // device-to-device speed; from host memory when the GPU has no room.
  out.restoredFromDevice = true;
  for (const std::vector<uint8_t>& bytes : inputs) {
    CUdeviceptr copy = 0;
    if (api.cuMemAlloc(&copy, bytes.size()) != CUDA_SUCCESS) {
      out.restoredFromDevice = false;
      break;
    }
    s.staging.push_back(copy);
    s.check(api.cuMemcpyHtoD(copy, bytes.data(), bytes.size()), "copying an input snapshot to the GPU");
  }
  if (!out.restoredFromDevice) {
    for (CUdeviceptr p : s.staging) api.cuMemFree(p);
    s.staging.clear();
    out.warnings.push_back(fmt::format("no GPU memory left for device copies of the inputs ({}): they are "
                                       "restored from host memory before each run",
                                       humanBytes(out.restoredBytes)));
  } else {
    for (std::vector<uint8_t>& bytes : inputs) std::vector<uint8_t>().swap(bytes);
  }
  std::vector<uint8_t> params = relocateParams(plan, map);
  size_t paramBytes = params.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &paramBytes,
                   CU_LAUNCH_PARAM_END};

  CUlaunchConfig config{};
  config.gridDimX = launch.grid.x;
  config.gridDimY = launch.grid.y;
  config.gridDimZ = launch.grid.z;
  config.blockDimX = launch.block.x;
  config.blockDimY = launch.block.y;
  config.blockDimZ = launch.block.z;
  config.sharedMemBytes = launch.sharedMemBytes;
  config.hStream = s.stream;
  config.attrs = attrs.empty() ? nullptr : attrs.data();
  config.numAttrs = static_cast<unsigned>(attrs.size());

  std::vector<kernels::HashRequest> requests;
  uint64_t outputBytes = 0;
  for (const OutputCheck& o : plan.outputs) {
    requests.push_back({map.translate(o.range.address), o.range.size});
    outputBytes += o.range.size;
  }
  const bool keepBytes = outputBytes <= options.maxCompareBytes;
  if (!keepBytes) {
    out.warnings.push_back(fmt::format("outputs total {}, more than the {} kept for element-wise comparison; "
                                       "only digests are compared",
                                       humanBytes(outputBytes), humanBytes(options.maxCompareBytes)));
  }
  out.setupMs = msSince(t0);

  std::vector<std::vector<uint64_t>> firstChunks, otherChunks;
  std::vector<std::vector<uint8_t>> firstBytes, otherBytes;
  std::vector<kernels::HashResult> hashed;
  for (uint32_t run = 0; run < repeat; ++run) {
    const auto restoreStart = Clock::now();
    for (const Session::Reservation& res : s.reservations) {
      s.check(drv.cuMemsetD8Async(res.ptr, 0, res.size, s.stream), "zeroing the reserved memory");
    }
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      const uint64_t size = plan.inputs[i].range.size;
      const CUresult r = out.restoredFromDevice
                             ? drv.cuMemcpyDtoDAsync(inputRanges[i].address, s.staging[i], size, s.stream)
                             : drv.cuMemcpyHtoDAsync(inputRanges[i].address, inputs[i].data(), size, s.stream);
      s.check(r, "restoring input " + describeRange(plan.inputs[i].range));
    }
    s.check(api.cuStreamSynchronize(s.stream), "restoring the inputs");
    out.restoreMs.push_back(msSince(restoreStart));

    s.check(api.cuEventRecord(s.start, s.stream), "recording an event");
    s.check(drv.cuLaunchKernelEx(&config, function, nullptr, params.empty() ? nullptr : extra),
            fmt::format("launching {} grid ({},{},{}) block ({},{},{})", launch.function, launch.grid.x,
                        launch.grid.y, launch.grid.z, launch.block.x, launch.block.y, launch.block.z));
    s.check(api.cuEventRecord(s.stop, s.stream), "recording an event");
    if (CUresult r = api.cuStreamSynchronize(s.stream); r != CUDA_SUCCESS) {
      throw ReplayError(fmt::format("the replayed kernel failed on run {}: {}{}", run + 1, api.errorText(r),
                                    out.relocated ? " (memory was relocated: a pointer stored in device memory "
                                                    "may still hold a recorded address)"
                                                  : ""));
    }
    float ms = 0;
    api.cuEventElapsedTime(&ms, s.start, s.stop);
    out.kernelMs.push_back(ms);

    const auto hashStart = Clock::now();
    s.check(s.hasher->hashNow(s.stream, requests, hashed, true), "hashing the outputs");
    out.hashMs.push_back(msSince(hashStart));
    std::vector<uint64_t> digests;
    for (const kernels::HashResult& h : hashed) digests.push_back(h.digest);
    if (run == 0) {
      for (const kernels::HashResult& h : hashed) firstChunks.push_back(h.chunkDigests);
      if (keepBytes) {
        for (const kernels::HashRequest& q : requests) firstBytes.push_back(download(api, q.address, q.length));
      }
    } else if (out.acrossRunsOther == 0 && digests != out.runs[0]) {
      out.acrossRunsOther = run;
      for (const kernels::HashResult& h : hashed) otherChunks.push_back(h.chunkDigests);
      if (keepBytes) {
        for (const kernels::HashRequest& q : requests) otherBytes.push_back(download(api, q.address, q.length));
      }
    }
    out.runs.push_back(std::move(digests));
  }

  out.verdict = judge(plan.outputs, out.runs);

  // The first run against the recording.
  std::vector<RangeState> recorded, replayed;
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    const OutputCheck& o = plan.outputs[i];
    if (!o.recorded) continue;
    out.vsRecordingOutputs.push_back(i);
    RangeState r{o.range, o.digest, o.chunkDigests, std::nullopt, BlobEncoding::kRaw};
    RangeState p{o.range, out.runs[0][i], firstChunks[i], std::nullopt, BlobEncoding::kRaw};
    if (o.snapshot && out.runs[0][i] != o.digest && keepBytes) {
      r.bytes = reader.readBlob(*o.snapshot);
      r.encoding = o.snapshot->encoding;
      p.bytes = firstBytes[i];
    }
    // Chunk digests are compared only where the recording kept them.
    if (r.chunkDigests.empty()) p.chunkDigests.clear();
    recorded.push_back(std::move(r));
    replayed.push_back(std::move(p));
  }
  if (!recorded.empty()) out.vsRecording = StateComparison::compare(recorded, replayed, options.elementType);

  // The first run against the first one that differed from it.
  if (out.acrossRunsOther > 0) {
    std::vector<RangeState> a, b;
    for (size_t i = 0; i < plan.outputs.size(); ++i) {
      RangeState x{plan.outputs[i].range, out.runs[0][i], firstChunks[i], std::nullopt, BlobEncoding::kRaw};
      RangeState y{plan.outputs[i].range, out.runs[out.acrossRunsOther][i], otherChunks[i], std::nullopt,
                   BlobEncoding::kRaw};
      if (keepBytes) {
        x.bytes = std::move(firstBytes[i]);
        y.bytes = std::move(otherBytes[i]);
      }
      a.push_back(std::move(x));
      b.push_back(std::move(y));
    }
    out.acrossRuns = StateComparison::compare(a, b, options.elementType);
  }
  out.environment = environmentDifferences(plan.header, plan.recordedGpu, machine);
  return out;
}

}  // namespace gpurr::replay
