#!/usr/bin/env python3
"""Counts the kernels that train_cnn.py runs, with torch.profiler (CUPTI
activity records), to compare with the launch count `gpurr record` records.
Run on its own: the profiler and the recorder cannot share CUPTI.

Prints one number. Exits 77 (skipped) where there is no GPU or no PyTorch.
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_cnn  # noqa: E402  (exits 77 without PyTorch)

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402


def main():
    if not torch.cuda.is_available():
        print("no GPU: skipped", file=sys.stderr)
        return 77
    # The whole CUDA lifetime of the training is inside the profiled region:
    # nothing runs on the GPU before main() or after it.
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        train_cnn.main()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    if not kernels:
        print("the profiler saw no kernels: is CUPTI available to it?", file=sys.stderr)
        return 1
    print(len(kernels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
