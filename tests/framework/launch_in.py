"""launch_in.py OPS SCRIPT [ARG...]: runs a Python program as it is, with a
"kernel launch" made inside each op named in OPS (comma-separated) under the
test's fake recorder (launch_on_ops.cpp): so a real CPU program, whose model
code is a library's, leaves launches that carry the origin gpurr's PyTorch
layer gives them. torch is imported first, so that the layer's callback is
registered before the launcher's. With GPURR_TEST_HASH set, the launcher's
callback is registered first instead: it launches as an op ends, and
PyTorch runs the ops' end callbacks in the order they were registered, so
the layer's op is still open then."""
import ctypes
import importlib.util
import os
import runpy
import sys

hashing = "GPURR_TEST_HASH" in os.environ
if hashing:
    torch_lib = os.path.join(os.path.dirname(importlib.util.find_spec("torch").origin), "lib")
    for lib in ("libc10.so", "libtorch_cpu.so"):
        ctypes.CDLL(os.path.join(torch_lib, lib), mode=ctypes.RTLD_GLOBAL)
else:
    import torch  # noqa: F401  (the layer starts here)

ops, script = sys.argv[1], sys.argv[2]
recorder = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
launcher = ctypes.CDLL(os.environ["GPURR_TEST_LAUNCHER"])
launcher.gpurr_test_launch_on_ops.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
assert launcher.gpurr_test_launch_on_ops(recorder._handle, ops.encode()) == 0
if hashing:
    import torch  # noqa: F401,F811  (the layer starts here)
sys.argv = sys.argv[2:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
runpy.run_path(script, run_name="__main__")
