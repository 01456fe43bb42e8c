// First-use inputs and write histories (first_use.h).
#include "diff/first_use.h"

#include <fmt/format.h>

#include <algorithm>

#include "diff/compare.h"

namespace gpurr::diff {
using namespace gpurr::trace;

void WritesBefore::scan() {
  IntervalLabels& out = labels_.emplace();
  if (ordinals_.empty()) return;
  auto want = [&](uint32_t o) { return std::binary_search(ordinals_.begin(), ordinals_.end(), o); };
  scanEvents(*run_.reader, [&](const ScanEvent& e) {
    if (e.seq >= seq_) return false;
    if (e.kind == EventKind::kAllocation) {
      if (want(e.ordinal)) {  // a new allocation starts unwritten
        out.assign(e.ordinal, 0, UINT64_MAX, -1);
        received_.assign(e.ordinal, 0, UINT64_MAX, -1);
      }
      return true;
    }
    if (!isOperation(e) || (e.kind == EventKind::kMemcpy && e.memcpyKind == MemcpyKind::kDeviceToHost)) return true;
    if (e.kind == EventKind::kLaunch && !e.hashed) {
      for (const PointerParam& p : e.pointers) {
        if (!want(p.allocation)) continue;
        out.assign(p.allocation, p.offset, UINT64_MAX, 0);
        received_.assign(p.allocation, p.offset, UINT64_MAX, -1);
      }
    } else if (e.kind == EventKind::kGraphLaunch && e.outputs.empty()) {
      for (uint32_t o : ordinals_) {
        out.assign(o, 0, UINT64_MAX, 0);
        received_.assign(o, 0, UINT64_MAX, -1);
      }
    } else {
      for (const ScanRange& r : e.outputs) {
        if (r.range.allocation != 0 && want(r.range.allocation)) {
          const uint64_t end = r.range.offset + r.range.size;
          out.assign(r.range.allocation, r.range.offset, end, r.digest != 0);
          const bool received = e.kind == EventKind::kCollective && r.digest == 0;
          received_.assign(r.range.allocation, r.range.offset, end,
                           received ? static_cast<IntervalLabels::Label>(e.seq) : -1);
        }
      }
    }
    return true;
  }, 0, run_.decoders);
}

// Counts the bytes of each difference's spans that no recorded operation of
// its run wrote before the divergence.
void checkWritten(WritesBefore& history, std::vector<RangeDifference>& diffs, bool sideA) {
  for (RangeDifference& d : diffs) {
    const DeviceRange& r = sideA ? d.a : d.b;
    if (r.allocation == 0) continue;
    uint64_t unwritten = 0;
    for (const auto& [begin, end] : d.spans) {
      const uint64_t b = r.offset + begin, e = r.offset + end;
      unwritten += (e - b) - history.written(r.allocation, b, e);
    }
    (sideA ? d.unwrittenA : d.unwrittenB) = unwritten;
    d.writtenChecked = true;
  }
}

// Whether either run hashed a launch's ranges before it ran only where their
// bytes had not been touched by a recorded operation (FORMAT.md, hashInputs).
bool firstUseInputs(const Context& ctx) {
  return !ctx.a.reader->header().options.hashInputs || !ctx.b.reader->header().options.hashInputs;
}

namespace {

// The last first-use hash of `range` by a launch of `run` that only read it,
// before `seq` (Run::firstReads).
const Run::FirstRead* lastFirstRead(const Run& run, uint64_t seq, const DeviceRange& range) {
  const Run::FirstRead* last = nullptr;
  for (const Run::FirstRead& f : run.firstReads) {
    if (f.seq >= seq) break;
    if (sameExtent(f.range, range)) last = &f;
  }
  return last;
}

// A launch's ranges its run did not hash before it: vouched for by the
// run's write history, if anything.
std::vector<DeviceRange> unhashedRanges(const OpView& v) {
  std::vector<DeviceRange> out;
  auto hashed = [&](const DeviceRange& r) {
    return std::any_of(v.inputs.begin(), v.inputs.end(),
                       [&](const RangeDigest& in) { return sameExtent(in.range, r); });
  };
  for (const RangeDigest& o : v.outputs) {
    if (!hashed(o.range)) out.push_back(o.range);
  }
  if (v.launch) {
    for (const RangeDigest& r : v.launch->reads) {
      if (!hashed(r.range)) out.push_back(r.range);
    }
  }
  return out;
}

}  // namespace

// A launch of first-use traces: the inputs both runs hashed are compared, by
// range; every other range the launch touches (its outputs and reads) held
// bytes that earlier recorded operations last touched, and all of those gave
// identical outputs, since this is the first divergence: the write history
// vouches for them. Except:
// - a range one first-use run hashed and the other did not: their histories
//   disagree (a hash dropped, bytes another stream wrote first in one run);
// - a range an earlier launch that only read it hashed at its first use with
//   different bytes in the two runs.
// Those are not compared, and nothing vouches for them.
void compareFirstUseInputs(const Context& ctx, const OpView& va, const OpView& vb, WritesBefore& historyA,
                           WritesBefore& historyB, FirstDivergence& d) {
  std::vector<RangeDigest> a, b;
  std::vector<size_t> index;
  std::vector<bool> matchedB(vb.inputs.size(), false);
  for (size_t i = 0; i < va.inputs.size(); ++i) {
    for (size_t j = 0; j < vb.inputs.size(); ++j) {
      if (matchedB[j] || !sameRange(ctx, va.inputs[i].range, vb.inputs[j].range)) continue;
      matchedB[j] = true;
      a.push_back(va.inputs[i]);
      b.push_back(vb.inputs[j]);
      index.push_back(i);
      d.inputBytes += vb.inputs[j].range.size;
      break;
    }
  }
  d.inputCount = a.size();
  d.inputsIdentical = compareRanges(ctx, a, b, d.inputs);
  for (RangeDifference& r : d.inputs) r.index = index[r.index];

  // A run that hashes every range (hashInputs) has no history to disagree
  // with. A range the recorder hashed through a stale word of that run's
  // weighs nothing (docs/DIFF.md, "What a range of one run alone weighs").
  const bool firstUseA = !ctx.a.reader->header().options.hashInputs;
  const bool firstUseB = !ctx.b.reader->header().options.hashInputs;
  std::vector<uint32_t> staleA, staleB;
  if (va.launch && vb.launch) {
    staleA = staleWordAllocations(*va.launch, *vb.launch);
    staleB = staleWordAllocations(*vb.launch, *va.launch);
  }
  auto counts = [](const RangeDigest& r, const std::vector<uint32_t>& stale) {
    return r.range.allocation == 0 || !std::ranges::binary_search(stale, r.range.allocation);
  };
  size_t oneSided = 0;
  for (size_t i = 0, j = 0; firstUseA && i < va.inputs.size(); ++i) {
    if (j < index.size() && index[j] == i) {
      ++j;
    } else if (counts(va.inputs[i], staleA)) {
      ++oneSided;
    }
  }
  for (size_t j = 0; firstUseB && j < vb.inputs.size(); ++j) {
    if (!matchedB[j] && counts(vb.inputs[j], staleB)) ++oneSided;
  }
  if (oneSided > 0) {
    d.evidence.push_back({EvidenceKind::kOneSidedHashes, {oneSided}});
  }
  // A range the history vouches for in both runs, but which an earlier
  // launch that only read it hashed at its first use with different bytes
  // (the runs' memory differed there, nothing had written it, though that
  // launch's outputs did not show it), or whose last write before the launch
  // left no digest in either run (a hash that failed on the GPU, a graph
  // launch not hashed): nothing vouches for it. Where a collective that
  // received asynchronously wrote it last in both runs, it is data from the
  // other ranks that no digest showed before.
  size_t readApart = 0, undigested = 0, received = 0;
  std::pair<uint64_t, uint64_t> receivedBy;  // the first such range's collective, in each run
  if (firstUseA && firstUseB) {
    const std::vector<DeviceRange> trustedA = unhashedRanges(va), trustedB = unhashedRanges(vb);
    for (size_t i = 0; i < trustedA.size(); ++i) {
      const DeviceRange& ra = trustedA[i];
      const auto rb = std::find_if(trustedB.begin(), trustedB.end(),
                                   [&](const DeviceRange& r) { return sameRange(ctx, ra, r); });
      if (rb == trustedB.end()) continue;
      const Run::FirstRead* fa = lastFirstRead(ctx.a, d.a.seq, ra);
      const Run::FirstRead* fb = lastFirstRead(ctx.b, d.b.seq, *rb);
      if (fa != nullptr && fb != nullptr && fa->digest != fb->digest) {
        ++readApart;
        d.evidence.push_back({EvidenceKind::kReadApart, {fa->seq, fb->seq, ra.allocation, ra.address, ra.offset}});
      } else if (historyA.undigested(ra) || historyB.undigested(*rb)) {
        const std::optional<uint64_t> byA = historyA.receivedBy(ra), byB = historyB.receivedBy(*rb);
        if (byA && byB) {
          if (received++ == 0) receivedBy = {*byA, *byB};
        } else {
          ++undigested;
        }
      }
    }
    if (undigested > 0) {
      d.evidence.push_back({EvidenceKind::kUndigestedWrites, {undigested}});
    }
    if (received > 0) {
      const Event e = eventAt(*ctx.a.reader, receivedBy.first);
      const auto* c = std::get_if<Collective>(&e.payload);
      d.evidence.push_back({EvidenceKind::kReceivedAsynchronously,
                            {received, receivedBy.first, receivedBy.second},
                            {c != nullptr ? describe(*c) : std::string("a collective")}});
    }
  }
  d.inputsReceived = received;
  d.inputsUncompared = oneSided + readApart + undigested + received;
  const size_t touched = va.outputs.size() + va.reads;
  d.inputsVouched = touched > a.size() + d.inputsUncompared ? touched - a.size() - d.inputsUncompared : 0;
}

}  // namespace gpurr::diff
