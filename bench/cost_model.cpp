// cost_model: bytes hashed per training step under each read/write-range
// rule, for a synthetic allocation-and-launch stream that follows PyTorch's
// caching allocator, and the step-time ratio they predict.
//
// The allocator (torch 2.11, c10/cuda/CUDACachingAllocator.cpp and
// c10/core/AllocatorConfig.h): sizes round up to 512 B; requests of 1 MiB or
// less are carved from 2 MiB segments, 1-10 MiB from 20 MiB segments, larger
// ones get their own segment rounded up to 2 MiB; a free block is reused by
// the smallest free block of the same pool that fits (split when the rest is
// large enough). With expandable segments each pool is one reservation that
// grows, and the recorder sees its mapped extent as one range.
//
// The rules, for a pointer p into a segment:
//   tail      from p to the end of the segment (close to the recorder's
//             allocation rule, without the PyTorch layer);
//   next      from p to the next pointer the same launch passes into that
//             segment, or to the segment's end (needs no framework help);
//   exact     the tensor's own block (needs the allocator's block events).
// tail, next and exact hash each launch's ranges before and after it runs
// (--hash-inputs). "first-use" is the recorder's rule (recorder/
// write_history.h): exact ranges, all hashed after each launch, and before it
// only those holding bytes no launch has touched since the allocator handed
// their block out. "write-sets" is the recorder's rule in a PyTorch program
// (FORMAT.md, KernelLaunch.reads): as first-use, but after each launch only
// the blocks its op's schema lets it write (every block but its read-only
// tensor arguments). "made" is the rule since: as write-sets, but a block
// the op was given no tensor in (the tensor it made, written last by the
// builders here) is not hashed before the launch. "outputs" hashes only the range a launch writes, after
// it, with exact ranges: the floor under every rule here.
//
// A model, not a measurement: launches are conv / norm / activation /
// linear / attention with their real tensor sizes but fewer, fused launches
// than a real framework issues, and the plain step times are assumed
// (about 100 ms for ResNet-50 at batch 256 with AMP on an H100).
//
//   bench/cost_model [--hash-tbps 2.5]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr uint64_t kMiB = 1ull << 20;

uint64_t roundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

// Blocks in segments, as the caching allocator carves them.
class Allocator {
 public:
  explicit Allocator(bool expandable) : expandable_(expandable) {}

  struct Block {
    uint64_t address, size, segmentEnd;  // segmentEnd: where a tail range stops
  };

