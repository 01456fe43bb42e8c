# gpurr's framework layer, first on PYTHONPATH under `gpurr record` (unless
# --no-framework): it waits for `import torch`, then gpurr_torch_layer
# reports PyTorch's ops, modules, source lines and training steps to the
# recorder. A program that never imports torch sees nothing of it. Any
# sitecustomize this file hides runs right after it, as it would have.
import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


class _TorchWatcher(importlib.abc.MetaPathFinder):
    """Finds torch through the other finders and wraps its loader, so the layer
    starts once torch's own initialisation has finished. It stays in place
    until torch is executed: a find_spec("torch") that only checks whether
    torch is installed (as many libraries do) imports nothing."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module
        watcher = self

        def exec_module(module):
            if watcher in sys.meta_path:
                sys.meta_path.remove(watcher)
            run(module)
            _start(module)

        spec.loader.exec_module = exec_module
        return spec


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


def _quick_exit():
    layer = sys.modules.get("gpurr_torch_layer")
    if layer is not None:
        layer.quick_exit()


# gpurr record --quick-exit: registered before any other atexit handler, so
# that it runs after all of them (the layer then ends a program gpurr
# stopped without the interpreter's teardown); not at all when some other
# handler came first.
if os.environ.get("GPURR_QUICK_EXIT") == "1" and getattr(atexit, "_ncallbacks", lambda: 1)() == 0:
    atexit.register(_quick_exit)
if "torch" in sys.modules:  # imported by something earlier at start-up
    _start(sys.modules["torch"])
else:
    sys.meta_path.insert(0, _TorchWatcher())
_chain()
