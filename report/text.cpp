// Formatting shared by the human-readable outputs (see text.h).
#include "report/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <unordered_map>

#include "common/demangle.h"

namespace gpurr::report {
using namespace gpurr::trace;

const std::string& demangle(const std::string& mangled) {
  static thread_local std::unordered_map<std::string, std::string> cache;
  auto it = cache.find(mangled);
  if (it != cache.end()) return it->second;
  return cache.emplace(mangled, text::oneLine(demangled(mangled))).first->second;
}

size_t characterStart(std::string_view s, size_t i) {
  i = std::min(i, s.size());
  while (i > 0 && i < s.size() && (static_cast<unsigned char>(s[i]) & 0xc0) == 0x80) --i;
  return i;
}

std::string dim(const Dim3& d) { return fmt::format("({},{},{})", d.x, d.y, d.z); }

std::string where(const DeviceRange& r) {
  if (r.allocation == 0) return fmt::format("{:#x}", r.address);
  return fmt::format("alloc#{}+{:#x}", r.allocation, r.offset);
}

std::string hex16(uint64_t digest) { return fmt::format("{:016x}", digest); }

std::string cudaVersion(uint32_t v) {
  if (v == 0) return "unknown";
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

std::string libraryVersion(uint32_t v) {
  if (v == 0) return "not loaded";
  // cuDNN 9 and cuBLAS encode major*10000 + minor*100 + patch.
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

namespace {

// An operation enqueued into a CUDA graph's capture runs with the graph's launch.
template <typename T>
std::string capturedInto(const T& op) {
  return op.captured ? fmt::format(" captured-into-graph capture={}", op.captureId) : std::string();
}

std::string ranges(const std::vector<RangeDigest>& rs) {
  std::string out = "[";
  for (size_t i = 0; i < rs.size(); ++i) {
    if (i > 0) out += ' ';
    out += fmt::format("{}:{}={}", where(rs[i].range), humanBytes(rs[i].range.size),
                       hex16(rs[i].digest));
    if (rs[i].snapshot) out += "+snap";
  }
  return out + "]";
}

std::string launchLine(const KernelLaunch& k) {
  std::string out = fmt::format("launch {} grid={} block={}", demangle(k.function), dim(k.grid),
                                dim(k.block));
  if (k.cluster != Dim3{0, 0, 0}) out += fmt::format(" cluster={}", dim(k.cluster));
  if (k.sharedMemBytes != 0) out += fmt::format(" smem={}", humanBytes(k.sharedMemBytes));
  out += fmt::format(" stream={:#x} params={} ptrs={}", k.stream, humanBytes(k.params.size()),
                     k.pointers.size());
  if (k.api != LaunchApi::kLaunchKernel) out += fmt::format(" api={}", toString(k.api));
  if (k.captured) {
    out += capturedInto(k);
  } else if (!k.hashed) {
    out += " not-hashed";
  } else {
    out += fmt::format(" in={} out={}", ranges(k.inputs), ranges(k.outputs));
    if (!k.reads.empty()) {
      out += " reads=[";
      for (size_t i = 0; i < k.reads.size(); ++i)
        out += fmt::format("{}{}:{}", i ? " " : "", where(k.reads[i].range), humanBytes(k.reads[i].range.size));
      out += "]";
    }
  }
  for (const Annotation& a : k.annotations) out += fmt::format(" {{{}}}", describe(a));
  return out;
}

}  // namespace

std::string describe(const Annotation& annotation) {
  return std::visit(
      [](const auto& a) -> std::string {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, AlgorithmChoice>) {
          return fmt::format("algo {} {} {}", a.library, a.call, a.algorithm);
        } else if constexpr (std::is_same_v<T, RngState>) {
          return fmt::format("rng {} seed={} offset={}", a.source, a.seed, a.offset);
        } else if constexpr (std::is_same_v<T, FrameworkOp>) {
          return fmt::format("op {}", a.name);
        } else if constexpr (std::is_same_v<T, Note>) {
          return fmt::format("note {}", a.text);
        } else {
          return fmt::format("determinism {} runs, {} distinct", a.runs, a.distinctResults);
        }
      },
      annotation);
}

std::string describe(const Event& event) {
  std::string head = fmt::format("#{:<7} {:>12.6f}s t{} ", event.seq,
                                 static_cast<double>(event.timeNs) / 1e9, event.thread);
  std::string tail;
  if (event.origin) {
    tail = fmt::format(" {{origin {}}}", trace::describe(*event.origin, std::holds_alternative<KernelLaunch>(event.payload)
                                                                            ? OriginStep::kLaunch
                                                                            : OriginStep::kOperation));
  }
  return head + std::visit(
                    [](const auto& p) -> std::string {
                      using T = std::decay_t<decltype(p)>;
                      if constexpr (std::is_same_v<T, KernelLaunch>) {
                        return launchLine(p);
                      } else if constexpr (std::is_same_v<T, Memcpy>) {
                        std::string s = fmt::format(
                            "memcpy {} {} {} -> {} stream={:#x}{} digest={}", toString(p.kind),
                            humanBytes(p.size), where(p.src), where(p.dst), p.stream,
                            p.async ? " async" : "", hex16(p.digest));
                        if (p.data) s += " +data";
                        return s + capturedInto(p);
                      } else if constexpr (std::is_same_v<T, Memset>) {
                        return fmt::format("memset {} {} value={:#x}/{}B stream={:#x}{} digest={}",
                                           where(p.dst), humanBytes(p.dst.size), p.value,
                                           p.elementSize, p.stream, p.async ? " async" : "",
                                           hex16(p.digest)) +
                               capturedInto(p);
                      } else if constexpr (std::is_same_v<T, Allocation>) {
                        return fmt::format("alloc #{} {} {} at {:#x} device={}", p.ordinal,
                                           toString(p.kind), humanBytes(p.size), p.address,
                                           p.device);
                      } else if constexpr (std::is_same_v<T, Free>) {
                        return fmt::format("free #{} at {:#x}", p.ordinal, p.address);
                      } else if constexpr (std::is_same_v<T, ModuleLoad>) {
                        const std::string digest = p.digest == 0 ? "" : " digest=" + hex16(p.digest);
                        if (p.cubin.size == 0) {
                          return fmt::format("module #{} sm_{}{} image not kept", p.ordinal, p.arch, digest);
                        }
                        return fmt::format("module #{} sm_{}{} image {} blob={}", p.ordinal, p.arch, digest,
                                           humanBytes(p.cubin.size), p.cubin.id.hex());
                      } else if constexpr (std::is_same_v<T, Sync>) {
                        return fmt::format("sync {} stream={:#x} event={:#x}", toString(p.kind),
                                           p.stream, p.event);
                      } else if constexpr (std::is_same_v<T, EventsDropped>) {
                        return fmt::format("{}, made from {:.6f}s to {:.6f}s (the recorder's trace thread fell behind)",
                                           trace::describe(p), static_cast<double>(p.firstTimeNs) / 1e9,
                                           static_cast<double>(p.lastTimeNs) / 1e9);
                      } else if constexpr (std::is_same_v<T, trace::Collective>) {
                        return fmt::format("collective {} {} stream={:#x} group={} in={} out={}",
                                           toString(p.source), trace::describe(p), p.stream, p.group,
                                           ranges(p.inputs), ranges(p.outputs)) +
                               (p.frameworkSequence >= 0 ? fmt::format(" seq={}", p.frameworkSequence) : "");
                      } else {
                        return fmt::format("graph exec={:#x} nodes={} stream={:#x} in={} out={}",
                                           p.graphExec, p.nodeCount, p.stream, ranges(p.inputs),
                                           ranges(p.outputs)) +
                               capturedInto(p);
                      }
                    },
                    event.payload) +
         tail;
}

}  // namespace gpurr::report