  uint64_t alloc(uint64_t request) {
    const uint64_t size = roundUp(std::max<uint64_t>(request, 1), 512);
    const int pool = size <= kMiB ? 0 : 1;
    // Best fit among free blocks of the pool.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second.pool == pool && it->second.size >= size &&
          (best == free_.end() || it->second.size < best->second.size))
        best = it;
    }
    uint64_t address;
    if (best != free_.end()) {
      address = best->first;
      const FreeBlock b = best->second;
      free_.erase(best);
      if (b.size - size >= (pool == 0 ? 512 : kMiB)) free_[address + size] = {b.size - size, pool, b.segment};
      live_[address] = {size, b.segment};
    } else {
      const uint64_t segSize = size <= kMiB ? 2 * kMiB : size <= 10 * kMiB ? 20 * kMiB : roundUp(size, 2 * kMiB);
      address = newSegment(segSize, pool);
      if (segSize > size) free_[address + size] = {segSize - size, pool, segmentOf(address)};
      live_[address] = {size, segmentOf(address)};
    }
    return address;
  }

  void free(uint64_t address) {
    auto it = live_.find(address);
    if (it == live_.end()) return;
    free_[address] = {it->second.size, it->second.size <= kMiB ? 0 : 1, it->second.segment};
    live_.erase(it);
  }

  Block block(uint64_t address) const {
    const auto& l = live_.at(address);
    return {address, l.size, segments_[l.segment].end};
  }

 private:
  struct FreeBlock {
    uint64_t size;
    int pool;
    size_t segment;
  };
  struct Live {
    uint64_t size;
    size_t segment;
  };
  struct Segment {
    uint64_t begin, end;
    int pool;
  };

  uint64_t newSegment(uint64_t size, int pool) {
    if (expandable_) {
      // One growing mapping per pool: every block's range runs to its end.
      for (size_t i = 0; i < segments_.size(); ++i) {
        if (segments_[i].pool == pool) {
          const uint64_t at = segments_[i].end;
          segments_[i].end += size;
          lastSegment_ = i;
          return at;
        }
      }
    }
    const uint64_t at = nextAddress_;
    nextAddress_ += roundUp(size, 2 * kMiB) + (expandable_ ? (64ull << 30) : 0);
    segments_.push_back({at, at + size, pool});
    lastSegment_ = segments_.size() - 1;
    return at;
  }
  size_t segmentOf(uint64_t address) const {
    if (expandable_) return lastSegment_;
    for (size_t i = 0; i < segments_.size(); ++i)
      if (address >= segments_[i].begin && address < segments_[i].end) return i;
    return lastSegment_;
  }

  bool expandable_;
  uint64_t nextAddress_ = 0x7f0000000000;
  size_t lastSegment_ = 0;
  std::vector<Segment> segments_;
  std::map<uint64_t, FreeBlock> free_;
  std::map<uint64_t, Live> live_;
};

struct Totals {
  uint64_t launches = 0, tail = 0, next = 0, exact = 0;
  uint64_t firstUse = 0;        // exact, all after the launch, untouched ones before it
  uint64_t firstUseBefore = 0;  // of which before the launch
  uint64_t outputsOnly = 0;     // exact, the written operand alone, after the launch
  uint64_t writtenBefore = 0;   // of firstUseBefore, the written operand's (a tensor its op made)
  // exact, the written operand after the launch, untouched ones before it
  uint64_t writeSets() const { return outputsOnly + firstUseBefore; }
  // as writeSets, but a tensor the op made is not hashed before the launch
  uint64_t madeTensors() const { return writeSets() - writtenBefore; }
};

// Runs `build(emit)` where emit(kind, ids, bytes) feeds the allocator and
// sums each rule's bytes over the launches.
template <typename Build>
Totals run(bool expandable, Build build) {
  Allocator a(expandable);
  std::map<int, uint64_t> addr;
  Totals t;
  // Blocks a launch has touched since the allocator handed them out. A
  // launch's exact range is a whole live block and an allocation makes a
  // whole block untouched, so a block is touched entirely or not at all: one
  // flag per block is the recorder's byte-level history.
  std::set<uint64_t> touched;
  auto alloc = [&](int id, uint64_t bytes) {
    addr[id] = a.alloc(bytes);
    touched.erase(addr[id]);
  };
  auto release = [&](int id) {
    a.free(addr.at(id));
    addr.erase(id);
  };
  auto launch = [&](std::vector<int> ids) {
    std::vector<Allocator::Block> blocks;
    for (int id : ids) blocks.push_back(a.block(addr.at(id)));
    t.outputsOnly += blocks.back().size;  // builders pass the written operand last
    const uint64_t written = blocks.back().address;
    std::sort(blocks.begin(), blocks.end(), [](auto& x, auto& y) { return x.address < y.address; });
    for (size_t i = 0; i < blocks.size(); ++i) {
      const auto& b = blocks[i];
      t.exact += b.size;
      t.firstUse += b.size;                    // after the launch
      if (touched.insert(b.address).second) {  // first use: before it too
        t.firstUse += b.size;
        t.firstUseBefore += b.size;
        // Untouched since it was handed out: a tensor the launch's op made.
        if (b.address == written) t.writtenBefore += b.size;
      }
      t.tail += b.segmentEnd - b.address;
      uint64_t end = b.segmentEnd;
      if (i + 1 < blocks.size() && blocks[i + 1].address < b.segmentEnd) end = blocks[i + 1].address;
      t.next += end - b.address;
    }
    ++t.launches;
  };
  build(alloc, release, launch);
  // Before and after each launch.
  t.tail *= 2, t.next *= 2, t.exact *= 2;
  if (t.outputsOnly > t.firstUse || t.firstUse > t.exact) {
    std::fprintf(stderr, "cost_model: first-use bytes outside [outputs, exact]\n");
    std::exit(1);
  }
  return t;
}

