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

std::vector<std::string> cuptiCandidates(const std::function<const char*(const char*)>& getenv) {
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = getenv(var); root != nullptr && *root != '\0') roots.emplace_back(root);
  }
  roots.emplace_back("/usr/local/cuda");
  std::vector<std::string> out;
  if (const char* chosen = getenv("GPURR_CUPTI"); chosen != nullptr && *chosen != '\0') out.emplace_back(chosen);
  out.emplace_back("libcupti.so.13");
  for (const std::string& root : roots) {
    for (const char* sub : {"/lib64/", "/lib/", "/extras/CUPTI/lib64/"}) out.push_back(root + sub + "libcupti.so.13");
  }
  return out;
}

std::optional<CuptiLibrary> loadCupti(const std::function<const char*(const char*)>& getenv, std::string& error) {
  const std::vector<std::string> candidates = cuptiCandidates(getenv);
  void* lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);  // the process's own copy first
  for (size_t i = 0; lib == nullptr && i < candidates.size(); ++i) lib = dlopen(candidates[i].c_str(), RTLD_NOW);
  if (lib == nullptr) {
    error = "cannot load libcupti.so.13 (looked in the loaded libraries, the loader's path";
    for (const std::string& c : candidates)
      if (c != "libcupti.so.13") error += ", " + c;
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
