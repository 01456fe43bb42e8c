// libprobe_subscriber.so: a bare CUPTI subscriber for the GPU probes
// (tests/gpu/probe/README.md). It is either loaded by the driver as a CUPTI
// injection library (CUDA_INJECTION64_PATH, as the recorder is) or dlopened
// by cupti_probe / ctypes and started with probe_start(). It enables every
// driver, runtime and resource callback and records, per "source" (a tag the
// caller sets before each piece of work):
//   - every API callback by name (driver "drv:", runtime "rt:"), and those
//     raised by the probe's own calls made inside a callback ("nested");
//   - the shape of each kernel launch: driver only, runtime only, or a
//     runtime launch with a driver launch nested in it on the same thread;
//   - each MODULE_LOADED: thread, the API calls open on that thread, whether
//     it came inside a call the probe made from a callback;
//   - the results of optional in-callback actions (probe_set_action).
// probe_report() returns all of it as text lines (format in report()).
#include <cupti.h>
#include <cupti_checkpoint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/gpu/probe/probe_driver.h"

namespace {

using CheckpointFn = CUptiResult (*)(void*);

struct Cupti {
  void* lib = nullptr;
  std::string path, how, checkpointPath;
  decltype(&cuptiSubscribe_v2) subscribe = nullptr;
  decltype(&cuptiEnableDomain) enableDomain = nullptr;
  decltype(&cuptiGetVersion) getVersion = nullptr;
  decltype(&cuptiGetResultString) resultString = nullptr;
  CheckpointFn save = nullptr, restore = nullptr, free = nullptr;
};

// The state callbacks touch is never destroyed: CUDA's own teardown at exit
// (the runtime's atexit handler destroying contexts) raises callbacks after
// the main thread's thread_local and the static destructors have run, and a
// destroyed container written to there corrupts the heap
// ("malloc_consolidate(): invalid chunk size" at the end of a probe).
Cupti g_cupti;
probe::Driver g_drv;
std::mutex& g_mu = *new std::mutex();
std::atomic<const char*> g_source{"start"};
std::atomic<int> g_injected{0};
bool g_started = false;
std::string& g_startError = *new std::string();
std::set<std::string>& g_actions = *new std::set<std::string>();  // set before the work they apply to

// Everything recorded, under g_mu.
using Counts = std::map<std::string, std::map<std::string, long>>;
Counts& g_calls = *new Counts();        // source -> "drv:name" -> count
Counts& g_nestedCalls = *new Counts();  // raised by the probe's own calls
Counts& g_launches = *new Counts();     // source -> shape -> count
std::vector<std::string>& g_lines = *new std::vector<std::string>();  // modload / kinds / layout / action lines
std::set<std::string>& g_once = *new std::set<std::string>();

struct Open {
  bool runtime;
  std::string name;
};
struct ThreadState {
  std::vector<Open> stack;   // API calls open on this thread, outermost first
  int inAction = 0;          // > 0 while the probe itself calls the driver from a callback
  int probeCall = 0;         // > 0 inside the call whose MODULE_LOADEDs are counted (getfunction)
  bool runtimeLaunchOpen = false;
  std::string runtimeLaunch, nestedDriverLaunch;
  // hashseq resources, made on first use inside a callback
  CUdeviceptr scratch = 0;
  unsigned* host = nullptr;
  CUevent event = nullptr;
};
thread_local ThreadState& tls = *new ThreadState();

// For the hashseq and checkpoint actions.
CUfunction g_hashFn = nullptr;
CUdeviceptr g_buffer = 0;
size_t g_bufferBytes = 0;
std::atomic<long> g_hashOk{0}, g_hashErrors{0};
std::string& g_hashFirstError = *new std::string();
int g_checkpointLaunch = 0;
std::vector<unsigned char>& g_before = *new std::vector<unsigned char>();
bool g_checkpointSaved = false;
alignas(8) unsigned char g_checkpoint[64];  // a CUpti_Checkpoint
static_assert(sizeof(NV::Cupti::Checkpoint::CUpti_Checkpoint) <= sizeof g_checkpoint);

thread_local sigjmp_buf* tlsJump = nullptr;
void onSegv(int sig) {
  if (tlsJump != nullptr) siglongjmp(*tlsJump, sig);
  signal(sig, SIG_DFL);
  raise(sig);
}

long tid() { return static_cast<long>(syscall(SYS_gettid)); }
std::string source() { return g_source.load(); }
std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}
void line(const std::string& s) {
  std::lock_guard lock(g_mu);
  g_lines.push_back(s);
}
bool action(const char* name) {
  std::lock_guard lock(g_mu);
  return g_actions.count(name) != 0;
}
bool once(const std::string& key) {
  std::lock_guard lock(g_mu);
  return g_once.insert(key).second;
}
std::string stackText() {
  std::string s;
  for (const Open& o : tls.stack) s += (s.empty() ? "" : ">") + std::string(o.runtime ? "rt:" : "drv:") + o.name;
  return s.empty() ? "-" : s;
}

