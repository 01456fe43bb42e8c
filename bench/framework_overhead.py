"""CPU cost of gpurr's PyTorch layer per aten op, and the channels it was
chosen over, measured side by side on one eager CPU training loop.

    python bench/framework_overhead.py BUILD_DIR [--rounds 5] [--steps 30]

Variants, each in its own process, run in alternation for --rounds rounds:
  plain     the loop alone
  layer     gpurr's layer as `gpurr record` installs it: the recorder library
            loaded, libgpurr_torch.so's global RecordFunction observer, module
            and optimizer hooks, observing every step (GPURR_FULL_ATTRIBUTION=1:
            by default the layer stops observing after two steps, which
            bench/layer_cost.py measures)
  nvtx      torch.autograd.profiler.emit_nvtx(): the NVTX channel (PyTorch
            formats a range name per op and pushes it; no NVTX tool attached,
            so what a tool would add comes on top). It initialises CUDA, so
            it is reported unavailable on a machine without a GPU
  dispatch  a TorchDispatchMode that reports each aten op through ctypes: the
            pure-Python channel
Prints the median step time of each, the ops per step (RecordFunction scopes
of one step) and the added time per op against plain.
"""
import argparse
import os
import statistics
import subprocess
import sys

LOOP = r"""
import os, sys, time, torch
from torch import nn
torch.manual_seed(0)
torch.set_num_threads(1)
variant, steps = sys.argv[1], int(sys.argv[2])
model = nn.Sequential(nn.Embedding(1000, 64), nn.Flatten(), nn.Linear(64 * 16, 256), nn.ReLU(),
                      nn.Linear(256, 256), nn.LayerNorm(256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randint(0, 1000, (8, 16))
y = torch.randint(0, 10, (8,))
def step():
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
ctx = None
if variant == "nvtx":
    ctx = torch.autograd.profiler.emit_nvtx()
    ctx.__enter__()
elif variant == "dispatch":
    import ctypes
    from torch.utils._python_dispatch import TorchDispatchMode
    rec = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
    enter, leave = rec.gpurr_framework_enter_module, rec.gpurr_framework_exit_module
    enter.argtypes = [ctypes.c_char_p]
    class Report(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            enter(func.name().encode())
            try:
                return func(*args, **(kwargs or {}))
            finally:
                leave()
    ctx = Report()
    ctx.__enter__()
for _ in range(5):
    step()
times = []
for _ in range(steps):
    t = time.perf_counter()
    step()
    times.append(time.perf_counter() - t)
if ctx is not None:
    ctx.__exit__(None, None, None)
if variant == "plain":
    with torch.autograd.profiler.profile() as prof:
        step()
    print("ops", len(prof.function_events))
times.sort()
print("median", times[len(times) // 2])
"""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=30)
    a = p.parse_args()
    lib = os.path.join(a.build, "lib")
    layer_env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "share", "gpurr", "python"),
                     CUDA_INJECTION64_PATH=os.path.join(lib, "libgpurr_recorder.so"),
                     GPURR_TORCH_OBSERVER=os.path.join(lib, "libgpurr_torch.so"),
                     GPURR_OUTPUT="/nonexistent-gpurr-bench",  # no CUDA call: nothing is written
                     GPURR_FULL_ATTRIBUTION="1")
    plain_env = dict(os.environ, CUDA_INJECTION64_PATH=layer_env["CUDA_INJECTION64_PATH"])
    plain_env.pop("PYTHONPATH", None)
    variants = {"plain": plain_env, "layer": layer_env, "nvtx": plain_env, "dispatch": plain_env}
    medians = {v: [] for v in variants}
    unavailable = {}
    ops = None
    for _ in range(a.rounds):
        for v, env in variants.items():
            if v in unavailable:
                continue
            r = subprocess.run([sys.executable, "-c", LOOP, v, str(a.steps)], env=env, capture_output=True, text=True)
            if r.returncode != 0:
                unavailable[v] = (r.stderr.strip().splitlines() or ["failed"])[-1]
                continue
            for line in r.stdout.splitlines():
                key, value = line.split()
                if key == "ops":
                    ops = int(value)
                else:
                    medians[v].append(float(value))
    plain = statistics.median(medians["plain"])
    print(f"ops per step (RecordFunction scopes): {ops}")
    print(f"{'variant':10} {'step ms':>9} {'ratio':>7} {'added us/op':>12}")
    for v, m in medians.items():
        if v in unavailable:
            print(f"{v:10} unavailable: {unavailable[v]}")
            continue
        t = statistics.median(m)
        print(f"{v:10} {t * 1e3:9.3f} {t / plain:7.3f} {(t - plain) / ops * 1e6:12.2f}")


if __name__ == "__main__":
    main()
