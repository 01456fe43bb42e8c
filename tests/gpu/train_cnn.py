#!/usr/bin/env python3
"""A small, unmodified PyTorch training run: a CNN (convolutions through
cuDNN, linear layers through cuBLAS, dropout through PyTorch's Philox RNG)
trained for a few steps on synthetic data, printing its final loss with full
precision. Deterministic by construction (fixed seeds, deterministic
algorithms, no TF32), so its output must be the same recorded or not, and
two recordings must match at every launch.

Exits 77 (skipped) where there is no GPU or no PyTorch. TRAIN_CNN_INTERRUPT=N:
Ctrl-C after step N (a KeyboardInterrupt raised there, as Python raises it
for SIGINT). TRAIN_CNN_SIGNAL=TERM:N or SEGV:N: after step N, once the GPU
has finished it, SIGTERM (then waiting for the end) or a read through a null
pointer.
"""
import os
import sys

# Before cuBLAS starts: deterministic GEMMs under use_deterministic_algorithms.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"no PyTorch ({e}): skipped")
    sys.exit(77)

STEPS = 8


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 8 * 8, 128)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.drop(F.relu(self.fc1(x.flatten(1))))
        return self.fc2(x)


def end_by_signal(how):
    """Ends the program as TRAIN_CNN_SIGNAL says, its GPU work done."""
    import ctypes
    import signal
    import time
    torch.cuda.synchronize()
    sys.stdout.flush()
    if how == "TERM":
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)
    elif how == "SEGV":
        ctypes.string_at(0)
    raise SystemExit(f"TRAIN_CNN_SIGNAL: unknown signal {how!r}, or the program outlived it")


def main():
    """Everything CUDA happens in here (count_launches.py profiles it)."""
    torch.manual_seed(0)
    # Warn rather than fail on an op without a deterministic kernel: the
    # recordings then show where it ran.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device("cuda")
    generator = torch.Generator(device=device).manual_seed(1234)
    inputs = torch.randn(64, 3, 32, 32, device=device, generator=generator)
    labels = torch.randint(0, 10, (64,), device=device, generator=generator)
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss = None
    for step in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
        if os.environ.get("TRAIN_CNN_INTERRUPT") == str(step):
            raise KeyboardInterrupt
        how, _, when = os.environ.get("TRAIN_CNN_SIGNAL", "").partition(":")
        if when == str(step):
            end_by_signal(how)
    torch.cuda.synchronize()
    return loss.item()


if __name__ == "__main__":
    if not torch.cuda.is_available():
        print("no GPU: skipped")
        sys.exit(77)
    final = main()
    print(f"final loss {final!r} ({final.hex()}) after {STEPS} steps")