bool isDriverLaunch(const char* n) {
  return std::strncmp(n, "cuLaunchKernel", 14) == 0 || std::strncmp(n, "cuLaunchCooperativeKernel", 25) == 0 ||
         std::strncmp(n, "cuGraphLaunch", 13) == 0;
}
bool isRuntimeLaunch(const char* n) {
  return std::strncmp(n, "cudaLaunchKernel", 16) == 0 || std::strncmp(n, "__cudaLaunchKernel", 18) == 0 ||
         std::strncmp(n, "cudaLaunchCooperativeKernel", 27) == 0 || std::strncmp(n, "cudaGraphLaunch", 15) == 0;
}

// The CUfunction and stream of a driver launch callback.
void driverLaunchTarget(const char* n, const void* params, CUfunction& f, CUstream& s) {
  f = nullptr;
  s = nullptr;
  if (std::strncmp(n, "cuLaunchKernelEx", 16) == 0) {
    const auto* p = static_cast<const cuLaunchKernelEx_params*>(params);
    f = p->f;
    if (p->config != nullptr) s = p->config->hStream;
  } else if (std::strncmp(n, "cuLaunchKernel", 14) == 0) {
    const auto* p = static_cast<const cuLaunchKernel_params*>(params);
    f = p->f;
    s = p->hStream;
  } else if (std::strncmp(n, "cuLaunchCooperativeKernel", 25) == 0) {
    const auto* p = static_cast<const cuLaunchCooperativeKernel_params*>(params);
    f = p->f;
    s = p->hStream;
  }
}

// __cudaLaunchKernel's parameters as the recorder reads them (session.cpp).
struct Dim3 {
  unsigned x, y, z;
};
struct CudaLaunchKernelHandleParams {
  void* kernel;
  Dim3 gridDim;
  Dim3 blockDim;
  void** args;
  size_t sharedMem;
  void* stream;
};

// Runs `fn` with SIGSEGV/SIGBUS turned into a "crash" answer.
template <typename Fn>
std::string guarded(Fn fn) {
  sigjmp_buf jump;
  struct sigaction sa{}, oldSegv{}, oldBus{};
  sa.sa_handler = onSegv;
  sigaction(SIGSEGV, &sa, &oldSegv);
  sigaction(SIGBUS, &sa, &oldBus);
  std::string out;
  tlsJump = &jump;
  if (sigsetjmp(jump, 1) == 0) {
    out = fn();
  } else {
    out = "CRASH";
  }
  tlsJump = nullptr;
  sigaction(SIGSEGV, &oldSegv, nullptr);
  sigaction(SIGBUS, &oldBus, nullptr);
  return out;
}

