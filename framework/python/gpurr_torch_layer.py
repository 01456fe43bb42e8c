"""gpurr's PyTorch layer: reports to the recorder, for every launch, copy and
set the program makes, the op that issued it (through libgpurr_torch.so's
RecordFunction observer), the nn.Module whose forward ran (its path from
gpurr_torch_paths.py), and the training step (optimizer steps, those AMP's
GradScaler skipped included); c10d's collectives
(gpurr_torch_collectives.py); what Inductor's autotuners launch while they
time candidates, and a word when the program's profiler asks for
the GPU's activity (gpurr_torch_tools.py). Started by gpurr's sitecustomize
once torch is imported; does nothing outside `gpurr record`.

Costs: while it observes, one global RecordFunction callback (C++) per op
and a Python forward pre/post hook per module call; always, a post hook per
optimizer step. It observes the first two training steps, then stops: the
recorder attributes each later launch, copy and set by its place in a step
observed in full of the same kind (a template) and says when one matches no
template; the layer then observes the rest of that step, and a whole step
when such steps come two in a row or at a period (_adapt; docs/RECORDING.md,
"What the layer costs").
GPURR_FULL_ATTRIBUTION=1 keeps it observing every step. Inside
torch.compile'd code the hooks do nothing (no graph breaks): compiled regions
are attributed to the ops and ranges torch runs them in, and each compiled
graph to the module that holds its ops (_compiled_region); once dynamo has
compiled a graph that calls modules, the hooks stay registered (its guards
count them).
"""
import ctypes
import functools
import os
import sys
import threading
import weakref

import gpurr_torch_paths as _names
import gpurr_torch_tools

_recorder = None
_local = threading.local()
_graph_verdicts = weakref.WeakKeyDictionary()  # fx GraphModule -> whether it is a compiled graph
_lead_optimizer = None
_optimizers = weakref.WeakSet()  # every optimizer that stepped: their parameters are reported
_optimizer_steps = 0  # optimizer steps seen, skipped ones included (_scaler_step)
_challenger = None  # (weak reference to another optimizer, its steps since the lead's last one)
# The other optimizers (ids) that stepped since the lead's last step, and
# between its two steps before: a GAN's generator, after its discriminator.
_others_since_lead = set()
_others_before_lead = set()
_step = 0
_until_step = None  # gpurr record --until-step: stop the program after this step
_stop_file = None  # gpurr record --stop-file: a file that may name the step to stop after
_ended_by_stop = False  # the interpreter is ending the program on _stop's exception (_Stop)
_enabled = False  # set once every hook is in place
# Steps observed in full before the layer first follows its template: the
# first step sets up state (optimizer buffers) and often launches unlike the rest.
_FOLLOW_AFTER = 2
_learning = False  # the layer follows a template after learning it (not GPURR_FULL_ATTRIBUTION)
_following = False  # it observes no ops or modules now
_observed_from = 0  # the step since which it has observed
_unmatched = []  # the last two steps in which an operation matched no template
# Steps observed in full in a row, after a step that matched no template, that
# were each of a kind the recorder had learned already; at most _KNOWN_IN_A_ROW.
_known_in_a_row = 0
_KNOWN_IN_A_ROW = 3
_observer = None  # the op observer's library, once installed
_nn_module = None  # torch.nn.modules.module, for the global module hooks
_call_impl_code = None  # Module._call_impl's code: its frames are the module calls running
_hooks = []  # the global module hooks' handles
# Dynamo compiled a graph that called modules, whose guards count the global
# module hooks: they stay as they are (_observe).
_hooks_guarded = False


def _warn(text):
    sys.stderr.write(f"gpurr: warning: {text}\n")


def _same_minor(a, b):
    return a.split("+")[0].split(".")[:2] == b.split("+")[0].split(".")[:2]


def _module_stack():
    """This thread's modules entered, innermost last: (module or graph, path)."""
    stack = getattr(_local, "modules", None)
    if stack is None:
        stack = _local.modules = []
    return stack


