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
#include "replayer/device_session.h"
#include "replayer/replay_driver.h"
#include "trace_format/trace.h"

namespace gpurr::replay {
namespace {
using namespace gpurr::trace;
using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

ReplayOutcome executeReplay(const TraceReader& reader, const ReplayPlan& plan, const ReplayOptions& options) {
  kernels::DriverApi api;
  ReplayDriver drv;
  loadDriver(api, drv);
  return executeReplay(reader, plan, options, api, drv);
}

ReplayOutcome executeReplay(const TraceReader& reader, const ReplayPlan& plan, const ReplayOptions& options,
                            const kernels::DriverApi& api, const ReplayDriver& drv) {
  const auto t0 = Clock::now();
  ReplayOutcome out;
  out.warnings = plan.warnings;
  const uint32_t repeat = std::max<uint32_t>(options.repeat, 1);
  DeviceSession s(api, drv);
  s.open(plan.tracePath, plan.recordedArch, plan.recordedGpu, options.device, out.warnings);
  out.machine = s.machine();

  // Address space first, before the image, the hash kernel or anything else
  // can take the recorded addresses.
  AddressMap map;
  out.placements = s.place(plan.ranges, options.forceRelocate, map, out.warnings);
  out.relocated = map.moved();

  // The recorded image and function.
  const std::vector<uint8_t> image = reader.readBlob(plan.module.image);
  const CUmodule module = s.loadModule(plan.tracePath, plan.module.ordinal, image);
  const CUfunction function = s.function(module, plan.launch.function, plan.tracePath, plan.module.ordinal);
  s.createStream();
  const KernelLaunch& launch = plan.launch;
  PreparedLaunch prepared = s.prepareLaunch(function, launch, relocateParams(plan, map), map, out.warnings);

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
  std::vector<CUdeviceptr> staging;
  for (const std::vector<uint8_t>& bytes : inputs) {
    const CUdeviceptr copy = s.tryAlloc(bytes.size());
    if (copy == 0) {
      out.restoredFromDevice = false;
      break;
    }
    staging.push_back(copy);
    s.check(api.cuMemcpyHtoD(copy, bytes.data(), bytes.size()), "copying an input snapshot to the GPU");
  }
  if (!out.restoredFromDevice) {
    s.freeBuffers();
    staging.clear();
    out.warnings.push_back(fmt::format("no GPU memory left for device copies of the inputs ({}): they are "
                                       "restored from host memory before each run",
                                       humanBytes(out.restoredBytes)));
  } else {
    for (std::vector<uint8_t>& bytes : inputs) std::vector<uint8_t>().swap(bytes);
  }

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
    s.zeroReserved();
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      const uint64_t size = plan.inputs[i].range.size;
      const CUresult r = out.restoredFromDevice
                             ? drv.cuMemcpyDtoDAsync(inputRanges[i].address, staging[i], size, s.stream())
                             : drv.cuMemcpyHtoDAsync(inputRanges[i].address, inputs[i].data(), size, s.stream());
      s.check(r, "restoring input " + describeRange(plan.inputs[i].range));
    }
    s.check(api.cuStreamSynchronize(s.stream()), "restoring the inputs");
    out.restoreMs.push_back(msSince(restoreStart));

    s.check(api.cuEventRecord(s.startEvent(), s.stream()), "recording an event");
    s.check(s.launch(prepared),
            fmt::format("launching {} grid ({},{},{}) block ({},{},{})", launch.function, launch.grid.x,
                        launch.grid.y, launch.grid.z, launch.block.x, launch.block.y, launch.block.z));
    s.check(api.cuEventRecord(s.stopEvent(), s.stream()), "recording an event");
    if (CUresult r = api.cuStreamSynchronize(s.stream()); r != CUDA_SUCCESS) {
      throw ReplayError(fmt::format("the replayed kernel failed on run {}: {}{}", run + 1, api.errorText(r),
                                    out.relocated ? " (memory was relocated: a pointer stored in device memory "
                                                    "may still hold a recorded address)"
                                                  : ""));
    }
    float ms = 0;
    api.cuEventElapsedTime(&ms, s.startEvent(), s.stopEvent());
    out.kernelMs.push_back(ms);

    const auto hashStart = Clock::now();
    s.check(s.hasher().hashNow(s.stream(), requests, hashed, true), "hashing the outputs");
    out.hashMs.push_back(msSince(hashStart));
    std::vector<uint64_t> digests;
    for (const kernels::HashResult& h : hashed) digests.push_back(h.digest);
    if (run == 0) {
      for (const kernels::HashResult& h : hashed) firstChunks.push_back(h.chunkDigests);
      if (keepBytes) {
        for (const kernels::HashRequest& q : requests) firstBytes.push_back(s.download(q.address, q.length, "output"));
      }
    } else if (out.acrossRunsOther == 0 && digests != out.runs[0]) {
      out.acrossRunsOther = run;
      for (const kernels::HashResult& h : hashed) otherChunks.push_back(h.chunkDigests);
      if (keepBytes) {
        for (const kernels::HashRequest& q : requests) otherBytes.push_back(s.download(q.address, q.length, "output"));
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
  out.environment = environmentDifferences(plan.header, plan.recordedGpu, out.machine);
  return out;
}

}  // namespace gpurr::replay
