// Long runs whose steps differ by a few operations in every step: the
// first divergence is the one a short run of the same programs gives,
// whatever the length (the alignment's windows, the tie-break's regions).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "diff/diff.h"
#include "trace_format/trace.h"

using namespace gpurr;
using namespace gpurr::trace;

namespace {

struct Op {
  const char* kernel;
  const char* op;
  uint32_t line;
  Phase phase;
};

// A training loop of `steps` steps of `ops`; from step `extraFrom` on, each
// step also runs `extra` after its operation `after` and `extraBackward`
// after its operation `afterBackward` (a line added to the forward, before
// an operation of the same kernel: the alignment must tell which is new).
std::filesystem::path writeLoop(const std::filesystem::path& dir, uint64_t steps, const std::vector<Op>& ops,
                                uint64_t extraFrom, size_t after, size_t afterBackward) {
  const Op extra{"_Z3mulPf", "aten::mul", 11, Phase::kForward};
  const Op extraBackward{"_Z3mulPf", "aten::mul", 11, Phase::kBackward};
  std::filesystem::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0;
  for (uint64_t step = 0; step < steps; ++step) {
    uint64_t inStep = 0;
    auto launch = [&](const Op& op) {
      KernelLaunch k;
      k.function = op.kernel;
      k.grid = {1, 1, 1};
      k.block = {32, 1, 1};
      Origin o;
      o.op = op.op;
      o.opStack = {op.op};
      o.phase = op.phase;
      o.file = "train.py";
      o.line = op.line;
      o.step = step;
      o.stepLaunch = inStep++;
      w.append(Event{seq, (seq + 1) * 1000, 0, k, o});
      ++seq;
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      launch(ops[i]);
      if (step >= extraFrom && i == after) launch(extra);
      if (step >= extraFrom && i == afterBackward) launch(extraBackward);
    }
  }
  w.close();
  return dir;
}

// Forward: linear, relu, linear, y * 2 (line 12); backward: the
// multiplication's, the linears' and the optimizer's.
const std::vector<Op> kStep = {
    {"_Z6linearPf", "aten::addmm", 10, Phase::kForward},  {"_Z4reluPf", "aten::relu", 10, Phase::kForward},
    {"_Z6linearPf", "aten::addmm", 10, Phase::kForward},  {"_Z3mulPf", "aten::mul", 12, Phase::kForward},
    {"_Z3sumPf", "aten::sum", 13, Phase::kForward},       {"_Z3mulPf", "aten::mul", 12, Phase::kBackward},
    {"_Z2mmPf", "aten::mm", 10, Phase::kBackward},        {"_Z2mmPf", "aten::mm", 10, Phase::kBackward},
    {"_Z4reluPf", "aten::threshold_backward", 10, Phase::kBackward},
    {"_Z2mmPf", "aten::mm", 10, Phase::kBackward},        {"_Z3addPf", "aten::add_", 20, Phase::kForward},
    {"_Z3addPf", "aten::add_", 20, Phase::kForward}};

// The origin of the first operation of `d`'s first divergence, which is a
// stretch of run B's operations alone.
const Origin& addedInB(const diff::ProcessDiff& d) {
  REQUIRE(d.firstDivergence);
  REQUIRE(d.firstDivergence->stretch);
  CHECK(d.firstDivergence->stretch->aCount == 0);
  REQUIRE(d.firstDivergence->b.origin);
  return *d.firstDivergence->b.origin;
}

}  // namespace