def _compiled_graph(module):
    """Whether the fx GraphModule `module` is a graph dynamo or AOTAutograd
    made (no module of the program's: its ops stay with the caller's): one
    that calls no module. A program's own fx model (symbolic_trace, a
    feature extractor, PyG's to_hetero) calls its modules, and is one."""
    verdict = _graph_verdicts.get(module)
    if verdict is None:
        verdict = _graph_verdicts[module] = not any(n.op == "call_module" for n in module.graph.nodes)
    return verdict


def _unseen(module):
    """Whether a call of `module` enters nothing: the layer is off, dynamo
    compiles or fx traces, or it is a graph dynamo made."""
    return (not _enabled or _is_compiling() or _fx_tracing._is_fx_tracing_flag or
            (isinstance(module, _GraphModule) and _compiled_graph(module)))


def _stop_due(module):
    """Whether the program is to stop at this call of `module`: after the
    step --until-step names, a call that trains (the module in training mode,
    gradients enabled: the next step's forward), not an evaluation, an EMA's
    or a metric's (torch.no_grad, inference_mode or eval mode) that the rest
    of the step's iteration runs; nor, with several optimizers, a call
    before every other one that stepped in the lead's previous interval has
    stepped again (a GAN's generator, trained after its discriminator's step
    counted the step); nor one the program makes on its way out (_exiting)."""
    return (_until_step is not None and _step > _until_step and module.training and _grad_enabled() and
            (_step > _until_step + 1 or _others_before_lead <= _others_since_lead) and not _exiting())


def _exiting():
    """Whether the program is ending on _stop's exception: the finally
    blocks, context managers' exits and except clauses it runs on the way
    (a final loss, a checkpoint through the model), or the interpreter's
    exit. A program that caught it and went on is stopped again."""
    return _ended_by_stop or isinstance(sys.exc_info()[1], _Stop)


def _module_enter(module, args):
    if _unseen(module):
        return
    if _until_step is not None and _stop_due(module):  # (no call per module without a stop asked)
        _stop()
    if _following:
        return  # kept while the layer follows, in a program whose compiled graphs call modules (_observe)
    stack = _module_stack()
    try:
        path = _names.call_path(module, stack)
    except Exception:  # noqa: BLE001  never into the program: the module goes without a path of its own
        return
    stack.append((module, path))
    _recorder.gpurr_framework_enter_module(path)
    if getattr(module, "_forward_hooks", None) and not _is_compiling():
        # Its own forward hooks run after the global ones: it is left after
        # them, so that the ops they run name it (_exit_after_hooks).
        handles = []
        try:
            handles.append(module.register_forward_hook(
                lambda m, args, output: _exit_after_hooks(m, handles[0]), always_call=True))
        except Exception:  # noqa: BLE001  never into the program: left as the global hook leaves it
            return
        deferred = getattr(_local, "deferred", None)
        if deferred is None:
            deferred = _local.deferred = {}
        deferred.setdefault(id(module), []).append((len(stack), handles[0]))


def _module_stop_check(module, args):
    """While the layer follows: only --until-step's stop, as _module_enter has it."""
    if _unseen(module):
        return
    if _stop_due(module):
        _stop()


def _module_exit(module, args, output):
    if not _enabled or _is_compiling():
        return
    stack = getattr(_local, "modules", None)
    if not stack:
        return
    deferred = getattr(_local, "deferred", None)
    if deferred and any(depth == len(stack) for depth, _ in deferred.get(id(module), ())):
        return  # left after its own forward hooks
    _leave(module, stack)


def _exit_after_hooks(module, handle):
    """The last forward hook of a module that has forward hooks of its own,
    registered (as `handle`) for one call as the layer entered it: the module
    is left here, after them (the global exit hook runs before a module's
    own). It runs at the end of every call of the module while registered:
    one inside this call (the module calling itself) is not this call's."""
    stack = getattr(_local, "modules", None) or []
    calls = getattr(_local, "deferred", {}).get(id(module), [])
    mine = next((c for c in calls if c[1] is handle), None)
    if mine is None or mine[0] < len(stack):
        return  # done, or a call inside this one
    calls.remove(mine)
    if not calls:
        del _local.deferred[id(module)]
    handle.remove()
    if mine[0] == len(stack):  # else the call was left already (an exception that skipped exit hooks)
        _leave(module, stack)


