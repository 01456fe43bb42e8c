# Module paths as gpurr's PyTorch layer gives them where a program calls its
# modules in ways other than one model called whole: each case below trains
# its own small model for an optimizer step (so its launches carry their own
# step: the cases' steps in the order of CASES, "interrupted" taking two;
# "step-inside" steps inside its module, so "custom-function" shares its
# second step; "phases" takes three) and prints its loss. Under the test's fake
# recorder a "kernel" is launched inside every aten::addmm (a Linear's
# forward) and aten::mm (its backward); check_module_paths.py reads the
# module each launch names.
import ctypes
import os
import sys
import types

import torch
import torch.fx
import torch.utils.checkpoint
from torch import nn

if os.environ.get("GPURR_TEST_LAUNCHER"):
    recorder = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
    launcher = ctypes.CDLL(os.environ["GPURR_TEST_LAUNCHER"])
    launcher.gpurr_test_launch_on_ops.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    assert launcher.gpurr_test_launch_on_ops(recorder._handle, b"aten::addmm,aten::mm") == 0

torch.manual_seed(0)
x = torch.randn(4, 8)


def train(model, forward=None):
    """One step: forward (the model called whole unless `forward`), backward,
    the optimizer's step; prints the loss."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = (forward() if forward else model(x)).square().mean()
    loss.backward()
    opt.step()
    print(f"{case}: {loss.item():.6f}")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, v):
        return torch.relu(self.fc(v))


class Traced(nn.Module):
    """Traced by torch.fx: a program's own graph module, which calls its
    modules (call_module)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(Block(), Block())

    def forward(self, v):
        return self.body(v)


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(Block())
        self.head = nn.Linear(8, 8)

    def forward(self, v):
        return self.head(self.inner(v))


class Owner(nn.Module):
    """Never called: its method calls its two parts, as a LightningModule's
    training_step calls a GAN's generator and discriminator."""

    def __init__(self):
        super().__init__()
        self.gen = nn.Sequential(nn.Linear(8, 8))
        self.disc = nn.Sequential(nn.Linear(8, 8))

    def step(self):
        return self.disc(self.gen(x))


class Interrupted(Exception.__base__):  # a BaseException, as KeyboardInterrupt
    pass


class Raising(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.outer = nn.Linear(8, 8)

    def forward(self, v):
        v = self.fc(v)
        raise Interrupted()


class Checkpointed(nn.Module):
    """Its blocks' forward is recomputed in the backward pass."""

    def __init__(self, reentrant):
        super().__init__()
        self.a = Block()
        self.b = Block()
        self.reentrant = reentrant

    def forward(self, v):
        v = torch.utils.checkpoint.checkpoint(self.a, v, use_reentrant=self.reentrant)
        return self.b(v)


def threads(steps):
    """A training loop whose step hands two persistent threads each a model
    of its own to evaluate, concurrently: their launches interleave
    differently from step to step. Under the layer's default attribution
    (two steps observed, then followed), no launch may take the other
    thread's module."""
    import queue
    import threading

    class Alpha(nn.Sequential):
        pass

    class Beta(nn.Sequential):
        pass

    def worker(m, q, out):
        while (v := q.get()) is not None:
            with torch.no_grad():
                for _ in range(10):
                    v = m(v)
            out.put(v.sum().item())

    model = nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    queues = [(queue.Queue(), queue.Queue(), m) for m in (Alpha(nn.Linear(8, 8), nn.Linear(8, 8)),
                                                          Beta(nn.Linear(8, 8), nn.Linear(8, 8)))]
    workers = [threading.Thread(target=worker, args=(m, q, out)) for q, out, m in queues]
    for w in workers:
        w.start()
    for step in range(steps):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        for q, _, _ in queues:
            q.put(x / 10)
        print(f"step {step}: {loss.item():.6f}", *(f"{out.get():.6f}" for _, out, _ in queues))
    for q, _, _ in queues:
        q.put(None)
    for w in workers:
        w.join()


def dropping():
    """A training loop whose steps run the same kernels through other modules
    of one kind, as a schedule says (most steps alike, some not): LayerDrop
    skips one of four identical layers, the batch goes to one of three
    identical experts, and to one of three experts fused in one parameter
    of one module (as transformers' mixtures of experts hold them). Under
    the layer's default attribution no launch may take the module of the
    template's step, and a step that differs only in the fused expert is
    followed (the same module, by its place)."""

    class Fused(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(3, 8, 8) / 3)

        def forward(self, v, expert):
            return nn.functional.linear(v, self.weight[expert])

    class Dropping(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(4))
            self.experts = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))
            self.fused = Fused()

        def forward(self, v, skip, expert, fused):
            for i, layer in enumerate(self.layers):
                if i != skip:
                    v = torch.relu(layer(v))
            return self.fused(self.experts[expert](v), fused)

    model = Dropping()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    schedule = [(3, 0, 0), (3, 0, 0), (3, 0, 1), (1, 0, 0), (3, 0, 2), (3, 2, 0), (3, 0, 1), (3, 0, 0), (0, 1, 2),
                (3, 0, 0), (3, 0, 1), (3, 0, 0)]
    for step, (skip, expert, fused) in enumerate(schedule):
        loss = model(x, skip, expert, fused).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step}: {loss.item():.6f}")


