// The framework context the recorder attaches to operations: scopes, modules,
// forward/backward linking and steps, driven as the framework layer drives it.
#include "recorder/framework_context.h"

#include <catch2/catch.hpp>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace fw = gpurr::recorder::framework;
using gpurr::trace::Origin;
using gpurr::trace::Phase;
using gpurr::trace::InPlace;

namespace {
int ids[16];  // scope identities
}

TEST_CASE("no origin until the framework layer reports", "[recorder][framework]") {
  fw::resetForTesting();
  CHECK_FALSE(fw::currentOrigin(true).has_value());
  fw::setStep(0);
  const auto o = fw::currentOrigin(true);
  REQUIRE(o.has_value());
  CHECK(o->op.empty());
  CHECK(o->phase == Phase::kUnknown);
  CHECK(o->step == 0);
  fw::resetForTesting();
}

TEST_CASE("the innermost op says whether it works in place, a range or node does not", "[recorder][framework]") {
  fw::resetForTesting();
  fw::openScope(&ids[0], "aten::add_", fw::ScopeKind::kOp, -1, 1, nullptr, 0, InPlace::kYes);
  CHECK(fw::currentOrigin(true)->inPlace == InPlace::kYes);
  fw::openScope(&ids[1], "aten::fill_", fw::ScopeKind::kOp, -1, 1, nullptr, 0, InPlace::kNo);
  CHECK(fw::currentOrigin(true)->inPlace == InPlace::kNo);
  fw::closeScope(&ids[1]);
  // A user range inside the op: the op is still the innermost op.
  fw::openScope(&ids[1], "my_range", fw::ScopeKind::kRange, -1, 1, nullptr, 0, InPlace::kYes);
  CHECK(fw::currentOrigin(true)->inPlace == InPlace::kYes);
  fw::closeScope(&ids[1]);
  fw::closeScope(&ids[0]);
  // No op open: a range's word is not taken.
  fw::openScope(&ids[0], "my_range", fw::ScopeKind::kRange, -1, 1, nullptr, 0, InPlace::kYes);
  CHECK(fw::currentOrigin(true)->inPlace == InPlace::kUnknown);
  fw::closeScope(&ids[0]);
  fw::openScope(&ids[0], "aten::mm", fw::ScopeKind::kOp, -1, 1, nullptr, 0);
  CHECK(fw::currentOrigin(true)->inPlace == InPlace::kUnknown);
  fw::closeScope(&ids[0]);
  fw::resetForTesting();
}

TEST_CASE("a forward op: innermost op, stack, module and the outermost scope's line", "[recorder][framework]") {
  fw::resetForTesting();
  fw::setStep(0);
  fw::enterModule("Net");
  fw::enterModule("Net.fc");
  fw::openScope(&ids[0], "aten::linear", fw::ScopeKind::kOp, 7, 1, "/w/train.py", 42);
  fw::openScope(&ids[1], "aten::addmm", fw::ScopeKind::kOp, 7, 1, nullptr, 0);
  auto o = fw::currentOrigin(true);
  REQUIRE(o);
  CHECK(o->op == "aten::addmm");
  CHECK(o->opStack == std::vector<std::string>{"aten::linear", "aten::addmm"});
  CHECK(o->phase == Phase::kForward);
  CHECK(o->module == "Net.fc");
  CHECK(o->file == "/w/train.py");
  CHECK(o->line == 42);
  CHECK(o->stepLaunch == 0);
  CHECK(fw::currentOrigin(true)->stepLaunch == 1);
  CHECK(fw::currentOrigin(false)->stepLaunch == 2);  // a copy is not counted
  CHECK(fw::currentOrigin(false)->stepLaunch == 2);
  fw::closeScope(&ids[1]);
  fw::closeScope(&ids[0]);
  fw::exitModule();
  o = fw::currentOrigin(true);
  CHECK(o->module == "Net");
  CHECK(o->op.empty());
  CHECK(o->file.empty());
  fw::exitModule();
  CHECK(fw::currentOrigin(true)->phase == Phase::kUnknown);

  fw::setStep(1);  // a new step counts its launches from 0
  CHECK(fw::currentOrigin(true)->stepLaunch == 0);
  CHECK(fw::currentOrigin(true)->step == 1);
  fw::resetForTesting();
}

TEST_CASE("a backward op is attributed to the forward op of its node, on another thread", "[recorder][framework]") {
  fw::resetForTesting();
  fw::setStep(3);
  fw::enterModule("Net.embed");
  fw::openScope(&ids[0], "aten::index_select", fw::ScopeKind::kOp, 11, 1, "/w/model.py", 17);
  fw::closeScope(&ids[0]);
  fw::exitModule();

  std::optional<Origin> o;
  std::thread([&] {
    fw::openScope(&ids[1], "autograd::engine::evaluate_function: IndexSelectBackward0", fw::ScopeKind::kBackwardNode,
                  11, 1, nullptr, 0);
    fw::openScope(&ids[2], "aten::index_add_", fw::ScopeKind::kOp, 40, 2, nullptr, 0);
    o = fw::currentOrigin(true);
    fw::closeScope(&ids[1]);  // closes what it opened too
    CHECK(fw::currentOrigin(true)->opStack.empty());
  }).join();
  REQUIRE(o);
  CHECK(o->op == "aten::index_add_");
  CHECK(o->phase == Phase::kBackward);
  CHECK(o->forwardOp == "aten::index_select");
  CHECK(o->module == "Net.embed");
  CHECK(o->file == "/w/model.py");
  CHECK(o->line == 17);
  CHECK(o->step == 3);
  // An op that made no node (detach) carried the number first; the op that
  // began last with it, or the outermost op open around that one, names it.
  fw::openScope(&ids[5], "aten::detach", fw::ScopeKind::kOp, 12, 1, "/w/model.py", 20);
  fw::closeScope(&ids[5]);
  fw::openScope(&ids[5], "aten::linear", fw::ScopeKind::kOp, 12, 1, "/w/model.py", 21);
  fw::openScope(&ids[6], "aten::addmm", fw::ScopeKind::kOp, 12, 1, nullptr, 0);
  fw::closeScope(&ids[6]);
  fw::closeScope(&ids[5]);
  std::thread([&] {
    fw::openScope(&ids[1], "AddmmBackward0", fw::ScopeKind::kBackwardNode, 12, 1, nullptr, 0);
    CHECK(fw::currentOrigin(true)->forwardOp == "aten::linear");
    CHECK(fw::currentOrigin(true)->line == 21);
    fw::closeScope(&ids[1]);
  }).join();
  // The op in backward with its own number did not name a node.
  std::thread([&] {
    fw::openScope(&ids[3], "autograd::engine::evaluate_function: X", fw::ScopeKind::kBackwardNode, 40, 2, nullptr, 0);
    CHECK(fw::currentOrigin(true)->forwardOp.empty());
    fw::closeScope(&ids[3]);
  }).join();
  // The same sequence number on another forward thread is another node.
  std::thread([&] {
    fw::openScope(&ids[4], "autograd::engine::evaluate_function: Y", fw::ScopeKind::kBackwardNode, 11, 9, nullptr, 0);
    CHECK(fw::currentOrigin(true)->forwardOp.empty());
    fw::closeScope(&ids[4]);
  }).join();
  fw::resetForTesting();
}

