#!/usr/bin/env python3
"""A one-layer transformer block trained for a few steps: self-attention
through scaled_dot_product_attention with dropout (the memory-efficient
backend, which takes PyTorch's Philox state inside its parameter struct),
then a feed-forward layer with nn.Dropout (which takes it as a parameter of
its own). The script seeds its data and initial weights with its own CPU
generator but never calls torch.manual_seed, so the CUDA generator starts
from a different seed in every process.

Expected under `gpurr bisect`: diverged at the first attention kernel, cause
RNG state: the recorder does not decode the state inside the struct, and
`gpurr diff` finds it by the seed the dropout kernels take.

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
from torch.nn.attention import SDPBackend, sdpa_kernel

BATCH, TOKENS, DIM, HEADS = 8, 64, 128, 4
STEPS = 3


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.out = nn.Linear(DIM, DIM)
        self.ff = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.ReLU(), nn.Dropout(0.1), nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        q, k, v = self.qkv(x).view(BATCH, TOKENS, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1 if self.training else 0.0)
        x = x + self.out(a.transpose(1, 2).reshape(BATCH, TOKENS, DIM))
        return x + self.ff(x)


def main():
    generator = torch.Generator().manual_seed(1234)
    inputs = torch.randn(BATCH, TOKENS, DIM, generator=generator)
    targets = torch.randn(BATCH, TOKENS, DIM, generator=generator)
    model = Block()
    with torch.no_grad():  # reproducible initial weights
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
    device = torch.device("cuda")
    model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model.train()
    loss = None
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        for _ in range(STEPS):
            optimizer.zero_grad(set_to_none=True)
            loss = F.mse_loss(model(inputs), targets)
            loss.backward()
            optimizer.step()
    final = loss.item()
    print(f"final loss {final!r} ({final.hex()}) after {STEPS} steps")


if __name__ == "__main__":
    main()
