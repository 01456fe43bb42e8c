"""extra_relu.py: a small network trained for four steps; with EXTRA=1 in
the environment (the command line stays the same, so that the runs
compare), step 1 runs one relu more, on the first relu's output, whose
result the next layer then reads where the other run's reads the first
relu's; with EMPTY=1, every step adds the relu of a torch.empty tensor,
times 0 (a read of uninitialised memory that changes no result). Prints
each step's loss."""
import os

import torch
from torch import nn

EXTRA = os.environ.get("EXTRA") == "1"
EMPTY = os.environ.get("EMPTY") == "1"
torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.out = nn.Linear(8, 1)

    def forward(self, x, step):
        h = torch.relu(self.lin(x))
        if EXTRA and step == 1:
            h = torch.relu(h)  # at:extra
        if EMPTY:
            h = h + torch.relu(torch.empty(16, 8)) * 0  # at:empty
        return self.out(h)


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
data = torch.randn(64, 8)
for step in range(4):
    opt.zero_grad()
    loss = net(data[16 * step:16 * (step + 1)], step).square().mean()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f}")
