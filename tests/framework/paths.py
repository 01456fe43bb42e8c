# A small stack of identical blocks trained for four optimizer steps, whose
# run B takes another path where PATHS_PLANT says: "mul", one more
# multiplication in block 1 at step 2; "twice", block 2 called twice at step
# 1; "skip", block 1 skipped from step 2 on; "end", block 0's layer called
# once more as step 2's last launch (the next step's first is the same);
# "loop", block 1 halves twice at step 2 (one more turn of its loop, the
# same op at the same line); "nostep", the optimizer's step skipped at step 1
# (the layer counts training steps by the optimizer's: run B's are numbered
# one less from there on); "alt", a spare block called in block 1's place
# at step 2; "swap", blocks 1 and 2 called in the other order at step 2, from
# lines of their own; "batch", with PATHS_BATCH set, the batch (made from
# step 2 on by a multiplication before the forward, as a loader's next batch
# is) scaled otherwise. Every block launches the same
# kernels (check_paths.py launches inside aten::addmm, aten::relu and
# aten::mul without parameter words), so only the framework origins tell
# where the path changed. Prints the losses.
import os

import torch
from torch import nn

PLANT = os.environ.get("PATHS_PLANT", "")
BATCH = "PATHS_BATCH" in os.environ


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, v, extra=False, turns=1):
        h = torch.relu(self.fc(v))
        if extra:
            h = h * 1.0  # the planted multiplication
        for _ in range(turns):
            h = h * 0.5  # the halving, in a loop
        return h


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(4))
        self.alt = Block()  # a spare, in both runs
        self.step = 0

    def forward(self, v):
        if PLANT == "swap" and self.step == 2:
            v = self.blocks[0](v)
            v = self.blocks[2](v)  # blocks 2 and 1 in the other order
            v = self.blocks[1](v)
            return self.blocks[3](v)
        for i, block in enumerate(self.blocks):
            if PLANT == "skip" and i == 1 and self.step >= 2:
                continue
            if PLANT == "alt" and i == 1 and self.step == 2:
                block = self.alt
            here = i == 1 and self.step == 2
            v = block(v, PLANT == "mul" and here, 2 if PLANT == "loop" and here else 1)
            if PLANT == "twice" and i == 2 and self.step == 1:
                v = block(v)
        return v


torch.manual_seed(0)
model = Stack()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 8)
for step in range(4):
    model.step = step
    batch = x
    if BATCH:  # made after the last step's optimizer step, before this step's forward
        batch = x * (1.5 if PLANT == "batch" and step >= 2 else 1.0)
    loss = model(batch).square().mean()
    opt.zero_grad()
    loss.backward()
    if PLANT == "end" and step == 2:
        model.blocks[0].fc(x)  # the planted layer call at a step's end
    if PLANT == "nostep" and step == 1:
        continue  # the optimizer step skipped (a loop that calls no step; GradScaler's skips still count)
    opt.step()
    print(f"step {step}: {loss.item():.6f}")