TEST_CASE("threads keep their own scopes and modules, a range names launches outside any op",
          "[recorder][framework]") {
  fw::resetForTesting();
  fw::setStep(0);
  fw::enterModule("A");
  fw::openScope(&ids[0], "aten::mm", fw::ScopeKind::kOp, -1, 1, "/w/a.py", 1);
  std::thread([&] {
    CHECK(fw::currentOrigin(true)->module.empty());
    fw::openScope(&ids[1], "## Call CompiledFxGraph fabc ##", fw::ScopeKind::kRange, -1, 2, "/w/b.py", 2);
    const auto o = fw::currentOrigin(true);
    CHECK(o->op == "## Call CompiledFxGraph fabc ##");
    CHECK(o->phase == Phase::kForward);
    CHECK(o->file == "/w/b.py");
    fw::closeScope(&ids[0]);  // not open here: ignored
    CHECK(fw::currentOrigin(true)->opStack.size() == 1);
    fw::closeScope(&ids[1]);
  }).join();
  CHECK(fw::currentOrigin(true)->op == "aten::mm");
  CHECK(fw::currentOrigin(true)->module == "A");
  fw::closeScope(&ids[0]);
  fw::exitModule();
  fw::exitModule();  // one too many: ignored
  fw::resetForTesting();
}

TEST_CASE("an op's operands are the innermost op's, until it closes", "[recorder][framework]") {
  fw::resetForTesting();
  using Ops = std::vector<fw::Operand>;
  auto addresses = []() {
    std::vector<uint64_t> out;
    if (const auto ops = fw::innermostOpOperands())
      for (const fw::Operand& o : *ops) out.push_back(o.address * 2 + (o.written ? 1 : 0));
    return out;
  };
  CHECK_FALSE(fw::innermostOpOperands());
  fw::openScope(&ids[0], "aten::linear", fw::ScopeKind::kOp, -1, 0, nullptr, 0);
  CHECK_FALSE(fw::innermostOpOperands());  // not reported (yet)
  fw::opOperands(&ids[0], Ops{{0x100, false}, {0x200, false}});
  CHECK(addresses() == std::vector<uint64_t>{0x200, 0x400});
  fw::openScope(&ids[1], "aten::addmm", fw::ScopeKind::kOp, -1, 0, nullptr, 0);
  CHECK_FALSE(fw::innermostOpOperands());  // the inner op's are unknown: not the outer op's
  fw::opOperands(&ids[0], Ops{{0x900, true}});  // not the innermost scope: ignored
  fw::opOperands(&ids[1], Ops{{0x300, true}});
  CHECK(addresses() == std::vector<uint64_t>{0x601});
  fw::closeScope(&ids[1]);
  CHECK(addresses() == std::vector<uint64_t>{0x200, 0x400});
  fw::openScope(&ids[2], "my_range", fw::ScopeKind::kRange, -1, 0, nullptr, 0);
  fw::opOperands(&ids[2], Ops{{0x500, false}});  // a range has no operands
  CHECK_FALSE(fw::innermostOpOperands());
  fw::closeScope(&ids[0]);  // closes the range inside too
  CHECK_FALSE(fw::innermostOpOperands());
  fw::openScope(&ids[3], "aten::mul", fw::ScopeKind::kOp, -1, 0, nullptr, 0);
  fw::opOperands(&ids[3], Ops{});
  REQUIRE(fw::innermostOpOperands());  // known: no device tensor
  CHECK(fw::innermostOpOperands()->empty());
  fw::closeScope(&ids[3]);
  fw::resetForTesting();
}