TEST_CASE("an operation added to every step is named where it first runs however long the runs are") {
  const auto root = std::filesystem::temp_directory_path() / ("gpurr-long-" + std::to_string(getpid()));
  // Step counts either side of the alignment's window (4,096 operations)
  // and of a tie-break region's size; the operation added from step 0 (two
  // a step: a quarter more operations) or from step 150.
  const uint64_t from = GENERATE(0, 150);
  const uint64_t steps = GENERATE(10, 400);
  if (steps <= from) return;
  INFO(steps << " steps, the operation added from step " << from);
  TraceReader ra(writeLoop(root / "a.gpurr", steps, kStep, UINT64_MAX, 0, 0));
  TraceReader rb(writeLoop(root / "b.gpurr", steps, kStep, from, 2, 4));
  const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
  CHECK(d.warnings.empty());
  CHECK(d.matched == d.opsA);  // run B is run A with operations added: every one of A's is matched
  const Origin& origin = addedInB(d);
  CHECK(origin.line == 11);
  CHECK(origin.phase == Phase::kForward);
  CHECK(origin.step == static_cast<int64_t>(from));
  CHECK(origin.stepLaunch == 3);
  std::filesystem::remove_all(root);
}

TEST_CASE("a run that ends cleanly after fewer steps, with a change in its last steps: the change, then its end") {
  const auto root = std::filesystem::temp_directory_path() / ("gpurr-shorter-" + std::to_string(getpid()));
  const uint64_t steps = GENERATE(40, 1000);
  INFO("run A " << steps << " steps, run B half as many, with the operation added in its last three");
  TraceReader ra(writeLoop(root / "a.gpurr", steps, kStep, UINT64_MAX, 0, 0));
  TraceReader rb(writeLoop(root / "b.gpurr", steps / 2, kStep, steps / 2 - 3, 2, 4));
  const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
  const Origin& origin = addedInB(d);
  CHECK(origin.line == 11);
  CHECK(origin.step == static_cast<int64_t>(steps / 2 - 3));
  // Six added operations, then run A's steps after run B's last.
  CHECK(d.pathDivergenceCount == 7);
  CHECK(d.matched == steps / 2 * kStep.size());
  std::filesystem::remove_all(root);
}

namespace {

// A model of `layers` layers trained for `steps` steps. A layer's first
// kernels are the final norm's, with the same operands: in a run with more
// layers, the first added layer's would match the other run's final norm
// were the operations not told apart by where they were issued. With
// `weights`, each launch also takes its module's weights, an allocation of
// their own: an allocation's identity names its first user by the count of
// its kernel's launches before it, so the first added layer's norm weights
// have the identity the other run's final norm weights have, and those of
// the run with more layers another (the diff's renaming).
// `shift`: lines added to the training script above its loop (the model's
// file unchanged).
std::filesystem::path writeModel(const std::filesystem::path& dir, uint64_t steps, int layers, bool weights,
                                 uint32_t shift = 0) {
  std::filesystem::remove_all(dir);
  TraceWriter w(dir, Header{});
  uint64_t seq = 0;
  std::map<std::string, uint32_t> allocations;  // by module
  const auto weightsOf = [&](const std::string& module) {
    auto [it, added] = allocations.try_emplace(module, static_cast<uint32_t>(allocations.size() + 1));
    if (added) {
      w.append(Event{seq, (seq + 1) * 1000, 0, Allocation{it->second, it->second * 0x100000ULL, 0x100000}});
      ++seq;
    }
    return it->second;
  };
  for (uint64_t step = 0; step < steps; ++step) {
    uint64_t inStep = 0;
    auto launch = [&](const char* kernel, const char* op, const std::string& module, uint32_t line, Phase phase) {
      KernelLaunch k;
      k.function = kernel;
      k.grid = {1, 1, 1};
      k.block = {32, 1, 1};
      if (weights) {
        const uint32_t ordinal = weightsOf(module);
        appendPointerParam(k, ordinal * 0x100000ULL, ordinal, 0);
      }
      Origin o;
      o.op = op;
      o.opStack = {op};
      o.phase = phase;
      o.module = module;
      o.file = line < 100 ? "modeling.py" : "train.py";
      o.line = line < 100 ? line : line + shift;
      o.step = step;
      o.stepLaunch = inStep++;
      w.append(Event{seq, (seq + 1) * 1000, 0, k, o});
      ++seq;
    };
    const auto norm = [&](const std::string& module, Phase phase) {
      launch("_Z3powPf", "aten::pow", module, 10, phase);
      launch("_Z4meanPf", "aten::mean", module, 10, phase);
      launch("_Z5rsqrtPf", "aten::rsqrt", module, 11, phase);
      launch("_Z3mulPf", "aten::mul", module, 12, phase);
    };
    const auto layer = [&](int l, Phase phase) {
      const std::string m = "Model.layers." + std::to_string(l);
      norm(m + ".norm", phase);
      launch("_Z2mmPf", "aten::mm", m + ".attn.qkv", 20, phase);
      launch("_Z4sdpaPf", "aten::scaled_dot_product_attention", m + ".attn", 21, phase);
      launch("_Z2mmPf", "aten::mm", m + ".attn.out", 22, phase);
      launch("_Z3addPf", "aten::add", m, 23, phase);
    };
    launch("_Z4zeroPf", "aten::zero_", "", 119, Phase::kForward);
    launch("_Z5embedPf", "aten::embedding", "Model.embed", 5, Phase::kForward);
    for (int l = 0; l < layers; ++l) layer(l, Phase::kForward);
    norm("Model.norm", Phase::kForward);
    launch("_Z2mmPf", "aten::mm", "Model.head", 30, Phase::kForward);
    launch("_Z4lossPf", "aten::cross_entropy", "", 120, Phase::kForward);
    launch("_Z2mmPf", "aten::mm", "Model.head", 30, Phase::kBackward);
    norm("Model.norm", Phase::kBackward);
    for (int l = layers - 1; l >= 0; --l) layer(l, Phase::kBackward);
    launch("_Z5adamwPf", "aten::_fused_adamw_", "", 125, Phase::kForward);
  }
  w.close();
  return dir;
}

}  // namespace

