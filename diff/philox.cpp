// RNG states of a launch (philox.h): the windows of parameter bytes they
// cover, and PyTorch's Philox state found inside structs by its seed.
#include "diff/philox.h"

#include <fmt/format.h>

#include <cstring>

#include "diff/decode.h"

namespace gpurr::diff {
using namespace gpurr::trace;

std::vector<const RngState*> rngStates(const KernelLaunch& k) {
  std::vector<const RngState*> out;
  for (const Annotation& a : k.annotations) {
    if (const auto* r = std::get_if<RngState>(&a)) out.push_back(r);
  }
  return out;
}

namespace {

// The parameter bytes an RngState annotation covers: its parameter in the
// layout when that is a PhiloxCudaState (24 or 32 bytes), else the 16 bytes
// of its (seed, offset) pair, inside a struct or without a layout; all of
// them for a cuRAND call.
std::pair<uint32_t, uint32_t> rngWindow(const KernelLaunch& k, const RngState& r) {
  // cuRAND does not publish where its kernels take the generator's state:
  // any parameter of a launch a curandGenerate* call made may hold it.
  if (r.source == "curand") return {0, static_cast<uint32_t>(k.params.size())};
  for (const ParamInfo& p : k.paramLayout) {
    if (r.paramOffset >= p.offset && r.paramOffset < p.offset + p.size && p.size <= 32) {
      return {p.offset, p.offset + p.size};
    }
  }
  return {r.paramOffset, r.paramOffset + 16};
}

}  // namespace

// An RNG state of the launch whose bytes (rngWindow) overlap [begin, end);
// nullptr when none does.
const RngState* rngStateIn(const KernelLaunch& k, uint64_t begin, uint64_t end) {
  for (const RngState* r : rngStates(k)) {
    const auto [from, to] = rngWindow(k, *r);
    if (begin < to && end > from) return r;
  }
  return nullptr;
}

namespace {

// PyTorch's Philox state inside a struct passed by value (the parameters of
// memory-efficient and flash attention, the functors of bernoulli with a
// tensor p, gamma and poisson): the recorder decodes the state only where
// the kernel takes it as a parameter of its own (recorder/rng_params.h).
// Inside a struct it is found by its seed, which the run's own Philox
// launches show: at::PhiloxCudaState outside a graph capture is the seed,
// the offset (a multiple of 4), then an intragraph offset of 0 and
// captured_ false, whose first five bytes are zero in either layout (before
// and since PyTorch 2.10).

// The seeds of `run`'s Philox launches (RngState annotations decoded from a
// parameter of their own, not captured into a graph) in the blocks nearest
// to event `seq`: the last at or before its block and the first after it. A
// seed the program set in between and used only inside structs is missed.
std::vector<uint64_t> philoxSeedsNear(const Run& run, uint64_t seq) {
  std::vector<uint64_t> seeds;
  const std::vector<size_t>& blocks = run.philoxBlocks;
  const auto after = std::upper_bound(blocks.begin(), blocks.end(), run.reader->blockOf(seq));
  std::vector<Event> events;
  for (auto it = after == blocks.begin() ? after : std::prev(after); it != blocks.end() && it <= after; ++it) {
    try {
      run.reader->readBlock(*it, events);
    } catch (const TraceError&) {
      continue;  // the summary read it: only fewer seeds, never a failed diff
    }
    for (const Event& e : events) {
      const auto* k = std::get_if<KernelLaunch>(&e.payload);
      if (k == nullptr) continue;
      for (const RngState* r : rngStates(*k)) {
        if (r->source == "philox" && !r->generator.starts_with("captured") &&
            std::ranges::find(seeds, r->seed) == seeds.end())
          seeds.push_back(r->seed);
      }
    }
  }
  return seeds;
}

}  // namespace

// Adds to two corresponding launches whose parameters differ the Philox
// states inside their structs, as RngState annotations at the bytes they
// lie in: an aligned word, within one parameter and in no state already
// decoded, that holds one of its run's seeds on each side, followed by an
// offset and the five zero bytes (above), where the seed or the offset
// differs. An equal seed counts only from 2^32 up: a small one
// (torch.manual_seed(0)) is a common value of any field. PyTorch draws an
// unset seed at random, 53 bits wide.
void addPhiloxInsideStructs(const Context& ctx, Event& ea, Event& eb) {
  auto* ka = std::get_if<KernelLaunch>(&ea.payload);
  auto* kb = std::get_if<KernelLaunch>(&eb.payload);
  if (ka == nullptr || kb == nullptr || ka->params.size() != kb->params.size() || ka->params == kb->params) return;
  auto word = [](const KernelLaunch& k, size_t at) {
    uint64_t u;
    std::memcpy(&u, k.params.data() + at, 8);
    return u;
  };
  auto stateAt = [&](const KernelLaunch& k, size_t at) {
    return word(k, at + 8) % 4 == 0 && (word(k, at + 16) & 0xff'ffff'ffffULL) == 0;
  };
  auto decoded = [&](const KernelLaunch& k, size_t at) { return rngStateIn(k, at, at + 21) != nullptr; };
  auto withinOneParameter = [&](size_t at) {
    return ka->paramLayout.empty() || (parameterAt(*ka, at) >= 0 && parameterAt(*ka, at) == parameterAt(*ka, at + 20));
  };
  std::optional<std::vector<uint64_t>> seedsA, seedsB;  // read at the first need
  std::vector<std::pair<uint32_t, int32_t>> found;       // byte, parameter
  for (size_t at = 0; at + 24 <= ka->params.size(); at += 8) {
    const uint64_t seedA = word(*ka, at), seedB = word(*kb, at);
    if ((seedA == seedB && (seedA < (uint64_t{1} << 32) || word(*ka, at + 8) == word(*kb, at + 8))) ||
        !stateAt(*ka, at) || !stateAt(*kb, at) || !withinOneParameter(at) || decoded(*ka, at) || decoded(*kb, at))
      continue;
    if (!seedsA) {
      seedsA = philoxSeedsNear(ctx.a, ea.seq);
      seedsB = philoxSeedsNear(ctx.b, eb.seq);
    }
    if (std::ranges::find(*seedsA, seedA) == seedsA->end() || std::ranges::find(*seedsB, seedB) == seedsB->end())
      continue;
    found.emplace_back(static_cast<uint32_t>(at), parameterAt(*ka, at));
    at += 16;  // the state's offset and intragraph words
  }
  for (const auto& [at, param] : found) {
    for (KernelLaunch* k : {ka, kb}) {
      RngState r;
      r.source = "philox";
      r.generator = fmt::format("(inside {}, bytes {:#x}-{:#x}: found by the seed of the run's Philox launches)",
                                param >= 0 ? fmt::format("parameter {}", param) : "the parameters", at, at + 16);
      r.seed = word(*k, at);
      r.offset = word(*k, at + 8);
      r.paramOffset = at;
      k->annotations.emplace_back(std::in_place_type<RngState>, std::move(r));
    }
  }
}

}  // namespace gpurr::diff
