// The CUDA driver façade of the recorder (see cuda_device.h): functions,
// captures, graphs, re-runs and the system described through the driver;
// each context's hashing state is in context_hashing.cpp.
#include "recorder/cuda_device.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "recorder/context_hashing.h"
#include "recorder/torch_version.h"

namespace gpurr::recorder {

namespace {

// A symbol from a library the program may have loaded (any scope).
void* loadedSymbol(std::initializer_list<const char*> libraries, const char* symbol) {
  if (void* s = dlsym(RTLD_DEFAULT, symbol)) return s;
  for (const char* lib : libraries) {
    if (void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD)) {
      void* s = dlsym(h, symbol);
      dlclose(h);
      if (s) return s;
    }
  }
  return nullptr;
}

}  // namespace

std::unique_ptr<CudaDevice> CudaDevice::create(std::string& error) {
  std::unique_ptr<CudaDevice> d(new CudaDevice());
  if (!d->api_.load(error)) return nullptr;
  std::string ignored;
  if (void* lib = kernels::openCudaDriver(ignored))
    d->launchKernelEx_ = reinterpret_cast<decltype(&::cuLaunchKernelEx)>(dlsym(lib, "cuLaunchKernelEx"));
  return d;
}

std::unique_ptr<CudaDevice> CudaDevice::create(const kernels::DriverApi& api) {
  std::unique_ptr<CudaDevice> d(new CudaDevice());
  d->api_ = api;
  return d;
}

CudaDevice::~CudaDevice() = default;  // at exit the driver may be gone: leak, don't call it

bool CudaDevice::describeFunction(uint64_t function, FunctionInfo& out) {
  // cuKernelGetFunction may load the kernel's module (lazy loading): not a
  // call that may break a capture this thread runs in global mode.
  RelaxedCaptureMode relaxed(api_, captures().mayBeOpen());
  const auto f = reinterpret_cast<CUfunction>(function);
  const auto k = reinterpret_cast<CUkernel>(function);
  const char* name = nullptr;
  bool isKernel = false;
  if (api_.cuFuncGetName && api_.cuFuncGetName(&name, f) == CUDA_SUCCESS && name) {
    out.name = name;
  } else if (api_.cuKernelGetName && api_.cuKernelGetName(&name, k) == CUDA_SUCCESS && name) {
    out.name = name;
    isKernel = true;
  }
  // Parameter layout: ask for parameter 0, 1, 2... until INVALID_VALUE.
  auto layoutOf = [&](auto getInfo, auto handle) -> bool {
    if (getInfo == nullptr) return false;
    out.layout.clear();
    for (size_t i = 0; i < 65536; ++i) {
      size_t offset = 0, size = 0;
      const CUresult r = getInfo(handle, i, &offset, &size);
      if (r == CUDA_ERROR_INVALID_VALUE) return true;
      if (r != CUDA_SUCCESS) return false;
      out.layout.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(size)});
    }
    return true;
  };
  out.layoutKnown = isKernel ? layoutOf(api_.cuKernelGetParamInfo, k) : layoutOf(api_.cuFuncGetParamInfo, f);
  if (!out.layoutKnown && !isKernel) out.layoutKnown = layoutOf(api_.cuKernelGetParamInfo, k);

  CUfunction asFunction = f;
  if (isKernel && (api_.cuKernelGetFunction == nullptr || api_.cuKernelGetFunction(&asFunction, k) != CUDA_SUCCESS))
    asFunction = nullptr;
  CUmodule module = nullptr;
  if (asFunction && api_.cuFuncGetModule && api_.cuFuncGetModule(&module, asFunction) == CUDA_SUCCESS)
    out.module = reinterpret_cast<uint64_t>(module);
  return !out.name.empty();
}

