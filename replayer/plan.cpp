// Replay planning (see plan.h): walks the trace up to the launch, keeps the
// allocations and module images live there, and checks that everything a
// bitwise re-execution needs was recorded.
#include "replayer/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "trace_format/trace.h"

namespace gpurr::replay {
namespace {
using namespace gpurr::trace;

// Launch attribute ids (CUlaunchAttributeID) that name objects of the
// recorded process or apply to graphs only. Values from cuda.h, kept here so
// that planning needs no CUDA header.
constexpr uint32_t kAttrProgrammaticEvent = 7;
constexpr uint32_t kAttrLaunchCompletionEvent = 12;
constexpr uint32_t kAttrDeviceUpdatableKernelNode = 13;

// What walking the trace up to the launch collected.
struct History {
  std::unordered_map<uint32_t, Allocation> allocations;  // every allocation seen, by ordinal
  std::unordered_set<uint32_t> live;
  std::unordered_map<uint64_t, std::vector<uint32_t>> liveAt;  // live allocations at an address (a free by address)
  std::unordered_map<uint32_t, ModuleLoad> modules;
  uint64_t launchesBefore = 0;
  std::optional<uint64_t> previousLaunch, nextLaunch;
  std::optional<Event> target;
  uint64_t lastSeq = 0;
  uint64_t events = 0;
};

// Feeds one event; returns false once nothing more is needed.
bool absorb(History& h, const Event& e, uint64_t seq) {
  ++h.events;
  h.lastSeq = e.seq;
  const bool isLaunch = std::holds_alternative<KernelLaunch>(e.payload);
  if (e.seq > seq) {
    // Past the target: only the next launch is still of interest, for an
    // error message that suggests one.
    if (isLaunch) {
      h.nextLaunch = e.seq;
      return false;
    }
    return true;
  }
  if (e.seq == seq) {
    h.target = e;
    return !isLaunch;  // a non-launch target: go on to find the next launch
  }
  if (const auto* a = std::get_if<Allocation>(&e.payload)) {
    if (a->ordinal != 0) {
      h.allocations[a->ordinal] = *a;
      h.live.insert(a->ordinal);
      h.liveAt[a->address].push_back(a->ordinal);
    }
  } else if (const auto* f = std::get_if<Free>(&e.payload)) {
    uint32_t ordinal = f->ordinal;
    if (ordinal == 0) {
      const auto at = h.liveAt.find(f->address);
      if (at != h.liveAt.end() && !at->second.empty()) ordinal = at->second.back();
    }
    if (const auto it = h.allocations.find(ordinal); it != h.allocations.end() && h.live.contains(ordinal)) {
      if (const auto at = h.liveAt.find(it->second.address); at != h.liveAt.end()) std::erase(at->second, ordinal);
    }
    h.live.erase(ordinal);
  } else if (const auto* m = std::get_if<ModuleLoad>(&e.payload)) {
    h.modules[m->ordinal] = *m;
  } else if (isLaunch) {
    ++h.launchesBefore;
    h.previousLaunch = e.seq;
  }
  return true;
}

std::string nearestLaunches(const History& h) {
  std::vector<std::string> parts;
  if (h.previousLaunch) parts.push_back(fmt::format("#{} before it", *h.previousLaunch));
  if (h.nextLaunch) parts.push_back(fmt::format("#{} after it", *h.nextLaunch));
  if (parts.empty()) return "the trace holds no kernel launch";
  return "nearest launches: " + (parts.size() == 2 ? parts[0] + ", " + parts[1] : parts[0]);
}

ReplayPlan finish(History& h, const Header& header, const std::string& tracePath, uint64_t seq,
                  const std::function<bool(const BlobId&)>& hasBlob) {
  if (!h.target) {
    if (h.events == 0) throw ReplayError(fmt::format("{}: no event #{}: the trace holds no events", tracePath, seq));
    throw ReplayError(fmt::format(
        "{}: no event #{}: the trace's events end at #{} (`gpurr dump {}` lists them; launches are "
        "the `launch` lines)",
        tracePath, seq, h.lastSeq, tracePath));
  }
  const Event& event = *h.target;
  const auto* launchPtr = std::get_if<KernelLaunch>(&event.payload);
  if (launchPtr == nullptr) {
    const std::string kind = kindName(event.payload);
    const bool vowel = std::string_view("aeiou").find(kind[0]) != std::string_view::npos;
    throw ReplayError(fmt::format("{}: event #{} is {} {} event, not a kernel launch; {} (--launch takes an "
                                  "event number, as a report's `run A #N` gives it, not the launch's count among "
                                  "launches, as its `launch #N` does)",
                                  tracePath, seq, vowel ? "an" : "a", kind, nearestLaunches(h)));
  }
  const KernelLaunch& launch = *launchPtr;
  const std::string what = fmt::format("{}: launch #{} ({})", tracePath, seq, launch.function);
  if (launch.api == LaunchApi::kLaunchHost) {
    throw ReplayError(fmt::format("{} is a host function enqueued on a stream, not a kernel: there is "
                                  "nothing to re-execute on the GPU",
                                  what));
  }
  if (launch.function.empty()) {
    throw ReplayError(fmt::format("{}: launch #{} has no recorded function name; it cannot be looked up "
                                  "in its module",
                                  tracePath, seq));
  }

  ReplayPlan plan;
  plan.tracePath = tracePath;
  plan.seq = seq;
  plan.launchIndex = h.launchesBefore;
  plan.launch = launch;
  plan.origin = event.origin;
  plan.header = header;

  // The image.
  if (launch.module == 0) {
    throw ReplayError(fmt::format(
        "{}: the recorder did not tie this function to a loaded module image (module 0), so there "
        "is no code to load; a recorder that maps functions to images is needed",
        what));
  }
  const auto mod = h.modules.find(launch.module);
  if (mod == h.modules.end()) {
    throw ReplayError(fmt::format("{}: it names module #{}, which no event before it loaded (trace damaged?)",
                                  what, launch.module));
  }
  if (mod->second.cubin.size == 0) {
    throw ReplayError(fmt::format("{}: {} holds no image of module #{}: record with --snapshot (or --full) to "
                                  "keep what replay needs",
                                  what, tracePath, launch.module));
  }
  if (!hasBlob(mod->second.cubin.id)) {
    throw ReplayError(fmt::format("{}: the image of module #{} (blob {}) is missing from {}/blobs", what,
                                  launch.module, mod->second.cubin.id.hex(), tracePath));
  }
  plan.module = {mod->second.ordinal, mod->second.cubin, mod->second.arch};

  if (!header.pointersResolved) {
    plan.warnings.push_back(
        "this trace's recorder did not resolve pointer parameters to allocations: parameters are "
        "passed as recorded and cannot be relocated");
  }

  // Allocations the launch refers to: through its pointer parameters and
  // through the ranges it was recorded to read and write.
  std::map<uint32_t, ReservedRange> byOrdinal;
  std::vector<ReservedRange> loose;  // recorded ranges outside every known allocation
  std::unordered_map<uint32_t, uint32_t> deviceVotes;
  auto need = [&](uint32_t ordinal) -> ReservedRange* {
    const auto it = h.allocations.find(ordinal);
    if (it == h.allocations.end()) return nullptr;
    const Allocation& a = it->second;
    auto [slot, inserted] = byOrdinal.try_emplace(ordinal);
    if (inserted) {
      slot->second = {ordinal, a.address, a.size, a.address, a.kind, !h.live.contains(ordinal), false};
      ++deviceVotes[a.device];
    }
    return &slot->second;
  };
  for (const PointerParam& p : launch.pointers) {
    if (uint64_t{p.byteOffset} + 8 > launch.params.size()) {
      throw ReplayError(fmt::format("{}: pointer parameter at byte {} lies outside the {} parameter bytes "
                                    "(trace damaged?)",
                                    what, p.byteOffset, launch.params.size()));
    }
    const ReservedRange* r = need(p.allocation);
    if (r == nullptr) {
      plan.warnings.push_back(fmt::format(
          "parameter word at byte {} points into alloc#{}, which no event before the launch allocated; "
          "it is passed as recorded",
          p.byteOffset, p.allocation));
      continue;
    }
    uint64_t word = 0;
    std::memcpy(&word, launch.params.data() + p.byteOffset, 8);
    if (word != r->address + p.offset) {
      plan.warnings.push_back(fmt::format(
          "parameter word at byte {} holds {:#x}, but alloc#{}+{:#x} was recorded at {:#x}; replay "
          "uses the allocation and offset",
          p.byteOffset, word, p.allocation, p.offset, r->address + p.offset));
    }
  }
  auto needRange = [&](const DeviceRange& range, const char* role) {
    if (range.size == 0) return;
    if (range.allocation != 0) {
      if (const ReservedRange* r = need(range.allocation)) {
        if (range.offset + range.size > r->size || range.address != r->address + range.offset) {
          throw ReplayError(fmt::format("{}: {} range {} does not lie inside alloc#{} ({:#x}, {}) (trace "
                                        "damaged?)",
                                        what, role, describeRange(range), range.allocation, r->address,
                                        humanBytes(r->size)));
        }
        return;
      }
    }
    loose.push_back({0, range.address, range.size, range.address, AllocationKind::kOther, false, false});
  };
  for (const RangeDigest& r : launch.inputs) needRange(r.range, "input");
  for (const RangeDigest& r : launch.outputs) needRange(r.range, "output");

  for (auto& [ordinal, r] : byOrdinal) {
    if (r.size == 0) continue;
    if (r.freedBeforeLaunch) {
      plan.warnings.push_back(fmt::format(
          "alloc#{} ({:#x}, {}) was freed before the launch but the launch refers to it (use after "
          "free?); it is placed as recorded",
          ordinal, r.address, humanBytes(r.size)));
    }
    if (r.kind == AllocationKind::kVmm) {
      // Only the parts the recorded ranges cover: the rest of a reservation
      // may never have been mapped.
      std::vector<std::pair<uint64_t, uint64_t>> parts;  // [start, end)
      for (const auto* list : {&launch.inputs, &launch.outputs}) {
        for (const RangeDigest& d : *list) {
          if (d.range.allocation == ordinal && d.range.size > 0) {
            parts.emplace_back(d.range.address, d.range.address + d.range.size);
          }
        }
      }
      const std::vector<std::pair<uint64_t, uint64_t>> merged = mergeIntervals(std::move(parts));
      for (const auto& [start, end] : merged) {
        ReservedRange part = r;
        part.address = start;
        part.size = end - start;
        plan.ranges.push_back(part);
      }
      if (!merged.empty()) continue;
    }
    plan.ranges.push_back(r);
  }
  // Loose ranges that overlap or touch become one.
  std::vector<std::pair<uint64_t, uint64_t>> looseParts;
  for (const ReservedRange& r : loose) looseParts.emplace_back(r.address, r.address + r.size);
  for (const auto& [start, end] : mergeIntervals(std::move(looseParts))) {
    plan.ranges.push_back({0, start, end - start, start, AllocationKind::kOther, false, false});
  }
  if (!loose.empty()) {
    plan.warnings.push_back(fmt::format(
        "{} recorded range(s) lie outside every allocation the trace knows of; they are placed as "
        "recorded, with their own address space",
        loose.size()));
  }
  std::sort(plan.ranges.begin(), plan.ranges.end(),
            [](const ReservedRange& a, const ReservedRange& b) { return a.address < b.address; });

  // Inputs: every recorded input must come with its bytes.
  std::vector<const RangeDigest*> missing;
  for (const RangeDigest& in : launch.inputs) {
    if (in.range.size == 0) continue;
    if (!in.snapshot) {
      missing.push_back(&in);
      continue;
    }
    if (in.snapshot->size != in.range.size) {
      throw ReplayError(fmt::format("{}: the snapshot of input {} holds {} bytes, not {} (trace damaged?)", what,
                                    describeRange(in.range), in.snapshot->size, in.range.size));
    }
    if (!hasBlob(in.snapshot->id)) {
      throw ReplayError(fmt::format("{}: the snapshot of input {} (blob {}) is missing from {}/blobs", what,
                                    describeRange(in.range), in.snapshot->id.hex(), tracePath));
    }
    plan.inputs.push_back({in.range, *in.snapshot, in.digest});
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 3; ++i) {
      list += (i ? ", " : "") + describeRange(missing[i]->range);
    }
    if (missing.size() > 3) list += fmt::format(" and {} more", missing.size() - 3);
    throw ReplayError(fmt::format(
        "{}: no snapshot of input {}: the trace holds only digests of what the kernel read, and replay "
        "needs the bytes. Record them with `gpurr record --snapshot {} -- {}`",
        what, list, h.launchesBefore, commandLineOf(header)));
  }
  // A hashed launch without inputs reads nothing (a fill); one the recording
  // skipped may read anything.
  if (launch.inputs.empty() && !launch.pointers.empty() && !launch.hashed) {
    throw ReplayError(fmt::format(
        "{}: the kernel takes {} device pointer(s) but the trace holds no record of what it read (the "
        "recording skipped this launch). Record the inputs' bytes with `gpurr record --snapshot {} -- {}`",
        what, launch.pointers.size(), h.launchesBefore, commandLineOf(header)));
  }
  for (ReservedRange& r : plan.ranges) {
    for (const InputRestore& in : plan.inputs) {
      if (in.range.address < r.address + r.size && r.address < in.range.address + in.range.size) r.restored = true;
    }
    if (!r.restored) {
      plan.warnings.push_back(fmt::format(
          "{} {} is not among the recorded inputs: it starts zero-filled, so bytes the kernel reads "
          "there or does not overwrite may differ from the recording",
          r.allocation ? fmt::format("alloc#{}", r.allocation) : fmt::format("range {:#x}", r.address),
          humanBytes(r.size)));
    }
  }

