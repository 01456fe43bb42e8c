// The runs' environments (environment.h): headers compared field by field.
#include "diff/environment.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include "diff/diff.h"

namespace gpurr::diff {
using namespace gpurr::trace;

namespace {

// Each key's value (the first, where a damaged header lists a key twice),
// by key in order.
std::map<std::string_view, std::string_view> byKey(const std::vector<KeyValue>& kvs) {
  std::map<std::string_view, std::string_view> out;
  for (const KeyValue& kv : kvs) out.emplace(kv.key, kv.value);
  return out;
}

// Variables that only set what a library logs, where it keeps a cache, or
// how gloo reaches the other ranks (its interface and transport, not its
// algorithms): shown for context, never a cause (NCCL_DEBUG=INFO in one run
// of two is how a user looks at NCCL). TORCH_DISTRIBUTED_DEBUG is not one
// of them: at DETAIL it wraps every process group in one that issues
// collectives of its own to check that the ranks agree.
bool diagnosticOnly(std::string_view key) {
  if (key.starts_with("GLOO_")) return true;
  static const std::set<std::string_view> kKeys = {
      "NCCL_DEBUG",          "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE",        "NCCL_DEBUG_TIMESTAMP_FORMAT",
      "TORCH_CPP_LOG_LEVEL", "TORCH_LOGS",        "TORCH_SHOW_CPP_STACKTRACES", "TORCH_HOME",
      "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT",
      "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE"};
  return kKeys.contains(key);
}

void compareKeyValues(const std::vector<KeyValue>& a, const std::vector<KeyValue>& b,
                      const std::string& prefix, std::vector<EnvDifference>& out,
                      bool (*contextOnly)(std::string_view) = nullptr) {
  const auto inA = byKey(a), inB = byKey(b);
  const auto value = [](const std::map<std::string_view, std::string_view>& m,
                        std::string_view k) -> std::optional<std::string> {
    const auto it = m.find(k);
    return it == m.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  std::set<std::string_view> keys;
  for (const auto& [k, v] : inA) keys.insert(k);
  for (const auto& [k, v] : inB) keys.insert(k);
  for (const std::string_view k : keys) {
    auto va = value(inA, k), vb = value(inB, k);
    if (va != vb) out.push_back({prefix + std::string(k), va, vb, !contextOnly || !contextOnly(k)});
  }
}

std::string gpuText(const GpuInfo& g) {
  return fmt::format("{} (sm_{}{}, {} SMs)", g.name, g.ccMajor, g.ccMinor, g.smCount);
}

std::string versionText(uint32_t v, bool cuda) {
  if (v == 0) return cuda ? "unknown" : "not loaded";
  if (cuda) return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

}  // namespace

bool environmentMatters(const std::vector<EnvDifference>& env) {
  for (const EnvDifference& e : env) {
    if (e.affectsResults) return true;
  }
  return false;
}

std::string envSummary(const std::vector<EnvDifference>& env) {
  std::string out;
  size_t n = 0;
  for (const EnvDifference& e : env) {
    if (!e.affectsResults) continue;
    if (n++ < 3) out += (out.empty() ? "" : ", ") + e.field;
  }
  if (n > 3) out += fmt::format(" and {} more", n - 3);
  return out;
}

namespace {
bool nccl(const EnvDifference& e) { return e.field.rfind("env NCCL_", 0) == 0 || e.field == "library nccl"; }
}  // namespace

std::vector<EnvDifference> ncclDifferences(const std::vector<EnvDifference>& env) {
  std::vector<EnvDifference> out;
  for (const EnvDifference& e : env) {
    if (e.affectsResults && nccl(e)) out.push_back(e);
  }
  return out;
}

std::vector<EnvDifference> differencesFor(const std::vector<EnvDifference>& env, bool ncclOperation) {
  std::vector<EnvDifference> out;
  for (const EnvDifference& e : env) {
    if (e.affectsResults && (ncclOperation || !nccl(e))) out.push_back(e);
  }
  return out;
}

std::vector<std::string> programOf(const std::vector<std::string>& command, const std::string& workingDirectory) {
  namespace fs = std::filesystem;
  // A file named relative to the working directory: the same file as its
  // absolute path names.
  const auto file = [&](const std::string& arg) {
    const bool named = !arg.empty() && arg[0] != '-' && !workingDirectory.empty() &&
                       (arg.ends_with(".py") || arg.find('/') != std::string::npos);
    return named ? (fs::path(workingDirectory) / arg).lexically_normal().string() : arg;
  };
  const bool python = !command.empty() && fs::path(command[0]).filename().string().rfind("python", 0) == 0;
  std::vector<std::string> out{python ? std::string("python") : file(command.empty() ? "" : command[0])};
  bool options = true;
  for (size_t i = 1; i < command.size(); ++i) {
    options = options && command[i].size() > 1 && command[i][0] == '-';
    if (!python || !options || command[i] != "-u") out.push_back(file(command[i]));
  }
  return out;
}

std::vector<EnvDifference> compareHeaders(const Header& a, const Header& b) {
  std::vector<EnvDifference> out;
  compareKeyValues(a.environment, b.environment, "env ", out, diagnosticOnly);
  for (size_t i = 0; i < std::max(a.gpus.size(), b.gpus.size()); ++i) {
    std::optional<std::string> ga, gb;
    if (i < a.gpus.size()) ga = gpuText(a.gpus[i]);
    if (i < b.gpus.size()) gb = gpuText(b.gpus[i]);
    if (ga != gb) out.push_back({fmt::format("gpu {}", i), ga, gb, true});
  }
  auto version = [&](const char* field, uint32_t va, uint32_t vb, bool cuda) {
    if (va != vb) out.push_back({field, versionText(va, cuda), versionText(vb, cuda), true});
  };
  version("driver", a.driverVersion, b.driverVersion, true);
  version("CUDA runtime", a.cudaRuntimeVersion, b.cudaRuntimeVersion, true);
  version("cuDNN", a.cudnnVersion, b.cudnnVersion, false);
  version("cuBLAS", a.cublasVersion, b.cublasVersion, false);
  compareKeyValues(a.libraries, b.libraries, "library ", out);
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
    return s;
  };
  if (a.commandLine != b.commandLine) {
    // Another program (compared with --force) can change results; Python's -u cannot.
    out.push_back({"command line", join(a.commandLine), join(b.commandLine),
                   programOf(a) != programOf(b)});
  }
  if (a.options.hashChunkBytes != b.options.hashChunkBytes) {
    out.push_back({"hash chunk bytes", std::to_string(a.options.hashChunkBytes),
                   std::to_string(b.options.hashChunkBytes), false});
  }
  // What each run hashed: outside it only parameters are compared.
  for (const auto& [option, va, vb] : {std::tuple{"--launches", a.options.launchRange, b.options.launchRange},
                                       std::tuple{"--kernels", a.options.kernelRegex, b.options.kernelRegex},
                                       std::tuple{"--steps", a.options.steps, b.options.steps}}) {
    if (va != vb) out.push_back({std::string("recorded with ") + option, va.empty() ? "(all)" : va,
                                 vb.empty() ? "(all)" : vb, false});
  }
  return out;
}

}  // namespace gpurr::diff
