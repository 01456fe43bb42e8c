// cupti_probe MODE: answers the questions about CUDA 13, CUPTI and the driver
// that only a GPU can (docs/GPU_AUDIT.md, "Questions only a GPU answers").
// Each answer is one line `PROBE <id> <answer> (<detail>)`; other lines are
// detail. Without a GPU every mode prints one line saying why and exits 77.
//
// The driver, CUPTI (through libprobe_subscriber.so) and the CUDA runtime
// (through libprobe_kernels.so, which links libcudart.so.13) are all opened
// at run time, from the folder this program sits in.
#include <cuda.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu/probe/probe_driver.h"

std::span<const unsigned char> probeModuleImage();

namespace {

probe::Driver drv;
std::string selfPath, selfDir;
CUdevice device = 0;
CUcontext context = nullptr;

// libprobe_subscriber.so
struct Subscriber {
  int (*start)() = nullptr;
  int (*injected)() = nullptr;
  void (*setSource)(const char*) = nullptr;
  void (*setAction)(const char*) = nullptr;
  void (*setFunction)(void*) = nullptr;
  void (*setBuffer)(unsigned long long, size_t) = nullptr;
  const char* (*report)() = nullptr;
  void (*reset)() = nullptr;
} sub;

// libprobe_kernels.so
struct Kernels {
  int (*chevron)(unsigned*, unsigned, void*) = nullptr;
  int (*launchKernel)(unsigned*, unsigned) = nullptr;
  int (*launchKernelExC)(unsigned*, unsigned) = nullptr;
  int (*getKernel)(void**) = nullptr;
  int (*sync)() = nullptr;
  const char* (*errorName)(int) = nullptr;
  int (*alloc)(const char*) = nullptr;
} rt;

long tid() { return static_cast<long>(syscall(SYS_gettid)); }

std::string hex(unsigned long long v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", v);
  return b;
}

void answer(const std::string& id, const std::string& text) { std::printf("PROBE %s %s\n", id.c_str(), text.c_str()); }
void detail(const std::string& text) { std::printf("  %s\n", text.c_str()); }

[[noreturn]] void die(const std::string& why) {
  std::printf("error: %s\n", why.c_str());
  std::fflush(stdout);
  std::exit(1);
}

CUresult check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) die(std::string(what) + " failed: " + drv.name(r));
  return r;
}

// Exits 77 with one line when there is no usable GPU.
void requireGpu() {
  std::string error;
  if (!drv.load(error)) {
    std::printf("no GPU: %s\n", error.c_str());
    std::exit(77);
  }
  int count = 0;
  if (drv.cuInit(0) != CUDA_SUCCESS || drv.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    std::printf("no GPU: the CUDA driver finds no usable device\n");
    std::exit(77);
  }
}

void makeContext() {
  check(drv.cuDeviceGet(&device, 0), "cuDeviceGet");
  check(drv.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  check(drv.cuCtxSetCurrent(context), "cuCtxSetCurrent");
}

void* openBeside(const char* name, int flags = RTLD_NOW | RTLD_GLOBAL) {
  const std::string path = selfDir + "/" + name;
  void* h = dlopen(path.c_str(), flags);
  if (h == nullptr && (flags & RTLD_NOLOAD) == 0) die("cannot load " + path + ": " + dlerror());
  return h;
}

template <typename T>
void sym(void* lib, const char* name, T& out) {
  out = reinterpret_cast<T>(dlsym(lib, name));
  if (out == nullptr) die(std::string("missing symbol ") + name);
}

void loadSubscriber(bool start = true) {
  void* h = openBeside("libprobe_subscriber.so");
  sym(h, "probe_start", sub.start);
  sym(h, "probe_injected", sub.injected);
  sym(h, "probe_set_source", sub.setSource);
  sym(h, "probe_set_action", sub.setAction);
  sym(h, "probe_set_function", sub.setFunction);
  sym(h, "probe_set_buffer", sub.setBuffer);
  sym(h, "probe_report", sub.report);
  sym(h, "probe_reset", sub.reset);
  if (start && sub.start() != 0) {
    std::printf("error: the CUPTI subscriber did not start:\n%s", sub.report());
    std::exit(1);
  }
}

void loadKernels() {
  void* h = openBeside("libprobe_kernels.so");
  sym(h, "rt_chevron", rt.chevron);
  sym(h, "rt_launch_kernel", rt.launchKernel);
  sym(h, "rt_launch_kernel_exc", rt.launchKernelExC);
  sym(h, "rt_get_kernel", rt.getKernel);
  sym(h, "rt_sync", rt.sync);
  sym(h, "rt_error_name", rt.errorName);
  sym(h, "rt_alloc", rt.alloc);
}

std::vector<std::string> reportLines() {
  std::vector<std::string> out;
  std::istringstream in(sub.report());
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> w;
  std::istringstream in(s);
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

// The value of `key=` in a report line.
std::string field(const std::string& l, const std::string& key) {
  for (const std::string& w : words(l)) {
    if (w.rfind(key + "=", 0) == 0) return w.substr(key.size() + 1);
  }
  return {};
}

// Report lines of a kind ("launch", "call", ...) whose source matches.
std::vector<std::vector<std::string>> rows(const std::vector<std::string>& lines, const std::string& kind,
                                           const std::function<bool(const std::string&)>& sourceMatches) {
  std::vector<std::vector<std::string>> out;
  for (const std::string& l : lines) {
    auto w = words(l);
    if (w.size() >= 2 && w[0] == kind && sourceMatches(w[1])) out.push_back(w);
  }
  return out;
}
auto is(const std::string& s) {
  return [s](const std::string& x) { return x == s; };
}
auto startsWith(const std::string& s) {
  return [s](const std::string& x) { return x.rfind(s, 0) == 0; };
}

void cuptiDetail(const std::vector<std::string>& lines) {
  for (const std::string& l : lines) {
    if (l.rfind("cupti ", 0) == 0) detail(l);
  }
}

struct Module {
  CUmodule module = nullptr;
  CUfunction addOne = nullptr;
};

CUfunction get(CUmodule m, const char* name) {
  CUfunction f = nullptr;
  check(drv.cuModuleGetFunction(&f, m, name), name);
  return f;
}

// The probe's own kernels, loaded through the driver into the current context.
CUmodule loadProbeModule() {
  const auto image = probeModuleImage();
  CUmodule m = nullptr;
  check(drv.cuModuleLoadData(&m, image.data()), "cuModuleLoadData");
  return m;
}

CUresult launchAddOne(CUfunction f, CUdeviceptr d, unsigned n, CUstream s = nullptr) {
  void* args[] = {&d, &n};
  return drv.cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr);
}

// ------------------------------------------------------------ check

int modeCheck() {
  char name[256] = {};
  drv.cuDeviceGetName(name, sizeof name, 0);
  int version = 0, major = 0, minor = 0;
  drv.cuDriverGetVersion(&version);
  drv.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0);
  drv.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0);
  std::printf("GPU: %s, compute capability %d.%d, driver CUDA %d.%d, CUDA_MODULE_LOADING=%s\n", name, major, minor,
              version / 1000, version % 1000 / 10, std::getenv("CUDA_MODULE_LOADING") ? std::getenv("CUDA_MODULE_LOADING") : "(unset)");
  return 0;
}

