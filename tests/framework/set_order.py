"""set_order.py: three layers of one shape, trained for three steps with a
penalty on their weights summed in the order a set of their names iterates,
which PYTHONHASHSEED decides: each run's first visit may go to another
layer. The same operations run on the same weights, in another order; the
penalty is the same sum either way to the last bit here (whole numbers).
Prints the order, the losses as hex floats and a digest of the weights."""
import hashlib

import torch
from torch import nn

torch.manual_seed(0)
layers = nn.ModuleDict({name: nn.Linear(8, 8) for name in ("alpha", "beta", "gamma")})
with torch.no_grad():
    for p in layers.parameters():
        p.copy_(torch.randint(-4, 5, p.shape).float())
opt = torch.optim.SGD(layers.parameters(), lr=0.0)
xs = torch.randint(-2, 3, (3, 4, 8)).float()
order = list(set(layers))
print("order", " ".join(order))
for step in range(3):
    h = xs[step]
    for name in ("alpha", "beta", "gamma"):
        h = layers[name](h)
    loss = h.sum()
    for name in set(layers):  # at:penalty
        loss = loss + layers[name].weight.abs().sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step", step, float(loss.detach()).hex())
print("weights", hashlib.sha1(b"".join(p.detach().numpy().tobytes() for p in layers.parameters())).hexdigest()[:16])
