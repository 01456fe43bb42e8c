#!/usr/bin/env python3
"""A small training run written to be reproducible, following PyTorch's
Reproducibility notes: fixed seeds, torch.use_deterministic_algorithms(True),
CUBLAS_WORKSPACE_CONFIG set before CUDA starts, cuDNN autotuning off. It uses
the operations the other scripts of this folder get wrong (convolutions,
dropout, a shuffling DataLoader, index_add_), each in its reproducible form.

Expected under `gpurr bisect`: identical (two runs match at every launch).

Exits 77 (skipped) where there is no PyTorch or no GPU.
"""
import os
import sys

# cuBLAS reads this when it starts: before the first CUDA call.
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

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

SAMPLES = 512
BATCH = 64
EPOCHS = 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 8 * 8, 128)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x, groups):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        h = self.drop(F.relu(self.fc1(x.flatten(1))))
        # Per-group sums of the features, added back to every sample (the
        # same accumulation as index_add.py, in its deterministic form).
        pooled = torch.zeros(4, h.shape[1], device=h.device).index_add_(0, groups, h)
        return self.fc2(h + pooled[groups] / h.shape[0])


def main():
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    generator = torch.Generator().manual_seed(1234)
    dataset = TensorDataset(torch.randn(SAMPLES, 3, 32, 32, generator=generator),
                            torch.randint(0, 10, (SAMPLES,), generator=generator))
    loader = DataLoader(dataset, batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(42))
    device = torch.device("cuda")
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss = None
    for _ in range(EPOCHS):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            groups = y % 4
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x, groups), y)
            loss.backward()
            optimizer.step()
    final = loss.item()
    print(f"final loss {final!r} ({final.hex()}) after {EPOCHS} epochs")


if __name__ == "__main__":
    main()
