#!/usr/bin/env python3
"""torch_probe.py MODE: the GPU probes that need PyTorch (README.md).

Runs with CUDA_INJECTION64_PATH naming libprobe_subscriber.so (run_probes.sh
sets it): the driver loads the subscriber at the first cuInit, and this
script reaches the same copy through ctypes to tag each piece of work with a
"source" and to read what the subscriber saw. Each answer is one line
`PROBE <id> <answer> (<detail>)`.

Modes:
  launches    P1.6, P2.2 and P2.6 for PyTorch, cuBLAS, cuDNN and Triton launches
  alloc NAME  P4.1 (and P4.4 for NAME=default): the driver calls of PyTorch's
              allocators under the PYTORCH_CUDA_ALLOC_CONF set by the caller
  early-init  P1.7: cuInit before `import torch`, then libcupti copies mapped
  graph-blocks  P4.8: whether the caching allocator's trace (the events
              gpurr's PyTorch layer follows) holds, as live blocks, the
              outputs a CUDA graph writes when replayed (torch.cuda.graph,
              torch.compile mode="reduce-overhead"); needs no subscriber
"""
import ctypes
import os
import sys

MEMORY_PREFIXES = ("cuMem", "cuIpc", "cuPointer", "cuDevicePrimaryCtx", "cuCtxCreate", "cuStreamCreate", "cuEventCreate")


def answer(pid, text):
    print(f"PROBE {pid} {text}", flush=True)


def detail(text):
    print(f"  {text}", flush=True)


class Subscriber:
    def __init__(self):
        path = os.environ.get("CUDA_INJECTION64_PATH")
        if not path:
            sys.exit("error: CUDA_INJECTION64_PATH must name libprobe_subscriber.so")
        self.lib = ctypes.CDLL(path)
        self.lib.probe_report.restype = ctypes.c_char_p
        self.lib.probe_injected.restype = ctypes.c_int

    def source(self, name):
        self.lib.probe_set_source(name.encode())

    def action(self, names):
        self.lib.probe_set_action(names.encode())

    def lines(self):
        return self.lib.probe_report().decode(errors="replace").splitlines()

    def rows(self, kind, source=None):
        for line in self.lines():
            w = line.split()
            if len(w) >= 2 and w[0] == kind and (source is None or w[1] == source):
                yield w

    def cupti_line(self):
        return next((l for l in self.lines() if l.startswith("cupti ")), "cupti none")


def field(line, key):
    for w in line.split():
        if w.startswith(key + "="):
            return w[len(key) + 1:]
    return ""


def shape(sub, source):
    kinds, shapes = set(), []
    for w in sub.rows("launch", source):
        s = w[2]
        kinds.add("driver-only" if s.startswith("drv:") else "runtime+nested-driver" if ">drv:" in s else "runtime-only")
        shapes.append(f"{s}={w[3]}")
    if not kinds:
        return "no-launch-callback"
    return ",".join(sorted(kinds)) + " (" + " ".join(shapes) + ")"


def cupti_answer(sub, pid):
    line = sub.cupti_line()
    path, ckpt = field(line, "path"), field(line, "checkpoint")
    beside = ckpt not in ("", "none") and os.path.dirname(ckpt) == os.path.dirname(path)
    where = "torch-wheel" if "site-packages" in path or "dist-packages" in path else "toolkit-or-system"
    answer(pid, f"libcupti={path} ({where}) found-by={field(line, 'how')} version={field(line, 'version')} "
                f"libcheckpoint={ckpt or 'none'} beside={'yes' if beside else 'no'}")


def injected():
    import torch
    torch.cuda.init()
    sub = Subscriber()
    if sub.lib.probe_injected() == 0:
        sys.exit("error: the driver did not load the subscriber (CUDA_INJECTION64_PATH)")
    return torch, sub


