# A training loop whose step also runs a kernel Inductor compiled, autotuned
# by PyTorch's own CachingAutotuner at its first call in step 3 (not with
# AUTOTUNED_WARM=1: the choice found in Inductor's cache). With no GPU to
# time on, the autotuner's `bench` is the one part replaced: it "launches" the candidate
# through the fake recorder (gpurr_test_launch) and gives it a time; the
# rest (autotune_to_one_config, benchmark_all_configs) is torch's. It also
# imports the module of Inductor's compile-time autotuner, which the layer
# wraps too (or warns). Prints the losses and the configuration chosen.
import ctypes
import os

import torch
import torch._inductor.select_algorithm  # noqa: F401  (the layer wraps its autotuner too, or warns)
from torch import nn
from torch._inductor.runtime import triton_heuristics
from torch._inductor.runtime.coordinate_descent_tuner import CoordescTuner
from torch._inductor.runtime.triton_compat import Config

launch = lambda name: None  # noqa: E731  (not recorded: nothing to launch)
if os.environ.get("GPURR_TEST_LAUNCHER"):
    recorder = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
    recorder.gpurr_test_launch.argtypes = [ctypes.c_char_p]
    launch = lambda name: recorder.gpurr_test_launch(name)  # noqa: E731
    launcher = ctypes.CDLL(os.environ["GPURR_TEST_LAUNCHER"])
    launcher.gpurr_test_launch_on_ops.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    assert launcher.gpurr_test_launch_on_ops(recorder._handle, b"aten::addmm,aten::mm") == 0

KERNEL = b"triton_poi_fused_add_0"


def triton_poi_fused_add_0():
    """The generated kernel's Triton function (only its name is used)."""


class Launcher:
    """A compiled candidate, as the tuner keeps it (its config), with the time
    the fake benchmark gives it."""

    def __init__(self, xblock, ms):
        self.config = Config({"XBLOCK": xblock}, num_warps=4, num_stages=1)
        self.n_regs = self.n_spills = self.shared = 0
        self.ms = ms


def compiled_kernel():
    """The tuner of one generated kernel, as Inductor's generated code holds
    it, with three candidate configurations."""
    tuner = triton_heuristics.CachingAutotuner.__new__(triton_heuristics.CachingAutotuner)
    tuner.fn = triton_poi_fused_add_0
    tuner.inductor_meta = {"kernel_name": KERNEL.decode()}
    tuner.compile_id = None
    tuner.is_backward = False
    tuner.precompile_time_taken_ns = 0
    tuner.save_cache_hook = None
    tuner.reset_to_zero_arg_names = []
    tuner.coordesc_tuner = CoordescTuner(size_hints={"x": 1024})
    tuner.launchers = [Launcher(x, ms) for x, ms in ((128, 0.3), (256, 0.1), (512, 0.2))]

    def bench(launcher, *args, **kwargs):
        launch(KERNEL)
        return launcher.ms

    tuner.bench = bench
    return tuner


tuner = compiled_kernel()
if os.environ.get("AUTOTUNED_WARM") == "1":
    tuner.launchers = tuner.launchers[1:2]  # the cache's choice
torch.manual_seed(0)
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
for step in range(6):
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    if step == 3 and len(tuner.launchers) > 1:
        tuner.autotune_to_one_config()  # at:autotune
    launch(KERNEL)
    opt.step()
    print(f"step {step} loss {loss.item():.6f}")
print("chose", tuner.launchers[0].config.kwargs)
