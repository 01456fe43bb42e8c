"""when_imported(name, then): calls then(module) once the module `name` has
been executed, at once when it already has. gpurr's sitecustomize waits so
for torch, the PyTorch layer for the parts of PyTorch it wraps that a
program may never import (Inductor's autotuner): nothing is imported early.
"""
import importlib.abc
import sys


class _Watcher(importlib.abc.MetaPathFinder):
    """Finds the module through the other finders and wraps its loader, so
    `then` runs once the module's own initialisation has finished. It stays in
    place until the module is executed: a find_spec that only checks whether
    the module is installed (as many libraries do) imports nothing."""

    def __init__(self, name, then):
        self.name = name
        self.then = then

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
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
            watcher.then(module)

        spec.loader.exec_module = exec_module
        return spec


def when_imported(name, then):
    if name in sys.modules:  # imported already
        then(sys.modules[name])
    else:
        sys.meta_path.insert(0, _Watcher(name, then))