// P2.6: what the handle a launch callback carries answers to.
void describeHandle(const std::string& via, void* handle) {
  if (!once(source() + via + hex(reinterpret_cast<uint64_t>(handle)))) return;
  std::ostringstream o;
  o << "kinds " << source() << " via=" << via;
  o << " lib=" << guarded([&] {
    CUlibrary lib = nullptr;
    return g_drv.cuKernelGetLibrary ? g_drv.name(g_drv.cuKernelGetLibrary(&lib, static_cast<CUkernel>(handle)))
                                    : std::string("absent");
  });
  auto named = [&](CUresult r, const char* n) { return g_drv.name(r) + (r == CUDA_SUCCESS && n ? std::string(":") + n : ""); };
  o << " funcname=" << guarded([&] {
    const char* n = nullptr;
    return g_drv.cuFuncGetName ? named(g_drv.cuFuncGetName(&n, static_cast<CUfunction>(handle)), n) : std::string("absent");
  });
  o << " kernelname=" << guarded([&] {
    const char* n = nullptr;
    return g_drv.cuKernelGetName ? named(g_drv.cuKernelGetName(&n, static_cast<CUkernel>(handle)), n) : std::string("absent");
  });
  auto params = [&](auto get) {
    size_t count = 0, off = 0, size = 0;
    CUresult r = CUDA_SUCCESS;
    while (count < 64 && (r = get(count, &off, &size)) == CUDA_SUCCESS) ++count;
    return g_drv.name(r) + "@" + std::to_string(count);  // the result that ended the walk, and the count before it
  };
  o << " funcparams=" << guarded([&] {
    return g_drv.cuFuncGetParamInfo ? params([&](size_t i, size_t* a, size_t* b) {
      return g_drv.cuFuncGetParamInfo(static_cast<CUfunction>(handle), i, a, b);
    }) : std::string("absent");
  });
  o << " kernelparams=" << guarded([&] {
    return g_drv.cuKernelGetParamInfo ? params([&](size_t i, size_t* a, size_t* b) {
      return g_drv.cuKernelGetParamInfo(static_cast<CUkernel>(handle), i, a, b);
    }) : std::string("absent");
  });
  o << " getfunction=" << guarded([&] {
    CUfunction fn = nullptr;
    return g_drv.cuKernelGetFunction ? g_drv.name(g_drv.cuKernelGetFunction(&fn, static_cast<CUkernel>(handle)))
                                     : std::string("absent");
  });
  line(o.str());
}