TEST_CASE("a model with more layers: the first added layer is named, not the final norm its kernels repeat") {
  const auto root = std::filesystem::temp_directory_path() / ("gpurr-layers-" + std::to_string(getpid()));
  // Steps either side of the alignment's window; a third more operations
  // in each step, or more than twice as many.
  const uint64_t steps = GENERATE(3, 300);
  const int more = GENERATE(3, 7);
  const bool weights = GENERATE(false, true);
  INFO(steps << " steps, 2 layers against " << more << (weights ? ", weights in allocations" : ""));
  TraceReader ra(writeModel(root / "a.gpurr", steps, 2, weights));
  TraceReader rb(writeModel(root / "b.gpurr", steps, more, weights));
  const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
  CHECK(d.warnings.empty());
  CHECK(d.matched == d.opsA);  // every operation of run A is matched
  const Origin& origin = addedInB(d);
  CHECK(d.firstDivergence->stretch->bCount == static_cast<uint64_t>(more - 2) * 8);
  CHECK(origin.module == "Model.layers.2.norm");
  CHECK(origin.step == 0);
  // The added layers' forward and backward in each step, nothing else.
  CHECK(d.pathDivergenceCount == 2 * steps);
  std::filesystem::remove_all(root);
}

TEST_CASE("a script edited between the runs: operations issued from moved lines are the same operations") {
  const auto root = std::filesystem::temp_directory_path() / ("gpurr-edited-" + std::to_string(getpid()));
  // Six lines added: zero_grad moves onto the optimizer's old line, next
  // to it in the trace (the end of one step, the start of the next).
  const uint64_t steps = GENERATE(3, 300);
  const bool weights = GENERATE(false, true);
  INFO(steps << " steps" << (weights ? ", weights in allocations" : ""));
  TraceReader ra(writeModel(root / "a.gpurr", steps, 2, weights));
  TraceReader rb(writeModel(root / "b.gpurr", steps, 2, weights, 6));
  const diff::ProcessDiff d = diff::diffTraces(ra, rb, diff::DiffOptions{}, nullptr);
  CHECK(d.warnings.empty());
  CHECK(d.matched == d.opsA);
  CHECK(d.opsA == d.opsB);
  CHECK_FALSE(d.firstDivergence);
  CHECK(d.pathDivergenceCount == 0);
  std::filesystem::remove_all(root);
}
