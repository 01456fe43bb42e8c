# gpurr's framework layer, first on PYTHONPATH under `gpurr record` (unless
# --no-framework): it waits for `import torch`, then gpurr_torch_layer
# reports PyTorch's ops, modules, source lines and training steps to the
# recorder. A program that never imports torch sees nothing of it but one
# atexit handler, which has the recorder write what it holds when Ctrl-C
# ends the program. Any sitecustomize this file hides runs right after it,
# as it would have.
import atexit
import importlib.machinery
import importlib.util
import os
import sys

from gpurr_import_watch import when_imported

_HERE = os.path.dirname(os.path.abspath(__file__))


def _start(torch):
    try:
        import gpurr_torch_layer

        gpurr_torch_layer.install(torch, skipped=[_HERE])
    except Exception as e:  # never let the layer break the program
        sys.stderr.write(f"gpurr: warning: the PyTorch layer did not start ({type(e).__name__}: {e}); "
                         "recording goes on without op, module, line and step attribution\n")


def _chain():
    """Runs the sitecustomize that this one hides, if any."""
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


# Registered before any other atexit handler, so that it runs after all of
# them: the program's own run first.
_LAST = getattr(atexit, "_ncallbacks", lambda: 1)() == 0


def _flush_recording():
    """The program ends on Ctrl-C (an unhandled KeyboardInterrupt): Python
    kills itself with SIGINT after its atexit handlers, so the recorder's own
    exit handler, which closes the trace, never runs. The recorder, where
    this process started CUDA and so loaded it, writes what it recorded (every
    hash waited for) into the trace now; the trace stays open, and reads as a
    recording that did not end cleanly, cut where the program stopped."""
    library = os.environ.get("CUDA_INJECTION64_PATH")
    if not library or not os.environ.get("GPURR_OUTPUT"):
        return
    import ctypes

    try:
        recorder = ctypes.CDLL(library, mode=os.RTLD_NOLOAD)  # only where the driver loaded it
        if recorder.gpurr_framework_api_version() >= 9:  # gpurr_framework_flush came with 9
            recorder.gpurr_framework_flush()
    except (OSError, AttributeError):  # not loaded: nothing recorded here
        pass


def _at_exit():
    if isinstance(getattr(sys, "last_value", None), KeyboardInterrupt):
        _flush_recording()
        return
    layer = sys.modules.get("gpurr_torch_layer")
    if layer is not None and _LAST and os.environ.get("GPURR_QUICK_EXIT") == "1":
        # gpurr record --quick-exit: the layer ends a program gpurr stopped
        # without the interpreter's teardown (not when another handler came
        # first: it would be skipped).
        layer.quick_exit()


atexit.register(_at_exit)
when_imported("torch", _start)  # at once when something earlier at start-up imported it
_chain()