def _leave(module, stack):
    """Leaves `module`, the innermost module of `stack` or one below it."""
    if stack[-1][0] is module:
        stack.pop()
        _recorder.gpurr_framework_exit_module()
        return
    # The modules above it too: an exception other than Exception
    # (KeyboardInterrupt, one of the program's own) ran no exit hook of the
    # modules it left, and the program caught it inside this one.
    for depth in range(len(stack) - 1, -1, -1):
        if stack[depth][0] is module:
            _leave_modules(stack, depth)
            return


def _runs(module):
    """Whether `module`'s forward runs on this thread: a frame of its code is
    on the thread's stack. A forward without Python code (a script module's),
    or a compiled region (no module), counts as running."""
    forward = getattr(module, "forward", None) if isinstance(module, _nn_module.Module) else None
    code = getattr(getattr(forward, "__func__", forward), "__code__", None)
    if code is None:
        return True
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def _leave_modules(stack, depth):
    """Leaves this thread's modules from `depth` on."""
    while len(stack) > depth:
        stack.pop()
        _recorder.gpurr_framework_exit_module()


def _optimizer_stepped(optimizer, args, kwargs):
    # Steps are counted on the first optimizer that steps: a program with
    # several (GANs, per-group optimizers) steps them all once per iteration.
    # Another that steps twice while the lead does not (a second phase's
    # optimizer, the first one still alive) leads from its second step on.
    global _lead_optimizer, _challenger, _step, _optimizer_steps, _others_since_lead, _others_before_lead
    _optimizer_steps += 1
    if not _enabled:
        return
    if optimizer not in _optimizers:
        # Its parameters may be a model's the layer has not seen (the next
        # head on a shared backbone, the next member of an ensemble): known,
        # a step that gives them where a template gave another model's no
        # longer matches it.
        _optimizers.add(optimizer)
        if _following:
            _report_parameters()
    lead = _lead_optimizer() if _lead_optimizer is not None else None
    if lead is not None and lead is not optimizer:
        other, steps = _challenger or (None, 0)
        steps = steps + 1 if other is not None and other() is optimizer else 1
        _challenger = (weakref.ref(optimizer), steps)
        if steps < 2:
            _others_since_lead.add(id(optimizer))
            return
        lead = None
    if lead is None:
        _lead_optimizer = weakref.ref(optimizer)
        _others_since_lead = set()
    _challenger = None
    _others_before_lead, _others_since_lead = _others_since_lead, set()
    _step += 1
    stack = getattr(_local, "modules", None)
    if stack and not _runs(stack[0][0]):
        # Left by an exception other than Exception that the program caught
        # outside them (a step may run inside a module: Lightning's manual
        # optimisation under DDP).
        _leave_modules(stack, 0)
    _recorder.gpurr_framework_set_step(_step)
    _adapt()
    if not _following:
        _report_parameters()  # for the step it learns next: a head replaced, the optimizer's own
    if _stop_file is not None:
        _read_stop_file()
    if _until_step is not None and _step > _until_step + 1 and not _exiting():
        _stop()  # a program that calls no module after the step it was to stop at


def _scaler_step(maybe_opt_step):
    """AMP's GradScaler.step runs the optimizer's step through _maybe_opt_step,
    which skips it when the gradients overflowed: a skipped step still ends
    the iteration, so it counts as the optimizer's step (a float16 run's
    first iterations are often skipped while the scale settles)."""
    @functools.wraps(maybe_opt_step)
    def wrapper(self, optimizer, *args, **kwargs):
        before = _optimizer_steps
        result = maybe_opt_step(self, optimizer, *args, **kwargs)
        if _optimizer_steps == before:
            _optimizer_stepped(optimizer, args, kwargs)
        return result
    return wrapper


