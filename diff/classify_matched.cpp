// Stage 5, classification at a matched pair (classify_matched.h), and the
// proof of a nondeterministic kernel by re-execution (diff.h).
#include "diff/classify_matched.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string_view>

#include "diff/compare.h"
#include "diff/decode.h"
#include "diff/first_use.h"
#include "diff/philox.h"
#include "diff/swaps.h"

namespace gpurr::diff {
using namespace gpurr::trace;

namespace {


template <typename T>
std::optional<T> annotation(const std::vector<Annotation>& annotations) {
  for (const Annotation& a : annotations) {
    if (const auto* t = std::get_if<T>(&a)) return *t;
  }
  return std::nullopt;
}

// Where a pointer parameter points in each run, and how the two relate.
Evidence pointerEvidence(const Context& ctx, const KernelLaunch& ka, const KernelLaunch& kb, const ParamDifference& p) {
  auto find = [&](const KernelLaunch& k) -> const PointerParam* {
    for (const PointerParam& q : k.pointers) {
      if (q.byteOffset == p.offset) return &q;
    }
    return nullptr;
  };
  const PointerParam* pa = find(ka);
  const PointerParam* pb = find(kb);
  Evidence e{EvidenceKind::kPointer, {static_cast<uint64_t>(p.param + 1), p.offset, p.size}};
  // Kind, offset, allocation and its size, when the run allocated it.
  auto side = [&](const Run& run, const PointerParam* q) {
    if (!q) return e.numbers.insert(e.numbers.end(), {0, 0, 0, 0});
    if (q->allocation == 0) return e.numbers.insert(e.numbers.end(), {1, q->offset, 0, 0});
    for (const AllocInfo& a : run.allocs) {
      if (a.ordinal == q->allocation) return e.numbers.insert(e.numbers.end(), {3, q->offset, q->allocation, a.size});
    }
    return e.numbers.insert(e.numbers.end(), {2, q->offset, q->allocation, 0});
  };
  side(ctx.a, pa);
  side(ctx.b, pb);
  auto relation = [&](PointerRelation r, uint64_t v1, uint64_t v2) {
    e.numbers.insert(e.numbers.end(), {static_cast<uint64_t>(r), v1, v2});
  };
  if (pa && pb && pa->allocation != 0 && pb->allocation != 0) {
    const uint32_t oa = ctx.a.ordinals(pa->allocation), ob = ctx.b.ordinals(pb->allocation);
    if (oa == ob) {
      const uint64_t delta = pa->offset > pb->offset ? pa->offset - pb->offset : pb->offset - pa->offset;
      relation(pb->offset > pa->offset ? PointerRelation::kFurther : PointerRelation::kEarlier, delta, 0);
    } else if ((ob & OrdinalMap::kUnmatched) != 0) {
      relation(PointerRelation::kUnmatched, pb->allocation, 0);
    } else {
      relation(PointerRelation::kCorresponds, pb->allocation, ob);
    }
  } else if (pa && pb) {
    relation(PointerRelation::kOutside, 0, 0);
  } else {
    relation(PointerRelation::kOneRunOnly, pa ? 0 : 1, 0);
  }
  return e;
}

// A parameter that differs besides what decided the cause.
Evidence alsoParameter(const ParamDifference& q) {
  return {EvidenceKind::kAlsoParameter,
          {static_cast<uint64_t>(q.param + 1), q.offset, q.size, static_cast<uint64_t>(q.meaning)},
          {q.rngSource, q.a, q.b}};
}

// Same kernel and launch configuration; a pointer parameter points elsewhere.
// Filed under scalar parameters (docs/DIFF.md), with evidence of its own.
void classifyPointers(const Context& ctx, const KernelLaunch& ka, const KernelLaunch& kb,
                      FirstDivergence& d) {
  d.cause = Cause::kScalarParameters;
  d.mechanism = d.cause;
  std::vector<const ParamDifference*> pointers, scalars;
  for (const ParamDifference& p : d.params) (isPointerParameter(p) ? pointers : scalars).push_back(&p);
  const ParamDifference& first = *pointers.front();
  d.summary = fmt::format(
      "scalar parameters: same kernel and launch configuration; {}",
      pointers.size() == 1
          ? fmt::format("{} points elsewhere",
                        first.param >= 0 ? fmt::format("pointer parameter {}", first.param)
                                         : fmt::format("the pointer at bytes {:#x}", first.offset))
          : fmt::format("{} point elsewhere", plural(pointers.size(), "pointer parameter")));
  for (const ParamDifference* p : pointers) d.evidence.push_back(pointerEvidence(ctx, ka, kb, *p));
  for (const ParamDifference* q : scalars) d.evidence.push_back(alsoParameter(*q));
  if (!d.inputsIdentical) {
    d.evidence.push_back({EvidenceKind::kInputsDifferWithPointers});
  }
  d.evidence.push_back({EvidenceKind::kAnotherAddress});
}

// Two operations swapped (swaps.h): cause reordered, each run's operation
// found where the other run issued it.
void classifySwap(uint64_t ia, uint64_t ib, const Swap& swap, FirstDivergence& d) {
  d.cause = Cause::kReordered;
  d.mechanism = d.cause;
  d.swap = swap;
  d.evidence.clear();  // what the comparison of two different operations' inputs found
  const auto distance = [](uint64_t from, uint64_t to) { return to > from ? to - from : from - to; };
  d.summary = fmt::format("reordered: {} (the same operations, in another order)", swapText(ib, swap));
  d.evidence.push_back({EvidenceKind::kSwapped,
                        {swap.bSeq, distance(ib, swap.bIndex), swap.bIndex > ib, swap.aSeq, distance(ia, swap.aIndex),
                         swap.aIndex > ia}});
  d.evidence.push_back({EvidenceKind::kVisitedInAnotherOrder});
}

// ATen's in-place random fills: their output comes from the random
// generator's state (a seed and an offset), and they read none of what they
// overwrite.
const std::set<std::string_view> kRandomFills = {
    "aten::normal_", "aten::uniform_", "aten::random_",   "aten::bernoulli_",
    "aten::exponential_", "aten::geometric_", "aten::cauchy_", "aten::log_normal_"};

// ATen ops that overwrite all of what they write, reading none of it:
// fills, copies and random fills.
bool overwritesAll(const std::optional<Origin>& origin) {
  static const std::set<std::string_view> ops = {"aten::fill_", "aten::zero_", "aten::copy_"};
  return origin && (ops.contains(origin->op) || kRandomFills.contains(origin->op));
}

// The PyTorch op of a launch reads the old contents of what it writes: it
// updates an argument in place (Origin.inPlace, from its schema: aten::add_'s
// `Tensor(a!) self`, batch norm's running statistics; in older traces, an
// ATen name that ends in '_': aten::addcmul_, aten::masked_fill_), except
// the ops that overwrite all of it (overwritesAll()).
// Partial writers count too: what they leave passes to the output.
bool inPlaceOp(const std::optional<Origin>& origin) {
  if (!origin || origin->inPlace == InPlace::kNo || overwritesAll(origin)) return false;
  if (origin->inPlace == InPlace::kYes) return true;
  const std::string& op = origin->op;
  return op.starts_with("aten::") && op.ends_with("_") && !op.ends_with("__");
}

// Whether every input that differs is an output buffer's old contents: in a
// range the launch also writes (hashed before the launch at its first use,
// FORMAT.md hashInputs, though the kernel may overwrite it unread), its
// differing spans hold bytes no recorded operation wrote, in both runs,
// while the parameters or the RNG state differ and explain the outputs, or
// the op reads none of what it writes (overwritesAll()), or its output
// comes from the random generator (randomGenerator(): randperm's new tensor).
// The spans are whole chunks when only digests were recorded, so they may
// also hold written bytes; those were written by earlier operations whose
// outputs were identical, so the difference lies in the unwritten ones.
// Then the classification goes on with the parameters, and the evidence
// says why. Not for an in-place op, which reads what it writes (inPlaceOp).
bool oldOutputContents(const OpView& va, const OpView& vb, const std::optional<Origin>& origin,
                       FirstDivergence& d) {
  if (!va.launch || !vb.launch || inPlaceOp(origin)) return false;
  const auto rngA = rngStates(*va.launch), rngB = rngStates(*vb.launch);
  bool rngDiffers = rngA.size() != rngB.size();
  for (size_t i = 0; !rngDiffers && i < rngA.size(); ++i) {
    rngDiffers = rngA[i]->seed != rngB[i]->seed || rngA[i]->offset != rngB[i]->offset;
  }
  if (d.params.empty() && !rngDiffers && !overwritesAll(origin) && !randomGenerator(origin)) return false;
  std::vector<uint64_t> which;
  for (const RangeDifference& r : d.inputs) {
    const bool written = std::any_of(va.outputs.begin(), va.outputs.end(), [&](const RangeDigest& o) {
      return o.range.allocation == r.a.allocation && o.range.offset == r.a.offset &&
             o.range.size == r.a.size;
    });
    if (!written || !r.writtenChecked || r.boundsDiffer || r.unwrittenA == 0 || r.unwrittenB == 0) return false;
    which.push_back(r.index);
  }
  d.evidence.push_back({EvidenceKind::kOldOutputContents, std::move(which)});
  return true;
}

// Same kernel name and inputs, other code: the launches' images have other
// digests (FORMAT.md, `module`): a JIT compiler's or an autotuner's other
// binary under one name (Triton compiles a configuration's block sizes into
// the code, so two of them can share a grid and block), or another library
// build. The code decides the outputs, whatever else differs: the other
// parameters (a binary with another signature) are evidence. False where
// either run's module or its digest is unknown, or the digests agree.
bool otherBinary(const Context& ctx, const KernelLaunch& ka, const KernelLaunch& kb, FirstDivergence& d) {
  auto digestOf = [](const Run& run, uint32_t module) -> uint64_t {
    auto it = run.moduleDigests.find(module);
    return it == run.moduleDigests.end() ? 0 : it->second;
  };
  const uint64_t da = digestOf(ctx.a, ka.module), db = digestOf(ctx.b, kb.module);
  if (da == 0 || db == 0 || da == db) return false;
  d.cause = Cause::kAlgorithmChoice;
  d.mechanism = d.cause;
  d.summary = "algorithm choice: same kernel name and inputs, other code: each run launched another binary of it";
  d.evidence.push_back({EvidenceKind::kOtherBinary, {ka.module, da, kb.module, db}});
  for (const ParamDifference& q : d.params) {
    if (!weighsNothing(q)) d.evidence.push_back(alsoParameter(q));
  }
  return true;
}

void classify(const Context& ctx, uint64_t ia, uint64_t ib, FirstDivergence& d) {
  Event ea = eventAt(*ctx.a.reader, ctx.a.ops[ia].seq());
  Event eb = eventAt(*ctx.b.reader, ctx.b.ops[ib].seq());
  addPhiloxInsideStructs(ctx, ea, eb);
  d.a = info(ctx.a, ia, ea);
  d.b = info(ctx.b, ib, eb);
  const OpView va = view(ea), vb = view(eb);
  WritesBefore historyA(ctx.a, d.a.seq, va), historyB(ctx.b, d.b.seq, vb);
  d.outputCount = va.outputs.size();
  if ((va.launch || std::holds_alternative<GraphLaunch>(ea.payload)) && firstUseInputs(ctx)) {
    compareFirstUseInputs(ctx, va, vb, historyA, historyB, d);
  } else {
    d.inputCount = va.inputs.size();
    for (const RangeDigest& r : va.inputs) d.inputBytes += r.range.size;
    d.inputsIdentical = compareRanges(ctx, va.inputs, vb.inputs, d.inputs);
  }
  compareRanges(ctx, va.outputs, vb.outputs, d.outputs);
  // Stale words, and the ranges hashed through them in one run alone, weigh
  // nothing: the rest of the evidence decides (docs/DIFF.md, "What a range
  // of one run alone weighs").
  Evidence stale{EvidenceKind::kStaleWords, {0, 0, 0}};
  if (va.launch && vb.launch) {
    const std::vector<uint32_t> staleA = staleWordAllocations(*va.launch, *vb.launch);
    const std::vector<uint32_t> staleB = staleWordAllocations(*vb.launch, *va.launch);
    auto through = [&](const RangeDifference& r) { return throughStaleWord(r, staleA, staleB); };
    stale.numbers[1] = std::erase_if(d.inputs, through) + std::erase_if(d.outputs, through);
    if (d.inputs.empty()) d.inputsIdentical = true;
    d.params = compareParams(ctx, *va.launch, *vb.launch);
    d.paramsIdentical = d.params.empty();
    for (const ParamDifference& p : d.params) {
      if (!isStaleWord(p)) continue;
      ++stale.numbers[0];
      // 0 in the other run: it may be an optional pointer the kernel reads.
      if (wordAt(*va.launch, p.offset) == 0 || wordAt(*vb.launch, p.offset) == 0) stale.numbers[2] = 1;
    }
    d.determinismA = annotation<DeterminismCheck>(va.launch->annotations);
    d.determinismB = annotation<DeterminismCheck>(vb.launch->annotations);
  } else if (va.memset && vb.memset) {
    if (va.memset->value != vb.memset->value || va.memset->elementSize != vb.memset->elementSize) {
      d.paramsIdentical = false;
      d.params.push_back({0, va.memset->elementSize, -1, fmt::format("{:#x}", va.memset->value),
                          fmt::format("{:#x}", vb.memset->value), ParamMeaning::kMemsetValue});
    }
  }

  // Each run's operation issued by the other nearby: the same operations in
  // another order, paired by their place.
  if (va.launch && vb.launch && !std::ranges::all_of(d.params, weighsNothing)) {
    if (const std::optional<Swap> swap = swapAt(ctx, ia, ib, ea, eb)) {
      classifySwap(ia, ib, *swap, d);
      return;
    }
  }

  // A pointer parameter that points elsewhere (a pair matchSameShape made).
  if (va.launch && vb.launch && std::any_of(d.params.begin(), d.params.end(), isPointerParameter)) {
    classifyPointers(ctx, *va.launch, *vb.launch, d);
    return;
  }

  // Host input: a host-to-device copy wrote different bytes.
  if (va.memcpy && va.memcpy->kind == MemcpyKind::kHostToDevice) {
    d.cause = Cause::kHostInput;
    d.summary = "host input: the bytes copied host-to-device differ";
    const DeviceRange& dst = va.memcpy->dst;
    d.evidence.push_back({EvidenceKind::kHostCopy,
                          {va.memcpy->size, va.memcpy->digest, vb.memcpy->digest, dst.allocation, dst.address,
                           dst.offset},
                          {opName(ea)}});
    if (va.memcpy->data && vb.memcpy->data) {
      try {
        const auto ba = ctx.a.reader->readBlob(*va.memcpy->data);
        const auto bb = ctx.b.reader->readBlob(*vb.memcpy->data);
        uint64_t differing = 0, first = UINT64_MAX;
        for (size_t i = 0; i < std::min(ba.size(), bb.size()); ++i) {
          if (ba[i] != bb[i]) {
            ++differing;
            first = std::min<uint64_t>(first, i);
          }
        }
        d.evidence.push_back({EvidenceKind::kCapturedHostData, {differing, ba.size(), first == UINT64_MAX ? 0 : first}});
      } catch (const TraceError& e) {
        d.evidence.push_back({EvidenceKind::kCapturedHostDataUnreadable, {}, {e.what()}});
      }
    } else {
      d.evidence.push_back({EvidenceKind::kCaptureHostDataHint});
    }
    d.evidence.push_back({EvidenceKind::kHostDataHint});
    d.mechanism = d.cause;
    return;
  }

  // A collective: what this rank sent (its inputs) and what it received.
  // Sent the same and received other data: the divergence came from
  // another rank (or from the reduction itself). Sent other data: it only
  // passed on this rank's earlier divergence.
  if (va.collective && vb.collective) {
    d.cause = Cause::kCollective;
    d.mechanism = d.cause;
    const auto unhashed = [](const RangeDigest& r) { return r.digest == 0; };
    const bool receivedUnhashedA = std::any_of(va.outputs.begin(), va.outputs.end(), unhashed);
    const bool receivedUnhashedB = std::any_of(vb.outputs.begin(), vb.outputs.end(), unhashed);
    const bool sendsNothing = va.inputs.empty() && vb.inputs.empty();
    d.summary = d.inputsIdentical && receivedUnhashedA != receivedUnhashedB
                    ? fmt::format("collective: this rank sent identical data; what it received has no digest in "
                                  "run {} (the call never returned there, or returned before it completed)",
                                  receivedUnhashedA ? 'A' : 'B')
                : d.inputsIdentical && sendsNothing
                    ? "collective: this rank sends nothing to this call (a broadcast's or a scatter's receiver) and "
                      "received different data: the rank that sent it diverged first"
                : d.inputsIdentical
                    ? "collective: this rank sent identical data and received different data: another rank "
                      "diverged first, or the collective's reduction is not deterministic"
                : va.outputs.empty()
                    ? "collective: this rank sent different data (it receives nothing from this call): it "
                      "passes on an earlier divergence of this rank's"
                : receivedUnhashedA
                    ? "collective: this rank sent different data (what it received has no digest: an "
                      "asynchronous call): it passes on an earlier divergence of this rank's"
                    : "collective: this rank sent different data, so it received different data: it passes on "
                      "an earlier divergence of this rank's";
    d.evidence.push_back({EvidenceKind::kCollectiveReceived, {d.inputsIdentical, ctx.options.partOfJob, sendsNothing},
                          {describe(*va.collective)}});
    return;
  }

  const bool hasStale = stale.numbers[0] > 0 || stale.numbers[1] > 0;
  if (!d.inputsIdentical) {
    checkWritten(historyA, d.inputs, true);
    checkWritten(historyB, d.inputs, false);
  }
  if (!d.inputsIdentical && !oldOutputContents(va, vb, ea.origin, d)) {
    const RangeDifference *unwritten = nullptr, *undigested = nullptr;
    size_t undigestedCount = 0;  // inputs that differ whose last writer left no digest in either run
    for (const RangeDifference& r : d.inputs) {
      if (!unwritten && r.writtenChecked && (r.unwrittenA > 0 || r.unwrittenB > 0)) unwritten = &r;
      if (historyA.undigested(r.a) || historyB.undigested(r.b)) {
        if (undigestedCount++ == 0) undigested = &r;
      }
    }
    if (undigested) {
      // Written last by operations whose outputs were not compared (--steps,
      // --kernels, --launches, a hash that failed): the runs may have
      // diverged there, or before, where nothing was compared.
      d.cause = Cause::kUnknown;
      d.summary = fmt::format("unknown: input {} ({}) differs, and an operation recorded without digests wrote it "
                              "last (not hashed: --steps, --kernels, --launches, a copy gpurr does not hash, or a "
                              "hash that failed): the runs may have diverged there or earlier, where outputs were not "
                              "compared",
                              undigested->index, rangeText(undigested->a));
      d.evidence.push_back({EvidenceKind::kUndigestedWrites, {undigestedCount}});
    } else if (unwritten) {
      d.cause = Cause::kUninitialisedMemory;
      d.summary = fmt::format("uninitialised memory: input {} ({}) differs in bytes that no "
                              "recorded operation wrote",
                              unwritten->index, rangeText(unwritten->a));
      d.evidence.push_back(
          {EvidenceKind::kUnwrittenInput, {unwritten->index, unwritten->unwrittenA, unwritten->unwrittenB}});
      d.evidence.push_back({EvidenceKind::kUninitialisedHint});
      if (inPlaceOp(ea.origin)) {
        d.evidence.push_back({EvidenceKind::kInPlace, {}, {ea.origin->op}});
      }
    } else {
      d.cause = Cause::kUnknown;
      d.summary = "unknown: an input differs although every recorded writer of its bytes "
                  "produced identical outputs";
      d.evidence.push_back({EvidenceKind::kUnrecordedWrite});
    }
    d.mechanism = d.cause;
    if (hasStale) d.evidence.push_back(stale);
    return;
  }

  // Same inputs. Parameters? (Host addresses and stale words do not count.)
  const size_t hostParams = std::ranges::count_if(d.params, isHostParameter);
  const size_t differing = d.params.size() - hostParams - stale.numbers[0];
  if (va.launch && vb.launch) {
    const auto rngA = rngStates(*va.launch), rngB = rngStates(*vb.launch);
    bool rngDiffers = rngA.size() != rngB.size();
    for (size_t i = 0; !rngDiffers && i < rngA.size(); ++i) {
      rngDiffers = rngA[i]->seed != rngB[i]->seed || rngA[i]->offset != rngB[i]->offset;
    }
    const bool allInRng =
        differing > 0 && std::ranges::all_of(d.params, [](const ParamDifference& p) {
          return weighsNothing(p) || isRngParameter(p);
        });
    if (allInRng || (differing == 0 && rngDiffers)) {
      d.cause = Cause::kRngState;
      d.mechanism = d.cause;
      d.summary = "RNG state: same kernel and inputs; only the random generator's seed/offset differs";
      for (size_t i = 0; i < std::max(rngA.size(), rngB.size()); ++i) {
        Evidence e{EvidenceKind::kRngStates};
        for (const std::vector<const RngState*>* v : {&rngA, &rngB}) {
          const bool has = i < v->size();
          e.numbers.insert(e.numbers.end(), {has, has ? (*v)[i]->seed : 0, has ? (*v)[i]->offset : 0});
          e.texts.push_back(has ? (*v)[i]->source : "");
          e.texts.push_back(has ? (*v)[i]->generator : "");
        }
        d.evidence.push_back(std::move(e));
      }
      if (rngA.empty() && rngB.empty()) {
        d.evidence.push_back({EvidenceKind::kRngInParameters});
      }
      const bool curand = std::any_of(rngA.begin(), rngA.end(),
                                      [](const RngState* r) { return r->source == "curand"; });
      d.evidence.push_back({EvidenceKind::kSeedHint, {curand}});
      if (hasStale) d.evidence.push_back(stale);
      return;
    }
    if (otherBinary(ctx, *va.launch, *vb.launch, d)) {
      if (hasStale) d.evidence.push_back(stale);
      return;
    }
    // A random generator whose state the trace does not hold (the kernel
    // reads it from device memory, as under CUDA graph capture).
    if (differing == 0 && rngA.empty() && rngB.empty() && randomGenerator(ea.origin) && d.inputsUncompared == 0) {
      d.cause = Cause::kRngState;
      d.mechanism = d.cause;
      d.summary = "RNG state: a random generator with the same inputs and parameters gave other outputs";
      d.evidence.push_back({EvidenceKind::kRngNotRecorded, {}, {ea.origin->op}});
      d.evidence.push_back({EvidenceKind::kSeedHint, {0}});
      if (hasStale) d.evidence.push_back(stale);
      return;
    }
  }
  if (differing > 0) {
    d.cause = Cause::kScalarParameters;
    d.mechanism = d.cause;
    const ParamDifference& p = *std::ranges::find_if_not(d.params, weighsNothing);
    d.summary = fmt::format("scalar parameters: same kernel and inputs; {} differ{}",
                            differing == 1 ? (p.param >= 0 ? fmt::format("parameter {}", p.param)
                                                           : fmt::format("parameter bytes {:#x}", p.offset))
                                           : plural(differing, "parameter"),
                            differing == 1 ? "s" : "");
    for (const ParamDifference& q : d.params) {
      d.evidence.push_back({EvidenceKind::kParameter,
                            {static_cast<uint64_t>(q.param + 1), q.offset, q.size, static_cast<uint64_t>(q.meaning)},
                            {q.rngSource, q.a, q.b, q.words}});
    }
    d.evidence.push_back({EvidenceKind::kHostComputedValue});
    return;
  }
  // Inputs a collective received asynchronously, and nothing else unknown:
  // data from the other ranks, which no digest showed before (DDP's gradient
  // buckets over gloo); this rank is a receiver, as at the collective.
  if (d.inputsUncompared > 0 && d.inputsUncompared == d.inputsReceived) {
    d.cause = Cause::kCollective;
    d.mechanism = d.cause;
    d.summary = "collective: what it reads arrived through a collective that received it asynchronously (no digest), "
                "to which this rank sent identical data: another rank diverged first, or the collective's reduction "
                "is not deterministic";
    const auto received = std::ranges::find(d.evidence, EvidenceKind::kReceivedAsynchronously, &Evidence::kind);
    d.evidence.push_back({EvidenceKind::kCollectiveReceived, {1, ctx.options.partOfJob}, {received->texts.at(0)}});
    return;
  }
  // Inputs nothing vouches for: no claim about the kernel can rest on them.
  if (d.inputsUncompared > 0) {
    d.cause = Cause::kUnknown;
    d.mechanism = d.cause;
    d.summary = fmt::format("unknown: same parameters, different outputs, and {} of the launch could not be "
                            "compared",
                            plural(d.inputsUncompared, "input"));
    d.evidence.push_back({EvidenceKind::kHashInputsHint});
    if (hasStale) d.evidence.push_back(stale);
    return;
  }
  d.cause = Cause::kNondeterministicKernel;
  d.mechanism = d.cause;
  d.summary = "nondeterministic kernel: same inputs and parameters, different outputs";
  const auto old = std::ranges::find(d.evidence, EvidenceKind::kOldOutputContents, &Evidence::kind);
  d.evidence.push_back({EvidenceKind::kSameInputs,
                        {d.inputsVouched, d.inputCount, hostParams, d.outputs.size(), d.outputCount,
                         stale.numbers[0], old == d.evidence.end() ? 0 : old->numbers.size()}});
  if (hostParams > 0) {
    d.evidence.push_back({EvidenceKind::kHostAddresses});
  }
  if (hasStale) d.evidence.push_back(stale);
  d.evidence.push_back({EvidenceKind::kIntrinsic});
}

}  // namespace

// ATen ops whose output comes from the random generator's state, not from
// what they read: the random fills and those that make new tensors.
bool randomGenerator(const std::optional<Origin>& origin) {
  static const std::set<std::string_view> ops = {
      "aten::bernoulli", "aten::native_dropout", "aten::randperm", "aten::multinomial", "aten::rand",
      "aten::randn",     "aten::randint",        "aten::normal",   "aten::poisson",     "aten::binomial",
      "aten::rrelu_with_noise"};
  return origin && (ops.contains(origin->op) || kRandomFills.contains(origin->op));
}

FirstDivergence classifyMatched(const Context& ctx, uint64_t ia, uint64_t ib) {
  FirstDivergence d;
  classify(ctx, ia, ib, d);
  return d;
}

bool provenNondeterministic(FirstDivergence& d, Evidence proof) {
  const bool byParams = d.cause == Cause::kScalarParameters && !d.params.empty() &&
                        std::none_of(d.params.begin(), d.params.end(), isPointerParameter);
  if (d.path || d.a.kind != OpKind::kLaunch || !(byParams || d.cause == Cause::kUnknown)) return false;
  std::vector<Evidence> evidence{std::move(proof)};
  if (byParams) {
    evidence.push_back({EvidenceKind::kParametersDifferToo});
    // The per-parameter lines; not the guess about host-computed values.
    for (const Evidence& e : d.evidence) {
      if (e.kind != EvidenceKind::kHostComputedValue) evidence.push_back(e);
    }
  } else {
    evidence.push_back({EvidenceKind::kBeforeReexecutions, {}, {d.summary}});
  }
  evidence.push_back({EvidenceKind::kIntrinsic});
  d.cause = Cause::kNondeterministicKernel;
  d.mechanism = d.cause;
  d.summary = "nondeterministic kernel: re-executed from the same recorded state, it gives different results";
  d.evidence = std::move(evidence);
  return true;
}

bool provenNondeterministic(FirstDivergence& d, const std::string& proof) {
  return provenNondeterministic(d, Evidence{EvidenceKind::kReexecuted, {}, {proof}});
}

}  // namespace gpurr::diff
