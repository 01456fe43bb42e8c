"""What the PyTorch layer's torch.distributed wrappers (gpurr_torch_collectives.py)
tell the recorder of CUDA tensors, checked without a GPU: the wrappers run
over stand-ins (a tensor that says it is on CUDA, process groups whose backend
for CUDA is gloo or NCCL, a recorder that keeps its calls), the real module
otherwise. On a gloo group, what a call sends is hashed on the current stream
before it and what a synchronous call receives after it; an asynchronous
call's receipt is listed without a digest; a failed call, or one the
recorder refused, gives its handles back; an NCCL group's CUDA tensors are
left to the NCCL wrappers."""
import argparse
import ctypes
import sys
import types

p = argparse.ArgumentParser()
p.add_argument("--python-dir", required=True)
args = p.parse_args()
sys.path.insert(0, args.python_dir)

import torch  # noqa: E402

import gpurr_torch_collectives as layer  # noqa: E402

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


class CudaTensor:
    """A CPU tensor's bytes, saying it is on CUDA device 0."""

    is_cuda, is_cpu = True, False
    device = torch.device("cuda", 0)

    def __init__(self, n):
        self.t = torch.arange(n, dtype=torch.float32)
        self.dtype = self.t.dtype

    def numel(self):
        return self.t.numel()

    def element_size(self):
        return self.t.element_size()

    def data_ptr(self):
        return self.t.data_ptr()

    def is_contiguous(self):
        return True


class Recorder:
    """The recorder's exports the wrappers call, keeping each call."""

    def __init__(self, refuse=False):
        self.calls = []
        self.handles = 0
        self.refuse = refuse

    def gpurr_framework_hash_device(self, stream, pairs, count):
        self.handles += 1
        self.calls.append(("device", stream, list(pairs[:2 * count]), self.handles))
        return self.handles

    def gpurr_framework_hash_drop(self, handle):
        self.calls.append(("drop", handle))

    def gpurr_framework_hash_host(self, data, size):
        return 0x77

    def gpurr_framework_collective(self, *a):
        if self.refuse:
            raise ctypes.ArgumentError("refused")
        inputs, n_in, outputs, n_out = a[11], a[12], a[13], a[14]
        self.calls.append(("collective", list(inputs[:3 * n_in]), list(outputs[:3 * n_out]), a[15], a[16]))


def group(backend):
    return types.SimpleNamespace(group_name="0", _get_sequence_number_for_group=lambda: 3,
                                 _get_backend=lambda device: types.SimpleNamespace(name=lambda: backend))


SUM = types.SimpleNamespace(name="SUM")


def all_reduce(tensor, op=SUM, group=None, async_op=False):
    if getattr(tensor, "fail", False):
        raise RuntimeError("the backend failed")
    return "work"


def run(backend, tensor, async_op=False, refuse=False):
    g = group(backend)
    dist = types.SimpleNamespace(get_rank=lambda group=None: 0, get_world_size=lambda group=None: 2,
                                 get_process_group_ranks=lambda group: [0, 1],
                                 distributed_c10d=types.SimpleNamespace(_get_default_group=lambda: g))
    layer._recorder = recorder = Recorder(refuse)
    layer._skipped = ()
    wrapped = layer._wrap(dist, "all_reduce", all_reduce, layer._SPECS["all_reduce"])
    try:
        wrapped(tensor, group=g, async_op=async_op)
    except RuntimeError:
        pass
    return recorder.calls


torch.cuda.current_stream = lambda device=None: types.SimpleNamespace(cuda_stream=0xABC)
x = CudaTensor(16)
span = [x.data_ptr(), 64]

calls = run("gloo", x)
check([c[0] for c in calls] == ["device", "device", "collective"], f"gloo, synchronous: {calls}")
if len(calls) == 3:
    check(calls[0][1] == 0xABC and calls[0][2] == span, f"sent: hashed on the current stream {calls[0]}")
    check(calls[2][1:] == ([], [], 1, 2), f"sent and received as device handles, no host triple: {calls[2]}")

calls = run("gloo", x, async_op=True)
check([c[0] for c in calls] == ["device", "collective"], f"gloo, asynchronous: {calls}")
if len(calls) == 2:
    check(calls[1][1:] == ([], span + [0], 1, 0), f"received listed without a digest: {calls[1]}")

x.fail = True
calls = run("gloo", x)
check([c[0] for c in calls] == ["device", "drop"] and calls[1][1] == calls[0][3], f"failed call: {calls}")
del x.fail

calls = run("gloo", x, refuse=True)
check([c[0] for c in calls] == ["device", "device", "drop", "drop"] and {calls[2][1], calls[3][1]} == {1, 2},
      f"a call the recorder refused gives both handles back: {calls}")

calls = run("nccl", x)
check(calls == [("collective", [], [], 0, 0)], f"NCCL group: CUDA tensors left to the NCCL wrappers: {calls}")

cpu = torch.ones(4)
calls = run("gloo", cpu)
check(calls == [("collective", [cpu.data_ptr(), 16, 0x77], [cpu.data_ptr(), 16, 0x77], 0, 0)],
      f"CPU tensor: hashed by the layer: {calls}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