// ------------------------------------------------------------ launches: P1.6, P2.2, P2.6, P2.9

// How the launches of one source arrived.
std::string launchShape(const std::vector<std::string>& lines, const std::string& source) {
  std::set<std::string> kinds;
  std::string shapes;
  for (const auto& w : rows(lines, "launch", is(source))) {
    const std::string& s = w[2];
    kinds.insert(s.rfind("drv:", 0) == 0 ? "driver-only" : s.find(">drv:") != std::string::npos ? "runtime+nested-driver"
                                                                                                  : "runtime-only");
    shapes += (shapes.empty() ? "" : " ") + s + "=" + w[3];
  }
  if (kinds.empty()) return "no-launch-callback";
  std::string k;
  for (const std::string& x : kinds) k += (k.empty() ? "" : ",") + x;
  return k + " (" + shapes + ")";
}

int modeLaunches() {
  loadSubscriber();
  makeContext();
  sub.setAction("kinds,layout");
  const auto image = probeModuleImage();
  constexpr unsigned n = 4096;
  CUdeviceptr d = 0;
  check(drv.cuMemAlloc(&d, n * 4), "cuMemAlloc");
  CUstream stream = nullptr;
  check(drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

  sub.setSource("driver-module");
  CUmodule m = nullptr;
  check(drv.cuModuleLoadData(&m, image.data()), "cuModuleLoadData");
  check(launchAddOne(get(m, "add_one"), d, n), "cuLaunchKernel(module)");
  drv.cuCtxSynchronize();

  sub.setSource("driver-library");
  CUlibrary lib = nullptr;
  check(drv.cuLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData");
  CUkernel k = nullptr;
  check(drv.cuLibraryGetKernel(&k, lib, "add_one"), "cuLibraryGetKernel");
  check(launchAddOne(reinterpret_cast<CUfunction>(k), d, n), "cuLaunchKernel(CUkernel)");
  drv.cuCtxSynchronize();

  sub.setSource("runtime-start");
  loadKernels();
  void* expectedKernel = nullptr;
  int e = rt.getKernel(&expectedKernel);
  sub.setSource("runtime-chevron");
  int e1 = rt.chevron(reinterpret_cast<unsigned*>(d), n, stream);
  rt.sync();
  sub.setSource("runtime-cudaLaunchKernel");
  int e2 = rt.launchKernel(reinterpret_cast<unsigned*>(d), n);
  rt.sync();
  sub.setSource("runtime-cudaLaunchKernelExC");
  int e3 = rt.launchKernelExC(reinterpret_cast<unsigned*>(d), n);
  rt.sync();
  detail(std::string("runtime results: cudaGetKernel=") + rt.errorName(e) + " <<<>>>=" + rt.errorName(e1) +
         " cudaLaunchKernel=" + rt.errorName(e2) + " cudaLaunchKernelExC=" + rt.errorName(e3));

  // cuBLAS, as the loader or PyTorch's wheels provide it.
  sub.setSource("cublas");
  std::string cublasNote;
  void* cublas = dlopen("libcublas.so.13", RTLD_NOW);
  if (cublas == nullptr && std::getenv("PROBE_WHEEL_LIBS") != nullptr) {
    std::istringstream dirs(std::getenv("PROBE_WHEEL_LIBS"));
    for (std::string dir; cublas == nullptr && std::getline(dirs, dir, ':');)
      cublas = dlopen((dir + "/libcublas.so.13").c_str(), RTLD_NOW);
  }
  if (cublas == nullptr) {
    cublasNote = "no libcublas.so.13";
  } else {
    using Create = int (*)(void**);
    using Sgemm = int (*)(void*, int, int, int, int, int, const float*, const float*, int, const float*, int,
                          const float*, float*, int);
    auto create = reinterpret_cast<Create>(dlsym(cublas, "cublasCreate_v2"));
    auto sgemm = reinterpret_cast<Sgemm>(dlsym(cublas, "cublasSgemm_v2"));
    void* handle = nullptr;
    CUdeviceptr a = 0;
    check(drv.cuMemAlloc(&a, 3 * 64 * 64 * 4), "cuMemAlloc");
    drv.cuMemsetD8(a, 0, 3 * 64 * 64 * 4);
    const float one = 1, zero = 0;
    const auto* A = reinterpret_cast<const float*>(a);
    int s1 = create ? create(&handle) : -1;
    int s2 = sgemm && s1 == 0 ? sgemm(handle, 0, 0, 64, 64, 64, &one, A, 64, A + 4096, 64, &zero,
                                      reinterpret_cast<float*>(a) + 8192, 64)
                              : -1;
    drv.cuCtxSynchronize();
    cublasNote = "cublasCreate=" + std::to_string(s1) + " cublasSgemm_v2=" + std::to_string(s2);
  }
  detail("cuBLAS: " + cublasNote);
  drv.cuCtxSynchronize();
  sub.setSource("end");

  const auto lines = reportLines();
  // P1.6: which libcupti and libcheckpoint.so a plain program gets.
  for (const std::string& l : lines) {
    if (l.rfind("cupti ", 0) != 0) continue;
    const std::string path = field(l, "path"), ckpt = field(l, "checkpoint");
    const auto dir = [](const std::string& p) { return p.substr(0, p.rfind('/')); };
    answer("P1.6/program", "libcupti=" + path + " found-by=" + field(l, "how") + " version=" + field(l, "version") +
                               " libcheckpoint=" + (ckpt == "none" ? "none" : ckpt) +
                               " beside=" + (ckpt != "none" && dir(ckpt) == dir(path) ? "yes" : "no"));
  }
  // P2.2: which callbacks each kind of launch raises.
  for (const char* s : {"driver-module", "driver-library", "runtime-chevron", "runtime-cudaLaunchKernel",
                        "runtime-cudaLaunchKernelExC", "cublas"}) {
    answer(std::string("P2.2/") + s, launchShape(lines, s));
  }
  // P2.6: the handle each callback carries, and what the name/parameter queries make of it.
  for (const std::string& l : lines) {
    if (l.rfind("kinds ", 0) != 0) continue;
    auto w = words(l);
    const bool kernel = field(l, "lib") == "CUDA_SUCCESS";
    answer("P2.6/" + w[1] + "/" + field(l, "via"),
           std::string("handle=") + (kernel ? "CUkernel" : "CUfunction") + " cuFuncGetName=" + field(l, "funcname") +
               " cuKernelGetName=" + field(l, "kernelname") + " cuFuncGetParamInfo=" + field(l, "funcparams") +
               " cuKernelGetParamInfo=" + field(l, "kernelparams") + " cuKernelGetFunction=" + field(l, "getfunction"));
  }
  // P2.9: __cudaLaunchKernel's parameters as the recorder reads them.
  bool seen = false;
  for (const std::string& l : lines) {
    if (l.rfind("layout runtime-chevron", 0) != 0) continue;
    seen = true;
    const bool ok = field(l, "grid") == "3,2,1" && field(l, "block") == "32,2,1" && field(l, "shared") == "48" &&
                    field(l, "stream") == hex(reinterpret_cast<unsigned long long>(stream)) &&
                    field(l, "arg2") == "0x5eed" && field(l, "kernel") == hex(reinterpret_cast<unsigned long long>(expectedKernel));
    answer("P2.9", std::string(ok ? "matches" : "differs") + " (seen: " + l.substr(7) +
                       "; expected grid=3,2,1 block=32,2,1 shared=48 stream=" + hex(reinterpret_cast<unsigned long long>(stream)) +
                       " arg2=0x5eed kernel=" + hex(reinterpret_cast<unsigned long long>(expectedKernel)) + " from cudaGetKernel)");
  }
  if (!seen) answer("P2.9", "no-__cudaLaunchKernel-callback (<<<>>> raised no runtime callback named __cudaLaunchKernel)");
  for (const auto& w : rows(lines, "call", is("runtime-chevron"))) detail("runtime-chevron raised " + w[2] + " x" + w[3]);
  cuptiDetail(lines);
  return 0;
}

// ------------------------------------------------------------ modules: P3.3, P3.5, P3.6

int modeModules() {
  loadSubscriber();
  makeContext();
  const char* mode = std::getenv("CUDA_MODULE_LOADING");
  const std::string loading = mode ? mode : "default";
  const auto image = probeModuleImage();
  constexpr unsigned n = 256;
  CUdeviceptr d = 0;
  check(drv.cuMemAlloc(&d, n * 4), "cuMemAlloc");

  long loader = 0;
  std::thread t([&] {
    loader = tid();
    drv.cuCtxSetCurrent(context);
    sub.setSource("cuModuleLoadData:load");
    CUmodule m = nullptr;
    check(drv.cuModuleLoadData(&m, image.data()), "cuModuleLoadData");
    sub.setSource("cuModuleLoadData:getfunction");
    CUfunction f = get(m, "add_one");
    sub.setSource("cuModuleLoadData:launch");
    check(launchAddOne(f, d, n), "launch");
    drv.cuCtxSynchronize();
    sub.setSource("cuLibraryLoadData:load");
    CUlibrary lib = nullptr;
    check(drv.cuLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData");
    sub.setSource("cuLibraryLoadData:getkernel");
    CUkernel k = nullptr;
    check(drv.cuLibraryGetKernel(&k, lib, "add_one"), "cuLibraryGetKernel");
    sub.setSource("cuLibraryLoadData:launch");
    check(launchAddOne(reinterpret_cast<CUfunction>(k), d, n), "launch");
    drv.cuCtxSynchronize();
    sub.setSource("runtime:dlopen");
    loadKernels();
    sub.setSource("runtime:first-launch");
    rt.chevron(reinterpret_cast<unsigned*>(d), n, nullptr);
    rt.sync();
    sub.setSource("runtime:second-launch");
    rt.chevron(reinterpret_cast<unsigned*>(d), n, nullptr);
    rt.sync();
    sub.setSource("idle");
  });
  t.join();

  // P3.5: our cuKernelGetFunction in the first launch's ENTER.
  sub.setAction("getfunction");
  sub.setSource("p3.5:load");
  CUlibrary lib2 = nullptr;
  check(drv.cuLibraryLoadData(&lib2, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData");
  CUkernel fresh = nullptr;
  check(drv.cuLibraryGetKernel(&fresh, lib2, "fresh_a"), "cuLibraryGetKernel");
  sub.setSource("p3.5:launch");
  {
    void* args[] = {&d};
    check(drv.cuLaunchKernel(reinterpret_cast<CUfunction>(fresh), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), "launch");
  }
  drv.cuCtxSynchronize();
  sub.setAction("");

  // P3.6: handles after cuLibraryUnload / cuModuleUnload and a new load of the same image.
  sub.setSource("p3.6");
  auto libraryHandles = [&](CUlibrary& lib, CUkernel& k, CUfunction& f) {
    check(drv.cuLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData");
    check(drv.cuLibraryGetKernel(&k, lib, "add_one"), "cuLibraryGetKernel");
    check(launchAddOne(reinterpret_cast<CUfunction>(k), d, n), "launch");
    drv.cuCtxSynchronize();
    check(drv.cuKernelGetFunction(&f, k), "cuKernelGetFunction");
  };
  CUlibrary la = nullptr, lb = nullptr;
  CUkernel ka = nullptr, kb = nullptr;
  CUfunction fa = nullptr, fb = nullptr;
  libraryHandles(la, ka, fa);
  check(drv.cuLibraryUnload(la), "cuLibraryUnload");
  libraryHandles(lb, kb, fb);
  CUmodule ma = nullptr, mb = nullptr;
  check(drv.cuModuleLoadData(&ma, image.data()), "cuModuleLoadData");
  CUfunction ga = get(ma, "add_one");
  check(drv.cuModuleUnload(ma), "cuModuleUnload");
  check(drv.cuModuleLoadData(&mb, image.data()), "cuModuleLoadData");
  CUfunction gb = get(mb, "add_one");
  sub.setSource("end");

  const auto lines = reportLines();
  // P3.3: where each MODULE_LOADED came.
  for (const char* method : {"cuModuleLoadData", "cuLibraryLoadData", "runtime"}) {
    std::string where;
    int count = 0;
    for (const auto& w : rows(lines, "modload", startsWith(std::string(method) + ":"))) {
      std::string l;
      for (const auto& x : w) l += x + " ";
      const std::string phase = w[1].substr(w[1].find(':') + 1);
      where += (where.empty() ? "" : " ") + phase + "[inside=" + field(l, "stack") +
               " thread=" + (field(l, "tid") == std::to_string(loader) ? "loader" : "other:" + field(l, "tid")) + "]";
      ++count;
    }
    answer("P3.3/" + loading + "/" + method, count == 0 ? "no-MODULE_LOADED" : std::to_string(count) + "x " + where);
  }
  for (const auto& w : rows(lines, "modload", [](const std::string& s) { return s.find(':') == std::string::npos || s.rfind("p3.", 0) == 0; })) {
    std::string l;
    for (const auto& x : w) l += x + " ";
    detail(l);
  }
  // P3.5
  long inCall = 0, inLaunch = 0;
  for (const auto& w : rows(lines, "modload", is("p3.5:launch"))) {
    std::string l;
    for (const auto& x : w) l += x + " ";
    (field(l, "probecall") == "1" ? inCall : inLaunch)++;
  }
  std::string getfn = "no getfunction line";
  for (const std::string& l : lines)
    if (l.rfind("getfunction ", 0) == 0) getfn = l;
  answer("P3.5/" + loading, std::string(inCall > 0 ? "our-call-raises-MODULE_LOADED" : "our-call-raises-none") +
                                " (MODULE_LOADED inside our cuKernelGetFunction: " + std::to_string(inCall) +
                                ", inside the launch otherwise: " + std::to_string(inLaunch) + ", at load: " +
                                std::to_string(rows(lines, "modload", is("p3.5:load")).size()) + "; " + getfn + ")");
  // P3.6
  answer("P3.6/" + loading,
         std::string("CUkernel-reused-after-cuLibraryUnload=") + (ka == kb ? "yes" : "no") +
             " CUfunction-of-kernel-reused=" + (fa == fb ? "yes" : "no") + " CUlibrary-reused=" + (la == lb ? "yes" : "no") +
             " CUfunction-reused-after-cuModuleUnload=" + (ga == gb ? "yes" : "no") + " (kernels " +
             hex(reinterpret_cast<unsigned long long>(ka)) + " " + hex(reinterpret_cast<unsigned long long>(kb)) +
             ", module functions " + hex(reinterpret_cast<unsigned long long>(ga)) + " " +
             hex(reinterpret_cast<unsigned long long>(gb)) + ")");
  for (const auto& w : rows(lines, "call", is("p3.6"))) {
    if (w[2].rfind("res:", 0) == 0) detail("p3.6 " + w[2] + " x" + w[3]);
  }
  return 0;
}

// ------------------------------------------------------------ memory: P4.1, P4.4 (runtime and driver)

std::string driverCalls(const std::vector<std::string>& lines, const std::string& source) {
  std::string out;
  for (const auto& w : rows(lines, "call", is(source))) {
    if (w[2].rfind("drv:", 0) == 0) out += (out.empty() ? "" : ",") + w[2].substr(4) + (w[3] == "1" ? "" : "x" + w[3]);
  }
  return out.empty() ? "no-driver-callback" : out;
}

int modeMemory() {
  loadSubscriber();
  makeContext();
  sub.setSource("cudart:start");
  loadKernels();
  rt.sync();
  const std::pair<const char*, const char*> apis[] = {{"m", "cudaMalloc+cudaFree"},
                                                      {"a", "cudaMallocAsync+cudaFreeAsync"},
                                                      {"h", "cudaMallocHost+cudaFreeHost"},
                                                      {"H", "cudaHostAlloc+cudaFreeHost"},
                                                      {"r", "cudaHostRegister+cudaHostUnregister"},
                                                      {"g", "cudaMallocManaged+cudaFree"}};
  std::map<std::string, int> results;
  for (const auto& [code, name] : apis) {
    sub.setSource(name);
    results[name] = rt.alloc(code);
  }
  sub.setSource("cuMemHostAlloc");
  void* p = nullptr;
  CUresult r1 = drv.cuMemHostAlloc(&p, 1 << 20, 0);
  if (r1 == CUDA_SUCCESS) drv.cuMemFreeHost(p);
  sub.setSource("cuMemAllocHost");
  CUresult r2 = drv.cuMemAllocHost(&p, 1 << 20);
  if (r2 == CUDA_SUCCESS) drv.cuMemFreeHost(p);
  sub.setSource("end");
  const auto lines = reportLines();
  for (const auto& [code, name] : apis) {
    const std::string id = code[0] == 'm' || code[0] == 'a' || code[0] == 'g' ? "P4.1/" : "P4.4/";
    answer(id + name, driverCalls(lines, name) + " (result " + rt.errorName(results[name]) + ")");
  }
  answer("P4.4/driver-cuMemHostAlloc", driverCalls(lines, "cuMemHostAlloc") + " (" + drv.name(r1) + ")");
  answer("P4.4/driver-cuMemAllocHost", driverCalls(lines, "cuMemAllocHost") + " (" + drv.name(r2) + ")");
  int canUse = -1;
  drv.cuDeviceGetAttribute(&canUse, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, device);
  answer("P4.4/attribute", "CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM=" + std::to_string(canUse));
  return 0;
}

// ------------------------------------------------------------ children run by the cross-process probes

std::string run(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + " '" + selfPath + "' " + args + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return "popen failed";
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
  const int status = pclose(f);
  if (status != 0) out += "exit status " + std::to_string(WEXITSTATUS(status)) + "\n";
  return out;
}

// The line of `out` that starts with `prefix`, and a field of it.
std::string lineOf(const std::string& out, const std::string& prefix) {
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (l.rfind(prefix, 0) == 0) return l;
  return {};
}

unsigned long long fnv(const std::vector<unsigned char>& v, size_t& nonzero, size_t& pattern) {
  unsigned long long h = 1469598103934665603ull;
  nonzero = pattern = 0;
  for (unsigned char c : v) {
    h = (h ^ c) * 1099511628211ull;
    nonzero += c != 0;
    pattern += c == 0xA5;
  }
  return h;
}

// P4.6 child: the first 64 MiB cuMemAlloc of a process, read back; "write"
// fills it with 0xA5, frees it and reads the next allocation of that size.
int modeFreshChild(bool write) {
  makeContext();
  const size_t bytes = size_t(64) << 20;
  std::vector<unsigned char> host(bytes);
  CUdeviceptr d = 0;
  check(drv.cuMemAlloc(&d, bytes), "cuMemAlloc");
  check(drv.cuMemcpyDtoH(host.data(), d, bytes), "cuMemcpyDtoH");
  size_t nz, pat;
  unsigned long long h = fnv(host, nz, pat);
  std::printf("fresh first addr=%s hash=%s nonzero=%zu pattern=%zu\n", hex(d).c_str(), hex(h).c_str(), nz, pat);
  if (write) {
    check(drv.cuMemsetD8(d, 0xA5, bytes), "cuMemsetD8");
    drv.cuCtxSynchronize();
    check(drv.cuMemFree(d), "cuMemFree");
    check(drv.cuMemAlloc(&d, bytes), "cuMemAlloc");
    check(drv.cuMemcpyDtoH(host.data(), d, bytes), "cuMemcpyDtoH");
    h = fnv(host, nz, pat);
    std::printf("fresh reuse addr=%s hash=%s nonzero=%zu pattern=%zu\n", hex(d).c_str(), hex(h).c_str(), nz, pat);
  }
  return 0;
}

int modeFresh() {
  const std::string a = run("fresh-child read"), b = run("fresh-child write"), c = run("fresh-child read");
  const std::string la = lineOf(a, "fresh first"), lb = lineOf(b, "fresh first"), lc = lineOf(c, "fresh first");
  const std::string reuse = lineOf(b, "fresh reuse");
  detail("process 1: " + la);
  detail("process 2: " + lb + " | " + reuse);
  detail("process 3 (after process 2 wrote 0xA5 and exited): " + lc);
  if (la.empty() || lb.empty() || lc.empty()) {
    answer("P4.6", "error (" + a + b + c + ")");
    return 0;
  }
  const bool same = field(la, "hash") == field(lb, "hash") && field(lb, "hash") == field(lc, "hash");
  answer("P4.6", std::string(same ? "same" : "different") + " (first cuMemAlloc of 64 MiB in three processes: nonzero bytes " +
                     field(la, "nonzero") + "/" + field(lb, "nonzero") + "/" + field(lc, "nonzero") +
                     "; previous process's 0xA5 visible in the next: " + (field(lc, "pattern") != "0" ? "yes" : "no") +
                     "; same process, freed and reallocated: " +
                     (field(reuse, "pattern") != "0" ? "old contents kept" : "cleared") + ")");
  return 0;
}

// P8.6 child: "first" prints a cuMemAlloc address and a reservation made
// without a hint; "hint ALLOC RESERVE [PREALLOC]" asks for them as hints.
size_t granularity() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t g = 0;
  if (drv.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || g == 0) g = 2 << 20;
  return g;
}

int modeReserveChild(int argc, char** argv) {
  makeContext();
  const size_t bytes = size_t(64) << 20;
  const size_t g = granularity();
  if (std::string(argv[2]) == "first") {
    CUdeviceptr a = 0, r = 0;
    check(drv.cuMemAlloc(&a, bytes), "cuMemAlloc");
    check(drv.cuMemAddressReserve(&r, bytes, g, 0, 0), "cuMemAddressReserve");
    std::printf("reserve alloc=%s reserve=%s granularity=%zu\n", hex(a).c_str(), hex(r).c_str(), g);
    return 0;
  }
  const CUdeviceptr allocHint = std::strtoull(argv[3], nullptr, 0), reserveHint = std::strtoull(argv[4], nullptr, 0);
  if (argc > 5) {  // the replayed program allocated first
    CUdeviceptr pre = 0;
    check(drv.cuMemAlloc(&pre, size_t(256) << 20), "cuMemAlloc");
    std::printf("reserve prealloc=%s\n", hex(pre).c_str());
  }
  CUdeviceptr r1 = 0, r2 = 0;
  CUresult e1 = drv.cuMemAddressReserve(&r1, bytes, g, reserveHint, 0);
  CUresult e2 = drv.cuMemAddressReserve(&r2, bytes, g, allocHint, 0);
  // The reservation is usable: map memory into it and write.
  std::string mapped = "not tried";
  if (e1 == CUDA_SUCCESS) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    CUmemGenericAllocationHandle h = 0;
    CUresult c = drv.cuMemCreate(&h, bytes, &prop, 0);
    CUresult m = c == CUDA_SUCCESS ? drv.cuMemMap(r1, bytes, 0, h, 0) : c;
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUresult s = m == CUDA_SUCCESS ? drv.cuMemSetAccess(r1, bytes, &access, 1) : m;
    CUresult w = s == CUDA_SUCCESS ? drv.cuMemsetD8(r1, 1, bytes) : s;
    drv.cuCtxSynchronize();
    mapped = drv.name(w);
  }
  std::printf("reserve hinted reserve=%s(%s) alloc-address=%s(%s) map+write=%s\n", hex(r1).c_str(), drv.name(e1).c_str(),
              hex(r2).c_str(), drv.name(e2).c_str(), mapped.c_str());
  return 0;
}

int modeReserve() {
  const std::string first = run("reserve-child first");
  const std::string l = lineOf(first, "reserve alloc");
  detail("process 1: " + l);
  if (l.empty()) {
    answer("P8.6", "error (" + first + ")");
    return 0;
  }
  const std::string alloc = field(l, "alloc"), reserve = field(l, "reserve");
  const std::string second = run("reserve-child hint " + alloc + " " + reserve);
  const std::string third = run("reserve-child hint " + alloc + " " + reserve + " prealloc");
  const std::string l2 = lineOf(second, "reserve hinted"), l3 = lineOf(third, "reserve hinted");
  detail("process 2: " + l2);
  detail("process 3 (256 MiB cuMemAlloc first): " + lineOf(third, "reserve prealloc") + " " + l3);
  auto got = [](const std::string& line, const std::string& key) {
    const std::string v = field(line, key);
    return v.substr(0, v.find('('));
  };
  const bool honoured = got(l2, "reserve") == reserve;
  answer("P8.6", std::string(honoured ? "honoured" : "not-honoured") + " (reservation hint " + reserve + " -> " +
                     got(l2, "reserve") + "; a cuMemAlloc address " + alloc + " as hint -> " + got(l2, "alloc-address") +
                     "; after a 256 MiB cuMemAlloc: " + got(l3, "reserve") + " and " + got(l3, "alloc-address") +
                     "; mapped and written: " + field(l2, "map+write") + ")");
  return 0;
}

// ------------------------------------------------------------ callbacks: P5.1

int modeCallbacks() {
  loadSubscriber();
  makeContext();
  CUmodule m = loadProbeModule();
  CUfunction f = get(m, "add_one");
  sub.setFunction(f);
  const int threads = 4;
  const int launches = std::getenv("PROBE_P51_LAUNCHES") ? std::atoi(std::getenv("PROBE_P51_LAUNCHES")) : 1250;
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 800 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!done) {
      answer("P5.1", "deadlock (not finished after 80 s)");
      std::fflush(stdout);
      _exit(3);
    }
  });
  sub.setSource("p5.1");
  sub.setAction("hashseq");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  std::atomic<int> launchErrors{0}, wrong{0};
  constexpr unsigned n = 1024;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      drv.cuCtxSetCurrent(context);
      CUstream s = nullptr;
      CUdeviceptr d = 0;
      check(drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
      check(drv.cuMemAlloc(&d, n * 4), "cuMemAlloc");
      drv.cuMemsetD8(d, 0, n * 4);
      for (int i = 0; i < launches; ++i) {
        if (launchAddOne(f, d, n, s) != CUDA_SUCCESS) launchErrors++;
      }
      drv.cuStreamSynchronize(s);
      std::vector<unsigned> h(n);
      drv.cuMemcpyDtoH(h.data(), d, n * 4);
      for (unsigned v : h) wrong += v != static_cast<unsigned>(launches);
    });
  }
  for (auto& t : pool) t.join();
  sub.setAction("");
  done = true;
  watchdog.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto lines = reportLines();
  std::string hash, nested;
  for (const std::string& l : lines) {
    if (l.rfind("hashseq ", 0) == 0) hash = l;
  }
  for (const auto& w : rows(lines, "nested", is("p5.1"))) nested += (nested.empty() ? "" : ",") + w[2] + "x" + w[3];
  const bool ok = field(hash, "errors") == "0" && launchErrors == 0 && wrong == 0 &&
                  field(hash, "ok") == std::to_string(2 * threads * launches);
  answer("P5.1", std::string(ok ? "works" : "fails") + " (" + std::to_string(threads) + " threads x " +
                     std::to_string(launches) + " launches, each with the hash sequence in ENTER and EXIT: " +
                     hash.substr(8) + "; program launch errors " + std::to_string(launchErrors.load()) +
                     ", wrong words " + std::to_string(wrong.load()) + "; " + std::to_string(seconds) + " s)");
  answer("P5.1/nested", nested.empty() ? "none (the probe's calls from inside callbacks raised no callbacks)"
                                       : "raised (" + nested + ")");
  return 0;
}

