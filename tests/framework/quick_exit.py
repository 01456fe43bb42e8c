# A PyTorch CPU loop of 5 steps that leaves what an ending program must keep
# or do: a file opened at module level and never closed (log.txt), an atexit
# handler (marker `atexit`), C stdio output without a newline, and an object
# whose __del__, run by the interpreter's teardown, leaves the marker
# `teardown`. argv[1]: the directory for these files. QUICK_EXIT_FINALLY=N:
# the loop's `finally` ends the program with sys.exit(N).
# QUICK_EXIT_INTERRUPT=N: Ctrl-C after step N (a KeyboardInterrupt raised
# there, as Python raises it for SIGINT). QUICK_EXIT_TERM=N: SIGTERM after
# step N, which Python does not handle (the process waits for its end).
# QUICK_EXIT_EVAL=1: after each step, an evaluation (the model in eval mode,
# under torch.no_grad()) that logs `eval N`, as trainers validate.
# It also logs into a gzip file never closed (log.gz). QUICK_EXIT_FINAL=1:
# the `finally` logs a final loss, a training-mode call of the model.
# QUICK_EXIT_GAN=1: a second optimizer steps a second model after the
# first's step, before the step's log line. QUICK_EXIT_STOP_FILE=PATH:
# after step 2, the program writes 0 into PATH (a step passed already).
# QUICK_EXIT_THREAD=1: each step trains on a thread of its own, joined.
import atexit
import ctypes
import gzip
import os
import signal
import sys
import threading
import time

import torch
from torch import nn

if os.environ.get("GPURR_TEST_LAUNCHER"):
    recorder = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
    launcher = ctypes.CDLL(os.environ["GPURR_TEST_LAUNCHER"])
    launcher.gpurr_test_launch_on_ops.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    assert launcher.gpurr_test_launch_on_ops(recorder._handle, b"aten::addmm") == 0

work = sys.argv[1]
log = open(os.path.join(work, "log.txt"), "w")
gz = gzip.open(os.path.join(work, "log.gz"), "wt")


def mark(name):
    with open(os.path.join(work, name), "w") as f:
        f.write("ran\n")


class Teardown:
    """Holds what its __del__ needs: the teardown may have emptied the modules."""

    def __init__(self):
        self.path, self.open, self.write, self.close = os.path.join(work, "teardown"), os.open, os.write, os.close
        self.flags = os.O_WRONLY | os.O_CREAT

    def __del__(self):
        fd = self.open(self.path, self.flags)
        self.write(fd, b"ran\n")
        self.close(fd)


kept = Teardown()
atexit.register(mark, "atexit")
torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
second = nn.Linear(4, 1)
opt2 = torch.optim.SGD(second.parameters(), lr=0.1)
x = torch.randn(8, 4)

def train(step):
    """One training step; returns its loss."""
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    return loss


def train_on_thread(step):
    """The step on a thread of its own, joined, as some trainers run it."""
    out = []
    worker = threading.Thread(target=lambda: out.append(train(step)))
    worker.start()
    worker.join()
    if not out:  # the thread ended without its loss
        raise RuntimeError(f"step {step} did not finish")
    return out[0]


try:
    for step in range(5):
        loss = (train_on_thread if os.environ.get("QUICK_EXIT_THREAD") else train)(step)
        if os.environ.get("QUICK_EXIT_GAN"):
            opt2.zero_grad()
            second(x).square().mean().backward()
            opt2.step()
        log.write(f"step {step} loss {loss.item():.6f}\n")
        gz.write(f"step {step}\n")
        if os.environ.get("QUICK_EXIT_EVAL"):
            model.eval()
            with torch.no_grad():
                log.write(f"eval {step} {model(x).square().mean().item():.6f}\n")
            model.train()
        print(f"step {step}")
        if os.environ.get("QUICK_EXIT_STOP_FILE") and step == 2:
            with open(os.environ["QUICK_EXIT_STOP_FILE"], "w") as f:
                f.write("0\n")
        if os.environ.get("QUICK_EXIT_INTERRUPT") == str(step):
            raise KeyboardInterrupt
        if os.environ.get("QUICK_EXIT_TERM") == str(step):
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
finally:
    if os.environ.get("QUICK_EXIT_FINAL"):
        log.write(f"final {model(x).square().mean().item():.6f}\n")
    libc = ctypes.CDLL(None)
    libc.printf(b"from C stdio")  # no newline: kept in C's buffer when stdout is a pipe
    if os.environ.get("QUICK_EXIT_FINALLY"):
        sys.exit(int(os.environ["QUICK_EXIT_FINALLY"]))
