// Writes examples/synthetic.gpurr: a small, synthetic trace of one training
// step (allocations, a module load, a host-to-device copy with its data, a
// memset, kernel launches with digests computed by the CPU buffer hash,
// algorithm and RNG annotations, a graph launch, synchronisation and frees),
// each launch, copy and memset with the origin gpurr's framework layer
// records in a PyTorch program: its op, module, line of train.py and step.
// Everything is fixed, so the output is the same bytes on every run; a test
// regenerates it and compares it with the checked-in copy.
//
//   make_example_trace OUTPUT_DIR
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "trace_format/hash.h"
#include "trace_format/trace.h"

using namespace gpurr::trace;

namespace {

// Deterministic bytes: a 64-bit LCG, so buffers look like data, not zeros.
std::vector<uint8_t> bytesOf(uint64_t seed, size_t n) {
  std::vector<uint8_t> out(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    out[i] = static_cast<uint8_t>(x >> 56);
  }
  return out;
}

struct Buffer {
  uint32_t ordinal;
  uint64_t address;
  uint64_t size;
};

RangeDigest digestOf(const Buffer& b, uint64_t contentSeed, bool withChunks = false) {
  const std::vector<uint8_t> bytes = bytesOf(contentSeed, b.size);
  RangeDigest r;
  r.range = {b.address, b.size, b.ordinal, 0};
  r.chunkDigests = gpurr::hash::chunkDigests(bytes);
  r.digest = gpurr::hash::foldChunks(r.chunkDigests, b.size);
  if (!withChunks) r.chunkDigests.clear();
  return r;
}

// Parameter bytes: the given pointers, then `scalars` 4-byte values.
KernelLaunch kernel(const std::string& name, std::vector<const Buffer*> ptrs,
                    std::vector<uint32_t> scalars) {
  KernelLaunch k;
  k.context = 0x5581a0c0;
  k.stream = 0x7;
  k.module = 1;
  k.function = name;
  for (const Buffer* b : ptrs) appendPointerParam(k, b->address, b->ordinal, 0);
  for (uint32_t v : scalars) appendParam(k, &v, 4, 4);
  return k;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_example_trace OUTPUT_DIR\n");
    return 2;
  }
  Header h;
  h.toolVersion = "0.1.0";
  h.commandLine = {"python", "train.py", "--steps", "1"};
  h.workingDirectory = "/home/user/project";
  h.environment = {{"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}, {"PYTHONHASHSEED", "0"}};
  h.hostname = "example-host";
  h.pid = 4242;
  h.rank = 0;
  h.startTimeNs = 1795000000ULL * 1000000000ULL;
  h.gpus = {{0, "NVIDIA H100 80GB HBM3", "GPU-00000000-1111-2222-3333-444444444444", 132, 9, 0,
             85520809984ULL, "0000:19:00.0"}};
  h.driverVersion = 13000;
  h.cudaRuntimeVersion = 13000;
  h.cudnnVersion = 91300;
  h.cublasVersion = 130100;
  h.libraries = {{"torch", "2.11.0+cu130"}};

  WriterOptions options;
  options.blockBytes = 2048;  // several blocks even for a small trace
  TraceWriter w(argv[1], h, options);
  uint64_t seq = 0, launches = 0;
  // `origin`: where the operation came from in train.py, one training step
  // (step 0), the launches before it counted here.
  auto add = [&](Payload p, std::optional<Origin> origin = std::nullopt) {
    if (origin) {
      origin->step = 0;
      origin->stepLaunch = launches;
    }
    if (std::holds_alternative<KernelLaunch>(p)) ++launches;
    w.append(Event{seq, 1000 + seq * 250000, 0, std::move(p), std::move(origin)});
    ++seq;
  };
  // train.py:
  //   12        torch.nn.init.constant_(self.proj.weight, 0.01)
  //   16        hidden = self.proj(batch)
  //   17        hidden = self.drop(hidden)
  //   18        return self.embed(hidden)        # an index_select
  //   22    optimizer.zero_grad(set_to_none=False)
  //   24    batch = batch.to("cuda", non_blocking=True)
  //   27    grad = model.embed.weight.grad.cpu()
  const std::string file = "/home/user/project/train.py";
  // The ops named with a trailing '_' here update their self, as their schemas say (Origin.inPlace).
  auto forward = [&](std::string op, std::vector<std::string> stack, std::string module, uint32_t line) {
    const InPlace inPlace = op.ends_with('_') ? InPlace::kYes : InPlace::kNo;
    return Origin{std::move(op), std::move(stack), Phase::kForward, "", std::move(module), file, line, 0, 0, inPlace};
  };

  const Buffer weights{1, 0x7f1200000000, 256 * 1024};
  const Buffer batch{2, 0x7f1200040000, 16 * 1024};
  const Buffer hidden{3, 0x7f1200050000, 128 * 1024};
  const Buffer out{4, 0x7f1200070000, 16 * 1024};
  for (const Buffer* b : {&weights, &batch, &hidden, &out}) {
    add(Allocation{b->ordinal, b->address, b->size, AllocationKind::kDevice, 0, 0});
  }
  const std::vector<uint8_t> cubin = bytesOf(99, 3000);
  add(ModuleLoad{1, w.putBlob(cubin), 90, gpurr::hash::hashBuffer(cubin)});

  // Weights filled on the device, the batch copied from the host.
  KernelLaunch fill = kernel("_Z11fill_kernelPfmf", {&weights}, {262144 / 4, 0x3c23d70a});
  fill.grid = {256, 1, 1};
  fill.block = {256, 1, 1};
  fill.outputs = {digestOf(weights, 1)};
  add(fill, forward("aten::fill_", {"aten::fill_"}, "", 12));

  const std::vector<uint8_t> batchBytes = bytesOf(2, batch.size);
  Memcpy copy;
  copy.kind = MemcpyKind::kHostToDevice;
  copy.stream = 0x7;
  copy.async = true;
  copy.size = batch.size;
  copy.dst = {batch.address, batch.size, batch.ordinal, 0};
  copy.src = {0x55d0c0de0000, batch.size, 0, 0};
  copy.digest = gpurr::hash::hashBuffer(batchBytes);
  copy.data = w.putBlob(batchBytes, BlobEncoding::kBytePlanes4);
  add(copy, forward("aten::copy_", {"aten::to", "aten::_to_copy", "aten::copy_"}, "", 24));

  Memset zero;
  zero.stream = 0x7;
  zero.async = true;
  zero.dst = {out.address, out.size, out.ordinal, 0};
  zero.digest = gpurr::hash::hashBuffer(std::vector<uint8_t>(out.size, 0));
  add(zero, forward("aten::zero_", {"Optimizer.zero_grad#SGD.zero_grad", "aten::zero_"}, "", 22));

  KernelLaunch gemm = kernel(
      "sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize128x128x32_warpgroupsize1x1x1_execute_"
      "segment_k_off_kernel__5x_cublas",
      {&batch, &weights, &hidden}, {256, 512, 128});
  gemm.api = LaunchApi::kLaunchKernelEx;
  gemm.grid = {4, 2, 1};
  gemm.block = {384, 1, 1};
  gemm.cluster = {2, 1, 1};
  gemm.sharedMemBytes = 232448;
  gemm.attributes = {{4, {2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0}}};
  gemm.inputs = {digestOf(batch, 2), digestOf(weights, 1, true)};
  gemm.outputs = {digestOf(hidden, 3, true)};
  gemm.annotations = {AlgorithmChoice{"cublasLt", "cublasLtMatmul", "algo=66 tile=128x128x32 splitK=1 "
                                      "reduction=none stages=4",
                                      {{"m", "256"}, {"n", "512"}, {"k", "128"}, {"type", "f32"},
                                       {"math", "tf32"}, {"workspace", "4194304"}},
                                      {}}};
  add(gemm, forward("aten::mm", {"aten::linear", "aten::matmul", "aten::mm"}, "model.proj", 16));

  // Dropout: PyTorch passes its Philox seed and offset by value.
  KernelLaunch dropout = kernel("_Z14dropout_kernelPKfPfmyy", {&hidden, &hidden}, {32768});
  dropout.grid = {128, 1, 1};
  dropout.block = {256, 1, 1};
  dropout.inputs = {digestOf(hidden, 3)};
  dropout.outputs = {digestOf(hidden, 4)};
  dropout.annotations = {RngState{"philox", "cuda:0", 1234, 8, 24}};
  add(dropout, forward("aten::native_dropout", {"aten::dropout", "aten::native_dropout"}, "model.drop", 17));

  KernelLaunch reduce = kernel("_Z13reduce_atomicPKfPfm", {&hidden, &out}, {32768});
  reduce.grid = {64, 1, 1};
  reduce.block = {512, 1, 1};
  reduce.inputs = {digestOf(hidden, 4), digestOf(out, 0)};
  reduce.outputs = {digestOf(out, 5)};
  // The backward of line 18's index_select accumulates into the gradient.
  add(reduce, Origin{"aten::index_add_",
                     {"autograd::engine::evaluate_function: IndexSelectBackward0", "IndexSelectBackward0",
                      "aten::index_select_backward", "aten::index_add_"},
                     Phase::kBackward, "aten::index_select", "model.embed", file, 18, 0, 0, InPlace::kYes});

  add(Sync{SyncKind::kEventRecord, 0x7, 0xe1});
  GraphLaunch graph;
  graph.graphExec = 0x9a00;
  graph.stream = 0x7;
  graph.nodeCount = 12;
  graph.inputs = {digestOf(out, 5)};
  graph.outputs = {digestOf(out, 6)};
  add(graph);

  Memcpy back;
  back.kind = MemcpyKind::kDeviceToHost;
  back.stream = 0x7;
  back.size = out.size;
  back.dst = {0x55d0c0df0000, out.size, 0, 0};
  back.src = {out.address, out.size, out.ordinal, 0};
  back.digest = digestOf(out, 6).digest;
  add(back, forward("aten::copy_", {"aten::to", "aten::_to_copy", "aten::copy_"}, "", 27));
  add(Sync{SyncKind::kStreamSynchronize, 0x7, 0});
  for (const Buffer* b : {&out, &hidden, &batch, &weights}) add(Free{b->ordinal, b->address});
  w.close();
  std::printf("wrote %llu events to %s\n", static_cast<unsigned long long>(w.eventsWritten()), argv[1]);
  return 0;
}
