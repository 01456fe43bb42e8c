// Replay execution against a fake CUDA driver, on the CPU: the driver tables
// point at functions that keep device memory in host vectors, reserve
// address space like cuMemAddressReserve (a hint, refused where taken), run
// the hash kernel with the CPU hash and run the replayed kernel (an in-place
// axpy whose pointers sit in a by-value struct) in C++. This checks what a
// GPU cannot be asked here: the order of operations, placement and
// relocation, input restoration before every run, function attributes,
// verdicts, and that every resource is released.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/device_hasher.h"
#include "kernels/driver_api.h"
#include "kernels/hash_layout.h"
#include "replayer/execute.h"
#include "replayer/replay_driver.h"
#include "tests/replayer/replay_trace.h"
#include "tests/unit/test_util.h"

using namespace gpurr;
using namespace gpurr::trace;

namespace {

// ------------------------------------------------------------ the fake GPU

constexpr uint64_t kGranule = 2 << 20;
const CUfunction kHashFunction = reinterpret_cast<CUfunction>(uintptr_t{0x1001});
const CUfunction kAxpyFunction = reinterpret_cast<CUfunction>(uintptr_t{0x1002});
const CUmodule kHashModule = reinterpret_cast<CUmodule>(uintptr_t{0x2001});
const CUmodule kUserModule = reinterpret_cast<CUmodule>(uintptr_t{0x2002});
constexpr char kImageMagic[] = "FAKEIMG";

struct FakeGpu {
  int ccMajor = 9, ccMinor = 0;
  std::map<uint64_t, uint64_t> reserved;               // start -> size
  std::map<uint64_t, std::vector<uint8_t>> memory;     // mapped or allocated, by start
  std::vector<std::pair<uint64_t, uint64_t>> taken;    // ranges the "driver" holds already
  std::map<CUmemGenericAllocationHandle, uint64_t> handles;
  CUmemGenericAllocationHandle nextHandle = 1;
  uint64_t nextAddress = 0x300000000000;
  int contexts = 0, modules = 0, streams = 0, events = 0;
  std::map<int, int> functionAttributes;
  int axpyLaunches = 0;
  uint64_t refusedAllocSize = 0;  // cuMemAlloc of exactly this many bytes runs out of memory
  bool nondeterministic = false;
  bool faultOnLaunch = false;
  CUresult sticky = CUDA_SUCCESS;  // a kernel fault, reported at the next sync
  std::vector<std::string> calls;  // driver calls of interest, in order
};
FakeGpu* gpu = nullptr;

bool overlaps(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) { return a < b + bn && b < a + an; }

bool addressFree(uint64_t addr, uint64_t size) {
  for (const auto& [s, n] : gpu->reserved) {
    if (overlaps(addr, size, s, n)) return false;
  }
  for (const auto& [s, n] : gpu->taken) {
    if (overlaps(addr, size, s, n)) return false;
  }
  return true;
}

uint8_t* at(uint64_t addr, uint64_t size) {
  auto it = gpu->memory.upper_bound(addr);
  if (it == gpu->memory.begin()) return nullptr;
  --it;
  if (addr + size > it->first + it->second.size()) return nullptr;
  return it->second.data() + (addr - it->first);
}

uint64_t bump(uint64_t size) {
  while (!addressFree(gpu->nextAddress, size)) gpu->nextAddress += kGranule;
  const uint64_t a = gpu->nextAddress;
  gpu->nextAddress += (size + kGranule - 1) / kGranule * kGranule;
  return a;
}

CUresult fGetErrorString(CUresult, const char** s) {
  *s = "fake error";
  return CUDA_SUCCESS;
}
CUresult fInit(unsigned) { return CUDA_SUCCESS; }
CUresult fDeviceGetCount(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult fDeviceGet(CUdevice* d, int i) {
  *d = i;
  return CUDA_SUCCESS;
}
CUresult fDeviceGetName(char* name, int len, CUdevice) {
  std::snprintf(name, len, "Fake GPU");
  return CUDA_SUCCESS;
}
CUresult fDeviceGetUuid(CUuuid* u, CUdevice) {
  std::memset(u, 0xab, sizeof(*u));
  return CUDA_SUCCESS;
}
CUresult fDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR   ? gpu->ccMajor
       : a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? gpu->ccMinor
       : a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT     ? 4
                                                           : 0;
  return CUDA_SUCCESS;
}
CUresult fDeviceTotalMem(size_t* b, CUdevice) {
  *b = size_t{16} << 30;
  return CUDA_SUCCESS;
}
CUresult fDeviceGetPCIBusId(char* s, int len, CUdevice) {
  std::snprintf(s, len, "0000:00:00.0");
  return CUDA_SUCCESS;
}
CUresult fDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult fPrimaryCtxRetain(CUcontext* c, CUdevice) {
  ++gpu->contexts;
  *c = reinterpret_cast<CUcontext>(uintptr_t{0x3001});
  gpu->calls.push_back("context");
  return CUDA_SUCCESS;
}
CUresult fPrimaryCtxRelease(CUdevice) {
  --gpu->contexts;
  return CUDA_SUCCESS;
}
CUresult fCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult fCtxGetDevice(CUdevice* d) {
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult fModuleLoadData(CUmodule* m, const void* image) {
  if (image == kernels::hashKernelFatbin().data()) {
    *m = kHashModule;
  } else if (std::memcmp(image, kImageMagic, sizeof(kImageMagic) - 1) == 0) {
    *m = kUserModule;
  } else {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  ++gpu->modules;
  gpu->calls.push_back(*m == kHashModule ? "load hash module" : "load image");
  return CUDA_SUCCESS;
}
CUresult fModuleUnload(CUmodule) {
  --gpu->modules;
  return CUDA_SUCCESS;
}
CUresult fModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  if (m == kHashModule && std::string(name) == kernels::kHashKernelName) {
    *f = kHashFunction;
  } else if (m == kUserModule && std::string(name) == "fake_axpy") {
    *f = kAxpyFunction;
  } else {
    return CUDA_ERROR_NOT_FOUND;
  }
  return CUDA_SUCCESS;
}
// The hash kernel: chunk digests of every range, by the CPU reference.
CUresult fLaunchKernel(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void** args, void**) {
  if (f != kHashFunction) return CUDA_ERROR_INVALID_HANDLE;
  const auto ranges = *static_cast<CUdeviceptr*>(args[0]);
  const auto count = *static_cast<uint32_t*>(args[1]);
  const auto slots = *static_cast<uint64_t*>(args[2]);
  const auto digests = *static_cast<CUdeviceptr*>(args[3]);
  const auto* table = reinterpret_cast<const kernels::DeviceHashRange*>(at(ranges, count * sizeof(kernels::DeviceHashRange)));
  auto* out = reinterpret_cast<uint64_t*>(at(digests, slots * 8));
  if (!table || !out) return CUDA_ERROR_ILLEGAL_ADDRESS;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* bytes = at(table[i].address, table[i].length);
    if (!bytes) return CUDA_ERROR_ILLEGAL_ADDRESS;
    const auto chunks = hash::chunkDigests({bytes, table[i].length});
    std::copy(chunks.begin(), chunks.end(), out + table[i].firstSlot);
  }
  return CUDA_SUCCESS;
}
CUresult fMemAlloc(CUdeviceptr* p, size_t n) {
  if (n == gpu->refusedAllocSize) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = bump(n);
  gpu->reserved[*p] = n;
  gpu->memory[*p].assign(n, 0);
  return CUDA_SUCCESS;
}
CUresult fMemFree(CUdeviceptr p) {
  gpu->reserved.erase(p);
  return gpu->memory.erase(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult fMemcpyHtoD(CUdeviceptr d, const void* s, size_t n) {
  uint8_t* p = at(d, n);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(p, s, n);
  return CUDA_SUCCESS;
}
CUresult fMemcpyDtoH(void* d, CUdeviceptr s, size_t n) {
  const uint8_t* p = at(s, n);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(d, p, n);
  return CUDA_SUCCESS;
}
CUresult fMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream) {
  gpu->calls.push_back("restore");
  return fMemcpyHtoD(d, s, n);
}
CUresult fMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream) {
  uint8_t* to = at(d, n);
  const uint8_t* from = at(s, n);
  if (!to || !from) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(to, from, n);
  gpu->calls.push_back("restore");
  return CUDA_SUCCESS;
}
CUresult fMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream) { return fMemcpyDtoH(d, s, n); }
CUresult fMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream) {
  uint8_t* p = at(d, n);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  std::memset(p, v, n);
  gpu->calls.push_back("zero");
  return CUDA_SUCCESS;
}
CUresult fStreamSynchronize(CUstream) {
  const CUresult r = gpu->sticky;
  return r;
}
CUresult fStreamCreate(CUstream* s, unsigned) {
  ++gpu->streams;
  *s = reinterpret_cast<CUstream>(uintptr_t{0x4001});
  return CUDA_SUCCESS;
}
CUresult fStreamDestroy(CUstream) {
  --gpu->streams;
  return CUDA_SUCCESS;
}
CUresult fEventCreate(CUevent* e, unsigned) {
  ++gpu->events;
  *e = reinterpret_cast<CUevent>(static_cast<uintptr_t>(0x5000 + gpu->events));
  return CUDA_SUCCESS;
}
CUresult fEventDestroy(CUevent) {
  --gpu->events;
  return CUDA_SUCCESS;
}
CUresult fEventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
CUresult fEventElapsedTime(float* ms, CUevent, CUevent) {
  *ms = 0.125f;
  return CUDA_SUCCESS;
}
CUresult fMemAddressReserve(CUdeviceptr* p, size_t size, size_t, CUdeviceptr addr, unsigned long long) {
  *p = addr != 0 && addressFree(addr, size) ? addr : bump(size);
  gpu->reserved[*p] = size;
  gpu->calls.push_back("reserve");
  return CUDA_SUCCESS;
}
CUresult fMemAddressFree(CUdeviceptr p, size_t) { return gpu->reserved.erase(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult fMemCreate(CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp*, unsigned long long) {
  *h = gpu->nextHandle++;
  gpu->handles[*h] = size;
  return CUDA_SUCCESS;
}
CUresult fMemRelease(CUmemGenericAllocationHandle h) {
  return gpu->handles.erase(h) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult fMemMap(CUdeviceptr p, size_t size, size_t, CUmemGenericAllocationHandle h, unsigned long long) {
  if (!gpu->handles.contains(h) || !gpu->reserved.contains(p)) return CUDA_ERROR_INVALID_VALUE;
  gpu->memory[p].assign(size, 0xcd);  // not zero: replay must clear it
  return CUDA_SUCCESS;
}
CUresult fMemUnmap(CUdeviceptr p, size_t) { return gpu->memory.erase(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult fMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) { return CUDA_SUCCESS; }
CUresult fMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) {
  *g = kGranule;
  return CUDA_SUCCESS;
}
CUresult fFuncSetAttribute(CUfunction, CUfunction_attribute a, int v) {
  gpu->functionAttributes[a] = v;
  return CUDA_SUCCESS;
}
CUresult fFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction) {
  *v = gpu->functionAttributes.contains(a) ? gpu->functionAttributes[a] : 0;
  return CUDA_SUCCESS;
}
// fake_axpy(unsigned n, struct { const float* x; float* y; float a; } p):
// y = a * x + y, reading its parameters from the buffer as a GPU would.
CUresult fLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  if (f != kAxpyFunction || kernelParams != nullptr || extra == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (extra[0] != CU_LAUNCH_PARAM_BUFFER_POINTER || extra[2] != CU_LAUNCH_PARAM_BUFFER_SIZE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (*static_cast<size_t*>(extra[3]) != 32) return CUDA_ERROR_INVALID_VALUE;
  if (config->sharedMemBytes > 48 * 1024 &&
      gpu->functionAttributes[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] < static_cast<int>(config->sharedMemBytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  gpu->calls.push_back("launch");
  if (gpu->faultOnLaunch) {
    gpu->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
    return CUDA_SUCCESS;
  }
  const auto* params = static_cast<const uint8_t*>(extra[1]);
  uint32_t n;
  uint64_t x, y;
  float a;
  std::memcpy(&n, params, 4);
  std::memcpy(&x, params + 8, 8);
  std::memcpy(&y, params + 16, 8);
  std::memcpy(&a, params + 24, 4);
  auto* xs = reinterpret_cast<float*>(at(x, n * 4ull));
  auto* ys = reinterpret_cast<float*>(at(y, n * 4ull));
  if (!xs || !ys) {
    gpu->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
    return CUDA_SUCCESS;
  }
  for (uint32_t i = 0; i < n; ++i) ys[i] = a * xs[i] + ys[i];
  // A "race": the last element depends on how many launches came before.
  if (gpu->nondeterministic) ys[n - 1] += static_cast<float>(gpu->axpyLaunches % 3) * 0.5f;
  ++gpu->axpyLaunches;
  return CUDA_SUCCESS;
}

struct FakeDriver {
  FakeGpu state;
  kernels::DriverApi api;
  replay::ReplayDriver drv;
  FakeDriver() {
    gpu = &state;
    api.cuGetErrorString = fGetErrorString;
    api.cuInit = fInit;
    api.cuDeviceGetCount = fDeviceGetCount;
    api.cuDeviceGet = fDeviceGet;
    api.cuDeviceGetName = fDeviceGetName;
    api.cuDeviceGetUuid = fDeviceGetUuid;
    api.cuDeviceGetAttribute = fDeviceGetAttribute;
    api.cuDeviceTotalMem = fDeviceTotalMem;
    api.cuDeviceGetPCIBusId = fDeviceGetPCIBusId;
    api.cuDriverGetVersion = fDriverGetVersion;
    api.cuDevicePrimaryCtxRetain = fPrimaryCtxRetain;
    api.cuDevicePrimaryCtxRelease = fPrimaryCtxRelease;
    api.cuCtxSetCurrent = fCtxSetCurrent;
    api.cuCtxGetDevice = fCtxGetDevice;
    api.cuModuleLoadData = fModuleLoadData;
    api.cuModuleUnload = fModuleUnload;
    api.cuModuleGetFunction = fModuleGetFunction;
    api.cuLaunchKernel = fLaunchKernel;
    api.cuMemAlloc = fMemAlloc;
    api.cuMemFree = fMemFree;
    api.cuMemcpyHtoD = fMemcpyHtoD;
    api.cuMemcpyDtoH = fMemcpyDtoH;
    api.cuStreamSynchronize = fStreamSynchronize;
    api.cuEventCreate = fEventCreate;
    api.cuEventDestroy = fEventDestroy;
    api.cuEventRecord = fEventRecord;
    api.cuEventElapsedTime = fEventElapsedTime;
    drv.cuMemAddressReserve = fMemAddressReserve;
    drv.cuMemAddressFree = fMemAddressFree;
    drv.cuMemCreate = fMemCreate;
    drv.cuMemRelease = fMemRelease;
    drv.cuMemMap = fMemMap;
    drv.cuMemUnmap = fMemUnmap;
    drv.cuMemSetAccess = fMemSetAccess;
    drv.cuMemGetAllocationGranularity = fMemGetAllocationGranularity;
    drv.cuMemsetD8Async = fMemsetD8Async;
    drv.cuMemcpyHtoDAsync = fMemcpyHtoDAsync;
    drv.cuMemcpyDtoHAsync = fMemcpyDtoHAsync;
    drv.cuMemcpyDtoDAsync = fMemcpyDtoDAsync;
    drv.cuLaunchKernelEx = fLaunchKernelEx;
    drv.cuFuncSetAttribute = fFuncSetAttribute;
    drv.cuFuncGetAttribute = fFuncGetAttribute;
    drv.cuStreamCreate = fStreamCreate;
    drv.cuStreamDestroy = fStreamDestroy;
  }
  ~FakeDriver() { gpu = nullptr; }
  // Everything the replay took, it gave back.
  void checkReleased() const {
    CHECK(state.reserved.empty());
    CHECK(state.memory.empty());
    CHECK(state.handles.empty());
    CHECK(state.contexts == 0);
    CHECK(state.modules == 0);
    CHECK(state.streams == 0);
    CHECK(state.events == 0);
  }
};

// ------------------------------------------------------------ the trace

constexpr uint64_t kX = 0x7f1200000000;  // alloc#1
constexpr uint64_t kY = 0x7f1200010000;  // alloc#2, same granule
constexpr uint32_t kN = 5000;
constexpr float kA = 1.75f;

std::vector<uint8_t> floats(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

struct AxpyTrace {
  testing::TempDir dir;
  std::filesystem::path path = dir / "axpy.gpurr";
  uint64_t seq = 0;
  std::vector<float> x, y, yAfter;

  // `recordedA` is what the recording's output was computed with (kA when
  // the recording is right); `image` the module's bytes.
  explicit AxpyTrace(float recordedA = kA, std::string image = "FAKEIMG fake_axpy", bool pointerInX = false,
                     Header header = testing::replayHeader()) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> unit(-1, 1);
    for (uint32_t i = 0; i < kN; ++i) {
      x.push_back(unit(rng));
      y.push_back(unit(rng));
    }
    if (pointerInX) {
      // Two floats' worth holding y's address, as a pointer stored in memory.
      std::memcpy(&x[2], &kY, 8);
    }
    for (uint32_t i = 0; i < kN; ++i) yAfter.push_back(recordedA * x[i] + y[i]);
    testing::ReplayTraceBuilder b(path, header);
    b.alloc(1, kX, kN * 4);
    b.alloc(2, kY, kN * 4);
    b.module(1, std::vector<uint8_t>(image.begin(), image.end()));
    KernelLaunch k;
    k.api = LaunchApi::kLaunchKernelEx;
    k.module = 1;
    k.function = "fake_axpy";
    k.grid = {3, 1, 1};
    k.block = {256, 1, 1};
    k.sharedMemBytes = 64 * 1024;
    k.params.assign(32, 0);
    std::memcpy(k.params.data(), &kN, 4);
    std::memcpy(k.params.data() + 8, &kX, 8);
    std::memcpy(k.params.data() + 16, &kY, 8);
    std::memcpy(k.params.data() + 24, &kA, 4);
    k.paramLayout = {{0, 4}, {8, 24}};
    k.pointers = {{8, 1, 0}, {16, 2, 0}};
    k.inputs = {b.digest(1, kX, 0, floats(x), true), b.digest(2, kY, 0, floats(y), true)};
    k.outputs = {b.digest(1, kX, 0, floats(x), false), b.digest(2, kY, 0, floats(yAfter), true)};
    seq = b.add(k);
    b.close();
  }
};

replay::ReplayOutcome replayWith(FakeDriver& fake, const AxpyTrace& t, replay::ReplayOptions options) {
  TraceReader reader(t.path);
  const replay::ReplayPlan plan = replay::planReplay(reader, t.seq);
  return replay::executeReplay(reader, plan, options, fake.api, fake.drv);
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace

TEST_CASE("fake driver: equal to the recording, at the recorded addresses", "[replayer][execute]") {
  FakeDriver fake;
  AxpyTrace t;
  replay::ReplayOptions options;
  options.repeat = 5;
  const replay::ReplayOutcome o = replayWith(fake, t, options);
  CHECK(o.verdict.kind == replay::VerdictKind::kEqual);
  CHECK(o.verdict.runs == 5);
  CHECK(o.verdict.distinct == 1);
  CHECK(o.verdict.runsMatchingRecording == 5);
  CHECK_FALSE(o.relocated);
  REQUIRE(o.placements.size() == 1);
  CHECK(o.placements[0].recordedStart == kX);
  CHECK(o.placements[0].newStart == kX);
  CHECK(o.placements[0].allocations == std::vector<uint32_t>{1, 2});
  CHECK(o.restoredBytes == 2 * kN * 4);
  CHECK(o.restoredFromDevice);
  CHECK(o.kernelMs.size() == 5);
  CHECK(o.machine.name == "Fake GPU");
  CHECK(o.machine.uuid == "GPU-abababab-abab-abab-abab-abababababab");
  REQUIRE(o.vsRecording.has_value());
  CHECK(o.vsRecording->matches());
  CHECK_FALSE(o.acrossRuns.has_value());
  CHECK(fake.state.axpyLaunches == 5);
  CHECK(fake.state.functionAttributes[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] == 64 * 1024);
  // Address space before anything else; every launch after zeroing and
  // restoring both inputs.
  const auto& calls = fake.state.calls;
  REQUIRE(calls.size() >= 3);
  CHECK(calls[0] == "context");
  CHECK(calls[1] == "reserve");
  CHECK(calls[2] == "load image");
  size_t launches = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i] != "launch") continue;
    ++launches;
    REQUIRE(i >= 3);
    CHECK(calls[i - 1] == "restore");
    CHECK(calls[i - 2] == "restore");
    CHECK(calls[i - 3] == "zero");
  }
  CHECK(launches == 5);
  fake.checkReleased();
}

TEST_CASE("fake driver: a taken address relocates the region and rewrites the struct's pointers",
          "[replayer][execute]") {
  FakeDriver fake;
  fake.state.taken = {{kX - 4096, 8192}};
  AxpyTrace t;
  replay::ReplayOptions options;
  options.repeat = 3;
  const replay::ReplayOutcome o = replayWith(fake, t, options);
  CHECK(o.relocated);
  REQUIRE(o.placements.size() == 1);
  CHECK(o.placements[0].newStart != kX);
  // Equal only if the kernel found x and y where they now are.
  CHECK(o.verdict.kind == replay::VerdictKind::kEqual);
  CHECK_THAT(joined(o.warnings), Catch::Contains("1 of 1 address region(s) could not be placed"));
  fake.checkReleased();

  FakeDriver forced;
  AxpyTrace t2;
  options.forceRelocate = true;
  const replay::ReplayOutcome f = replayWith(forced, t2, options);
  CHECK(f.relocated);
  CHECK(f.placements[0].newStart != kX);
  CHECK(f.verdict.kind == replay::VerdictKind::kEqual);
  CHECK_THAT(joined(f.warnings), Catch::Contains("(--relocate)"));
  forced.checkReleased();
}

TEST_CASE("fake driver: pointers stored in memory are named when relocating", "[replayer][execute]") {
  FakeDriver fake;
  AxpyTrace t(kA, "FAKEIMG fake_axpy", /*pointerInX=*/true);
  replay::ReplayOptions options;
  options.forceRelocate = true;
  const replay::ReplayOutcome o = replayWith(fake, t, options);
  CHECK_THAT(joined(o.warnings),
             Catch::Contains("input alloc#1+0x0 (19.5 KiB) holds 1 word(s) that point into relocated memory "
                             "(first at +0x8)"));
  fake.checkReleased();
}

TEST_CASE("fake driver: a nondeterministic kernel, with the runs compared element-wise", "[replayer][execute]") {
  FakeDriver fake;
  fake.state.nondeterministic = true;
  AxpyTrace t;
  replay::ReplayOptions options;
  options.repeat = 7;
  const replay::ReplayOutcome o = replayWith(fake, t, options);
  CHECK(o.verdict.kind == replay::VerdictKind::kNondeterministic);
  CHECK(o.verdict.distinct == 3);
  CHECK(o.verdict.runsPerResult == std::vector<uint32_t>{3, 2, 2});
  CHECK(o.verdict.varyingOutputs == std::vector<size_t>{1});
  CHECK(o.verdict.runsMatchingRecording == 3);  // launches 0, 3, 6 add nothing
  REQUIRE(o.acrossRuns.has_value());
  CHECK(o.acrossRunsOther == 1);
  const replay::RangeComparison& y = o.acrossRuns->ranges()[1];
  CHECK_FALSE(y.equal);
  REQUIRE(y.elements.has_value());
  CHECK(y.elements->differing == 1);
  CHECK(y.elements->firstDiffering == kN - 1);
  CHECK(y.elements->maxAbs == Approx(0.5));
  CHECK(o.acrossRuns->ranges()[0].equal);
  fake.checkReleased();
}

TEST_CASE("fake driver: different from the recording names the machine differences", "[replayer][execute]") {
  FakeDriver fake;
  AxpyTrace t(/*recordedA=*/2.0f);
  replay::ReplayOptions options;
  options.repeat = 2;
  const replay::ReplayOutcome o = replayWith(fake, t, options);
  CHECK(o.verdict.kind == replay::VerdictKind::kDifferent);
  CHECK(o.verdict.differingOutputs == std::vector<size_t>{1});
  REQUIRE(o.vsRecording.has_value());
  const replay::RangeComparison& y = o.vsRecording->ranges()[1];
  REQUIRE(y.elements.has_value());
  CHECK(y.elements->assumed);
  CHECK(y.elements->elements == kN);
  CHECK(y.elements->differing > kN * 9 / 10);
  CHECK(y.elements->maxAbs <= 0.25 + 1e-6);  // |(2 - 1.75) * x| with |x| <= 1
  CHECK_THAT(joined(o.environment), Catch::Contains("GPU: NVIDIA H100 80GB HBM3 (sm_90) -> Fake GPU (sm_90)"));
  fake.checkReleased();
}

TEST_CASE("fake driver: another architecture, a refused image, a faulting kernel", "[replayer][execute]") {
  {
    FakeDriver fake;
    fake.state.ccMajor = 8;
    AxpyTrace t;
    CHECK_THROWS_WITH(replayWith(fake, t, {}),
                      Catch::Contains("recorded on NVIDIA H100 80GB HBM3 (sm_90)") &&
                          Catch::Contains("0 Fake GPU (sm_80)"));
  }
  {
    FakeDriver fake;
    AxpyTrace t(kA, "not an image");
    CHECK_THROWS_WITH(replayWith(fake, t, {}), Catch::Contains("loading the image of module #1"));
    fake.checkReleased();
  }
  {
    FakeDriver fake;
    AxpyTrace t;
    fake.state.faultOnLaunch = true;
    replay::ReplayOptions options;
    options.forceRelocate = true;
    CHECK_THROWS_WITH(replayWith(fake, t, options),
                      Catch::Contains("the replayed kernel failed on run 1") &&
                          Catch::Contains("a pointer stored in device memory may still hold a recorded address"));
    fake.checkReleased();
  }
}

TEST_CASE("fake driver: inputs restored from host memory when the GPU has no room for copies",
          "[replayer][execute]") {
  FakeDriver fake;
  fake.state.refusedAllocSize = kN * 4;  // the size of each input
  AxpyTrace t;
  replay::ReplayOptions options;
  options.repeat = 3;
  const replay::ReplayOutcome o = replayWith(fake, t, options);
  CHECK_FALSE(o.restoredFromDevice);
  CHECK(o.verdict.kind == replay::VerdictKind::kEqual);
  CHECK_THAT(joined(o.warnings), Catch::Contains("restored from host memory before each run"));
  fake.checkReleased();
}