  // Outputs: the recorded digests; with none, the runs are compared with each
  // other over every reserved range.
  for (const RangeDigest& out : launch.outputs) {
    if (out.range.size == 0) continue;
    OutputCheck check{out.range, true, out.digest, out.chunkDigests, out.snapshot};
    if (check.snapshot && (!hasBlob(check.snapshot->id) || check.snapshot->size != out.range.size)) {
      plan.warnings.push_back(fmt::format("the recorded snapshot of output {} is missing or damaged; only "
                                          "its digest is compared",
                                          describeRange(out.range)));
      check.snapshot.reset();
    }
    plan.outputs.push_back(std::move(check));
  }
  if (plan.outputs.empty()) {
    plan.warnings.push_back(
        "the trace holds no output digests for this launch: runs are compared with each other over every "
        "reserved range, not with the recording");
    for (const ReservedRange& r : plan.ranges) {
      OutputCheck check;
      check.range = {r.address, r.size, r.allocation, 0};
      check.recorded = false;
      plan.outputs.push_back(std::move(check));
    }
  }

  size_t globals = 0;
  for (const ReservedRange& r : plan.ranges) globals += r.kind == AllocationKind::kModuleGlobal;
  if (globals > 0) {
    plan.warnings.push_back(fmt::format(
        "{} referenced range(s) are module globals: they are restored where the launch's parameters point, "
        "but the kernel's direct references to its own module's __device__ variables see the freshly "
        "loaded image's initial values",
        globals));
  }
  for (const LaunchAttribute& a : launch.attributes) {
    if (!replayableAttribute(a.id)) {
      plan.warnings.push_back(fmt::format(
          "launch attribute {} names an event or graph node of the recorded process; it is left out", a.id));
    }
  }

