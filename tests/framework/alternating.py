"""alternating.py MODE: training loops whose steps alternate between kinds
that run the same kernels. "gan": a GAN's two networks of one class stepped
in turn, the critic twice per generator step at first, then once; the
generator's loss is a product of activations by the kernel that the
critic's step runs on its first layer's weight at that place (an addmm
given no weight where the step learned has one given a weight).
"evaluating": a loop that evaluates the model every third step, after its
optimizer's step, under torch.no_grad, calling it from another line than
the training: steps of the two kinds begin with the same kernels, given the
same weights, from other lines, one kind without gradients. "momentum": the same with SGD with momentum, evaluating every
third step from step 0 on: the optimizer launches other kernels in its
first step than in the later ones, so that the kind of step learned again
after two that matched no template is an evaluation's, and the kind that
did not match (a step between two evaluations) is learned only in the
step after it. Prints the losses."""
import sys

import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(4, 8)


def gan():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.last = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, v):
            return self.last(torch.relu(self.first(v)))

    gen, critic = Net(), Net()
    opt_gen = torch.optim.SGD(gen.parameters(), lr=0.01)
    opt_critic = torch.optim.SGD(critic.parameters(), lr=0.01)
    real, weights = torch.randn(4, 8), torch.full((8, 8), 0.1)
    for step in range(8):
        for _ in range(2 if step < 3 else 1):
            opt_critic.zero_grad()
            (critic(gen(x).detach()) - critic(real)).mean().backward()  # the critic's loss
            opt_critic.step()
        opt_gen.zero_grad()
        scores = critic(gen(x))
        loss = torch.addmm(scores, scores, weights).sum()  # the generator's loss
        loss.backward()
        opt_gen.step()
        print(f"step {step}: {loss.item():.6f}")


def evaluating(momentum=0.0, evaluated=1, steps=10):
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=momentum)
    for step in range(steps):
        loss = model(x).square().mean()  # the training's call
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step % 3 == evaluated:
            with torch.no_grad():
                print(f"evaluated: {model(x).square().mean().item():.6f}")  # the evaluation's call
        print(f"step {step}: {loss.item():.6f}")


{"gan": gan, "evaluating": evaluating, "momentum": lambda: evaluating(0.9, 0, 24)}[sys.argv[1]]()