TEST_CASE("learning a step, then following it by place until an operation does not match",
          "[recorder][framework]") {
  fw::resetForTesting();
  static int diverged = 0;
  fw::setOnDiverged([] { ++diverged; });
  const uint64_t a = fw::launchKey("kernel_a"), b = fw::launchKey("kernel_b");
  CHECK_FALSE(fw::setAttribution(fw::Attribution::kFollow));  // nothing learned
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  auto oneStep = [&](int64_t step) {
    fw::setStep(step);
    fw::enterModule("Net");
    fw::openScope(&ids[0], "aten::addmm", fw::ScopeKind::kOp, -1, 1, "/w/train.py", 7);
    fw::learnRoles({1, 3});
    fw::currentOrigin(true, a);
    fw::closeScope(&ids[0]);
    fw::openScope(&ids[0], "aten::relu", fw::ScopeKind::kOp, -1, 1, "/w/train.py", 8);
    fw::currentOrigin(true, b);
    fw::closeScope(&ids[0]);
    fw::exitModule();
  };
  oneStep(0);
  CHECK_FALSE(fw::setAttribution(fw::Attribution::kFollow));  // step 0 not complete yet
  oneStep(1);
  fw::setStep(2);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));  // step 1 is the template
  CHECK(fw::attribution() == fw::Attribution::kFollow);
  // Nothing is observed now: the origins come from step 1, by place.
  std::vector<uint8_t> roles;
  CHECK(fw::followedRoles(a, 2, roles));
  CHECK(roles == std::vector<uint8_t>{1, 3});
  CHECK_FALSE(fw::followedRoles(a, 3, roles));
  // An event outside the template (a collective): the step alone, and the
  // template's place unmoved.
  const auto outside = fw::originOutsideTemplate();
  REQUIRE(outside);
  CHECK(outside->op.empty());
  CHECK(outside->step == 2);
  auto o = fw::currentOrigin(true, a);
  CHECK(o->op == "aten::addmm");
  CHECK(o->module == "Net");
  CHECK(o->line == 7);
  CHECK(o->step == 2);
  CHECK(o->stepLaunch == 0);
  o = fw::currentOrigin(true, b);
  CHECK(o->op == "aten::relu");
  CHECK(o->stepLaunch == 1);
  CHECK_FALSE(fw::divergedSinceLastCall());
  fw::setStep(3);
  CHECK(fw::currentOrigin(true, a)->line == 7);
  o = fw::currentOrigin(true, a);  // kernel_a where step 1 had kernel_b
  CHECK(o->op.empty());
  CHECK(o->step == 3);
  CHECK(diverged == 1);
  CHECK(fw::attribution() == fw::Attribution::kLearn);  // observed again from here
  CHECK(fw::divergedSinceLastCall());
  CHECK_FALSE(fw::divergedSinceLastCall());
  // Step 3 was partly followed: no template; step 1's is kept, and the
  // layer may follow it again at once.
  fw::setStep(4);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  CHECK(fw::currentOrigin(true, a)->op == "aten::addmm");
  CHECK_FALSE(fw::divergedSinceLastCall());
  // Observing forgets the templates.
  REQUIRE(fw::setAttribution(fw::Attribution::kObserve));
  CHECK_FALSE(fw::setAttribution(fw::Attribution::kFollow));
  fw::resetForTesting();
}

namespace {
// One step of ops, each an op scope that launches the kernel of its key;
// the launches' origins.
std::vector<Origin> stepOf(int64_t step, std::initializer_list<std::pair<const char*, uint64_t>> ops) {
  fw::setStep(step);
  std::vector<Origin> origins;
  for (auto [op, key] : ops) {
    fw::openScope(&ids[1], op, fw::ScopeKind::kOp, -1, 1, "/w/train.py", 10);
    fw::learnRoles({static_cast<uint8_t>(key & 0xff)});
    origins.push_back(*fw::currentOrigin(true, key));
    fw::closeScope(&ids[1]);
  }
  return origins;
}
}  // namespace

TEST_CASE("steps of several kinds, each followed by its own template from the operation that tells them apart",
          "[recorder][framework]") {
  fw::resetForTesting();
  static int diverged = 0;
  diverged = 0;
  fw::setOnDiverged([] { ++diverged; });
  const uint64_t a = fw::launchKey("kernel_a"), b = fw::launchKey("kernel_b"), copy = fw::launchKey("copy");
  const auto plain = {std::pair{"aten::addmm", a}, std::pair{"aten::relu", b}};
  // A step that logs its loss: a copy to the host between the two.
  const auto logs = {std::pair{"aten::addmm", a}, std::pair{"aten::item", copy}, std::pair{"aten::relu", b}};
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  CHECK(fw::lastStepLearned() == fw::StepLearned::kNot);
  stepOf(0, plain);
  stepOf(1, logs);
  CHECK(fw::lastStepLearned() == fw::StepLearned::kNewKind);  // step 0
  stepOf(2, plain);
  CHECK(fw::lastStepLearned() == fw::StepLearned::kNewKind);  // step 1
  fw::setStep(3);  // both kinds learned
  CHECK(fw::lastStepLearned() == fw::StepLearned::kKnownKind);  // step 2, step 0's kind again
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  auto ops = [](const std::vector<Origin>& origins) {
    std::vector<std::string> names;
    for (const Origin& o : origins) names.push_back(o.op);
    return names;
  };
  for (int64_t step = 3; step < 9; ++step) {
    if (step % 3 == 0) {
      CHECK(ops(stepOf(step, logs)) == std::vector<std::string>{"aten::addmm", "aten::item", "aten::relu"});
    } else {
      CHECK(ops(stepOf(step, plain)) == std::vector<std::string>{"aten::addmm", "aten::relu"});
    }
  }
  CHECK(diverged == 0);
  CHECK_FALSE(fw::divergedSinceLastCall());
  CHECK(fw::attribution() == fw::Attribution::kFollow);
  CHECK(fw::lastStepLearned() == fw::StepLearned::kNot);  // step 7, followed
  // The roles too come from the template that has the operation.
  fw::setStep(9);
  std::vector<uint8_t> roles;
  CHECK(fw::currentOrigin(true, a)->op == "aten::addmm");
  REQUIRE(fw::followedRoles(copy, 1, roles));
  CHECK(roles == std::vector<uint8_t>{static_cast<uint8_t>(copy & 0xff)});
  CHECK(fw::currentOrigin(true, copy)->op == "aten::item");
  // An operation that no template has at its place: the layer observes.
  const uint64_t c = fw::launchKey("kernel_c");
  fw::setStep(10);
  CHECK(fw::currentOrigin(true, a)->op == "aten::addmm");
  CHECK(fw::currentOrigin(true, c)->op.empty());
  CHECK(diverged == 1);
  CHECK(fw::attribution() == fw::Attribution::kLearn);
  // The trace's index tells how the steps were attributed: 0 to 2 observed,
  // 3 to 9 followed (a switch at each step unlike the one before it, and at
  // step 9's copy), 10 unmatched.
  fw::setStep(11);
  const auto tally = fw::layerSteps();
  REQUIRE(tally);
  CHECK(*tally == gpurr::trace::LayerSteps{.observed = 3, .followed = 7, .unmatched = 1, .templates = 2,
                                           .switches = 5});
  fw::resetForTesting();
  CHECK_FALSE(fw::layerSteps());
}