  // The GPU it ran on: the device most of its allocations live on.
  uint32_t votes = 0;
  for (const auto& [device, n] : deviceVotes) {
    if (n > votes || (n == votes && device < plan.recordedDevice)) {
      plan.recordedDevice = device;
      votes = n;
    }
  }
  plan.recordedGpu = recordedGpuOf(header, plan.recordedDevice);
  plan.recordedArch = recordedArchOf(plan.recordedGpu, plan.module.arch);
  return plan;
}

}  // namespace

ReplayPlan planReplay(const TraceReader& reader, uint64_t seq) {
  History h;
  reader.forEach([&](const Event& e) { return absorb(h, e, seq); });
  return finish(h, reader.header(), reader.path().string(), seq,
                [&](const BlobId& id) { return reader.hasBlob(id); });
}

ReplayPlan planReplay(std::span<const Event> events, const Header& header, const std::string& tracePath,
                      uint64_t seq, const std::function<bool(const BlobId&)>& hasBlob) {
  History h;
  for (const Event& e : events) {
    if (!absorb(h, e, seq)) break;
  }
  return finish(h, header, tracePath, seq, hasBlob);
}

std::string commandLineOf(const Header& header) {
  std::string cmd;
  for (const std::string& arg : header.commandLine) {
    const bool plain = !arg.empty() && arg.find_first_of(" \t'\"$\\") == std::string::npos;
    cmd += (cmd.empty() ? "" : " ") + (plain ? arg : "'" + arg + "'");
  }
  return cmd.empty() ? "PROGRAM..." : cmd;
}

