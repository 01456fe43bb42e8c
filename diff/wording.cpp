// The evidence's sentences (wording.h): every sentence a verdict's evidence
// prints is written here, from the values the diff found.
#include "diff/wording.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>

#include "common/text.h"
#include "diff/model.h"

namespace gpurr::diff {

std::string plural(uint64_t n, const char* word) {
  return fmt::format("{} {}{}", text::withCommas(n), word, n == 1 ? "" : "s");
}

namespace {

// A parameter index stored plus one: "parameter 3", or `none` without one.
std::string parameter(uint64_t stored, const char* prefix, const char* none) {
  return stored > 0 ? fmt::format("{} {}", prefix, stored - 1) : std::string(none);
}

// "alloc#3+0x40", or the address of a range outside every allocation.
std::string rangeText(uint64_t allocation, uint64_t address, uint64_t offset) {
  if (allocation == 0) return fmt::format("{:#x}", address);
  return fmt::format("alloc#{}+{:#x}", allocation, offset);
}

// One run's pointer of a kPointer: kind, offset, allocation, size.
std::string pointerSide(const uint64_t* v) {
  switch (v[0]) {
    case 0: return "not a pointer";
    case 1: return fmt::format("{:#x}, outside every known allocation", v[1]);
    case 2: return fmt::format("offset {:#x} of alloc#{}", v[1], v[2]);
    default: return fmt::format("offset {:#x} of alloc#{} ({} bytes)", v[1], v[2], v[3]);
  }
}

std::string pointerRelation(uint64_t relation, uint64_t v1, uint64_t v2) {
  switch (static_cast<PointerRelation>(relation)) {
    case PointerRelation::kFurther:
    case PointerRelation::kEarlier:
      return fmt::format("the same allocation, {} byte{} {} in run B", v1, v1 == 1 ? "" : "s",
                         static_cast<PointerRelation>(relation) == PointerRelation::kFurther ? "further" : "earlier");
    case PointerRelation::kUnmatched:
      return fmt::format("another allocation: run B's alloc#{} has no counterpart in run A", v1);
    case PointerRelation::kCorresponds:
      return fmt::format("another allocation: run B's alloc#{} corresponds to run A's alloc#{}", v1, v2);
    case PointerRelation::kOutside: return "one of them lies outside every known allocation";
    case PointerRelation::kOneRunOnly: return fmt::format("a pointer in run {} only", v1 == 0 ? 'A' : 'B');
  }
  return "";
}

// "host threads 1, 2"
std::string threads(const uint64_t* t, size_t n) {
  return fmt::format("host thread{} {}", n == 1 ? "" : "s", fmt::join(t, t + n, ", "));
}

// Where the operations kept lie relative to those reordered (`crossed`: a move).
std::string where(uint64_t count, uint64_t crossed) {
  return crossed != 0 ? fmt::format("{} crossed", count == 1 ? "it" : "they") : std::string("between them");
}

}  // namespace

std::string meaningText(ParamMeaning meaning, const std::string& rngSource) {
  switch (meaning) {
    case ParamMeaning::kNone: return "";
    case ParamMeaning::kPointer: return "pointer";
    case ParamMeaning::kStaleAddress: return "device address in one run only";
    case ParamMeaning::kHostAddresses: return "host addresses";
    case ParamMeaning::kRngState: return rngSource + " seed/offset";
    case ParamMeaning::kMemsetValue: return "memset value";
  }
  return "";
}

std::string meaningText(const ParamDifference& p) { return meaningText(p.meaning, p.rngSource); }

std::string sentence(const Evidence& e) {
  const std::vector<uint64_t>& n = e.numbers;
  const std::vector<std::string>& t = e.texts;
  switch (e.kind) {
    case EvidenceKind::kPointer:
      return fmt::format("{} (bytes {:#x}-{:#x}): run A {}; run B {}: {}", parameter(n[0], "pointer parameter", "pointer"),
                         n[1], n[1] + n[2], pointerSide(&n[3]), pointerSide(&n[7]), pointerRelation(n[11], n[12], n[13]));
    case EvidenceKind::kAlsoParameter: {
      const std::string meaning = meaningText(static_cast<ParamMeaning>(n[3]), t[0]);
      return fmt::format("also {} (bytes {:#x}-{:#x}{}): run A {}, run B {}", parameter(n[0], "parameter", "bytes"),
                         n[1], n[1] + n[2], meaning.empty() ? "" : ", " + meaning, t[1], t[2]);
    }
    case EvidenceKind::kInputsDifferWithPointers:
      return "the inputs differ with it: a launch's input ranges are recorded from its pointers";
    case EvidenceKind::kAnotherAddress:
      return "the program passed another address: a view or slice at another offset, another buffer or workspace, "
             "or a tensor placed elsewhere";
    case EvidenceKind::kOldOutputContents:
      return fmt::format("input{} {} differ{} where no recorded operation wrote, in ranges the launch also writes: an "
                         "output buffer's old contents, hashed at its first use, not what the kernel read",
                         n.size() == 1 ? "" : "s", fmt::join(n, ", "), n.size() == 1 ? "s" : "");
    case EvidenceKind::kHostCopy:
      return fmt::format("{} of {} bytes into {}: digest {:016x} in run A, {:016x} in run B", t[0], n[0],
                         rangeText(n[3], n[4], n[5]), n[1], n[2]);
    case EvidenceKind::kCapturedHostData:
      return fmt::format("captured host data: {} of {} bytes differ, the first at byte {:#x}", n[0], n[1], n[2]);
    case EvidenceKind::kCapturedHostDataUnreadable: return fmt::format("captured host data unreadable: {}", t[0]);
    case EvidenceKind::kCaptureHostDataHint: return "record with --capture-host-data to see which bytes differ";
    case EvidenceKind::kHostDataHint:
      return "the program fed the GPU different data: data order, CPU-side augmentation, unseeded Python/NumPy RNG, "
             "DataLoader workers";
    case EvidenceKind::kUnwrittenInput:
      return fmt::format("input {} differs; of its differing bytes, {} in run A and {} in run B were never written by "
                         "a recorded copy, memset or kernel output since allocation",
                         n[0], n[1], n[2]);
    case EvidenceKind::kUninitialisedHint:
      return "every earlier operation produced identical outputs, so the difference comes from what the memory held "
             "before: read of uninitialised memory (torch.empty, cudaMalloc without a memset)";
    case EvidenceKind::kInPlace:
      return fmt::format("{} works in place: it reads the old contents of what it writes", t[0]);
    case EvidenceKind::kUnrecordedWrite:
      return "a write gpurr did not record (another process, host-mapped memory written by the CPU, a launch "
             "recorded without hashing) or a race between streams changed the input";
    case EvidenceKind::kOneSidedHashes:
      return fmt::format("{} hashed before the launch in one run only: the runs' histories of those bytes differ (a "
                         "hash dropped, or another stream wrote them first in one run: a race between streams), so "
                         "they are not compared and nothing vouches for them",
                         plural(n[0], "range"));
    case EvidenceKind::kReadApart:
      return fmt::format("{} was read at its first use with different bytes in the two runs (run A event #{}, run B "
                         "event #{}), and those launches' outputs did not show it: nothing vouches for it",
                         rangeText(n[2], n[3], n[4]), n[0], n[1]);
    case EvidenceKind::kUndigestedWrites:
      return fmt::format("{} last written before the launch without a digest (a hash that failed, or an operation not "
                         "hashed): nothing vouches for {}",
                         n[0] == 1 ? "1 range was" : fmt::format("{} ranges were", n[0]), n[0] == 1 ? "it" : "them");
    case EvidenceKind::kReceivedAsynchronously:
      return fmt::format("{} last written by {} (run A #{}, run B #{}), which received {} asynchronously: no digest "
                         "shows what it received, and this launch is the first to read it",
                         n[0] == 1 ? "1 range was" : fmt::format("{} ranges were", n[0]), t[0], n[1], n[2],
                         n[0] == 1 ? "it" : "them");
    case EvidenceKind::kRngStates: {
      auto side = [&](size_t v, size_t s) {
        return n[v] != 0 ? fmt::format("{} {} seed={} offset={}", t[s], t[s + 1], n[v + 1], n[v + 2])
                         : std::string("none");
      };
      return fmt::format("run A: {}; run B: {}", side(0, 0), side(3, 2));
    }
    case EvidenceKind::kRngInParameters: return "the differing parameter bytes hold the RNG state";
    case EvidenceKind::kRngNotRecorded:
      return fmt::format("{} draws its output from the random generator, whose seed and offset the trace does not "
                         "hold (no parameter of the kernel carries them): what it reads is identical, so the "
                         "generator's state differs",
                         t[0]);
    case EvidenceKind::kSeedHint:
      return n[0] != 0 ? "seed every run's generator identically (curandSetPseudoRandomGeneratorSeed, "
                         "curandSetGeneratorOffset) and keep the sequence of random operations the same"
                       : "seed every run identically (torch.manual_seed) and keep the sequence of random operations "
                         "the same";
    case EvidenceKind::kParameter: {
      const std::string meaning = meaningText(static_cast<ParamMeaning>(n[3]), t[0]);
      return fmt::format("{} (bytes {:#x}-{:#x}{}): {}", parameter(n[0], "parameter", "bytes"), n[1], n[1] + n[2],
                         meaning.empty() ? "" : ", " + meaning,
                         t[3].empty() ? fmt::format("run A {}, run B {}", t[1], t[2]) : "differs in words " + t[3]);
    }
    case EvidenceKind::kHostComputedValue:
      return "a value computed on the host differs: a learning rate or step count, a size, a clock- or "
             "counter-derived value";
    case EvidenceKind::kHashInputsHint: return "record with --hash-inputs to hash every input before every launch";
    case EvidenceKind::kSameInputs: {
      const uint64_t vouched = n[0], hashed = n[1], host = n[2], differ = n[3], outputs = n[4];
      const uint64_t oldContents = n.size() > 6 ? n[6] : 0;
      const std::string inputs =
          oldContents != 0
              ? fmt::format("what it reads is identical (the {} that differ{} only an output buffer's old contents)",
                            plural(oldContents, "input"), oldContents == 1 ? "s holds" : " hold")
          : vouched == 0 ? (hashed == 1 ? std::string("the input is identical (digests equal)")
                                      : fmt::format("all {} inputs are identical (digests equal)", hashed))
                       : fmt::format("inputs identical: {}{} vouched for by the write history (the earlier "
                                     "operations that touched them gave identical outputs)",
                                     hashed == 0 ? "" : plural(hashed, "input") + " hashed at first use, ",
                                     plural(vouched, "input"));
      const uint64_t stale = n.size() > 5 ? n[5] : 0;
      std::vector<std::string> but;
      if (host != 0) but.push_back(fmt::format("host addresses in {}", plural(host, "parameter")));
      if (stale != 0) but.push_back(plural(stale, "stale word"));
      return fmt::format("{}, parameters identical after pointer normalisation{}; {} of {} output{} differ{}", inputs,
                         but.empty() ? "" : fmt::format(" but for {}", fmt::join(but, " and ")), differ, outputs,
                         outputs == 1 ? "" : "s", differ == 1 ? "s" : "");
    }
    case EvidenceKind::kStaleWords:
      return fmt::format(
          "{}{}: a word of a struct passed by value that points into an allocation in one run only (an unused "
          "part of the struct holding a device address the host stack left there) decides nothing; the other "
          "evidence does{}",
          n[0] == 0 ? std::string("ranges hashed through stale words") : plural(n[0], "stale word"),
          n[1] == 0 ? "" : fmt::format(" ({} hashed through {} in one run alone, not compared)",
                                       plural(n[1], "range"), n[0] == 1 ? "it" : "them"),
          n[2] == 0 ? ""
                    : "; the other run holds 0 there: if the kernel reads an optional pointer at that word, the "
                      "runs' parameters really differ, which re-executing the launch (gpurr bisect, gpurr replay) "
                      "would show");
    case EvidenceKind::kHostAddresses:
      return "the parameter bytes that differ hold, in both runs, host addresses in no recorded allocation: the "
             "unused parts of structs passed by value, references to host objects; address-space randomisation "
             "changes them from run to run (gpurr record turns it off unless --aslr), and a kernel cannot read "
             "through them";
    case EvidenceKind::kCollectiveReceived:
      return n[0] != 0 ? fmt::format("{}: {}, what it received is not; {}", t[0],
                                     n.size() > 2 && n[2] != 0 ? "this rank sends nothing to it"
                                                               : "what this rank sent is identical in both runs",
                                     n.size() > 1 && n[1] != 0
                                         ? "the job's report says which ranks sent other data"
                                         : "compare the other ranks' traces (gpurr diff on the job's directories)")
                       : fmt::format("{}: what this rank sent already differs", t[0]);
    case EvidenceKind::kReductionOrder:
      return fmt::format("{}: each of its {} sent identical data in both runs, and what the ranks received differs: "
                         "the collective added the same contributions in another order",
                         t[0], plural(n[0], "rank"));
    case EvidenceKind::kNcclChose:
      return "no NCCL variable (NCCL_*) and no NCCL version differs between the runs: NCCL chose another algorithm "
             "or protocol for this collective by itself (Ring, Tree, NVLS, CollNet; LL, LL128, Simple), and with it "
             "another order of additions";
    case EvidenceKind::kNcclSettings: {
      std::vector<std::string> fields;
      for (size_t i = 0; i + 2 < t.size(); i += 3) {
        fields.push_back(fmt::format("{} (run A {}, run B {})", t[i], t[i + 1], t[i + 2]));
      }
      return fmt::format("NCCL's settings differ between the runs: {}; they decide the algorithm and protocol of "
                         "each collective, and so the order of its additions",
                         fmt::join(fields, ", "));
    }
    case EvidenceKind::kIntrinsic:
      return "the kernel itself gives different results from identical state: floating-point atomics, split-K or "
             "other unordered reductions, races";
    case EvidenceKind::kRecorderReran:
      return fmt::format("the recorder re-ran it {} times from run {}'s state: {} distinct results", n[0],
                         n[1] == 0 ? 'A' : 'B', n[2]);
    case EvidenceKind::kReexecuted: return t[0];
    case EvidenceKind::kParametersDifferToo:
      return "the runs' parameters differ too, but every re-execution used the same ones: parameter bytes can hold "
             "whatever the host left there (the unused parts of structs passed by value, host addresses)";
    case EvidenceKind::kBeforeReexecutions: return "before the re-executions: " + t[0];
    case EvidenceKind::kAtThisOperation: return fmt::format("at this operation: {}", t[0]);
    case EvidenceKind::kIssued: {
      const uint64_t count = n[0], crossed = n[1], kept = n[2], moved = n[5];
      const std::string onStream = n[3] != 0 ? fmt::format(", all on one stream (stream {})", n[4]) : "";
      std::vector<std::string> parts;
      for (size_t i = 6 + moved; i + 2 < n.size(); i += 3) {
        parts.push_back(fmt::format("{} of host thread {}{}", n[i + 1], n[i], n[i + 2] != 0 ? " (its own)" : ""));
      }
      const std::string who = threads(&n[6], moved);
      if (crossed != 0) {
        return fmt::format("{} issued {}; in run B {} crossed {}: {}{}", who, count == 1 ? "it" : "them",
                           count == 1 ? "it" : "they", plural(kept, "operation"), fmt::join(parts, ", "), onStream);
      }
      if (kept > 0) {
        return fmt::format("{} issued them; {} between them kept their place: {}{}", who, plural(kept, "operation"),
                           fmt::join(parts, ", "), onStream);
      }
      return fmt::format("{} issued them{}", who, onStream);
    }
    case EvidenceKind::kOwnOrderChanged:
      return fmt::format("{} issued its own operations in another order: the program's order changed (iteration "
                         "over a set or dict, a data-dependent branch, another data order)",
                         threads(n.data(), n.size()));
    case EvidenceKind::kThreadsRaced:
      return fmt::format("each host thread kept its own order: nothing in the program orders these threads' "
                         "launches{} (a race between host threads; a lock, an event or a join would fix the order)",
                         n[0] != 0 ? " onto one stream" : "");
    case EvidenceKind::kNoneTouch:
      return fmt::format("none of the operations {} touches {} bytes, by the recorded ranges", where(n[0], n[1]),
                         n[0] == 1 ? "its" : "their");
    case EvidenceKind::kTouch: {
      const uint64_t count = n[2];
      std::vector<std::string> named;
      for (size_t i = 0; 3 + 3 * i + 2 < n.size(); ++i) {
        const uint64_t* x = &n[3 + 3 * i];  // event, host thread, whether an op is named
        named.push_back(fmt::format("#{} {}{} on host thread {}", x[0], t[2 * i],
                                    x[2] != 0 ? fmt::format(" {{op {}}}", t[2 * i + 1]) : "", x[1]));
      }
      return fmt::format("{} of the operations {} {} {} bytes: {}{}", count, where(n[0], n[1]),
                         count == 1 ? "touches" : "touch", n[0] == 1 ? "its" : "their", fmt::join(named, "; "),
                         count > named.size() ? fmt::format("; {} more", count - named.size()) : "");
    }
    case EvidenceKind::kSameBytesMoved:
      return fmt::format("{} the same bytes in both places: what differs is what the operations {} crossed read or "
                         "write",
                         n[0] == 1 ? "it writes" : "they write", n[0] == 1 ? "it" : "they");
    case EvidenceKind::kOtherBytesMoved:
      return fmt::format("in its new place {} other bytes ({} of {} compared differ): {} other data",
                         n[0] == 1 ? "it writes" : "they write", n[1], n[2], n[0] == 1 ? "it reads" : "they read");
    case EvidenceKind::kSwapped: {
      const auto at = [&](const uint64_t* x) {
        return fmt::format("{} {} (#{})", plural(x[1], "operation"), x[2] != 0 ? "later" : "earlier", x[0]);
      };
      return fmt::format("run B does run A's operation {}, and run A does run B's {}: the same kernel and launch "
                         "configuration, reading the same buffers and writing the same bytes",
                         at(&n[0]), at(&n[3]));
    }
    case EvidenceKind::kVisitedInAnotherOrder:
      return "the program visited the same data in another order: iteration over a set (a set of strings iterates "
             "in an order PYTHONHASHSEED decides), a dict filled in another order, a sort that is not stable, or "
             "host threads";
    case EvidenceKind::kAlgorithm:
      return fmt::format("run {}: {} {} chose {}{}", n[0] == 0 ? 'A' : 'B', t[0], t[1], t[2],
                         n[1] == 0 ? "" : fmt::format(" (autotuned among {})", plural(n[1], "candidate")));
    case EvidenceKind::kNoAlgorithm:
      return "no algorithm choice was recorded for these operations; a library (cuDNN, cuBLAS) or the program picked "
             "a different sequence of kernels";
    case EvidenceKind::kRunEnds:
      return fmt::format("run {0}'s trace ends here, closed as a run ends (not cut short); run {1} goes on for {2}: "
                         "run {0}'s program made no more GPU operations (it exited, stopped on an exception or an "
                         "early return, or ran fewer steps), a difference of control flow that its output or exit "
                         "status may explain",
                         n[0] == 0 ? 'A' : 'B', n[0] == 0 ? 'B' : 'A', plural(n[1], "operation"));
    case EvidenceKind::kOpRanAlone:
      return fmt::format("run {0}'s program ran {2} here (event #{1}), an op that run {3}'s did not run at this "
                         "place: a branch of the program went the other way (a condition on data or a flag, "
                         "host-side randomness, another batch from the data loader, an exception caught); no library "
                         "chose these kernels",
                         n[0] == 0 ? 'A' : 'B', n[1], t[0], n[0] == 0 ? 'B' : 'A');
    case EvidenceKind::kByPlaceBefore:
      return fmt::format("run {}'s {} the same kernel{} as {} later, and took {} op{} by place in a step the PyTorch "
                         "layer had learnt: the {} the program added may {} any of #{} to #{} (`gpurr bisect -- "
                         "COMMAND` records with every op observed)",
                         n[0] == 0 ? 'A' : 'B',
                         n[2] == 1 ? fmt::format("launch #{} launches", n[1])
                                   : fmt::format("launches #{} to #{} launch", n[1], n[1] + n[2] - 1),
                         n[2] == 1 ? "" : "s", n[3] == 1 ? std::string("the launch one") : plural(n[3], "launch"),
                         n[2] == 1 ? "its" : "their", n[2] == 1 ? "" : "s",
                         n[3] == 1 ? std::string("operation") : plural(n[3], "operation"),
                         n[3] == 1 ? "be" : "start at", n[1], n[4]);
    case EvidenceKind::kOpRanAgain:
      return fmt::format("run {0}'s program ran {2} {3} more here (from event #{1}), the op, line and kernel{4} that "
                         "run {5}'s ran just before or after this place: the program called the op again (a loop ran "
                         "longer or a call was repeated: a condition on data or a flag, another batch's size, "
                         "host-side randomness), or the op launched its kernel again within a call (the traces do not "
                         "number op calls); no library chose other kernels",
                         n[0] == 0 ? 'A' : 'B', n[1], t[0], n[2] == 1 ? std::string("once") : plural(n[2], "time"),
                         n[2] == 1 ? "" : "s", n[0] == 0 ? 'B' : 'A');
    case EvidenceKind::kOtherConfiguration:
      return fmt::format("the same kernel{} in both runs, {}launched with another configuration: {} grid ({},{},{}) "
                         "block ({},{},{}) in run A, grid ({},{},{}) block ({},{},{}) in run B; an autotuner's choice "
                         "(Inductor times a kernel's block sizes at its first call and keeps the fastest, or loads the "
                         "choice from its cache), and the other configuration computed other bits",
                         n[0] == 1 ? "" : "s", n[0] == 1 ? "" : fmt::format("{} of them ", n[0]), t[0], n[1], n[2],
                         n[3], n[4], n[5], n[6], n[7], n[8], n[9], n[10], n[11], n[12]);
    case EvidenceKind::kOtherBinary:
      return fmt::format("the kernel's code differs between the runs: run A launched it from module #{} (image digest "
                         "{:016x}), run B from module #{} ({:016x}); a JIT compiler or an autotuner built another "
                         "binary under the same name (Triton compiles a configuration's block sizes into the code), "
                         "or another build of its library was loaded",
                         n[0], n[1], n[2], n[3]);
  }
  return "";
}

std::string reductionOrderFix() {
  return "pin NCCL's algorithm in every run of the job (NCCL_ALGO=Ring, for example), or exclude NVLS "
         "(NCCL_ALGO=^NVLS): NVLS is the choice found unstable from run to run, and NCCL's choice among the other "
         "algorithms has been seen to stay the same";
}

std::vector<std::string> sentences(const std::vector<Evidence>& evidence) {
  std::vector<std::string> out;
  out.reserve(evidence.size());
  for (const Evidence& e : evidence) out.push_back(sentence(e));
  return out;
}

}  // namespace gpurr::diff
