"""What the framework scripts share: the device to run on, and a result
printed to the last bit, so that a recorded run's output can be compared
with a plain run's byte for byte."""
import argparse
import os
import struct
import sys

# Before cuBLAS starts: deterministic GEMMs.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def arguments(description, default_steps=5):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="cpu: a smoke test of the script itself, without a GPU")
    p.add_argument("--steps", type=int, default=default_steps)
    return p.parse_args()


def torch_or_skip(device):
    """PyTorch, or exit 77 (skipped) where it or the device is missing."""
    try:
        import torch
    except ImportError as e:
        print(f"no PyTorch ({e}): skipped")
        sys.exit(77)
    if device == "cuda" and not torch.cuda.is_available():
        print("PyTorch sees no GPU: skipped")
        sys.exit(77)
    return torch


def bits(x):
    """A float as its exact bits and its value."""
    return f"{struct.unpack('<I', struct.pack('<f', float(x)))[0]:08x} ({float(x):.9g})"


def train_ddp(torch, ddp, rank, device, steps):
    """SGD steps of a DistributedDataParallel model on the rank's own batch,
    each printing the rank's loss to the last bit (one write per line: the
    processes share the output)."""
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1 + rank)
    x = torch.randn(64, 32, generator=g).to(device)
    y = torch.randn(64, 4, generator=g).to(device)
    for i in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        sys.stdout.write(f"rank {rank} step {i} loss {bits(loss.item())}\n")
        sys.stdout.flush()
