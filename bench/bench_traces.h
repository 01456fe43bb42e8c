// What the benchmarks of `gpurr diff` share (diff_bench.cpp, job_bench.cpp):
// traces of a synthetic training loop written with trace_format's writer
// (repeating kernels with pointer parameters and input/output digests, data
// flowing from outputs to later inputs; optionally a rank of a job with an
// all-reduce every so often), and the clocks and memory figures they print.
// Header-only: each benchmark is one program.
#pragma once

#include <fmt/format.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "trace_format/trace.h"

namespace gpurr::bench {

using namespace gpurr::trace;

inline uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ULL;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dULL;
  x ^= x >> 33;
  return x;
}

struct Kernel {
  std::string name;
  Dim3 grid, block;
  uint32_t pointers;
  uint32_t scalars;
};

inline std::vector<Kernel> kernels() {
  std::vector<Kernel> out;
  const char* bases[] = {
      "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13AUnaryFunctorIfffNS0_15binary_"
      "internal10MulFunctorIfEEEESt5arrayIPcLm2EEEEviT0_T1_",
      "sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize128x128x32_warpgroupsize1x1x1_execute_"
      "segment_k_off_kernel__5x_cublas",
      "_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastINS0_"
      "13BinaryFunctorIfffNS0_15binary_internal10AddFunctorIfEEEEEEvRNS_18TensorIteratorBaseERKT_"
      "EUliE_EEviT1_",
      "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfZNS0_"
      "11sum_functorIfffEclERNS_14TensorIteratorEEUlffE_EEjfLi4EEEEEvT1_",
      "_ZN2at6native27unrolled_elementwise_kernelINS0_21copy_device_to_deviceEEEviT_",
      "_ZN7cutlass7Kernel2I62cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8EEvNT_"
      "6ParamsE",
      "_ZN2at6native43_GLOBAL__N__softmax_forward_kernelILi4EffLi1EEEvPT0_PKT_iii",
      "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_23launch_fused_dropout_"
      "kernelIfEEvv_EUlvE_EEviT_",
  };
  for (uint32_t i = 0; i < 40; ++i) {
    Kernel k;
    k.name = fmt::format("{}_v{}", bases[i % std::size(bases)], i);
    k.grid = {64u << (i % 5), 1u + i % 3, 1};
    k.block = {128u << (i % 3), 1, 1};
    k.pointers = 2 + i % 3;
    k.scalars = 1 + i % 4;
    out.push_back(std::move(k));
  }
  return out;
}

// The shape of one trace: a training loop of `launches` launches over a
// pool of buffers. `divergeAt` (launch index) makes run B's output differ
// there, as a nondeterministic kernel would. With `hostThreads` > 1, runs of
// 16 launches take turns on that many host threads from launch
// `threadsFrom` on (before it, the first thread alone), on the one stream
// (as autograd's thread launches the backward pass on the forward's stream
// in PyTorch), or with `ownStreams` each on a stream of its own,
// synchronised after each run: the next thread reads what it wrote (data
// handed over through the host).
//
// As rank `rank` of a job of `worldSize` (rank -1: no job), the buffers
// start with this rank's own data, and every `collectiveEvery` launches (0:
// never) an all-reduce of the buffer the last launch wrote follows, its
// result the same on every rank and read by the next launch; in run B it
// differs from launch `receivedFrom` on, as when another rank diverged
// before it.
//
// `extraAt` (run B only): one more launch of launch `extraAt`'s kernel just
// before it, into a buffer of its own that nothing reads (a library's
// workspace): the first launch of that kernel's buffers' first users shifts
// by one (the diff's renaming, docs/DIFF.md).
//
// `staleEvery` (0: never): every so many launches take a 16-byte struct by
// value whose second word is never written: a host stack address in run A,
// a device address into another buffer in run B, which the recorder then
// took for a pointer and hashed through (a launch the diff pairs despite a
// stale word, docs/DIFF.md).
struct TraceShape {
  uint64_t launches = 1'000'000;
  uint64_t divergeAt = UINT64_MAX;
  bool runB = false;
  uint32_t hostThreads = 1;
  uint64_t threadsFrom = 0;
  bool ownStreams = false;
  int32_t rank = -1;
  int32_t worldSize = 0;
  uint64_t collectiveEvery = 0;
  uint64_t receivedFrom = UINT64_MAX;
  uint64_t extraAt = UINT64_MAX;
  uint64_t staleEvery = 0;
  // Each launch with a framework origin (op, module, source line, step), as
  // PyTorch's are: a step of 1,000 launches in 24 layers.
  bool origins = false;
};