uint64_t CudaDevice::runtimeFunction(uint64_t hostFunction) {
  // cudaError_t cudaGetFuncBySymbol(cudaFunction_t*, const void*): a
  // cudaFunction_t is a CUfunction. PyTorch loads libcudart RTLD_LOCAL, so
  // it is looked up in the loaded library, not in the global scope alone. A
  // program linked with the static runtime exports none of it: 0.
  using GetFuncBySymbol = int (*)(CUfunction*, const void*);
  using LastError = int (*)();
  void* rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
  auto find = [&](const char* name) { return rt != nullptr ? dlsym(rt, name) : dlsym(RTLD_DEFAULT, name); };
  const auto get = reinterpret_cast<GetFuncBySymbol>(find("cudaGetFuncBySymbol"));
  const auto peek = reinterpret_cast<LastError>(find("cudaPeekAtLastError"));
  const auto clear = reinterpret_cast<LastError>(find("cudaGetLastError"));
  if (rt != nullptr) dlclose(rt);  // only drops the reference NOLOAD took
  // A failed lookup sets the thread's last runtime error, which the program
  // reads after its launch (PyTorch checks every launch): look up only while
  // that state holds no error of the program's, and clear ours.
  if (get == nullptr || peek == nullptr || clear == nullptr || peek() != 0) return 0;
  RelaxedCaptureMode relaxed(api_, captures().mayBeOpen());  // the lookup may load the module, as above
  CUfunction f = nullptr;
  if (get(&f, reinterpret_cast<const void*>(hostFunction)) != 0) {
    clear();
    return 0;
  }
  return reinterpret_cast<uint64_t>(f);
}

Device::StreamCapture CudaDevice::captureState(uint64_t stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  const CUresult r = api_.cuStreamGetCaptureInfo != nullptr
                         ? api_.cuStreamGetCaptureInfo(reinterpret_cast<CUstream>(stream), &status, &id, nullptr,
                                                       nullptr, nullptr, nullptr)
                         : api_.cuStreamIsCapturing(reinterpret_cast<CUstream>(stream), &status);
  StreamCapture out;
  // An error (e.g. the legacy stream while another stream captures in global
  // mode) means: not captured, and keep off.
  if (r != CUDA_SUCCESS) return out;
  if (status == CU_STREAM_CAPTURE_STATUS_ACTIVE) out.capture = id;
  out.canEnqueue = status == CU_STREAM_CAPTURE_STATUS_NONE;
  return out;
}

bool CudaDevice::graphNodes(uint64_t graph, GraphNodes& out, std::string& error) {
  out = {};
  return addGraphNodes(reinterpret_cast<CUgraph>(graph), out, error, 0);
}

