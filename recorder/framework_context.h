// What the program's framework is doing on each thread: the ops and ranges
// open (PyTorch's RecordFunction scopes), the nn.Module whose forward runs,
// the training step. gpurr's framework layer (framework/) reports them through
// the C functions of framework_api.h; the session reads the calling thread's
// context into every launch, copy and set it records (trace::Origin).
//
// The calls come on the program's own threads, once per op: they only touch
// the calling thread's state, except the forward ops' table (for backward
// attribution) and the step counter, which are shared.
//
// Observing every op costs the program more than recording its launches, so
// the layer observes a training step or two, then stops (attribution mode
// kFollow): each launch, copy and set then takes the origin of the operation
// at the same place in a step observed in full (a template), when that was
// one of the same kind and kernel. Up to kTemplates kinds of step are kept
// (a step that logs, one that evaluates): at an operation the current
// template does not have, another that has this step's operations so far
// and this one next is followed instead, or the current one from a few
// places on, where the step skipped launches that made no autograd node.
// When none has, the layer observes again (docs/RECORDING.md, "What the
// layer costs"). A launch's place also
// holds the framework parameter it was given (setParameters), so that a
// step running the same kernels through other modules of one kind matches
// no template.
#pragma once

#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string_view>
#include <vector>

#include "trace_format/events.h"

namespace gpurr::recorder::framework {

enum class ScopeKind : int {
  kOp = 0,            // an operator (aten::index_add_)
  kBackwardNode = 1,  // an autograd node running (autograd::engine::evaluate_function: ...)
  kRange = 2,         // a user range (record_function, a compiled region)
  // The framework times candidate implementations (Inductor's autotuner) and
  // keeps none of their results: a launch, copy or set inside it is marked
  // (trace::Origin::benchmarking), takes its origin from the thread's scopes
  // even while the recorder follows a template, and is no place of a
  // template.
  kBenchmark = 3,
};

// A scope opens on the calling thread. `id` identifies it for closeScope;
// `name` stays valid until then. `sequence` and `sequenceThread` are
// autograd's link between a forward op and its node (sequence -1: none):
// for an op, the node it creates; for a backward node, the forward op's.
// `file`/`line` (nullptr/0 when unknown): the program's source line, given
// for a thread's outermost scope and for an op whose enclosing scopes are
// all ranges (it replaces the range's line until the op closes); the
// pointer stays valid for the process's life. `inPlace`: an op's, from its
// schema (trace::Origin.inPlace).
void openScope(const void* id, const char* name, ScopeKind kind, int64_t sequence, uint64_t sequenceThread,
               const char* file, uint32_t line, trace::InPlace inPlace = trace::InPlace::kUnknown);
// Closes the scope `id` and any opened after it and not closed; a scope not
// open on this thread (closed on another one) is ignored.
void closeScope(const void* id);

// A tensor argument of an op: the address of its storage (a view's too) and
// whether the op's schema says the op writes it (Tensor(a!)).
struct Operand {
  uint64_t address = 0;
  bool written = false;
};

// The device tensor arguments of the op whose scope `id` opened last on this
// thread, reported when all of them are known. Ignored when `id` is not the
// innermost scope.
void opOperands(const void* id, std::span<const Operand> operands);
// The operands of the innermost scope open on this thread, when it is an op
// whose operands were reported; nothing otherwise (no framework layer, no
// scope, a user range or autograd node with no op inside, an op with an
// argument the layer could not see into). Valid until the scope closes.
std::optional<std::span<const Operand>> innermostOpOperands();

// The nn.Module whose forward begins / ends on this thread; `path` stays
// valid for the process's life.
void enterModule(const char* path);
void exitModule();
// Whether this thread is inside a backward node with a module entered in it
// since (a forward recomputed in the backward pass).
bool recomputing();

// A block of device memory the framework's allocator handed out
// (`allocated`: PyTorch's caching allocator's ALLOC trace event, with the
// size the program asked for) or took back (FREE_REQUESTED, by address; a
// second report of a free is harmless). A launch's range that starts in a
// block ends with it (RangeBound::kBlock).
void blockEvent(uint64_t address, uint64_t size, bool allocated);
// The live block that holds `address`: its (base, size).
std::optional<std::pair<uint64_t, uint64_t>> blockAt(uint64_t address);
// blockAt for several addresses (a launch's pointers): the block map's
// lock is taken once, at the first address, and held until the reader goes.
class BlockReader {
 public:
  std::optional<std::pair<uint64_t, uint64_t>> at(uint64_t address);