// ------------------------------------------------------------ checkpoint: P5.7

int modeCheckpoint() {
  loadSubscriber();
  makeContext();
  CUmodule m = loadProbeModule();
  CUfunction f = get(m, "add_one");
  constexpr unsigned n = 1 << 18;
  CUdeviceptr d = 0;
  check(drv.cuMemAlloc(&d, n * 4), "cuMemAlloc");
  std::vector<unsigned> h(n);
  for (unsigned i = 0; i < n; ++i) h[i] = i * 2654435761u;
  check(drv.cuMemcpyHtoD(d, h.data(), n * 4), "cuMemcpyHtoD");
  sub.setFunction(f);
  sub.setBuffer(d, n * 4);
  sub.setSource("p5.7");
  sub.setAction("checkpoint");
  CUresult r1 = launchAddOne(f, d, n);
  drv.cuCtxSynchronize();
  CUresult r2 = launchAddOne(f, d, n);
  drv.cuCtxSynchronize();
  sub.setAction("");
  // The program's own result: two add_one launches (the restores undo only the probe's work in between).
  std::vector<unsigned> out(n);
  drv.cuMemcpyDtoH(out.data(), d, n * 4);
  unsigned wrong = 0;
  for (unsigned i = 0; i < n; ++i) wrong += out[i] != h[i] + 1;  // launch 2 was rolled back at its EXIT
  const auto lines = reportLines();
  std::string enterOnly, enterExit;
  for (const std::string& l : lines) {
    if (l.rfind("checkpoint ", 0) != 0) continue;
    detail(l);
    if (l.find("launch=1 ") != std::string::npos && l.find("where=enter") != std::string::npos) enterOnly = l;
    if (l.find("launch=2 ") != std::string::npos && l.find("where=exit") != std::string::npos) enterExit = l;
  }
  cuptiDetail(lines);
  auto works = [](const std::string& l) {
    return !l.empty() && l.find("CUPTI_SUCCESS") != std::string::npos && field(l, "identical_after_restore") == "1" &&
           field(l, "changed") == "1" && l.find("restore=CUPTI_SUCCESS") != std::string::npos;
  };
  answer("P5.7", std::string(works(enterOnly) && works(enterExit) ? "works" : "fails") +
                     " (save, own launch, restore all in ENTER: " + (works(enterOnly) ? "identical" : "NOT identical or error") +
                     "; save in ENTER, restore in EXIT: " + (works(enterExit) ? "identical" : "NOT identical or error") +
                     "; program launches " + drv.name(r1) + "/" + drv.name(r2) + ", buffer afterwards as expected: " +
                     (wrong == 0 ? "yes" : "no, " + std::to_string(wrong) + " words differ") +
                     "; pinned host memory the CPU wrote after the save rolled back by the restore: " +
                     field(enterOnly, "pinned_host_rolled_back") + ")");
  return 0;
}

