// The framework context (framework_context.h): each thread's open scopes and module, the step, and the origin a
// launch takes from them (PyTorch's blocks: framework_blocks.cpp).
#include "recorder/framework_context.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "recorder/kept_once.h"
#include "recorder/step_templates.h"
#include "recorder/thread_local_ref.h"
#include "recorder/weights.h"

namespace gpurr::recorder::framework {
namespace {

struct Scope {
  const void* id;
  const char* name;  // the caller's; a range's points into `rangeName`
  ScopeKind kind;
  int64_t sequence;
  uint64_t sequenceThread;
  uint64_t serial;  // of the thread's scopes, from 1: ids (stack addresses) repeat
  // A user range may end on another thread (async ranges), and its name then
  // dies while the scope is still listed here: ranges keep a copy. Ops' and
  // nodes' names live as long as their (synchronous) scope.
  std::shared_ptr<const std::string> rangeName;
  // Its operands in the thread's `operands` from this index; `operandsKnown`
  // once reported (ops only).
  size_t operandsBegin = 0;
  bool operandsKnown = false;
  trace::InPlace inPlace = trace::InPlace::kUnknown;
  // The line before this scope gave its own (an op inside ranges only), put
  // back when it closes; nothing when it gave none.
  std::optional<std::pair<const char*, uint32_t>> outerLine;
  size_t modules = 0;  // the thread's modules entered when it opened
};

struct ThreadContext {
  std::vector<Scope> scopes;          // innermost last
  std::vector<Operand> operands;      // the open scopes', outermost first
  std::vector<const char*> modules;   // innermost last
  const char* file = nullptr;         // of the outermost scope open, or of the
  uint32_t line = 0;                  // outermost op inside ranges alone
  uint64_t serials = 0;
  uint64_t thread = 0;                // this context's number, from 1
  uint32_t benchmarking = 0;          // kBenchmark scopes open
};

std::atomic<uint64_t> threads{0};

thread_local EndsWithThread<ThreadContext> tls;

// This thread's number, from 1 in order of first use.
uint64_t threadNumber(ThreadContext& t) {
  if (t.thread == 0) t.thread = ++threads;
  return t.thread;
}

std::atomic<int (*)()> gradModeSource{nullptr};
constexpr uint64_t kNoGrad = 0xc2b2ae3d27d4eb4full;  // in the key of an operation run without gradients

// An operation's key in a template: its kind (and kernel), the thread that
// made it, so that steps whose threads interleave otherwise, or whose
// threads run each other's kernels, match no template rather than take
// another thread's origins, and whether that thread recorded gradients then
// (setGradModeSource), so that a step that evaluates under torch.no_grad
// before it trains is told from one that trains from its first launch.
bool recordingGradients() {
  int (*gradMode)() = gradModeSource.load(std::memory_order_relaxed);
  return gradMode == nullptr || gradMode() != 0;
}
uint64_t placeKey(uint64_t key) {
  return key ^ (recordingGradients() ? 0 : kNoGrad) ^ threadNumber(threadLocalRef(tls)) * 0x9e3779b97f4a7c15ull;
}

// The innermost backward node open whose ops belong to the backward pass:
// none when a module was entered inside it since (a forward recomputed in
// the backward pass, as activation checkpointing does: forward ops of that
// module, which name the nodes they make).
const Scope* backwardNode(const ThreadContext& t) {
  for (size_t i = t.scopes.size(); i-- > 0;) {
    const Scope& s = t.scopes[i];
    if (s.kind == ScopeKind::kBackwardNode) return t.modules.size() > s.modules ? nullptr : &s;
  }
  return nullptr;
}

struct SequenceKey {
  uint64_t thread;
  int64_t sequence;
  bool operator==(const SequenceKey&) const = default;
};
struct SequenceKeyHash {
  size_t operator()(const SequenceKey& k) const {
    return std::hash<uint64_t>()(k.thread * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(k.sequence));
  }
};
using ForwardTable = std::unordered_map<SequenceKey, ForwardOp, SequenceKeyHash>;

// Forward ops by autograd sequence number, in two generations: when the
// newer one reaches kGeneration entries it becomes the older one, so memory
// stays bounded and a backward finds forward ops up to 2 * kGeneration ops old.
constexpr size_t kGeneration = 1 << 17;
// Never destroyed: the program's threads may report ops until the process
// ends, after this library's statics would have been.
struct Tables {
  std::mutex forwardMu;
  ForwardTable forwardNew, forwardOld;
};
Tables& tables = *new Tables;
std::mutex& forwardMu = tables.forwardMu;
ForwardTable &forwardNew = tables.forwardNew, &forwardOld = tables.forwardOld;

std::atomic<bool> reported{false};
std::atomic<int64_t> currentStep_{-1};
std::atomic<int64_t> stoppedAfterStep_{-1};
std::atomic<uint64_t> stepLaunches{0};
// kBenchmark scopes open on every thread: while none is, a launch's origin
// never looks at its thread's scopes to learn whether it is benchmarking.
std::atomic<uint32_t> benchmarkingScopes{0};

struct Learning {
  std::mutex mu;
  std::vector<Learned> step;         // this step's so far (learning)
  bool overflowed = false;           // this step is no template (more than kMaxTemplate, or partly followed)
  std::vector<Template> templates;   // at most kTemplates
  size_t current = 0;                // the template followed now
  uint64_t place = 0;                // operations of this step so far
  uint64_t steps = 0;                // steps begun: the templates' clock
  bool unmatched = false;            // an operation of this step matched no template
  StepLearned lastLearned = StepLearned::kNot;  // of the step that ended last
  trace::LayerSteps tally;           // the steps completed (but `templates`)
  Weights weights;                   // the framework's parameters (setParameters)
  // The step's thread (the framework's number) and its autograd sequence
  // counter when the step began (setSequenceSource; -1: unknown), this
  // step's sequenced ops (learning); following, the counter (from the
  // step's) at its last launch given a weight that came where the template's
  // did (nodes made before it are the template's), or whether one did not;
  // the template followed when the step stopped matching, and its place
  // from which that step's launches are looked for in it (foundAhead).
  uint64_t stepThread = 0;
  int64_t stepBase = -1;
  Sequenced sequenced;
  int64_t verified = 0;
  bool shifted = false;
  bool weighed = false;  // a launch of this step was given its place's weight
  size_t missTemplate = 0;
  size_t resumeAt = 0;
};
Learning& learning = *new Learning;
std::atomic<int> mode{static_cast<int>(Attribution::kObserve)};
std::atomic<bool> diverged{false};
std::atomic<void (*)()> onDiverged{nullptr};
std::atomic<void (*)(uint64_t*, int64_t*)> sequenceSource{nullptr};
thread_local EndsWithThread<std::optional<std::vector<uint8_t>>> pendingRoles;

Attribution modeNow() { return static_cast<Attribution>(mode.load(std::memory_order_relaxed)); }

// The calling thread's autograd sequence counter from the step's, when it is
// the step's thread (setSequenceSource). Under learning.mu.
std::optional<int64_t> sequenceInStep() {
  void (*now)(uint64_t*, int64_t*) = sequenceSource.load(std::memory_order_relaxed);
  if (now == nullptr || learning.stepBase < 0) return std::nullopt;
  uint64_t thread = 0;
  int64_t sequence = -1;
  now(&thread, &sequence);
  if (thread != learning.stepThread || sequence < learning.stepBase) return std::nullopt;
  return sequence - learning.stepBase;
}

// `o` but for its step and stepLaunch, kept once for the process: a launch
// following a template points at it, and the trace thread copies it into
// the event it writes. Never freed: an entry on its way to the trace thread
// may point at the origin of a template replaced since. One copy for each
// distinct origin of the templates (their ops' sites).
const trace::Origin* keptOrigin(const trace::Origin& o) {
  static auto* kept = new KeptOnce<trace::Origin>;
  std::string text;
  for (const std::string& s : {o.op, o.forwardOp, o.module, o.file}) text.append(s).push_back('\0');
  for (const std::string& s : o.opStack) text.append(s).push_back('\0');
  text += std::to_string(o.line) + ' ' + std::to_string(static_cast<int>(o.phase)) + ' ' +
          std::to_string(static_cast<int>(o.inPlace)) + ' ' + std::to_string(o.benchmarking) + ' ' +
          std::to_string(o.opStack.size());
  return kept->keep(std::move(text), [&] {
    trace::Origin copy = o;
    copy.step = -1;
    copy.stepLaunch = 0;
    return copy;
  });
}

// Keeps the complete step `ops` as a template, in place of one of the same
// operations or else of the least recently followed; it becomes current.
// Returns whether it was of the same operations as one kept. Under learning.mu.
StepLearned keepTemplate(std::vector<Learned>&& ops, Sequenced&& sequenced) {
  std::vector<Template>& ts = learning.templates;
  std::vector<uint64_t> keys(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) keys[i] = ops[i].key;
  for (Learned& op : ops) op.kept = keptOrigin(op.origin);
  size_t at = ts.size();
  auto sameWeights = [&ops](const Template& t) {
    return std::equal(ops.begin(), ops.end(), t.ops.begin(),
                      [](const Learned& x, const Learned& y) { return x.weight == y.weight; });
  };
  for (size_t i = 0; i < ts.size() && at == ts.size(); ++i) {
    if (ts[i].keys == keys && sameWeights(ts[i])) at = i;
  }
  const StepLearned kind = at < ts.size() ? StepLearned::kKnownKind : StepLearned::kNewKind;
  if (at == ts.size() && ts.size() == kTemplates) {
    at = 0;
    for (size_t i = 1; i < ts.size(); ++i) {
      if (ts[i].used < ts[at].used) at = i;
    }
  }
  if (at == ts.size()) ts.emplace_back();
  ts[at] = Template{std::move(keys), std::move(ops), learning.steps, std::move(sequenced)};
  learning.current = at;
  markShared(ts, keptOrigin);
  return kind;
}

// A new step begins: the one learned becomes a template (not what ran
// before the first step, `complete` false).
void stepBegins(bool complete) {
  std::lock_guard lock(learning.mu);
  ++learning.steps;
  if (complete) {
    trace::LayerSteps& t = learning.tally;
    ++(learning.unmatched ? t.unmatched : modeNow() == Attribution::kFollow ? t.followed : t.observed);
  }
  learning.unmatched = false;
  learning.lastLearned = StepLearned::kNot;
  if (modeNow() == Attribution::kLearn && complete && !learning.overflowed) {
    learning.lastLearned = keepTemplate(std::move(learning.step), std::move(learning.sequenced));
  }
  if (!learning.templates.empty()) learning.templates[learning.current].used = learning.steps;
  learning.step.clear();
  learning.sequenced.clear();
  learning.verified = 0;
  learning.shifted = false;
  learning.weighed = false;
  learning.resumeAt = 0;
  learning.stepBase = -1;
  if (void (*now)(uint64_t*, int64_t*) = sequenceSource.load()) now(&learning.stepThread, &learning.stepBase);
  learning.overflowed = false;
  learning.place = 0;
}

// Whether the operation of `key` and parameter bytes `params` is the one
// template `t` has at `place`: of the same kind and kernel, and, where the
// template's launch was given a weight, given the same one there, or, once
// a launch of this step was (`weighed`), none of the framework's parameters
// (taken for a stale word: what a slot the kernel does not use held; before
// that, it may be a model the layer has not seen, another member of an
// ensemble of one class), but for a word that points into live device
// memory, an operand (the same kernel run on activations where the step
// learned ran it on a weight: another op, a loss's product in the step of
// a GAN's other network); where it was given none, given none (an update
// of a weight the step ran in addition, by a kernel that the template's
// operation at that place runs on activations, is no operation of the
// template). Under learning.mu.
bool matches(const Template& t, uint64_t place, uint64_t key, const LaunchWords& words) {
  if (place >= t.keys.size() || t.keys[place] != key) return false;
  const std::optional<Weight>& w = t.ops[place].weight;
  if (!w) return !learning.weights.of(words.params);
  const Weights::Fit fit = learning.weights.fit(*w, words.params);
  return fit == Weights::Fit::kSame ||
         (fit == Weights::Fit::kNone && learning.weighed && !words.operand(w->offset));
}

// Why the operation of `key` and parameter bytes `params` matched no
// template at `place` (entryAt found none). Under learning.mu.
std::string whyUnmatched(uint64_t place, uint64_t key, const LaunchWords& words) {
  const Template& t = learning.templates[learning.current];
  if (place >= t.keys.size()) return "matched no template: the step learned had ended before this launch";
  if ((t.keys[place] ^ key) == kNoGrad) {
    return std::string("matched no template: the step learned ran this kernel at this launch's place ") +
           (recordingGradients() ? "without recording gradients, this launch recording them"
                                 : "recording gradients, this launch without (torch.no_grad)");
  }
  if (t.keys[place] != key) return "matched no template: the step learned had another operation at this launch's place";
  return learning.weights.whyNot(t.ops[place].weight, words);
}

// The templates' entry for an operation of `key` and parameter bytes
// `params` at `place` in this step: the current template's, or another's
// that has this step's operations so far and this one next (the most
// recently followed), which becomes current. Nothing when none has. Under
// learning.mu.
const Learned* entryAt(uint64_t place, uint64_t key, const LaunchWords& words) {
  std::vector<Template>& ts = learning.templates;
  if (ts.empty()) return nullptr;
  const Template& current = ts[learning.current];
  if (matches(current, place, key, words)) return &current.ops[place];
  if (place > current.keys.size()) return nullptr;
  // This step so far is the current template's first `place` operations.
  const auto seen = std::span<const uint64_t>(current.keys).first(place);
  size_t other = ts.size();
  for (size_t i = 0; i < ts.size(); ++i) {
    const Template& t = ts[i];
    if (i == learning.current || !matches(t, place, key, words)) continue;
    if (!std::equal(seen.begin(), seen.end(), t.keys.begin())) continue;
    if (other == ts.size() || t.used > ts[other].used) other = i;
  }
  if (other == ts.size()) return nullptr;
  learning.current = other;
  learning.verified = 0;  // the nodes made before were checked against another template's
  ts[other].used = learning.steps;
  ++learning.tally.switches;
  return &ts[other].ops[place];
}

// While learning, a forward op or backward node of the step's thread, by
// its sequence number from the step's first (Learning::sequenced).
SequencedOp* sequencedAt(uint64_t thread, int64_t sequence) {
  if (thread != learning.stepThread || learning.stepBase < 0 || sequence < learning.stepBase || learning.overflowed)
    return nullptr;
  Sequenced& ops = learning.sequenced;
  if (auto it = ops.find(sequence - learning.stepBase); it != ops.end()) return &it->second;
  return ops.size() < kMaxSequenced ? &ops[sequence - learning.stepBase] : nullptr;
}

// A backward node's name, the same for its own scope and the engine's
// around it (where its gradients are summed and its hooks run).
std::string_view nodeName(std::string_view name) {
  constexpr std::string_view kEngine = "autograd::engine::evaluate_function: ";
  return name.starts_with(kEngine) ? name.substr(kEngine.size()) : name;
}

// An op that carries sequence number N opens. Autograd numbers the node an
// op creates with the counter's value when the op began, so every op that
// begins before the node is made carries N too, including ops that make no
// node (aten::detach): the node is named by the op that began last with N,
// or rather by the outermost op open around it (the program's own call:
// aten::linear rather than the aten::addmm inside it, aten::cross_entropy_loss
// rather than aten::nll_loss).
void rememberForward(const Scope& s, const ThreadContext& t) {
  const Scope* outermost = &s;
  for (const Scope& open : t.scopes) {
    if (open.kind == ScopeKind::kOp) {
      outermost = &open;
      break;
    }
  }
  std::optional<ForwardOp> learned;  // its copy for the step learned
  {
    std::lock_guard lock(forwardMu);
    const SequenceKey key{s.sequenceThread, s.sequence};
    auto it = forwardNew.find(key);
    if (it == forwardNew.end()) {
      if (forwardOld.count(key)) return;  // named long ago
      if (forwardNew.size() >= kGeneration) {
        forwardOld = std::move(forwardNew);
        forwardNew.clear();
      }
      it = forwardNew.emplace(key, ForwardOp{}).first;
    } else if (it->second.thread == t.thread) {
      for (const Scope& open : t.scopes) {
        if (open.serial == it->second.serial) return;  // named by an op still open around this one
      }
    }
    it->second = ForwardOp{outermost->name, t.modules.empty() ? std::string() : t.modules.back(), t.file, t.line,
                           t.thread, outermost->serial};
    if (modeNow() == Attribution::kLearn) learned = it->second;
  }
  if (!learned) return;
  std::lock_guard lock(learning.mu);
  if (SequencedOp* op = sequencedAt(s.sequenceThread, s.sequence)) op->op = std::move(*learned);
}

std::optional<ForwardOp> forwardOf(const Scope& s) {
  std::lock_guard lock(forwardMu);
  const SequenceKey key{s.sequenceThread, s.sequence};
  if (auto it = forwardNew.find(key); it != forwardNew.end()) return it->second;
  if (auto it = forwardOld.find(key); it != forwardOld.end()) return it->second;
  return std::nullopt;
}

// In template `t`, at most `window` places from `from` on, a launch of
// `key` given the same weight as `params`, at the autograd counter that
// stands now where the template's stood: the step ran that operation there,
// having skipped or run in addition only operations that made no node (a
// hook under torch.no_grad that ran in one step). Under learning.mu.
constexpr size_t kSkipWindow = 256;
std::optional<size_t> foundAhead(const Template& t, size_t from, size_t window, uint64_t key,
                                 std::span<const uint8_t> params) {
  if (learning.shifted) return std::nullopt;
  const std::optional<Weight> weight = learning.weights.of(params);
  const std::optional<int64_t> now = weight ? sequenceInStep() : std::nullopt;
  if (!now) return std::nullopt;
  for (size_t i = from; i < std::min(t.ops.size(), from + window); ++i) {
    if (t.ops[i].key == key && t.ops[i].counter == *now && t.ops[i].weight == weight) return i;
  }
  return std::nullopt;
}

// The entry for the operation of `key` and parameter bytes `params` at
// `place` in this step: the templates' there (entryAt), or else the current
// template's a few places on (foundAhead: the step, which matched the
// template so far, skipped the launches between), whose place is then
// `*found`. Under learning.mu.
const Learned* entryNear(uint64_t place, uint64_t key, const LaunchWords& words, uint64_t* found) {
  *found = place;
  if (const Learned* l = entryAt(place, key, words)) return l;
  if (learning.templates.empty()) return nullptr;
  const Template& t = learning.templates[learning.current];
  const std::optional<size_t> at = foundAhead(t, place, kSkipWindow, key, words.params);
  if (!at) return nullptr;
  *found = *at;
  return &t.ops[*at];
}

// The forward op of backward node `node` made while the recorder followed a
// template, in a step that then stopped matching (no op of it observed):
// that template's op at the same sequence number from the step's first,
// where the template's node there had the same name, and only for nodes
// made before the step's last launch given a weight that came at the same
// counter as the template's (none once one did not: the step made other
// nodes than the template's before it), the step's launches found in the
// template after those it ran in addition included (foundAhead). Nothing
// otherwise.
std::optional<ForwardOp> followedForward(const Scope& node) {
  std::lock_guard lock(learning.mu);
  if (!learning.unmatched || learning.shifted || learning.stepBase < 0 || node.sequenceThread != learning.stepThread ||
      node.sequence < learning.stepBase || node.sequence - learning.stepBase >= learning.verified ||
      learning.missTemplate >= learning.templates.size()) {
    return std::nullopt;
  }
  const Sequenced& ops = learning.templates[learning.missTemplate].sequenced;
  const auto it = ops.find(node.sequence - learning.stepBase);
  if (it == ops.end() || it->second.node != nodeName(node.name) || it->second.op.op.empty()) return std::nullopt;
  return it->second.op;
}

}  // namespace

void openScope(const void* id, const char* name, ScopeKind kind, int64_t sequence, uint64_t sequenceThread,
               const char* file, uint32_t line, trace::InPlace inPlace) {
  reported.store(true, std::memory_order_relaxed);
  ThreadContext& t = threadLocalRef(tls);
  threadNumber(t);
  Scope scope{id, name == nullptr ? "" : name, kind, sequence, sequenceThread, ++t.serials, nullptr,
              t.operands.size(), false, kind == ScopeKind::kOp ? inPlace : trace::InPlace::kUnknown, std::nullopt,
              t.modules.size()};
  if (t.scopes.empty()) {
    t.file = file;
    t.line = line;
  } else if (file != nullptr) {
    // An op the program called inside ranges alone (a closure run by
    // `optimizer.step`, whose profiler range is the outermost scope): the
    // layer gives its own line, which replaces the range's.
    scope.outerLine.emplace(t.file, t.line);
    t.file = file;
    t.line = line;
  }
  if (kind == ScopeKind::kRange || kind == ScopeKind::kBenchmark) {
    scope.rangeName = std::make_shared<const std::string>(scope.name);
    scope.name = scope.rangeName->c_str();
  }
  if (kind == ScopeKind::kBenchmark) {
    ++t.benchmarking;
    benchmarkingScopes.fetch_add(1, std::memory_order_relaxed);
  }
  t.scopes.push_back(std::move(scope));
  if (kind == ScopeKind::kOp && sequence >= 0) {
    // An op inside a backward node belongs to the backward pass: only forward
    // ops (recomputed ones too) name nodes.
    if (backwardNode(t) == nullptr) rememberForward(t.scopes.back(), t);
  } else if (kind == ScopeKind::kBackwardNode && sequence >= 0 && modeNow() == Attribution::kLearn) {
    std::lock_guard lock(learning.mu);
    if (SequencedOp* op = sequencedAt(sequenceThread, sequence)) op->node = nodeName(t.scopes.back().name);
  }
}

void closeScope(const void* id) {
  ThreadContext& t = threadLocalRef(tls);
  for (size_t i = t.scopes.size(); i-- > 0;) {
    if (t.scopes[i].id == id) {
      t.operands.resize(t.scopes[i].operandsBegin);
      for (size_t j = t.scopes.size(); j-- > i;) {
        if (t.scopes[j].outerLine) std::tie(t.file, t.line) = *t.scopes[j].outerLine;
        if (t.scopes[j].kind == ScopeKind::kBenchmark) {
          --t.benchmarking;
          benchmarkingScopes.fetch_sub(1, std::memory_order_relaxed);
        }
      }
      t.scopes.resize(i);
      if (t.scopes.empty()) {
        t.file = nullptr;
        t.line = 0;
      }
      return;
    }
  }
}

void opOperands(const void* id, std::span<const Operand> operands) {
  ThreadContext& t = threadLocalRef(tls);
  if (t.scopes.empty() || t.scopes.back().id != id || t.scopes.back().kind != ScopeKind::kOp) return;
  Scope& s = t.scopes.back();
  t.operands.resize(s.operandsBegin);
  t.operands.insert(t.operands.end(), operands.begin(), operands.end());
  s.operandsKnown = true;
}

std::optional<std::span<const Operand>> innermostOpOperands() {
  const ThreadContext& t = threadLocalRef(tls);
  if (t.scopes.empty() || !t.scopes.back().operandsKnown) return std::nullopt;
  return std::span<const Operand>(t.operands).subspan(t.scopes.back().operandsBegin);
}

void enterModule(const char* path) {
  reported.store(true, std::memory_order_relaxed);
  threadLocalRef(tls).modules.push_back(path == nullptr ? "" : path);
}

bool recomputing() {
  const ThreadContext& t = threadLocalRef(tls);
  for (size_t i = t.scopes.size(); i-- > 0;) {
    if (t.scopes[i].kind == ScopeKind::kBackwardNode) return t.modules.size() > t.scopes[i].modules;
  }
  return false;
}

void exitModule() {
  std::vector<const char*>& modules = threadLocalRef(tls).modules;
  if (!modules.empty()) modules.pop_back();
}

void setStep(int64_t step) {
  reported.store(true, std::memory_order_relaxed);
  if (const int64_t ended = currentStep_.exchange(step); ended != step) {
    stepLaunches.store(0);
    stepBegins(ended >= 0);
  }
}

uint64_t launchKey(std::string_view function) { return std::hash<std::string_view>()(function) | 1; }

uint64_t operationKey(const trace::Payload& payload) {
  if (const auto* k = std::get_if<trace::KernelLaunch>(&payload)) return launchKey(k->function);
  return static_cast<uint64_t>(payload.index()) << 1;
}

bool setAttribution(Attribution m) {
  std::lock_guard lock(learning.mu);
  if (m == Attribution::kFollow && learning.templates.empty()) return false;
  if (m == Attribution::kObserve) {
    learning.templates.clear();
    learning.current = 0;
  }
  // Set between two steps (the layer does so) or before the first, the step
  // under way is learned whole; else it is no template.
  learning.overflowed = m == Attribution::kLearn && learning.place > 0;
  learning.step.clear();
  learning.place = 0;
  mode.store(static_cast<int>(m));
  diverged.store(false);
  return true;
}

Attribution attribution() { return modeNow(); }

bool divergedSinceLastCall() { return diverged.exchange(false); }

StepLearned lastStepLearned() {
  std::lock_guard lock(learning.mu);
  return learning.lastLearned;
}

void setOnDiverged(void (*observe)()) { onDiverged.store(observe); }

void learnRoles(std::vector<uint8_t> roles) { threadLocalRef(pendingRoles) = std::move(roles); }

bool followedRoles(uint64_t key, size_t count, std::vector<uint8_t>& roles, std::span<const uint8_t> params,
                   std::span<const trace::PointerParam> pointers) {
  key = placeKey(key);
  std::lock_guard lock(learning.mu);
  uint64_t found = 0;
  const Learned* l = entryNear(learning.place, key, LaunchWords{params, pointers}, &found);
  if (l == nullptr || l->roles.size() != count) return false;
  roles.assign(l->roles.begin(), l->roles.end());
  return true;
}

void setSequenceSource(void (*now)(uint64_t* thread, int64_t* sequence)) { sequenceSource.store(now); }

void setGradModeSource(int (*enabled)()) { gradModeSource.store(enabled); }

void setParameters(std::span<const uint64_t> ranges) {
  std::lock_guard lock(learning.mu);
  learning.weights.set(ranges);
}

bool active() { return reported.load(std::memory_order_relaxed); }

std::optional<trace::LayerSteps> layerSteps() {
  std::lock_guard lock(learning.mu);
  trace::LayerSteps t = learning.tally;
  if (t.observed + t.followed + t.unmatched == 0) return std::nullopt;
  t.templates = learning.templates.size();
  return t;
}

int64_t currentStep() { return currentStep_.load(std::memory_order_relaxed); }

void stopAfterStep(int64_t step) { stoppedAfterStep_.store(step); }

int64_t stoppedAfterStep() { return stoppedAfterStep_.load(); }

namespace {

// The origin of the operation at the next place in the templates, kept
// for the process (its step and stepLaunch apart), when one has the same key
// there, or the current one a few places on (entryNear; the key with the
// thread's: placeKey); counts the place. When none has, nothing: the
// recorder learns again from here (this step is no template; the templates
// are kept) and asks the layer to observe.
const trace::Origin* followed(uint64_t key, const LaunchWords& words, std::string* why) {
  key = placeKey(key);
  {
    std::lock_guard lock(learning.mu);
    const uint64_t place = learning.place;
    uint64_t found = 0;
    if (const Learned* l = entryNear(place, key, words, &found)) {
      learning.place = found + 1;
      if (!learning.weighed && l->weight) {
        learning.weighed = learning.weights.fit(*l->weight, words.params) == Weights::Fit::kSame;  // once a step
      }
      if (l->counter >= 0) {
        // Given its weight: the nodes made by its op and before are the
        // template's when the counter stands where the template's did.
        const std::optional<int64_t> now = sequenceInStep();
        if (now && *now == l->counter) learning.verified = std::max(learning.verified, l->madeBefore);
        if (now && *now != l->counter) learning.shifted = true;
      }
      return l->shared != nullptr ? l->shared : l->kept;
    }
    learning.place = place + 1;
    learning.missTemplate = learning.current;
    learning.resumeAt = place;
    if (why != nullptr && !learning.templates.empty()) *why = whyUnmatched(place, key, words);
    learning.step.clear();
    learning.overflowed = true;
    learning.unmatched = true;
    mode.store(static_cast<int>(Attribution::kLearn));
    diverged.store(true);
  }
  if (void (*observe)() = onDiverged.load()) observe();
  return nullptr;
}

void learn(uint64_t key, const trace::Origin& o, std::span<const uint8_t> params) {
  key = placeKey(key);
  std::optional<std::vector<uint8_t>>& pending = threadLocalRef(pendingRoles);
  std::optional<std::vector<uint8_t>> roles = std::move(pending);
  pending.reset();
  std::lock_guard lock(learning.mu);
  ++learning.place;
  if (learning.overflowed) {
    // A launch the layer may not have observed, in a step that stopped
    // matching: where the launches since are those of operations the step
    // ran in addition, this one the template's at the place it stopped
    // matching, the nodes made before it are named. (Only there: further
    // on, the launches skipped could be of other modules that made as many
    // nodes, as LayerDrop's other layer does.)
    if (learning.unmatched && learning.missTemplate < learning.templates.size()) {
      const Template& t = learning.templates[learning.missTemplate];
      if (const std::optional<size_t> at = foundAhead(t, learning.resumeAt, 1, key, params)) {
        learning.verified = std::max(learning.verified, t.ops[*at].madeBefore);
        learning.resumeAt = *at + 1;
      }
    }
    return;
  }
  if (learning.step.size() >= kMaxTemplate) {
    learning.overflowed = true;
    learning.step = {};
    return;
  }
  std::optional<Weight> weight = learning.weights.of(params);
  int64_t counter = -1, madeBefore = -1;
  if (const std::optional<int64_t> now = weight ? sequenceInStep() : std::nullopt) {
    counter = madeBefore = *now;
    const std::vector<Scope>& scopes = threadLocalRef(tls).scopes;
    for (size_t i = scopes.size(); i-- > 0;) {
      const Scope& op = scopes[i];
      if (op.kind != ScopeKind::kOp || op.sequence < 0) continue;
      if (op.sequenceThread == learning.stepThread) madeBefore = std::max(*now, op.sequence - learning.stepBase + 1);
      break;
    }
  }
  learning.step.push_back(
      Learned{key, o, roles ? std::move(*roles) : std::vector<uint8_t>(), weight, counter, madeBefore});
}

// Every field of `o` set anew from this thread's context; its strings and
// stack keep their capacity.
void observe(bool launch, trace::Origin& o);

// `o` emptied but for its stack (which the caller sizes), its strings
// keeping their capacity.
void clear(trace::Origin& o) {
  o.op.clear();
  o.phase = trace::Phase::kUnknown;
  o.forwardOp.clear();
  o.module.clear();
  o.file.clear();
  o.line = 0;
  o.step = -1;
  o.stepLaunch = 0;
  o.inPlace = trace::InPlace::kUnknown;
  o.benchmarking = false;
  o.byPlace = false;
}

// Whether the calling thread is inside a kBenchmark scope: one atomic load
// while no thread is.
bool benchmarkingHere() {
  return benchmarkingScopes.load(std::memory_order_relaxed) != 0 && threadLocalRef(tls).benchmarking != 0;
}

}  // namespace

std::optional<trace::Origin> currentOrigin(bool launch, uint64_t key, std::span<const uint8_t> params) {
  std::optional<trace::Origin> o;
  currentOrigin(launch, key, o, nullptr, params);
  return o;
}

void currentOrigin(bool launch, uint64_t key, std::optional<trace::Origin>& out, const trace::Origin** kept,
                   std::span<const uint8_t> params, std::string* unmatched,
                   std::span<const trace::PointerParam> pointers) {
  if (kept != nullptr) *kept = nullptr;
  if (!active()) {
    out.reset();
    return;
  }
  trace::Origin& o = out ? *out : out.emplace();
  const Attribution m = modeNow();
  if (benchmarkingHere()) {
    // No place of a step: neither followed nor learned, the roles learned for
    // it dropped.
    threadLocalRef(pendingRoles).reset();
    observe(launch, o);
    return;
  }
  if (m == Attribution::kFollow) {
    if (const trace::Origin* k = followed(key, LaunchWords{params, pointers}, unmatched); k == nullptr) {
      clear(o);
      o.opStack.clear();
    } else if (kept != nullptr) {
      *kept = k;  // the rest of `o` is the caller's to fill from it
    } else {
      o = *k;
      o.byPlace = true;
    }
    o.step = currentStep_.load(std::memory_order_relaxed);
    o.stepLaunch = launch ? stepLaunches.fetch_add(1, std::memory_order_relaxed)
                          : stepLaunches.load(std::memory_order_relaxed);
    return;
  }
  observe(launch, o);
  if (m == Attribution::kLearn) learn(key, o, params);
}

std::optional<trace::Origin> originOutsideTemplate() {
  if (!active()) return std::nullopt;
  trace::Origin o;
  if (modeNow() != Attribution::kFollow) {
    observe(false, o);
    return o;
  }
  o.step = currentStep_.load(std::memory_order_relaxed);
  o.stepLaunch = stepLaunches.load(std::memory_order_relaxed);
  return o;
}

namespace {

void observe(bool launch, trace::Origin& o) {
  const ThreadContext& t = threadLocalRef(tls);
  clear(o);
  o.step = currentStep_.load(std::memory_order_relaxed);
  o.stepLaunch = launch ? stepLaunches.fetch_add(1, std::memory_order_relaxed)
                        : stepLaunches.load(std::memory_order_relaxed);
  const Scope* op = nullptr;
  const Scope* node = backwardNode(t);
  o.opStack.resize(t.scopes.size());
  for (size_t i = 0; i < t.scopes.size(); ++i) {
    const Scope& s = t.scopes[i];
    o.opStack[i].assign(s.name);
    o.benchmarking |= s.kind == ScopeKind::kBenchmark;
    if (s.kind == ScopeKind::kOp) op = &s;
  }
  if (op == nullptr && !t.scopes.empty()) op = &t.scopes.back();
  if (op != nullptr) {
    o.op = op->name;
    o.inPlace = op->inPlace;
  }
  if (node != nullptr) {
    o.phase = trace::Phase::kBackward;
    if (node->sequence >= 0) {
      std::optional<ForwardOp> f = forwardOf(*node);
      if (!f && modeNow() == Attribution::kLearn) o.byPlace = (f = followedForward(*node)).has_value();
      if (f) {
        o.forwardOp = std::move(f->op);
        o.module = std::move(f->module);
        if (f->file != nullptr) o.file = f->file;
        o.line = f->line;
      }
    }
    // An op inside the node that gave a line of its own (the program's code
    // in a Python autograd.Function's backward) names it, not the forward's.
    for (const Scope* s = node + 1; s != t.scopes.data() + t.scopes.size(); ++s) {
      if (s->outerLine && t.file != nullptr) {
        o.file = t.file;
        o.line = t.line;
        break;
      }
    }
    return;
  }
  if (!t.scopes.empty() || !t.modules.empty()) o.phase = trace::Phase::kForward;
  if (!t.modules.empty()) o.module = t.modules.back();
  if (t.file != nullptr) o.file = t.file;
  o.line = t.line;
}

}  // namespace

void resetForTesting() {
  tls = ThreadContext{};
  forgetBlocksForTesting();
  std::lock_guard lock(forwardMu);
  forwardNew.clear();
  forwardOld.clear();
  setAttribution(Attribution::kObserve);
  {
    std::lock_guard learningLock(learning.mu);
    learning.tally = {};
    learning.unmatched = false;
    learning.weights.set({});
    learning.stepThread = 0;
    learning.stepBase = -1;
    learning.sequenced.clear();
    learning.verified = 0;
    learning.shifted = false;
    learning.weighed = false;
    learning.resumeAt = 0;
  }
  setOnDiverged(nullptr);
  setSequenceSource(nullptr);
  setGradModeSource(nullptr);
  setFinishRecording(nullptr);
  setFlushRecording(nullptr);
  pendingRoles.reset();
  benchmarkingScopes.store(0);
  reported.store(false);
  currentStep_.store(-1);
  stoppedAfterStep_.store(-1);
  stepLaunches.store(0);
}

}  // namespace gpurr::recorder::framework