namespace {
// The origin of a launch of `key` inside op `name`, called from `line` in
// module Net.
Origin op(const char* name, uint64_t key, int line) {
  fw::enterModule("Net");
  fw::openScope(&ids[0], name, fw::ScopeKind::kOp, -1, 1, "/w/train.py", line);
  auto o = fw::currentOrigin(true, key);
  fw::closeScope(&ids[0]);
  fw::exitModule();
  return *o;
}
}  // namespace

TEST_CASE("where two templates begin alike from other lines, a step that ran that far gives what both say",
          "[recorder][framework]") {
  fw::resetForTesting();
  const uint64_t mm = fw::launchKey("mm_kernel"), mul = fw::launchKey("mul_kernel"), add = fw::launchKey("add_kernel");
  // A step that evaluates (the forward and a loss's product, from lines 20
  // and 21), then trains (from lines 30 to 32); and one that only trains.
  auto trains = [&] {
    return std::vector<Origin>{op("aten::mm", mm, 30), op("aten::mul", mul, 31), op("aten::add", add, 32)};
  };
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  fw::setStep(0);
  op("aten::mm", mm, 20);
  op("aten::mul", mul, 21);
  trains();
  fw::setStep(1);
  trains();
  fw::setStep(2);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  // The step so far may be either: the op and module both say, no line.
  const std::vector<Origin> plain = trains();
  CHECK((plain[0].op == "aten::mm" && plain[0].module == "Net" && plain[0].line == 0 && plain[0].byPlace));
  CHECK((plain[1].op == "aten::mul" && plain[1].line == 0));
  // From the operation that tells them apart, the template's own.
  CHECK(plain[2].line == 32);
  fw::setStep(3);
  CHECK(op("aten::mm", mm, 20).line == 0);
  CHECK(op("aten::mul", mul, 21).line == 0);
  CHECK(op("aten::mm", mm, 30).line == 30);
  CHECK_FALSE(fw::divergedSinceLastCall());
  fw::resetForTesting();
}

TEST_CASE("an operation run without gradients is another than the same run with them: a step that evaluates "
          "first is told apart from its first launch", "[recorder][framework]") {
  fw::resetForTesting();
  static thread_local int grad = 1;
  fw::setGradModeSource([] { return grad; });
  const uint64_t mm = fw::launchKey("mm_kernel"), add = fw::launchKey("add_kernel");
  // The evaluation's forward (line 20, under torch.no_grad), then training
  // (lines 30 and 31); a step that only trains.
  auto evaluates = [&] {
    grad = 0;
    const Origin evaluated = op("aten::mm", mm, 20);
    grad = 1;
    return std::vector<Origin>{evaluated, op("aten::mm", mm, 30), op("aten::add", add, 31)};
  };
  auto trains = [&] { return std::vector<Origin>{op("aten::mm", mm, 30), op("aten::add", add, 31)}; };
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  fw::setStep(0);
  evaluates();
  fw::setStep(1);
  trains();
  fw::setStep(2);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  for (int64_t step = 2; step < 6; ++step) {
    const std::vector<Origin> origins = step % 2 == 0 ? evaluates() : trains();
    std::vector<int> lines;
    for (const Origin& o : origins) lines.push_back(o.byPlace ? static_cast<int>(o.line) : -1);
    CHECK(lines == (step % 2 == 0 ? std::vector<int>{20, 30, 31} : std::vector<int>{30, 31}));
    fw::setStep(step + 1);
  }
  CHECK_FALSE(fw::divergedSinceLastCall());
  fw::resetForTesting();
}

TEST_CASE("at most kTemplates kinds of step are kept: a new one replaces the least recently followed",
          "[recorder][framework]") {
  fw::resetForTesting();
  std::vector<uint64_t> keys;
  for (size_t i = 0; i <= fw::kTemplates; ++i) keys.push_back(fw::launchKey("kernel_" + std::to_string(i)));
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  int64_t step = 0;
  for (size_t i = 0; i < fw::kTemplates; ++i) stepOf(step++, {{"aten::op", keys[i]}});
  stepOf(step++, {{"aten::op", keys[0]}});  // the same kind again: kind 0 is the most recently learned
  // The layer changes the mode between two steps, as here.
  fw::setStep(step);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  stepOf(step++, {{"aten::op", keys[2]}});  // followed: kind 1 is now the least recent
  CHECK_FALSE(fw::divergedSinceLastCall());
  fw::setStep(step);
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  stepOf(step++, {{"aten::op", keys[fw::kTemplates]}});  // a new kind
  fw::setStep(step);
  CHECK(fw::lastStepLearned() == fw::StepLearned::kNewKind);  // in place of kind 1
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  for (size_t i : {size_t{0}, size_t{2}, size_t{3}, fw::kTemplates}) {
    CHECK(stepOf(step++, {{"aten::op", keys[i]}})[0].op == "aten::op");
    CHECK_FALSE(fw::divergedSinceLastCall());
  }
  CHECK(stepOf(step++, {{"aten::op", keys[1]}})[0].op.empty());
  CHECK(fw::divergedSinceLastCall());
  fw::resetForTesting();
}

