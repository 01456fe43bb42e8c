// Finding CUPTI and its checkpoint library at run time (see cupti_library.h).
#include "recorder/cupti_library.h"

#include <dlfcn.h>

#include <filesystem>

namespace gpurr::recorder {

namespace {

template <typename Fn>
void resolve(void* lib, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
}

// The file a loaded library was mapped from (its dladdr name), by one of its symbols.
std::string fileOf(void* symbol) {
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return {};
  return info.dli_fname;
}

}  // namespace

std::vector<CuptiCandidate> cuptiCandidates(const std::function<const char*(const char*)>& getenv) {
  auto set = [&](const char* var) -> const char* {
    const char* v = getenv(var);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  std::vector<CuptiCandidate> out;
  if (const char* chosen = set("GPURR_CUPTI")) out.push_back({chosen, "GPURR_CUPTI"});
  if (const char* python = set("GPURR_PYTHON_CUPTI")) out.push_back({python, "the program's Python environment"});
  std::vector<std::pair<std::string, std::string>> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = set(var)) roots.emplace_back(root, std::string("the CUDA toolkit (") + var + ")");
  }
  roots.emplace_back("/usr/local/cuda", "the CUDA toolkit");
  for (const auto& [root, where] : roots) {
    for (const char* sub : {"/lib64/", "/lib/", "/extras/CUPTI/lib64/"}) {
      out.push_back({root + sub + "libcupti.so.13", where});
    }
  }
  out.push_back({"libcupti.so.13", "the system's library path"});
  return out;
}

std::optional<CuptiLibrary> loadCupti(const std::function<const char*(const char*)>& getenv, std::string& error) {
  const std::vector<CuptiCandidate> candidates = cuptiCandidates(getenv);
  std::string where = "the program's own copy";
  void* lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);  // the process's own copy first
  for (size_t i = 0; lib == nullptr && i < candidates.size(); ++i) {
    lib = dlopen(candidates[i].path.c_str(), RTLD_NOW);
    where = candidates[i].where;
  }
  if (lib == nullptr) {
    error = "cannot load libcupti.so.13 (looked in the loaded libraries";
    for (const CuptiCandidate& c : candidates) error += ", " + (c.path == "libcupti.so.13" ? c.where : c.path);
    // Not LD_LIBRARY_PATH: a toolkit copy put before PyTorch's own breaks torch's imports.
    error += "; set GPURR_CUPTI to a libcupti.so.13, or CUDA_HOME to a CUDA 13 toolkit that has CUPTI)";
    return std::nullopt;
  }
  CuptiLibrary c;
  resolve(lib, "cuptiSubscribe_v2", c.subscribe);
  resolve(lib, "cuptiEnableDomain", c.enableDomain);
  resolve(lib, "cuptiEnableCallback", c.enableCallback);
  resolve(lib, "cuptiGetResultString", c.resultString);
  c.path = fileOf(reinterpret_cast<void*>(c.resultString));
  c.where = where;
  if (!c.subscribe || !c.enableDomain || !c.enableCallback || !c.resultString) {
    error = "the libcupti at " + (c.path.empty() ? std::string("?") : c.path) +
            " lacks cuptiSubscribe_v2 (CUPTI 13 or newer is needed)";
    return std::nullopt;
  }
  // cuptiCheckpointSave/Restore/Free live in libcheckpoint.so, which libcupti
  // does not load: take the one beside the libcupti in use (the toolkit and
  // the nvidia-cuda-cupti wheel both ship it there), else any the loader finds.
  void* ckpt = nullptr;
  if (!c.path.empty()) {
    const std::string beside = (std::filesystem::path(c.path).parent_path() / "libcheckpoint.so").string();
    ckpt = dlopen(beside.c_str(), RTLD_NOW);
  }
  if (ckpt == nullptr) ckpt = dlopen("libcheckpoint.so", RTLD_NOW);
  if (ckpt != nullptr) {
    resolve(ckpt, "cuptiCheckpointSave", c.checkpoint.save);
    resolve(ckpt, "cuptiCheckpointRestore", c.checkpoint.restore);
    resolve(ckpt, "cuptiCheckpointFree", c.checkpoint.free);
    c.checkpointPath = fileOf(reinterpret_cast<void*>(c.checkpoint.save));
  }
  c.checkpoint.resultString = c.resultString;
  return c;
}

}  // namespace gpurr::recorder
