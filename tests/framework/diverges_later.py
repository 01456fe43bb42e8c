# A CPU training loop of GPURR_TEST_STEPS steps (default 200, about 50 ms
# each) whose runs after the first take another path in step 1: the first
# run leaves a marker file (GPURR_TEST_MARKER), and a run that finds it
# runs one more op there (marked "at:extra"). Under `gpurr bisect` the first
# is its run 1, by the name of the trace it writes, whichever attempt came
# first: bisect runs again a run that failed (a torchrun job that lost its
# port), and such an attempt may have left the marker. Under the test's fake recorder, a
# "kernel" is launched inside the ops listed below, so the runs' traces
# diverge at that op. Prints each step's loss.
import ctypes
import os
import time

import torch
from torch import nn

if os.environ.get("GPURR_TEST_LAUNCHER"):
    recorder = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
    launcher = ctypes.CDLL(os.environ["GPURR_TEST_LAUNCHER"])
    launcher.gpurr_test_launch_on_ops.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    assert launcher.gpurr_test_launch_on_ops(recorder._handle, b"aten::addmm,aten::mm,aten::mul") == 0

marker = os.environ["GPURR_TEST_MARKER"]
again = os.path.exists(marker)
open(marker, "w").close()
# gpurr record's staging directory: `.run1.gpurr.staging-XXXXXX` for bisect's run 1.
run = os.path.basename(os.environ.get("GPURR_OUTPUT", "")).split(".staging-")[0]
if run.startswith(".run") and run.endswith(".gpurr"):
    again = run != ".run1.gpurr"

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 8)
for step in range(int(os.environ.get("GPURR_TEST_STEPS", "200"))):
    opt.zero_grad()
    h = model[0](x)
    if again and step == 1:
        h = h * 1.0  # at:extra
    loss = model[1](h).square().mean()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f}", flush=True)
    time.sleep(0.05)
