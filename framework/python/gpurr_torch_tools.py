"""What gpurr's PyTorch layer (gpurr_torch_layer.py) does around the
program's own tooling: says once when the program starts a torch.profiler
session that wants the GPU's activity, which it cannot get while gpurr
records; and marks what Inductor's autotuners launch while they time
candidates (benchmarking, which `gpurr diff` sets aside); keeps what the
program wrote before a quick exit; reports the CUDA caching allocator's
blocks once CUDA starts; and keeps a thread that --until-step ended quiet.
`recorder` is the recorder library (ctypes), `warn` the layer's warning."""
import ctypes
import functools
import os

_profiler_warned = False  # said that a profiler session gets no GPU events


def _wants_gpu(profiler, cuda_activity):
    """Whether a torch.autograd.profiler.profile about to start asks Kineto
    for the GPU's activity, which Kineto takes from CUPTI: its Kineto
    activities hold CUDA. torch.profiler.profile runs one of these, with CUDA
    when its activities name it or, given none, where PyTorch supports it;
    torch.autograd.profiler.profile(use_device="cuda") only with
    use_kineto=True (by default it times the GPU with CUDA events instead,
    which recording leaves alone). Without a GPU PyTorch drops CUDA."""
    return cuda_activity in (getattr(profiler, "kineto_activities", None) or ())


def watch_profiler(torch, warn):
    """Says once, when the program starts a PyTorch profiler session that wants
    the GPU's activity, that the session gets none: the recorder subscribed to
    CUPTI at CUDA's start, and CUPTI takes one subscriber (Kineto's is
    refused, and its GPU kernel events are lost without a word of its own).
    Every Kineto session of torch.profiler and torch.autograd.profiler starts
    in profile._prepare_trace; the wrapper calls it through unchanged."""
    profile = torch.autograd.profiler.profile
    prepare = profile._prepare_trace
    cuda = torch.autograd.ProfilerActivity.CUDA

    @functools.wraps(prepare)
    def _prepare_trace(self, *args, **kwargs):
        global _profiler_warned
        try:  # nothing here may fail the program's profiler
            if not _profiler_warned and _wants_gpu(self, cuda):
                _profiler_warned = True
                warn("the program starts torch.profiler with CUDA activity, but gpurr holds CUDA's profiling "
                     "interface (CUPTI) while it records: the profiler records no GPU kernel events. To profile "
                     "the GPU, run the program without gpurr; to record it, run it without the profiler (or "
                     "with CPU activity only)")
        except Exception:  # noqa: BLE001
            pass
        return prepare(self, *args, **kwargs)

    profile._prepare_trace = _prepare_trace


# Where Inductor times candidates on the program's tensors and keeps only the
# fastest one's configuration: each class's methods, by module.
_BENCHMARKING = {
    "torch._inductor.runtime.triton_heuristics": ("CachingAutotuner",
                                                  ("benchmark_all_configs", "coordinate_descent_tuning")),
    "torch._inductor.select_algorithm": ("AlgorithmSelectorCache", ("autotune",)),
}


def _benchmarking(recorder, method, label):
    """`method` inside a scope of kind 3 (the framework benchmarking), reported
    whether the layer observes or not: every launch, copy and set it makes is
    recorded as benchmarking (FORMAT.md, Origin.benchmarking)."""

    @functools.wraps(method)
    def benchmarking(*args, **kwargs):
        scope = object()
        recorder.gpurr_framework_open_scope(id(scope), label, 3, -1, 0, None, 0, 0)
        try:
            return method(*args, **kwargs)
        finally:
            recorder.gpurr_framework_close_scope(id(scope))

    return benchmarking


def _wrap_benchmarking(recorder, warn, class_name, methods, module):
    try:
        cls = getattr(module, class_name)
        wrapped = [(name, _benchmarking(recorder, getattr(cls, name), f"{class_name}.{name}".encode())) for name in methods]
    except Exception as e:  # noqa: BLE001  an API that moved: nothing wrapped, the program unchanged
        warn(f"{module.__name__} has no {class_name}.{'/'.join(methods)} ({type(e).__name__}: {e}): what "
             "Inductor launches while it autotunes is not marked, and `gpurr diff` compares it as the program's")
        return
    for name, method in wrapped:
        setattr(cls, name, method)


