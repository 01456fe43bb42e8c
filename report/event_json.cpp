// The JSON view of trace contents (see event_json.h): headers, events, origins,
// annotations and range digests, with the keys docs/JSON.md documents.
#include "report/event_json.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>

#include "report/text.h"

namespace gpurr::report {
using namespace gpurr::trace;

namespace {

Json dims(const Dim3& d) { return Json::array({d.x, d.y, d.z}); }

Json range(const DeviceRange& r) {
  return Json{{"address", r.address}, {"size", r.size}, {"allocation", r.allocation},
              {"offset", r.offset}};
}

Json blob(const BlobRef& b) {
  return Json{{"id", b.id.hex()}, {"size", b.size}, {"encoding", toString(b.encoding)}};
}

Json keyValues(const std::vector<KeyValue>& kvs) {
  Json out = Json::object();
  for (const KeyValue& kv : kvs) out[kv.key] = kv.value;
  return out;
}

Json rangeList(const std::vector<RangeDigest>& rs) {
  Json out = Json::array();
  for (const RangeDigest& r : rs) out.push_back(toJson(r));
  return out;
}

// An operation enqueued into a CUDA graph's capture (runs with the graph's launch).
template <typename T>
void captured(const T& op, Json& out) {
  out["captured"] = op.captured;
  out["captureId"] = op.captureId;
}

Json launch(const KernelLaunch& k) {
  Json reads = Json::array();
  for (const RangeDigest& r : k.reads) {
    Json j = range(r.range);
    if (r.range.bound == RangeBound::kBlock) j["bound"] = "block";
    reads.push_back(std::move(j));
  }
  Json params = Json::array();
  for (const ParamInfo& p : k.paramLayout) params.push_back({{"offset", p.offset}, {"size", p.size}});
  Json pointers = Json::array();
  for (const PointerParam& p : k.pointers) {
    pointers.push_back(
        {{"byteOffset", p.byteOffset}, {"allocation", p.allocation}, {"offset", p.offset}});
  }
  Json attributes = Json::array();
  for (const LaunchAttribute& a : k.attributes) {
    std::string hex;
    for (uint8_t b : a.value) hex += fmt::format("{:02x}", b);
    attributes.push_back({{"id", a.id}, {"value", hex}});
  }
  Json annotations = Json::array();
  for (const Annotation& a : k.annotations) annotations.push_back(toJson(a));
  std::string paramHex;
  paramHex.reserve(k.params.size() * 2);
  for (uint8_t b : k.params) paramHex += fmt::format("{:02x}", b);
  return Json{{"api", toString(k.api)},
              {"context", k.context},
              {"stream", k.stream},
              {"module", k.module},
              {"function", k.function},
              {"demangled", demangle(k.function)},
              {"grid", dims(k.grid)},
              {"block", dims(k.block)},
              {"cluster", dims(k.cluster)},
              {"sharedMemBytes", k.sharedMemBytes},
              {"attributes", attributes},
              {"params", paramHex},
              {"paramLayout", params},
              {"pointers", pointers},
              {"hashed", k.hashed},
              {"captured", k.captured},
              {"captureId", k.captureId},
              {"number", k.number == kNoLaunchNumber ? Json(nullptr) : Json(k.number)},
              {"inputs", rangeList(k.inputs)},
              {"outputs", rangeList(k.outputs)},
              {"reads", reads},
              {"annotations", annotations}};
}

// A Unix time in nanoseconds as ISO 8601 in UTC, to the nanosecond; null for
// 0 (unknown). The number itself exceeds 2^53, which JavaScript's
// JSON.parse rounds to a multiple of 256 ns.
Json isoTime(uint64_t ns) {
  if (ns == 0) return nullptr;
  const std::chrono::sys_seconds t{std::chrono::seconds(ns / 1'000'000'000)};
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:09}Z", t, ns % 1'000'000'000);
}

}  // namespace

Json toJson(const RangeDigest& r) {
  Json out = range(r.range);
  if (r.range.bound == RangeBound::kBlock) out["bound"] = "block";  // absent: the allocation's end
  out["digest"] = hex16(r.digest);
  if (!r.chunkDigests.empty()) {
    Json chunks = Json::array();
    for (uint64_t c : r.chunkDigests) chunks.push_back(hex16(c));
    out["chunkDigests"] = chunks;
  }
  if (r.snapshot) out["snapshot"] = blob(*r.snapshot);
  return out;
}

Json toJson(const Annotation& annotation) {
  return std::visit(
      [](const auto& a) -> Json {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, AlgorithmChoice>) {
          Json candidates = Json::array();
          for (const auto& c : a.candidates) {
            candidates.push_back({{"algorithm", c.algorithm}, {"timeMs", c.timeMs}});
          }
          return Json{{"kind", "algorithm"},     {"library", a.library},
                      {"call", a.call},          {"algorithm", a.algorithm},
                      {"attributes", keyValues(a.attributes)}, {"candidates", candidates}};
        } else if constexpr (std::is_same_v<T, RngState>) {
          // A seed is any 64-bit value: its decimal string is exact where a
          // parser reads numbers as doubles (JavaScript, jq 1.6).
          return Json{{"kind", "rng"},
                      {"source", a.source},
                      {"generator", a.generator},
                      {"seed", a.seed},
                      {"seedString", std::to_string(a.seed)},
                      {"offset", a.offset},
                      {"paramOffset", a.paramOffset}};
        } else if constexpr (std::is_same_v<T, FrameworkOp>) {
          return Json{{"kind", "frameworkOp"}, {"name", a.name}};
        } else if constexpr (std::is_same_v<T, Note>) {
          return Json{{"kind", "note"}, {"text", a.text}};
        } else {
          return Json{{"kind", "determinism"}, {"runs", a.runs}, {"distinctResults", a.distinctResults}};
        }
      },
      annotation);
}

Json toJson(const Header& h) {
  Json gpus = Json::array();
  for (const GpuInfo& g : h.gpus) {
    gpus.push_back({{"ordinal", g.ordinal},
                    {"name", g.name},
                    {"uuid", g.uuid},
                    {"smCount", g.smCount},
                    {"computeCapability", fmt::format("{}.{}", g.ccMajor, g.ccMinor)},
                    {"memoryBytes", g.memoryBytes},
                    {"pciBusId", g.pciBusId}});
  }
  const RecordingOptions& o = h.options;
  return Json{{"formatVersion", h.formatVersion},
              {"compatVersion", h.compatVersion},
              {"toolVersion", h.toolVersion},
              {"commandLine", h.commandLine},
              {"workingDirectory", h.workingDirectory},
              {"environment", keyValues(h.environment)},
              {"hostname", h.hostname},
              {"pid", h.pid},
              {"rank", h.rank},
              {"startTimeNs", h.startTimeNs},
              {"startTime", isoTime(h.startTimeNs)},
              {"gpus", gpus},
              {"driverVersion", h.driverVersion},
              {"cudaRuntimeVersion", h.cudaRuntimeVersion},
              {"cudnnVersion", h.cudnnVersion},
              {"cublasVersion", h.cublasVersion},
              {"libraries", keyValues(h.libraries)},
              {"options",
               {{"hashInputs", o.hashInputs},
                {"hashOutputs", o.hashOutputs},
                {"sync", o.sync},
                {"captureHostData", o.captureHostData},
                {"full", o.full},
                {"hashChunkBytes", o.hashChunkBytes},
                {"launchRange", o.launchRange},
                {"steps", o.steps},
                {"kernelRegex", o.kernelRegex},
                {"snapshot", o.snapshot},
                {"checkDeterminism", o.checkDeterminism}}},
              {"pointersResolved", h.pointersResolved}};
}

Json toJson(const Origin& o) {
  return Json{{"op", o.op},         {"opStack", o.opStack}, {"phase", toString(o.phase)},
              {"forwardOp", o.forwardOp}, {"module", o.module}, {"file", o.file},
              {"line", o.line},     {"step", o.step},       {"stepLaunch", o.stepLaunch},
              {"inPlace", toString(o.inPlace)}, {"benchmarking", o.benchmarking}, {"byPlace", o.byPlace}};
}

Json toJson(const Event& event) {
  Json out{{"seq", event.seq},
           {"timeNs", event.timeNs},
           {"thread", event.thread},
           {"kind", kindName(event.payload)}};
  if (event.origin) out["origin"] = toJson(*event.origin);
  std::visit(
      [&](const auto& p) {
        using T = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<T, KernelLaunch>) {
          out["launch"] = launch(p);
        } else if constexpr (std::is_same_v<T, Memcpy>) {
          out["memcpy"] = {{"kind", toString(p.kind)}, {"stream", p.stream}, {"async", p.async},
                           {"size", p.size},           {"dst", range(p.dst)},  {"src", range(p.src)},
                           {"digest", hex16(p.digest)}};
          if (p.data) out["memcpy"]["data"] = blob(*p.data);
          captured(p, out["memcpy"]);
        } else if constexpr (std::is_same_v<T, Memset>) {
          out["memset"] = {{"stream", p.stream},    {"async", p.async},
                           {"dst", range(p.dst)},   {"value", p.value},
                           {"elementSize", p.elementSize}, {"digest", hex16(p.digest)}};
          captured(p, out["memset"]);
        } else if constexpr (std::is_same_v<T, Allocation>) {
          out["alloc"] = {{"ordinal", p.ordinal}, {"address", p.address}, {"size", p.size},
                          {"kind", toString(p.kind)}, {"device", p.device}, {"stream", p.stream}};
        } else if constexpr (std::is_same_v<T, Free>) {
          out["free"] = {{"ordinal", p.ordinal}, {"address", p.address}};
        } else if constexpr (std::is_same_v<T, ModuleLoad>) {
          // An image not kept (size 0, no id) is null.
          out["module"] = {{"ordinal", p.ordinal},
                           {"image", p.cubin.size == 0 ? Json() : blob(p.cubin)},
                           {"arch", p.arch},
                           {"digest", p.digest == 0 ? Json() : Json(hex16(p.digest))}};
        } else if constexpr (std::is_same_v<T, Sync>) {
          out["sync"] = {{"kind", toString(p.kind)}, {"stream", p.stream}, {"event", p.event}};
        } else if constexpr (std::is_same_v<T, EventsDropped>) {
          Json kinds = Json::object();
          for (size_t i = 0; i < p.byKind.size(); ++i) kinds[kEventKindNames[i]] = p.byKind[i];
          out["dropped"] = {{"count", p.total()}, {"byKind", kinds},
                            {"firstTimeNs", p.firstTimeNs}, {"lastTimeNs", p.lastTimeNs}};
        } else if constexpr (std::is_same_v<T, trace::Collective>) {
          out["collective"] = {{"source", toString(p.source)},   {"call", p.call},
                               {"op", toString(p.op)},           {"communicator", hex16(p.communicator)},
                               {"rank", p.rank},                 {"size", p.size},
                               {"dataType", p.dataType},         {"count", p.count},
                               {"reduceOp", p.reduceOp},         {"peer", p.peer},
                               {"stream", p.stream},             {"sequence", p.sequence},
                               {"group", p.group},               {"inputs", rangeList(p.inputs)},
                               {"outputs", rangeList(p.outputs)}, {"processGroup", p.processGroup},
                               {"frameworkSequence", p.frameworkSequence}};
        } else {
          out["graph"] = {{"graphExec", p.graphExec}, {"stream", p.stream},
                          {"nodeCount", p.nodeCount}, {"inputs", rangeList(p.inputs)},
                          {"outputs", rangeList(p.outputs)}};
          captured(p, out["graph"]);
        }
      },
      event.payload);
  return out;
}

}  // namespace gpurr::report
