"""A data-parallel training job of several ranks as gpurr's recorder would
see it, one simulated process (model.Program) per rank, written from
FORMAT.md alone: each step copies the rank's batch to the GPU, computes its
gradient, all-reduces the gradients through NCCL (a `collective` event) and
applies the sum. The ranks run in lockstep, so that what each rank receives
is computed from what every rank sent."""
import os

import numpy as np

from . import bufhash, model
from .training import _origin

MAIN = 1
COUNT = 1024                        # float32 elements of the gradient
STEPS = 3
# The communicator's id (FORMAT.md: the buffer hash of the ncclUniqueId it
# was made from), the same in every rank and run.
COMMUNICATOR = bufhash.digest(np.frombuffer(bytes(range(128)), dtype=np.uint8))
GRAD_KERNEL = 'void at::native::mul_kernel<float>(float*, float const*, float const*)'
SGD_KERNEL = 'void at::native::sgd_kernel<float>(float*, float const*, float)'
SCALE_KERNEL = 'void at::native::scale_kernel<float>(float*, float)'
COPY_KERNEL = 'void at::native::copy_kernel<float>(float*, float const*)'


def add_in_order(parts):
    """Rank 0's contribution, then rank 1's...: one order of float32 additions."""
    acc = parts[0].copy()
    for x in parts[1:]:
        acc = (acc + x).astype(np.float32)
    return acc