TEST_CASE("a launch takes its place only when not given another framework parameter than the template's launch",
          "[recorder][framework]") {
  fw::resetForTesting();
  static int diverged = 0;
  diverged = 0;
  fw::setOnDiverged([] { ++diverged; });
  const uint64_t a = fw::launchKey("kernel_a");
  // Two layers' weights; activations outside both.
  const uint64_t weights[] = {0x10000, 0x100, 0x20000, 0x100};
  fw::setParameters(weights);
  auto params = [](uint64_t activation, uint64_t weight) {
    std::vector<uint8_t> bytes(24);
    std::memcpy(bytes.data(), &activation, 8);
    std::memcpy(bytes.data() + 8, &weight, 8);  // at 16: a scalar
    return bytes;
  };
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  auto layer = [&](const char* module, uint64_t activation, uint64_t weight) {
    fw::enterModule(module);
    fw::openScope(&ids[0], "aten::addmm", fw::ScopeKind::kOp, -1, 1, "/w/train.py", 7);
    const auto bytes = params(activation, weight);
    auto o = fw::currentOrigin(true, a, bytes);
    fw::closeScope(&ids[0]);
    fw::exitModule();
    return o;
  };
  for (int64_t step : {0, 1}) {
    fw::setStep(step);
    layer("Net.layers.0", 0x90000 + step, 0x10000);
    layer("Net.layers.1", 0x90100 + step, 0x20040);  // inside the second weight
  }
  fw::setStep(2);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  // Other activations; the same weights, or elsewhere in them (an expert
  // of several fused in one parameter); once a launch of the step was given
  // its place's weight, a word that points at no parameter (a slot the
  // kernel does not use): followed.
  std::vector<uint8_t> roles;
  CHECK(fw::followedRoles(a, 0, roles, params(0x50000, 0x10000)));
  CHECK(fw::currentOrigin(true, a, params(0x50000, 0x10000))->module == "Net.layers.0");
  CHECK(fw::currentOrigin(true, a, params(0x50100, 0x20080))->module == "Net.layers.1");
  fw::setStep(3);
  CHECK(fw::currentOrigin(true, a, params(0x50000, 0x10000))->module == "Net.layers.0");
  CHECK(fw::currentOrigin(true, a, params(0x50100, 0x7000))->module == "Net.layers.1");
  CHECK(diverged == 0);
  // LayerDrop skipped layer 0: layer 1's launch at layer 0's place matches
  // no template, and is observed.
  fw::setStep(4);
  CHECK_FALSE(fw::followedRoles(a, 0, roles, params(0x50000, 0x20040)));
  std::optional<Origin> o;
  std::string why;
  fw::currentOrigin(true, a, o, nullptr, params(0x50000, 0x20040), &why);
  CHECK(o->module.empty());
  CHECK(why ==
        "matched no template: given another weight than the launch at its place in the step learned (its word at "
        "byte 8 points into the parameter of 256 bytes at 0x20000, that launch's into the one of 256 bytes at "
        "0x10000)");
  CHECK(diverged == 1);
  CHECK(fw::attribution() == fw::Attribution::kLearn);
  // Learned in full, a step of the same kernels through the other layers
  // is a template of its own: both kinds are followed, each by its own.
  fw::setStep(5);
  layer("Net.layers.1", 0x1, 0x20000);
  layer("Net.layers.0", 0x2, 0x10000);
  fw::setStep(6);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  CHECK(fw::layerSteps()->templates == 2);
  CHECK(fw::currentOrigin(true, a, params(0x3, 0x10000))->module == "Net.layers.0");
  CHECK(fw::currentOrigin(true, a, params(0x4, 0x20000))->module == "Net.layers.1");
  fw::setStep(7);
  CHECK(fw::currentOrigin(true, a, params(0x3, 0x20000))->module == "Net.layers.1");
  CHECK(fw::currentOrigin(true, a, params(0x4, 0x10000))->module == "Net.layers.0");
  CHECK(diverged == 1);
  // Another model of the same class (an ensemble's next member), whose
  // weights the layer has not reported: its first launch points at no
  // parameter before any launch of the step was given its place's weight,
  // and matches no template.
  fw::setStep(8);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  why.clear();
  fw::currentOrigin(true, a, o, nullptr, params(0x3, 0x90000), &why);
  CHECK(o->module.empty());
  CHECK(why ==
        "matched no template: its word at byte 8 points into no parameter the framework reported, where the launch "
        "at its place in the step learned was given one, and no launch of this step before it was given its place's "
        "weight (a model the layer has not seen)");
  CHECK(diverged == 2);
  fw::resetForTesting();
}

TEST_CASE("a launch given a weight where the template's launch was given none is an operation run in addition",
          "[recorder][framework]") {
  fw::resetForTesting();
  static int diverged = 0;
  diverged = 0;
  fw::setOnDiverged([] { ++diverged; });
  const uint64_t scale = fw::launchKey("mul_kernel");
  const uint64_t weights[] = {0x10000, 0x100};
  fw::setParameters(weights);
  auto params = [](uint64_t out, uint64_t in) {
    std::vector<uint8_t> bytes(16);
    std::memcpy(bytes.data(), &out, 8);
    std::memcpy(bytes.data() + 8, &in, 8);
    return bytes;
  };
  auto op = [&](int line, uint64_t out, uint64_t in) {
    fw::openScope(&ids[0], "aten::mul_", fw::ScopeKind::kOp, -1, 1, "/w/train.py", line);
    auto o = fw::currentOrigin(true, scale, params(out, in));
    fw::closeScope(&ids[0]);
    return o;
  };
  // Each step scales its activations in place, then its weight.
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  for (int64_t step : {0, 1}) {
    fw::setStep(step);
    op(10, 0x90000, 0x90000);
    op(11, 0x10000, 0x10000);
  }
  fw::setStep(2);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  CHECK(fw::currentOrigin(true, scale, params(0x90100, 0x90100))->line == 10);
  CHECK(fw::currentOrigin(true, scale, params(0x10000, 0x10000))->line == 11);
  // Step 3 scales the weight first, in addition (an update the program made
  // once): the same kernel as the activations' at that place, given a
  // weight where theirs was given none. It matches no template.
  fw::setStep(3);
  std::optional<Origin> o;
  std::string why;
  fw::currentOrigin(true, scale, o, nullptr, params(0x10080, 0x10080), &why);
  CHECK(o->line == 0);
  CHECK(why ==
        "matched no template: given a weight (its word at byte 0 points into the parameter of 256 bytes at 0x10000) "
        "where the launch at its place in the step learned was given none");
  CHECK(diverged == 1);
  CHECK(fw::attribution() == fw::Attribution::kLearn);
  fw::resetForTesting();
}