bool CudaDevice::addGraphNodes(CUgraph graph, GraphNodes& out, std::string& error, int depth) {
  if (depth > 64) return error = "child graphs nested too deep", false;
  auto failed = [&](const char* what, CUresult r) {
    error = fmt::format("{}: {}", what, api_.errorText(r));
    return false;
  };
  size_t n = 0;
  CUresult r = api_.cuGraphGetNodes(graph, nullptr, &n);
  if (r != CUDA_SUCCESS) return failed("cuGraphGetNodes", r);
  std::vector<CUgraphNode> nodes(n);
  if (n > 0 && (r = api_.cuGraphGetNodes(graph, nodes.data(), &n)) != CUDA_SUCCESS)
    return failed("cuGraphGetNodes", r);
  nodes.resize(std::min(n, nodes.size()));
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type;
    if ((r = api_.cuGraphNodeGetType(node, &type)) != CUDA_SUCCESS) return failed("cuGraphNodeGetType", r);
    ++out.count;
    switch (type) {
      case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS p{};
        if ((r = api_.cuGraphKernelNodeGetParams(node, &p)) != CUDA_SUCCESS)
          return failed("cuGraphKernelNodeGetParams", r);
        const uint64_t function = p.func != nullptr ? reinterpret_cast<uint64_t>(p.func)
                                                    : reinterpret_cast<uint64_t>(p.kern);
        out.kernels.push_back({function, p.kernelParams, p.extra});
        break;
      }
      case CU_GRAPH_NODE_TYPE_MEMCPY: {
        CUDA_MEMCPY3D c{};
        if ((r = api_.cuGraphMemcpyNodeGetParams(node, &c)) != CUDA_SUCCESS)
          return failed("cuGraphMemcpyNodeGetParams", r);
        // Unified addressing: a device or unified side is a device address
        // (arrays are not memory gpurr hashes; host memory is not hashed).
        for (const auto& [memory, address] : {std::pair{c.srcMemoryType, c.srcDevice}, {c.dstMemoryType, c.dstDevice}}) {
          if (memory == CU_MEMORYTYPE_DEVICE || memory == CU_MEMORYTYPE_UNIFIED) out.addresses.push_back(address);
        }
        break;
      }
      case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS m{};
        if ((r = api_.cuGraphMemsetNodeGetParams(node, &m)) != CUDA_SUCCESS)
          return failed("cuGraphMemsetNodeGetParams", r);
        out.addresses.push_back(m.dst);
        break;
      }
      case CU_GRAPH_NODE_TYPE_GRAPH: {
        CUgraph child = nullptr;
        if ((r = api_.cuGraphChildGraphNodeGetGraph(node, &child)) != CUDA_SUCCESS)
          return failed("cuGraphChildGraphNodeGetGraph", r);
        if (!addGraphNodes(child, out, error, depth + 1)) return false;
        break;
      }
      // No device memory of the program's: host code (which cannot call
      // CUDA), ordering, and the graph's own allocations (never hashed).
      case CU_GRAPH_NODE_TYPE_HOST: case CU_GRAPH_NODE_TYPE_EMPTY: case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      case CU_GRAPH_NODE_TYPE_EVENT_RECORD: case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
      case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT: case CU_GRAPH_NODE_TYPE_MEM_ALLOC: case CU_GRAPH_NODE_TYPE_MEM_FREE:
        break;
      case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        return error = "it holds a batched memory operation node", false;
      case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return error = "it holds a conditional node", false;
      default:
        return error = fmt::format("it holds a node of kind {}", static_cast<int>(type)), false;
    }
  }
  return true;
}

std::shared_ptr<ContextHashing> CudaDevice::stateFor(uint64_t context, std::string& error) {
  std::lock_guard lock(mu_);
  if (auto it = contexts_.find(context); it != contexts_.end()) return it->second;
  std::shared_ptr<ContextHashing> cs = ContextHashing::create(api_, context, hashWaitLimit_, stagingLimit_, error);
  if (cs) contexts_.emplace(context, cs);
  return cs;
}

std::unique_ptr<PendingHashes> CudaDevice::hash(uint64_t context, uint64_t stream,
                                                std::span<const kernels::HashRequest> requests, bool synchronous,
                                                std::string& error) {
  RelaxedCaptureMode relaxed(api_, captures().mayBeOpen());
  // A deferred hash may be enqueued from a call made in another context
  // (hash_deferral.h): its own is made current around it.
  CUcontext current = nullptr;
  const bool push = context != 0 && api_.cuCtxGetCurrent != nullptr && api_.cuCtxGetCurrent(&current) == CUDA_SUCCESS &&
                    reinterpret_cast<uint64_t>(current) != context &&
                    api_.cuCtxPushCurrent(reinterpret_cast<CUcontext>(context)) == CUDA_SUCCESS;
  std::unique_ptr<PendingHashes> pending;
  if (std::shared_ptr<ContextHashing> cs = stateFor(context, error))
    pending = ContextHashing::hash(cs, stream, requests, synchronous, error);
  if (push) {
    CUcontext popped;
    api_.cuCtxPopCurrent(&popped);
  }
  return pending;
}

std::unique_ptr<PendingCopy> CudaDevice::copyToHost(uint64_t context, uint64_t stream, uint64_t address,
                                                    uint64_t size, bool synchronous, std::string& error) {
  RelaxedCaptureMode relaxed(api_, captures().mayBeOpen());
  std::shared_ptr<ContextHashing> cs = stateFor(context, error);
  if (!cs) return nullptr;
  return ContextHashing::copyToHost(cs, stream, address, size, synchronous, error);
}

