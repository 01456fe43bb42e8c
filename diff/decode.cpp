// Full events (decode.h): one event read again and decoded, and the view of
// it every later stage takes.
#include "diff/decode.h"

#include <algorithm>

namespace gpurr::diff {
using namespace gpurr::trace;

Event eventAt(const TraceReader& reader, uint64_t seq) {
  std::optional<Event> out = reader.event(seq);
  if (!out) throw TraceError(fmt::format("{}: event #{} vanished between two reads", reader.path().string(), seq));
  return std::move(*out);
}

OpView view(const Event& e) {
  OpView v;
  if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) {
    v.launch = k;
    v.inputs = k->inputs;
    v.outputs = k->outputs;
    v.reads = k->reads.size();
  } else if (const auto* m = std::get_if<Memcpy>(&e.payload)) {
    v.memcpy = m;
    v.outputs = {{m->dst, m->digest, {}, {}}};
    if (readsDeviceMemory(m->kind)) {
      v.inputs = {{m->src, m->digest, {}, {}}};
    }
  } else if (const auto* s = std::get_if<Memset>(&e.payload)) {
    v.memset = s;
    v.outputs = {{s->dst, s->digest, {}, {}}};
  } else if (const auto* g = std::get_if<GraphLaunch>(&e.payload)) {
    v.inputs = g->inputs;
    v.outputs = g->outputs;
  } else if (const auto* c = std::get_if<Collective>(&e.payload)) {
    v.collective = c;
    v.inputs = c->inputs;
    v.outputs = c->outputs;
  }
  return v;
}

std::string opName(const Event& e) {
  if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) return k->function;
  if (const auto* m = std::get_if<Memcpy>(&e.payload)) {
    switch (m->kind) {
      case MemcpyKind::kHostToDevice: return "memcpy HtoD";
      case MemcpyKind::kDeviceToHost: return "memcpy DtoH";
      case MemcpyKind::kDeviceToDevice: return "memcpy DtoD";
      case MemcpyKind::kHostToHost: return "memcpy HtoH";
      case MemcpyKind::kPeer: return "memcpy peer";
      case MemcpyKind::kUnknown: return "memcpy";
    }
  }
  if (std::holds_alternative<Memset>(e.payload)) return "memset";
  if (const auto* g = std::get_if<GraphLaunch>(&e.payload)) {
    return describe(*g);
  }
  if (const auto* c = std::get_if<Collective>(&e.payload)) return describe(*c);
  return trace::kindName(e.payload);
}

namespace {

uint64_t streamOf(const Event& e) {
  if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) return k->stream;
  if (const auto* m = std::get_if<Memcpy>(&e.payload)) return m->stream;
  if (const auto* s = std::get_if<Memset>(&e.payload)) return s->stream;
  if (const auto* g = std::get_if<GraphLaunch>(&e.payload)) return g->stream;
  if (const auto* c = std::get_if<Collective>(&e.payload)) return c->stream;
  return 0;
}

}  // namespace

OpInfo info(const Run& run, uint64_t index, const Event& e) {
  const Op& op = run.ops[index];
  OpInfo out;
  out.seq = op.seq();
  out.index = index;
  // The recorder's number: as the trace gives it, else counted as the
  // recorder counts, over launches before it in trace order, those set aside
  // included (the canonical order may have moved it among others). Counted,
  // it can be off where launches of several threads overlapped or one failed.
  const auto before = [&](const std::vector<uint64_t>& seqs) {
    return static_cast<uint64_t>(std::lower_bound(seqs.begin(), seqs.end(), op.seq()) - seqs.begin());
  };
  const auto* launch = std::get_if<KernelLaunch>(&e.payload);
  out.launchIndex = launch && launch->number != kNoLaunchNumber
                        ? launch->number  // the recorder wrote it (compatVersion 13)
                        : run.droppedLaunches + before(run.benchmarkingLaunches) +
                              (index < run.reorderedFrom ? run.ops.launchesBefore(index)
                                                         : run.ops.launchesBefore(run.reorderedFrom) +
                                                               before(run.reorderedLaunchSeqs));
  out.kind = op.kind();
  out.name = opName(e);
  out.stream = knownStreamOrdinal(run, streamOf(e));
  out.thread = e.thread;
  out.origin = e.origin;
  if (const auto* k = std::get_if<KernelLaunch>(&e.payload)) {
    out.grid = k->grid;
    out.block = k->block;
    out.annotations = k->annotations;
  }
  return out;
}

OpInfo info(const Run& run, uint64_t index) {
  return info(run, index, eventAt(*run.reader, run.ops[index].seq()));
}

// The index in the layout of the parameter holding byte `offset`; -1 when
// there is none.
int32_t parameterAt(const KernelLaunch& k, uint64_t offset) {
  for (size_t i = 0; i < k.paramLayout.size(); ++i) {
    if (offset >= k.paramLayout[i].offset && offset < uint64_t{k.paramLayout[i].offset} + k.paramLayout[i].size)
      return static_cast<int32_t>(i);
  }
  return -1;
}

std::string rangeText(const DeviceRange& r) {
  if (r.allocation == 0) return fmt::format("{:#x}", r.address);
  return fmt::format("alloc#{}+{:#x}", r.allocation, r.offset);
}

}  // namespace gpurr::diff
