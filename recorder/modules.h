// ModuleRecorder: modules and functions. Each module the driver announces
// (MODULE_LOADED) gets an ordinal and a ModuleLoad event, and the kernel
// names its image defines; each launched function (CUfunction or CUkernel)
// is described once (name, parameter layout, module, whether the options
// select it, its PyTorch Philox parameters) and cached by handle; a runtime
// entry function is resolved to its CUfunction once.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "recorder/device.h"
#include "recorder/generation.h"
#include "recorder/kernel_text.h"
#include "recorder/options.h"
#include "recorder/rng_params.h"
#include "recorder/session_output.h"

namespace gpurr::recorder {

struct CachedFunction {
  FunctionInfo info;
  const KernelText* text = nullptr;  // its name and layout, kept for the process (a launch's entry points here)
  bool selectedByName = true;  // GPURR_KERNELS matches
  bool snapshotByName = false; // a GPURR_SNAPSHOT pattern matches
  std::vector<PhiloxParam> philox;  // PhiloxCudaState parameters
  uint64_t key = 0;  // framework::launchKey of its name: a launch's in a learned step (hashed once)
};

class ModuleRecorder {
 public:
  // `mu`: the session's lock (session.h), which guards the tables.
  ModuleRecorder(std::mutex& mu, const RecorderOptions& options, Device& device, SessionOutput& out);

  // The resource callback of a module loaded (by the program, or lazily by
  // the driver inside any call): ordinal, names, ModuleLoad event.
  void moduleLoaded(const CUpti_ModuleResourceData& module);
  // A module is being unloaded: its function handles may be reused.
  void moduleUnloading();
  // ENTER and EXIT of a cuModuleLoad* call: the module it made gets the
  // ordinal announced inside it.
  void loadCallEnter();
  void loadCallExit(const CUpti_CallbackData& cb);

  // Function name / layout, cached per handle; `module` gets its ordinal.
  // `ambiguousModule`: the handle named no module and several images with
  // different code define the name, so `module` is 0. The description is
  // valid until the calling thread's next call. Each thread keeps its recent
  // answers, given again without the session's lock while no module has
  // loaded or unloaded since.
  const CachedFunction& functionInfo(uint64_t function, const char* symbolName, uint32_t& module,
                                     bool& ambiguousModule);
  uint64_t runtimeFunction(uint64_t hostFunction);  // cached Device::runtimeFunction

 private:
  // The module ordinal of a cached function, and whether its name is ambiguous. Caller holds mu_.
  void moduleOfLocked(const CachedFunction& fn, uint32_t& module, bool& ambiguousModule) const;

  std::mutex& mu_;  // guards everything below
  const RecorderOptions& options_;
  Device& device_;
  SessionOutput& out_;
  std::unordered_map<uint64_t, std::shared_ptr<const CachedFunction>> functions_;
  // Of the tables a function's answer comes from (functions_ and the module
  // maps), bumped under mu_ at each change: a kept answer holds while it has
  // not moved.
  Generation generation_;
  std::unordered_map<uint64_t, uint64_t> functionByHostStub_;  // runtime entry function -> CUfunction (0: none)
  std::unordered_map<uint64_t, uint32_t> moduleByHandle_;   // CUmodule -> ordinal
  std::unordered_map<std::string, uint32_t> moduleByName_;  // kernel name -> ordinal; 0: ambiguous
  std::unordered_map<uint32_t, uint64_t> moduleDigest_;     // ordinal -> digest of its image
  uint32_t nextModule_ = 1;
};

}  // namespace gpurr::recorder