inline void writeTrace(const std::filesystem::path& dir, const TraceShape& s) {
  Header h;
  h.toolVersion = "0.1.0";
  h.commandLine = {"python", "train.py"};
  h.gpus = {{0, "NVIDIA H100 80GB HBM3", "GPU-0", 132, 9, 0, 85520809984ULL, "0000:19:00.0"}};
  h.driverVersion = 13000;
  h.cudaRuntimeVersion = 13000;
  h.rank = s.rank;
  TraceWriter w(dir, h);
  const auto ks = kernels();
  const uint32_t kBuffers = 256;
  uint64_t seq = 0;
  const uint64_t base = s.runB ? 0x7f5500000000ULL : 0x7f1200000000ULL;
  auto address = [&](uint32_t ordinal) { return base + uint64_t{ordinal} * (8u << 20); };
  for (uint32_t b = 1; b <= kBuffers; ++b) {
    w.append({seq, seq * 1000, 0, Allocation{b, address(b), 8u << 20, AllocationKind::kDevice, 0, 0}});
    ++seq;
  }
  // What each buffer holds now: launches read these digests and write new
  // ones, so a difference spreads through the data as in a real program.
  std::vector<uint64_t> content(kBuffers + 1);
  for (uint32_t b = 1; b <= kBuffers; ++b) content[b] = s.rank < 0 ? mix(b) : mix(b ^ (uint64_t(s.rank + 1) << 40));
  KernelLaunch k;
  k.context = 0x1000;
  k.stream = s.runB ? 0x55 : 0x77;
  k.module = 1;
  Collective col;
  col.call = "ncclAllReduce";
  col.op = CollectiveOp::kAllReduce;
  col.communicator = 0x5eed00c0ffee;
  col.rank = s.rank;
  col.size = s.worldSize;
  col.dataType = "float32";
  col.count = 1u << 18;
  col.reduceOp = "sum";
  uint32_t reduced = 0;  // the buffer the last all-reduce received into, until a launch reads it
  for (uint64_t i = 0; i < s.launches; ++i) {
    const Kernel& kd = ks[mix(i % 97) % ks.size()];
    k.function = kd.name;
    k.grid = kd.grid;
    k.block = kd.block;
    k.params.clear();
    k.paramLayout.clear();
    k.pointers.clear();
    k.inputs.clear();
    k.outputs.clear();
    for (uint32_t p = 0; p < kd.pointers; ++p) {
      uint32_t ordinal = 1 + static_cast<uint32_t>(mix(i * 8 + p) % kBuffers);
      if (p == 0 && reduced != 0) ordinal = std::exchange(reduced, 0);  // reads what the all-reduce received
      const uint64_t ptr = address(ordinal);
      appendPointerParam(k, ptr, ordinal, 0);
      RangeDigest r;
      r.range = {ptr, 1u << 20, ordinal, 0};
      if (p + 1 == kd.pointers) {
        uint64_t derived = i;
        for (const RangeDigest& input : k.inputs) derived = mix(derived ^ input.digest);
        r.digest = derived;
        if (s.runB && i == s.divergeAt) r.digest ^= 1;
        content[ordinal] = r.digest;
        if (i % 10 == 0) {
          r.chunkDigests.resize(16);
          for (size_t c = 0; c < 16; ++c) r.chunkDigests[c] = mix(r.digest + c);
          if (s.runB && i == s.divergeAt) r.chunkDigests[3] ^= 1;
        }
        k.outputs.push_back(r);
      } else {
        r.digest = content[ordinal];
        k.inputs.push_back(r);
      }
    }
    for (uint32_t p = 0; p < kd.scalars; ++p) {
      const uint32_t v = static_cast<uint32_t>(i % 1024 + p);
      appendParam(k, &v, 4, 4);
    }
    if (s.staleEvery != 0 && i % s.staleEvery == 0) {
      const uint32_t target = 1 + static_cast<uint32_t>(mix(i * 8 + 7) % kBuffers);
      const uint64_t functor[2] = {i, s.runB ? address(target) + 0x100 : 0x00007ffc1a9fdfd0ULL};
      const uint32_t at = appendParam(k, functor, sizeof functor, 8);
      if (s.runB) {
        k.pointers.push_back({at + 8, target, 0x100});
        const bool written = std::ranges::any_of(k.outputs, [&](const RangeDigest& r) { return r.range.allocation == target; });
        if (!written) k.outputs.push_back({{address(target), 1u << 20, target, 0}, content[target], {}, std::nullopt});
      }
    }
    const uint32_t thread = i < s.threadsFrom ? 0 : static_cast<uint32_t>((i / 16) % s.hostThreads);
    if (s.runB && i == s.extraAt) {
      // The same kernel and parameters, its output in a buffer of its own.
      constexpr uint32_t kExtra = kBuffers + 1;
      w.append({seq, seq * 1000, thread, Allocation{kExtra, address(kExtra), 8u << 20, AllocationKind::kDevice, 0, 0}});
      ++seq;
      const uint64_t ptr = address(kExtra);
      KernelLaunch extra = k;
      extra.pointers.back().allocation = kExtra;
      std::memcpy(extra.params.data() + extra.pointers.back().byteOffset, &ptr, sizeof ptr);
      extra.outputs.back().range = {ptr, 1u << 20, kExtra, 0};
      w.append({seq, seq * 1000, thread, extra});
      ++seq;
    }
    if (s.ownStreams) k.stream = (s.runB ? 0x55 : 0x77) + thread;
    std::optional<Origin> origin;
    if (s.origins) {
      const uint64_t kernel = mix(i % 97) % ks.size(), layer = i % 1000 / 40;
      Origin& o = origin.emplace();
      o.op = fmt::format("aten::op{}", kernel);
      o.opStack = {o.op};
      o.phase = i % 1000 < 500 ? Phase::kForward : Phase::kBackward;
      o.module = fmt::format("LlamaForCausalLM.model.layers.{}.mlp.up_proj", layer);
      o.file = "transformers/models/llama/modeling_llama.py";
      o.line = static_cast<uint32_t>(100 + i % 40);
      o.step = static_cast<int64_t>(i / 1000);
      o.stepLaunch = i % 1000;
    }
    w.append({seq, seq * 1000, thread, k, origin});
    ++seq;
    if (s.ownStreams && i % 16 == 15) {
      w.append({seq, seq * 1000, thread, Sync{SyncKind::kStreamSynchronize, k.stream, 0}});
      ++seq;
    }
    if (s.collectiveEvery != 0 && i % s.collectiveEvery == s.collectiveEvery - 1) {
      // The buffer the launch before it wrote (a gradient, say), reduced in place.
      const uint32_t ordinal = k.pointers.back().allocation;
      RangeDigest r;
      r.range = {address(ordinal), 1u << 20, ordinal, 0};
      r.digest = content[ordinal];
      col.inputs = {r};
      r.digest = mix(0xa11ULL ^ col.sequence ^ (s.runB && i >= s.receivedFrom ? 1 : 0));
      col.outputs = {r};
      content[ordinal] = r.digest;
      reduced = ordinal;
      col.stream = k.stream;
      w.append({seq, seq * 1000, thread, col});
      ++seq;
      ++col.sequence;
    }
  }
  w.close();
}

