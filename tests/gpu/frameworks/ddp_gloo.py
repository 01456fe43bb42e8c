#!/usr/bin/env python3
"""Data-parallel training of two processes, started by torchrun
(`torchrun --standalone --nproc_per_node 2 ddp_gloo.py`), with the gloo
backend: on a GPU both ranks train on the one device, and gradients are
averaged through the host. Each rank prints its loss per step to the last
bit.

Expected under `gpurr record` (README.md): a directory of two traces,
rank0.gpurr and rank1.gpurr; output unchanged; two recordings identical
rank by rank."""

import sys

from common import arguments, bits, torch_or_skip

args = arguments(__doc__)
torch = torch_or_skip(args.device)
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cuda.matmul.allow_tf32 = False
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).to(args.device)
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
g = torch.Generator().manual_seed(1 + rank)  # each rank its own batch
x = torch.randn(64, 32, generator=g).to(args.device)
y = torch.randn(64, 4, generator=g).to(args.device)
for i in range(args.steps):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(ddp(x), y)
    loss.backward()
    opt.step()
    # One write per line: the two processes share the output.
    sys.stdout.write(f"rank {rank} step {i} loss {bits(loss.item())}\n")
    sys.stdout.flush()
dist.barrier()
dist.destroy_process_group()