def _report_parameters():
    """While the recorder learns steps: tells it where the weights are (the
    parameters of the roots named and of every optimizer that stepped, each
    one's bytes; a DTensor's local part), so that a step running the same kernels
    through other modules of one kind (a layer LayerDrop did not skip, an
    expert of its own) matches no template (gpurr_framework_parameters).
    Never raises into the program: a parameter it cannot read is left out."""
    if not _learning:
        return
    extents = {}

    def add(p):
        try:
            p = getattr(p, "_local_tensor", p)
            address, size = p.data_ptr(), p.numel() * p.element_size()
        except Exception:  # noqa: BLE001  a tensor without storage of its own
            return
        if address and size:
            extents[address] = max(size, extents.get(address, 0))

    for ref in list(_names.roots.values()):
        root = ref()
        if root is not None:
            try:
                for p in root.parameters():
                    add(p)
            except Exception:  # noqa: BLE001  a module whose parameters() fails: its weights unknown
                pass
    for optimizer in list(_optimizers):
        for group in getattr(optimizer, "param_groups", ()):
            for p in group.get("params", ()):
                add(p)
    flat = [n for pair in extents.items() for n in pair]
    _recorder.gpurr_framework_parameters((ctypes.c_uint64 * len(flat))(*flat), len(extents))


def _observe(on):
    """Starts or stops observing ops (the op observer) and modules (the global
    module hooks; while not observing, --until-step's check alone)."""
    global _hooks
    if _observer is not None:
        _observer.gpurr_torch_observe(1 if on else 0)
    if _hooks_guarded:
        # Dynamo's guards of a graph that called modules count the global
        # hooks: adding or removing one would make it compile the graph again.
        # They stay, and _module_enter reports nothing while the layer follows
        # (each eager module call then pays for the hooks: about 5 us).
        return
    for h in _hooks:
        h.remove()
    _hooks = []
    if on:
        _hooks = [_nn_module.register_module_forward_hook(_module_exit, always_call=True),
                  _nn_module.register_module_forward_pre_hook(_module_enter)]
    elif _until_step is not None:
        _hooks = [_nn_module.register_module_forward_pre_hook(_module_stop_check)]


def _read_stop_file():
    """gpurr record --stop-file, at every step: once the file names a step,
    the program stops after it, as with --until-step (after the step that
    just ended, when the one it names has passed: the trace says which). In a job of several ranks
    only a file there at the first step counts (gpurr bisect's confirmation
    run): each rank reads the file when it ends a step, so with one written
    later a rank that ended the step named before it was written would run
    on into the next step's collectives while another stopped, and wait
    for it (NCCL) or fail (gloo). Such a job runs whole, or to
    --until-step, which every rank knows from its start."""
    global _stop_file, _until_step
    try:
        with open(_stop_file) as f:
            step = int(f.read().strip())
    except (OSError, ValueError):
        if _ranks() > 1:
            _stop_file = None
            print("gpurr: a job of several ranks is not stopped early by a stop file written while it runs (its "
                  "ranks would stop after different steps); each rank runs to its end or to --until-step",
                  file=sys.stderr)
        return  # not written yet
    _stop_file = None
    if _until_step is None or step < _until_step:
        # A step passed already: the one that just ended, so that the program
        # stops at its next module call that trains, as after --until-step.
        _until_step = max(step, _step - 1)
        if _following:
            _observe(False)  # not observing modules: the stop's check alone


def _ranks():
    """The size of the default process group this process is in; 1 when none."""
    dist = getattr(sys.modules.get("torch"), "distributed", None)
    try:
        return dist.get_world_size() if dist is not None and dist.is_available() and dist.is_initialized() else 1
    except Exception:  # noqa: BLE001  a process group being torn down
        return 1