// Sizes of the tensors a builder made, by id.
std::map<int, uint64_t> gSizes;

// Backward and optimizer: from the last saved activation to the first, a
// gradient of its size is made, read with it, and both are freed (the
// previous gradient too); then every weight is updated with its gradient.
template <typename A, typename F, typename L>
void backward(A alloc, F release, L launch, const std::vector<int>& saved, const std::vector<int>& weights, int& id) {
  int previous = -1;
  for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
    const int grad = id++;
    alloc(grad, gSizes.at(*it));
    launch(previous >= 0 ? std::vector<int>{*it, previous, grad} : std::vector<int>{*it, grad});
    release(*it);
    if (previous >= 0) release(previous);
    previous = grad;
  }
  for (int w : weights) {
    const int grad = id++;
    alloc(grad, gSizes.at(w));
    launch({w, grad});
    release(grad);
  }
}

// A ResNet-50-like training step: batch 256 at 224x224, fp16 activations
// (AMP), fp32 master weights; forward keeps activations for backward, which
// frees them as it goes; per conv: conv, batch norm, ReLU launches, and their
// backward; the optimizer updates every weight.
template <typename A0, typename F, typename L>
void resnet50(A0 alloc0, F release, L launch) {
  auto alloc = [&](int id, uint64_t bytes) {
    gSizes[id] = bytes;
    alloc0(id, bytes);
  };
  const uint64_t batch = 256;
  struct Stage {
    int blocks;
    uint64_t width, spatial;
  };
  const Stage stages[] = {{3, 256, 56}, {4, 512, 28}, {6, 1024, 14}, {3, 2048, 7}};
  int id = 0;
  std::vector<int> saved, weights;
  const int input = id++;
  alloc(input, batch * 3 * 224 * 224 * 2);
  int x = input;
  auto conv = [&](uint64_t cin, uint64_t cout, uint64_t k, uint64_t hw) {
    const int w = id++;
    alloc(w, cin * cout * k * k * 4);
    weights.push_back(w);
    const int y = id++, z = id++;
    alloc(y, batch * cout * hw * hw * 2);
    launch({x, w, y});  // conv
    alloc(z, batch * cout * hw * hw * 2);
    launch({y, z});  // bn + relu (fused in practice: two launches here)
    launch({z});
    saved.push_back(y);
    saved.push_back(z);
    x = z;
  };
  conv(3, 64, 7, 112);
  uint64_t cin = 64;
  for (const Stage& s : stages) {
    for (int b = 0; b < s.blocks; ++b) {
      conv(cin, s.width / 4, 1, s.spatial);
      conv(s.width / 4, s.width / 4, 3, s.spatial);
      conv(s.width / 4, s.width, 1, s.spatial);
      cin = s.width;
    }
  }
  backward(alloc, release, launch, saved, weights, id);
}