TEST_CASE("a word into no parameter passes a weight's place as a stale slot, but not an operand",
          "[recorder][framework]") {
  fw::resetForTesting();
  static int diverged = 0;
  diverged = 0;
  fw::setOnDiverged([] { ++diverged; });
  const uint64_t scale = fw::launchKey("mul_kernel"), mm = fw::launchKey("mm_kernel");
  const uint64_t weights[] = {0x10000, 0x100, 0x20000, 0x100};
  fw::setParameters(weights);
  auto params = [](uint64_t first, uint64_t second) {
    std::vector<uint8_t> bytes(16);
    std::memcpy(bytes.data(), &first, 8);
    std::memcpy(bytes.data() + 8, &second, 8);
    return bytes;
  };
  auto op = [&](const char* module, int line, uint64_t key, uint64_t first, uint64_t second) {
    fw::enterModule(module);
    fw::openScope(&ids[0], "aten::mul", fw::ScopeKind::kOp, -1, 1, "/w/train.py", line);
    auto o = fw::currentOrigin(true, key, params(first, second));
    fw::closeScope(&ids[0]);
    fw::exitModule();
    return o;
  };
  // A layer's product with its weight, then a scale's product with another.
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  for (int64_t step : {0, 1}) {
    fw::setStep(step);
    op("Net.layer", 10, mm, 0x20000, 0x90000);
    op("Net.scale", 11, scale, 0x10000, 0x90100);
  }
  fw::setStep(2);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  CHECK(fw::currentOrigin(true, mm, params(0x20000, 0x50000))->module == "Net.layer");
  // The scale's word now points into no parameter: with no operand there
  // (a slot the kernel does not use, what the stack held), the place is
  // taken.
  CHECK(fw::currentOrigin(true, scale, params(0x7000, 0x50100))->module == "Net.scale");
  CHECK(diverged == 0);
  // In the next step, the same kernel multiplies two activations there (a
  // loss's product, in a GAN's step of the other network): the word is an
  // operand, live device memory, and the place is not taken.
  fw::setStep(3);
  CHECK(fw::currentOrigin(true, mm, params(0x20000, 0x50000))->module == "Net.layer");
  std::optional<Origin> o;
  std::string why;
  const auto bytes = params(0x60000, 0x50100);
  const gpurr::trace::PointerParam operands[] = {{0, 7, 0}, {8, 8, 0x100}};
  fw::currentOrigin(true, scale, o, nullptr, bytes, &why, operands);
  CHECK(o->module.empty());
  CHECK(why ==
        "matched no template: its word at byte 0 points at an operand in no parameter the framework reported, where "
        "the launch at its place in the step learned was given one");
  CHECK(diverged == 1);
  fw::resetForTesting();
}

TEST_CASE("in a step that stops matching the backward of ops run while following takes the template's forward ops",
          "[recorder][framework]") {
  fw::resetForTesting();
  // The step's thread is the framework's thread 7; its autograd counter is
  // `counter` (a node takes it, and it goes up by one).
  static int64_t counter = 0;
  fw::setSequenceSource([](uint64_t* thread, int64_t* sequence) {
    *thread = 7;
    *sequence = counter;
  });
  const uint64_t weights[] = {0x10000, 0x100, 0x20000, 0x100, 0x30000, 0x100};
  fw::setParameters(weights);
  auto weight = [](uint64_t address) {
    std::vector<uint8_t> bytes(8);
    std::memcpy(bytes.data(), &address, 8);
    return bytes;
  };
  const uint64_t a = fw::launchKey("kernel_a"), b = fw::launchKey("kernel_b");
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  // A linear of `module` given `w`: its node takes the counter, then it
  // launches. While the recorder follows, the layer reports nothing.
  auto forward = [&](const char* module, uint64_t w) {
    const bool observed = fw::attribution() != fw::Attribution::kFollow;
    if (observed) {
      fw::enterModule(module);
      fw::openScope(&ids[0], "aten::linear", fw::ScopeKind::kOp, counter, 7, "/w/train.py", 9);
    }
    ++counter;
    auto o = fw::currentOrigin(true, a, weight(w));
    if (observed) {
      fw::closeScope(&ids[0]);
      fw::exitModule();
    }
    return o;
  };
  auto backward = [&](const char* node, int64_t sequence) {
    fw::openScope(&ids[1], node, fw::ScopeKind::kBackwardNode, sequence, 7, nullptr, 0);
    auto o = fw::currentOrigin(true, b);
    fw::closeScope(&ids[1]);
    return o;
  };
  for (int64_t step : {0, 1}) {
    counter = 100 * step;
    fw::setStep(step);
    forward("Net.a", 0x10000);
    forward("Net.b", 0x20000);
    CHECK(backward("AddmmBackward0", 100 * step + 1)->module == "Net.b");
    CHECK(backward("AddmmBackward0", 100 * step)->module == "Net.a");
  }
  counter = 300;
  fw::setStep(2);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  // Net.a's launch is followed (the counter where the template's stood);
  // the next op's is given another layer's weight: observed from there.
  CHECK(forward("Net.a", 0x10000)->module == "Net.a");
  CHECK(forward("Net.c", 0x30000)->op.empty());
  CHECK(fw::attribution() == fw::Attribution::kLearn);
  // The node of the op that did not match (made after the last launch
  // checked): unknown. That of Net.a's op, made while following: the
  // template's forward op at its number, by place; also in the engine's
  // scope around the node (where its gradients are summed).
  auto o = backward("AddmmBackward0", 301);
  CHECK(o->module.empty());
  CHECK(o->phase == Phase::kBackward);
  o = backward("AddmmBackward0", 300);
  CHECK(o->module == "Net.a");
  CHECK(o->forwardOp == "aten::linear");
  CHECK(o->line == 9);
  CHECK(o->byPlace);
  CHECK(backward("autograd::engine::evaluate_function: AddmmBackward0", 300)->module == "Net.a");
  // A node of another name at that number (another op ran there): unknown.
  CHECK(backward("MulBackward0", 300)->module.empty());
  // A step that made a node more before Net.a's launch (a view, a layer
  // trained now and frozen then): the counters differ, and no node is
  // named by place.
  counter = 400;
  fw::setStep(3);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  ++counter;
  CHECK(forward("Net.a", 0x10000)->module == "Net.a");
  CHECK(forward("Net.c", 0x30000)->op.empty());
  CHECK(backward("AddmmBackward0", 401)->module.empty());
  CHECK(backward("AddmmBackward0", 400)->module.empty());
  fw::resetForTesting();
}