std::optional<GpuInfo> recordedGpuOf(const Header& header, uint32_t device) {
  for (const GpuInfo& g : header.gpus) {
    if (g.ordinal == device) return g;
  }
  if (header.gpus.size() == 1) return header.gpus[0];
  return std::nullopt;
}

uint32_t recordedArchOf(const std::optional<GpuInfo>& gpu, uint32_t imageArch) {
  if (gpu && gpu->ccMajor > 0) return gpu->ccMajor * 10 + gpu->ccMinor;
  return imageArch;
}

std::vector<std::pair<uint64_t, uint64_t>> mergeIntervals(std::vector<std::pair<uint64_t, uint64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& p : intervals) {
    if (!merged.empty() && p.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, p.second);
    } else {
      merged.push_back(p);
    }
  }
  return merged;
}

std::vector<Region> groupIntoRegions(std::span<const ReservedRange> ranges, uint64_t granularity) {
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a].address < ranges[b].address; });
  const uint64_t mask = granularity - 1;
  std::vector<Region> regions;
  for (size_t i : order) {
    const ReservedRange& r = ranges[i];
    if (r.size == 0) continue;
    const uint64_t start = r.address & ~mask;
    const uint64_t end = (r.address + r.size + mask) & ~mask;
    if (!regions.empty() && start <= regions.back().start + regions.back().size) {
      Region& last = regions.back();
      last.size = std::max(last.start + last.size, end) - last.start;
      last.members.push_back(i);
    } else {
      regions.push_back({start, end - start, {i}});
    }
  }
  return regions;
}