def _adapt():
    """Between two steps (the one that ended is _step - 1): once the layer has
    observed enough steps, it stops observing and the recorder follows the
    steps it learned (attribution mode 2), each kind of step by its own
    template. A step in which an operation matched no template was observed
    from there on (_observe_again); what comes next:
    - the layer observes the next step in full and the recorder learns it
      (mode 1) when the step before the one that ended did not match either
      (the program's steps changed), or when the steps that did not match
      come at a period (one that logs or evaluates every N steps) and the
      next step is the next of them: its kind becomes a template;
    - it observes the step after one so observed too when that one was of
      a kind learned already (an evaluation every 3rd step learned again,
      where the steps that matched no template were the two between, whose
      optimizer, SGD with momentum, launches other kernels from its second
      step on than in its first): up to _KNOWN_IN_A_ROW steps in a row;
    - else (a step unlike the others, once) the recorder follows again."""
    global _following, _observed_from, _unmatched, _known_in_a_row
    if not _learning:
        return
    ended = _step - 1
    diverged = bool(_recorder.gpurr_framework_diverged())
    if diverged:
        _unmatched = (_unmatched + [ended])[-2:]
    periodic = len(_unmatched) == 2 and _unmatched[1] - _unmatched[0] > 1 and \
        _step == 2 * _unmatched[1] - _unmatched[0]
    if _following and not diverged and not periodic:
        return  # the usual case: every operation matched
    if not _following and _step - _observed_from < (_FOLLOW_AFTER if _observed_from == 0 else 1):
        return  # observing the steps it learns first
    known = _observed_from > 0 and _recorder.gpurr_framework_step_learned() == 2
    _known_in_a_row = _known_in_a_row + 1 if known else 0
    if periodic or _unmatched == [ended - 1, ended] or 0 < _known_in_a_row <= _KNOWN_IN_A_ROW:
        _recorder.gpurr_framework_attribution(1)
        if _following:
            _observe(True)
        _following, _observed_from = False, _step
    elif _recorder.gpurr_framework_attribution(2):
        _observe(False)
        _following = True
        _known_in_a_row = 0


def _observe_again():
    """Run by the interpreter soon after an operation matched no template
    (the op observer asked for it): modules are observed again, and the
    recorder learns from there (it went back to mode 1 itself), for the
    rest of the step."""
    global _following, _observed_from
    if _enabled and _following:
        _observe(True)
        _following, _observed_from = False, _step
        try:
            _enter_running()
        except Exception:  # noqa: BLE001  never into the program: the step's ops go without the modules running
            pass


def _enter_running():
    """The modules whose call runs now on this thread, which the layer did not
    enter while it followed, are entered, outermost first, so that the ops
    they run from here name them. A call begun without the layer's hooks
    runs no exit hook of the layer's at its end: each is left as its call
    returns, seen by a profile function of this thread's (until the last
    has returned; where the program has one of its own, such as cProfile,
    nothing is entered). With the hooks kept while following (dynamo's
    guards), their calls run the exit hooks. One whose frame outlives the
    profile function (the program set its own since) is left at the next
    optimizer step, as modules an exception left are."""
    stack = _module_stack()
    if stack or (not _hooks_guarded and sys.getprofile() is not None):
        return
    calls = []  # (frame of Module._call_impl, module), outermost first
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is _call_impl_code:
            module = frame.f_locals.get("self")
            if isinstance(module, _nn_module.Module) and not _unseen(module):
                calls.append((frame, module))
        frame = frame.f_back
    calls.reverse()
    entered = []  # (module, path): all named before any is entered, so a failure enters none
    for _, module in calls:
        entered.append((module, _names.call_path(module, entered)))
    for module, path in entered:
        stack.append((module, path))
        _recorder.gpurr_framework_enter_module(path)
    if calls and not _hooks_guarded:
        sys.setprofile(_leaving(dict(calls)))


def _leaving(calls):
    """A profile function that leaves each module of `calls` (frame -> module)
    when its frame returns (or ends by an exception), and removes itself
    when none is left. A module already left (its call ran the layer's
    exit hook) is not left again."""
    def profile(frame, event, arg):
        if event != "return" or frame not in calls:
            return
        module = calls.pop(frame)
        stack = getattr(_local, "modules", None) or []
        for depth in range(len(stack) - 1, -1, -1):
            if stack[depth][0] is module:
                _leave_modules(stack, depth)
                break
        if not calls:
            sys.setprofile(None)
    return profile


def _stop():
    """Ends the program after training step --until-step: at the first module
    call that trains after that step's optimizer step (the next step's
    forward, _stop_due), so the rest of the step's iteration (logging, an
    evaluation, a checkpoint) runs; or, in a program that calls no such
    module, at the end of the next step. It raises
    SystemExit(0), as `sys.exit(0)` there would: the program's `finally`
    blocks and context managers run, then the interpreter exits as usual
    (atexit handlers, DataLoader workers shut down by their iterators and
    multiprocessing) and the recorder closes the trace, saying in its index
    after which step it stopped (with --quick-exit, without the
    interpreter's teardown: quick_exit). Raised in the thread that called,
    and again at a later call if the program catches it and goes on (not
    in what it runs on its way out: _exiting). A program that trains on
    another thread than the main one is ended by the main thread too: it
    gets the same exception at its next Python instruction (once the call
    it waits in returns, a join of the thread that trains)."""
    _recorder.gpurr_framework_stop_after_step(_step - 1)
    main = threading.main_thread()
    if threading.current_thread() is not main and main.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(main.ident), ctypes.py_object(_Stop))
    raise _Stop(0)