def watch_benchmarking(recorder, warn):
    """Marks what Inductor launches while it autotunes: at a kernel's first
    call it times each candidate configuration on the program's tensors, and
    at compile time (max-autotune) each candidate template; a run that finds
    the choice in Inductor's cache launches none of that. Marked, `gpurr diff`
    sets those launches aside, so such runs compare alike. Each class is
    wrapped once its module is imported: a program that never compiles
    imports nothing more."""
    from gpurr_import_watch import when_imported

    for module, (class_name, methods) in _BENCHMARKING.items():
        when_imported(module, functools.partial(_wrap_benchmarking, recorder, warn, class_name, methods))


def keep_written_files():
    """What the program wrote, kept before a quick exit (the layer's
    quick_exit): Python's text files still open are flushed, other writers
    that the teardown would close (gzip, bz2 and lzma files, zip archives:
    their ends are written then) are closed, the buffered files under them
    are flushed, then C's stdio."""
    import ctypes
    import gc
    import io
    import sys

    zipfile = sys.modules.get("zipfile")
    archive = zipfile.ZipFile if zipfile is not None else ()
    texts, others, buffered = [], [], []
    for o in gc.get_objects():
        kind = type(o)  # never o.__class__
        if issubclass(kind, io.TextIOWrapper):
            texts.append(o)
        elif issubclass(kind, (io.BufferedWriter, io.BufferedRandom)):
            buffered.append(o)
        elif issubclass(kind, archive) or (issubclass(kind, io.IOBase) and
                                           not issubclass(kind, (io.BufferedReader, io.FileIO))):
            others.append(o)

    def flush(f):
        if not f.closed and f.writable():
            f.flush()

    def close(f):
        if (f.fp is not None and f.mode != "r") if isinstance(f, archive) else (not f.closed and f.writable()):
            f.close()

    # Text first (it flushes into its buffer), then what wraps a file with
    # an end of its own to write, then the buffers under them.
    for files, act in ((texts, flush), (others, close), (buffered, flush)):
        for f in files:
            try:
                act(f)
            except Exception:  # noqa: BLE001  a broken pipe, a file closed underneath: as the teardown would
                pass
    try:
        ctypes.CDLL(None).fflush(None)
    except Exception:  # noqa: BLE001
        pass


def watch_cuda_blocks(torch, observer, path, recorder, warn):
    """Once CUDA starts, reports the caching allocator's blocks to the
    recorder (exact launch ranges). Needs a CUDA build of the same PyTorch
    (`path`, libgpurr_torch_cuda.so). Attached when Python starts CUDA
    (torch.cuda._lazy_call runs it after the allocator has started) or, when
    CUDA is started from C++ alone, by the op observer at the next op."""
    if getattr(torch.version, "cuda", None) is None or not os.path.exists(path):
        return
    try:
        lib = ctypes.CDLL(path)  # makes no CUDA call
    except OSError as e:
        warn(f"{path} does not load ({e}): launch ranges run to their allocation's end")
        return
    try_install = lib.gpurr_torch_cuda_try_install
    try_install.argtypes = [ctypes.c_void_p]

    def attach():
        try:  # an exception here would fail the program's CUDA start
            if try_install(recorder._handle) == -1:
                warn("the recorder takes no allocator blocks: launch ranges run to their allocation's end")
        except Exception as e:  # noqa: BLE001
            warn(f"the allocator's blocks are not reported ({e}): launch ranges run to their allocation's end")

    observer.gpurr_torch_watch_blocks.argtypes = [ctypes.c_void_p]
    observer.gpurr_torch_watch_blocks(ctypes.cast(try_install, ctypes.c_void_p))
    torch.cuda._lazy_call(attach)


def quiet_threads(hook, stop):
    """threading.excepthook that, as for SystemExit, prints nothing for a
    thread that the layer's stop (the exception class `stop`) ended, and
    leaves the rest to `hook`."""
    @functools.wraps(hook)
    def excepthook(args):
        if args.exc_type is not stop:
            hook(args)
    return excepthook