def add_in_pairs(parts):
    """Pairs of ranks, then pairs of pairs: another order (a tree's)."""
    parts = [x.copy() for x in parts]
    while len(parts) > 1:
        parts = [(parts[i] + parts[i + 1]).astype(np.float32) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


class Job:
    """`ranks` processes. `planted` maps a rank to the step (or a set of
    steps) at which its batch differs from the other run's (a host input:
    that rank is an origin); `pairwise_step` is the step whose all-reduce
    adds in pairs instead of in rank order (another reduction order, every
    rank sending the same). With `update=False` no step applies what it
    received (statistics all-reduced, as a metric is): what a rank sends
    never depends on what it received. `extra` maps a rank to the step (or
    steps) at which it scales its batch by 1 before its gradient: a kernel
    the other run does not launch there, which changes no byte. With
    `asynchronous`, the all-reduces are c10d's view of calls that return
    before they complete, as DistributedDataParallel's: what each rank
    receives is not hashed; with `objects`, as an object collective's
    (all_gather_object's pickled bytes), what each sends is not hashed
    either. With `other_call` (rank, step), that rank all-gathers at that
    step where the others all-reduce (with (rank, step, op), all-reduces
    with another reduction), and the job hangs there: every rank's
    call returns without what it received, and the traces end. With
    `pipeline`, the ranks are the stages of a
    pipeline instead: in each step, rank k receives rank k-1's gradient
    (ncclRecv), adds it to its own and sends the sum to rank k+1 (ncclSend),
    so that the stages issue different numbers of calls on the
    communicator, as a pipeline's do; no all-reduce. With `copy_inside`,
    each rank's all-reduce receives into an output buffer of its own, which
    a launch attributed to another line (29) writes before the call is
    recorded, from a buffer of the collective's that no recorded operation
    wrote (as gloo's reduce_scatter does on a thread of its own, inside
    c10d's call, which is recorded as it returns)."""

    def __init__(self, ranks=8, seed=1, planted=None, pairwise_step=None, steps=STEPS, update=True, extra=None,
                 asynchronous=False, pipeline=False, copy_inside=False, planted_line=28, objects=False,
                 other_call=None):
        self.n, self.seed, self.steps = ranks, seed, steps
        self.planted_line = planted_line  # the line a planted rank copies its other batch at
        self.pipeline, self.copy_inside = pipeline, copy_inside
        steps_of = lambda m: {r: s if isinstance(s, (set, frozenset)) else {s} for r, s in (m or {}).items()}
        self.planted, self.extra = steps_of(planted), steps_of(extra)
        self.pairwise_step = pairwise_step
        self.update = update
        self.asynchronous = asynchronous or objects
        self.objects = objects
        self.other_call = other_call  # (rank, step): that rank all-gathers there, and the job hangs
        self.procs = []

    def run(self):
        ranks = [_Rank(self, r) for r in range(self.n)]
        for step in range(self.steps):
            for r in ranks:
                r.gradient(step)
            if self.pipeline:
                for k, r in enumerate(ranks):
                    if k > 0:
                        r.receive(step, ranks[k - 1].grad.f32().copy())
                    if k < self.n - 1:
                        r.send(step)
                continue
            parts = [r.grad.f32().copy() for r in ranks]
            total = (add_in_pairs if step == self.pairwise_step else add_in_order)(parts)
            if self.other_call and self.other_call[1] == step:
                for r in ranks:
                    r.hang(step, r.rank == self.other_call[0], *self.other_call[2:])
                break
            for r in ranks:
                r.all_reduce(step, total)
            for r in ranks:
                if self.update:
                    r.apply(step)
        self.procs = [r.p for r in ranks]
        return self

    def write(self, directory, env=None, ranks=None):
        """rank<N>.gpurr for each rank (those of `ranks`, or all) in `directory`."""
        os.makedirs(directory, exist_ok=True)
        paths = []
        for p in self.procs:
            if ranks is not None and p.rank not in ranks:
                continue
            path = os.path.join(directory, 'rank%d.gpurr' % p.rank)
            p.write(path, env=env, compat_version=9, command=('python3', 'train.py', '--ddp'))
            paths.append(path)
        return paths


class _Rank:
    def __init__(self, job, rank):
        self.job, self.rank = job, rank
        p = self.p = model.Program(seed=job.seed * 1000 + rank)
        p.rank = rank
        self.S = p.handle()
        self.mod = p.module(MAIN, b'\x7fELF torch kernels' + bytes(range(256)) * 4)
        self.weight = p.empty(MAIN, self.S, COUNT * 4)
        w = np.random.default_rng(2024).standard_normal(COUNT).astype(np.float32)
        p.h2d(MAIN, self.S, self.weight, w, origin=_origin('aten::copy_', -1, 'model', 20))
        self.batch = p.empty(MAIN, self.S, COUNT * 4)
        self.grad = p.empty(MAIN, self.S, COUNT * 4)

    def gradient(self, step):
        p, S = self.p, self.S
        salt = 1 if step in self.job.planted.get(self.rank, ()) else 0
        x = np.random.default_rng([7, self.rank, step, salt]).standard_normal(COUNT).astype(np.float32)
        p.h2d(MAIN, S, self.batch, x, origin=_origin('aten::copy_', step, '', self.job.planted_line if salt else 28))
        if step in self.job.extra.get(self.rank, ()):
            p.launch(MAIN, S, self.mod, SCALE_KERNEL, (4, 1, 1), (256, 1, 1), [model.Ptr(self.batch, 'rw'), ('f', 1.0)],
                     lambda: self.batch.put(self.batch.f32()), origin=_origin('aten::mul_', step, 'model', 27))
        p.launch(MAIN, S, self.mod, GRAD_KERNEL, (4, 1, 1), (256, 1, 1),
                 [model.Ptr(self.grad, 'w'), model.Ptr(self.batch, 'r'), model.Ptr(self.weight, 'r')],
                 lambda: self.grad.put(self.batch.f32() * self.weight.f32()),
                 origin=_origin('aten::mul', step, 'model', 29, phase='backward', forward_op='aten::mul'))

    def all_reduce(self, step, total):
        if self.job.copy_inside:
            if not hasattr(self, 'inbox'):
                self.inbox, self.output = (self.p.empty(MAIN, self.S, COUNT * 4) for _ in range(2))
            self.p.launch(MAIN, self.S, self.mod, COPY_KERNEL, (4, 1, 1), (256, 1, 1),
                          [model.Ptr(self.output, 'w'), model.Ptr(self.inbox, 'r')], lambda: self.output.put(total),
                          origin=_origin('aten::copy_', step, '', 29))
        out = self.output if self.job.copy_inside else self.grad
        self.p.collective(MAIN, self.S, 'c10d::allreduce_' if self.job.asynchronous else 'ncclAllReduce', 'allReduce',
                          COMMUNICATOR, self.rank, self.job.n, step, self.grad, COUNT, lambda: out.put(total),
                          origin=_origin('c10d::allreduce_', step, '', 30), asynchronous=self.job.asynchronous, out=out,
                          objects=self.job.objects)

    def hang(self, step, other, reduce_op='sum'):
        """The all-reduce of `step` that never completes: `other`, this rank all-gathers what it would have
        all-reduced instead (or, given a `reduce_op`, all-reduces with it): a collective mismatch; each rank's call
        returns without what it received."""
        gathers = other and reduce_op == 'sum'
        call, op = ('ncclAllGather', 'allGather') if gathers else ('ncclAllReduce', 'allReduce')
        reduce_op = '' if gathers else reduce_op if other else 'sum'
        self.p.collective(MAIN, self.S, call, op, COMMUNICATOR, self.rank, self.job.n, step, self.grad, COUNT,
                          lambda: None, reduce_op=reduce_op, origin=_origin(call, step, '', 34 if other else 30),
                          completes=False)

    def _point_to_point(self, step, call, op, peer, compute, sends, receives, line):
        self.p2p = getattr(self, 'p2p', 0)
        self.p.collective(MAIN, self.S, call, op, COMMUNICATOR, self.rank, self.job.n, self.p2p, self.grad, COUNT,
                          compute, reduce_op='', origin=_origin(call, step, '', line), peer=peer, sends=sends,
                          receives=receives)
        self.p2p += 1  # this rank's calls on the communicator, as its sequence numbers count them

    def receive(self, step, previous):
        """Stage k's receive of stage k-1's gradient, added to its own."""
        own = self.grad.f32().copy()
        self._point_to_point(step, 'ncclRecv', 'recv', self.rank - 1,
                             lambda: self.grad.put((own + previous).astype(np.float32)), False, True, 32)

    def send(self, step):
        self._point_to_point(step, 'ncclSend', 'send', self.rank + 1, lambda: None, True, False, 33)

    def apply(self, step):
        p, S = self.p, self.S
        p.launch(MAIN, S, self.mod, SGD_KERNEL, (4, 1, 1), (256, 1, 1),
                 [model.Ptr(self.weight, 'rw'), model.Ptr(self.grad, 'r'), ('f', 0.01)],
                 lambda: self.weight.put((self.weight.f32() - np.float32(0.01) * self.grad.f32()).astype(np.float32)),
                 origin=_origin('aten::add_', step, '', 31))
