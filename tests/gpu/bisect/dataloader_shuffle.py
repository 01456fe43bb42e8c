#!/usr/bin/env python3
"""A small MLP trained for one epoch from a DataLoader over a synthetic
TensorDataset. The data, the initial weights and the CUDA generator are
seeded, but the loader shuffles with no generator of its own and
torch.manual_seed is never called, so the order of the samples (the bytes of
each batch copied to the GPU) changes from run to run.

Expected under `gpurr bisect`: diverged at the copy of the first batch, cause
host input.

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
from torch.utils.data import DataLoader, TensorDataset

SAMPLES = 2048
FEATURES = 64
BATCH = 128


def main():
    torch.cuda.manual_seed_all(0)
    generator = torch.Generator().manual_seed(1234)
    dataset = TensorDataset(torch.randn(SAMPLES, FEATURES, generator=generator),
                            torch.randint(0, 10, (SAMPLES,), generator=generator))
    loader = DataLoader(dataset, batch_size=BATCH, shuffle=True)
    device = torch.device("cuda")
    model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, 10))
    with torch.no_grad():  # reproducible initial weights
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss = None
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    final = loss.item()
    print(f"final loss {final!r} ({final.hex()}) after {len(loader)} batches")


if __name__ == "__main__":
    main()