 private:
  std::shared_lock<std::shared_mutex> lock_;
};

// Training steps completed so far (0 once the framework layer starts).
void setStep(int64_t step);
// The current step; -1 before the framework layer reports one.
int64_t currentStep();
// The layer stops the program after training step `step` (record
// --until-step); the trace's index says so (stoppedAfterStep, -1 until then).
void stopAfterStep(int64_t step);
int64_t stoppedAfterStep();
// Ends the recording now, as at the process's exit (the trace closed, every
// hash waited for): the layer is about to end the program without the
// interpreter's teardown (gpurr record --quick-exit). It calls, once, what
// the session's owner set (nothing when none was set).
void setFinishRecording(void (*finish)());
void finishRecording();
// Writes what was recorded so far to the trace, which stays open: the
// program is ending on Ctrl-C (a Python program then kills itself with
// SIGINT after its atexit handlers, and the recorder's own exit handler
// never runs). Calls what the session's owner set, if anything.
void setFlushRecording(void (*flush)());
void flushRecording();

// The calling thread's origin, or nothing when no framework layer has
// reported anything in this process. `launch`: the operation is a kernel
// launch, counted in the step's launches. `key` (operationKey): what the
// operation is, for the template; `params`: a launch's parameter bytes
// (setParameters).
std::optional<trace::Origin> currentOrigin(bool launch, uint64_t key = 0, std::span<const uint8_t> params = {});
// The same, built in `out`; when it holds an origin (one written earlier),
// its strings' and vectors' capacity is reused, and the launch path
// allocates nothing for it. With `kept`, while the recorder follows a
// template: `*kept` is the template's origin for this place, kept for the
// process, and `out` holds only its step and stepLaunch (the rest is left
// as it was, for the caller to copy from `*kept` later); else null. With
// `unmatched`, where the operation matched no template: why, for a note on
// the launch (else left as it was). `pointers`: the words of `params` that
// point into live device memory (the launch's operands), which a template's
// place given a weight takes for no stale word.
void currentOrigin(bool launch, uint64_t key, std::optional<trace::Origin>& out,
                   const trace::Origin** kept = nullptr, std::span<const uint8_t> params = {},
                   std::string* unmatched = nullptr, std::span<const trace::PointerParam> pointers = {});
// The calling thread's origin for an event outside the step's template (a
// collective): while the layer observes, as currentOrigin's; while the
// recorder follows its template, only the step. Nothing when no framework
// layer has reported anything.
std::optional<trace::Origin> originOutsideTemplate();

// An operation's kind and kernel, as the templates match them.
uint64_t operationKey(const trace::Payload& payload);
uint64_t launchKey(std::string_view function);

enum class Attribution : int {
  kObserve = 0,  // origins from what the layer reports (the default)
  kLearn = 1,    // so, and each step's operations kept: a complete one becomes a template
  kFollow = 2,   // the layer reports no ops or modules: origins from the templates
};
// Sets the mode; kFollow only when a complete step was learned (of at most
// kMaxTemplate operations, maybe none): returns whether the mode was set.
// kObserve forgets the templates; kLearn keeps them and adds each complete
// step learned from now on (replacing one of the same operations, or else
// the least recently followed).
bool setAttribution(Attribution mode);
Attribution attribution();
constexpr size_t kMaxTemplate = 1 << 15;
constexpr size_t kTemplates = 4;
// Whether an operation found none of its kind and kernel at its place in
// any template since the last call (following). At the first such operation
// the mode becomes kLearn (the step under way is no template; the templates
// are kept) and `observe`, set by the layer, is called on that operation's
// thread: the layer observes again from the next op on.
bool divergedSinceLastCall();
void setOnDiverged(void (*observe)());
// Of the step that ended last: whether it was learned whole (kLearn from
// its start) and became a template of a new kind of step, or one of the same
// operations and weights as a template kept already (which it replaced).
enum class StepLearned : int { kNot = 0, kNewKind = 1, kKnownKind = 2 };
StepLearned lastStepLearned();
// Learning: the operand roles (params.h, OperandRole) of the launch whose
// origin this thread takes next. Following: those the launch at the next
// place had in the templates, into `roles` (false, and `roles` untouched,
// unless it had `key` and `count` ranges).
void learnRoles(std::vector<uint8_t> roles);
bool followedRoles(uint64_t key, size_t count, std::vector<uint8_t>& roles, std::span<const uint8_t> params = {},
                   std::span<const trace::PointerParam> pointers = {});

// The framework's parameters (a model's weights): each one's extent, as
// (address, size) pairs, replacing those given before. A launch learned
// into a template keeps the first 8-byte aligned word of its parameter
// bytes that points into one of them, and a launch following the template
// takes that place only when its word there points into the same one, or
// into none, and, where the launch learned was given none, only when it is
// given none. The same kernels run through another module of one kind (a
// layer LayerDrop did not skip, an expert of its own), or a weight updated
// in addition by the kernel the template runs on activations at that place,
// match no template, and are observed. (Experts fused in one parameter, indexed by the data,
// are one module: any of them matches.)
void setParameters(std::span<const uint64_t> ranges);

// Where the calling thread's autograd sequence counter stands (the
// framework's number for the thread, as a scope's sequenceThread, and the
// counter), asked at each step's start (setStep), at the launches given a
// weight it learns and follows. The forward ops learned on the step's
// thread are kept by their number from the step's first, with the names of
// the backward nodes they made. In a step that stops matching its
// templates, a backward node made while the recorder followed (no op of it
// observed) then takes the forward op of the template at the same number,
// where the template's node there had the same name, if it was made before
// the step's last launch given a weight whose counter stood where the
// template's did (Origin.byPlace); none if one's did not.
void setSequenceSource(void (*now)(uint64_t* thread, int64_t* sequence));

// Whether the calling thread records gradients now (PyTorch's grad mode:
// 0 under torch.no_grad, torch.inference_mode, and in the backward pass
// unless it makes a graph of its own), asked at every operation learned or
// followed: a template's key for an operation holds it (placeKey).
void setGradModeSource(int (*enabled)());

// How the steps completed so far were attributed; nothing before the first.
std::optional<trace::LayerSteps> layerSteps();

// Whether the framework layer has reported anything (tests, the header).
bool active();

// Forgets everything (tests).
void resetForTesting();
// The blocks forgotten (resetForTesting; framework_blocks.cpp).
void forgetBlocksForTesting();

}  // namespace gpurr::recorder::framework