def ensemble():
    """Two models of one class trained one after the other, each with its own
    optimizer, both kept alive (an ensemble, k-fold training): the second
    member's weights are none the layer reported while it learned the first's
    steps, and no launch of it may take the first member's modules."""

    class Member(nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.last = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, v):
            return self.last(torch.relu(self.first(v)))

    members = []
    for k in range(2):
        members.append(Member())
        opt = torch.optim.SGD(members[-1].parameters(), lr=0.01)
        for step in range(5):
            loss = members[-1](x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            print(f"member {k} step {step}: {loss.item():.6f}")


def probes():
    """Two heads built up front on one frozen backbone (linear probing,
    k-fold heads), trained one after the other, each with its own
    optimizer: the backbone's launch gives each step its template's weight,
    so only the second head's optimizer, once it stepped, tells the layer
    its weights. No launch after that may take the first head's modules."""

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.last = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, v):
            return self.last(torch.relu(self.first(v)))

    backbone = nn.Linear(8, 8).requires_grad_(False)
    heads = [Head() for _ in range(2)]
    for k, head in enumerate(heads):
        opt = torch.optim.SGD(head.parameters(), lr=0.01)
        for step in range(5):
            with torch.no_grad():
                features = backbone(x)
            loss = head(features).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            print(f"head {k} step {step}: {loss.item():.6f}")


def resumed():
    """A training loop whose step 3 (RESUMED_BRANCH_STEP) takes a branch inside a module (data
    dependent, as a detection model's or an evaluation's): it stops matching
    the template inside the branch, and the rest of the modules running
    then (the block, the model) must still name their ops, before and after
    the branch's module returns."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = nn.Linear(8, 8)
            self.branch = nn.Linear(8, 8)
            self.weight = nn.Parameter(torch.randn(8, 8) / 3)
            self.last = nn.Linear(8, 8)

        def forward(self, v, branch):
            v = self.first(v)
            if branch:
                v = self.branch(v)
            v = torch.addmm(v, v, self.weight)  # the block's own op
            return self.last(torch.relu(v))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.weight = nn.Parameter(torch.randn(8, 8) / 3)
            self.head = nn.Linear(8, 8)

        def forward(self, v, branch):
            v = self.block(v, branch)
            return self.head(torch.addmm(v, v, self.weight))  # the model's own op, after the block

    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    branch = int(os.environ.get("RESUMED_BRANCH_STEP", "3"))
    for step in range(6):
        loss = model(x, step == branch).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step}: {loss.item():.6f}")


def resumed_backward():
    """A training loop whose step 3 (RESUMED_EXTRA_STEP) runs one op more in a Python
    autograd.Function's backward: it stops matching the template inside that
    backward node, and the ops left in the node still belong to the backward
    pass, though the node's scopes began while the layer did not observe."""

    class Extra(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v, w, extra):
            ctx.save_for_backward(v, w)
            ctx.extra = extra
            return v.mm(w)

        @staticmethod
        def backward(ctx, g):
            v, w = ctx.saved_tensors
            if ctx.extra:
                g = torch.addmm(g, g, torch.zeros(8, 8))  # the op more: g, bit for bit
            return g.mm(w.t()), v.t().mm(g), None

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(8, 8)
            self.weight = nn.Parameter(torch.randn(8, 8) / 3)

        def forward(self, v, extra):
            return self.head(Extra.apply(v, self.weight, extra))

    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    extra = int(os.environ.get("RESUMED_EXTRA_STEP", "3"))
    for step in range(6):
        loss = model(x.requires_grad_(), step == extra).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step}: {loss.item():.6f}")


def updated():
    """A training loop whose steps begin by projecting the batch through a
    fixed matrix (no parameter), and whose step 3 (UPDATED_STEP) first
    updates a weight by the same kernel, under torch.no_grad (a weight's
    orthogonalisation, an average made by hand): an operation the steps
    learned do not have, although its kernel is the one they have at its
    place. No launch may take the projection's line for it."""
    model = nn.Linear(8, 8)
    projection = torch.randn(8, 8) / 3
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    updated_step = int(os.environ.get("UPDATED_STEP", "3"))
    for step in range(6):
        if step == updated_step:
            with torch.no_grad():
                model.weight.copy_(torch.mm(model.weight, torch.eye(8)))  # the update, once
        loss = model(torch.mm(x, projection)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step}: {loss.item():.6f}")


