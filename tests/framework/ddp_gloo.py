"""ddp_gloo.py: DistributedDataParallel over gloo on the CPU, two ranks, four
training steps, launched as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT in each worker's environment). DDP's gradient all-reduces are
issued by its C++ Reducer, not by torch.distributed's Python functions. With
DDP_PLANT=1 in the environment (the command line stays the same, so that the
runs compare), rank 1's backward in step 1 sums a gradient in another order,
as index_add's atomics may on a GPU: the divergence starts on rank 1 and
reaches rank 0 through that step's all-reduce."""
import os

import two_ranks


def worker(plant):
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")

    class Scatter(torch.autograd.Function):
        """y = x; the gradient summed through index_add from ten parts (of
        weights summing to 1), in another order on rank 1 in step 1 when
        planted."""

        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            n = g.shape[-1]
            parts = torch.cat([g * ((k + 1) / 55) for k in range(10)], dim=-1)
            index = torch.arange(n).repeat(10)
            if plant and rank == 1 and step == 1:
                order = torch.randperm(index.numel(), generator=torch.Generator().manual_seed(7))
                index, parts = index[order], parts[..., order]  # at:planted
            return torch.zeros_like(g).index_add_(-1, index, parts)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.Tanh(), nn.Linear(128, 8))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(100 + rank)
    for step in range(4):
        x = torch.randn(32, 64, generator=data)
        loss = Scatter.apply(ddp(x)).square().mean()
        loss.backward()  # at:backward
        opt.step()
        opt.zero_grad()
    print(rank, float(loss.detach()).hex())
    dist.destroy_process_group()


if __name__ == "__main__":
    two_ranks.run(lambda: worker(os.environ.get("DDP_PLANT") == "1"), __file__)