inline double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// CPU time of this process (all its threads): on a shared machine, wall time
// also counts the time other processes held the core.
struct CpuClock {
  using duration = std::chrono::nanoseconds;
  static std::chrono::time_point<CpuClock, duration> now() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return std::chrono::time_point<CpuClock, duration>(
        duration(int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec));
  }
};

// The best (shortest) CPU and wall time of a pass over several rounds, the
// passes side by side in every round.
struct Best {
  double cpu = 1e9, wall = 1e9;
};
template <typename F>
void timed(Best& best, F&& f) {
  const auto c0 = CpuClock::now();
  const auto w0 = std::chrono::steady_clock::now();
  f();
  best.cpu = std::min(best.cpu, seconds(CpuClock::now() - c0));
  best.wall = std::min(best.wall, seconds(std::chrono::steady_clock::now() - w0));
}

// How many cores this process gets now: `threads` busy threads for 0.3 s,
// the CPU time they were given over the wall time.
inline double coresAvailable(unsigned threads) {
  const auto c0 = CpuClock::now();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t) {
    ts.emplace_back([t0] {
      volatile uint64_t x = 0;
      while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(300)) {
        for (int i = 0; i < 10000; ++i) x = x + 1;
      }
    });
  }
  for (std::thread& t : ts) t.join();
  return seconds(CpuClock::now() - c0) / seconds(std::chrono::steady_clock::now() - t0);
}

// Peak resident memory of this process so far, in MiB.
inline double peakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

}  // namespace gpurr::bench
