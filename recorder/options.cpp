// Recorder options, launch selection, environment filtering, trace directory.
#include "recorder/options.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "common/demangle.h"
#include "common/name_pattern.h"

namespace gpurr::recorder {

namespace {

std::optional<uint64_t> parseU64(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// Whether `name` or its demangled form matches `pattern`.
bool nameMatches(const std::regex& pattern, std::string_view mangledName) {
  const std::string mangled(mangledName);
  if (std::regex_search(mangled, pattern)) return true;
  const std::string d = demangled(mangled);
  return d != mangled && std::regex_search(d, pattern);
}

bool flagSet(const char* v) { return v != nullptr && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0 || std::strcmp(v, "yes") == 0); }

}  // namespace

std::optional<std::pair<uint64_t, uint64_t>> parseLaunchRange(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string_view a = text.substr(0, colon), b = text.substr(colon + 1);
  std::pair<uint64_t, uint64_t> r{0, UINT64_MAX};
  if (!a.empty()) {
    auto v = parseU64(a);
    if (!v) return std::nullopt;
    r.first = *v;
  }
  if (!b.empty()) {
    auto v = parseU64(b);
    if (!v) return std::nullopt;
    r.second = *v;
  }
  if (r.first > r.second) return std::nullopt;
  return r;
}

std::optional<StepSelection> parseStepSelection(std::string_view text) {
  const size_t second = text.find(':', text.find(':') + 1);
  StepSelection sel;
  if (second != std::string_view::npos && text.find(':') != std::string_view::npos) {
    const std::string_view every = text.substr(second + 1);
    if (!every.empty()) {
      auto n = parseU64(every);
      if (!n || *n == 0) return std::nullopt;
      sel.every = *n;
    }
    text = text.substr(0, second);
  }
  const auto range = parseLaunchRange(text);
  if (!range) return std::nullopt;
  sel.begin = range->first;
  sel.end = range->second;
  return sel;
}

std::optional<LaunchSelection> parseLaunchSelection(std::string_view text, std::string& error) {
  LaunchSelection sel;
  sel.text = std::string(text);
  if (text.empty()) {
    error = "empty selection (give launch numbers, ranges A:B or kernel name patterns, separated by commas)";
    return std::nullopt;
  }
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    const size_t length = comma == std::string_view::npos ? std::string_view::npos : comma - start;
    const std::string_view item = text.substr(start, length);
    if (item.empty()) {
      error = "empty item in '" + std::string(text) + "' (two commas in a row, or one at an end)";
      return std::nullopt;
    }
    const bool numeric =
        std::all_of(item.begin(), item.end(), [](char c) { return (c >= '0' && c <= '9') || c == ':'; }) &&
        std::count(item.begin(), item.end(), ':') <= 1;
    if (numeric) {
      if (item.find(':') == std::string_view::npos) {
        const std::optional<uint64_t> k = parseU64(item);
        if (!k || *k == UINT64_MAX) {
          error = "launch number '" + std::string(item) + "' is too large";
          return std::nullopt;
        }
        sel.launches.emplace_back(*k, *k + 1);
      } else {
        const std::optional<std::pair<uint64_t, uint64_t>> r = parseLaunchRange(item);
        if (!r) {
          error = "launch range '" + std::string(item) + "' is not A:B with A <= B";
          return std::nullopt;
        }
        if (r->first == r->second) {
          error = "launch range '" + std::string(item) + "' selects no launch (B is excluded: use A:" +
                  std::to_string(r->first + 1) + " for launch " + std::to_string(r->first) + ")";
          return std::nullopt;
        }
        sel.launches.push_back(*r);
      }
    } else {
      try {
        sel.kernels.push_back(namePattern(std::string(item), std::regex::optimize));
      } catch (const std::regex_error& e) {
        error = "'" + std::string(item) + "' is neither a launch number nor a valid regular expression (" +
                e.what() + ")";
        return std::nullopt;
      }
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return sel;
}

bool launchNumberSelected(const LaunchSelection& selection, uint64_t index) {
  for (const auto& [first, end] : selection.launches)
    if (index >= first && index < end) return true;
  return false;
}

bool kernelNameSelected(const LaunchSelection& selection, std::string_view mangledName) {
  for (const std::regex& r : selection.kernels)
    if (nameMatches(r, mangledName)) return true;
  return false;
}

bool launchSelected(const LaunchSelection& selection, uint64_t index, std::string_view mangledName) {
  return launchNumberSelected(selection, index) || kernelNameSelected(selection, mangledName);
}

RecorderOptions parseOptions(const GetEnv& getenv, std::vector<std::string>& problems) {
  RecorderOptions o;
  if (const char* v = getenv("GPURR_OUTPUT"); v != nullptr && *v != '\0') o.output = v;
  if (const char* v = getenv("GPURR_LAUNCHES"); v != nullptr && *v != '\0') {
    if (auto r = parseLaunchRange(v)) {
      o.launchBegin = r->first;
      o.launchEnd = r->second;
      o.launchesText = v;
    } else {
      problems.push_back(std::string("GPURR_LAUNCHES=") + v +
                         " is not a launch range A:B (A included, B excluded); every launch is hashed");
    }
  }
  if (const char* v = getenv("GPURR_STEPS"); v != nullptr && *v != '\0') {
    if (auto sel = parseStepSelection(v)) {
      o.steps = sel;
      o.stepsText = v;
    } else {
      problems.push_back(std::string("GPURR_STEPS=") + v +
                         " is not a step selection A:B or A:B:N (A included, B excluded, every N-th); every "
                         "step is hashed");
    }
  }
  if (const char* v = getenv("GPURR_KERNELS"); v != nullptr && *v != '\0') {
    try {
      o.kernels = namePattern(v, std::regex::optimize);
      o.kernelsText = v;
    } catch (const std::regex_error& e) {
      problems.push_back(std::string("GPURR_KERNELS=") + v + " is not a valid regular expression (" + e.what() +
                         "); every kernel is hashed");
    }
  }
  o.sync = flagSet(getenv("GPURR_SYNC"));
  o.timeParts = flagSet(getenv("GPURR_VERBOSE"));
  o.hashInputs = flagSet(getenv("GPURR_HASH_INPUTS"));
  o.captureHostData = flagSet(getenv("GPURR_CAPTURE_HOST_DATA"));
  // A whole-stream replay needs every byte the host gave the device.
  o.full = flagSet(getenv("GPURR_FULL"));
  if (o.full) o.captureHostData = true;
  if (const char* v = getenv("GPURR_SNAPSHOT"); v != nullptr && *v != '\0') {
    std::string error;
    if (auto sel = parseLaunchSelection(v, error)) {
      o.snapshot = std::move(*sel);
    } else {
      problems.push_back(std::string("GPURR_SNAPSHOT=") + v + ": " + error + "; no snapshot is taken");
    }
  }
  if (const char* v = getenv("GPURR_SNAPSHOT_MEMORY_MB"); v != nullptr && *v != '\0') {
    if (auto mb = parseU64(v); mb && *mb > 0 && *mb <= (uint64_t{1} << 40)) {
      o.snapshotMemoryBytes = *mb << 20;
    } else {
      problems.push_back(std::string("GPURR_SNAPSHOT_MEMORY_MB=") + v +
                         " is not a positive number of MiB; snapshots use at most 2048 MiB of host memory");
    }
  }
  if (const char* v = getenv("GPURR_TRACE_QUEUE_MB"); v != nullptr && *v != '\0') {
    if (auto mb = parseU64(v); mb && *mb > 0 && *mb <= (uint64_t{1} << 20)) {
      o.traceQueueBytes = *mb << 20;
    } else {
      problems.push_back(std::string("GPURR_TRACE_QUEUE_MB=") + v +
                         " is not a positive number of MiB; events wait for the trace thread in at most 64 MiB");
    }
  }
  if (const char* v = getenv("GPURR_FLUSH_MS"); v != nullptr && *v != '\0') {
    if (auto ms = parseU64(v); ms && *ms >= 50 && *ms <= 60'000) {
      o.flushIntervalMs = static_cast<uint32_t>(*ms);
    } else {
      problems.push_back(std::string("GPURR_FLUSH_MS=") + v +
                         " is not a number of milliseconds from 50 to 60000; a block is closed every second");
    }
  }
  if (const char* v = getenv("GPURR_DEFER_HASHES"); v != nullptr && *v != '\0') {
    if (std::string_view(v) == "0" || std::string_view(v) == "1") {
      o.deferHashes = *v == '1';
    } else {
      problems.push_back(std::string("GPURR_DEFER_HASHES=") + v + " is not 0 or 1; output hashes are deferred");
    }
  }
  if (const char* v = getenv("GPURR_TEST_SLOW_WRITER_US"); v != nullptr && *v != '\0') {
    if (auto us = parseU64(v); us && *us <= 10'000'000) o.slowWriterUs = static_cast<uint32_t>(*us);
  }
  if (const char* v = getenv("GPURR_CHECK_DETERMINISM"); v != nullptr && *v != '\0') {
    const std::optional<uint64_t> n = parseU64(v);
    if (!n || *n == 1 || *n > kMaxDeterminismRuns) {
      problems.push_back(std::string("GPURR_CHECK_DETERMINISM=") + v + " is not a number of re-runs from 2 to " +
                         std::to_string(kMaxDeterminismRuns) + "; determinism is not checked");
    } else if (*n > 0 && o.launchesText.empty() && o.kernelsText.empty() && o.snapshot.empty()) {
      problems.push_back("GPURR_CHECK_DETERMINISM needs GPURR_LAUNCHES, GPURR_KERNELS or GPURR_SNAPSHOT (checking "
                         "every launch would run the whole program " + std::to_string(*n) +
                         " more times); determinism is not checked");
    } else {
      o.checkDeterminism = static_cast<uint32_t>(*n);
    }
  }
  if (const char* v = getenv("GPURR_TOOL_VERSION")) o.toolVersion = v;
  o.rankName = job::rankName(getenv, problems);
  o.rank = o.rankName.rank;
  return o;
}

bool launchInRange(const RecorderOptions& options, uint64_t index) {
  return index >= options.launchBegin && index < options.launchEnd;
}

bool stepSelected(const RecorderOptions& options, int64_t step) {
  if (!options.steps) return true;
  if (step < 0) return false;
  const uint64_t s = static_cast<uint64_t>(step);
  const StepSelection& sel = *options.steps;
  return s >= sel.begin && s < sel.end && (s - sel.begin) % sel.every == 0;
}

bool hashesAllInputs(const RecorderOptions& options) {
  return options.hashInputs || !options.launchesText.empty() || options.kernels || options.steps;
}

bool kernelSelected(const RecorderOptions& options, std::string_view mangledName) {
  return !options.kernels || nameMatches(*options.kernels, mangledName);
}

bool isDeterminismRelevant(std::string_view key) {
  static constexpr std::string_view kExact[] = {
      "PYTHONHASHSEED",  "NVIDIA_TF32_OVERRIDE", "OMP_NUM_THREADS",   "MKL_NUM_THREADS",   "OPENBLAS_NUM_THREADS",
      "WORLD_SIZE",      "RANK",                 "LOCAL_RANK",        "LOCAL_WORLD_SIZE",  "TF_DETERMINISTIC_OPS",
      "TF_CUDNN_DETERMINISTIC", "XLA_FLAGS",     "CUBLAS_WORKSPACE_CONFIG", "KMP_AFFINITY", "MKL_CBWR"};
  static constexpr std::string_view kPrefixes[] = {"NCCL_", "CUDNN_", "CUBLAS_", "CUBLASLT_", "TORCH_",
                                                   "PYTORCH_", "CUDA_", "NVTE_", "TORCHINDUCTOR_", "TRITON_", "GLOO_"};
  // Set per run by gpurr record itself, so always different and meaningless.
  static constexpr std::string_view kExcluded[] = {"CUDA_INJECTION64_PATH"};
  for (auto e : kExcluded) if (key == e) return false;
  for (auto e : kExact) if (key == e) return true;
  for (auto p : kPrefixes) if (key.starts_with(p)) return true;
  return false;
}

std::vector<trace::KeyValue> determinismEnvironment(char* const* environ) {
  std::vector<trace::KeyValue> out;
  for (char* const* e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = entry.substr(0, eq);
    if (isDeterminismRelevant(key)) out.push_back({std::string(key), std::string(entry.substr(eq + 1))});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  return out;
}

std::optional<std::filesystem::path> claimTraceDirectory(const std::filesystem::path& output,
                                                         const job::RankName& name, std::string& error) {
  auto tryClaim = [&](const std::string& name, bool& taken) -> std::optional<std::filesystem::path> {
    const std::filesystem::path dir = output / name;
    // Private (0700, whatever the umask): a trace can hold training data.
    if (::mkdir(dir.c_str(), 0700) == 0) {
      if (::chmod(dir.c_str(), 0700) == 0) return dir;
      error = "cannot set the mode of " + dir.string() + ": " + std::strerror(errno);
      return std::nullopt;
    }
    taken = errno == EEXIST;
    if (!taken) error = "cannot create " + dir.string() + ": " + std::strerror(errno);
    return std::nullopt;
  };
  bool taken = false;
  if (!name.name.empty()) {
    if (auto d = tryClaim(name.name, taken)) return d;
    // A restarted job's rank: the trace is its earlier attempt's.
    if (taken && name.attempt > 0 && job::keepEarlierAttempt(output, name, error)) {
      if (auto d = tryClaim(name.name, taken)) return d;
    }
    if (taken && error.empty()) {
      error = (output / name.name).string() + " already exists (two processes with " + name.source + "?)";
    }
    return std::nullopt;
  }
  for (int n = 0; n < 100000; ++n) {
    if (auto d = tryClaim("proc" + std::to_string(n) + ".gpurr", taken)) return d;
    if (!taken) return std::nullopt;
  }
  error = "no free proc<N>.gpurr name in " + output.string();
  return std::nullopt;
}

trace::RecordingOptions toRecordingOptions(const RecorderOptions& options) {
  trace::RecordingOptions r;
  r.sync = options.sync;
  r.hashInputs = hashesAllInputs(options);
  r.captureHostData = options.captureHostData;
  r.launchRange = options.launchesText;
  r.steps = options.stepsText;
  r.kernelRegex = options.kernelsText;
  r.full = options.full;
  r.snapshot = options.snapshot.text;
  r.checkDeterminism = options.checkDeterminism;
  return r;
}

RecorderOptions awaitOptions(const GetEnv& getenv, std::vector<std::string>& problems) {
  const char* gate = getenv("GPURR_START_GATE");
  if (gate == nullptr || *gate == '\0') return parseOptions(getenv, problems);
  // gpurr bisect cancels a held run that it no longer needs through the
  // gate (so does its `gpurr record` on a signal to end), and one whose
  // `gpurr record` is gone ends too: the wait needs no limit of its own.
  // The process may be the program's child (a worker, a shell's command):
  // its own parent's end counts, and so does `gpurr record`'s, however
  // many generations above (GPURR_START_GATE_PARENT, its pid), also one
  // that came before this wait began.
  const pid_t parent = ::getppid();
  const char* recordText = getenv("GPURR_START_GATE_PARENT");
  const long record = recordText != nullptr ? std::atol(recordText) : 0;
  auto gone = [&] {
    return ::getppid() != parent || (record > 0 && ::syscall(SYS_kill, record, 0) != 0 && errno == ESRCH);
  };
  std::error_code ec;
  while (!std::filesystem::exists(gate, ec)) {
    if (gone()) ::syscall(SYS_exit_group, 128 + SIGTERM);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string snapshot;
  std::ifstream in(gate);
  for (std::string line; std::getline(in, line);) {
    if (line == "cancel") ::syscall(SYS_exit_group, 128 + SIGTERM);
    if (line.rfind("snapshot ", 0) == 0) snapshot = line.substr(9);
  }
  if (snapshot.empty()) return parseOptions(getenv, problems);
  return parseOptions(
      [&](const char* name) { return std::string_view(name) == "GPURR_SNAPSHOT" ? snapshot.c_str() : getenv(name); },
      problems);
}

}  // namespace gpurr::recorder
