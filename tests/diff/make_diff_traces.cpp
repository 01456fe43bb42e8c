// Writes the trace pairs of the golden diff tests (tests/diff/cases/*): for
// each case a small, synthetic training step recorded twice, the second run
// differing in exactly the way the case is named after. Everything is fixed,
// so the output is the same bytes on every run; a test regenerates the pairs
// and compares them with the checked-in copies.
//
// Most cases carry the origin that gpurr's framework layer records in a
// PyTorch program (op, module, source line of train.py, training step) on
// their launches, copies and sets; uninitialised_memory, pointer_parameter
// and algorithm_choice keep the FrameworkOp annotations of traces written
// without one.
//
//   make_diff_traces OUTPUT_DIR
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "trace_format/hash.h"
#include "trace_format/trace.h"

using namespace gpurr::trace;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kChunk = 1024;  // hash chunk size these traces declare

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

// Float32 values in [-1, 1), as a framework's tensors hold.
std::vector<uint8_t> floatsOf(uint64_t seed, size_t bytes) {
  std::vector<uint8_t> raw = bytesOf(seed, bytes);
  std::vector<uint8_t> out(bytes);
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    uint32_t r;
    std::memcpy(&r, &raw[i], 4);
    const float f = static_cast<float>(r) / 2147483648.0f - 1.0f;
    std::memcpy(&out[i], &f, 4);
  }
  return out;
}

// Adds `ulps` to the float at each of `indices`: what a different order of
// floating-point additions does to a sum.
std::vector<uint8_t> perturbed(std::vector<uint8_t> bytes, const std::vector<size_t>& indices,
                               int32_t ulps = 1) {
  for (size_t i : indices) {
    int32_t v;
    std::memcpy(&v, &bytes[i * 4], 4);
    v += ulps;
    std::memcpy(&bytes[i * 4], &v, 4);
  }
  return bytes;
}

// The loss a reduction of `out` gives: different whenever `out` differs.
std::vector<uint8_t> lossOf(const std::vector<uint8_t>& out) {
  return floatsOf(gpurr::hash::hashBuffer(out), 1024);
}

struct Buffer {
  uint32_t ordinal;
  uint64_t size;
};

// One recorded run being written.
class Run {
 public:
  Run(const fs::path& dir, Header header, bool second)
      : second_(second), writer_(dir, header, WriterOptions{4096, 1, false, 8}) {}

  uint64_t address(const Buffer& b) const {
    return (second_ ? 0x7f3400000000ULL : 0x7f1200000000ULL) + uint64_t{b.ordinal} * 0x100000;
  }
  uint64_t stream() const { return second_ ? 0x5603a0 : 0x55c120; }

  // Training steps completed, for the origins of what follows.
  int64_t step = 0;

  // `origin`: the op behind a launch, copy or set, when the case records
  // one; its step and the launches of the step before it are filled in
  // here. Such a launch has no FrameworkOp annotation (the origin says it).
  void add(Payload p, std::optional<Origin> origin = std::nullopt) {
    if (origin) {
      origins_ = true;
      origin->step = step;
      origin->stepLaunch = launches_;
      if (auto* k = std::get_if<KernelLaunch>(&p)) {
        std::erase_if(k->annotations, [](const Annotation& a) { return std::holds_alternative<FrameworkOp>(a); });
      }
    }
    if (std::holds_alternative<KernelLaunch>(p)) ++launches_;
    writer_.append(Event{seq_, 1000 + seq_ * 125000, 0, std::move(p), std::move(origin)});
    ++seq_;
  }

  void alloc(const Buffer& b) {
    add(Allocation{b.ordinal, address(b), b.size, AllocationKind::kDevice, 0, 0});
  }

  // `bytes` are those of `b` from `offset` to its end.
  RangeDigest digest(const Buffer& b, const std::vector<uint8_t>& bytes, bool snapshot = false,
                     uint64_t offset = 0) {
    RangeDigest r;
    r.range = {address(b) + offset, b.size - offset, b.ordinal, offset};
    for (uint64_t c = 0; c * kChunk < bytes.size(); ++c) {
      const size_t n = std::min<size_t>(kChunk, bytes.size() - c * kChunk);
      r.chunkDigests.push_back(gpurr::hash::hashChunk({bytes.data() + c * kChunk, n}, c));
    }
    r.digest = gpurr::hash::foldChunks(r.chunkDigests, bytes.size());
    if (snapshot) r.snapshot = writer_.putBlob(bytes, BlobEncoding::kBytePlanes4);
    return r;
  }

  // Parameter bytes: the given pointers, then 4-byte scalars.
  KernelLaunch kernel(const std::string& name, std::vector<const Buffer*> ptrs,
                      std::vector<uint32_t> scalars, Dim3 grid, Dim3 block) {
    KernelLaunch k;
    k.context = 0x5581a0c0;
    k.stream = stream();
    k.module = 0;
    k.function = name;
    k.grid = grid;
    k.block = block;
    for (const Buffer* b : ptrs) appendPointerParam(k, address(*b), b->ordinal, 0);
    for (uint32_t v : scalars) appendParam(k, &v, 4, 4);
    return k;
  }

  void copyIn(const Buffer& b, const std::vector<uint8_t>& bytes, std::optional<Origin> origin = std::nullopt) {
    Memcpy m;
    m.kind = MemcpyKind::kHostToDevice;
    m.stream = stream();
    m.async = true;
    m.size = b.size;
    m.dst = {address(b), b.size, b.ordinal, 0};
    m.src = {second_ ? 0x55d0c1de0000ULL : 0x55d0c0de0000ULL, b.size, 0, 0};
    m.digest = gpurr::hash::hashBuffer(bytes);
    m.data = writer_.putBlob(bytes, BlobEncoding::kBytePlanes4);
    add(m, std::move(origin));
  }

