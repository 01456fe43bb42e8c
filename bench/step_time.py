#!/usr/bin/env python3
"""One training workload, timed step by step: the median step time after
warm-up, as one JSON line. bench/step_time.sh runs it plainly and under
`gpurr record`, side by side, for the recorded/plain ratio.

  step_time.py cnn|mlp [--steps N] [--warmup N] [--device cuda|cpu]

cnn: tests/gpu/train_cnn.py's network and batch (cuDNN convolutions, cuBLAS
GEMMs, dropout). mlp: a small MLP on a batch of 32, launch-bound: a step is
some 60 short kernels, so the recorder's cost per launch shows undiluted.
Exits 77 (skipped) without PyTorch or, for cuda, without a GPU."""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"no PyTorch ({e}): skipped")
    sys.exit(77)


def workload(name, device):
    g = torch.Generator(device=device).manual_seed(1234)
    if name == "cnn":
        from train_cnn import Net
        model = Net().to(device)
        x = torch.randn(64, 3, 32, 32, device=device, generator=g)
        y = torch.randint(0, 10, (64,), device=device, generator=g)
    else:
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                    torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(device)
        x = torch.randn(32, 64, device=device, generator=g)
        y = torch.randint(0, 10, (32,), device=device, generator=g)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("workload", choices=["cnn", "mlp"])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("PyTorch sees no GPU: skipped")
        sys.exit(77)
    torch.manual_seed(0)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    step = workload(args.workload, args.device)
    for _ in range(args.warmup):
        step()
    sync()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"workload": args.workload, "device": args.device, "steps": args.steps,
                      "median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3}))


if __name__ == "__main__":
    main()
