#!/usr/bin/env python3
"""Gradient-accumulation buffers created with torch.empty instead of
torch.zeros, in a loop that prepares its next batch on a side stream.

Every GPU operation is seeded and deterministic, but the accumulators start
from whatever their memory held. With the stream-ordered allocator
(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync), a block freed on the side
stream is handed to the next allocation only once the side stream has passed
the free, so the host-side pause before each allocation (uneven data-loading
latency, here a random sleep) decides whether an accumulator starts with the
freed batch's values or with other memory. Each round asks for a larger
block than the last, so its own batch is the block it can reuse, and the
rounds are independent draws: two runs start every accumulator from the same
bytes with a probability of about 2**-ROUNDS.

Expected under `gpurr bisect`: diverged (or not reproduced by the
confirmation run, the pauses being random) at the first accumulation whose
buffer held different bytes, cause uninitialised memory: the input differs in
bytes that no recorded operation wrote since the buffer was allocated.

Exits 77 (skipped) where there is no PyTorch or no GPU.
"""
import os
import random
import sys
import time

# Before CUDA starts: one allocation per tensor, stream-ordered reuse.
os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"

try:
    import torch
except ImportError as e:
    print(f"no PyTorch ({e}): skipped")
    sys.exit(77)
if not torch.cuda.is_available():
    print("no GPU: skipped")
    sys.exit(77)

ROUNDS = 12
WIDTH = 256
PREPARE_STEPS = 24  # 2048x2048 products on the side stream per round (milliseconds)


def main():
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device("cuda")
    side = torch.cuda.Stream()
    latency = random.SystemRandom()
    # In place: nothing is freed on the main stream before the rounds.
    mixing = torch.randn(2048, 2048, device=device).mul_(2048 ** -0.5)
    weight = torch.randn(WIDTH, device=device)
    side.wait_stream(torch.cuda.current_stream())  # mixing is ready
    with torch.cuda.stream(side):
        # Work buffers of the preparation, reused: in a round, the only block
        # freed on the side stream is the raw batch.
        features = torch.empty(2048, 2048, device=device)
        product = torch.empty(2048, 2048, device=device)
    accumulators = []
    for r in range(ROUNDS):
        rows = 64 * (r + 1)  # a new size every round
        with torch.cuda.stream(side):
            batch = torch.randn(rows, WIDTH, device=device)
            features.normal_()
            for _ in range(PREPARE_STEPS):
                torch.mm(features, mixing, out=product)
                torch.tanh(product, out=features)
            prepared = batch * features[:rows, :WIDTH]
            del batch  # freed on the side stream, after the products
        if latency.random() < 0.5:
            time.sleep(0.1)  # slow data loading: the side stream has finished
        accumulator = torch.empty(rows, WIDTH, device=device)  # should be torch.zeros
        torch.cuda.current_stream().wait_stream(side)
        prepared.record_stream(torch.cuda.current_stream())
        for _ in range(4):  # micro-batches
            accumulator.addcmul_(prepared, weight, value=0.25)
        accumulators.append(accumulator)
        del prepared
    total = sum(a.double().sum() for a in accumulators).item()
    print(f"accumulated {total!r} over {ROUNDS} rounds")


if __name__ == "__main__":
    main()
