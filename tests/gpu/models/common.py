"""What the model scripts share: their arguments, the two modes, the
synthetic data's generator, and what every script prints.

Each script trains a model built by its library from a config (random
initialisation, nothing downloaded) on synthetic data for a few steps, in
one of two modes:
  deterministic  seeds everywhere, torch.use_deterministic_algorithms(True)
                 (warn_only: an op without a deterministic path warns on
                 stderr instead of stopping the run, so that the recordings
                 show what it does), CUBLAS_WORKSPACE_CONFIG=:4096:8,
                 cudnn.benchmark off, a seeded loader;
  default        what a user writes: torch.manual_seed for the weights and
                 nothing more (each script says what else it leaves as is).

stdout holds only what must be equal between runs that compute the same
bits: after every step `step N loss <float.hex> params <digest>` (the digest
of every parameter's bytes), and at the end `final loss ... params ...`.
stderr gets `gpurr-models: step N ms <milliseconds>` per step (the step
alone, between two synchronisations: the digest is outside it), which
check_models.py reads for the step time.
"""
import argparse
import contextlib
import hashlib
import os
import random
import shutil
import sys
import time


def arguments(description, steps=4, extra=None):
    """The common arguments; extra(parser) adds a script's own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="cpu: the script itself without a GPU (the CPU half of the suite)")
    p.add_argument("--mode", default="default", choices=["deterministic", "default"])
    p.add_argument("--steps", type=int, default=steps)
    if extra:
        extra(p)
    return p.parse_args()


def setup(args):
    """PyTorch set up for args.mode, or exit 77 (skipped) where PyTorch or
    the device is missing. Returns (torch, device).

    GPURR_MODELS_FRESH_CACHE (set by check_models.py, a folder per case):
    Inductor's and Triton's caches go in its subfolder for args.mode, which
    this process empties once it holds the GPU, so that every run of a
    compiled script compiles (and launches) as the first did. Each process
    has that folder to itself while it runs:
      - the case's two modes run at the same time (check_models.py's lanes):
        a folder each;
      - runs of one mode run one after another, except those gpurr bisect
        starts while the run before records: they wait in their first CUDA
        call (cuInit: torch.cuda.is_available() below, or torch.cuda.init())
        until it has ended, and only then empty the folder, so none of them
        reuses what the run before compiled.
    Not a folder per process (a pid in the path): the cache variables are in
    the environment the recorder keeps, and two runs' traces that differ
    there make `gpurr diff` name the environment as the cause of any
    divergence."""
    fresh = os.environ.get("GPURR_MODELS_FRESH_CACHE")
    if fresh:
        fresh = os.path.join(fresh, args.mode)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(fresh, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(fresh, "triton")
    if args.mode == "deterministic":
        # Before cuBLAS starts.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    try:
        import torch
    except ImportError as e:
        print(f"no PyTorch ({e}): skipped")
        sys.exit(77)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("PyTorch sees no GPU: skipped")
        sys.exit(77)
    if fresh:
        if args.device == "cuda":
            torch.cuda.init()  # cuInit, where a run bisect started early waits for its turn
        shutil.rmtree(fresh, ignore_errors=True)
        os.makedirs(fresh, exist_ok=True)
    torch.manual_seed(0)
    if args.mode == "deterministic":
        random.seed(0)
        try:
            import numpy
            numpy.random.seed(0)
        except ImportError:
            pass
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    return torch, torch.device(args.device)


def need(module, why=""):
    """Imports a model library, or exits 77 (skipped) naming it."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        print(f"no {module} ({e}){': ' + why if why else ''}: skipped")
        sys.exit(77)


def autocast(torch, device, dtype):
    """torch.autocast to `dtype`, except bfloat16 on a CPU that oneDNN cannot
    run it natively on (no AVX-512): there its convolutions and matrix
    products fall back to reference code, and a step of ResNet-50 takes over
    a minute, so the CPU half computes in float32 instead."""
    native = getattr(getattr(torch.ops, "mkldnn", None), "_is_mkldnn_bf16_supported", lambda: True)
    enabled = device.type != "cpu" or dtype != torch.bfloat16 or native()
    return torch.autocast(device.type, dtype=dtype, enabled=enabled)


def generator(torch, seed=1):
    """The synthetic data's own generator, on the CPU: the same data in every
    mode and on every device."""
    return torch.Generator().manual_seed(seed)


def digest(torch, model):
    """A digest of every parameter's bytes, in named_parameters order."""
    with torch.no_grad():
        flat = torch.cat([p.detach().reshape(-1).view(torch.uint8) for p in model.parameters()])
        return hashlib.blake2b(flat.cpu().numpy().tobytes(), digest_size=8).hexdigest()


class Steps:
    """Times each training step and prints its line:

        steps = Steps(torch, device)
        for i in range(n):
            with steps.timed(i):
                loss = ...
            steps.done(i, loss, model)

    (begin() and end(i) time a step whose start and end are two callbacks.)
    """

    def __init__(self, torch, device):
        self.torch = torch
        self.cuda = device.type == "cuda"
        self.start = None
        self.last = None

    def begin(self):
        if self.cuda:
            self.torch.cuda.synchronize()
        self.start = time.perf_counter()

    def end(self, i):
        if self.cuda:
            self.torch.cuda.synchronize()
        ms = (time.perf_counter() - self.start) * 1e3
        sys.stderr.write(f"gpurr-models: step {i} ms {ms:.3f}\n")

    @contextlib.contextmanager
    def timed(self, i):
        self.begin()
        yield
        self.end(i)

    def done(self, i, loss, model):
        """Prints step i's line: the loss to the last bit, the parameters'
        digest."""
        value = float(loss.detach().float().item())
        self.last = (value, digest(self.torch, model))
        print(f"step {i} loss {value.hex()} params {self.last[1]}", flush=True)

    def final(self):
        """The last step's loss and digest, once more."""
        if self.last is not None:
            print(f"final loss {self.last[0].hex()} params {self.last[1]}", flush=True)
