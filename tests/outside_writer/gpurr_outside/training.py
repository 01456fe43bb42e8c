"""A simulated PyTorch training loop, recorded as gpurr's recorder would.

A small network (conv, batch norm, ReLU, dropout, linear; an embedding of
tokens, averaged, through a second linear; cross-entropy), trained with SGD
and momentum. The forward pass and the optimizer run on the main host
thread, the backward pass on autograd's thread; batches are copied on a copy
stream (the next one while backward runs; by the main thread, or by a
DataLoader thread of its own), the running loss is accumulated on
a metrics stream. Memory comes from a caching allocator with per-stream pools
(2 MiB and 20 MiB segments, or expandable segments), tensors are freed and
their blocks reused, gradients are re-created every step (zero_grad sets them
to None). Every kernel computes its outputs from the bytes of its inputs, so
a difference anywhere propagates as it would on a GPU.

`Variant` holds what may differ between two runs; `record` writes one trace.
"""
import dataclasses
import random
import struct
import zlib

import numpy as np

from .model import Program, Ptr

MAIN, AUTOGRAD, LOADER = 0, 1, 2

N, C_IN, HW, C = 64, 3, 16, 64         # batch, input channels, image side, conv channels
VOCAB, DIM, TOKENS, CLASSES = 5000, 64, 16, 10


@dataclasses.dataclass
class Variant:
    seed: int = 1                  # what differs in every run: addresses, handles, fresh memory
    steps: int = 8
    expandable: bool = False       # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    hash_inputs: bool = False
    written_out_of_inputs: bool = False  # with hash_inputs: ranges a launch only writes left out of its inputs
    autotune_step: int = None      # a benchmark candidate writes a tensor of the conv's size, freed before the
                                   # conv's output takes its block
    inductor_autotune_step: int = None  # Inductor autotunes the mean's kernel first: it flushes the L2 cache and
                                        # times three candidates into a clone, each marked Origin.benchmarking
    compiled_mean: str = None      # the mean is Inductor's reduction kernel instead, built for this configuration:
                                   # its block sizes are in the code (an image of its own), so another one runs with
                                   # the same grid and block and adds in another order
    chunk_bytes: int = 65536
    schedule_seed: int = 0         # how autograd's thread and the main thread interleave
    metrics_later: int = 0         # the metrics launch moves this many places later (step 1)
    extra_alloc: tuple = None      # (event number, size, kind): an allocation nothing uses
    extra_kernel_step: int = None  # an extra kernel with a 2 MiB workspace of its own
    extra_dropout_step: int = None  # one more launch of the dropout kernel first, into buffers of its own
    pointer_step: int = None       # the second linear's output read through another pointer
    pointer_target: str = 'slice'  # 'slice': 128 bytes earlier; 'other': another allocation
    atomics_step: int = None       # index_add accumulates in another order
    host_layout: int = 0           # where the host's libraries were mapped: index_add takes its functor by
                                   # reference (a host address in its parameters); 0 is gpurr record's fixed layout
    host_heap: int = 0             # index_add's functor is a heap object instead, below 4 GiB (a non-PIE Python's
                                   # heap with gpurr record's fixed layout), this many 16-byte slots further on:
                                   # threads and the hash seed order a run's allocations
    philox_seed: int = 0x5eed
    philox_offset_step: int = None  # the dropout's Philox offset advanced by 4 at that step
    attention: bool = False        # memory-efficient attention (with dropout) before the dropout: its one
                                   # parameter, a struct, holds the Philox state among pointers and sizes
    attention_seed: int = None     # ... with this seed instead of philox_seed (a generator the run's
                                   # dropout launches never took)
    host_input_step: int = None    # one pixel of that step's batch differs
    capture_host_data: bool = False
    algo_step: int = None          # cuDNN picks an FFT engine at that step
    uninit_step: int = None        # a kernel reads a torch.empty buffer of fresh memory
    inplace_empty_step: int = None  # an in-place op (inplace_op) updates a torch.empty buffer; its functor,
                                    # passed by value, holds stack bytes left from earlier calls
    inplace_op: str = 'aten::addcmul_'  # or 'aten::copy_': overwrites the buffer, scaled by a functor value
    inplace_schema: str = None      # the op's Origin.inPlace ('yes', 'no'); None: not written (an older recorder)
    stale_pointer: bool = False     # ... and its functor's garbage is a stale device address (into the running
                                    # statistics) in the run of seed 1: a pointer the recorder sees in one run only;
                                    # 'dead': in every run, an address in no live allocation, other in each run
    split_k_step: int = None       # cuBLAS splits K and sums in another order
    race_step: int = None          # the main thread zeroes the gradient norm that autograd's thread adds to...
    race_late: bool = False        # ... after it instead of before it
    race_stream: str = 'compute'   # the stream of that memset: 'compute', or 'side' (a stream of its own,
                                   # no synchronisation: only the threads' interleaving orders the two)
    capture_step: int = None       # that step also captures a CUDA graph it never launches (a warm-up capture)
    capture_bytes: int = 4096      # ... whose captured copy moves this many bytes
    graph_optimizer: bool = False  # the optimizer step is one CUDA graph launch (its nodes read by the recorder)
    graph_atomics_step: int = None  # ... whose update of one parameter adds in another order at that step
    fresh_zeros: bool = False      # fresh memory reads zeros in every process (else it differs between runs)
    loader_thread: bool = False    # batches are copied by a thread of their own, which synchronises the copy
                                   # stream; the main thread reads them handed over by the host (no CUDA event)
    env: dict = None
    snapshot_step: int = None      # keep the bytes of that step's launches (gpurr record --snapshot)
    extra_modules: int = 0         # modules an autotuner loads (and never launches from) before the torch
                                   # kernels': every later module ordinal shifts
    module_stride: int = 1         # module ordinals 1, 1 + stride, ... (not dense)
    init_sets: int = 0             # the initialisation zeroes the momentum buffers this many times more (a large
                                   # model's init on the main thread: a long start before autograd's thread shows up)


# The address of a functor in a host library's data, as PyTorch's
# indexFuncLargeIndex receives it (`const func_t& op`).
HOST_FUNCTOR = 0x7ff4390d73d2
# ... and on the heap (Variant.host_heap).
HEAP_FUNCTOR = 0x0951d340
# The process's readable host memory, as a recorder writes it into the index:
# the executable and its heap, the libraries and the stack.
HOST_REGIONS = ((0x00400000, 0x0c000000), (0x7ff000000000, 0x7ffffffff000))


