# A CPU training loop of GPURR_TEST_STEPS steps (default 22) that logs every
# GPURR_TEST_LOG_EVERY-th step (default 4; 0: never): after that step's
# optimizer step it runs one more op (marked "at:log"), so the next step, as
# gpurr's layer counts steps, runs one launch more than the others, at its
# start. With GPURR_TEST_CHANGE_AT=N, every step from step N on runs one more
# op in its forward pass (and its gradient's in backward): the program's
# steps change for good. Under the test's fake recorder a "kernel" is
# launched inside the ops listed below. Prints each step's loss.
import ctypes
import os

import torch
from torch import nn

if os.environ.get("GPURR_TEST_LAUNCHER"):
    recorder = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
    launcher = ctypes.CDLL(os.environ["GPURR_TEST_LAUNCHER"])
    launcher.gpurr_test_launch_on_ops.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    assert launcher.gpurr_test_launch_on_ops(recorder._handle, b"aten::addmm,aten::mm,aten::relu,aten::mul") == 0

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 8)
every = int(os.environ.get("GPURR_TEST_LOG_EVERY", "4"))
change_at = int(os.environ.get("GPURR_TEST_CHANGE_AT", "-1"))
for step in range(int(os.environ.get("GPURR_TEST_STEPS", "22"))):
    opt.zero_grad()
    out = model(x)
    if 0 <= change_at <= step:
        out = out * 1.0  # at:change
    loss = out.square().mean()
    loss.backward()
    opt.step()
    if every and step % every == every - 1:
        print(f"step {step} logged {(loss * 1.0).item():.6f}")  # at:log
    else:
        print(f"step {step} loss {loss.item():.6f}")
