# A CPU program that profiles itself, for gpurr's PyTorch layer: a
# torch.profiler session of CPU activity only (which gpurr's recording leaves
# whole: no warning), then, with PyTorch made to believe a GPU is there,
# three that ask Kineto for CUDA activity (gpurr holds CUPTI, so on a GPU
# they would get no kernel events: one warning for all three). Writes
# "session N" to stderr before each session, so the checker can tell which
# one the warning came with; prints what each profiler counted.
import sys

import torch
import torch.autograd.profiler as autograd_profiler
from torch.profiler import ProfilerActivity, profile


def work():
    return (torch.ones(16, 16) @ torch.ones(16, 16)).sum().item()


def session(n, make):
    print(f"session {n}", file=sys.stderr, flush=True)
    with make() as p:
        value = work()
    events = p.events() if hasattr(p, "events") else p.function_events
    print(f"session {n}: {value} {'events' if len(events) > 0 else 'no events'}")


session(1, lambda: profile(activities=[ProfilerActivity.CPU]))

# A GPU as far as the profiler's Python can tell: Kineto then asks for CUDA
# activity (which it finds no device for, and says so).
torch.cuda.is_available = lambda: True
torch.cuda.synchronize = lambda device=None: None
torch.autograd._supported_activities = lambda: {ProfilerActivity.CPU, ProfilerActivity.CUDA}
autograd_profiler._supported_activities = torch.autograd._supported_activities
session(2, lambda: profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]))
session(3, lambda: profile())  # the default activities: CUDA where supported
session(4, lambda: autograd_profiler.profile(use_device="cuda", use_kineto=True))