def hooked():
    """Forward hooks of a module's own, which run after the layer's global
    ones: one on a layer (it adds a product to the layer's output), and one
    on a module that calls itself once, inside its own call. The hooks' ops
    name the module hooked, and the ops its outer call runs after the inner
    call returned name it too (not the model that holds it)."""
    zeros = torch.zeros(8, 8)

    def scaled(module, args, output):
        return torch.addmm(output, output, zeros)  # the hook's op

    class Recursive(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, v, depth=1):
            v = self.lin(v)
            if depth:
                v = self(v, depth - 1)
            return torch.addmm(v, v, zeros)  # after the inner call

    class Hooked(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp, self.rec, self.head = nn.Linear(8, 8), Recursive(), nn.Linear(8, 8)

        def forward(self, v):
            return self.head(self.rec(self.mlp(v)))

    model = Hooked()
    model.mlp.register_forward_hook(scaled)
    model.rec.register_forward_hook(scaled)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(3):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step}: {loss.item():.6f}")


if sys.argv[1:2] == ["hooked"]:
    hooked()
    sys.exit(0)
if sys.argv[1:2] == ["threads"]:
    threads(8)
    sys.exit(0)
if sys.argv[1:2] == ["dropping"]:
    dropping()
    sys.exit(0)
if sys.argv[1:2] == ["ensemble"]:
    ensemble()
    sys.exit(0)
if sys.argv[1:2] == ["probes"]:
    probes()
    sys.exit(0)
if sys.argv[1:2] == ["resumed"]:
    resumed()
    sys.exit(0)
if sys.argv[1:2] == ["resumed-backward"]:
    resumed_backward()
    sys.exit(0)
if sys.argv[1:2] == ["updated"]:
    updated()
    sys.exit(0)

class Stepping(nn.Module):
    """Steps its optimizer inside its forward (Lightning's manual optimisation
    under DDP, meta-learning): the rest of the forward is still its own."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.after = nn.Linear(8, 8)
        self.opt = torch.optim.SGD(self.fc.parameters(), lr=0.1)

    def forward(self, v):
        self.fc(v).square().mean().backward()
        self.opt.step()
        return self.after(v)


class Shared(nn.Module):
    """One layer held by two parts (as T5's and BART's embedding is by the
    encoder and the decoder), called from each."""

    def __init__(self):
        super().__init__()
        fc = nn.Linear(8, 8)
        self.enc = nn.Sequential(fc, nn.ReLU())
        self.dec = nn.Sequential(nn.Tanh(), fc)

    def forward(self, v):
        return self.dec(self.enc(v))


class Product(torch.autograd.Function):
    """v @ w, differentiated by the program's own backward."""

    @staticmethod
    def forward(ctx, v, w):
        ctx.save_for_backward(v, w)
        return v.mm(w)  # the forward's own line

    @staticmethod
    def backward(ctx, g):
        v, w = ctx.saved_tensors
        return g.mm(w.t()), v.t().mm(g)  # the backward's own line


class Custom(nn.Module):
    """Its forward is a Python autograd.Function."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8))

    def forward(self, v):
        return Product.apply(v, self.w)


class Phases(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, v):
        return self.fc(v)


def phases():
    """A fine-tune in two phases, each with an optimizer of its own, the
    first still alive: its head alone for an iteration, then all of it for
    three. Prints the last loss."""
    m = Phases()
    head = torch.optim.SGD([m.fc.bias], lr=0.1)
    whole = torch.optim.SGD(m.parameters(), lr=0.1)
    for opt in (head, whole, whole, whole):
        loss = m(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    print(f"{case}: {loss.item():.6f}")


CASES = sys.argv[1:] or ["fx", "inner-first", "replaced", "owner", "siblings", "interrupted", "checkpoint",
                         "checkpoint-reentrant", "shared", "step-inside", "custom-function", "phases"]
for case in CASES:
    if case == "fx":
        train(torch.fx.symbolic_trace(Traced()))
    elif case == "inner-first":
        m = Outer()
        with torch.no_grad():
            m.inner(x)  # a part called on its own first
        train(m)
    elif case == "replaced":
        m = Outer()
        with torch.no_grad():
            m(x)
        m.head = nn.Linear(8, 8)  # a head replaced after a call, as in transfer learning
        train(m)
    elif case == "owner":
        o = Owner()
        train(o, o.step)
    elif case == "siblings":
        one, two = nn.Sequential(nn.Linear(8, 8)), nn.Sequential(nn.Linear(8, 8))
        both = types.SimpleNamespace(parameters=lambda: [*one.parameters(), *two.parameters()])  # no module
        train(both, lambda: two(one(x)))
    elif case == "interrupted":
        m = Raising()
        try:
            m(x)
        except Interrupted:
            pass
        train(m.outer)  # still inside Raising, whose exit hooks never ran: the step ends it
        w = nn.Parameter(torch.randn(8, 8))
        train(nn.ParameterList([w]), lambda: torch.addmm(x, x, w))  # outside every module
    elif case == "checkpoint":
        train(Checkpointed(reentrant=False))
    elif case == "step-inside":
        m = Stepping()
        print(f"{case}: {m(x).sum().item():.6f}")
        del m  # its optimizer, which counted the steps, with it
    elif case == "phases":
        phases()
    elif case == "custom-function":
        train(Custom())
    elif case == "shared":
        train(Shared())
    elif case == "checkpoint-reentrant":
        model = Checkpointed(reentrant=True)
        train(model, lambda: model(x.requires_grad_()))