  void copyOut(const Buffer& b, const std::vector<uint8_t>& bytes, std::optional<Origin> origin = std::nullopt) {
    Memcpy m;
    m.kind = MemcpyKind::kDeviceToHost;
    m.stream = stream();
    m.size = b.size;
    m.dst = {second_ ? 0x55d0c1df0000ULL : 0x55d0c0df0000ULL, b.size, 0, 0};
    m.src = {address(b), b.size, b.ordinal, 0};
    m.digest = gpurr::hash::hashBuffer(bytes);
    add(m, std::move(origin));
  }

  void zero(const Buffer& b, std::optional<Origin> origin = std::nullopt) {
    Memset s;
    s.stream = stream();
    s.async = true;
    s.dst = {address(b), b.size, b.ordinal, 0};
    s.elementSize = 4;
    s.digest = gpurr::hash::hashBuffer(std::vector<uint8_t>(b.size, 0));
    add(s, std::move(origin));
  }

  void sync() { add(Sync{SyncKind::kStreamSynchronize, stream(), 0}); }

  void nextStep() {
    ++step;
    launches_ = 0;
  }

  // A run with origins stepped its optimizer after each step (unless
  // `optimizer` is false): the index says how many steps the layer saw.
  bool optimizer = true;
  void close() {
    if (origins_ && optimizer) writer_.setLayerSteps(LayerSteps{static_cast<uint64_t>(step) + 1, 0, 0, 1, 0});
    writer_.close();
  }

 private:
  bool second_;
  bool origins_ = false;
  TraceWriter writer_;
  uint64_t seq_ = 0;
  uint64_t launches_ = 0;  // the step's launches
};