bool CudaDevice::rerunLaunch(uint64_t context, const Relaunch& launch, std::span<const kernels::HashRequest> outputs,
                             uint32_t runs, std::vector<std::vector<uint64_t>>& digests, std::string& error) {
  if (!checkpoint_.save || !checkpoint_.restore || !checkpoint_.free) {
    error = "no libcheckpoint.so (the CUPTI checkpoint API) beside the libcupti in use or on the loader's path";
    return false;
  }
  if (!launchKernelEx_) {
    error = "the CUDA driver lacks cuLaunchKernelEx";
    return false;
  }
  auto cuptiText = [&](const char* what, CUptiResult r) {
    const char* text = nullptr;
    if (checkpoint_.resultString) checkpoint_.resultString(r, &text);
    return std::string(what) + ": " + (text ? text : "error " + std::to_string(static_cast<int>(r)));
  };
  RelaxedCaptureMode relaxed(api_, captures().mayBeOpen());
  const auto stream = reinterpret_cast<CUstream>(launch.stream);
  auto digestOutputs = [&](std::vector<uint64_t>& out) {
    std::unique_ptr<PendingHashes> p = hash(context, launch.stream, outputs, true, error);
    std::vector<kernels::HashResult> results;
    if (!p || !p->wait(results, error)) return false;
    out.clear();
    for (const kernels::HashResult& r : results) out.push_back(r.digest);
    return true;
  };
  // Once before the checkpoint: the hash kernel's module and a slot large
  // enough exist then, so the runs allocate nothing the checkpoint lacks.
  std::vector<uint64_t> warmUp;
  if (!digestOutputs(warmUp)) return false;
  // Every stream of the context is at rest while its memory is saved.
  if (CUresult r = api_.cuCtxSynchronize(); r != CUDA_SUCCESS) {
    error = "cuCtxSynchronize: " + api_.errorText(r);
    return false;
  }
  using NV::Cupti::Checkpoint::CUpti_Checkpoint;  // the size macro names it unqualified
  CUpti_Checkpoint cp{};
  cp.structSize = CUpti_Checkpoint_STRUCT_SIZE;
  cp.ctx = reinterpret_cast<CUcontext>(context);
  // PyTorch's allocator holds most of the device, so the checkpoint spills
  // to host memory: a quarter of it stays free for the program (the save
  // fails instead, and the launch is recorded without the check).
  const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0) cp.reserveHostMB = static_cast<size_t>(pages) / 4 * pageSize >> 20;
  if (CUptiResult r = checkpoint_.save(&cp); r != CUPTI_SUCCESS) {
    error = cuptiText("cuptiCheckpointSave", r);
    return false;
  }
  std::vector<CUlaunchAttribute> attributes(launch.attributes, launch.attributes + launch.attributeCount);
  for (CUlaunchAttribute& a : attributes) {
    // The program's events are recorded by its own launch, not by a re-run
    // that other streams or threads waiting on them would take for it.
    if (a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT || a.id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT)
      a.id = CU_LAUNCH_ATTRIBUTE_IGNORE;
  }
  if (launch.cooperative) {
    CUlaunchAttribute a{};
    a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    a.value.cooperative = 1;
    attributes.push_back(a);
  }
  CUlaunchConfig config{};
  config.gridDimX = launch.grid.x, config.gridDimY = launch.grid.y, config.gridDimZ = launch.grid.z;
  config.blockDimX = launch.block.x, config.blockDimY = launch.block.y, config.blockDimZ = launch.block.z;
  config.sharedMemBytes = launch.sharedMemBytes;
  config.hStream = stream;
  config.attrs = attributes.empty() ? nullptr : attributes.data();
  config.numAttrs = static_cast<unsigned>(attributes.size());
  bool ok = true;
  digests.assign(runs, {});
  for (uint32_t i = 0; i < runs && ok; ++i) {
    // This thread is inside the recorder: the launch raises no recording.
    if (CUresult r = launchKernelEx_(&config, reinterpret_cast<CUfunction>(launch.function), launch.kernelParams,
                                     launch.extra);
        r != CUDA_SUCCESS) {
      error = "re-launching the kernel: " + api_.errorText(r);
      ok = false;
    } else if (!digestOutputs(digests[i])) {
      ok = false;
    }
    if (CUptiResult r = checkpoint_.restore(&cp); r != CUPTI_SUCCESS) {
      error = cuptiText("cuptiCheckpointRestore", r) + "; the program's device memory may differ from an "
              "unrecorded run";
      ok = false;
    }
  }
  checkpoint_.free(&cp);
  // The restored memory is in place before the program's own launch.
  if (CUresult r = api_.cuCtxSynchronize(); r != CUDA_SUCCESS && ok) {
    error = "cuCtxSynchronize after the restore: " + api_.errorText(r);
    ok = false;
  }
  return ok;
}

