#!/usr/bin/env python3
"""Data-parallel training of one process, started by torchrun
(`torchrun --standalone --nproc_per_node 1 ddp_nccl.py`), with the NCCL
backend, as DDP runs on every GPU of a node: autograd's thread hands each
gradient bucket to NCCL, whose kernels run on a stream of NCCL's own, and
the optimizer reads the result on the compute stream. On the CPU (a smoke
test of the script) the gloo backend stands in. Prints its loss per step to
the last bit.

Expected under `gpurr record` (README.md): one trace (torchrun's agent
makes no CUDA call), of rank 0; output unchanged; two recordings identical. The operations of
autograd's thread on NCCL's stream and of the main thread on the compute
stream are ordered by the data they hand each other (docs/DIFF.md, "How
order is compared")."""

from common import arguments, torch_or_skip, train_ddp

args = arguments(__doc__)
torch = torch_or_skip(args.device)
import torch.distributed as dist  # noqa: E402

dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
rank = dist.get_rank()
if args.device == "cuda":
    torch.cuda.set_device(rank)
torch.manual_seed(0)
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cuda.matmul.allow_tf32 = False
model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 4)).to(args.device)
# Small buckets: several all-reduces a step, each started by autograd's
# thread as soon as its bucket's gradients are ready.
ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.1)
train_ddp(torch, ddp, rank, args.device, args.steps)
dist.barrier()
dist.destroy_process_group()
