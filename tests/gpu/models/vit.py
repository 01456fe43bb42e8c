#!/usr/bin/env python3
"""A timm Vision Transformer (vit_tiny_patch16_224, random weights) trained
under bfloat16 autocast (common.autocast) with AdamW on synthetic 224x224 images
(batches of 32 on a GPU, 8 on the CPU). Default mode
leaves what a user leaves: nothing but torch.manual_seed (common.py).

Exits 77 (skipped) without PyTorch, timm or the device.
"""
import common

args = common.arguments(__doc__.split("\n\n")[0])
torch, device = common.setup(args)
timm = common.need("timm")

model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=100).to(device)
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
g = common.generator(torch)
batch = 32 if device.type == "cuda" else 8
batches = [(torch.randn(batch, 3, 224, 224, generator=g), torch.randint(0, 100, (batch,), generator=g))
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
