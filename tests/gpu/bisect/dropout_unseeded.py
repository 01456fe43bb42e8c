#!/usr/bin/env python3
"""A small MLP with dropout trained for a few steps. The script seeds what it
knows about: it makes its data and initial weights with its own seeded CPU
generator, but never calls torch.manual_seed, so the CUDA generator that
dropout draws its masks from starts from a different seed in every process.

Expected under `gpurr bisect`: diverged at the first dropout kernel, cause
RNG state (same kernel and inputs, only the Philox seed differs).

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

SAMPLES = 512
FEATURES = 128
STEPS = 5


def main():
    generator = torch.Generator().manual_seed(1234)
    inputs = torch.randn(SAMPLES, FEATURES, generator=generator)
    labels = torch.randint(0, 10, (SAMPLES,), generator=generator)
    model = nn.Sequential(
        nn.Linear(FEATURES, 256), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(256, 256), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(256, 10))
    with torch.no_grad():  # reproducible initial weights
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
    device = torch.device("cuda")
    model.to(device)
    inputs, labels = inputs.to(device), labels.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model.train()
    loss = None
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
    final = loss.item()
    print(f"final loss {final!r} ({final.hex()}) after {STEPS} steps")


if __name__ == "__main__":
    main()
