// Modules and functions (see modules.h): each loaded image's ordinal and
// the kernel names it defines; each launched function's name, parameter
// layout and module, described once.
#include "recorder/modules.h"

#include <array>
#include <span>
#include <utility>

#include "recorder/callback_data.h"
#include "recorder/cubin_symbols.h"
#include "recorder/framework_context.h"
#include "recorder/thread_local_ref.h"
#include "trace_format/hash.h"

namespace gpurr::recorder {

namespace {

// The module ordinal announced by the last MODULE_LOADED callback on this
// thread: it arrives inside the cuModuleLoad* call that made the module.
thread_local uint32_t tlsLastModule = 0;

// A thread's recent answers of functionInfo, by function handle: each good
// while the tables' generation has not moved. An answer holds its
// description, which a module's unloading then does not free under the
// thread that was given it.
struct FunctionMemo {
  struct Entry {
    uint64_t function = 0, generation = 0;
    std::shared_ptr<const CachedFunction> fn;
    uint32_t module = 0;
    bool ambiguousModule = false;
  };
  static constexpr size_t kEntries = 256;  // more than the kernels of most training steps
  std::array<Entry, kEntries> entries;
};
thread_local EndsWithThread<FunctionMemo> tlsFunctions;

}  // namespace

ModuleRecorder::ModuleRecorder(std::mutex& mu, const RecorderOptions& options, Device& device, SessionOutput& out)
    : mu_(mu), options_(options), device_(device), out_(out) {}

void ModuleRecorder::loadCallEnter() { tlsLastModule = 0; }

void ModuleRecorder::loadCallExit(const CUpti_CallbackData& cb) {
  if (!succeeded(cb)) return;
  // Every cuModuleLoad* parameter struct starts with CUmodule* module.
  const auto* out = *static_cast<CUmodule* const*>(cb.functionParams);
  if (out != nullptr && *out != nullptr && tlsLastModule != 0) {
    std::lock_guard lock(mu_);
    moduleByHandle_[u64(*out)] = tlsLastModule;
    generation_.bump();
  }
  tlsLastModule = 0;
}

void ModuleRecorder::moduleUnloading() {
  // Function handles of the module may be reused by a later load.
  std::lock_guard lock(mu_);
  functions_.clear();
  generation_.bump();
}

void ModuleRecorder::moduleLoaded(const CUpti_ModuleResourceData& module) {
  out_.ensureStarted();
  if (!out_.recording() || module.pCubin == nullptr || module.cubinSize == 0) return;
  const std::span<const uint8_t> image(reinterpret_cast<const uint8_t*>(module.pCubin), module.cubinSize);
  SinkEntry entry;
  // The image is what replay loads, and only a trace recorded for replay
  // (snapshots, or everything) can be replayed: other traces leave it out
  // (PyTorch's images add megabytes to every trace). Copied now: valid only
  // inside this callback.
  if (options_.full || !options_.snapshot.empty()) entry.blob.assign(image.begin(), image.end());
  const CubinInfo cubin = readCubin(image);
  trace::ModuleLoad load;
  load.arch = cubin.arch;
  load.digest = hash::hashBuffer(image);
  std::lock_guard lock(mu_);  // ordinals and emission in the same order
  load.ordinal = nextModule_++;
  moduleDigest_[load.ordinal] = load.digest;
  for (const std::string& name : cubin.functions) {
    // A name that another image (other code) defines too cannot tell which
    // module a launch of it ran: 0, ambiguous. The same image loaded again
    // (another context) is the same code.
    auto [it, fresh] = moduleByName_.try_emplace(name, load.ordinal);
    if (!fresh) it->second = it->second != 0 && moduleDigest_[it->second] == load.digest ? load.ordinal : 0;
  }
  generation_.bump();
  tlsLastModule = load.ordinal;
  entry.event = out_.newEvent(load);
  out_.emit(std::move(entry));
}


const CachedFunction& ModuleRecorder::functionInfo(uint64_t function, const char* symbolName, uint32_t& module,
                                                   bool& ambiguousModule) {
  FunctionMemo::Entry& kept = threadLocalRef(tlsFunctions).entries[(function >> 4 ^ function >> 12) %
                                                                    FunctionMemo::kEntries];
  if (kept.function == function && kept.generation == generation_.now()) {
    module = kept.module;
    ambiguousModule = kept.ambiguousModule;
    return *kept.fn;
  }
  // Keeps the answer, read under the lock with the generation it is of.
  const auto answer = [&](const std::shared_ptr<const CachedFunction>& fn) -> const CachedFunction& {
    moduleOfLocked(*fn, module, ambiguousModule);
    kept = {function, generation_.now(), fn, module, ambiguousModule};
    return *fn;
  };
  {
    std::lock_guard lock(mu_);  // the common case: one lock
    if (auto it = functions_.find(function); it != functions_.end()) return answer(it->second);
  }
  auto fresh = std::make_shared<CachedFunction>();
  // Lazy loading: the driver may load the function's module inside this
  // call (cuKernelGetFunction), announcing it here; that ties the module
  // handle the description names to its ordinal.
  tlsLastModule = 0;
  device_.describeFunction(function, fresh->info);  // unlocked: calls the driver
  const uint32_t announced = std::exchange(tlsLastModule, 0);
  if (fresh->info.name.empty() && symbolName != nullptr) fresh->info.name = symbolName;
  fresh->selectedByName = kernelSelected(options_, fresh->info.name);
  fresh->snapshotByName = kernelNameSelected(options_.snapshot, fresh->info.name);
  fresh->philox = philoxParams(fresh->info.name, fresh->info.layout, out_.torchVersion());
  fresh->key = framework::launchKey(fresh->info.name);
  fresh->text = keptKernelText(fresh->info.name, fresh->info.layout);
  std::lock_guard lock(mu_);
  if (announced != 0 && fresh->info.module != 0) moduleByHandle_[fresh->info.module] = announced;
  const auto& cached = functions_.emplace(function, std::move(fresh)).first->second;
  generation_.bump();
  return answer(cached);
}

void ModuleRecorder::moduleOfLocked(const CachedFunction& fn, uint32_t& module, bool& ambiguousModule) const {
  module = 0;
  if (fn.info.module != 0) {
    if (auto it = moduleByHandle_.find(fn.info.module); it != moduleByHandle_.end()) module = it->second;
  }
  ambiguousModule = false;
  if (module == 0) {
    if (auto it = moduleByName_.find(fn.info.name); it != moduleByName_.end()) {
      module = it->second;
      ambiguousModule = module == 0;
    }
  }
}


uint64_t ModuleRecorder::runtimeFunction(uint64_t hostFunction) {
  {
    std::lock_guard lock(mu_);
    if (auto it = functionByHostStub_.find(hostFunction); it != functionByHostStub_.end()) return it->second;
  }
  const uint64_t f = device_.runtimeFunction(hostFunction);  // unlocked: calls the runtime
  std::lock_guard lock(mu_);
  functionByHostStub_[hostFunction] = f;  // a miss too: the runtime that launched it is loaded already
  return f;
}


}  // namespace gpurr::recorder