def mode_launches():
    torch, sub = injected()
    detail(f"torch {torch.__version__} CUDA {torch.version.cuda} cuDNN {torch.backends.cudnn.version()}")
    sub.action("kinds")
    dev = "cuda"

    def run(source, fn, warmup=True):
        if warmup:
            sub.source(source + ":warmup")
            fn()
            torch.cuda.synchronize()
        sub.source(source)
        fn()
        torch.cuda.synchronize()
        sub.source("idle")

    x = torch.ones(1 << 20, device=dev)
    run("torch-elementwise", lambda: x.mul(2).add_(1))
    a = torch.randn(256, 256, device=dev)
    run("torch-matmul-cublas", lambda: a @ a)
    run("torch-matmul-cublas-fp16", lambda: a.half() @ a.half())
    img = torch.randn(2, 3, 32, 32, device=dev)
    w = torch.randn(8, 3, 3, 3, device=dev)
    torch.backends.cudnn.enabled = True
    run("torch-conv-cudnn", lambda: torch.nn.functional.conv2d(img, w, padding=1))
    sources = ["torch-elementwise", "torch-matmul-cublas", "torch-matmul-cublas-fp16", "torch-conv-cudnn"]
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

        out = torch.empty_like(x)
        n = x.numel()
        run("triton", lambda: add_kernel[(triton.cdiv(n, 1024),)](x, x, out, n, BLOCK=1024))
        sources.append("triton")
        detail(f"triton {triton.__version__}")
    except Exception as e:  # no Triton, or it cannot compile here
        answer("P2.2/triton", f"not-run ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    sub.action("")

    cupti_answer(sub, "P1.6/torch")
    for s in sources:
        answer(f"P2.2/{s}", shape(sub, s))
    seen = set()
    for line in sub.lines():
        if not line.startswith("kinds "):
            continue
        w = line.split()
        src, via = w[1], field(line, "via")
        if src.endswith(":warmup") and (src[:-7], via) in seen:
            continue
        key = (src.replace(":warmup", ""), via)
        if key in seen:
            continue
        seen.add(key)
        kind = "CUkernel" if field(line, "lib") == "CUDA_SUCCESS" else "CUfunction"
        answer(f"P2.6/{key[0]}/{via}", f"handle={kind} cuFuncGetName={field(line, 'funcname')} "
                                       f"cuKernelGetName={field(line, 'kernelname')} "
                                       f"cuFuncGetParamInfo={field(line, 'funcparams')} "
                                       f"cuKernelGetParamInfo={field(line, 'kernelparams')}")


def memory_calls(sub, source):
    out, other = [], 0
    for w in sub.rows("call", source):
        name = w[2]
        if name.startswith("drv:") and name[4:].startswith(MEMORY_PREFIXES):
            out.append(name[4:] + ("" if w[3] == "1" else "x" + w[3]))
        elif name.startswith("drv:"):
            other += int(w[3])
    return (",".join(out) or "no-memory-driver-callback") + f" (+{other} other driver calls)"


def mode_alloc(config):
    torch, sub = injected()
    detail(f"PYTORCH_CUDA_ALLOC_CONF={os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '(unset)')}")
    steps = []

    def step(name, fn):
        sub.source(name)
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as e:
            detail(f"{name}: {type(e).__name__}: {e}")
        sub.source("idle")
        steps.append(name)

    keep = []
    step("first-small-tensor", lambda: keep.append(torch.zeros(1, device="cuda")))
    step("tensor-4MiB", lambda: keep.append(torch.empty(1 << 20, device="cuda")))
    step("tensor-256MiB", lambda: keep.append(torch.empty(64 << 20, device="cuda")))
    step("free-and-empty_cache", lambda: (keep.clear(), torch.cuda.empty_cache()))
    step("tensor-256MiB-again", lambda: keep.append(torch.empty(64 << 20, device="cuda")))
    if config == "default":
        step("pin_memory", lambda: keep.append(torch.empty(1 << 20).pin_memory()))
        host = torch.empty(1 << 20)

        def register():
            cudart = torch.cuda.cudart()
            r = cudart.cudaHostRegister(host.data_ptr(), host.numel() * host.element_size(), 0)
            detail(f"cudaHostRegister -> {r}")
            cudart.cudaHostUnregister(host.data_ptr())

        step("cudaHostRegister", register)
    for name in steps:
        pid = "P4.4" if name in ("pin_memory", "cudaHostRegister") else "P4.1"
        answer(f"{pid}/torch-{config}/{name}", memory_calls(sub, name))
    runtime = {}
    for name in steps:
        for w in sub.rows("call", name):
            if w[2].startswith("rt:") and any(k in w[2] for k in ("Malloc", "Free", "Host", "Mem")):
                runtime.setdefault(name, []).append(f"{w[2][3:]}x{w[3]}")
    for name, calls in runtime.items():
        detail(f"{name}: runtime {','.join(calls)}")


def mode_early_init():
    cuda = ctypes.CDLL("libcuda.so.1")
    rc = cuda.cuInit(0)
    detail(f"cuInit before import torch -> {rc}")
    sub = Subscriber()
    before = sub.cupti_line()
    try:
        import torch
        t = torch.zeros(1, device="cuda") + 1
        torch.cuda.synchronize()
        ok = f"import torch and a CUDA op: ok ({t.item()})"
    except Exception as e:
        ok = f"import torch or a CUDA op failed: {type(e).__name__}: {e}"
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            if "libcupti" in line:
                paths.add(os.path.realpath(line.split()[-1]))
    detail(f"subscriber: {before}")
    for p in sorted(paths):
        detail(f"mapped: {p}")
    answer("P1.7", f"{'one-copy' if len(paths) <= 1 else 'two-copies'} ({ok}; libcupti files mapped: {len(paths)}; "
                   f"the subscriber loaded {field(before, 'path')} by {field(before, 'how')})")


def trace_state(torch):
    """Live blocks and segments, by replaying the allocator's trace as
    gpurr's layer does (a free request ends a block); the snapshot's bytes."""
    snap = torch.cuda.memory._snapshot()
    blocks, segments = {}, {}
    for t in (snap.get("device_traces") or [[]])[0]:
        action, addr, size = t.get("action"), t.get("addr", 0), t.get("size", 0)
        if action == "alloc":
            blocks[addr] = size
        elif action in ("free_requested", "free_completed"):
            blocks.pop(addr, None)
        elif action in ("segment_alloc", "segment_map"):
            segments[addr] = size
        elif action in ("segment_free", "segment_unmap"):
            segments.pop(addr, None)
    reserved = sum(seg.get("total_size", 0) for seg in snap.get("segments", []))
    return blocks, segments, reserved


def inside(spans, pointer):
    return any(a <= pointer < a + n for a, n in spans.items())


def graph_answer(torch, pid, outputs, dead):
    """outputs: pointers the graph wrote that the program holds; dead: ones
    it wrote into blocks the program freed (intermediates)."""
    blocks, segments, reserved = trace_state(torch)
    live = sum(blocks.values())
    answer(pid, f"outputs-in-live-blocks={'yes' if all(inside(blocks, p) for p in outputs) else 'no'} "
                f"outputs-in-traced-segments={'yes' if all(inside(segments, p) for p in outputs) else 'no'} "
                f"intermediates-in-live-blocks={'yes' if dead and all(inside(blocks, p) for p in dead) else 'no'} "
                f"(live blocks {live / 2**20:.1f} MiB of {reserved / 2**20:.1f} MiB reserved, {len(blocks)} blocks; "
                f"{len(outputs)} outputs, {len(dead)} intermediates)")


def mode_graph_blocks():
    import torch
    torch.cuda.memory._record_memory_history(enabled="all", stacks="python", max_entries=1_000_000)
    x = torch.randn(1024, 1024, device="cuda")
    w = torch.randn(1024, 1024, device="cuda")
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                torch.relu(x @ w) + 1
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            mid = x @ w
            dead = [mid.data_ptr()]
            out = torch.relu(mid) + 1
            del mid
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        graph_answer(torch, "P4.8/cuda-graph", [out.data_ptr()], dead)
    except Exception as e:
        answer("P4.8/cuda-graph", f"error ({type(e).__name__}: {e})")
    try:
        @torch.compile(mode="reduce-overhead")
        def f(a, b):
            return torch.relu(a @ b) + 1

        for _ in range(5):  # warm-up, recording, then replays of the graph
            r = f(x, w)
        torch.cuda.synchronize()
        graph_answer(torch, "P4.8/reduce-overhead", [r.data_ptr()], [])
    except Exception as e:
        answer("P4.8/reduce-overhead", f"error ({type(e).__name__}: {e})")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    mode = sys.argv[1]
    if mode == "launches":
        mode_launches()
    elif mode == "alloc":
        mode_alloc(sys.argv[2] if len(sys.argv) > 2 else "default")
    elif mode == "early-init":
        mode_early_init()
    elif mode == "graph-blocks":
        mode_graph_blocks()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
