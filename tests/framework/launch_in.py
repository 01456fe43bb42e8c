"""launch_in.py OPS SCRIPT [ARG...]: runs a Python program as it is, with a
"kernel launch" made inside each op named in OPS (comma-separated) under the
test's fake recorder (launch_on_ops.cpp): so a real CPU program, whose model
code is a library's, leaves launches that carry the origin gpurr's PyTorch
layer gives them. torch is imported first, so that the layer's callback is
registered before the launcher's."""
import ctypes
import os
import runpy
import sys

import torch  # noqa: F401  (the layer starts here)

ops, script = sys.argv[1], sys.argv[2]
recorder = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
launcher = ctypes.CDLL(os.environ["GPURR_TEST_LAUNCHER"])
launcher.gpurr_test_launch_on_ops.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
assert launcher.gpurr_test_launch_on_ops(recorder._handle, ops.encode()) == 0
sys.argv = sys.argv[2:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
runpy.run_path(script, run_name="__main__")