def _origin(op, step, module='', line=0, phase='forward', forward_op='', stack=None, in_place=None):
    o = {'op': op, 'opStack': stack or [op], 'phase': phase, 'forwardOp': forward_op,
         'module': module, 'file': 'train.py' if line else '', 'line': line, 'step': step}
    if in_place:
        o['inPlace'] = in_place
    return o


def _finite(v):
    """v's floats in [-1e3, 1e3]: NaN as 0.5, infinities as 1 and -1."""
    w = np.clip(v, -1e3, 1e3)
    bad = np.flatnonzero(~np.isfinite(v))
    if bad.size:
        vb = v[bad]
        w[bad] = np.where(np.isnan(vb), np.float32(0.5), np.where(vb > 0, np.float32(1.0), np.float32(-1.0)))
    return w


def _mix(out, ins, salt, eps=0.0):
    """A kernel's arithmetic: out from the bytes of its inputs, deterministically."""
    n = out.size // 4
    acc = np.full(n, np.float32(salt), dtype=np.float32)
    with np.errstate(all='ignore'):
        for k, x in enumerate(ins):
            v = _finite(x[:x.size // 4 * 4].view(np.float32))
            if v.size > n:              # every input byte counts
                v = np.concatenate([v, np.zeros(-v.size % n, np.float32)]).reshape(-1, n).mean(axis=0, dtype=np.float32)
            acc += np.float32(0.25 * (k + 1)) * (v if v.size == n else np.resize(v, n))
        acc = np.tanh(acc) + np.float32(eps)
    out.put(acc.astype(np.float32))


def silent(f):
    """A host-side step that makes no driver call (freeing a tensor)."""
    f.silent = True
    return f


def _ulp(buf, index=0):
    """Flips the last bit of one float32: what another order of additions does."""
    v = buf.f32()
    v[index] = np.nextafter(v[index], np.float32(2.0))


class Training:
    def __init__(self, v):
        self.v = v
        self.p = Program(v.seed, hash_inputs=v.hash_inputs, expandable=v.expandable,
                         chunk_bytes=v.chunk_bytes, fresh_zeros=v.fresh_zeros)
        p = self.p
        p.written_out_of_inputs = v.written_out_of_inputs
        self.S, self.CP, self.M = p.handle(), p.handle(), p.handle()  # compute, copy, metrics
        self.SIDE = p.handle()
        self.freed_events = []  # loader_thread: events recorded where the batches were used
        p.capture_host_data = v.capture_host_data
        if v.snapshot_step is not None:
            kernels = ('indexFuncLargeIndex', 'SoftMax', 'nll_loss', 'batch_norm_update_running_stats')
            p.snapshot = lambda name, origin: (origin is not None and origin.get('step') == v.snapshot_step
                                               and any(k in name for k in kernels))
            p.snapshot_text = 'steps %d' % v.snapshot_step
        self.events = 0
        if v.extra_alloc:
            at, size, kind = v.extra_alloc

            def hook(prog, thread):
                if len(prog.events) >= at:
                    prog.hooks.remove(hook)
                    prog.driver_alloc(thread, size, kind)
            p.hooks.append(hook)
        p.module_stride = v.module_stride
        for i in range(v.extra_modules):
            p.module(MAIN, b'\x7fELF autotuning candidate %d' % i + bytes(range(256)) * 2)
        self.torch_mod = p.module(MAIN, b'\x7fELF torch kernels' + bytes(range(256)) * 4)
        self.cudnn_mod = p.module(MAIN, b'\x7fELF cudnn engines' + bytes(range(255, -1, -1)) * 4)
        self.cublas_mod = p.module(MAIN, b'\x7fELF cublasLt kernels' + bytes(range(0, 256, 3)) * 4)
        if v.compiled_mean:
            self.mean_mod = p.module(MAIN, b'\x7fELF triton_red_fused_mean_0 ' + v.compiled_mean.encode() + bytes(256))

    # ------------------------------------------------------------ helpers
    def k(self, thread, name, grid, block, params, compute, origin, mod=None, annotations=(), shared=0):
        return self.p.launch(thread, self.S, mod or self.torch_mod, name, grid, block, params, compute,
                             annotations=annotations, origin=origin, shared=shared)

    def empty(self, thread, nbytes, stream=None):
        return self.p.empty(thread, stream or self.S, nbytes)

    def init_params(self):
        p, S = self.p, self.S
        g = np.random.default_rng(2024)
        shapes = {'conv.weight': C * C_IN * 9, 'bn.weight': C, 'bn.bias': C,
                  'fc.weight': CLASSES * C * HW * HW, 'embed.weight': VOCAB * DIM,
                  'head.weight': CLASSES * DIM}
        self.params, self.momentum, self.grads = {}, {}, {}
        for name, n in shapes.items():
            buf = self.empty(MAIN, n * 4)
            p.h2d(MAIN, S, buf, (g.standard_normal(n) * 0.1).astype(np.float32),
                  origin=_origin('aten::copy_', -1, 'model', 40))
            self.params[name] = buf
        for name, buf in self.params.items():
            m = self.empty(MAIN, buf.size)
            p.memset(MAIN, S, m, 0, origin=_origin('aten::zero_', -1, '', 41))
            self.momentum[name] = m
        for i in range(self.v.init_sets):
            m = list(self.momentum.values())[i % len(self.momentum)]
            p.memset(MAIN, S, m, 0, origin=_origin('aten::zero_', -1, '', 41))
        self.running = self.empty(MAIN, 2 * C * 4)
        p.memset(MAIN, S, self.running, 0, origin=_origin('aten::zero_', -1, 'model.bn', 40))
        self.gnorm = self.empty(MAIN, 64)
        p.memset(MAIN, S, self.gnorm, 0, origin=_origin('aten::zeros', -1, '', 42))
        self.metric = self.p.empty(MAIN, self.M, 8)
        p.memset(MAIN, self.M, self.metric, 0, origin=_origin('aten::zeros', -1, '', 42))

    def batch(self, step):
        g = np.random.default_rng([77, step])
        x = g.standard_normal(N * C_IN * HW * HW).astype(np.float32)
        if self.v.host_input_step == step:
            x[123] += np.float32(0.5)
        tokens = g.integers(0, VOCAB, N * TOKENS).astype(np.int64)
        labels = g.integers(0, CLASSES, N).astype(np.int64)
        return x, tokens, labels

    def copy_batch(self, step):
        """The DataLoader's batch, copied on the copy stream: by the main
        thread, which records an event the compute stream waits for, or by
        the loader's thread, which waits for the copies to finish (the event
        is then None)."""
        p, CP = self.p, self.CP
        thread = LOADER if self.v.loader_thread else MAIN
        x, tokens, labels = self.batch(step)
        for ev in self.freed_events:
            p.sync(thread, 'eventQuery', 0, ev)
        self.freed_events = []
        bufs = [p.empty(thread, CP, a.nbytes) for a in (x, tokens, labels)]
        o = _origin('aten::copy_', step - 1 if step else -1, '', 55)
        for b, a in zip(bufs, (x, tokens, labels)):
            p.h2d(thread, CP, b, a, origin=o, capture=self.v.capture_host_data)
        if self.v.loader_thread:
            p.sync(thread, 'streamSynchronize', CP)
            return bufs, None
        ev = p.handle()
        p.sync(thread, 'eventRecord', CP, ev)
        return bufs, ev

    # ------------------------------------------------------------ the loop
    def run(self):
        v, p = self.v, self.p
        self.init_params()
        batch, ev = self.copy_batch(0)
        for step in range(v.steps):
            if ev is not None:
                p.sync(MAIN, 'streamWaitEvent', self.S, ev)
            if v.capture_step == step:
                self.capture_graph(step)
            fwd_done, saved, loss = self.forward(step, batch)
            backward = self.backward_ops(step, saved)
            main_ops = self.main_ops(step, fwd_done, loss)
            nxt = {}
            if step + 1 < v.steps:
                main_ops.append(lambda: nxt.update(zip(('batch', 'ev'), self.copy_batch(step + 1))))
            side = v.race_step == step and v.race_stream == 'side'
            if side:
                # the main thread's first call, before or after all of autograd's
                main_ops.insert(0, lambda: self.zero_norm(step))
            if v.race_step == step and not v.race_late and not side:
                self.zero_norm(step)
            self.interleave(step, backward, main_ops, (0 if not v.race_late else len(backward)) if side else None)
            if v.race_step == step and v.race_late and not side:
                self.zero_norm(step)
            p.release(loss)
            for b in batch:                      # the batch's tensors are freed
                p.release(b)
            if v.loader_thread:
                # used on the compute stream (record_stream): the allocator
                # records an event there, and hands the blocks out again once
                # a query says the stream passed it
                ev = p.handle()
                p.sync(MAIN, 'eventRecord', self.S, ev)
                self.freed_events.append(ev)
            self.optimizer(step)
            if step % 2 == 1:
                p.sync(MAIN, 'streamSynchronize', self.M)
                p.d2h(MAIN, self.M, self.metric, origin=_origin('aten::_local_scalar_dense', step + 1, '', 70))
            if nxt:
                batch, ev = nxt['batch'], nxt['ev']
        p.sync(MAIN, 'contextSynchronize')
        return p

    def capture_graph(self, step):
        """A graph captured on a stream of its own: a set, a copy and a child
        graph enqueued into the capture, none of which runs now."""
        p, cs = self.p, self.p.handle()
        capture = 7 + step
        o = _origin('aten::copy_', step, 'model', 88)
        src, dst = self.params['embed.weight'], self.momentum['embed.weight']
        n = min(self.v.capture_bytes, src.size)
        p.captured(MAIN, cs, capture, 'memset', {'async': True, 'dst': p._drange(self.gnorm), 'value': 0,
                                                 'elementSize': 1}, origin=o)
        p.captured(MAIN, cs, capture, 'memcpy', {'kind': 'deviceToDevice', 'async': True, 'size': n,
                                                 'dst': p._drange(dst, 0, n), 'src': p._drange(src, 0, n)},
                   origin=o)
        p.captured(MAIN, cs, capture, 'graph', {'graphExec': p.handle(), 'nodeCount': 3})

    def interleave(self, step, backward, main_ops, main_at=None):
        """Autograd's thread runs `backward` while the main thread runs
        `main_ops`: the scheduler decides the order in which they reach the
        driver. Each thread keeps its own order."""
        r = random.Random(self.v.schedule_seed * 1000 + step)
        slots = sorted(r.sample(range(len(backward) + len(main_ops)), len(main_ops)))
        if main_at is not None:       # the main thread's calls all at once, after main_at of autograd's
            slots = [main_at + i for i in range(len(main_ops))]
        order, mi = [], 0
        for i, op in enumerate(backward):
            while mi < len(main_ops) and slots[mi] <= len(order):
                order.append(main_ops[mi])
                mi += 1
            order.append(op)
        order += main_ops[mi:]
        if step == 1 and self.v.metrics_later:
            # the metrics launch (the main thread's second call) passes that
            # many more of autograd's driver calls; the main thread's later
            # calls stay after it
            i = order.index(main_ops[1])
            moved = [order.pop(i)]
            while i < len(order) and order[i] in main_ops:
                moved.append(order.pop(i))
            passed = 0
            while passed < self.v.metrics_later:
                passed += not getattr(order[i], 'silent', False)
                i += 1
            while i < len(order) and getattr(order[i], 'silent', False):
                i += 1
            later = [op for op in order[i:] if op in main_ops]
            order = order[:i] + moved + [op for op in order[i:]]
        for op in order:
            op()

    def forward(self, step, batch):
        v, p, S, T = self.v, self.p, self.S, MAIN
        x, tokens, labels = batch
        P = self.params
        act = {}

        def E(name, nbytes):  # a tensor an op makes
            act[name] = self.empty(T, nbytes)
            act[name].made = True
            return act[name]

        o = _origin('aten::cudnn_convolution', step, 'model.conv', 21,
                    stack=['aten::conv2d', 'aten::convolution', 'aten::cudnn_convolution'])
        if v.autotune_step == step:
            bench = E('bench', N * C * HW * HW * 4)
            self.k(T, 'cudnn::bench_candidate_kernel', (8, 1, 1), (128, 1, 1), [Ptr(bench, 'w')],
                   lambda: _mix(bench, [], 0.3), o, self.cudnn_mod)
            p.release(act.pop('bench'))
        conv = E('conv', N * C * HW * HW * 4)
        if v.algo_step == step:
            algo = {'algorithm': {'library': 'cudnn', 'call': 'cudnnBackendExecute', 'choice': 'engine=12 (FFT)',
                                  'candidates': [{'algorithm': 'engine=3', 'timeMs': 0.061},
                                                 {'algorithm': 'engine=12', 'timeMs': 0.058}]}}
            spec = E('fft_spectrum', 64 * 1024)
            self.k(T, 'cudnn_fft_r2c_nhwc_input_transform_kernel', (16, 1, 1), (256, 1, 1),
                   [Ptr(x, 'r'), Ptr(spec, 'w')], lambda: _mix(spec, [x.bytes()], 0.3), o, self.cudnn_mod, [algo])
            self.k(T, 'cudnn_fft_cgemm_batched_kernel', (32, 1, 1), (256, 1, 1),
                   [Ptr(spec, 'rw'), Ptr(P['conv.weight'], 'r')],
                   lambda: _mix(spec, [spec.bytes(), P['conv.weight'].bytes()], 0.1), o, self.cudnn_mod)
            self.k(T, 'cudnn_fft_c2r_nhwc_output_transform_kernel', (16, 1, 1), (256, 1, 1),
                   [Ptr(spec, 'r'), Ptr(conv, 'w')],
                   lambda: (_mix(conv, [x.bytes(), P['conv.weight'].bytes()], 0.01), _ulp(conv, 5)), o, self.cudnn_mod)
            p.release(spec)
        else:
            algo = {'algorithm': {'library': 'cudnn', 'call': 'cudnnBackendExecute', 'choice': 'engine=3 (implicit GEMM)',
                                  'candidates': [{'algorithm': 'engine=3', 'timeMs': 0.061},
                                                 {'algorithm': 'engine=12', 'timeMs': 0.064}]}}
            self.k(T, 'sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32',
                   (8, 4, 1), (256, 1, 1),
                   [Ptr(x, 'r'), Ptr(P['conv.weight'], 'r'), Ptr(conv, 'w'), ('i', N), ('i', C)],
                   lambda: _mix(conv, [x.bytes(), P['conv.weight'].bytes()], 0.01), o, self.cudnn_mod, [algo],
                   shared=49152)
        # batch norm: statistics, running statistics, normalisation
        o = _origin('aten::cudnn_batch_norm', step, 'model.bn', 22,
                    stack=['aten::batch_norm', 'aten::_batch_norm_impl_index', 'aten::cudnn_batch_norm'])
        stats = E('bn_stats', 2 * C * 4)
        self.k(T, '_ZN2at6native31batch_norm_collect_statistics_kernelIfffiEEvv', (C, 1, 1), (512, 1, 1),
               [Ptr(conv, 'r'), Ptr(stats, 'w'), ('f', 1e-5)], lambda: _mix(stats, [conv.bytes()], 0.2), o)
        self.k(T, '_ZN2at6native33batch_norm_update_running_statsIfEEvv', (1, 1, 1), (64, 1, 1),
               [Ptr(stats, 'r'), Ptr(self.running, 'rw'), ('f', 0.1)],
               lambda: _mix(self.running, [self.running.bytes(), stats.bytes()], 0.0), o)
        bn = E('bn', conv.size)
        self.k(T, '_ZN2at6native32batch_norm_transform_input_kernelIfffiLb1EEEvv', (C, 8, 1), (256, 1, 1),
               [Ptr(conv, 'r'), Ptr(stats, 'r'), Ptr(P['bn.weight'], 'r'), Ptr(P['bn.bias'], 'r'), Ptr(bn, 'w')],
               lambda: _mix(bn, [conv.bytes(), stats.bytes(), P['bn.weight'].bytes(), P['bn.bias'].bytes()], 0.0), o)
        relu = E('relu', conv.size)
        self.k(T, '_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13clamp_min_kernelEEEviT0_', (256, 1, 1), (128, 1, 1),
               [('i', relu.size // 4), Ptr(bn, 'r'), Ptr(relu, 'w')],
               lambda: relu.put(np.maximum(bn.f32(), 0)), _origin('aten::relu', step, 'model.act', 23))
        offset = 4 * 8 * step + (4 if v.philox_offset_step is not None and step >= v.philox_offset_step else 0)
        if v.attention:
            self.attention(step, relu, E('attn', relu.size), offset + 16)
        # dropout: PyTorch's PhiloxCudaState passed by value
        drop, mask = E('drop', conv.size), E('mask', conv.size // 4)
        rng = {'rng': {'source': 'philox', 'generator': 'cuda:0', 'seed': v.philox_seed, 'offset': offset}}

        def dropout():
            g = np.random.Generator(np.random.Philox(key=v.philox_seed, counter=offset))
            keep = g.random(mask.size) >= 0.1
            mask.put(keep.astype(np.uint8))
            drop.put(np.where(np.resize(keep, drop.size // 4), relu.f32() / np.float32(0.9), np.float32(0)))
        dropout_kernel = ('_ZN2at6native43_GLOBAL__N__50f1b6c4_10_Dropout_cu_0e96ed3824fused_dropout_kernel_vecIffjLi1E'
                          'Li4EhEEvNS_4cuda6detail10TensorInfoIKT_T1_EENS5_IS6_S8_EENS5_IT4_S8_EES8_T0_NS_15PhiloxCuda'
                          'StateE')
        if v.extra_dropout_step == step:
            # the same kernel once more first, on buffers a library took for itself (2 MiB, the size of the
            # caching allocator's small segments): in run B it, not the real dropout, is the first launch of
            # that kernel to use a fresh segment
            ws, ws_mask = p.cuda_malloc(T, 2 << 20), p.cuda_malloc(T, 2 << 20)
            self.k(T, dropout_kernel, (64, 1, 1), (256, 1, 1),
                   [Ptr(relu, 'r'), Ptr(ws, 'w'), Ptr(ws_mask, 'w'), ('I', drop.size // 4), ('f', 0.9),
                    ('philox', v.philox_seed, offset)],
                   lambda: (_mix(ws, [relu.bytes()], 0.4), _mix(ws_mask, [relu.bytes()], 0.6)),
                   _origin('aten::native_dropout', step, 'model.drop', 24, stack=['aten::dropout', 'aten::native_dropout']),
                   annotations=[rng])
            self.workspace = ws
        self.k(T, dropout_kernel, (64, 1, 1), (256, 1, 1),
               [Ptr(relu, 'r'), Ptr(drop, 'w'), Ptr(mask, 'w'), ('I', drop.size // 4), ('f', 0.9),
                ('philox', v.philox_seed, offset)],
               dropout, _origin('aten::native_dropout', step, 'model.drop', 24, stack=['aten::dropout', 'aten::native_dropout']),
               annotations=[rng])
        fc = E('fc', N * CLASSES * 4)
        gemm = {'algorithm': {'library': 'cublasLt', 'call': 'cublasLtMatmul', 'choice': 'algo=6 tile=128x64 splitK=1',
                              'attributes': [{'key': 'transa', 'value': 'T'}]}}
        o = _origin('aten::mm', step, 'model.fc', 25, stack=['aten::linear', 'aten::matmul', 'aten::mm'])

        def fc_compute():
            _mix(fc, [drop.bytes(), P['fc.weight'].bytes()], 0.05)
            if v.split_k_step == step:
                _ulp(fc, 3)
        self.k(T, 'sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x64x32_cublas', (1, 1, 1), (128, 1, 1),
               [Ptr(drop, 'r'), Ptr(P['fc.weight'], 'r'), Ptr(fc, 'w'), ('i', N), ('i', CLASSES), ('i', C * HW * HW)],
               fc_compute, o, self.cublas_mod, [gemm])
        if v.extra_kernel_step == step:
            # cuBLAS takes a workspace of its own for a reduction it did not need before
            ws = p.cuda_malloc(T, 2 << 20)
            self.k(T, 'cublasLt::splitKreduce_kernel<float>', (4, 1, 1), (128, 1, 1),
                   [Ptr(fc, 'r'), Ptr(ws, 'w'), ('i', 4)],
                   lambda: _mix(ws, [fc.bytes()], 0.7), o, self.cublas_mod)
            self.workspace = ws
        # the embedding of the tokens, averaged, through the head
        emb = E('emb', N * TOKENS * DIM * 4)
        o = _origin('aten::index_select', step, 'model.embed', 26, stack=['aten::embedding', 'aten::index_select'])

        def gather():
            w = P['embed.weight'].f32().reshape(VOCAB, DIM)
            emb.put(w[tokens.i64() % VOCAB])
        self.k(T, '_ZN2at6native20indexSelectLargeIndexIflLi2ELi2ELin2ELb1EEEvv', (128, 1, 1), (128, 1, 1),
               [Ptr(emb, 'w'), Ptr(P['embed.weight'], 'r'), Ptr(tokens, 'r'), ('q', N * TOKENS)], gather, o)
        mean = E('mean', N * DIM * 4)
        if v.inductor_autotune_step == step:
            ob = dict(_origin('CachingAutotuner.benchmark_all_configs', step, '', 0), benchmarking=True)
            flush = E('l2_flush', 1 << 20)
            p.memset(T, self.S, flush, 0, origin=ob)
            clone = E('mean_clone', mean.size)
            for c, grid in enumerate((4, 8, 16)):
                self.k(T, 'triton_red_fused_mean_0', (grid, 1, 1), (512, 1, 1), [Ptr(emb, 'r'), Ptr(clone, 'w')],
                       lambda c=c: _mix(clone, [emb.bytes()], 0.1 * c), ob)
            p.release(act.pop('mean_clone'))
            p.release(act.pop('l2_flush'))
        extra = []
        if v.uninit_step == step:
            # torch.empty, never written, read as if it held zeros
            act['scratch'] = self.empty(T, 12 << 20)
            extra = [Ptr(act['scratch'], 'r')]
        if v.compiled_mean and not extra:
            self.k(T, 'triton_red_fused_mean_0', (8, 1, 1), (512, 1, 1), [Ptr(emb, 'r'), Ptr(mean, 'w')],
                   # each configuration rounds its own way
                   lambda: _mix(mean, [emb.bytes()], 0.0, eps=1e-6 * (zlib.crc32(v.compiled_mean.encode()) % 999 + 1)),
                   _origin('CompiledFunction', step, 'model', 27, stack=['Torch-Compiled Region: 0/0',
                                                                        'CompiledFunction']), mod=self.mean_mod)
        else:
            self.k(T, '_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7MeanOpsIffEEjfLi4EEEEEvT1_',
                   (8, 1, 1), (512, 1, 1), [Ptr(emb, 'r'), Ptr(mean, 'w')] + extra,
                   lambda: _mix(mean, [emb.bytes()] + [e.buf.bytes() for e in extra], 0.0),
                   _origin('aten::mean', step, 'model', 27))
        if 'scratch' in act:
            p.release(act.pop('scratch'))
        if v.inplace_empty_step == step:
            # accumulator = torch.empty(...); accumulator.addcmul_(emb, emb): the
            # kernel reads the accumulator's old contents. Its functor's unused
            # bytes are stack garbage, other in every run (as on a GPU).
            acc = self.empty(T, emb.size)
            garbage = 0x30400 + (v.seed << 8)
            if v.stale_pointer == 'dead':
                # a device address where no allocation lives (one freed long ago), other in every run
                garbage = p.next_address + (16 << 30) + (v.seed << 12)
            elif v.stale_pointer and v.seed == 1:
                garbage = self.running.address + 16
            src = emb.f32()

            def update():
                if v.inplace_op == 'aten::copy_':
                    acc.put(src * np.float32(1 + (garbage >> 8 & 0xff) * 1e-3))
                else:
                    with np.errstate(invalid='ignore', over='ignore'):
                        acc.put(acc.f32() + 0.25 * src * src)
            self.k(T, '_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_14AddcmulFunctorIfEEEEviT0_',
                   (1, 1, 1), (128, 1, 1),
                   [('i', acc.size // 4), Ptr(acc, 'rw'), Ptr(emb, 'r'),
                    ('struct', struct.pack('<fIQ', 0.25, 0, garbage))],  # the functor: its value, unused bytes
                   update, _origin(v.inplace_op, step, 'model', 27, in_place=v.inplace_schema))
            p.release(acc)
        head = E('head', N * CLASSES * 4 + 128)
        self.k(T, 'sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x64x32_cublas', (1, 1, 1), (128, 1, 1),
               [Ptr(mean, 'r'), Ptr(P['head.weight'], 'r'), Ptr(head, 'w'), ('i', N), ('i', CLASSES), ('i', DIM)],
               lambda: _mix(head, [mean.bytes(), P['head.weight'].bytes()], 0.0), 
               _origin('aten::mm', step, 'model.head', 28, stack=['aten::linear', 'aten::matmul', 'aten::mm']),
               self.cublas_mod, [gemm])
        # logits = fc + head[32:] (a slice of the head's output, 128 bytes in)
        logits = E('logits', N * CLASSES * 4)
        target, off = head, 128
        if v.pointer_step == step:
            if v.pointer_target == 'slice':
                off = 0
            else:
                target, off = x, 0          # the batch, in the copy stream's segment
        self.k(T, '_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEEEEviT0_', (1, 1, 1), (128, 1, 1),
               [('i', N * CLASSES), Ptr(logits, 'w'), Ptr(fc, 'r'), Ptr(target, 'r', off)],
               lambda: logits.put(fc.f32() + np.resize(target.bytes(off)[: (target.size - off) // 4 * 4].view(np.float32), fc.size // 4)),
               _origin('aten::add', step, 'model', 29))
        lsm = E('lsm', logits.size)
        self.k(T, '_ZN2at6native43_GLOBAL__N__cunn_SoftMaxForwardIfffNS1_25LogSoftMaxForwardEpilogueEEEvPT2_PKT0_i',
               (N, 1, 1), (128, 1, 1), [Ptr(lsm, 'w'), Ptr(logits, 'r'), ('i', CLASSES)],
               lambda: _mix(lsm, [logits.bytes()], -0.5), _origin('aten::_log_softmax', step, '', 31,
                                                                  stack=['aten::cross_entropy_loss', 'aten::log_softmax', 'aten::_log_softmax']))
        loss = E('loss', 8)
        self.k(T, '_ZN2at6native38nll_loss_forward_reduce_cuda_kernel_2dIffElEEvPT_S3_PKS2_PKT1_S6_biii', (1, 1, 1), (32, 1, 1),
               [Ptr(loss, 'w'), Ptr(lsm, 'r'), Ptr(labels, 'r'), ('i', N)],
               lambda: _mix(loss, [lsm.bytes(), labels.bytes()], 0.0),
               _origin('aten::nll_loss_forward', step, '', 31, stack=['aten::cross_entropy_loss', 'aten::nll_loss_nd', 'aten::nll_loss_forward']))
        ev = p.handle()
        p.sync(T, 'eventRecord', S, ev)
        act['x'], act['tokens'], act['labels'] = x, tokens, labels
        return ev, act, loss

    def attention(self, step, x, out, offset):
        """fmha_cutlassF (scaled_dot_product_attention with dropout, as
        PyTorch's memory-efficient attention runs it): its one parameter is
        AttentionKernel<float, Sm80, ...>::Params (ATen/native/transformers/
        cuda/mem_eff_attention/kernel_forward.h), whose rng_engine_inputs is a
        PhiloxCudaState; `seed` points at a host tensor of the seed."""
        v = self.v
        seed = v.philox_seed if v.attention_seed is None else v.attention_seed
        heap = HEAP_FUNCTOR + 16 * v.host_heap if v.host_heap else HEAP_FUNCTOR
        lse = self.empty(MAIN, 4096)
        q = struct.pack('<7QI4x3QifiiiiiB3x8i5qii?7xQf4x', *(
            [x.address, x.address, x.address, 0, 0, 0, 0, 0, out.address, 0, lse.address] +
            [0, 0.125, 64, 64, TOKENS, TOKENS, TOKENS, 0] + [DIM] * 8 + [DIM * TOKENS] * 5 +
            [N, 1, True, 0, 0.1]))
        # rng_engine_inputs: seed, offset, intragraph offset, captured; then extragraph_offset, seed
        params = q + struct.pack('<QQI?3xQQ', seed, offset, 0, False, 0, heap)

        def compute():
            g = np.random.Generator(np.random.Philox(key=seed, counter=offset))
            keep = g.random(out.size // 4) >= 0.1
            out.put(np.where(keep, x.f32() / np.float32(0.9), np.float32(0)))
            _mix(lse, [x.bytes()], 0.3)
        self.k(MAIN, '_Z39fmha_cutlassF_f32_aligned_64x64_rf_sm80N22PyTorchMemEffAttention15AttentionKernelIfN7'
               'cutlass4arch4Sm80ELb1ELi64ELi64ELi64ELb1ELb1EE6ParamsE', (1, 8, N), (32, 4, 1), [('struct', params)],
               compute, _origin('aten::_efficient_attention_forward', step, 'model.attn', 24,
                                stack=['aten::scaled_dot_product_attention',
                                       'aten::_scaled_dot_product_efficient_attention',
                                       'aten::_efficient_attention_forward']))
        self.p.release(lse)

    def main_ops(self, step, fwd_done, loss):
        """The main thread while backward runs: the running loss on the metrics stream."""
        p, M = self.p, self.M
        o = _origin('aten::add_', step, '', 33)

        def wait():
            p.sync(MAIN, 'streamWaitEvent', M, fwd_done)

        def metric():
            p.launch(MAIN, M, self.torch_mod, '_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEEEEviT0_',
                     (1, 1, 1), (32, 1, 1), [('i', 1), Ptr(self.metric, 'rw'), Ptr(loss, 'r')],
                     lambda: _mix(self.metric, [self.metric.bytes(), loss.bytes()], 0.0), origin=o)
        return [wait, metric]

    def zero_norm(self, step):
        stream = self.S if self.v.race_stream == 'compute' else self.SIDE
        self.p.memset(MAIN, stream, self.gnorm, 0, origin=_origin('aten::zero_', step, '', 34))

    def backward_ops(self, step, a):
        """Autograd's thread: the backward pass, one closure per driver call."""
        p, T, P, S = self.p, AUTOGRAD, self.params, self.S
        ops = []
        G = {}

        def bo(fwd, module, line, node):
            return _origin(node[0], step, module, line, 'backward', fwd,
                           stack=['autograd::engine::evaluate_function: ' + node[1]] + list(node[2:]) + [node[0]])

        def new(name, nbytes):  # a tensor an op makes
            G[name] = self.empty(T, nbytes)
            G[name].made = True
            return G[name]

        def grad(name):
            if name not in self.grads:
                self.grads[name] = self.empty(T, P[name].size)
            return self.grads[name]

        def launch(name, grid, params, compute, origin, mod=None, annotations=()):
            p.launch(T, S, mod or self.torch_mod, name, grid, (256, 1, 1), params, compute,
                     annotations=annotations, origin=origin)

        o = bo('aten::nll_loss_forward', '', 31, ('aten::nll_loss_backward', 'NllLossBackward0'))
        ops.append(lambda o=o: launch('_ZN2at6native39nll_loss_backward_reduce_cuda_kernel_2dIffElEEvPT_PKS2_PKT1_S5_biii',
                                  (1, 1, 1), [Ptr(new('glsm', a['lsm'].size), 'w'), Ptr(a['labels'], 'r'), ('i', N)],
                                  lambda: _mix(G['glsm'], [a['labels'].bytes()], -0.1), o))
        o = bo('aten::_log_softmax', '', 31, ('aten::_log_softmax_backward_data', 'LogSoftmaxBackward0'))
        ops.append(lambda o=o: launch('_ZN2at6native44_GLOBAL__N__cunn_SoftMaxBackwardIfffNS1_26LogSoftMaxBackwardEpilogueEEEvPT_PKT0_S9_i',
                                  (N, 1, 1), [Ptr(new('glogits', a['logits'].size), 'w'), Ptr(G['glsm'], 'r'), Ptr(a['lsm'], 'r')],
                                  lambda: _mix(G['glogits'], [G['glsm'].bytes(), a['lsm'].bytes()], 0.0), o))
        for name in ('glsm', 'lsm', 'logits'):
            ops.append(silent(lambda name=name: p.release(G.pop(name) if name in G else a.pop(name))))
        o = bo('aten::mm', 'model.head', 28, ('aten::mm', 'MmBackward0'))
        gemm = {'algorithm': {'library': 'cublasLt', 'call': 'cublasLtMatmul', 'choice': 'algo=6 tile=64x64 splitK=1'}}
        ops.append(lambda o=o: launch('sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize64x64x32_cublas', (1, 1, 1),
                                  [Ptr(G['glogits'], 'r'), Ptr(a['mean'], 'r'), Ptr(grad('head.weight'), 'w')],
                                  lambda: _mix(self.grads['head.weight'], [G['glogits'].bytes(), a['mean'].bytes()], 0.0),
                                  o, self.cublas_mod, [gemm]))
        ops.append(lambda o=o: launch('sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x64x32_cublas', (1, 1, 1),
                                  [Ptr(G['glogits'], 'r'), Ptr(P['head.weight'], 'r'), Ptr(new('gmean', a['mean'].size), 'w'),
                                   ('i', N), ('i', DIM), ('i', CLASSES)],
                                  lambda: _mix(G['gmean'], [G['glogits'].bytes(), P['head.weight'].bytes()], 0.0),
                                  o, self.cublas_mod, [gemm]))
        o = bo('aten::mean', 'model', 27, ('aten::div', 'MeanBackward1'))
        ops.append(lambda o=o: launch('_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11DivFunctorIfEEEEviT0_', (16, 1, 1),
                                  [('i', N * TOKENS * DIM), Ptr(new('gemb', a['emb'].size), 'w'), Ptr(G['gmean'], 'r')],
                                  lambda: G['gemb'].put(np.repeat(G['gmean'].f32().reshape(N, 1, DIM), TOKENS, 1) / np.float32(TOKENS)), o))
        o = bo('aten::index_select', 'model.embed', 26, ('aten::index_add_', 'IndexSelectBackward0', 'aten::index_select_backward'))

        def zero_embed_grad():
            p.memset(T, S, grad('embed.weight'), 0, origin=dict(o, op='aten::zero_'))
        ops.append(zero_embed_grad)

        def index_add():
            g = self.grads['embed.weight'].f32().reshape(VOCAB, DIM).copy()
            idx = a['tokens'].i64() % VOCAB
            rows = G['gemb'].f32().reshape(N * TOKENS, DIM)
            order = np.arange(idx.size)
            if self.v.atomics_step == step:
                order = order[::-1]       # the atomics landed in another order
            for i in order:
                g[idx[i]] += rows[i]
            self.grads['embed.weight'].put(g)
            if self.v.atomics_step == step:
                _ulp(self.grads['embed.weight'], int(idx[0]) * DIM)
        ops.append(lambda o=o: launch('_ZN2at6native20indexFuncLargeIndexIflLi2ELi2ELin2ELb1ENS0_16ReduceAddEEEvv', (512, 1, 1),
                                  [Ptr(self.grads['embed.weight'], 'rw'), Ptr(G['gemb'], 'r'), Ptr(a['tokens'], 'r'),
                                   ('q', N * TOKENS), ('Q', HEAP_FUNCTOR + 16 * self.v.host_heap if self.v.host_heap
                                         else HOST_FUNCTOR + self.v.host_layout * (1 << 28))],
                                  index_add, o))
        for name in ('gemb', 'gmean', 'emb', 'mean', 'head'):
            ops.append(silent(lambda name=name: p.release(G.pop(name) if name in G else a.pop(name))))
        o = bo('aten::mm', 'model.fc', 25, ('aten::mm', 'MmBackward0'))
        ops.append(lambda o=o: launch('sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize128x64x32_cublas', (4, 1, 1),
                                  [Ptr(G['glogits'], 'r'), Ptr(a['drop'], 'r'), Ptr(grad('fc.weight'), 'w')],
                                  lambda: _mix(self.grads['fc.weight'], [G['glogits'].bytes(), a['drop'].bytes()], 0.0),
                                  o, self.cublas_mod, [gemm]))
        ops.append(lambda o=o: launch('sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x64x32_cublas', (4, 1, 1),
                                  [Ptr(G['glogits'], 'r'), Ptr(P['fc.weight'], 'r'), Ptr(new('gdrop', a['drop'].size), 'w')],
                                  lambda: _mix(G['gdrop'], [G['glogits'].bytes(), P['fc.weight'].bytes()], 0.0),
                                  o, self.cublas_mod, [gemm]))
        ops.append(silent(lambda: (p.release(G.pop('glogits')), p.release(a.pop('drop')), p.release(a.pop('fc')))))
        o = bo('aten::native_dropout', 'model.drop', 24, ('aten::native_dropout_backward', 'NativeDropoutBackward0'))
        ops.append(lambda o=o: launch('_ZN2at6native18masked_scale_kernelIfffEEvRNS_6TensorERKS2_S5_T1_', (64, 1, 1),
                                  [Ptr(new('grelu', a['relu'].size), 'w'), Ptr(G['gdrop'], 'r'), Ptr(a['mask'], 'r'), ('f', 1 / 0.9)],
                                  lambda: _mix(G['grelu'], [G['gdrop'].bytes(), a['mask'].bytes()], 0.0), o))
        ops.append(silent(lambda: (p.release(G.pop('gdrop')), p.release(a.pop('mask')))))
        o = bo('aten::relu', 'model.act', 23, ('aten::threshold_backward', 'ReluBackward0'))
        ops.append(lambda o=o: launch('_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_23threshold_backward_kernelEEEviT0_', (256, 1, 1),
                                  [('i', a['relu'].size // 4), Ptr(new('gbn', a['relu'].size), 'w'), Ptr(G['grelu'], 'r'), Ptr(a['relu'], 'r')],
                                  lambda: G['gbn'].put(np.where(a['relu'].f32() > 0, G['grelu'].f32(), np.float32(0))), o))
        ops.append(silent(lambda: (p.release(G.pop('grelu')), p.release(a.pop('relu')), p.release(a.pop('bn')))))
        o = bo('aten::cudnn_batch_norm', 'model.bn', 22, ('aten::cudnn_batch_norm_backward', 'CudnnBatchNormBackward0'))
        ops.append(lambda o=o: launch('_ZN2at6native37batch_norm_backward_reduce_kernelIfffiEEvv', (C, 1, 1),
                                  [Ptr(G['gbn'], 'r'), Ptr(a['conv'], 'r'), Ptr(a['bn_stats'], 'r'),
                                   Ptr(grad('bn.weight'), 'w'), Ptr(grad('bn.bias'), 'w')],
                                  lambda: (_mix(self.grads['bn.weight'], [G['gbn'].bytes(), a['conv'].bytes()], 0.0),
                                           _mix(self.grads['bn.bias'], [G['gbn'].bytes()], 0.0)), o))
        ops.append(lambda o=o: launch('_ZN2at6native36batch_norm_backward_elemt_kernelIfffiEEvv', (C, 8, 1),
                                  [Ptr(G['gbn'], 'r'), Ptr(a['conv'], 'r'), Ptr(a['bn_stats'], 'r'), Ptr(P['bn.weight'], 'r'),
                                   Ptr(new('gconv', a['conv'].size), 'w')],
                                  lambda: _mix(G['gconv'], [G['gbn'].bytes(), a['conv'].bytes(), P['bn.weight'].bytes()], 0.0), o))
        ops.append(silent(lambda: (p.release(G.pop('gbn')), p.release(a.pop('bn_stats')), p.release(a.pop('conv')))))
        o = bo('aten::cudnn_convolution', 'model.conv', 21, ('aten::convolution_backward', 'ConvolutionBackward0'))
        wgrad = {'algorithm': {'library': 'cudnn', 'call': 'cudnnBackendExecute', 'choice': 'engine=1 (wgrad implicit GEMM)'}}
        ops.append(lambda o=o: launch('sm90_xmma_wgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x64x32', (8, 1, 1),
                                  [Ptr(a['x'], 'r'), Ptr(G['gconv'], 'r'), Ptr(grad('conv.weight'), 'w')],
                                  lambda: _mix(self.grads['conv.weight'], [a['x'].bytes(), G['gconv'].bytes()], 0.0),
                                  o, self.cudnn_mod, [wgrad]))
        ops.append(silent(lambda: p.release(G.pop('gconv'))))
        if self.v.race_step is not None:
            # the gradient norm, accumulated over steps
            ops.append(lambda o=o: launch('_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7NormOpsIffEEjfLi4EEEEEvT1_',
                                          (1, 1, 1), [Ptr(self.grads['conv.weight'], 'r'), Ptr(self.gnorm, 'rw')],
                                          lambda: _mix(self.gnorm, [self.gnorm.bytes(), self.grads['conv.weight'].bytes()], 0.0),
                                          dict(o, op='aten::norm')))
        return ops

    def optimizer(self, step):
        """SGD with momentum, all parameters in one foreach launch: the
        pointer lists travel by value in a TensorListMetadata aggregate."""
        p, P = self.p, self.params
        names = sorted(P)
        meta = []
        for lst, role in ((P, 'rw'), (self.grads, 'r'), (self.momentum, 'rw')):
            meta += [Ptr(lst[n], role) for n in names]
        meta += [('Q', P[n].size // 4) for n in names]

        def sgd():
            for n in names:
                m = self.momentum[n].f32() * np.float32(0.9) + self.grads[n].f32()
                self.momentum[n].put(m)
                updated = self.params[n].f32() - np.float32(0.01) * m
                if n == names[0] and self.v.graph_atomics_step == step:
                    updated[::7] = np.nextafter(updated[::7], np.float32(np.inf))  # summed in another order
                self.params[n].put(updated)
        if self.v.graph_optimizer:
            # Captured once, replayed every step: the graph's nodes take the
            # same pointers the launch would (static buffers).
            addresses = [x.buf.address + x.offset for x in meta if isinstance(x, Ptr)]
            p.graph_launch(MAIN, self.S, addresses, sgd, node_count=3)
            for n in names:
                p.release(self.grads.pop(n))
            return
        p.launch(MAIN, self.S, self.torch_mod,
                 '_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi3EEENS1_14SGDFunctorIfLi3EEEJffEEEvT_T0_DpT1_',
                 (6, 1, 1), (512, 1, 1), meta + [('f', 0.01), ('f', 0.9)], sgd,
                 origin=_origin('aten::_foreach_add_', step, '', 36, stack=['Optimizer.step#SGD.step', 'aten::_foreach_add_']))
        for n in names:                    # zero_grad(set_to_none=True)
            p.release(self.grads.pop(n))


def record(path, variant=None, **kw):
    """Simulates the training run `variant` (or Variant(**kw)) and writes its trace."""
    v = variant or Variant(**kw)
    t = Training(v)
    prog = t.run()
    env = {'CUBLAS_WORKSPACE_CONFIG': ':4096:8', 'PYTHONHASHSEED': '0'}
    if v.expandable:
        env['PYTORCH_CUDA_ALLOC_CONF'] = 'expandable_segments:True'
    if v.env is not None:
        env = v.env
    prog.write(path, env=env, **dict({'host_regions': HOST_REGIONS}, **getattr(v, 'write_options', {})))
    return prog