// ------------------------------------------------------------ lazy loading: P6.4

int modeLazyLoad() {
  makeContext();
  const char* mode = std::getenv("CUDA_MODULE_LOADING");
  CUmodule m = loadProbeModule();
  CUfunction spin = get(m, "spin_wait"), set = get(m, "set_flag"), fa = get(m, "fresh_a"), fb = get(m, "fresh_b");
  CUstream a = nullptr, b = nullptr, c = nullptr;
  for (CUstream* s : {&a, &b, &c}) check(drv.cuStreamCreate(s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  CUdeviceptr mem = 0;
  check(drv.cuMemAlloc(&mem, 4096), "cuMemAlloc");
  CUdeviceptr flag = mem, result = mem + 4, out = mem + 256;
  unsigned long long timeout = 3000000000ull;  // 3 s
  auto launchSpin = [&](CUstream s) {
    void* args[] = {&flag, &result, &timeout};
    return drv.cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  };
  auto launchSet = [&](CUstream s) {
    void* args[] = {&flag};
    return drv.cuLaunchKernel(set, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  };
  // Load the spinner and the setter: run both once with the flag already set.
  drv.cuMemsetD8(mem, 0, 4096);
  check(launchSet(b), "set_flag");
  drv.cuStreamSynchronize(b);
  check(launchSpin(a), "spin_wait");
  drv.cuStreamSynchronize(a);
  auto state = [&](CUfunction f) {
    CUfunctionLoadingState st = CU_FUNCTION_LOADING_STATE_MAX;
    if (drv.cuFuncIsLoaded == nullptr || drv.cuFuncIsLoaded(&st, f) != CUDA_SUCCESS) return std::string("?");
    return std::string(st == CU_FUNCTION_LOADING_STATE_LOADED ? "loaded" : "unloaded");
  };
  auto trial = [&](CUfunction fresh, const char* label) {
    drv.cuMemsetD8(mem, 0, 256);
    drv.cuCtxSynchronize();
    const std::string before = state(fresh);
    check(launchSpin(a), "spin_wait");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto t0 = std::chrono::steady_clock::now();
    void* args[] = {&out};
    CUresult r = drv.cuLaunchKernel(fresh, 1, 1, 1, 32, 1, 1, 0, c, args, nullptr);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    check(launchSet(b), "set_flag");
    drv.cuCtxSynchronize();
    unsigned res = 0;
    drv.cuMemcpyDtoH(&res, result, 4);
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s: state before %s, first launch %s in %.1f ms, spinner %s", label, before.c_str(),
                  drv.name(r).c_str(), ms, res == 1 ? "saw the flag" : res == 2 ? "timed out" : "did not finish");
    detail(buf);
    return ms > 1000 || res != 1;
  };
  const bool blocks = trial(fa, "without cuFuncLoad");
  CUresult lr = drv.cuFuncLoad ? drv.cuFuncLoad(fb) : CUDA_ERROR_NOT_SUPPORTED;
  const bool blocksAfterLoad = trial(fb, (std::string("after cuFuncLoad (") + drv.name(lr) + ")").c_str());
  answer("P6.4/" + std::string(mode ? mode : "default"),
         std::string(blocks ? "first-launch-waits-for-running-kernels" : "first-launch-does-not-wait") +
             " (with cuFuncLoad beforehand: " + (blocksAfterLoad ? "still waits" : "does not wait") + ")");
  return 0;
}

// ------------------------------------------------------------ injection: P1.2

int modeInjectChild() {
  const CUresult init = drv.cuInit(0);
  std::string kernel = "not run";
  if (init == CUDA_SUCCESS) {
    makeContext();
    const auto image = probeModuleImage();
    CUmodule m = nullptr;
    CUdeviceptr d = 0;
    constexpr unsigned n = 256;
    if (drv.cuModuleLoadData(&m, image.data()) == CUDA_SUCCESS && drv.cuMemAlloc(&d, n * 4) == CUDA_SUCCESS) {
      drv.cuMemsetD8(d, 0, n * 4);
      CUresult r = launchAddOne(get(m, "add_one"), d, n);
      std::vector<unsigned> h(n);
      drv.cuMemcpyDtoH(h.data(), d, n * 4);
      kernel = r == CUDA_SUCCESS && h[n - 1] == 1 ? "ran" : "failed(" + drv.name(r) + ")";
    }
  }
  // Did the driver load and start the probe's injection library?
  std::string injected = "not-loaded";
  void* h = openBeside("libprobe_subscriber.so", RTLD_NOW | RTLD_NOLOAD);
  if (h != nullptr) {
    auto count = reinterpret_cast<int (*)()>(dlsym(h, "probe_injected"));
    auto report = reinterpret_cast<const char* (*)()>(dlsym(h, "probe_report"));
    std::string started = report ? field(lineOf(report(), "cupti "), "started") : "?";
    injected = "InitializeInjection-called=" + std::to_string(count ? count() : -1) + ",subscribed=" + started;
  }
  std::printf("inject cuInit=%s kernel=%s probe-library=%s\n", drv.name(init).c_str(), kernel.c_str(), injected.c_str());
  return 0;
}

int modeInject(const char* recorder) {
  const std::string lib = selfDir + "/libprobe_subscriber.so";
  const std::string base = "CUDA_INJECTION64_PATH='" + lib + "'";
  struct Case {
    const char* label;
    std::string env;
  };
  std::vector<Case> cases = {{"returns-1", base + " PROBE_INIT_RETURN=1"},
                             {"returns-0", base + " PROBE_INIT_RETURN=0"},
                             {"fails-returns-1", base + " PROBE_INIT_FAIL=1 PROBE_INIT_RETURN=1"},
                             {"fails-returns-0", base + " PROBE_INIT_FAIL=1 PROBE_INIT_RETURN=0"}};
  if (recorder != nullptr && access(recorder, R_OK) == 0)
    cases.push_back({"gpurr-recorder-without-GPURR_OUTPUT", std::string("env -u GPURR_OUTPUT CUDA_INJECTION64_PATH='") + recorder + "'"});
  std::string summary;
  bool allRan = true;
  for (const Case& c : cases) {
    const std::string out = run("inject-child", c.env);
    std::string l = lineOf(out, "inject ");
    if (l.empty()) l = "no answer: " + out;
    detail(std::string(c.label) + ": " + l);
    const bool ran = field(l, "cuInit") == "CUDA_SUCCESS" && field(l, "kernel") == "ran";
    allRan = allRan && ran;
    summary += std::string(summary.empty() ? "" : " ") + c.label + "=" + (ran ? "runs" : "cuInit:" + field(l, "cuInit"));
  }
  answer("P1.2", std::string(allRan ? "return-value-ignored" : "return-value-matters") + " (" + summary + ")");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  char exe[4096] = {};
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  selfPath = len > 0 ? std::string(exe, static_cast<size_t>(len)) : argv[0];
  selfDir = selfPath.substr(0, selfPath.rfind('/'));
  const std::string mode = argc > 1 ? argv[1] : "";
  const char* usage =
      "usage: cupti_probe check|launches|modules|memory|fresh|reserve|callbacks|checkpoint|lazyload|inject [RECORDER.so]";
  const std::set<std::string> modes = {"check", "launches", "modules", "memory", "fresh", "fresh-child", "reserve",
                                       "reserve-child", "callbacks", "checkpoint", "lazyload", "inject", "inject-child"};
  if (modes.count(mode) == 0) {
    std::fprintf(stderr, "%s\n", usage);
    return 2;
  }
  if (mode == "inject-child") {  // the injection under test must see cuInit first
    std::string error;
    if (!drv.load(error)) {
      std::printf("no GPU: %s\n", error.c_str());
      return 77;
    }
    return modeInjectChild();
  }
  requireGpu();
  if (mode == "check") return modeCheck();
  if (mode == "launches") return modeLaunches();
  if (mode == "modules") return modeModules();
  if (mode == "memory") return modeMemory();
  if (mode == "fresh") return modeFresh();
  if (mode == "fresh-child") return modeFreshChild(argc > 2 && std::string(argv[2]) == "write");
  if (mode == "reserve") return modeReserve();
  if (mode == "reserve-child") return modeReserveChild(argc, argv);
  if (mode == "callbacks") return modeCallbacks();
  if (mode == "checkpoint") return modeCheckpoint();
  if (mode == "lazyload") return modeLazyLoad();
  return modeInject(argc > 2 ? argv[2] : nullptr);
}