Header header(bool second) {
  Header h;
  h.toolVersion = "0.1.0";
  h.commandLine = {"python", "train.py", "--steps", "1"};
  h.workingDirectory = "/home/user/project";
  h.environment = {{"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}, {"PYTHONHASHSEED", "0"}};
  h.hostname = "trainer-01";
  h.pid = second ? 5120 : 4242;
  h.startTimeNs = (second ? 1795000600ULL : 1795000000ULL) * 1000000000ULL;
  h.gpus = {{0, "NVIDIA H100 80GB HBM3", second ? "GPU-11111111-2222-3333-4444-555555555555"
                                                : "GPU-00000000-1111-2222-3333-444444444444",
             132, 9, 0, 85520809984ULL, "0000:19:00.0"}};
  h.driverVersion = 13000;
  h.cudaRuntimeVersion = 13000;
  h.cudnnVersion = 91300;
  h.cublasVersion = 130100;
  h.libraries = {{"torch", "2.11.0+cu130"}};
  h.options.hashChunkBytes = kChunk;
  h.options.captureHostData = true;
  return h;
}

const std::string kIndexAdd = "_ZN2at6native19indexFuncLargeIndexIfEEvPfPKfPKll";
const std::string kRelu = "_ZN2at6native11relu_kernelIfEEvPfPKfl";
const std::string kSum = "_ZN2at6native10sum_kernelIfEEvPfPKfl";
const std::string kBias = "_Z8bias_addPfPKfi";
const std::string kSoftmax = "_Z14softmax_kernelPfPKfi";
const std::string kHist = "_ZN2at4cuda17kernelHistogram1DIfEEvPfPKfllff";
const std::string kDropout =
    "_ZN2at6native20fused_dropout_kernelIfEEvPKfPfPhmfN2at15PhiloxCudaStateE";
// Its generator's state read from device memory (PhiloxCudaState with a
// seed pointer, as under CUDA graph capture): no parameter carries it.
const std::string kBernoulli = "_ZN2at6native16bernoulli_kernelIfEEvPfPKml";
const std::string kCurandPhilox =
    "_ZN6curand6detail26generate_seed_pseudo_philoxEP22curandPhilox4x32_10_stPfmyy";
const std::string kAdam = "_Z11adam_updatePfS_S_PKfffffi";
const std::string kGemm =
    "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cublas";
const std::string kGemmSplitK =
    "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x128x32_splitK_kernel__5x_cublas";
const std::string kConvImplicit =
    "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_cudnn";
const std::string kConvFftIn = "cudnn_fft_r2c_nhwc_input_transform_kernel";
const std::string kConvFftGemm = "cudnn_fft_cgemm_batched_kernel";
const std::string kConvFftOut = "cudnn_fft_c2r_nhwc_output_transform_kernel";

const Buffer kWeights{1, 4096}, kBatch{2, 4096}, kHidden{3, 4096}, kOut{4, 4096},
    kIndex{5, 1024}, kWorkspace{6, 4096}, kLoss{7, 1024};

// Where each operation comes from in the recorded program, train.py:
//
//   11        self.fc = torch.nn.Linear(64, 64, bias=False)
//   12        torch.nn.init.constant_(self.fc.weight, 0.01)
//   15    def forward(self, batch, index):
//   16        hidden = self.drop(torch.relu_(self.fc(batch)))
//   17        return self.embed(hidden, index)          # an index_select
//   24    batch = batch.to("cuda", non_blocking=True)
//   25    index = index.to("cuda", non_blocking=True)
//   27    optimizer.step()
//   28    print(model.embed.weight.grad.sum().item())
//   30    histograms = [model.fc.weight.histc(100) for _ in range(3)]
//
// The backward of line 17's index_select zeroes the gradient and adds into
// it with index_add_; a backward op carries its forward op's module and line.
namespace origin {

constexpr const char* kFile = "/home/user/project/train.py";

Origin forward(std::string op, std::vector<std::string> stack, std::string module, uint32_t line) {
  return Origin{std::move(op), std::move(stack), Phase::kForward, "", std::move(module), kFile, line, 0, 0};
}

Origin backward(std::string op, std::vector<std::string> stack, std::string forwardOp, std::string module,
                uint32_t line) {
  return Origin{std::move(op), std::move(stack), Phase::kBackward, std::move(forwardOp), std::move(module),
                kFile, line, 0, 0};
}

const std::vector<std::string> kIndexSelectBackward = {
    "autograd::engine::evaluate_function: IndexSelectBackward0", "IndexSelectBackward0",
    "aten::index_select_backward"};

std::vector<std::string> under(std::vector<std::string> outer, std::vector<std::string> inner) {
  outer.insert(outer.end(), inner.begin(), inner.end());
  return outer;
}

const Origin kFill = forward("aten::fill_", {"aten::fill_"}, "", 12);
const Origin kBatchIn = forward("aten::copy_", {"aten::to", "aten::_to_copy", "aten::copy_"}, "", 24);
const Origin kIndexIn = forward("aten::copy_", {"aten::to", "aten::_to_copy", "aten::copy_"}, "", 25);
const Origin kGemm = forward("aten::mm", {"aten::linear", "aten::matmul", "aten::mm"}, "net.fc", 16);
const Origin kRelu = forward("aten::relu_", {"aten::relu_"}, "net", 16);
const Origin kDropout = forward("aten::native_dropout", {"aten::dropout", "aten::native_dropout"}, "net.drop", 16);
const Origin kBernoulli = forward("aten::bernoulli_", {"aten::dropout", "aten::native_dropout", "aten::bernoulli_"},
                                  "net.drop", 16);
const Origin kZeroGrad = backward("aten::zero_", under(kIndexSelectBackward, {"aten::zeros", "aten::zero_"}),
                                  "aten::index_select", "net.embed", 17);
const Origin kIndexAdd = backward("aten::index_add_", under(kIndexSelectBackward, {"aten::index_add_"}),
                                  "aten::index_select", "net.embed", 17);
const Origin kAdam = forward("aten::_fused_adam_", {"Optimizer.step#Adam.step", "aten::_fused_adam_"}, "", 27);
const Origin kSum = forward("aten::sum", {"aten::sum"}, "", 28);
const Origin kItem = forward("aten::_local_scalar_dense", {"aten::item", "aten::_local_scalar_dense"}, "", 28);
const Origin kHistc = forward("aten::histc", {"aten::histc"}, "", 30);

}  // namespace origin

// The common training step: what both runs do unless a case changes it.
// `vary` lets a case change one value per stage in run B.
struct Step {
  std::vector<uint8_t> weights = floatsOf(1, kWeights.size);
  std::vector<uint8_t> batch = floatsOf(2, kBatch.size);
  std::vector<uint8_t> index = bytesOf(3, kIndex.size);
  std::vector<uint8_t> hidden = floatsOf(4, kHidden.size);
  std::vector<uint8_t> activated = floatsOf(5, kHidden.size);
  std::vector<uint8_t> out = floatsOf(6, kOut.size);
  std::vector<uint8_t> loss = floatsOf(7, kLoss.size);
};

void allocations(Run& r, bool withLoss = true) {
  for (const Buffer* b : {&kWeights, &kBatch, &kHidden, &kOut, &kIndex, &kWorkspace}) r.alloc(*b);
  if (withLoss) r.alloc(kLoss);
}

// fill weights, copy the batch and the index; with `origins`, each with its
// origin in train.py.
void prologue(Run& r, const Step& s, bool withLoss = true, bool origins = false) {
  auto from = [&](const Origin& o) { return origins ? std::optional<Origin>(o) : std::nullopt; };
  allocations(r, withLoss);
  KernelLaunch fill = r.kernel("_Z11fill_kernelPfmf", {&kWeights}, {1024, 0x3c23d70a}, {16, 1, 1}, {256, 1, 1});
  fill.outputs = {r.digest(kWeights, s.weights)};
  r.add(fill, from(origin::kFill));
  r.copyIn(kBatch, s.batch, from(origin::kBatchIn));
  r.copyIn(kIndex, s.index, from(origin::kIndexIn));
}

KernelLaunch gemm(Run& r, const Step& s) {
  KernelLaunch k = r.kernel(kGemm, {&kBatch, &kWeights, &kHidden}, {64, 64, 64}, {4, 2, 1}, {384, 1, 1});
  k.api = LaunchApi::kLaunchKernelEx;
  k.inputs = {r.digest(kBatch, s.batch), r.digest(kWeights, s.weights)};
  k.outputs = {r.digest(kHidden, s.hidden)};
  k.annotations = {AlgorithmChoice{"cublasLt", "cublasLtMatmul", "algo=21 tile=128x128x32 splitK=1",
                                   {{"m", "64"}, {"n", "64"}, {"k", "64"}, {"workspace", "4194304"}},
                                   {}},
                   FrameworkOp{"aten::mm"}};
  return k;
}

KernelLaunch relu(Run& r, const Step& s) {
  KernelLaunch k = r.kernel(kRelu, {&kHidden, &kHidden}, {1024}, {16, 1, 1}, {256, 1, 1});
  k.inputs = {r.digest(kHidden, s.hidden)};
  k.outputs = {r.digest(kHidden, s.activated)};
  k.annotations = {FrameworkOp{"aten::relu_"}};
  return k;
}

// `opReference`, when not 0: a last parameter holding a host address, as
// PyTorch's indexFuncLargeIndex passes its functor by reference (`const
// func_t& op`); it differs between two runs unless their layouts are fixed.
KernelLaunch indexAdd(Run& r, const Step& s, const std::vector<uint8_t>& result, bool check,
                      uint64_t opReference = 0) {
  KernelLaunch k = r.kernel(kIndexAdd, {&kOut, &kHidden, &kIndex}, {}, {512, 1, 1}, {128, 1, 1});
  const uint64_t dim = 1024;  // the `long` parameter
  k.params.resize(32);
  std::memcpy(k.params.data() + 24, &dim, 8);
  k.paramLayout.push_back({24, 8});
  if (opReference != 0) {
    k.params.resize(40);
    std::memcpy(k.params.data() + 32, &opReference, 8);
    k.paramLayout.push_back({32, 8});
  }
  k.inputs = {r.digest(kOut, std::vector<uint8_t>(kOut.size, 0)), r.digest(kHidden, s.activated),
              r.digest(kIndex, s.index)};
  k.outputs = {r.digest(kOut, result, true)};
  k.annotations = {FrameworkOp{"aten::index_add_"}};
  if (check) k.annotations.push_back(DeterminismCheck{50, 31});
  return k;
}

KernelLaunch sum(Run& r, const std::vector<uint8_t>& in, const std::vector<uint8_t>& loss,
                 const Buffer& lossBuffer = kLoss) {
  KernelLaunch k = r.kernel(kSum, {&lossBuffer, &kOut}, {1024, 0}, {1, 1, 1}, {512, 1, 1});
  k.inputs = {r.digest(kOut, in)};
  k.outputs = {r.digest(lossBuffer, loss)};
  k.annotations = {FrameworkOp{"aten::sum"}};
  return k;
}

using Case = std::function<void(Run& r, bool second)>;

void writePair(const fs::path& dir, const Case& body,
               const std::function<void(Header&, bool)>& headerFix = nullptr) {
  fs::create_directories(dir);
  for (bool second : {false, true}) {
    Header h = header(second);
    if (headerFix) headerFix(h, second);
    Run r(dir / (second ? "b.gpurr" : "a.gpurr"), h, second);
    body(r, second);
    r.close();
  }
}

// The whole step, with the index_add result of run B given: the forward of
// train.py's model, the backward of its index_select, and the gradient's sum
// copied back, each with its origin.
void standardStep(Run& r, const Step& s, const std::vector<uint8_t>& indexAddOut, bool check,
                  uint64_t opReference = 0) {
  prologue(r, s, true, true);
  r.add(gemm(r, s), origin::kGemm);
  r.add(relu(r, s), origin::kRelu);
  r.zero(kOut, origin::kZeroGrad);
  r.add(indexAdd(r, s, indexAddOut, check, opReference), origin::kIndexAdd);
  const std::vector<uint8_t> loss = lossOf(indexAddOut);
  r.add(sum(r, indexAddOut, loss), origin::kSum);
  r.copyOut(kLoss, loss, origin::kItem);
  r.sync();
}

void identical(const fs::path& dir) {
  writePair(dir, [](Run& r, bool) {
    const Step s;
    standardStep(r, s, s.out, false);
  });
}

void nondeterministicKernel(const fs::path& dir) {
  writePair(dir, [](Run& r, bool second) {
    const Step s;
    // Run B's atomics added in another order: a few floats differ by an ulp,
    // in chunks 1, 2 and 3 of the output.
    const auto out = second ? perturbed(s.out, {300, 301, 700, 1000}) : s.out;
    // Recorded with the layout randomised: the functor's host address
    // differs too. Run B's determinism check proves the kernel itself
    // nondeterministic all the same.
    standardStep(r, s, out, second, second ? 0x7f745f2d73d2 : 0x7f4c390d73d2);
  });
}

// Step 1 of run B zeroes the gradient after index_add_ instead of before it
// (the same operations, in another order): index_add_ adds to step 0's
// gradient, and the sum reads zeros.
void reordered(const fs::path& dir) {
  writePair(dir, [](Run& r, bool second) {
    const Step s;
    standardStep(r, s, s.out, false);
    r.nextStep();
    r.add(gemm(r, s), origin::kGemm);
    r.add(relu(r, s), origin::kRelu);
    if (!second) r.zero(kOut, origin::kZeroGrad);
    const std::vector<uint8_t> added = second ? floatsOf(67, kOut.size) : s.out;
    KernelLaunch k = indexAdd(r, s, added, false);
    if (second) k.inputs[0] = r.digest(kOut, s.out);  // step 0's gradient, not zeroed
    r.add(k, origin::kIndexAdd);
    if (second) r.zero(kOut, origin::kZeroGrad);
    const std::vector<uint8_t> summed = second ? std::vector<uint8_t>(kOut.size, 0) : s.out;
    const std::vector<uint8_t> loss = lossOf(summed);
    r.add(sum(r, summed, loss), origin::kSum);
    r.copyOut(kLoss, loss, origin::kItem);
    r.sync();
  });
}

void environment(const fs::path& dir) {
  writePair(
      dir,
      [](Run& r, bool second) {
        const Step s;
        prologue(r, s, true, true);
        KernelLaunch g = gemm(r, s);
        if (second) {
          // Without a fixed workspace, cuBLAS reduced the split-K partial sums
          // in another order.
          g.function = kGemmSplitK;
          g.outputs = {r.digest(kHidden, perturbed(s.hidden, {7, 300, 600, 1000}))};
        } else {
          g.function = kGemmSplitK;
        }
        std::get<AlgorithmChoice>(g.annotations[0]).algorithm = "algo=6 tile=64x128x32 splitK=4";
        r.add(g, origin::kGemm);
        KernelLaunch k = relu(r, s);
        if (second) {
          k.inputs = {g.outputs[0]};
          k.outputs = {r.digest(kHidden, perturbed(s.activated, {7, 300, 600, 1000}))};
        }
        r.add(k, origin::kRelu);
        r.sync();
      },
      [](Header& h, bool second) {
        if (second) h.environment = {{"PYTHONHASHSEED", "0"}};
      });
}

void hostInput(const fs::path& dir) {
  writePair(
      dir,
      [](Run& r, bool second) {
        Step s;
        // Run B's DataLoader produced the batch in another order: the second
        // half of the batch comes first.
        if (second) std::rotate(s.batch.begin(), s.batch.begin() + 2048, s.batch.end());
        if (second) s.hidden = floatsOf(40, kHidden.size), s.activated = floatsOf(50, kHidden.size);
        const auto out = second ? floatsOf(60, kOut.size) : s.out;
        standardStep(r, s, out, false);
      },
      [](Header& h, bool second) {
        if (second) h.environment = {{"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}};
      });
}

void rngState(const fs::path& dir) {
  writePair(dir, [](Run& r, bool second) {
    const Step s;
    prologue(r, s, true, true);
    r.add(gemm(r, s), origin::kGemm);
    // Dropout: PyTorch passes PhiloxCudaState (seed, offset) by value.
    KernelLaunch k = r.kernel(kDropout, {&kHidden, &kOut, &kWorkspace}, {}, {16, 1, 1}, {256, 1, 1});
    const uint64_t n = 1024, seed = second ? 2718281828ULL : 1234ULL, offset = 8;
    const float p = 0.1f;
    appendParam(k, &n, 8, 8);
    appendParam(k, &p, 4, 4);
    uint8_t philox[24] = {};
    std::memcpy(philox, &seed, 8);
    std::memcpy(philox + 8, &offset, 8);
    const uint32_t philoxAt = appendParam(k, philox, 24, 8);
    k.inputs = {r.digest(kHidden, s.hidden)};
    k.outputs = {r.digest(kOut, second ? floatsOf(61, kOut.size) : s.out),
                 r.digest(kWorkspace, second ? bytesOf(62, kWorkspace.size) : bytesOf(12, kWorkspace.size))};
    k.annotations = {RngState{"philox", "cuda:0", seed, offset, philoxAt}};
    r.add(k, origin::kDropout);
    const auto out = second ? floatsOf(61, kOut.size) : s.out;
    const std::vector<uint8_t> loss = lossOf(out);
    r.add(sum(r, out, loss), origin::kSum);
    r.copyOut(kLoss, loss, origin::kItem);
    r.sync();
  });
}

// Dropout's mask drawn by aten::bernoulli_ into the buffer torch.empty_like
// gave it (its old contents, hashed at its first use, differ too, though
// the kernel reads none of them), with the generator's state read from
// device memory: no parameter differs, and the trace holds no state.
void rngUnrecorded(const fs::path& dir) {
  writePair(dir, [](Run& r, bool second) {
    const Step s;
    prologue(r, s, true, true);
    r.add(gemm(r, s), origin::kGemm);
    KernelLaunch k = r.kernel(kBernoulli, {&kWorkspace, &kHidden}, {1024}, {16, 1, 1}, {256, 1, 1});
    k.inputs = {r.digest(kWorkspace, bytesOf(second ? 91 : 90, kWorkspace.size))};
    const auto mask = bytesOf(second ? 63 : 13, kWorkspace.size);
    k.outputs = {r.digest(kWorkspace, mask)};
    r.add(k, origin::kBernoulli);
    r.sync();
  });
}

// aten::fill_ into the buffer torch.empty_like gave it: its old contents,
// hashed at its first use, differ, and so does what it writes, with the
// same parameters: the kernel, since a fill reads none of what it
// overwrites.
void fillOldContents(const fs::path& dir) {
  writePair(dir, [](Run& r, bool second) {
    const Step s;
    prologue(r, s, true, true);
    KernelLaunch k = r.kernel("_Z11fill_kernelPfmf", {&kWorkspace}, {1024, 0x3c23d70a}, {16, 1, 1}, {256, 1, 1});
    k.inputs = {r.digest(kWorkspace, bytesOf(second ? 93 : 92, kWorkspace.size))};
    k.outputs = {r.digest(kWorkspace, bytesOf(second ? 65 : 15, kWorkspace.size))};
    r.add(k, origin::kFill);
    r.sync();
  });
}

// The same in a program that updates its weights by hand (no torch.optim
// optimizer): the layer counted no training step, and every operation is
// said to be in step 0.
void noOptimizerStep(const fs::path& dir) {
  writePair(dir, [](Run& r, bool second) {
    r.optimizer = false;
    const Step s;
    prologue(r, s, true, true);
    KernelLaunch k = r.kernel(kBernoulli, {&kWorkspace, &kHidden}, {1024}, {16, 1, 1}, {256, 1, 1});
    k.inputs = {r.digest(kWorkspace, bytesOf(90, kWorkspace.size))};
    k.outputs = {r.digest(kWorkspace, bytesOf(second ? 63 : 13, kWorkspace.size))};
    r.add(k, origin::kBernoulli);
    r.sync();
  });
}

// A cuRAND generator seeded differently: the recorder's wrapper labels the
// generation kernel with the generator's state; cuRAND passes seed and
// offset by value at a place it does not publish.
void curandState(const fs::path& dir) {
  writePair(dir, [](Run& r, bool second) {
    const Step s;
    prologue(r, s);
    const uint64_t seed = second ? 5678ULL : 1234ULL, offset = 0, n = kWorkspace.size / 4;
    KernelLaunch k = r.kernel(kCurandPhilox, {&kWorkspace}, {}, {64, 1, 1}, {256, 1, 1});
    for (uint64_t v : {n, seed, offset}) appendParam(k, &v, 8, 8);
    k.outputs = {r.digest(kWorkspace, bytesOf(second ? 72 : 71, kWorkspace.size))};
    k.annotations = {RngState{"curand", "PHILOX4_32_10 ordering=default", seed, offset, 0}};
    r.add(k);
    r.add(gemm(r, s));
    r.sync();
  });
}

void scalarParameters(const fs::path& dir) {
  writePair(dir, [](Run& r, bool second) {
    const Step s;
    // Adam: run B's step counter was restored from a checkpoint one step off
    // (its origins say so too).
    r.step = second ? 101 : 100;
    prologue(r, s, true, true);
    r.add(gemm(r, s), origin::kGemm);
    const float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
    uint32_t f[4];
    std::memcpy(&f[0], &lr, 4);
    std::memcpy(&f[1], &beta1, 4);
    std::memcpy(&f[2], &beta2, 4);
    std::memcpy(&f[3], &eps, 4);
    const uint32_t step = second ? 101 : 100;
    KernelLaunch k = r.kernel(kAdam, {&kWeights, &kOut, &kWorkspace, &kHidden},
                              {f[0], f[1], f[2], f[3], step}, {16, 1, 1}, {256, 1, 1});
    k.inputs = {r.digest(kWeights, s.weights), r.digest(kHidden, s.hidden)};
    k.outputs = {r.digest(kWeights, second ? floatsOf(71, kWeights.size) : floatsOf(70, kWeights.size))};
    r.add(k, origin::kAdam);
    r.sync();
  });
}

// A pointer parameter that points elsewhere: run B adds the bias from a
// slice of the weights 32 floats (128 bytes) further in, same kernel, same
// launch configuration.
void pointerParameter(const fs::path& dir) {
  writePair(dir, [](Run& r, bool second) {
    const Step s;
    prologue(r, s);
    r.add(gemm(r, s));
    const uint64_t at = second ? 0x80 : 0;
    KernelLaunch k;
    k.context = 0x5581a0c0;
    k.stream = r.stream();
    k.function = kBias;
    k.grid = {16, 1, 1};
    k.block = {256, 1, 1};
    appendPointerParam(k, r.address(kHidden), kHidden.ordinal, 0);
    appendPointerParam(k, r.address(kWeights) + at, kWeights.ordinal, at);
    const uint32_t n = 1024;
    appendParam(k, &n, 4, 4);
    // Input ranges run from each pointer to its allocation's end.
    const RangeDigest bias =
        r.digest(kWeights, std::vector<uint8_t>(s.weights.begin() + at, s.weights.end()), false, at);
    const auto biased = second ? floatsOf(111, kHidden.size) : floatsOf(110, kHidden.size);
    k.inputs = {r.digest(kHidden, s.hidden), bias};
    k.outputs = {r.digest(kHidden, biased)};
    k.annotations = {FrameworkOp{"aten::add_"}};
    r.add(k);
    KernelLaunch act = relu(r, s);
    const auto activated = second ? floatsOf(113, kHidden.size) : floatsOf(112, kHidden.size);
    act.inputs = {r.digest(kHidden, biased)};
    act.outputs = {r.digest(kHidden, activated)};
    r.add(act);
    const std::vector<uint8_t> loss = lossOf(activated);
    KernelLaunch total = r.kernel(kSum, {&kLoss, &kHidden}, {1024, 0}, {1, 1, 1}, {512, 1, 1});
    total.inputs = {r.digest(kHidden, activated)};
    total.outputs = {r.digest(kLoss, loss)};
    total.annotations = {FrameworkOp{"aten::sum"}};
    r.add(total);
    r.copyOut(kLoss, loss);
    r.sync();
  });
}

void algorithmChoice(const fs::path& dir) {
  writePair(dir, [](Run& r, bool second) {
    const Step s;
    // The loss buffer is allocated after the convolution, so run B's extra
    // FFT workspace shifts its ordinal (7 in run A, 8 in run B): the diff
    // maps B's allocations onto A's and stays aligned.
    prologue(r, s, false);
    const std::vector<AlgorithmCandidate> tried = {{"engine=3", 0.041f}, {"engine=12", 0.039f}, {"engine=0", 0.093f}};
    const auto convOut = second ? perturbed(s.hidden, {5, 6, 511, 800}) : s.hidden;
    if (!second) {
      KernelLaunch k = r.kernel(kConvImplicit, {&kBatch, &kWeights, &kHidden}, {64, 3, 3}, {8, 4, 1}, {256, 1, 1});
      k.inputs = {r.digest(kBatch, s.batch), r.digest(kWeights, s.weights)};
      k.outputs = {r.digest(kHidden, convOut)};
      k.annotations = {AlgorithmChoice{"cudnn", "cudnnBackendExecute", "engine=3 (implicit GEMM)",
                                       {{"op", "convolution_fwd"}, {"layout", "NHWC"}}, tried},
                       FrameworkOp{"aten::cudnn_convolution"}};
      r.add(k);
    } else {
      // cudnn.benchmark timed engine 12 (FFT) faster this time: three kernels
      // and a workspace of their own.
      const Buffer fft{7, 8192};
      r.alloc(fft);
      const AlgorithmChoice choice{"cudnn", "cudnnBackendExecute", "engine=12 (FFT)",
                                   {{"op", "convolution_fwd"}, {"layout", "NHWC"}}, tried};
      KernelLaunch in = r.kernel(kConvFftIn, {&kBatch, &fft}, {64}, {16, 1, 1}, {256, 1, 1});
      in.inputs = {r.digest(kBatch, s.batch)};
      in.outputs = {r.digest(fft, bytesOf(80, fft.size))};
      in.annotations = {choice, FrameworkOp{"aten::cudnn_convolution"}};
      r.add(in);
      KernelLaunch g = r.kernel(kConvFftGemm, {&fft, &kWeights, &fft}, {64}, {32, 1, 1}, {256, 1, 1});
      g.inputs = {r.digest(fft, bytesOf(80, fft.size)), r.digest(kWeights, s.weights)};
      g.outputs = {r.digest(fft, bytesOf(81, fft.size))};
      r.add(g);
      KernelLaunch out = r.kernel(kConvFftOut, {&fft, &kHidden}, {64}, {16, 1, 1}, {256, 1, 1});
      out.inputs = {r.digest(fft, bytesOf(81, fft.size))};
      out.outputs = {r.digest(kHidden, convOut)};
      r.add(out);
      r.add(Free{fft.ordinal, r.address(fft)});
    }
    // The runs agree on the path again: relu, index_add, sum.
    KernelLaunch k = relu(r, s);
    const auto activated = second ? perturbed(s.activated, {5, 6, 511, 800}) : s.activated;
    k.inputs = {r.digest(kHidden, convOut)};
    k.outputs = {r.digest(kHidden, activated)};
    r.add(k);
    r.zero(kOut);
    Step t = s;
    t.activated = activated;
    const auto out = second ? floatsOf(66, kOut.size) : s.out;
    r.add(indexAdd(r, t, out, false));
    const Buffer lossBuffer = second ? Buffer{8, kLoss.size} : kLoss;
    r.alloc(lossBuffer);
    const std::vector<uint8_t> loss = lossOf(out);
    r.add(sum(r, out, loss, lossBuffer));
    r.copyOut(lossBuffer, loss);
    r.sync();
  });
}

void uninitialisedMemory(const fs::path& dir) {
  writePair(dir, [](Run& r, bool second) {
    const Step s;
    prologue(r, s);
    r.add(gemm(r, s));
    // softmax reads a scratch buffer (torch.empty) that nothing wrote: it
    // holds whatever the previous user of the memory left there.
    const auto garbage = bytesOf(second ? 91 : 90, kWorkspace.size);
    KernelLaunch k = r.kernel(kSoftmax, {&kOut, &kHidden, &kWorkspace}, {1024}, {16, 1, 1}, {256, 1, 1});
    k.inputs = {r.digest(kHidden, s.hidden), r.digest(kWorkspace, garbage)};
    const auto out = second ? floatsOf(93, kOut.size) : floatsOf(92, kOut.size);
    k.outputs = {r.digest(kOut, out)};
    k.annotations = {FrameworkOp{"aten::_softmax"}};
    r.add(k);
    const std::vector<uint8_t> loss = lossOf(out);
    r.add(sum(r, out, loss));
    r.copyOut(kLoss, loss);
    r.sync();
  });
}

void twoIndependent(const fs::path& dir) {
  writePair(dir, [](Run& r, bool second) {
    const Step s;
    const auto out = second ? perturbed(s.out, {10, 11}) : s.out;
    standardStep(r, s, out, false);
    // Three unrelated histograms of the weights, from one line: their
    // atomics differ too (one independent divergence listed, with two more
    // like it).
    for (uint64_t i = 0; i < 3; ++i) {
      KernelLaunch h = r.kernel(kHist, {&kWorkspace, &kWeights}, {100, 0, 0, 0}, {64, 1, 1}, {256, 1, 1});
      h.inputs = {r.digest(kWeights, s.weights)};
      h.outputs = {r.digest(kWorkspace, floatsOf(100 + 2 * i + (second ? 1 : 0), kWorkspace.size))};
      r.add(h, origin::kHistc);
    }
    r.sync();
  });
}

void processes(const fs::path& dir) {
  for (int rank : {0, 1}) {
    for (bool second : {false, true}) {
      Header h = header(second);
      h.rank = rank;
      h.pid = h.pid + rank;
      const fs::path d = dir / (second ? "b" : "a") / ("rank" + std::to_string(rank) + ".gpurr");
      fs::create_directories(d.parent_path());
      Run r(d, h, second);
      const Step s;
      const auto out = second && rank == 1 ? perturbed(s.out, {500}) : s.out;
      standardStep(r, s, out, false);
      r.close();
    }
  }
}

// A two-rank job whose gradients are summed by NCCL: in run B, rank 1 copies
// other data to the GPU (the origin), so the all-reduce gives rank 0 another
// sum (a receiver); and rank 1 then issues its second all-reduce with half
// the count (a collective mismatch). The communicator has another id in run
// B, as NCCL's unique ids differ from run to run. With `otherCall`, nothing
// differs but rank 1's first collective in run B: a broadcast (train.py:29)
// where run A all-reduces (a collective mismatch that is rank 1's first
// divergence, a path each run took its own way).
void collectives(const fs::path& dir, bool otherCall = false) {
  const Buffer grad{1, 4096}, sum{2, 4096}, weights{3, 4096};
  uint64_t comm = 0x5eed0c0111ec71f5ULL;
  auto at = [](const char* op, uint32_t line) {
    return Origin{op, {op}, Phase::kForward, "", "", "train.py", line, 0, 0, InPlace::kUnknown};
  };
  auto allReduce = [&](Run& r, int rank, uint64_t count, uint64_t sequence, RangeDigest in, RangeDigest out,
                       bool broadcast = false) {
    Collective c;
    c.call = broadcast ? "ncclBroadcast" : "ncclAllReduce";
    c.op = broadcast ? CollectiveOp::kBroadcast : CollectiveOp::kAllReduce;
    c.communicator = comm;
    c.rank = rank;
    c.size = 2;
    c.dataType = "float32";
    c.count = count;
    c.reduceOp = broadcast ? "" : "sum";
    c.peer = broadcast ? 0 : -1;
    c.stream = r.stream();
    c.sequence = sequence;
    c.inputs = {std::move(in)};
    c.outputs = {std::move(out)};
    r.add(c, broadcast ? at("c10d::broadcast_", 29) : at("c10d::allreduce_", 30));
  };
  for (bool second : {false, true}) {
    if (second) comm = 0x0b0b1d5ec0dd1e55ULL;
    auto gradOf = [&](int rank) { return floatsOf(second && rank == 1 && !otherCall ? 99 : 10 + rank, grad.size); };
    const auto total = floatsOf(gpurr::hash::hashBuffer(gradOf(0)) ^ gpurr::hash::hashBuffer(gradOf(1)), sum.size);
    for (int rank : {0, 1}) {
      Header h = header(second);
      h.rank = rank;
      h.pid = h.pid + rank;
      const fs::path d = dir / (second ? "b" : "a") / ("rank" + std::to_string(rank) + ".gpurr");
      fs::create_directories(d.parent_path());
      Run r(d, h, second);
      for (const Buffer* b : {&grad, &sum, &weights}) r.alloc(*b);
      r.copyIn(grad, gradOf(rank), at("aten::copy_", 28));
      allReduce(r, rank, 1024, 0, r.digest(grad, gradOf(rank)), r.digest(sum, total), otherCall && second && rank == 1);
      KernelLaunch k = r.kernel("sgd_update_kernel", {&weights, &sum}, {1024}, {4, 1, 1}, {256, 1, 1});
      k.inputs = {r.digest(weights, floatsOf(7, weights.size)), r.digest(sum, total)};
      k.outputs = {r.digest(weights, floatsOf(gpurr::hash::hashBuffer(total), weights.size))};
      r.add(k, at("aten::add_", 31));
      const uint64_t count = second && rank == 1 && !otherCall ? 512 : 1024;
      allReduce(r, rank, count, 1, r.digest(weights, floatsOf(gpurr::hash::hashBuffer(total), weights.size)),
                r.digest(sum, floatsOf(gpurr::hash::hashBuffer(total) + 1, sum.size)));
      r.sync();
      r.close();
    }
  }
}

// A step whose index_add_ differs in run B, then twelve launches more: the
// pair the damaged cases below damage run B of.
void stepThenTwelve(const fs::path& dir) {
  writePair(dir, [](Run& r, bool second) {
    const Step s;
    const auto out = second ? perturbed(s.out, {3}) : s.out;
    standardStep(r, s, out, false);
    for (int i = 0; i < 12; ++i) {
      r.add(relu(r, s), origin::kRelu);
    }
    r.sync();
  });
}

// Run B was killed: no index, and its last block cut short.
void truncated(const fs::path& dir) {
  stepThenTwelve(dir);
  const fs::path b = dir / "b.gpurr";
  fs::remove(b / "index");
  fs::remove(b / "checksums");
  const uint64_t size = fs::file_size(b / "events");
  fs::resize_file(b / "events", size - 100);
}

// Run B's trace was damaged since it was written: a bit of its next to
// last block flipped, after the first divergence.
void corruptBlock(const fs::path& dir) {
  stepThenTwelve(dir);
  const fs::path events = dir / "b.gpurr" / "events";
  const auto blocks = TraceReader(dir / "b.gpurr").blocks();
  if (blocks.size() < 3) throw std::runtime_error("corrupt_block: too few blocks");
  const BlockInfo& flipped = blocks[blocks.size() - 2];
  std::fstream f(events, std::ios::in | std::ios::out | std::ios::binary);
  const auto at = static_cast<std::streamoff>((flipped.fileOffset + blocks.back().fileOffset) / 2);
  f.seekg(at);
  const char byte = static_cast<char>(f.get() ^ 0x10);
  f.seekp(at);
  f.put(byte);
}

void gpuMismatch(const fs::path& dir) {
  writePair(
      dir,
      [](Run& r, bool second) {
        Step s;
        // On the A100, cuBLAS runs an Ampere kernel: another sum order.
        if (second) s.hidden = perturbed(s.hidden, {1, 2, 3});
        if (second) s.activated = perturbed(s.activated, {1, 2, 3});
        prologue(r, s, true, true);
        KernelLaunch g = gemm(r, s);
        if (second) {
          g.function = "ampere_sgemm_128x64_nn";
          g.api = LaunchApi::kLaunchKernel;
          std::get<AlgorithmChoice>(g.annotations[0]).algorithm = "algo=1 tile=128x64 splitK=1";
        }
        r.add(g, origin::kGemm);
        r.add(relu(r, s), origin::kRelu);
        r.sync();
      },
      [](Header& h, bool second) {
        if (second) h.gpus[0] = {0, "NVIDIA A100-SXM4-80GB", "GPU-a100", 108, 8, 0, 85899345920ULL, "0000:07:00.0"};
      });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_diff_traces OUTPUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[1];
  try {
    identical(out / "identical");
    environment(out / "environment");
    hostInput(out / "host_input");
    rngState(out / "rng_state");
    curandState(out / "curand_state");
    scalarParameters(out / "scalar_parameters");
    pointerParameter(out / "pointer_parameter");
    algorithmChoice(out / "algorithm_choice");
    reordered(out / "reordered");
    nondeterministicKernel(out / "nondeterministic_kernel");
    uninitialisedMemory(out / "uninitialised_memory");
    rngUnrecorded(out / "rng_unrecorded");
    fillOldContents(out / "fill_old_contents");
    noOptimizerStep(out / "no_optimizer_step");
    twoIndependent(out / "two_independent");
    processes(out / "processes");
    collectives(out / "collectives");
    collectives(out / "collective_other_call", true);
    truncated(out / "truncated");
    corruptBlock(out / "corrupt_block");
    gpuMismatch(out / "gpu_mismatch");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_diff_traces: %s\n", e.what());
    return 1;
  }
  return 0;
}