class _Stop(SystemExit):
    """_stop's SystemExit(0). The interpreter reads its `code` when it ends
    the program with it, from no Python frame: then (and not when a program
    that caught it reads it, nor when another exception or exit ended the
    program) _ended_by_stop is set, and quick_exit knows the exit status.
    A thread it ends prints nothing (gpurr_torch_tools.quiet_threads), as
    for SystemExit."""

    @property
    def code(self):
        global _ended_by_stop
        try:
            sys._getframe(1)
        except ValueError:  # no caller in Python: the interpreter's own exit
            _ended_by_stop = True
        return 0


def quick_exit():
    """gpurr record --quick-exit, the last of the program's atexit handlers
    (sitecustomize registers it first): when the program ended on _stop's
    exception, it ends the process now, with the same status 0, skipping the
    interpreter's teardown of every module (about a second after `import
    torch`). What the program wrote is kept first (open files flushed, gzip
    and zip writers closed: gpurr_torch_tools.keep_written_files), and the
    recorder closes the trace as it would at the exit. Other objects still
    alive get no __del__ call (Python does not promise one at exit either)."""
    if not (_ended_by_stop and _recorder is not None):
        return
    gpurr_torch_tools.keep_written_files()
    _recorder.gpurr_framework_finish()
    os._exit(0)


def _is_compiling():
    return False


def _grad_enabled():  # torch.is_grad_enabled once installed
    return True


class _fx_tracing:  # torch.fx._symbolic_trace once installed: its flag says fx traces modules now
    _is_fx_tracing_flag = False


class _GraphModule:
    pass


def _forked(torch, observer):
    """A child forked after the parent started CUDA (a DataLoader worker)
    cannot use CUDA: nothing to attribute, so no cost per op either."""
    global _enabled
    if not torch.cuda._is_in_bad_fork():
        return
    _enabled = False
    if observer is not None:
        observer.gpurr_torch_uninstall()
    # No steps to learn either: the recorder's state came from the parent.


def _dotted(qualified):
    """A qualified name as dynamo writes it (`.h[0]`, `['a']`) in dotted form."""
    return qualified.replace("['", ".").replace("']", "").replace("[", ".").replace("]", "")


def _region_module(gm, scopes):
    """The path of the deepest module that holds every op of a graph dynamo
    captured which ran inside a module, found from each op's innermost
    module as dynamo reached it from the compiled frame's locals or globals
    (nn_module_stack: `L['self'].transformer.h[0]`, `G['model'].layers.0`):
    their common part, resolved in `scopes` ({"L": locals, "G": globals}) to
    the module object, named as the module hooks name it (_names.path_of: from
    the outermost module that is a local or global, rooted at its class).
    None when the ops share no module or it cannot be resolved."""
    common = None
    for node in gm.graph.nodes:
        if not node.op.startswith("call_"):
            continue  # the graph's inputs and outputs: no op of its own
        stack = node.meta.get("nn_module_stack")
        if not stack:
            continue  # an op outside every module (a loss reduced after the model)
        parts = _dotted(list(stack.values())[-1][0]).split(".")
        if common is None:
            common = parts
        n = 0
        while n < min(len(common), len(parts)) and common[n] == parts[n]:
            n += 1
        common = common[:n]
        if not common:
            return None
    if common is None or len(common) < 2 or common[0] not in scopes:
        return None
    chain = [scopes[common[0]][common[1]]]
    for part in common[2:]:
        here = chain[-1]
        modules = getattr(here, "_modules", None) or {}
        chain.append(modules[part] if part in modules else getattr(here, part))
    modules = [m for m in chain if isinstance(m, _nn_module.Module)]
    if not modules or modules[-1] is not chain[-1]:
        return None
    _names.path_of(modules[0], [])  # names it and the modules below it, unless named already
    return _names.paths.get(chain[-1])