TEST_CASE("a step that skips, or runs in addition, launches that made no node goes on by the template's places",
          "[recorder][framework]") {
  fw::resetForTesting();
  static int64_t counter = 0;
  fw::setSequenceSource([](uint64_t* thread, int64_t* sequence) {
    *thread = 7;
    *sequence = counter;
  });
  const uint64_t weights[] = {0x10000, 0x100, 0x20000, 0x100};
  fw::setParameters(weights);
  auto weight = [](uint64_t address) {
    std::vector<uint8_t> bytes(8);
    std::memcpy(bytes.data(), &address, 8);
    return bytes;
  };
  const uint64_t linear = fw::launchKey("addmm"), scale = fw::launchKey("mul_"), grad = fw::launchKey("mm");
  // A linear of `module` given `w` (its node takes the counter, then it
  // launches), reported by the layer while it observes: after a miss, it
  // observes again only from the interpreter's next pending call.
  auto forward = [&](const char* module, uint64_t w, bool observed) {
    if (observed) {
      fw::enterModule(module);
      fw::openScope(&ids[0], "aten::linear", fw::ScopeKind::kOp, counter, 7, "/w/train.py", 9);
    }
    ++counter;
    auto o = fw::currentOrigin(true, linear, weight(w));
    if (observed) {
      fw::closeScope(&ids[0]);
      fw::exitModule();
    }
    return o;
  };
  // A forward pre-hook that scales `w` under torch.no_grad: no node.
  auto hook = [&](uint64_t w) { return fw::currentOrigin(true, scale, weight(w)); };
  auto backward = [&](int64_t sequence) {
    fw::openScope(&ids[1], "AddmmBackward0", fw::ScopeKind::kBackwardNode, sequence, 7, nullptr, 0);
    auto o = fw::currentOrigin(true, grad);
    fw::closeScope(&ids[1]);
    return o;
  };
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  // Step 0 begins with a launch of its own (the model's initialisation);
  // step 1 runs the hook on Net.b, in that step alone. Both are templates.
  for (int64_t step : {0, 1}) {
    counter = 100 * step;
    fw::setStep(step);
    if (step == 0) fw::currentOrigin(true, fw::launchKey("uniform_"));
    forward("Net.a", 0x10000, true);
    if (step == 1) hook(0x20000);
    forward("Net.b", 0x20000, true);
    backward(100 * step + 1);
    backward(100 * step);
  }
  // Step 2 runs no hook: Net.b's launch comes where the template has the
  // hook's, and is found one place on, at the counter the template's had.
  // The step is followed on from there.
  counter = 200;
  fw::setStep(2);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  CHECK(forward("Net.a", 0x10000, false)->module == "Net.a");
  CHECK(forward("Net.b", 0x20000, false)->module == "Net.b");
  CHECK(backward(201)->module == "Net.b");
  CHECK(backward(200)->module == "Net.a");
  CHECK(fw::attribution() == fw::Attribution::kFollow);
  // Step 3 runs the hook once more than the template, on Net.a's weight:
  // no template has that launch. Net.b's, which the layer has not observed
  // yet, is found in the template after the hook's: its node is named by
  // place.
  auto begin = [&](int64_t step) {
    counter = 100 * step;
    fw::setStep(step);
    REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
    CHECK(forward("Net.a", 0x10000, false)->module == "Net.a");
  };
  begin(3);
  CHECK(hook(0x20000)->byPlace);
  CHECK_FALSE(hook(0x10000)->byPlace);
  CHECK(fw::attribution() == fw::Attribution::kLearn);
  CHECK(forward("Net.b", 0x20000, false)->module.empty());
  auto o = backward(301);
  CHECK(o->module == "Net.b");
  CHECK(o->forwardOp == "aten::linear");
  CHECK(o->byPlace);
  // Step 4 made a node more before Net.b (an op trained now and frozen
  // then): the counters differ, Net.b's launch matches no template, and
  // neither that node nor Net.b's is named by place; Net.a's, made before,
  // is.
  begin(4);
  ++counter;
  CHECK_FALSE(forward("Net.b", 0x20000, false)->byPlace);
  CHECK(fw::attribution() == fw::Attribution::kLearn);
  CHECK(backward(401)->module.empty());
  CHECK(backward(402)->module.empty());
  CHECK(backward(400)->module == "Net.a");
  fw::resetForTesting();
}

TEST_CASE("threads whose launches interleave otherwise in each step match no template", "[recorder][framework]") {
  fw::resetForTesting();
  static int diverged = 0;
  diverged = 0;
  fw::setOnDiverged([] { ++diverged; });
  const uint64_t a = fw::launchKey("kernel_a");
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  // Two threads, each launching kernel_a in a module of its own when its
  // turn comes: no parameter bytes tell their launches apart.
  std::vector<Origin> origins;
  std::mutex mu;
  std::condition_variable cv;
  int turn = -1, done = 0;
  bool stop = false;
  auto worker = [&](int me, const char* module) {
    fw::enterModule(module);
    std::unique_lock lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || turn == me; });
      if (stop) break;
      origins.push_back(*fw::currentOrigin(true, a));
      turn = -1;
      ++done;
      cv.notify_all();
    }
    fw::exitModule();
  };
  std::thread alpha(worker, 0, "Alpha"), beta(worker, 1, "Beta");
  auto launchOn = [&](int who) {
    std::unique_lock lock(mu);
    const int before = done;
    turn = who;
    cv.notify_all();
    cv.wait(lock, [&] { return done > before; });
  };
  for (int64_t n : {0, 1}) {
    fw::setStep(n);
    launchOn(0);
    launchOn(1);
  }
  fw::setStep(2);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  origins.clear();
  launchOn(0);
  launchOn(1);
  CHECK(origins.at(0).module == "Alpha");
  CHECK(origins.at(1).module == "Beta");
  CHECK(diverged == 0);
  // Beta first: the place of Alpha's launch holds Beta's: no template, and
  // neither takes the other's module.
  fw::setStep(3);
  origins.clear();
  launchOn(1);
  launchOn(0);
  CHECK(origins.at(0).module.empty());
  CHECK(origins.at(1).module == "Alpha");  // observed again
  CHECK(diverged == 1);
  {
    std::lock_guard lock(mu);
    stop = true;
  }
  cv.notify_all();
  alpha.join();
  beta.join();
  fw::resetForTesting();
}