void AddressMap::place(uint64_t recordedStart, uint64_t size, uint64_t newStart) {
  regions_[recordedStart] = {size, newStart};
}

uint64_t AddressMap::translate(uint64_t recorded) const {
  auto it = regions_.upper_bound(recorded);
  if (it == regions_.begin()) return recorded;
  --it;
  // One past the end belongs to the region too: a pointer to the end of a
  // buffer moves with the buffer.
  if (recorded - it->first > it->second.size) return recorded;
  return it->second.newStart + (recorded - it->first);
}

bool AddressMap::moved() const {
  return std::any_of(regions_.begin(), regions_.end(),
                     [](const auto& r) { return r.first != r.second.newStart; });
}

bool AddressMap::relocated(uint64_t recorded) const {
  auto it = regions_.upper_bound(recorded);
  if (it == regions_.begin()) return false;
  --it;
  return recorded - it->first < it->second.size && it->first != it->second.newStart;
}

std::vector<uint8_t> relocateParams(const ReplayPlan& plan, const AddressMap& map) {
  std::unordered_map<uint32_t, uint64_t> bases;
  for (const ReservedRange& r : plan.ranges) {
    if (r.allocation != 0) bases[r.allocation] = r.allocationAddress;
  }
  return relocateParams(plan.launch, plan.seq, bases, map);
}

std::vector<uint8_t> relocateParams(const KernelLaunch& launch, uint64_t seq,
                                    const std::unordered_map<uint32_t, uint64_t>& bases, const AddressMap& map) {
  std::vector<uint8_t> params = launch.params;
  for (const PointerParam& p : launch.pointers) {
    if (uint64_t{p.byteOffset} + 8 > params.size()) {
      throw ReplayError(fmt::format("launch #{}: pointer parameter at byte {} lies outside the {} parameter bytes",
                                    seq, p.byteOffset, params.size()));
    }
    const auto base = bases.find(p.allocation);
    if (base == bases.end()) continue;  // unknown allocation: passed as recorded
    // The pointer's target moves with the region that holds it (a VMM
    // allocation's start may lie in no region at all).
    const uint64_t value = map.translate(base->second + p.offset);
    std::memcpy(params.data() + p.byteOffset, &value, 8);
  }
  return params;
}

DeviceRange relocateRange(const DeviceRange& range, const AddressMap& map) {
  DeviceRange out = range;
  out.address = map.translate(range.address);
  return out;
}

std::optional<StoredPointers> findStoredPointers(const DeviceRange& range, std::span<const uint8_t> bytes,
                                                 const AddressMap& map) {
  StoredPointers found{range, 0, 0};
  // Words at 8-byte-aligned device addresses, as the GPU would load them.
  const uint64_t skip = (8 - range.address % 8) % 8;
  for (uint64_t off = skip; off + 8 <= bytes.size(); off += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + off, 8);
    if (word != 0 && map.relocated(word)) {
      if (found.count == 0) found.firstOffset = off;
      ++found.count;
    }
  }
  if (found.count == 0) return std::nullopt;
  return found;
}

bool replayableAttribute(uint32_t id) {
  return id != kAttrProgrammaticEvent && id != kAttrLaunchCompletionEvent && id != kAttrDeviceUpdatableKernelNode;
}

}  // namespace gpurr::replay