// P5.1: the recorder's hash sequence on the launch's stream.
void hashSequence(CUstream stream) {
  constexpr unsigned kWords = 4096;
  auto fail = [&](const char* what, CUresult r) {
    g_hashErrors++;
    std::lock_guard lock(g_mu);
    if (g_hashFirstError.empty()) g_hashFirstError = std::string(what) + "=" + g_drv.name(r);
  };
  CUresult r;
  if (tls.scratch == 0) {
    if ((r = g_drv.cuMemAlloc(&tls.scratch, kWords * 4)) != CUDA_SUCCESS) return fail("cuMemAlloc", r);
    void* h = nullptr;
    if ((r = g_drv.cuMemAllocHost(&h, kWords * 4)) != CUDA_SUCCESS) return fail("cuMemAllocHost", r);
    tls.host = static_cast<unsigned*>(h);
    if ((r = g_drv.cuEventCreate(&tls.event, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) return fail("cuEventCreate", r);
  }
  for (unsigned i = 0; i < kWords; ++i) tls.host[i] = i * 7u;
  unsigned n = kWords;
  void* args[] = {&tls.scratch, &n};
  if ((r = g_drv.cuMemcpyHtoDAsync(tls.scratch, tls.host, kWords * 4, stream)) != CUDA_SUCCESS) return fail("HtoD", r);
  if ((r = g_drv.cuLaunchKernel(g_hashFn, (kWords + 255) / 256, 1, 1, 256, 1, 1, 0, stream, args, nullptr)) != CUDA_SUCCESS)
    return fail("cuLaunchKernel", r);
  if ((r = g_drv.cuMemcpyDtoHAsync(tls.host, tls.scratch, kWords * 4, stream)) != CUDA_SUCCESS) return fail("DtoH", r);
  if ((r = g_drv.cuEventRecord(tls.event, stream)) != CUDA_SUCCESS) return fail("cuEventRecord", r);
  if ((r = g_drv.cuEventSynchronize(tls.event)) != CUDA_SUCCESS) return fail("cuEventSynchronize", r);
  for (unsigned i = 0; i < kWords; ++i) {
    if (tls.host[i] != i * 7u + 1u) return fail("wrong result", CUDA_SUCCESS);
  }
  g_hashOk++;
}

std::vector<unsigned char> readBuffer() {
  std::vector<unsigned char> v(g_bufferBytes);
  g_drv.cuMemcpyDtoH(v.data(), g_buffer, g_bufferBytes);
  return v;
}

// P5.7: checkpoint save/restore inside launch callbacks. The first launch of
// the source saves, runs the probe's own kernel on the buffer and restores,
// all in ENTER; the second saves in ENTER and restores in EXIT (after the
// program's kernel changed the buffer).
void checkpointAction(bool enter) {
  using NV::Cupti::Checkpoint::CUpti_Checkpoint;
  auto* cp = reinterpret_cast<CUpti_Checkpoint*>(g_checkpoint);
  auto text = [](CUptiResult r) {
    const char* s = nullptr;
    if (g_cupti.resultString) g_cupti.resultString(r, &s);
    return std::string(s ? s : "?");
  };
  if (g_cupti.save == nullptr) {
    if (once("nockpt")) line("checkpoint no libcheckpoint.so beside " + g_cupti.path);
    return;
  }
  if (enter) {
    ++g_checkpointLaunch;
    std::memset(g_checkpoint, 0, sizeof g_checkpoint);
    cp->structSize = CUpti_Checkpoint_STRUCT_SIZE;
    cp->allowOverwrite = 1;
    CUresult s = g_drv.cuCtxSynchronize();
    g_before = readBuffer();
    // Pinned host memory the CPU writes between save and restore (a
    // DataLoader's pin_memory thread): does the restore roll it back?
    static void* pinned = nullptr;
    if (g_checkpointLaunch == 1 && pinned == nullptr && g_drv.cuMemHostAlloc(&pinned, 4096, 0) != CUDA_SUCCESS)
      pinned = nullptr;
    if (pinned != nullptr) std::memset(pinned, 0x11, 4096);
    CUptiResult r = g_cupti.save(cp);
    g_checkpointSaved = r == CUPTI_SUCCESS;
    std::string head = "checkpoint launch=" + std::to_string(g_checkpointLaunch) + " sync=" + g_drv.name(s) +
                       " save=" + text(r);
    if (g_checkpointLaunch == 1 && g_checkpointSaved) {
      unsigned n = static_cast<unsigned>(g_bufferBytes / 4);
      void* args[] = {&g_buffer, &n};
      CUresult l = g_drv.cuLaunchKernel(g_hashFn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
      g_drv.cuCtxSynchronize();
      bool changed = readBuffer() != g_before;
      if (pinned != nullptr) std::memset(pinned, 0x22, 4096);  // the CPU, after the save
      CUptiResult rr = g_cupti.restore(cp);
      g_drv.cuCtxSynchronize();
      bool same = readBuffer() == g_before;
      g_cupti.free(cp);
      g_checkpointSaved = false;
      const char* pinnedAfter = pinned == nullptr                           ? "unknown"
                                : static_cast<unsigned char*>(pinned)[0] == 0x11 ? "1"
                                                                                 : "0";
      line(head + " where=enter own_launch=" + g_drv.name(l) + " changed=" + (changed ? "1" : "0") +
           " restore=" + text(rr) + " identical_after_restore=" + (same ? "1" : "0") +
           " pinned_host_rolled_back=" + pinnedAfter);
    } else {
      line(head + " where=enter");
    }
    return;
  }
  if (!g_checkpointSaved) return;
  g_drv.cuCtxSynchronize();
  bool changed = readBuffer() != g_before;
  CUptiResult rr = g_cupti.restore(cp);
  g_drv.cuCtxSynchronize();
  bool same = readBuffer() == g_before;
  g_cupti.free(cp);
  g_checkpointSaved = false;
  line("checkpoint launch=" + std::to_string(g_checkpointLaunch) + " where=exit changed=" + (changed ? "1" : "0") +
       " restore=" + text(rr) + " identical_after_restore=" + (same ? "1" : "0"));
}

void onDriverLaunch(const char* name, const CUpti_CallbackData* cb) {
  CUfunction f = nullptr;
  CUstream stream = nullptr;
  driverLaunchTarget(name, cb->functionParams, f, stream);
  const bool enter = cb->callbackSite == CUPTI_API_ENTER;
  ++tls.inAction;
  if (enter && action("kinds") && f != nullptr) describeHandle(std::string("drv:") + name, f);
  if (enter && action("getfunction") && f != nullptr && g_drv.cuKernelGetLibrary != nullptr) {
    CUlibrary lib = nullptr;
    if (g_drv.cuKernelGetLibrary(&lib, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS &&
        once("getfunction" + hex(reinterpret_cast<uint64_t>(f)))) {
      size_t before;
      {
        std::lock_guard lock(g_mu);
        before = g_lines.size();
      }
      ++tls.probeCall;
      CUfunction fn = nullptr;
      CUresult r = g_drv.cuKernelGetFunction(&fn, reinterpret_cast<CUkernel>(f));
      --tls.probeCall;
      long loads = 0;
      {
        std::lock_guard lock(g_mu);
        for (size_t i = before; i < g_lines.size(); ++i) loads += g_lines[i].rfind("modload ", 0) == 0;
      }
      line("getfunction " + source() + " rc=" + g_drv.name(r) + " modloads_during=" + std::to_string(loads));
    }
  }
  if (action("hashseq") && g_hashFn != nullptr) hashSequence(stream);
  if (action("checkpoint") && g_buffer != 0) checkpointAction(enter);
  --tls.inAction;
}

void onRuntimeLaunch(const char* name, const CUpti_CallbackData* cb) {
  if (cb->callbackSite != CUPTI_API_ENTER) return;
  const bool handle = std::strncmp(name, "__cudaLaunchKernel", 18) == 0;
  if (!handle) return;
  const auto* p = static_cast<const CudaLaunchKernelHandleParams*>(cb->functionParams);
  ++tls.inAction;
  if (action("layout")) {
    std::ostringstream o;
    o << "layout " << source() << " name=" << name << " kernel=" << hex(reinterpret_cast<uint64_t>(p->kernel))
      << " grid=" << p->gridDim.x << "," << p->gridDim.y << "," << p->gridDim.z << " block=" << p->blockDim.x << ","
      << p->blockDim.y << "," << p->blockDim.z << " shared=" << p->sharedMem
      << " stream=" << hex(reinterpret_cast<uint64_t>(p->stream)) << " arg2="
      << guarded([&] {
           return p->args != nullptr && p->args[2] != nullptr ? hex(*static_cast<const unsigned*>(p->args[2]))
                                                              : std::string("null");
         });
    line(o.str());
  }
  if (action("kinds")) describeHandle(std::string("rt:") + name, p->kernel);
  --tls.inAction;
}

void CUPTIAPI onCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    const auto* rd = static_cast<const CUpti_ResourceData*>(data);
    if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
      const auto* m = static_cast<const CUpti_ModuleResourceData*>(rd->resourceDescriptor);
      std::ostringstream o;
      o << "modload " << source() << " tid=" << tid() << " stack=" << stackText()
        << " probecall=" << (tls.probeCall > 0 ? 1 : 0) << " inaction=" << (tls.inAction > 0 ? 1 : 0)
        << " cubin=" << (m ? m->cubinSize : 0);
      line(o.str());
    }
    std::string key = cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED ? "res:MODULE_LOADED"
                      : cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING ? "res:MODULE_UNLOAD_STARTING"
                      : cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED ? "res:CONTEXT_CREATED"
                                                                    : "res:" + std::to_string(cbid);
    std::lock_guard lock(g_mu);
    g_calls[source()][key]++;
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const char* name = cb->functionName ? cb->functionName : "?";
  if (cb->callbackSite == CUPTI_API_ENTER) {
    {
      std::lock_guard lock(g_mu);
      (tls.inAction > 0 ? g_nestedCalls : g_calls)[source()][(runtime ? "rt:" : "drv:") + std::string(name)]++;
    }
    tls.stack.push_back({runtime, name});
    if (tls.inAction > 0) return;
    if (runtime && isRuntimeLaunch(name)) {
      tls.runtimeLaunchOpen = true;
      tls.runtimeLaunch = name;
      tls.nestedDriverLaunch.clear();
      onRuntimeLaunch(name, cb);
    } else if (!runtime && isDriverLaunch(name)) {
      if (tls.runtimeLaunchOpen) {
        tls.nestedDriverLaunch = name;
      } else {
        std::lock_guard lock(g_mu);
        g_launches[source()][std::string("drv:") + name]++;
      }
      onDriverLaunch(name, cb);
    }
    return;
  }
  // EXIT
  if (!tls.stack.empty()) tls.stack.pop_back();
  if (tls.inAction > 0) return;
  if (runtime && isRuntimeLaunch(name) && tls.runtimeLaunchOpen) {
    tls.runtimeLaunchOpen = false;
    std::string shape = "rt:" + tls.runtimeLaunch + (tls.nestedDriverLaunch.empty() ? "" : ">drv:" + tls.nestedDriverLaunch);
    std::lock_guard lock(g_mu);
    g_launches[source()][shape]++;
  } else if (!runtime && isDriverLaunch(name)) {
    onDriverLaunch(name, cb);
  }
}

std::string fileOf(void* symbol) {
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return {};
  return info.dli_fname;
}

// libcupti in the recorder's order (recorder/cupti_library.cpp): the
// process's own copy, the loader's, then the toolkit's.
bool loadCupti(std::string& error) {
  struct Try {
    const char* name;
    int flags;
    const char* how;
  };
  const Try tries[] = {{"libcupti.so.13", RTLD_NOW | RTLD_NOLOAD, "already-loaded"},
                       {"libcupti.so.13", RTLD_NOW, "loader-path"},
                       {"/usr/local/cuda/lib64/libcupti.so.13", RTLD_NOW, "toolkit"},
                       {"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13", RTLD_NOW, "toolkit"}};
  for (const Try& t : tries) {
    if ((g_cupti.lib = dlopen(t.name, t.flags)) != nullptr) {
      g_cupti.how = t.how;
      break;
    }
  }
  if (g_cupti.lib == nullptr) {
    error = "cannot load libcupti.so.13";
    return false;
  }
  g_cupti.subscribe = reinterpret_cast<decltype(g_cupti.subscribe)>(dlsym(g_cupti.lib, "cuptiSubscribe_v2"));
  g_cupti.enableDomain = reinterpret_cast<decltype(g_cupti.enableDomain)>(dlsym(g_cupti.lib, "cuptiEnableDomain"));
  g_cupti.getVersion = reinterpret_cast<decltype(g_cupti.getVersion)>(dlsym(g_cupti.lib, "cuptiGetVersion"));
  g_cupti.resultString = reinterpret_cast<decltype(g_cupti.resultString)>(dlsym(g_cupti.lib, "cuptiGetResultString"));
  g_cupti.path = fileOf(reinterpret_cast<void*>(g_cupti.resultString));
  void* ckpt = nullptr;
  if (!g_cupti.path.empty()) {
    ckpt = dlopen((std::filesystem::path(g_cupti.path).parent_path() / "libcheckpoint.so").c_str(), RTLD_NOW);
  }
  if (ckpt == nullptr) ckpt = dlopen("libcheckpoint.so", RTLD_NOW);
  if (ckpt != nullptr) {
    g_cupti.save = reinterpret_cast<CheckpointFn>(dlsym(ckpt, "cuptiCheckpointSave"));
    g_cupti.restore = reinterpret_cast<CheckpointFn>(dlsym(ckpt, "cuptiCheckpointRestore"));
    g_cupti.free = reinterpret_cast<CheckpointFn>(dlsym(ckpt, "cuptiCheckpointFree"));
    g_cupti.checkpointPath = fileOf(reinterpret_cast<void*>(g_cupti.save));
  }
  if (g_cupti.subscribe == nullptr || g_cupti.enableDomain == nullptr) {
    error = "libcupti at " + g_cupti.path + " lacks cuptiSubscribe_v2";
    return false;
  }
  return true;
}

}  // namespace

extern "C" {

// 0 when subscribed; otherwise -1 and probe_report() says why.
__attribute__((visibility("default"))) int probe_start() {
  // Not g_mu: the subscription may raise callbacks, which take g_mu.
  static std::mutex startMu;
  std::lock_guard lock(startMu);
  if (g_started) return 0;
  if (!g_startError.empty()) return -1;
  std::string error;
  if (!g_drv.load(error) || !loadCupti(error)) {
    g_startError = error;
    return -1;
  }
  CUpti_SubscriberHandle handle = nullptr;
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "gpurr-probe";
  char old[256] = {};
  params.oldSubscriberName = old;
  params.oldSubscriberSize = sizeof old;
  CUptiResult r = g_cupti.subscribe(&handle, onCallback, nullptr, &params);
  if (r != CUPTI_SUCCESS) {
    const char* s = nullptr;
    if (g_cupti.resultString) g_cupti.resultString(r, &s);
    g_startError = std::string("cuptiSubscribe_v2: ") + (s ? s : "?") + (old[0] ? std::string(" (held by ") + old + ")" : "");
    return -1;
  }
  for (CUpti_CallbackDomain d : {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_RESOURCE}) {
    if (g_cupti.enableDomain(1, handle, d) != CUPTI_SUCCESS) g_startError += "cuptiEnableDomain failed; ";
  }
  g_started = true;
  return 0;
}

// The driver's entry for CUDA_INJECTION64_PATH. PROBE_INIT_FAIL=1 returns
// before subscribing; PROBE_INIT_RETURN sets the value returned (default 1).
__attribute__((visibility("default"))) int InitializeInjection() {
  g_injected++;
  const char* ret = std::getenv("PROBE_INIT_RETURN");
  const int value = ret != nullptr ? std::atoi(ret) : 1;
  const char* fail = std::getenv("PROBE_INIT_FAIL");
  if (fail == nullptr || std::strcmp(fail, "1") != 0) probe_start();
  return value;
}

__attribute__((visibility("default"))) int probe_injected() { return g_injected.load(); }

__attribute__((visibility("default"))) void probe_set_source(const char* s) { g_source = strdup(s); }

// Comma-separated: kinds, layout, getfunction, hashseq, checkpoint ("" clears).
__attribute__((visibility("default"))) void probe_set_action(const char* list) {
  std::lock_guard lock(g_mu);
  g_actions.clear();
  std::stringstream ss(list);
  std::string a;
  while (std::getline(ss, a, ',')) {
    if (!a.empty()) g_actions.insert(a);
  }
}

__attribute__((visibility("default"))) void probe_set_function(void* f) { g_hashFn = static_cast<CUfunction>(f); }
__attribute__((visibility("default"))) void probe_set_buffer(unsigned long long ptr, size_t bytes) {
  g_buffer = ptr;
  g_bufferBytes = bytes;
}

// Everything recorded so far, one item a line:
//   cupti started=0|1 path=P how=H version=V checkpoint=P|none error=E
//   call SOURCE NAME COUNT        (NAME drv:..., rt:..., res:...)
//   nested SOURCE NAME COUNT      (raised by the probe's own calls in a callback)
//   launch SOURCE SHAPE COUNT     (SHAPE drv:X, rt:X, or rt:X>drv:Y)
//   hashseq ok=N errors=N first=E
//   and the modload / kinds / layout / getfunction / checkpoint lines.
// The text stays valid until the next call.
__attribute__((visibility("default"))) const char* probe_report() {
  static std::string text;
  std::lock_guard lock(g_mu);
  std::ostringstream o;
  uint32_t version = 0;
  if (g_cupti.getVersion) g_cupti.getVersion(&version);
  o << "cupti started=" << (g_started ? 1 : 0) << " path=" << (g_cupti.path.empty() ? "none" : g_cupti.path)
    << " how=" << (g_cupti.how.empty() ? "none" : g_cupti.how) << " version=" << version
    << " checkpoint=" << (g_cupti.checkpointPath.empty() ? "none" : g_cupti.checkpointPath)
    << " error=" << (g_startError.empty() ? "none" : g_startError) << "\n";
  for (const auto& [src, m] : g_calls)
    for (const auto& [n, c] : m) o << "call " << src << " " << n << " " << c << "\n";
  for (const auto& [src, m] : g_nestedCalls)
    for (const auto& [n, c] : m) o << "nested " << src << " " << n << " " << c << "\n";
  for (const auto& [src, m] : g_launches)
    for (const auto& [n, c] : m) o << "launch " << src << " " << n << " " << c << "\n";
  o << "hashseq ok=" << g_hashOk.load() << " errors=" << g_hashErrors.load()
    << " first=" << (g_hashFirstError.empty() ? "none" : g_hashFirstError) << "\n";
  for (const std::string& l : g_lines) o << l << "\n";
  text = o.str();
  return text.c_str();
}

__attribute__((visibility("default"))) void probe_reset() {
  std::lock_guard lock(g_mu);
  g_calls.clear();
  g_nestedCalls.clear();
  g_launches.clear();
  g_lines.clear();
  g_once.clear();
}

}  // extern "C"
