#!/usr/bin/env python3
"""A timm Vision Transformer (vit_tiny_patch16_224, random weights) trained
under bfloat16 autocast (common.autocast) with AdamW on synthetic images
(batches of 32 of 224x224 on a GPU; on the CPU 8 of 112x112, the model built
for that size). Default mode
leaves what a user leaves: nothing but torch.manual_seed (common.py).

Exits 77 (skipped) without PyTorch, timm or the device.
"""
import common

args = common.arguments(__doc__.split("\n\n")[0])
torch, device = common.setup(args)
timm = common.need("timm")

cuda = device.type == "cuda"
batch, side = (32, 224) if cuda else (8, 112)
model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=100, img_size=side).to(device)
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
g = common.generator(torch)
batches = [(torch.randn(batch, 3, side, side, generator=g), torch.randint(0, 100, (batch,), generator=g))
           for _ in range(args.steps)]

steps = common.Steps(torch, device)
for i, (images, labels) in enumerate(batches):
    images, labels = images.to(device), labels.to(device)
    with steps.timed(i):
        optimizer.zero_grad(set_to_none=True)
        with common.autocast(torch, device, torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    steps.done(i, loss, model)
steps.final()
