#!/usr/bin/env python3
"""A PyTorch Lightning Trainer.fit of a small convolutional network on a
synthetic image set whose __getitem__ adds numpy noise (an augmentation),
loaded by a shuffling DataLoader with num_workers=2 worker processes.
Default mode leaves what a user leaves: torch.manual_seed only, or with
--seed-workers also pl.seed_everything(0, workers=True) (Lightning's seed
for every worker's random, numpy and torch). Deterministic mode seeds
everything and passes Trainer(deterministic="warn").

Exits 77 (skipped) without PyTorch, pytorch-lightning or the device.
"""
import common


def extra(p):
    p.add_argument("--seed-workers", action="store_true",
                   help="call pl.seed_everything(0, workers=True) in default mode")


args = common.arguments(__doc__.split("\n\n")[0], extra=extra)
torch, device = common.setup(args)
pl = common.need("pytorch_lightning")
import numpy as np  # noqa: E402  (after the skip checks)

if args.mode == "deterministic" or args.seed_workers:
    pl.seed_everything(0, workers=True, verbose=False)


class NoisyImages(torch.utils.data.Dataset):
    def __init__(self, count=512):
        g = common.generator(torch)
        self.images = torch.randn(count, 3, 32, 32, generator=g)
        self.labels = torch.randint(0, 10, (count,), generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        noise = np.random.normal(0.0, 0.1, size=(3, 32, 32)).astype(np.float32)
        return self.images[i] + torch.from_numpy(noise), self.labels[i]


class SmallConvNet(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.features(x))

    def training_step(self, batch, batch_idx):
        images, labels = batch
        return torch.nn.functional.cross_entropy(self(images), labels)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


class PrintSteps(pl.Callback):
    def __init__(self):
        self.steps = common.Steps(torch, device)

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.steps.begin()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.steps.end(batch_idx)
        self.steps.done(batch_idx, outputs["loss"], module)

    def on_train_end(self, trainer, module):
        self.steps.final()


loader = torch.utils.data.DataLoader(NoisyImages(), batch_size=64, shuffle=True, num_workers=2)
trainer = pl.Trainer(
    accelerator="gpu" if device.type == "cuda" else "cpu", devices=1, max_steps=args.steps,
    logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    deterministic="warn" if args.mode == "deterministic" else None, callbacks=[PrintSteps()])
trainer.fit(SmallConvNet(), loader)
