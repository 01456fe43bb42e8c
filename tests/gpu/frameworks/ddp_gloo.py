#!/usr/bin/env python3
"""Data-parallel training of two processes, started by torchrun
(`torchrun --standalone --nproc_per_node 2 ddp_gloo.py`), with the gloo
backend: on a GPU both ranks train on the one device, and gradients are
averaged through the host. Each rank prints its loss per step to the last
bit.

The model's last layer is the identity whose backward sums the gradient
from three parts, 4096 g, g and -4096 g, a sum whose rounding depends on
its order. With DDP_PLANT=1 in the environment (the command line stays the
same, so that the runs compare), rank 1 adds g last in step 1: the
divergence starts on rank 1 and reaches rank 0 through that step's
all-reduce.

Expected under `gpurr record` (README.md): a directory of two traces,
rank0.gpurr and rank1.gpurr; output unchanged; two recordings identical
rank by rank; against a planted run, rank 1 the origin and rank 0 a
receiver through step 1's all-reduce."""
import os

from common import arguments, torch_or_skip, train_ddp

args = arguments(__doc__)
torch = torch_or_skip(args.device)
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cuda.matmul.allow_tf32 = False
plant = os.environ.get("DDP_PLANT") == "1" and rank == 1


class Parts(torch.autograd.Function):
    """y = x; the gradient summed from three parts, in another order in step
    1 when planted (as atomics may sum on a GPU)."""

    steps = 0

    @staticmethod
    def forward(ctx, x):
        Parts.steps += 1
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        order = [0, 1, 2]
        if plant and Parts.steps == 2:
            order = [0, 2, 1]  # at:planted
        parts = torch.stack([g * 4096, g, g * -4096])[torch.tensor(order, device=g.device)]
        return parts[0] + parts[1] + parts[2]


class Identity(torch.nn.Module):
    def forward(self, x):
        return Parts.apply(x)


model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4),
                            Identity()).to(args.device)
ddp = torch.nn.parallel.DistributedDataParallel(model)
train_ddp(torch, ddp, rank, args.device, args.steps)
dist.barrier()
dist.destroy_process_group()
