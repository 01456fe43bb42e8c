# torch.compile under gpurr's PyTorch layer: prints the graph breaks dynamo
# finds in a small model (the layer's hooks must add none), then runs the
# model compiled with the aot_eager backend (aten ops, no code generation) so
# its launches show what attribution compiled regions get: a function
# compiled around a model, and a compiled module whose ops all lie in one of
# its submodules, give their launches that module's path.
import ctypes
import os

import torch
from torch import nn

if os.environ.get("GPURR_TEST_LAUNCHER"):
    recorder = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
    launcher = ctypes.CDLL(os.environ["GPURR_TEST_LAUNCHER"])
    launcher.gpurr_test_launch_on_ops.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    assert launcher.gpurr_test_launch_on_ops(recorder._handle, b"aten::addmm,aten::mm,aten::relu") == 0


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.fc(x))


model = nn.Sequential(Block(), Block())
x = torch.randn(4, 8, requires_grad=True)
explanation = torch._dynamo.explain(model)(x)
print(f"graphs {explanation.graph_count} breaks {explanation.graph_break_count}")
torch._dynamo.reset()
compiled = torch.compile(model, backend="aot_eager")
compiled(x).sum().backward()  # at:compiled


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(Block(), Block())

    def forward(self, x):
        return self.layers(x)


net = Net()


def loss_of(x):
    return net(x).sum()  # the loss reduced outside the model


torch.compile(loss_of, backend="aot_eager")(x).backward()  # at:compiled_function
torch.compile(net, backend="aot_eager")(x).sum().backward()  # at:compiled_module
