// gpurr info TRACE: what a trace holds, in a screen; for a directory of
// per-process traces, a row per process and the job's totals.
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "cli/commands.h"
#include "common/parallel.h"
#include "report/compare.h"
#include "report/event_json.h"
#include "cli/recorder_cost.h"
#include "report/text.h"
#include "trace_format/scan.h"
#include "trace_format/trace.h"

namespace gpurr::cli {
using namespace gpurr::report;
namespace {
using namespace gpurr::trace;
namespace fs = std::filesystem;

struct InfoOptions {
  std::string trace;
  bool json = false;
};

struct Stats {
  std::array<uint64_t, std::variant_size_v<Payload>> byKind{};
  std::set<std::string> kernels;
  uint64_t bytesHashed = 0;
  uint64_t notHashed = 0;
  uint64_t graphsHashedWhole = 0;  // graph launches whose nodes the recorder did not read
  uint64_t allocatedBytes = 0;
  uint64_t annotations = 0;
  // Launches (not captured), copies and memsets; those with an origin, its
  // steps and modules.
  uint64_t operations = 0, withOrigin = 0;
  uint64_t benchmarking = 0;  // of them, run while the framework timed candidates
  std::optional<int64_t> firstStep, lastStep;
  std::set<std::string> modules;
  // Per training step (origins with a step): launches and bytes hashed.
  std::map<int64_t, std::pair<uint64_t, uint64_t>> steps;
  uint64_t firstTimeNs = 0, lastTimeNs = 0;
  uint64_t blobCount = 0, blobBytes = 0;
  RecorderCost cost;
  // EventsDropped markers: the events they stand for, summed, their number
  // and the first one's seq.
  EventsDropped dropped;
  uint64_t gaps = 0, firstGapSeq = 0;
  // Collectives: the communicators (id -> rank, size) they ran in.
  std::map<uint64_t, std::pair<int32_t, int32_t>> communicators;
};

uint64_t addRanges(Stats& s, const std::vector<RangeDigest>& ranges) {
  uint64_t bytes = 0;
  for (const RangeDigest& r : ranges) bytes += r.range.size;
  s.bytesHashed += bytes;
  return bytes;
}

// Launches and bytes hashed in the median step, and the most bytes of a step.
struct PerStep {
  size_t steps = 0;
  uint64_t medianLaunches = 0, medianBytes = 0, maxBytes = 0;
};

// Of the steps up to `stoppedAfter` where gpurr stopped the program there
// (the next step's first launches, before it stopped it, are no step's).
PerStep perStep(const Stats& s, int64_t stoppedAfter) {
  PerStep p;
  std::vector<uint64_t> launches, bytes;
  for (const auto& [step, v] : s.steps) {
    if (stoppedAfter >= 0 && step > stoppedAfter) continue;
    ++p.steps;
    launches.push_back(v.first);
    bytes.push_back(v.second);
  }
  if (p.steps == 0) return p;
  std::sort(launches.begin(), launches.end());
  std::sort(bytes.begin(), bytes.end());
  // Of an even count, the mean of the two middle ones (rounded down).
  auto median = [](const std::vector<uint64_t>& v) {
    const uint64_t low = v[(v.size() - 1) / 2], high = v[v.size() / 2];
    return low + (high - low) / 2;
  };
  p.medianLaunches = median(launches);
  p.medianBytes = median(bytes);
  p.maxBytes = bytes.back();
  return p;
}

Stats collect(const TraceReader& reader) {
  Stats s;
  bool first = true;
  reader.forEach([&](const Event& e) {
    ++s.byKind[e.payload.index()];
    if (first) s.firstTimeNs = e.timeNs;
    first = false;
    s.lastTimeNs = e.timeNs;
    if (ranWhenRecorded(e.payload) && !std::holds_alternative<GraphLaunch>(e.payload) &&
        !std::holds_alternative<Collective>(e.payload)) {
      ++s.operations;
      if (e.origin) {
        ++s.withOrigin;
        s.benchmarking += e.origin->benchmarking;
        if (e.origin->step >= 0) {
          s.firstStep = std::min(s.firstStep.value_or(e.origin->step), e.origin->step);
          s.lastStep = std::max(s.lastStep.value_or(e.origin->step), e.origin->step);
        }
        if (!e.origin->module.empty() && s.modules.size() < 100'000) s.modules.insert(e.origin->module);
      }
    }
    if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) {
      if (s.kernels.size() < 1'000'000) s.kernels.insert(k->function);
      const uint64_t bytes = addRanges(s, k->inputs) + addRanges(s, k->outputs);
      if (e.origin && e.origin->step >= 0 && !k->captured && s.steps.size() < 1'000'000) {
        auto& step = s.steps[e.origin->step];
        ++step.first;
        step.second += bytes;
      }
      if (!k->hashed) ++s.notHashed;
      s.cost.add(*k);
      s.annotations += k->annotations.size();
    } else if (const auto* g = std::get_if<GraphLaunch>(&e.payload)) {
      addRanges(s, g->inputs);
      addRanges(s, g->outputs);
      if (!g->captured && g->nodeCount == 0) ++s.graphsHashedWhole;
    } else if (const auto* a = std::get_if<Allocation>(&e.payload)) {
      s.allocatedBytes += a->size;
    } else if (const auto* d = std::get_if<EventsDropped>(&e.payload)) {
      if (s.gaps++ == 0) s.firstGapSeq = e.seq;
      for (size_t i = 0; i < d->byKind.size(); ++i) s.dropped.byKind[i] += d->byKind[i];
    } else if (const auto* c = std::get_if<Collective>(&e.payload)) {
      addRanges(s, c->inputs);
      addRanges(s, c->outputs);
      if (s.communicators.size() < 100'000) s.communicators[c->communicator] = {c->rank, c->size};
    }
    return true;
  });
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(reader.path() / "blobs", ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) {
      ++s.blobCount;
      s.blobBytes += it->file_size(ec);
    }
  }
  return s;
}

double ratio(uint64_t a, uint64_t b) { return b == 0 ? 0.0 : static_cast<double>(a) / b; }

// The compressed bytes of the blocks read: the events file less what a
// trace cut short, or damaged, holds past them (the ratio is of these).
uint64_t compressedRead(const trace::TraceReader& reader) {
  uint64_t n = 0;
  for (const trace::BlockInfo& b : reader.blocks()) n += b.compressedSize;
  return n;
}

std::string startTime(uint64_t ns) {
  if (ns == 0) return "unknown";
  const std::chrono::sys_seconds t{std::chrono::seconds(ns / 1'000'000'000)};
  return fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", t);
}

Json perStepJson(const Stats& s, int64_t stoppedAfter) {
  const PerStep p = perStep(s, stoppedAfter);
  if (p.steps == 0) return nullptr;
  return Json{{"steps", p.steps},
              {"medianLaunches", p.medianLaunches},
              {"medianBytesHashed", p.medianBytes},
              {"maxBytesHashed", p.maxBytes}};
}

Json memoryJson(const std::optional<RecorderMemory>& m) {
  if (!m) return nullptr;
  return Json{{"hostBytes", m->hostBytes},         {"queueBytes", m->queueBytes},
              {"snapshotBytes", m->snapshotBytes}, {"writerBytes", m->writerBytes},
              {"pinnedHostBytes", m->pinnedHostBytes}, {"deviceBytes", m->deviceBytes},
              {"eventsDropped", m->eventsDropped}};
}

Json layerStepsJson(const std::optional<LayerSteps>& l) {
  if (!l) return nullptr;
  return Json{{"observed", l->observed},   {"followed", l->followed}, {"unmatched", l->unmatched},
              {"templates", l->templates}, {"switches", l->switches}};
}

Json infoJson(const TraceReader& reader, const Stats& s) {
  Json kinds = Json::object(), droppedKinds = Json::object();
  // The program's events; EventsDropped markers are counted apart.
  for (size_t i = 0; i < s.dropped.byKind.size(); ++i) {
    kinds[kEventKindNames[i]] = s.byKind[i];
    droppedKinds[kEventKindNames[i]] = s.dropped.byKind[i];
  }
  Json regions = Json::array();
  for (const HostRegion& r : reader.hostRegions()) regions.push_back({r.start, r.end});
  Json out{{"trace", reader.path().string()},
           {"header", toJson(reader.header())},
           {"events", reader.eventCount()},
           {"launches", reader.launchCount()},
           {"eventsByKind", kinds},
           {"eventsOfUnknownKind", reader.unknownEventsSkipped()},
           {"eventsDropped", {{"count", s.dropped.total()},
                              {"gaps", s.gaps},
                              {"firstGapSeq", s.gaps ? Json(s.firstGapSeq) : Json(nullptr)},
                              {"byKind", droppedKinds}}},
           {"distinctKernels", s.kernels.size()},
           {"launchesNotHashed", s.notHashed},
           {"graphLaunchesHashedWhole", s.graphsHashedWhole},
           {"bytesHashed", s.bytesHashed},
           {"bytesHashedPerLaunch", reader.launchCount() ? s.bytesHashed / reader.launchCount() : 0},
           {"perStep", perStepJson(s, reader.stoppedAfterStep())},
           {"recorderCost", s.cost.json()},
           {"recorderMemory", memoryJson(reader.recorderMemory())},
           {"annotations", s.annotations},
           {"origins", {{"operations", s.operations},
                        {"withOrigin", s.withOrigin},
                        {"benchmarking", s.benchmarking},
                        {"firstStep", s.firstStep ? Json(*s.firstStep) : Json(nullptr)},
                        {"lastStep", s.lastStep ? Json(*s.lastStep) : Json(nullptr)},
                        {"modules", s.modules.size()},
                        {"layerSteps", layerStepsJson(reader.layerSteps())}}},
           {"timeSpanNs", s.lastTimeNs - s.firstTimeNs},
           {"blocks", reader.blocks().size()},
           {"eventsCompressedBytes", reader.eventsFileBytes()},
           {"eventsUncompressedBytes", reader.uncompressedBytes()},
           {"compressionRatio", ratio(reader.uncompressedBytes(), compressedRead(reader))},
           {"blobs", s.blobCount},
           {"blobBytes", s.blobBytes},
           {"hostRegions", regions},
           {"complete", !reader.damage().incomplete()},
           {"stoppedAfterStep", reader.stoppedAfterStep() >= 0 ? Json(reader.stoppedAfterStep()) : Json(nullptr)},
           {"damage", reader.damage().detail}};
  return out;
}

// A trace's status in a word or two, as `status` ends the text.
std::string statusOf(const TraceReader& reader) {
  std::string status = reader.damage().incomplete() ? "incomplete" : "complete";
  if (reader.stoppedAfterStep() >= 0) status += fmt::format(", stopped after step {}", reader.stoppedAfterStep());
  return status;
}

// gpurr info DIR, for a directory of per-process traces (what `gpurr record`
// writes when several processes ran, and every rank of a job wrote into):
// each trace read on a core of its own, a row each in rank order, and the
// job's totals. Exit status 2 when a trace cannot be read (it is listed).
int printDirectory(const fs::path& dir, const std::vector<std::pair<std::string, fs::path>>& traces, bool json) {
  struct Row {
    std::unique_ptr<TraceReader> reader;
    Stats stats;
    std::string error;
  };
  std::vector<Row> rows(traces.size());
  parallel::onEveryCore(traces.size(), [&](size_t i) {
    try {
      trace::readingPastCorruptBlocks({traces[i].second}, [&](const std::vector<trace::ReadLimit>& limits) {
        rows[i].reader = std::make_unique<TraceReader>(traces[i].second, limits[0]);
        rows[i].stats = collect(*rows[i].reader);
      });
    } catch (const std::exception& e) {
      rows[i].reader.reset();
      rows[i].error = e.what();
    }
  });
  uint64_t launches = 0, collectives = 0, dropped = 0;
  size_t unreadable = 0, incomplete = 0;
  const size_t collectiveKind = static_cast<size_t>(EventKind::kCollective);
  for (const Row& r : rows) {
    if (!r.reader) {
      ++unreadable;
      continue;
    }
    launches += r.reader->launchCount();
    collectives += r.stats.byKind[collectiveKind];
    dropped += r.stats.dropped.total();
    incomplete += r.reader->damage().incomplete() ? 1 : 0;
  }
  if (json) {
    Json processes = Json::array();
    for (size_t i = 0; i < rows.size(); ++i) {
      Json j = rows[i].reader ? infoJson(*rows[i].reader, rows[i].stats) : Json{{"trace", traces[i].second.string()}};
      j["process"] = traces[i].first;
      if (!rows[i].reader) {
        j["error"] = rows[i].error;
        std::cerr << "gpurr info: error: " << rows[i].error << '\n';  // as for one trace
      }
      processes.push_back(std::move(j));
    }
    std::cout << report::jsonText(Json{{"directory", dir.string()},
                      {"traces", traces.size()},
                      {"launches", launches},
                      {"collectives", collectives},
                      {"eventsDropped", dropped},
                      {"incomplete", incomplete},
                      {"unreadable", unreadable},
                      {"processes", processes}})
              << '\n';
    return unreadable ? kExitTrouble : kExitOk;
  }
  std::cout << fmt::format("{}: a directory of {} trace{} (gpurr info {} for one in full)\n",
                           dir.string(), traces.size(), traces.size() == 1 ? "" : "s",
                           (dir / traces.front().first).string());
  const std::string format = "{:<20} {:>5}  {:<16} {:>12}  {:>11}  {:>11}  {:>7}  {}\n";
  std::cout << fmt::format(fmt::runtime(format), "process", "rank", "host", "launches", "collectives", "steps",
                           "dropped", "status");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (!r.reader) {
      std::cout << fmt::format("{:<20} unreadable: {}\n", traces[i].first, r.error);
      continue;
    }
    const Header& h = r.reader->header();
    const Stats& s = r.stats;
    const std::string steps = !s.firstStep                 ? "-"
                              : *s.firstStep == *s.lastStep ? std::to_string(*s.firstStep)
                                                            : fmt::format("{}-{}", *s.firstStep, *s.lastStep);
    std::cout << fmt::format(fmt::runtime(format), traces[i].first, h.rank >= 0 ? std::to_string(h.rank) : "-",
                             text::oneLine(h.hostname), withCommas(r.reader->launchCount()), withCommas(s.byKind[collectiveKind]),
                             steps, withCommas(s.dropped.total()), statusOf(*r.reader));
  }
  std::cout << fmt::format(fmt::runtime(format), "total", "", "", withCommas(launches), withCommas(collectives), "",
                           withCommas(dropped),
                           fmt::format("{} complete{}{}", traces.size() - incomplete - unreadable,
                                       incomplete ? fmt::format(", {} incomplete", incomplete) : "",
                                       unreadable ? fmt::format(", {} unreadable", unreadable) : ""));
  return unreadable ? kExitTrouble : kExitOk;
}

int printText(const TraceReader& reader, const Stats& s) {
  const Header& h = reader.header();
  auto line = [](std::string_view key, const std::string& value) {
    std::cout << fmt::format("{:<12} {}\n", key, text::oneLine(value));
  };
  line("trace", reader.path().string());
  line("format", fmt::format("{} (compat {}), written by gpurr {}", h.formatVersion,
                             h.compatVersion, h.toolVersion.empty() ? "?" : h.toolVersion));
  std::string cmd;
  for (const std::string& arg : h.commandLine) cmd += (cmd.empty() ? "" : " ") + arg;
  line("command", cmd.empty() ? "(none recorded)" : cmd);
  line("directory", h.workingDirectory);
  line("host", fmt::format("{}, pid {}{}", h.hostname, h.pid,
                           h.rank >= 0 ? fmt::format(", rank {}", h.rank) : ""));
  line("started", startTime(h.startTimeNs));
  if (h.gpus.empty()) line("gpu", "none recorded");
  for (const GpuInfo& g : h.gpus) {
    line(fmt::format("gpu {}", g.ordinal),
         fmt::format("{} (sm_{}{}, {} SMs, {}) {}", g.name, g.ccMajor, g.ccMinor, g.smCount,
                     humanBytes(g.memoryBytes), g.uuid));
  }
  line("versions", fmt::format("driver {}, CUDA runtime {}, cuDNN {}, cuBLAS {}",
                               cudaVersion(h.driverVersion), cudaVersion(h.cudaRuntimeVersion),
                               libraryVersion(h.cudnnVersion), libraryVersion(h.cublasVersion)));
  for (const KeyValue& lib : h.libraries) line("", fmt::format("{} {}", lib.key, lib.value));
  if (h.environment.empty()) line("environment", "(no determinism-relevant variables set)");
  for (size_t i = 0; i < h.environment.size(); ++i) {
    line(i == 0 ? "environment" : "",
         fmt::format("{}={}", h.environment[i].key, h.environment[i].value));
  }
  const RecordingOptions& o = h.options;
  std::string opts = o.hashInputs && o.hashOutputs ? "hash inputs+outputs"
                     : o.hashOutputs              ? "hash outputs"
                     : o.hashInputs               ? "hash inputs"
                                                  : "no hashing";
  if (o.sync) opts += ", sync";
  if (o.captureHostData) opts += ", host data";
  if (o.full) opts += ", full";
  if (!o.launchRange.empty()) opts += ", launches " + o.launchRange;
  if (!o.steps.empty()) opts += ", steps " + o.steps;
  if (!o.kernelRegex.empty()) opts += ", kernels /" + o.kernelRegex + "/";
  if (!o.snapshot.empty()) opts += ", snapshot " + o.snapshot;
  if (o.checkDeterminism) opts += fmt::format(", check-determinism={}", o.checkDeterminism);
  line("options", opts);
  auto count = [](uint64_t n, std::string_view what, std::string_view plural = "s") {
    return fmt::format("{} {}{}", withCommas(n), what, n == 1 ? "" : plural);
  };
  line("events", fmt::format("{} ({} of {}, {}, {}, {}, {}, {}, {}, {})",
                             withCommas(reader.eventCount()), count(s.byKind[0], "launch", "es"),
                             count(s.kernels.size(), "kernel"), count(s.byKind[1], "memcpy", ""),
                             count(s.byKind[2], "memset", ""), count(s.byKind[3], "allocation"),
                             count(s.byKind[4], "free"), count(s.byKind[5], "module load"),
                             count(s.byKind[6], "sync", ""), count(s.byKind[7], "graph launch", "es")));
  if (const uint64_t unknown = reader.unknownEventsSkipped(); unknown > 0) {
    line("", fmt::format("{} of kinds this gpurr does not know, skipped (trace compatibility {}, "
                         "this gpurr {})",
                         count(unknown, "event"), h.compatVersion, kCompatVersion));
  }
  if (s.gaps > 0) {
    line("dropped", fmt::format("{} at {}, the first at event #{}: the recorder's trace thread fell behind and "
                                "the memory for events waiting for it was full (gpurr record --trace-queue)",
                                describe(s.dropped), count(s.gaps, "place"), s.firstGapSeq));
  }
  if (const uint64_t n = s.byKind[static_cast<size_t>(EventKind::kCollective)]; n > 0) {
    std::string comms;
    for (const auto& [id, rs] : s.communicators) {
      if (comms.size() > 200) {
        comms += ", ...";
        break;
      }
      comms += fmt::format("{}{:016x} (rank {} of {})", comms.empty() ? "" : ", ", id, rs.first, rs.second);
    }
    line("collectives", fmt::format("{} in {}: {}", withCommas(n), count(s.communicators.size(), "communicator"), comms));
  }
  line("hashed", fmt::format("{} in launch inputs and outputs{}{}", humanBytes(s.bytesHashed),
                             s.notHashed ? fmt::format(" ({} launches not hashed)", s.notHashed) : "",
                             reader.launchCount()
                                 ? fmt::format(", {} per launch", humanBytes(s.bytesHashed / reader.launchCount()))
                                 : ""));
  if (s.graphsHashedWhole > 0) {
    line("", fmt::format("{} hashed every allocation: their nodes were not read (see the recorder's warning)",
                         count(s.graphsHashedWhole, "graph launch", "es")));
  }
  if (const PerStep p = perStep(s, reader.stoppedAfterStep()); p.steps > 0) {
    line("", fmt::format("per training step (median of {}): {} in {}; the largest step {}",
                         count(p.steps, "step"), humanBytes(p.medianBytes), count(p.medianLaunches, "launch", "es"),
                         humanBytes(p.maxBytes)));
  }
  line("recorder", s.cost.line());
  if (const auto& m = reader.recorderMemory()) {
    line("", fmt::format("memory held at most: host {} (event queue {}, snapshots {}, writer {}), pinned host {}, "
                         "GPU {}",
                         humanBytes(m->hostBytes), humanBytes(m->queueBytes), humanBytes(m->snapshotBytes),
                         humanBytes(m->writerBytes), humanBytes(m->pinnedHostBytes), humanBytes(m->deviceBytes)));
  }
  if (s.withOrigin == 0 && (reader.damage().incomplete() || reader.layerSteps())) {
    // The layer ran (its steps are in the index), or its origins may be in the blocks not read.
    line("origins", "none in the blocks read");
  } else if (s.withOrigin == 0) {
    line("origins", "none recorded (no framework layer ran: ops, modules and source lines are unknown)");
  } else {
    std::string steps;
    if (s.firstStep) {
      const int64_t stopped = reader.stoppedAfterStep();
      const int64_t last = stopped >= 0 ? std::min(*s.lastStep, stopped) : *s.lastStep;
      steps = *s.firstStep == last ? fmt::format(", step {}", last)
                                   : fmt::format(", steps {} to {}", *s.firstStep, last);
      if (const auto next = s.steps.find(stopped + 1); stopped >= 0 && next != s.steps.end()) {
        steps += fmt::format(" (and {} of step {}, begun before gpurr stopped the program)",
                             count(next->second.first, "launch", "es"), stopped + 1);
      }
    }
    line("origins", fmt::format("{} of {} launches, copies and memsets (op, module, source line, step){}, {}",
                                withCommas(s.withOrigin), withCommas(s.operations), steps,
                                count(s.modules.size(), "module")));
  }
  if (s.benchmarking > 0) {
    line("", fmt::format("{} of them ran while the framework timed candidate kernels (an autotuner's benchmarking, "
                         "whose results it discards): gpurr diff sets them aside",
                         withCommas(s.benchmarking)));
  }
  if (const auto& l = reader.layerSteps()) {
    std::vector<std::string> parts;
    if (l->observed > 0) parts.push_back(withCommas(l->observed) + " observed in full");
    if (l->followed > 0) {
      parts.push_back(fmt::format("{} followed from {} ({})", withCommas(l->followed),
                                  count(l->templates, "template"), count(l->switches, "switch", "es")));
    }
    if (l->unmatched > 0) {
      parts.push_back(withCommas(l->unmatched) + " partly observed (an operation matched no template)");
    }
    line("", fmt::format("steps completed: {}: {}", withCommas(l->observed + l->followed + l->unmatched),
                         fmt::join(parts, ", ")));
  }
  line("time span", fmt::format("{:.3f} s", static_cast<double>(s.lastTimeNs - s.firstTimeNs) / 1e9));
  const size_t blocks = reader.blocks().size();
  // What the events file holds after the last block read (a block cut
  // short, or a corrupt one and those after it).
  const uint64_t end = blocks == 0 ? 0 : reader.blocks().back().frameOffset + reader.blocks().back().compressedSize;
  const uint64_t past = reader.eventsFileBytes() - std::min(reader.eventsFileBytes(), end);
  line("size", fmt::format("events {} in {} block{}{} ({} uncompressed, {:.1f}x), blobs {} in {} files",
                           past > 0 ? fmt::format("{}: {}", humanBytes(reader.eventsFileBytes()), humanBytes(end))
                                    : humanBytes(reader.eventsFileBytes()),
                           blocks, blocks == 1 ? "" : "s",
                           past > 0 ? fmt::format(" read, {} after them not", humanBytes(past)) : "",
                           humanBytes(reader.uncompressedBytes()),
                           ratio(reader.uncompressedBytes(), compressedRead(reader)), humanBytes(s.blobBytes),
                           s.blobCount));
  const Damage& damage = reader.damage();
  std::string status = damage.incomplete()     ? "incomplete: " + damage.detail
                       : damage.detail.empty() ? "complete"
                       : damage.indexDamaged   ? "complete, its index damaged: " + damage.detail
                                               : "complete; " + damage.detail;
  if (reader.stoppedAfterStep() >= 0) {
    status += fmt::format("; gpurr stopped the program after training step {} (record --until-step or --stop-file)",
                          reader.stoppedAfterStep());
  }
  if (s.gaps > 0) status += fmt::format("; {} dropped (see above)", count(s.dropped.total(), "event"));
  line("status", status);
  return kExitOk;
}

}  // namespace

void addInfoCommand(CLI::App& app, Action& chosen) {
  auto opts = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "info", "Summarise a trace: header, GPUs and versions, event counts, sizes, time span.");
  cmd->add_option("trace", opts->trace, "Trace, or a directory of per-process traces (a row each)")->required();
  cmd->add_flag("--json", opts->json, "Print one JSON object (keys documented in docs/JSON.md)");
  cmd->callback([opts, &chosen] {
    chosen = [opts] {
      if (!trace::isTrace(opts->trace)) {
        const auto traces = trace::directoryTraces(opts->trace);
        if (!traces.empty()) return printDirectory(opts->trace, traces, opts->json);
      }
      // A trace with a corrupt block is summarised up to that block (its status says so).
      auto read = [&](const std::vector<trace::ReadLimit>& limits) {
        auto reader = std::make_unique<TraceReader>(opts->trace, limits[0]);
        Stats stats = collect(*reader);
        return std::pair{std::move(reader), std::move(stats)};
      };
      if (!opts->json) {
        const auto [reader, stats] = trace::readingPastCorruptBlocks({opts->trace}, read);
        return printText(*reader, stats);
      }
      try {
        const auto [reader, stats] = trace::readingPastCorruptBlocks({opts->trace}, read);
        std::cout << report::jsonText(infoJson(*reader, stats)) << '\n';
      } catch (const TraceError& e) {
        // Still one object, as a directory's row for such a trace is.
        std::cout << report::jsonText(Json{{"trace", opts->trace}, {"error", e.what()}}) << '\n';
        throw;
      }
      return kExitOk;
    };
  });
}

}  // namespace gpurr::cli
