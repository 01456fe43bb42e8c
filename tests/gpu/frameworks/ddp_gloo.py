#!/usr/bin/env python3
"""Data-parallel training of two processes, started by torchrun
(`torchrun --standalone --nproc_per_node 2 ddp_gloo.py`), with the gloo
backend: on a GPU both ranks train on the one device, and gradients are
averaged through the host. Each rank prints its loss per step to the last
bit.

Expected under `gpurr record` (README.md): a directory of two traces,
rank0.gpurr and rank1.gpurr; output unchanged; two recordings identical
rank by rank."""

from common import arguments, torch_or_skip, train_ddp

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
train_ddp(torch, ddp, rank, args.device, args.steps)
dist.barrier()
dist.destroy_process_group()
