#!/usr/bin/env python3
"""Message passing on a random graph, trained for a few steps: each node
averages the messages of its incoming edges with index_add_ (scaled by the
mean in-degree; with alpha != 1 PyTorch keeps to its index_add kernels rather
than handing the sum to scatter_add_). Everything is seeded, but index_add_
on CUDA accumulates float32 values with atomic adds, so with many edges per
node the order of the additions, and the last bits of the sums, change from
run to run.

Expected under `gpurr bisect`: diverged at the first index_add_, cause
nondeterministic kernel, the torch.index_add culprit named, and a replay of
that launch alone gives several distinct results.

Exits 77 (skipped) where there is no PyTorch or no GPU.
"""
import sys

try:
    import torch
except ImportError as e:
    print(f"no PyTorch ({e}): skipped")
    sys.exit(77)
if not torch.cuda.is_available():
    print("no GPU: skipped")
    sys.exit(77)

import torch.nn as nn
import torch.nn.functional as F

NODES = 64
EDGES = 1 << 18  # about 4,096 edges into each node
FEATURES = 64
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 5  # a step count: bench/bisect_time.sh --until-step


class MessagePassing(nn.Module):
    def __init__(self):
        super().__init__()
        self.message = nn.Linear(FEATURES, FEATURES)
        self.update = nn.Linear(2 * FEATURES, FEATURES)
        self.readout = nn.Linear(FEATURES, 1)

    def forward(self, x, src, dst):
        messages = F.relu(self.message(x))[src]
        # Mean over the expected in-degree.
        incoming = torch.zeros_like(x).index_add_(0, dst, messages, alpha=NODES / EDGES)
        h = F.relu(self.update(torch.cat([x, incoming], dim=1)))
        return self.readout(h).squeeze(1)


def main():
    torch.manual_seed(0)
    device = torch.device("cuda")
    x = torch.randn(NODES, FEATURES, device=device)
    src = torch.randint(0, NODES, (EDGES,), device=device)
    dst = torch.randint(0, NODES, (EDGES,), device=device)
    target = torch.randn(NODES, device=device)
    model = MessagePassing().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss = None
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x, src, dst), target)
        loss.backward()
        optimizer.step()
    final = loss.item()
    print(f"final loss {final!r} ({final.hex()}) after {STEPS} steps")


if __name__ == "__main__":
    main()
