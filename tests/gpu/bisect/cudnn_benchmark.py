#!/usr/bin/env python3
"""A small convolutional classifier trained for a few steps on synthetic
images, with cuDNN autotuning on (torch.backends.cudnn.benchmark = True) and
cudnn.deterministic set, as many training scripts do. Everything is seeded.
Autotuning times the candidate convolution algorithms at the first call of
each shape and keeps the fastest; timing noise can make a later run keep
another (deterministic) algorithm, so two runs either agree bit for bit or
take different kernels at some convolution.

Expected under `gpurr bisect`: identical, or diverged with cause algorithm
choice; nothing else.

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

BATCH = 32
STEPS = 5


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.conv3 = nn.Conv2d(64, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.max_pool2d(F.relu(self.conv3(x)), 2)
        return self.fc(x.flatten(1))


def main():
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    device = torch.device("cuda")
    images = torch.randn(BATCH, 3, 64, 64, device=device)
    labels = torch.randint(0, 10, (BATCH,), device=device)
    model = ConvNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss = None
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    final = loss.item()
    print(f"final loss {final!r} ({final.hex()}) after {STEPS} steps")


if __name__ == "__main__":
    main()