Device::MemoryUse CudaDevice::memoryUse() {
  std::lock_guard lock(mu_);
  MemoryUse now{pinnedGone_, deviceGone_};
  for (const auto& [context, cs] : contexts_) {
    std::lock_guard csLock(cs->mu);
    if (cs->ringHost != nullptr) {
      now.pinnedHostBytes += ContextHashing::kRingBytes;
      now.deviceBytes += ContextHashing::kRingBatches * sizeof(uint32_t);  // the batches' counters
    }
    now.pinnedHostBytes += cs->stagingPeak;
  }
  peak_.pinnedHostBytes = std::max(peak_.pinnedHostBytes, now.pinnedHostBytes);
  peak_.deviceBytes = std::max(peak_.deviceBytes, now.deviceBytes);
  return peak_;
}

void CudaDevice::contextDestroying(uint64_t context) {
  std::shared_ptr<ContextHashing> cs;
  {
    std::lock_guard lock(mu_);
    auto it = contexts_.find(context);
    if (it == contexts_.end()) return;
    cs = it->second;
    std::lock_guard csLock(cs->mu);
    if (cs->ringHost != nullptr) {
      pinnedGone_ += ContextHashing::kRingBytes;
      deviceGone_ += ContextHashing::kRingBatches * sizeof(uint32_t);
    }
    pinnedGone_ += cs->stagingPeak;
    contexts_.erase(it);
  }
  RelaxedCaptureMode relaxed(api_, captures().mayBeOpen());
  const bool pushed = api_.cuCtxPushCurrent(cs->ctx) == CUDA_SUCCESS;
  // Everything enqueued is finished after this; the pinned mirrors (freed
  // with the context) are read now, not by the trace thread later.
  cs->destroyed(api_.cuCtxSynchronize());
  if (pushed) {
    CUcontext popped;
    api_.cuCtxPopCurrent(&popped);
  }
}

uint32_t CudaDevice::currentDevice() {
  CUdevice dev = 0;
  return api_.cuCtxGetDevice(&dev) == CUDA_SUCCESS ? static_cast<uint32_t>(dev) : 0;
}

uint64_t CudaDevice::streamContext(uint64_t stream) {
  CUcontext ctx = nullptr;
  if (api_.cuStreamGetCtx != nullptr && api_.cuStreamGetCtx(reinterpret_cast<CUstream>(stream), &ctx) == CUDA_SUCCESS)
    return reinterpret_cast<uint64_t>(ctx);
  if (api_.cuCtxGetCurrent != nullptr && api_.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS)
    return reinterpret_cast<uint64_t>(ctx);
  return 0;
}

bool CudaDevice::awaitHashesInFlight(std::string& why) {
  std::vector<std::shared_ptr<ContextHashing>> all;
  {
    std::lock_guard lock(mu_);
    for (const auto& [context, cs] : contexts_) all.push_back(cs);
  }
  bool ok = true;
  for (const auto& cs : all) ok = cs->awaitInFlight(why) && ok;
  return ok;
}

bool CudaDevice::blockingStream(uint64_t stream) {
  unsigned int flags = 0;
  return api_.cuStreamGetFlags == nullptr ||
         api_.cuStreamGetFlags(reinterpret_cast<CUstream>(stream), &flags) != CUDA_SUCCESS ||
         (flags & CU_STREAM_NON_BLOCKING) == 0;
}