// A transformer-like step: 24 layers, batch 8 x 2048 tokens, hidden 2048,
// bf16; per layer QKV, attention, projection and MLP, then backward.
template <typename A0, typename F, typename L>
void transformer(A0 alloc0, F release, L launch) {
  auto alloc = [&](int id, uint64_t bytes) {
    gSizes[id] = bytes;
    alloc0(id, bytes);
  };
  const uint64_t tokens = 8 * 2048, hidden = 2048, layers = 24;
  int id = 0;
  std::vector<int> saved, weights;
  int x = id++;
  alloc(x, tokens * hidden * 2);
  for (uint64_t l = 0; l < layers; ++l) {
    auto linear = [&](uint64_t in, uint64_t out) {
      const int w = id++, y = id++;
      alloc(w, in * out * 2);
      weights.push_back(w);
      alloc(y, tokens * out * 2);
      launch({x, w, y});
      saved.push_back(y);
      x = y;
    };
    const int norm = id++;
    alloc(norm, tokens * hidden * 2);
    launch({x, norm});
    x = norm;
    linear(hidden, 3 * hidden);
    const int att = id++;
    alloc(att, tokens * hidden * 2);
    launch({x, att});
    x = att;
    linear(hidden, hidden);
    linear(hidden, 4 * hidden);
    linear(4 * hidden, hidden);
  }
  backward(alloc, release, launch, saved, weights, id);
}

void report(const char* name, double stepMs, double hashTBps, const Totals& t) {
  auto ratio = [&](uint64_t bytes) { return 1.0 + bytes / (hashTBps * 1e12) * 1e3 / stepMs; };
  std::printf("%s, %lu launches, %.0f ms plain step, hashing at %.1f TB/s:\n", name,
              static_cast<unsigned long>(t.launches), stepMs, hashTBps);
  std::printf("  %-7s %10.1f GB hashed per step  -> %.2fx step time\n", "tail", t.tail / 1e9, ratio(t.tail));
  std::printf("  %-7s %10.1f GB hashed per step  -> %.2fx step time\n", "next", t.next / 1e9, ratio(t.next));
  std::printf("  %-7s %10.1f GB hashed per step  -> %.2fx step time\n", "exact", t.exact / 1e9, ratio(t.exact));
  std::printf("  %-9s %8.1f GB hashed per step  -> %.2fx step time (the recorder's rule without op\n"
              "          schemas: exact ranges, all after each launch, %.1f GB, and before it only a\n"
              "          block's first use since the allocator handed it out, %.1f GB)\n",
              "first-use", t.firstUse / 1e9, ratio(t.firstUse), (t.firstUse - t.firstUseBefore) / 1e9,
              t.firstUseBefore / 1e9);
  std::printf("  %-10s %7.1f GB hashed per step  -> %.2fx step time (the recorder's rule in a PyTorch\n"
              "          program: as first-use, but after each launch only what its op writes, %.1f GB)\n",
              "write-sets", t.writeSets() / 1e9, ratio(t.writeSets()), t.outputsOnly / 1e9);
  std::printf("  %-10s %7.1f GB hashed per step  -> %.2fx step time (the recorder's rule in a PyTorch\n"
              "          program since: as write-sets, but a tensor the op made is not hashed before the\n"
              "          launch, %.1f GB less)\n",
              "made", t.madeTensors() / 1e9, ratio(t.madeTensors()), t.writtenBefore / 1e9);
  std::printf("  %-7s %10.1f GB hashed per step  -> %.2fx step time (exact ranges, outputs only: inputs\n"
              "          are known equal from the write history)\n",
              "outputs", t.outputsOnly / 1e9, ratio(t.outputsOnly));
}

}  // namespace

int main(int argc, char** argv) {
  double tbps = 2.5;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--hash-tbps") == 0) tbps = std::atof(argv[i + 1]);
  for (bool expandable : {false, true}) {
    std::printf("== %s\n", expandable ? "expandable_segments:True" : "default caching allocator");
    report("ResNet-50-like (batch 256, AMP)", 100.0, tbps, run(expandable, [](auto a, auto f, auto l) { resnet50(a, f, l); }));
    report("transformer-like (24 layers, 16k tokens, bf16)", 250.0, tbps,
           run(expandable, [](auto a, auto f, auto l) { transformer(a, f, l); }));
  }
  return 0;
}
