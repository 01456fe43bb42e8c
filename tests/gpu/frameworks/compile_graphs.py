#!/usr/bin/env python3
"""torch.compile(mode="reduce-overhead"): on a GPU, Inductor's kernels are
captured into a CUDA graph after warm-up, and each later step is one graph
launch. Prints the output of each step to the last bit.

Expected under `gpurr record` (README.md): output unchanged; graph launches
recorded, with the launches, copies and sets captured into them marked
captured (not run then); two recordings identical (with pointwise
autotuning off, below)."""
from common import arguments, bits, torch_or_skip

args = arguments(__doc__, default_steps=8)
torch = torch_or_skip(args.device)
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)).to(args.device)
model.eval()
# One Triton configuration per pointwise kernel, so nothing is benchmarked at
# run time. By default (PyTorch 2.11) Inductor gives each pointwise kernel
# two or more configurations and, at its first launch, times them (Triton's
# benchmarking: an L2-flushing fill_, the kernel, over and over) to keep
# the fastest; on an H200, one of two runs from empty caches did so and the
# other not, 99 operations apart. That is torch.compile's own nondeterminism,
# not what this check is for. (config.deterministic keeps this benchmarking;
# mode= and options= cannot be given together, so the global config.)
import torch._inductor.config  # noqa: E402

torch._inductor.config.triton.autotune_pointwise = False
compiled = torch.compile(model, mode="reduce-overhead")
x = torch.randn(32, 64, device=args.device)
with torch.no_grad():
    for i in range(args.steps):
        out = compiled(x)
        x = torch.tanh(out.clone())  # the graph's output buffer is reused: copy before the next step
        print(f"step {i} sum {bits(x.sum().item())}")
