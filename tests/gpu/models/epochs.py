#!/usr/bin/env python3
"""torchvision's ResNet-18 trained for two epochs of two batches on a
synthetic image set: the first epoch in the set's order (a warm-up pass),
the second in an order shuffled with Python's random module, which default
mode never seeds. The kernels are made deterministic in both modes (this user
has fixed those already), so two default runs compute the same bits in steps
0 and 1 and first differ in step 2, the first step of the second epoch: the
divergence comes at a later step, from host data. Deterministic mode also
seeds random (common.py).

Exits 77 (skipped) without PyTorch, torchvision or the device.
"""
import os
import random

import common

args = common.arguments(__doc__.split("\n\n")[0])
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
torch, device = common.setup(args)
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cudnn.deterministic = True
torchvision = common.need("torchvision")

BATCH, BATCHES_PER_EPOCH, EPOCHS = 16 if device.type == "cuda" else 8, 2, 2
g = common.generator(torch)
images = torch.randn(BATCH * BATCHES_PER_EPOCH, 3, 64, 64, generator=g)
labels = torch.randint(0, 10, (BATCH * BATCHES_PER_EPOCH,), generator=g)
model = torchvision.models.resnet18(num_classes=10).to(device)
model.train()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

steps = common.Steps(torch, device)
step = 0
for epoch in range(EPOCHS):
    order = list(range(len(images)))
    if epoch > 0:
        random.shuffle(order)
    for b in range(BATCHES_PER_EPOCH):
        if step >= args.steps:
            break
        index = torch.tensor(order[b * BATCH:(b + 1) * BATCH])
        x, y = images[index].to(device), labels[index].to(device)
        with steps.timed(step):
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        steps.done(step, loss, model)
        step += 1
steps.final()