bool CudaDevice::addressRange(uint64_t address, uint64_t& base, uint64_t& size) {
  if (api_.cuMemGetAddressRange == nullptr) return false;
  CUdeviceptr b = 0;
  size_t s = 0;
  if (api_.cuMemGetAddressRange(&b, &s, address) != CUDA_SUCCESS) return false;
  base = b, size = s;
  return true;
}

void CudaDevice::describeSystem(trace::Header& h) {
  int version = 0;
  if (api_.cuDriverGetVersion(&version) == CUDA_SUCCESS) h.driverVersion = static_cast<uint32_t>(version);
  int count = 0;
  if (api_.cuDeviceGetCount(&count) == CUDA_SUCCESS) {
    for (int i = 0; i < count; ++i) {
      CUdevice dev;
      if (api_.cuDeviceGet(&dev, i) != CUDA_SUCCESS) continue;
      trace::GpuInfo g;
      g.ordinal = static_cast<uint32_t>(i);
      char name[256] = {};
      if (api_.cuDeviceGetName(name, sizeof(name) - 1, dev) == CUDA_SUCCESS) g.name = name;
      CUuuid uuid;
      if (api_.cuDeviceGetUuid(&uuid, dev) == CUDA_SUCCESS) {
        const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
        char text[64];
        std::snprintf(text, sizeof(text),
                      "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                      b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        g.uuid = text;
      }
      int v = 0;
      if (api_.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == CUDA_SUCCESS)
        g.smCount = static_cast<uint32_t>(v);
      if (api_.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == CUDA_SUCCESS)
        g.ccMajor = static_cast<uint32_t>(v);
      if (api_.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == CUDA_SUCCESS)
        g.ccMinor = static_cast<uint32_t>(v);
      size_t bytes = 0;
      if (api_.cuDeviceTotalMem(&bytes, dev) == CUDA_SUCCESS) g.memoryBytes = bytes;
      char bus[64] = {};
      if (api_.cuDeviceGetPCIBusId(bus, sizeof(bus) - 1, dev) == CUDA_SUCCESS) g.pciBusId = bus;
      h.gpus.push_back(std::move(g));
    }
  }
  // Library versions, from the copies the program has loaded (if any).
  using IntGetter = int (*)(int*);
  using SizeGetter = size_t (*)();
  using PropGetter = int (*)(int, int*);
  if (auto f = reinterpret_cast<IntGetter>(loadedSymbol({"libcudart.so.13", "libcudart.so.12", "libcudart.so"},
                                                        "cudaRuntimeGetVersion"))) {
    int v = 0;
    if (f(&v) == 0) h.cudaRuntimeVersion = static_cast<uint32_t>(v);
  }
  if (auto f = reinterpret_cast<SizeGetter>(
          loadedSymbol({"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"}, "cudnnGetVersion")))
    h.cudnnVersion = static_cast<uint32_t>(f());
  if (auto f = reinterpret_cast<PropGetter>(loadedSymbol({"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
                                                         "cublasGetProperty"))) {
    int major = 0, minor = 0, patch = 0;  // libraryPropertyType: MAJOR, MINOR, PATCH
    if (f(0, &major) == 0 && f(1, &minor) == 0 && f(2, &patch) == 0)
      h.cublasVersion = static_cast<uint32_t>(major * 10000 + minor * 100 + patch);
  }
  if (auto f = reinterpret_cast<IntGetter>(loadedSymbol({"libnccl.so.2", "libnccl.so"}, "ncclGetVersion"))) {
    int v = 0;
    if (f(&v) == 0) h.libraries.push_back({"nccl", std::to_string(v)});
  }
  if (auto f = reinterpret_cast<IntGetter>(loadedSymbol({"libcurand.so.10", "libcurand.so"}, "curandGetVersion"))) {
    int v = 0;
    if (f(&v) == 0) h.libraries.push_back({"curand", std::to_string(v)});
  }
  if (auto f = reinterpret_cast<SizeGetter>(
          loadedSymbol({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, "cublasLtGetVersion")))
    h.libraries.push_back({"cublasLt", std::to_string(f())});
  if (auto torch = loadedTorchVersion()) h.libraries.push_back({"pytorch", *torch});
}

}  // namespace gpurr::recorder