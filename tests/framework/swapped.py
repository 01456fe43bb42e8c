"""swapped.py: two independent layers of a small model (Pair.first and
Pair.second), each applied to its own input; with SWAPPED=1 in the
environment (the command line stays the same, so that the runs compare)
they run in the other order, as a program iterating over a set or a dict
whose order changed would; with SWAPPED=2, written out in the other order,
each layer's line moving with it, as an edit swapping two statements does.
Their results are the same either way. Prints them."""
import os

import torch
from torch import nn

SWAPPED = os.environ.get("SWAPPED", "")


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.second = nn.Linear(8, 8)

    def one(self, a):
        return self.first(a)  # at:first

    def two(self, b):
        return self.second(b)  # at:second

    def forward(self, a, b, order=""):
        if order == "1":
            y = self.two(b)
            x = self.one(a)
        elif order == "2":
            y = self.second(b)
            x = self.first(a)
        else:
            x = self.one(a)
            y = self.two(b)
        return x, y


torch.manual_seed(0)
pair = Pair()
a, b = torch.randn(4, 4), torch.randn(8, 8)
pair(a, b)  # every buffer used once before
x, y = pair(a, b, SWAPPED)
print(float(x.sum()).hex(), float(y.sum()).hex())
