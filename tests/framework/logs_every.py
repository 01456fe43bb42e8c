# A CPU training loop of GPURR_TEST_STEPS steps (default 22) that logs every
# GPURR_TEST_LOG_EVERY-th step (default 4; 0: never): after that step's
# optimizer step it runs one more op (marked "at:log"), so the next step, as
# gpurr's layer counts steps, runs one launch more than the others, at its
# start. With GPURR_TEST_CHANGE_AT=N, every step from step N on runs one more
# op in its forward pass (and its gradient's in backward): the program's
# steps change for good. With GPURR_TEST_AMP_SKIP="N,M,...", an AMP
# GradScaler scales the loss, and the gradients of those steps overflow, so
# that the scaler skips their optimizer steps. With GPURR_TEST_HOOK_AT=N, a
# forward pre-hook of the last layer scales its weight by 1 under
# torch.no_grad in step N alone (marked "at:hook"), and the layers'
# initialisation launches too, so that step 0 begins unlike the others.
# Under the test's fake recorder a "kernel" is launched inside the ops
# listed below. Prints each step's loss.
import ctypes
import os

import torch
from torch import nn

hook_at = int(os.environ.get("GPURR_TEST_HOOK_AT", "-1"))
if os.environ.get("GPURR_TEST_LAUNCHER"):
    recorder = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
    launcher = ctypes.CDLL(os.environ["GPURR_TEST_LAUNCHER"])
    launcher.gpurr_test_launch_on_ops.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    ops = b"aten::addmm,aten::mm,aten::relu,aten::mul" + (b",aten::uniform_" if hook_at >= 0 else b"")
    assert launcher.gpurr_test_launch_on_ops(recorder._handle, ops) == 0

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 8)
every = int(os.environ.get("GPURR_TEST_LOG_EVERY", "4"))
change_at = int(os.environ.get("GPURR_TEST_CHANGE_AT", "-1"))
skip = os.environ.get("GPURR_TEST_AMP_SKIP")
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=1000) if skip is not None else None
skipped = {int(s) for s in skip.split(",") if s} if skip else set()
step = 0


def scale_once(module, args):
    if step == hook_at:
        with torch.no_grad():
            torch.mul(module.weight, 1.0, out=module.weight)  # at:hook


if hook_at >= 0:
    model[2].register_forward_pre_hook(scale_once)
for step in range(int(os.environ.get("GPURR_TEST_STEPS", "22"))):
    opt.zero_grad()
    out = model(x)
    if 0 <= change_at <= step:
        out = out * 1.0  # at:change
    if scaler is not None:
        out = out * (1e30 if step in skipped else 1.0)  # overflows: the scaler skips this step
    loss = out.square().mean()
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        opt.step()
    if every and step % every == every - 1:
        print(f"step {step} logged {(loss * 1.0).item():.6f}")  # at:log
    else:
        print(f"step {step} loss {loss.item():.6f}")
