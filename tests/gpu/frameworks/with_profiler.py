#!/usr/bin/env python3
"""A training loop that profiles itself with torch.profiler, whose GPU
events come from CUPTI. Prints the loss of each step to the last bit, then
what the profiler was asked for and saw: whether it counted any GPU kernels
(on stderr, as it differs recorded or not).

Expected under `gpurr record` (README.md): the program's output and exit
status unchanged; two recordings identical. gpurr holds CUPTI from CUDA's
start, so the profiler gets no GPU events: exactly one warning from gpurr
says so (none with CPU activity only)."""
import sys

from common import arguments, bits, torch_or_skip

args = arguments(__doc__)
torch = torch_or_skip(args.device)
from torch.profiler import ProfilerActivity, profile  # noqa: E402

torch.manual_seed(0)
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cuda.matmul.allow_tf32 = False
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(args.device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(128, 64, device=args.device)
y = torch.randint(0, 10, (128,), device=args.device)
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
with profile(activities=activities) as prof:
    for i in range(args.steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print(f"step {i} loss {bits(loss.item())}")
kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
ops = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU)
asked = "CPU and CUDA activity" if ProfilerActivity.CUDA in activities else "CPU activity"
print(f"profiler: {asked}: {ops} CPU events, {kernels} GPU kernel events", file=sys.stderr)
