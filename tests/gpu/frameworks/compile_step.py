#!/usr/bin/env python3
"""A training step compiled with torch.compile (TorchInductor): on a GPU its
kernels are Triton's, launched through cuLaunchKernelEx from modules loaded
at run time. Prints the loss of each step to the last bit.

Expected under `gpurr record` (README.md): output unchanged; launches of
kernels named triton_*; two recordings identical."""
from common import arguments, bits, torch_or_skip

args = arguments(__doc__)
torch = torch_or_skip(args.device)
torch.manual_seed(0)
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cuda.matmul.allow_tf32 = False
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128),
                            torch.nn.Linear(128, 10)).to(args.device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(256, 64, device=args.device)
y = torch.randint(0, 10, (256,), device=args.device)


@torch.compile
def step(x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss


for i in range(args.steps):
    opt.zero_grad()
    loss = step(x, y)
    opt.step()
    print(f"step {i} loss {bits(loss.item())}")