def _compiled_region(call_user_compiler):
    """Dynamo's call of the backend, for each graph it captured (in every
    run: Inductor's caches only spare what comes after): the compiled graph it
    returns runs inside the module that holds its ops (_region_module), as a
    module call would while the layer observes. A compiled graph runs no
    module hooks, so without this a function that torch.compile compiled
    around a model (a loss or a training step) gives its launches no module,
    and a compiled module only its own path."""

    @functools.wraps(call_user_compiler)
    def compile_graph(self, gm, example_inputs):
        global _hooks_guarded
        compiled = call_user_compiler(self, gm, example_inputs)
        if any(node.meta.get("nn_module_stack") for node in gm.graph.nodes):
            _hooks_guarded = True
        try:
            path = _region_module(gm, {"L": self.local_scope, "G": self.global_scope})
        except Exception:  # noqa: BLE001  metadata or scopes of another shape: the region goes without
            path = None
        if path is None:
            return compiled

        def region(*args, **kwargs):
            if not _enabled or _following:
                return compiled(*args, **kwargs)
            stack = _module_stack()
            stack.append((compiled, path))
            _recorder.gpurr_framework_enter_module(path)
            try:
                return compiled(*args, **kwargs)
            finally:
                if stack and stack[-1][0] is compiled:
                    stack.pop()
                    _recorder.gpurr_framework_exit_module()

        if getattr(compiled, "_boxed_call", False):
            region._boxed_call = True  # takes its arguments as one list, as the graph it wraps
        return region

    return compile_graph


def _watch_compiled_regions(output_graph):
    try:
        cls = output_graph.OutputGraph
        cls.call_user_compiler = _compiled_region(cls.call_user_compiler)
    except Exception as e:  # noqa: BLE001  an API that moved: the program unchanged
        _warn(f"torch._dynamo.output_graph has no OutputGraph.call_user_compiler ({type(e).__name__}: {e}): "
              "launches of torch.compile'd code get the modules that call it, none inside it")


