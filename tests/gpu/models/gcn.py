#!/usr/bin/env python3
"""A two-layer graph convolutional network from torch-geometric (GCNConv)
trained for node classification on a synthetic graph of 20,000 nodes and
400,000 edges. GCNConv normalises by node degree and sums each node's
messages with a scatter over the edges' targets: on a GPU that sum is
accumulated with atomic adds. Default mode leaves what a user leaves:
nothing but torch.manual_seed (common.py).

Exits 77 (skipped) without PyTorch, torch-geometric or the device.
"""
import common

args = common.arguments(__doc__.split("\n\n")[0])
torch, device = common.setup(args)
pyg_nn = common.need("torch_geometric.nn")

NODES, EDGES, FEATURES, CLASSES = 20_000, 400_000, 64, 10


class GCN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = pyg_nn.GCNConv(FEATURES, 128)
        self.conv2 = pyg_nn.GCNConv(128, CLASSES)

    def forward(self, x, edge_index):
        h = torch.relu(self.conv1(x, edge_index))
        return self.conv2(h, edge_index)


g = common.generator(torch)
x = torch.randn(NODES, FEATURES, generator=g).to(device)
edge_index = torch.randint(0, NODES, (2, EDGES), generator=g).to(device)
labels = torch.randint(0, CLASSES, (NODES,), generator=g).to(device)
model = GCN().to(device)
model.train()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

steps = common.Steps(torch, device)
for i in range(args.steps):
    with steps.timed(i):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x, edge_index), labels)
        loss.backward()
        optimizer.step()
    steps.done(i, loss, model)
steps.final()
