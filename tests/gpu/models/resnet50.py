#!/usr/bin/env python3
"""torchvision's ResNet-50 trained with automatic mixed precision (float16
and a GradScaler starting at 2^8 on a GPU, bfloat16 on a CPU that runs it
natively: common.autocast) in channels_last, SGD with momentum, on
synthetic images (batches of 32 of 128x128 on a GPU, 8 of 64x64 on the CPU); --benchmark
on|off sets cudnn.benchmark in default mode (deterministic mode always turns it off).
Default mode leaves what a user leaves: torch.manual_seed and the
benchmark flag (common.py).

Exits 77 (skipped) without PyTorch, torchvision or the device.
"""
import common


def extra(p):
    p.add_argument("--benchmark", choices=["on", "off"], default="off",
                   help="cudnn.benchmark in default mode")


args = common.arguments(__doc__.split("\n\n")[0], extra=extra)
torch, device = common.setup(args)
torchvision = common.need("torchvision")
if args.mode == "default":
    torch.backends.cudnn.benchmark = args.benchmark == "on"

model = torchvision.models.resnet50(num_classes=100).to(device, memory_format=torch.channels_last)
model.train()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
cuda = device.type == "cuda"
amp_dtype = torch.float16 if cuda else torch.bfloat16
# At the default initial scale (2^16) the float16 gradients of this model
# overflow in every early step, and the scaler skips them all.
scaler = torch.amp.GradScaler(device.type, init_scale=2.0**8, enabled=cuda)
g = common.generator(torch)
batch, side = (32, 128) if cuda else (8, 64)
batches = [(torch.randn(batch, 3, side, side, generator=g), torch.randint(0, 100, (batch,), generator=g))
           for _ in range(args.steps)]

steps = common.Steps(torch, device)
for i, (images, labels) in enumerate(batches):
    images = images.to(device).contiguous(memory_format=torch.channels_last)
    labels = labels.to(device)
    with steps.timed(i):
        optimizer.zero_grad(set_to_none=True)
        with common.autocast(torch, device, amp_dtype):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    steps.done(i, loss, model)
steps.final()