def install(torch, skipped=()):
    global _recorder, _is_compiling, _fx_tracing, _GraphModule, _enabled, _until_step, _stop_file, _learning
    global _observer, _nn_module, _call_impl_code, _grad_enabled
    library = os.environ.get("CUDA_INJECTION64_PATH")
    if not library or not os.environ.get("GPURR_OUTPUT"):
        return  # not under `gpurr record`
    # First, and whatever else of the layer starts: the recorder holds CUPTI.
    try:
        gpurr_torch_tools.watch_profiler(torch, _warn)
    except Exception:  # noqa: BLE001  a profiler API that moved: no warning, nothing changed
        pass
    _recorder = ctypes.CDLL(library)  # the copy the driver loads or has loaded
    if _recorder.gpurr_framework_api_version() != 12:  # GPURR_FRAMEWORK_API_VERSION
        _warn("the recorder is of another version than its PyTorch layer: no op attribution")
        return
    _recorder.gpurr_framework_enter_module.argtypes = [ctypes.c_char_p]
    _recorder.gpurr_framework_exit_module.argtypes = []
    _recorder.gpurr_framework_set_step.argtypes = [ctypes.c_int64]
    _recorder.gpurr_framework_stop_after_step.argtypes = [ctypes.c_int64]
    _recorder.gpurr_framework_attribution.argtypes = [ctypes.c_int]
    _recorder.gpurr_framework_diverged.argtypes = []
    _recorder.gpurr_framework_step_learned.argtypes = []
    _recorder.gpurr_framework_open_scope.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64,
                                                     ctypes.c_uint64, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int]
    _recorder.gpurr_framework_close_scope.argtypes = [ctypes.c_void_p]
    _recorder.gpurr_framework_parameters.argtypes = [ctypes.c_void_p, ctypes.c_uint32]

    # The hooks first: an API that moved raises here, before anything is
    # reported (sitecustomize then warns once and the program runs on).
    import warnings

    from torch.fx import GraphModule
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim

    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling"):
        _is_compiling = compiler.is_compiling
    _GraphModule = GraphModule
    _grad_enabled = torch.is_grad_enabled
    from torch.fx import _symbolic_trace

    # fx's tracing calls modules with proxies: nothing runs, nothing is named.
    if hasattr(_symbolic_trace, "_is_fx_tracing_flag"):
        _fx_tracing = _symbolic_trace
    # torch.compile warns that global module hooks also fire for its wrapper
    # module: the layer's do, harmlessly (the wrapper takes its module's name).
    warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")
    _nn_module = nn_module
    _names.module_class = nn_module.Module
    _names.on_new_root = _report_parameters
    _call_impl_code = nn_module.Module._call_impl.__code__
    _observe(True)
    nn_module.register_module_module_registration_hook(_names.registered)
    optim.register_optimizer_step_post_hook(_optimizer_stepped)
    from torch.amp import grad_scaler
    if hasattr(grad_scaler.GradScaler, "_maybe_opt_step"):  # (since PyTorch 1.6)
        grad_scaler.GradScaler._maybe_opt_step = _scaler_step(grad_scaler.GradScaler._maybe_opt_step)

    observer = os.environ.get("GPURR_TORCH_OBSERVER") or os.path.join(os.path.dirname(library), "libgpurr_torch.so")
    observing = None  # the op observer's library, once installed
    if not os.path.exists(observer):
        _warn(f"{observer} is missing (gpurr was built without PyTorch): launches get modules, lines "
              "and steps but no op names")
    else:
        try:
            lib = ctypes.CDLL(observer)
            lib.gpurr_torch_built_for.restype = ctypes.c_char_p
            built_for = lib.gpurr_torch_built_for().decode()
        except OSError as e:  # built against another PyTorch, whose C++ symbols differ
            lib, built_for = None, f"another version ({e})"
        if not _same_minor(built_for, torch.__version__):
            _warn(f"gpurr's op observer was built for PyTorch {built_for}, this program runs "
                  f"{torch.__version__}: launches get modules, lines and steps but no op names")
        else:
            lib.gpurr_torch_install.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            prefixes = [os.path.dirname(os.path.abspath(torch.__file__))] + [os.path.abspath(s) for s in skipped]
            if lib.gpurr_torch_install(_recorder._handle, "\n".join(p + os.sep for p in prefixes).encode()) != 0:
                _warn("gpurr's op observer could not reach the recorder: no op names")
            else:
                observing = lib
                lib.gpurr_torch_observe.argtypes = [ctypes.c_int]
                with_gil = ctypes.PyDLL(observer)  # the same library: it keeps a reference
                with_gil.gpurr_torch_on_diverged.argtypes = [ctypes.py_object]
                with_gil.gpurr_torch_on_diverged(_observe_again)
                blocks = os.path.join(os.path.dirname(observer), "libgpurr_torch_cuda.so")
                gpurr_torch_tools.watch_cuda_blocks(torch, lib, blocks, _recorder, _warn)
    try:  # c10d's view of the program's collectives (gpurr_torch_collectives.py)
        import gpurr_torch_collectives

        gpurr_torch_collectives.install(
            _recorder, [os.path.dirname(os.path.abspath(torch.__file__)) + os.sep] +
            [os.path.abspath(s) + os.sep for s in skipped], observing)
    except Exception as e:  # noqa: BLE001  an API that moved: collectives go without c10d's view
        _warn(f"c10d's collectives are not recorded ({type(e).__name__}: {e})")
    gpurr_torch_tools.watch_benchmarking(_recorder, _warn)
    from gpurr_import_watch import when_imported

    when_imported("torch._dynamo.output_graph", _watch_compiled_regions)
    until = os.environ.get("GPURR_UNTIL_STEP")
    _until_step = int(until) if until else None
    _stop_file = os.environ.get("GPURR_STOP_FILE") or None
    if _until_step is not None or _stop_file:
        threading.excepthook = gpurr_torch_tools.quiet_threads(threading.excepthook, _Stop)
    _observer = observing
    _learning = os.environ.get("GPURR_FULL_ATTRIBUTION", "") in ("", "0")
    _recorder.gpurr_framework_attribution(1 if _learning else 0)
    _recorder.gpurr_framework_set_step(0)
    _enabled = True
    os.register_at_fork(after_in_child=lambda: _forked(torch, observing))
