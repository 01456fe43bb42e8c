"""gpurr: a bitwise record-and-replay debugger for GPU training.

The `gpurr` command is a native program shipped inside this package
(bin/gpurr, with the recorder and the PyTorch layer in lib/ and share/);
`gpurr ...` and `python -m gpurr ...` run it. The PyTorch layer that
`gpurr record` injects into a recorded Python program lives in
share/gpurr/python/: it is loaded from there by path, so it works in any
interpreter the recorded program uses, not only this one.
"""
import os as _os

try:
    from importlib.metadata import version as _version

    __version__ = _version("gpurr")
except Exception:  # not installed from a wheel (a source tree on sys.path)
    __version__ = "unknown"

_HERE = _os.path.dirname(_os.path.abspath(__file__))


def executable():
    """Path of the gpurr program this package ships."""
    return _os.path.join(_HERE, "bin", "gpurr")


def recorder_library():
    """Path of the recorder library `gpurr record` injects (libgpurr_recorder.so)."""
    return _os.path.join(_HERE, "lib", "libgpurr_recorder.so")
