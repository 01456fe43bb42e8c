// The session's output (see session_output.h): the trace's header and sink,
// events stamped and handed to the sink, warnings given once.
#include "recorder/session_output.h"

#include <limits.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "recorder/framework_context.h"
#include "recorder/host_memory.h"
#include "recorder/reentrancy.h"
#include "recorder/signal_flush.h"
#include "recorder/thread_local_ref.h"

extern char** environ;

namespace gpurr::recorder {

namespace {

struct ThreadNumber {
  const void* session = nullptr;
  uint32_t id = 0;
};
thread_local ThreadNumber tlsThread;

std::vector<std::string> commandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == '\0') {
      out.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  }
  if (start < all.size()) out.push_back(all.substr(start));
  return out;
}

}  // namespace

SessionOutput::SessionOutput(const RecorderOptions& options, Device& device, OpenSink openSink, WarnFn warn)
    : options_(options), device_(device), openSink_(std::move(openSink)), warn_(std::move(warn)),
      snapshotBudget_(options.snapshotMemoryBytes) {}

void SessionOutput::close() {
  std::lock_guard lock(startMu_);
  ReentrancyGuard guard;
  if (!sink_) return;
  trace::RecorderMemory memory;  // the sink adds its queue's and its writer's
  memory.snapshotBytes = snapshotBudget_.peak();
  const Device::MemoryUse device = device_.memoryUse();
  memory.pinnedHostBytes = device.pinnedHostBytes;
  memory.deviceBytes = device.deviceBytes;
  sink_->close(readableHostRegions(), framework::stoppedAfterStep(), memory, framework::layerSteps());
}

void SessionOutput::flush() {
  std::lock_guard lock(startMu_);
  ReentrancyGuard guard;
  if (sink_) sink_->flush();
}

void SessionOutput::warnOnce(const std::string& key, const std::string& message) {
  {
    std::lock_guard lock(warnMu_);
    if (!warned_.emplace(key, true).second) return;
  }
  warn_(message);
}

void SessionOutput::warnNotReplayable(const std::string& what, const std::string& missing) {
  warnOnce("full:" + what, "--full: the program makes " + what + "; the trace lacks " + missing +
                               ", so a whole-stream replay cannot restore them (see docs/RECORDING.md)");
}

void SessionOutput::start() {
  std::lock_guard lock(startMu_);
  if (started_) return;
  started_ = true;
  trace::Header h;
  h.toolVersion = options_.toolVersion;
  h.commandLine = commandLine();
  std::error_code ec;
  h.workingDirectory = std::filesystem::current_path(ec).string();
  h.environment = determinismEnvironment(environ);
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) h.hostname = host;
  h.pid = static_cast<uint32_t>(getpid());
  h.rank = options_.rank.value_or(-1);
  h.startTimeNs = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count());
  h.options = toRecordingOptions(options_);
  device_.describeSystem(h);
  for (const trace::KeyValue& lib : h.libraries)
    if (lib.key == "pytorch") torchVersion_ = lib.value;
  {
    // The trace thread and the writer's take none of the signals whose end
    // the recorder writes first (signal_flush.h): they would wait on themselves.
    EndingSignalsBlocked blocked;
    sink_ = openSink_(h);
  }
  startedFast_.store(true, std::memory_order_release);
}

trace::Event SessionOutput::newEvent(trace::Payload payload) {
  trace::Event ev;
  ev.payload = std::move(payload);
  stamp(ev);
  return ev;
}

void SessionOutput::stamp(trace::Event& ev, uint64_t key, std::chrono::steady_clock::time_point at,
                          const trace::Origin** keptOrigin) {
  ev.timeNs = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(at - start_).count());
  ThreadNumber& number = threadLocalRef(tlsThread);
  if (number.session != this) number = {this, nextThread_.fetch_add(1)};
  ev.thread = number.id;
  const trace::Payload& payload = ev.payload;
  auto* kernel = std::get_if<trace::KernelLaunch>(&ev.payload);
  const bool launch = kernel != nullptr;
  if (launch || std::holds_alternative<trace::Memcpy>(payload) || std::holds_alternative<trace::Memset>(payload)) {
    if (framework::attribution() == framework::Attribution::kObserve) {
      key = 0;
    } else if (key == 0) {
      key = framework::operationKey(payload);
    }
    // The calling thread's: handlers run on the program's. A launch at which
    // the step stopped matching the templates says why.
    std::string unmatched;
    framework::currentOrigin(launch, key, ev.origin, keptOrigin,
                             launch ? std::span<const uint8_t>(kernel->params) : std::span<const uint8_t>(),
                             launch ? &unmatched : nullptr,
                             launch ? std::span<const trace::PointerParam>(kernel->pointers)
                                    : std::span<const trace::PointerParam>());
    if (!unmatched.empty()) kernel->annotations.emplace_back(std::in_place_type<trace::Note>, std::move(unmatched));
  }
}

void SessionOutput::emitEvent(trace::Payload payload) {
  SinkEntry entry;
  entry.event = newEvent(std::move(payload));
  emit(std::move(entry));
}

}  // namespace gpurr::recorder