TEST_CASE("an origin built in the storage of one written earlier holds nothing of it", "[recorder][framework]") {
  fw::resetForTesting();
  Origin stale;
  stale.op = "aten::a_stale_operation_name_longer_than_short_strings";
  stale.opStack = {"a stale range", "aten::stale_outer", stale.op};
  stale.phase = Phase::kBackward;
  stale.forwardOp = "aten::a_stale_forward_operation_name";
  stale.module = "Stale.blocks.3.attention.projection";
  stale.file = "/a/stale/program/file.py";
  stale.line = 99;
  stale.step = 42;
  stale.stepLaunch = 17;
  stale.inPlace = InPlace::kYes;
  stale.byPlace = true;
  auto inStale = [&](uint64_t key, bool launch = true) {
    std::optional<Origin> o = stale;
    fw::currentOrigin(launch, key, o);
    return o;
  };
  const uint64_t a = fw::launchKey("kernel_a"), b = fw::launchKey("kernel_b");
  // Observing.
  fw::setStep(0);
  fw::enterModule("Net");
  fw::openScope(&ids[0], "aten::relu", fw::ScopeKind::kOp, -1, 1, "/w/train.py", 8, InPlace::kNo);
  CHECK(inStale(0, false) == fw::currentOrigin(false));
  fw::closeScope(&ids[0]);
  fw::exitModule();
  CHECK(inStale(0, false) == fw::currentOrigin(false));
  // Following: the template's origin, or (an operation not in it) nothing
  // but the step.
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  for (int64_t step : {1, 2}) {
    fw::setStep(step);
    fw::enterModule("Net");
    fw::openScope(&ids[0], "aten::relu", fw::ScopeKind::kOp, -1, 1, "/w/train.py", 8, InPlace::kNo);
    fw::currentOrigin(true, a);
    fw::closeScope(&ids[0]);
    fw::currentOrigin(true, b);
    fw::exitModule();
  }
  fw::setStep(3);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  const auto followed = inStale(a);
  REQUIRE(followed);
  Origin expected;
  expected.op = "aten::relu";
  expected.opStack = {"aten::relu"};
  expected.phase = Phase::kForward;
  expected.module = "Net";
  expected.file = "/w/train.py";
  expected.line = 8;
  expected.step = 3;
  expected.stepLaunch = 0;
  expected.inPlace = InPlace::kNo;
  expected.byPlace = true;
  CHECK(*followed == expected);
  const auto unmatched = inStale(a);  // kernel_a where the template has kernel_b
  REQUIRE(unmatched);
  Origin bare;
  bare.step = 3;
  bare.stepLaunch = 1;
  CHECK(*unmatched == bare);
  fw::resetForTesting();
}

TEST_CASE("what runs inside a benchmarking scope is marked, and is no place of a step learned or followed",
          "[recorder][framework]") {
  fw::resetForTesting();
  static int diverged = 0;
  fw::setOnDiverged([] { ++diverged; });
  const uint64_t a = fw::launchKey("triton_red_fused_sum_0"), b = fw::launchKey("kernel_b");
  // The autotuner's launches: a benchmarking scope (Inductor's method), its
  // launches of the kernel and an op it calls (the L2 cache's flush).
  auto autotune = [&] {
    fw::openScope(&ids[2], "CachingAutotuner.benchmark_all_configs", fw::ScopeKind::kBenchmark, -1, 0, nullptr, 0);
    fw::learnRoles({1});
    auto first = fw::currentOrigin(true, a);
    fw::openScope(&ids[3], "aten::zero_", fw::ScopeKind::kOp, -1, 1, nullptr, 0, InPlace::kYes);
    auto flush = fw::currentOrigin(false, b);
    fw::closeScope(&ids[3]);
    auto second = fw::currentOrigin(true, a);
    fw::closeScope(&ids[2]);
    for (const auto& o : {first, flush, second}) {
      REQUIRE(o);
      CHECK(o->benchmarking);
    }
    CHECK(first->op == "CachingAutotuner.benchmark_all_configs");
    REQUIRE(flush->opStack.size() >= 2);
    CHECK(flush->opStack[flush->opStack.size() - 2] == "CachingAutotuner.benchmark_all_configs");
    CHECK(flush->opStack.back() == "aten::zero_");
    CHECK(flush->op == "aten::zero_");
  };
  auto oneStep = [&](int64_t step, bool tune) {
    fw::setStep(step);
    fw::openScope(&ids[0], "CompiledFunction", fw::ScopeKind::kRange, -1, 1, "/w/train.py", 7);
    if (tune) autotune();
    const auto o = fw::currentOrigin(true, a);
    CHECK_FALSE(o->benchmarking);
    CHECK(o->op == "CompiledFunction");
    fw::closeScope(&ids[0]);
    fw::currentOrigin(true, b);
  };
  REQUIRE(fw::setAttribution(fw::Attribution::kLearn));
  oneStep(0, true);
  oneStep(1, true);  // learned with autotuning inside: the template holds the program's two launches
  fw::setStep(2);
  REQUIRE(fw::setAttribution(fw::Attribution::kFollow));
  // Followed: the benchmarking launches take their origin from the scopes
  // the layer still reports, and the template's places stay for the rest.
  fw::setStep(2);
  autotune();
  std::vector<uint8_t> roles;
  CHECK(fw::followedRoles(a, 0, roles));
  auto o = fw::currentOrigin(true, a);
  CHECK(o->op == "CompiledFunction");
  CHECK_FALSE(o->benchmarking);
  CHECK(fw::currentOrigin(true, b)->step == 2);
  CHECK_FALSE(fw::divergedSinceLastCall());
  CHECK(diverged == 0);
  CHECK(fw::attribution() == fw::Attribution::kFollow);
  // Closed, nothing is marked.
  fw::setStep(3);
  CHECK_FALSE(fw::currentOrigin(true, a)->benchmarking);
  fw::resetForTesting();
}
