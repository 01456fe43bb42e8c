"""swapped.py: two independent matrix products of a small training step,
issued from two lines; with SWAPPED=1 in the environment (the command line
stays the same, so that the runs compare) they run in the other order, as
a program iterating over a set or a dict whose order changed would. Their
results are the same either way. Prints them."""
import os

import torch

torch.manual_seed(0)
a, b = torch.randn(4, 4), torch.randn(8, 8)
wa, wb = torch.randn(4, 4), torch.randn(8, 8)
torch.mm(a, wa), torch.mm(b, wb)  # every buffer used once before


def first():
    return torch.mm(a, wa)  # at:first


def second():
    return torch.mm(b, wb)  # at:second


if os.environ.get("SWAPPED") == "1":
    y = second()
    x = first()
else:
    x = first()
    y = second()
print(float(x.sum()).hex(), float(y.sum()).hex())
