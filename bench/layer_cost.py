"""What gpurr's PyTorch layer adds to an eager training step, on the CPU:
bench/step_time.py's MLP and CNN loops run plainly and with the layer
loaded as `gpurr record` loads it (sitecustomize, the recorder library, the
op observer), side by side in one run.

    python bench/layer_cost.py BUILD_DIR [--rounds 5] [--steps 100] [--warmup 10]
        [--callgrind-steps 5] [--no-callgrind] [--loops mlp,cnn] [--python PYTHON]

Two figures per loop, each against its goal:
  time          median step time over --rounds alternating runs of --steps
                steps each (after warm-up), the difference divided by the
                GPU launches the same step makes on a GPU (30 for the MLP,
                47 for the CNN, counted on an H200): the layer's added time
                per launch-equivalent. Goal: 2 us.
  instructions  instructions per step under valgrind --tool=callgrind,
                counted only over --callgrind-steps steps after warm-up
                (libgpurr_callgrind_toggle.so): repeatable where the
                clock is not. Goal: +2%. Also the added instructions per
                launch-equivalent, which the CNN's long CPU convolutions
                do not dilute as they dilute its time and percentage.
No kernel is launched (no GPU): what the recorder does at a launch is
bench/callback_bench's. The warm-up covers the layer's learning steps
(docs/RECORDING.md, "What the layer costs"): the figures are its steady
state; --warmup 0 --steps 2 shows the learning steps' cost instead.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHES = {"mlp": 30, "cnn": 47}  # GPU launches of one step (H200, PyTorch 2.11)
TIME_GOAL_US = 2.0
INSTRUCTIONS_GOAL = 0.02

LOOP = r"""
import ctypes, sys, time
sys.path.insert(0, sys.argv[1])
import torch
import step_time
torch.set_num_threads(1)
name, warmup, steps, toggle = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
torch.manual_seed(0)
step = step_time.workload(name, "cpu")
cg = ctypes.CDLL(toggle) if toggle else None
if cg:
    cg.gpurr_cg_start()
for _ in range(warmup):
    step()
if cg:
    cg.gpurr_cg_toggle()
times = []
for _ in range(steps):
    t = time.perf_counter()
    step()
    times.append(time.perf_counter() - t)
if cg:
    cg.gpurr_cg_toggle()
times.sort()
print("median", times[len(times) // 2])
"""


def run(cmd, env):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"a loop failed:\n{r.stderr}")
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--callgrind-steps", type=int, default=5)
    p.add_argument("--no-callgrind", action="store_true")
    p.add_argument("--loops", default="mlp,cnn")
    p.add_argument("--python", default=sys.executable, help="a Python with PyTorch (default: this one)")
    a = p.parse_args()
    build = os.path.abspath(a.build)
    out = tempfile.mkdtemp(prefix="gpurr-layer-cost-")
    layer = dict(os.environ, PYTHONPATH=os.path.join(build, "share", "gpurr", "python"),
                 CUDA_INJECTION64_PATH=os.path.join(build, "lib", "libgpurr_recorder.so"),
                 GPURR_TORCH_OBSERVER=os.path.join(build, "lib", "libgpurr_torch.so"),
                 GPURR_OUTPUT=os.path.join(out, "unused.gpurr"))  # no CUDA call: nothing is written
    plain = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CUDA_INJECTION64_PATH", "GPURR_OUTPUT")}
    variants = {"plain": plain, "layer": layer}
    toggle = os.path.join(build, "bench", "libgpurr_callgrind_toggle.so")
    callgrind = not a.no_callgrind and os.path.exists(toggle) and subprocess.run(
        ["valgrind", "--version"], capture_output=True).returncode == 0
    python = a.python
    print(f"{'loop':5} {'plain ms':>9} {'layer ms':>9} {'us/launch-eq':>13} {'goal':>5}"
          f" {'plain Minstr':>13} {'layer Minstr':>13} {'added':>7} {'goal':>5} {'kinstr/launch-eq':>17}")
    for name in a.loops.split(","):
        medians = {v: [] for v in variants}
        for _ in range(a.rounds):
            for v, env in variants.items():
                r = run([python, "-c", LOOP, HERE, name, str(a.warmup), str(a.steps), ""], env)
                medians[v].append(float(r.stdout.split()[-1]))
        t = {v: statistics.median(m) for v, m in medians.items()}
        per_launch = (t["layer"] - t["plain"]) / LAUNCHES[name] * 1e6
        line = (f"{name:5} {t['plain'] * 1e3:9.3f} {t['layer'] * 1e3:9.3f} {per_launch:13.2f} "
                f"{'met' if per_launch <= TIME_GOAL_US else 'over':>5}")
        if callgrind:
            counts = {}
            for v, env in variants.items():
                r = run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", "--instr-atstart=no",
                         "--collect-atstart=no", python, "-c", LOOP, HERE, name, str(a.warmup),
                         str(a.callgrind_steps), toggle], env)
                counts[v] = int(re.search(r"Collected : (\d+)", r.stderr).group(1)) / a.callgrind_steps
            added = counts["layer"] / counts["plain"] - 1
            per_launch_instructions = (counts["layer"] - counts["plain"]) / LAUNCHES[name] / 1e3
            line += (f" {counts['plain'] / 1e6:13.3f} {counts['layer'] / 1e6:13.3f} {added * 100:6.1f}%"
                     f" {'met' if added <= INSTRUCTIONS_GOAL else 'over':>5} {per_launch_instructions:17.2f}")
        else:
            line += "  (no callgrind: instructions not counted)"
        print(line, flush=True)


if __name__ == "__main__":
    main()
