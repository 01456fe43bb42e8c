# A small CPU training loop for gpurr's PyTorch layer: an embedding read with
# index_select (whose backward is an index_add_), a Linear, two optimizer
# steps (GPURR_TEST_STEPS), a second thread running another module, a batch norm in training
# mode (which updates its running statistics though its op's schema does not
# say so), an op writing into an out= tensor and gradient hooks. Lines the checker
# looks for are marked "# at:<name>". Prints the losses (compared with a run
# without gpurr).
import ctypes
import importlib.util
import os
import sys
import threading

# Libraries check whether torch is installed before importing it.
assert importlib.util.find_spec("torch") is not None
import torch  # noqa: E402
from torch import nn  # noqa: E402

if os.environ.get("GPURR_TEST_LAUNCHER"):
    # Under the test's fake recorder: "launch a kernel" inside these ops.
    recorder = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
    launcher = ctypes.CDLL(os.environ["GPURR_TEST_LAUNCHER"])
    launcher.gpurr_test_launch_on_ops.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    ops = (b"aten::index_select,aten::index_add_,aten::addmm,aten::relu,aten::mm,aten::mul,aten::native_batch_norm,"
           b"aten::sub,aten::neg")
    assert launcher.gpurr_test_launch_on_ops(recorder._handle, ops) == 0


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(50, 8))

    def forward(self, idx):
        return self.weight.index_select(0, idx)  # at:embed


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = Embed()
        self.fc = nn.Linear(8, 4)

    def forward(self, idx):
        h = torch.relu(self.embed(idx))  # at:relu
        return self.fc(h)


class Side(nn.Module):
    def forward(self, x):
        return x * 2.0  # at:side


torch.manual_seed(0)
model = Net()
if os.environ.get("GPURR_TEST_CPU_OPERANDS"):
    # The checker finds this tensor among index_select's operands.
    print(f"weight storage {model.embed.weight.untyped_storage().data_ptr()}", file=sys.stderr)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
# Hooks, which autograd runs beside a node but outside the node's own scope:
# part of the backward pass all the same. One on a leaf (its AccumulateGrad
# node's), one on the embedding's output (index_select's node's). -(-g) is
# g, bit for bit.
model.fc.bias.register_hook(lambda g: -(-g))


def hook_output(module, args, out):
    out.register_hook(lambda g: -(-g))


model.embed.register_forward_hook(hook_output)
idx = torch.randint(0, 50, (16,))
for step in range(int(os.environ.get("GPURR_TEST_STEPS", "2"))):
    opt.zero_grad()
    loss = model(idx).square().mean()  # at:model
    loss.backward()  # at:backward
    opt.step()
    print(f"step {step} loss {loss.item():.6f}")

thread = threading.Thread(target=lambda: Side()(torch.ones(3)))
thread.start()
thread.join()

norm = nn.BatchNorm1d(4)
if os.environ.get("GPURR_TEST_CPU_OPERANDS"):
    print(f"running_mean storage {norm.running_mean.untyped_storage().data_ptr()}", file=sys.stderr)
norm(torch.randn(8, 4))
torch.sub(torch.ones(3), torch.ones(3), out=torch.empty(3))  # at:out
sys.exit(3)  # the exit code gpurr record must pass through
