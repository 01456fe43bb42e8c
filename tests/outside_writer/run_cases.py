#!/usr/bin/env python3
"""Cases for `gpurr diff` on traces written by the outside writer.

usage: run_cases.py GPURR CASE [CASE...]   (or --list)

Each case records two simulated training runs that differ in one way, checks
that `gpurr verify` finds both traces sound, and checks `gpurr diff --json`'s
verdict and exit status. A case prints what it checked and exits 1 at the
first expectation that does not hold."""
import json
import os
import random
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from gpurr_outside import bufhash, model, reader, runner, trace, training  # noqa: E402
    from gpurr_outside.training import Variant  # noqa: E402
except ImportError as e:
    sys.exit('run_cases.py: %s (scripts/setup.sh installs pycapnp, zstandard and numpy into the test environment)' % e)

GPURR = None
TMP = None
CASES = {}


class Failure(Exception):
    pass


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def expect(cond, what, detail=None):
    if not cond:
        raise Failure(what + ('' if detail is None else ': ' + json.dumps(detail, indent=1)[:3000]))
    print('  ok  ' + what)


_count = [0]


def record(variant, name=None, **write):
    _count[0] += 1
    path = os.path.join(TMP, '%s-%d.gpurr' % (name or 'run', _count[0]))
    prog = training.Training(variant).run()
    env = {'CUBLAS_WORKSPACE_CONFIG': ':4096:8', 'PYTHONHASHSEED': '0'}
    if variant.expandable:
        env['PYTORCH_CUDA_ALLOC_CONF'] = 'expandable_segments:True'
    if variant.env is not None:
        env = variant.env
    write.setdefault('host_regions', training.HOST_REGIONS)
    prog.write(path, env=env, **write)
    verify(path)
    return path, prog


def verify(path, want_ok=True):
    r = subprocess.run([GPURR, 'verify', '--json', path], capture_output=True, text=True)
    j = json.loads(r.stdout) if r.stdout.strip() else {}
    if want_ok:
        if r.returncode != 0 or not j.get('ok'):
            raise Failure('gpurr verify %s: exit %d %s %s' % (path, r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r.returncode, j


def diff(a, b):
    r = subprocess.run([GPURR, 'diff', '--json', a, b], capture_output=True, text=True)
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = None
    return r.returncode, j, r.stderr


def process(j):
    expect(j is not None and len(j['processes']) == 1, 'one process compared', j)
    return j['processes'][0]


def first(j):
    return process(j)['firstDivergence']


def text_report(a, b):
    return subprocess.run([GPURR, 'diff', a, b], capture_output=True, text=True).stdout


def expect_identical(a, b, what):
    rc, j, err = diff(a, b)
    if rc != 0:
        print(text_report(a, b))
    expect(rc == 0 and j['identical'] and first(j) is None, what + ': identical, exit 0',
           None if rc == 0 else {'rc': rc, 'stderr': err, 'first': first(j) if j else None})
    return j


def expect_cause(a, b, cause, what):
    rc, j, err = diff(a, b)
    fd = first(j) if j else None
    if fd is None or fd['cause'] != cause:
        print(text_report(a, b))
    expect(rc == 1 and not j['identical'], what + ': different, exit 1', {'rc': rc, 'stderr': err})
    expect(fd is not None and fd['cause'] == cause, what + ': cause ' + cause,
           fd and {k: fd[k] for k in ('cause', 'summary', 'evidence')})
    return j, fd


def image_copies(prog):
    """The trace's seqs of the copies of each step's images to the GPU."""
    size = training.N * training.C_IN * training.HW * training.HW * 4
    return [e['seq'] for e in prog.events if 'memcpy' in e and e['memcpy']['kind'] == 'hostToDevice'
            and e['memcpy']['size'] == size]


def seq_of(prog, name_part, step=None, nth=0):
    """The trace's seq of the nth launch whose kernel name contains name_part."""
    hits = [e['seq'] for e in prog.events if 'launch' in e and name_part in e['launch']['function'][1]
            and (step is None or e.get('origin', {}).get('step') == step)]
    return hits[nth]


# ------------------------------------------------------------ the hash
@case
def buffer_hash():
    """FORMAT.md section 8 in Python gives the spec's test vectors."""
    table = {0: (None, 0x73f5497ae8b637b3), 65536: (None, 0xe5d04da685dd9331),
             1: ([0xa2dbe620570f2589], 0x27d8ef0eafc13743),
             17: ([0xcde635d9afe7d779], 0xdd60fbf716c31599),
             65537: ([0xaf86ad5257d9885e, 0xa71b5e0145ba6b7e], 0x2bc97a596cfa8b7c),
             70001: ([0xaf86ad5257d9885e, 0x591806f91e474e9c], 0x0e660e0323131a20)}
    for n, (chunks, d) in table.items():
        buf = bufhash.pattern(n)
        expect(bufhash.digest(buf) == d, 'FORMAT.md vector n=%d' % n)
        if chunks:
            expect(bufhash.chunk_digests(buf) == chunks, 'FORMAT.md chunk digests n=%d' % n)
    inc = os.path.join(os.path.dirname(__file__), '..', 'unit', 'hash_vectors.inc')
    vectors = re.findall(r'\{(\d+), 0x([0-9a-f]+)ULL\}', open(inc).read())
    bad = [n for n, d in vectors if bufhash.digest(bufhash.pattern(int(n))) != int(d, 16)]
    expect(len(vectors) > 10 and not bad, '%d vectors of tests/unit/hash_vectors.inc' % len(vectors), bad)


# ------------------------------------------------------------ no false alarms
@case
def identical_runs():
    """Two runs of the same program: other addresses, handles, fresh memory, time."""
    a, pa = record(Variant(seed=1))
    b, pb = record(Variant(seed=2))
    expect(pa.launch_count >= 200, 'a few hundred launches (%d)' % pa.launch_count)
    expect(len([x for x in pa.allocs if x.size == 2 << 20]) >= 3 and
           len([x for x in pa.allocs if x.size == 20 << 20]) >= 2, 'several 2 MiB and 20 MiB segments',
           [(x.size, x.kind) for x in pa.allocs])
    j = expect_identical(a, b, 'same program, other seed')
    ops = process(j)['operations']
    expect(ops['a'] == ops['b'] == ops['matched'] and ops['a'] > 250, 'every operation matched', ops)
    # the same with every input hashed, with expandable segments
    a, _ = record(Variant(seed=3, hash_inputs=True))
    b, _ = record(Variant(seed=4, hash_inputs=True))
    expect_identical(a, b, 'all inputs hashed')
    a, _ = record(Variant(seed=5, expandable=True))
    b, _ = record(Variant(seed=6, expandable=True))
    expect_identical(a, b, 'expandable segments')


@case
def extra_allocation():
    """Run B (or A) makes one extra allocation of a common size and kind that
    nothing uses, at a random place, and its threads interleave otherwise:
    the report must be identical."""
    for s in range(6):
        r = random.Random(s)
        expandable = s % 3 == 2
        size = model.VMM_RESERVE if expandable else (2 << 20) if r.random() < 0.5 else (20 << 20)
        kind = 'vmm' if expandable else 'device'
        at = r.randrange(4, 300)
        # and autograd's thread interleaves otherwise in the run with the extra allocation
        extra = Variant(seed=100 + s, expandable=expandable, hash_inputs=s % 2 == 1, extra_alloc=(at, size, kind),
                        schedule_seed=s)
        plain = Variant(seed=200 + s, expandable=expandable, hash_inputs=s % 2 == 1)
        a, pa = record(plain)
        b, pb = record(extra)
        same = len([x for x in pa.allocs if x.size == size and x.kind == kind])
        expect(len(pb.allocs) == len(pa.allocs) + 1 and same >= 2,
               'seed %d: run B has one more %d MiB %s allocation (at event %d) than the %d of run A'
               % (s, size >> 20, kind, at, same))
        if s % 2:
            a, b = b, a
        expect_identical(a, b, 'seed %d' % s)


@case
def module_ordinals():
    """A kernel's identity is its mangled name, not its module's ordinal
    (FORMAT.md, FunctionDef): run B's autotuner loads three modules before
    the torch kernels', so every later ordinal shifts, and run A numbers its
    modules 1, 5, 9 (ordinals need only be unique): identical. A real
    divergence after it (atomics at step 3) is still found, alone."""
    a, pa = record(Variant(seed=1, module_stride=4))
    b, pb = record(Variant(seed=2, extra_modules=3))
    ordinals = lambda prog: [e['module']['ordinal'] for e in prog.events if 'module' in e]
    expect(ordinals(pa) == [1, 5, 9] and ordinals(pb) == [1, 2, 3, 4, 5, 6], 'the runs number their modules '
           'otherwise', [ordinals(pa), ordinals(pb)])
    expect_identical(a, b, 'kernels of modules numbered otherwise')
    a, _ = record(Variant(seed=3, module_stride=4))
    b, _ = record(Variant(seed=4, extra_modules=3, atomics_step=3))
    j, _ = expect_cause(a, b, "nondeterministicKernel", "atomics at step 3 behind the shifted modules")
    expect(process(j)['blastRadius']['independentCount'] == 0 and process(j)['pathDivergences']['count'] == 0,
           'and nothing else', process(j).get('blastRadius'))


@case
def captured_work():
    """Copies, sets and graph launches enqueued into a CUDA graph's capture
    (FORMAT.md: `captured`) did not run: they are no operations, so a capture
    in one run only, or captures that differ, change nothing, and a later
    divergence is found at the same operation."""
    a, pa = record(Variant(seed=1))
    b, pb = record(Variant(seed=2, capture_step=3))
    captured = [e for e in pb.events if any(isinstance(e.get(k), dict) and e[k].get('captured')
                                             for k in ('memcpy', 'memset', 'graph'))]
    expect(len(captured) == 3, 'run B captures a set, a copy and a graph launch', len(captured))
    j = expect_identical(a, b, 'a capture in run B only')
    ops = process(j)['operations']
    expect(ops['a'] == ops['b'] == ops['matched'], 'the captured work is no operation', ops)
    c, _ = record(Variant(seed=3, capture_step=3, capture_bytes=8192))
    expect_identical(b, c, 'captures whose copies differ in size')
    dump = subprocess.run([GPURR, 'dump', b], capture_output=True, text=True).stdout
    expect(dump.count('captured-into-graph capture=10') == 3, 'gpurr dump marks the three captured events')
    # a divergence after the capture: the same operation as without it
    d, _ = record(Variant(seed=4, atomics_step=5))
    e, _ = record(Variant(seed=5, atomics_step=5, capture_step=3))
    _, plain = expect_cause(a, d, 'nondeterministicKernel', 'atomics at step 5')
    _, with_capture = expect_cause(a, e, 'nondeterministicKernel', 'atomics at step 5, after a capture in run B')
    same = ('index', 'launchIndex')
    expect(plain['a']['seq'] == with_capture['a']['seq'] and
           [plain['b'][k] for k in same] == [with_capture['b'][k] for k in same] and
           with_capture['b']['seq'] == plain['b']['seq'] + 3,
           'the same divergent operation, three events later in run B', [plain['b'], with_capture['b']])


@case
def graph_launches():
    """The optimizer step as one CUDA graph launch whose nodes the recorder
    read (FORMAT.md `graph`: ranges from each address its nodes take to the
    allocation's end, nodeCount > 0). Where fresh memory reads the same in
    every process, two runs are identical, and a graph that adds in another
    order in run B is the first divergence, with its inputs identical and
    vouched for. Where it differs, the first graph launch's ranges hold
    bytes nothing wrote, which differ: reported as uninitialised memory
    (README Limitations)."""
    a, _ = record(Variant(seed=1, graph_optimizer=True))
    b, _ = record(Variant(seed=2, graph_optimizer=True))
    _, fd = expect_cause(a, b, 'uninitialisedMemory', 'fresh memory differs between the runs')
    expect(fd['a']['kind'] == 'graph', 'at a graph launch', fd['a'])
    for hash_inputs in (False, True):
        a, pa = record(Variant(seed=1, graph_optimizer=True, hash_inputs=hash_inputs, fresh_zeros=True))
        b, _ = record(Variant(seed=2, graph_optimizer=True, hash_inputs=hash_inputs, schedule_seed=3,
                              fresh_zeros=True))
        graphs = [e for e in pa.events if 'graph' in e]
        allocs = len([e for e in pa.events if 'alloc' in e])
        expect(len(graphs) == 8 and all(e['graph']['nodeCount'] == 3 and
                                        0 < len(e['graph']['outputs']) < allocs for e in graphs),
               'a graph launch a step, read node by node, hashing some of the %d allocations' % allocs,
               [len(e['graph']['outputs']) for e in graphs])
        expect_identical(a, b, 'graph launches (hash inputs %s)' % hash_inputs)
        c, _ = record(Variant(seed=3, graph_optimizer=True, hash_inputs=hash_inputs, graph_atomics_step=4,
                              fresh_zeros=True))
        j, fd = expect_cause(a, c, 'nondeterministicKernel', 'the graph adds in another order at step 4 '
                             '(hash inputs %s)' % hash_inputs)
        expect(fd['a']['seq'] == graphs[4]['seq'], 'the graph launch of step 4', fd['a'])
        expect(fd['inputs']['identical'] and fd['inputs']['uncompared'] == 0,
               'its inputs identical, none left uncompared', fd['inputs'])


@case
def interleaving():
    """Autograd's thread and the main thread interleave at random in every
    run (the metrics stream, the next batch's copies): identical."""
    a, pa = record(Variant(seed=1, schedule_seed=0))
    for s in range(1, 6):
        b, pb = record(Variant(seed=1 + s, schedule_seed=s, expandable=False))
        order_a = [(e['thread'], sorted(k for k in e if k not in ('seq', 'timeNs', 'thread', 'origin'))[0]) for e in pa.events]
        order_b = [(e['thread'], sorted(k for k in e if k not in ('seq', 'timeNs', 'thread', 'origin'))[0]) for e in pb.events]
        expect(order_a != order_b, 'schedule %d interleaves the threads otherwise' % s)
        expect_identical(a, b, 'schedule %d' % s)


@case
def loader_thread():
    """A DataLoader thread of its own copies each batch on the copy stream and
    waits for the copies; the main thread reads the batch on the compute
    stream, handed over by the host: no CUDA event orders the two, only the
    data (and the allocator's record_stream event, queried before a batch's
    blocks are handed out again). Interleaved otherwise in every run:
    identical, so the data dependencies between the threads add no order the
    interleaving changes. One pixel of step 3's batch differs: named at its
    copy, with every later difference read from it."""
    a, pa = record(Variant(seed=1, loader_thread=True))
    expect(all(e['thread'] == training.LOADER for e in pa.events if 'memcpy' in e and
               e['memcpy']['kind'] == 'hostToDevice' and e.get('origin', {}).get('line') == 55),
           'the batches are copied by the loader\'s thread')
    for s in (1, 2, 3):
        b, _ = record(Variant(seed=1 + s, schedule_seed=s, loader_thread=True))
        expect_identical(a, b, 'schedule %d' % s)
    b, _ = record(Variant(seed=5, schedule_seed=4, loader_thread=True, host_input_step=3))
    j, fd = expect_cause(a, b, 'hostInput', 'one pixel of step 3')
    copies = image_copies(pa)
    expect(fd['a']['kind'] == 'memcpy' and fd['a']['seq'] == copies[3], 'at the copy of step 3\'s images', fd['a'])
    br = process(j)['blastRadius']
    expect(br['independentCount'] == 0 and br['taintedOperations'] > 0,
           'every later difference reads data derived from it', br)


@case
def second_thread_after_a_long_start():
    """The runs agree on a long start of the main thread alone (a large
    model's initialisation: thousands of operations, which the diff gives up
    as it goes), then autograd's thread shows up in the first backward pass
    and the two threads interleave otherwise in each run: identical. With one
    pixel of the first batch changed, the runs differ before autograd's
    thread shows up: named at the batch's copy."""
    # Small blocks: the diff sees the first batch differ a few blocks
    # before it sees autograd's thread.
    a, pa = record(Variant(seed=1, init_sets=2500), events_per_block=8)
    expect(sum('memset' in e for e in pa.events) > 2500, 'a start of over 2,500 operations on the main thread')
    for s in (1, 2):
        b, _ = record(Variant(seed=1 + s, schedule_seed=s, init_sets=2500), events_per_block=8)
        expect_identical(a, b, 'schedule %d' % s)
    b, _ = record(Variant(seed=4, schedule_seed=3, init_sets=2500, host_input_step=0), events_per_block=8)
    j, fd = expect_cause(a, b, 'hostInput', 'one pixel of the first batch')
    copies = image_copies(pa)
    expect(fd['a']['kind'] == 'memcpy' and fd['a']['seq'] == copies[0], 'at the copy of the first batch', fd['a'])
    br = process(j)['blastRadius']
    expect(br['independentCount'] == 0 and br['taintedOperations'] > 0,
           'every later difference reads data derived from it', br)


@case
def benign_race():
    """The metrics launch of the main thread reaches the driver two places
    later, among autograd's launches: no data difference, identical."""
    a, pa = record(Variant(seed=1))
    b, pb = record(Variant(seed=2, metrics_later=2))
    name = 'CUDAFunctor_add'

    def position(prog):
        """autograd's operations before step 1's metrics launch"""
        ops = [e for e in prog.events if 'launch' in e or 'memcpy' in e or 'memset' in e]
        metric = [e for e in ops if e.get('origin', {}).get('op') == 'aten::add_' and e['origin']['step'] == 1][0]
        return len([e for e in ops if e['thread'] == 1 and e['seq'] < metric['seq']])
    expect(position(pb) == position(pa) + 2, 'the metrics launch comes two operations later in run B (after %d, %d of autograd\'s)'
           % (position(pa), position(pb)))
    expect_identical(a, b, 'metrics launch two places later')


@case
def data_race():
    """A reordering that changes data: the main thread zeroes a gradient norm
    before, in run B after, autograd's thread adds to it; on the same stream
    (the stream's order differs), then on another stream without
    synchronisation (a race the canonical order cannot hide)."""
    a, pa = record(Variant(seed=1, race_step=2))
    b, _ = record(Variant(seed=2, race_step=2, race_late=True))
    rc, j, err = diff(a, b)
    expect(rc == 1 and not j['identical'] and first(j) is not None, 'same stream: found, exit 1', {'rc': rc, 'err': err})
    fd, p = first(j), process(j)
    memset = [e['seq'] for e in pa.events if 'memset' in e and e['origin']['step'] == 2 and e['origin']['line'] == 34]
    expect(fd['path'] and fd['a'] is not None and fd['a']['seq'] == memset[0], 'at the memset of step 2, moved', fd['a'])
    expect(fd['cause'] == 'reordered' and fd['b'] is not None and fd['b']['seq'] > memset[0] and
           fd['b']['origin']['line'] == 34, 'reordered: the same memset, later in run B', fd)
    moved = fd['stretch']['reordered']
    expect(moved is not None and moved['count'] == 1 and moved['crossed'] > 0, 'moved later', moved)
    expect(any('of host thread 1' in e for e in fd['evidence']) and
           any('host thread 0 issued its own operations in another order' in e for e in fd['evidence']),
           'it crossed autograd\'s launches; the main thread changed its own order', fd['evidence'])
    expect(any(e.startswith('1 of the operations it crossed touches its bytes: #%d ' % seq_of(pa, 'NormOps', step=2))
               and 'aten::norm' in e and 'on host thread 1' in e for e in fd['evidence']),
           'the one it crossed that touches its bytes: autograd\'s norm of step 2', fd['evidence'])
    expect(p['pathDivergences']['count'] == 2 and all(s['reordered'] for s in p['pathDivergences']['listed']) and
           p['pathDivergences']['listed'][1]['readsTaintedData'],
           'two path divergences, both ends of the move, the second explained by the first', p['pathDivergences'])
    expect(p['blastRadius']['independentCount'] == 0 and p['blastRadius']['explainedByTaint'] > 0,
           'no independent divergence: what differs after it reads what the move changed', p['blastRadius'])
    a, pa = record(Variant(seed=1, race_step=2, race_stream='side'))
    b, _ = record(Variant(seed=2, race_step=2, race_stream='side', race_late=True))
    rc, j, err = diff(a, b)
    if rc != 1:
        print(text_report(a, b))
    expect(rc == 1 and not j['identical'] and first(j) is not None, 'across streams: found, exit 1', {'rc': rc, 'err': err})
    fd = first(j)
    expect(fd['a']['seq'] == seq_of(pa, 'NormOps', step=2), 'at the norm of step 2', fd['a'])
    # first use: the norm hashes what the side stream wrote last in run A
    # only; nothing vouches for it, so the kernel is not blamed
    expect(fd['cause'] == 'unknown' and fd['inputs']['uncompared'] >= 1 and
           any('race between streams' in e for e in fd['evidence']),
           'across streams, first use: unknown, a race between streams named', fd)
    # every input hashed: the norm's input differs though its writers agree
    a, pa = record(Variant(seed=1, race_step=2, race_stream='side', hash_inputs=True))
    b, _ = record(Variant(seed=2, race_step=2, race_stream='side', race_late=True, hash_inputs=True))
    j, fd = expect_cause(a, b, 'unknown', 'across streams, all inputs hashed')
    expect(fd['a']['seq'] == seq_of(pa, 'NormOps', step=2) and any('race between streams' in e for e in fd['evidence']),
           'at the norm of step 2, a race between streams named', fd['evidence'])


@case
def write_history_holes():
    """Traces hashing inputs at first use, where the write history cannot
    vouch for what a launch read: bytes written without a digest (a launch
    whose hash was dropped, a 2D copy: the writer counts them untouched
    again, so their next reader hashes them; a launch whose hash failed later,
    on the GPU: they stay touched), a range hashed in one run only,
    a first use that a launch only reads and whose outputs do not show it.
    The diff must not blame the kernel."""
    import numpy as np

    def program(scenario, seed, variant, hash_inputs=False):
        p = model.Program(seed, hash_inputs=hash_inputs)
        mod = p.module(0, b'\x7fELF k' + bytes(range(256)))
        stream = 0x100

        def origin(op, line):
            return {'op': op, 'opStack': [op], 'phase': 'forward', 'forwardOp': '', 'module': 'm',
                    'file': 't.py', 'line': line, 'step': 0}

        def launch(name, params, compute, op, line):
            return p.launch(0, stream, mod, name, (1, 1, 1), (32, 1, 1), params, compute, origin=origin(op, line))
        x, y, z = (p.empty(0, stream, 4096) for _ in range(3))
        p.memset(0, stream, y, 0, origin=origin('aten::zero_', 1))
        p.memset(0, stream, z, 0, origin=origin('aten::zero_', 1))
        if scenario in ('unhashed_writer', 'hash_lost_on_gpu'):  # W's hash was dropped: no outputs, not hashed
            p.memset(0, stream, x, 0, origin=origin('aten::zero_', 2))
            w = launch('_Z1Wv', [model.Ptr(x, 'w')], lambda: x.put(np.full(1024, 1.0 + variant * 1e-7, np.float32)),
                       'aten::index_add_', 3)
            w['launch']['outputs'] = []
            w['launch']['notHashed'] = True
            if scenario == 'unhashed_writer':  # known when W was launched: x counts untouched again
                p.untouched(x)
            else:  # known only later, on the GPU (FORMAT.md): x stays touched, R does not hash it
                w['launch']['annotations'] = [{'note': 'not hashed: the wait limit passed'}]
            launch('_Z1Rv', [model.Ptr(x, 'r'), model.Ptr(y, 'w')], lambda: y.put(x.f32() * 2), 'aten::mul', 4)
        elif scenario == 'copy_2d':  # a 2D copy of host data into x: no digest
            p.memset(0, stream, x, 0, origin=origin('aten::zero_', 2))
            launch('_Z1Av', [model.Ptr(x, 'r'), model.Ptr(y, 'w')], lambda: y.put(x.f32() + 1), 'aten::add', 3)
            x.put(np.full(1024, float(variant), np.float32))
            p.emit(0, 'memcpy', {'kind': 'hostToDevice', 'stream': stream, 'async': True, 'size': 4096,
                                 'dst': p._drange(x), 'src': {'address': 0x600000001000, 'size': 4096}, 'digest': 0},
                   origin('aten::copy_', 4))
            p.untouched(x)
            launch('_Z1Mv', [model.Ptr(x, 'r'), model.Ptr(z, 'w')], lambda: z.put(x.f32() * 3), 'aten::mul', 5)
        elif scenario == 'one_sided':  # run B's hash before the launch was refused
            c = launch('_Z1Cv', [model.Ptr(x, 'r'), model.Ptr(z, 'w')], lambda: z.put(x.bytes().copy()),
                       'aten::clone', 2)
            if variant == 1:
                c['launch']['inputs'] = []
        elif scenario == 'copy_digest':  # the same upload; in run B its hash failed: no digest
            c = p.h2d(0, stream, x, np.arange(1024, dtype=np.float32), origin=origin('aten::copy_', 2))
            if variant == 1:
                c['memcpy']['digest'] = 0
                p.untouched(x)
            launch('_Z1Mv', [model.Ptr(x, 'r'), model.Ptr(z, 'w')], lambda: z.put(x.f32() * 3), 'aten::mul', 3)
        elif scenario == 'read_first_use':  # x holds stale bytes; the first launch's output ignores them
            launch('_Z1Lv', [model.Ptr(x, 'r'), model.Ptr(y, 'w')], lambda: y.put(np.zeros(1024, np.float32)),
                   'aten::where', 2)
            launch('_Z1Kv', [model.Ptr(x, 'r'), model.Ptr(z, 'w')], lambda: z.put(x.bytes().copy()), 'aten::clone', 3)
        _count[0] += 1
        path = os.path.join(TMP, '%s-%d.gpurr' % (scenario, _count[0]))
        p.write(path)
        verify(path)
        return path, p

    for scenario, reader, evidence in (('unhashed_writer', '_Z1Rv', 'write gpurr did not record'),
                                       ('hash_lost_on_gpu', '_Z1Rv', 'without a digest'),
                                       ('copy_2d', '_Z1Mv', 'write gpurr did not record'),
                                       ('one_sided', '_Z1Cv', 'in one run only'),
                                       ('read_first_use', '_Z1Kv', 'read at its first use with different bytes')):
        a, pa = program(scenario, 1, 0)
        b, _ = program(scenario, 2, 1)
        j, fd = expect_cause(a, b, 'unknown', scenario)
        expect(fd['a']['seq'] == seq_of(pa, reader) and any(evidence in e for e in fd['evidence']),
               scenario + ': at the reader, saying why', fd)
    # A copy without its digest in one run is compared with nothing.
    a, _ = program('copy_digest', 1, 0)
    b, _ = program('copy_digest', 2, 1)
    expect_identical(a, b, 'a copy whose digest is missing in one run')
    # The same run recorded hashing inputs at first use and hashing them
    # all: identical (a range hashed in one of them only is no difference).
    for scenario in ('read_first_use', 'copy_2d'):
        a, _ = program(scenario, 1, 0)
        b, _ = program(scenario, 1, 0, hash_inputs=True)
        expect_identical(a, b, scenario + ', first use against every input')


# ------------------------------------------------------------ the divergence named right
@case
def extra_kernel_workspace():
    """Run B runs one extra kernel with a 2 MiB workspace of its own (a common
    size: the caching allocator's small segments are 2 MiB too): one path
    divergence there, nothing tainted after it."""
    a, pa = record(Variant(seed=1))
    b, pb = record(Variant(seed=2, extra_kernel_step=3))
    j, fd = expect_cause(a, b, 'algorithmChoice', 'extra kernel')
    p = process(j)
    st = fd['stretch']
    expect(fd['path'] and fd['a'] is None and st['a']['count'] == 0 and st['b']['count'] == 1,
           'a stretch of nothing in run A and one operation in run B', st)
    expect(fd['b']['seq'] == seq_of(pb, 'splitKreduce') and 'splitKreduce' in fd['b']['name'],
           'run B\'s stretch is the extra kernel (#%d)' % fd['b']['seq'], fd['b'])
    expect(p['pathDivergences']['count'] == 1, '1 path divergence', p['pathDivergences'])
    br = p['blastRadius']
    expect(br['taintedOperations'] == 0 and br['laterDivergentOperations'] == 0 and br['independentCount'] == 0,
           'no later operation tainted or divergent', br)


@case
def written_only_ranges():
    """Every input hashed (hashInputs), and the writer leaves out of a
    launch's inputs the ranges it only writes (FORMAT.md section 3): run B's
    cuDNN times a benchmark candidate at step 2 that writes a tensor of the
    conv's size, freed before the conv's output takes its block. One path
    divergence there; the conv only writes that block, so nothing after it
    reads data derived from the candidate. Where the writer lists the block
    among the conv's inputs too (it may be read), the conv reads it."""
    a, _ = record(Variant(seed=1, hash_inputs=True, written_out_of_inputs=True))
    b, pb = record(Variant(seed=2, hash_inputs=True, written_out_of_inputs=True, autotune_step=2))
    j, fd = expect_cause(a, b, 'algorithmChoice', 'a benchmark candidate in run B')
    expect(fd['b']['seq'] == seq_of(pb, 'bench_candidate'), 'the first divergence is the candidate', fd['b'])
    p = process(j)
    expect(p['pathDivergences']['count'] == 1 and p['blastRadius']['taintedOperations'] == 0 and
           p['blastRadius']['independentCount'] == 0, 'nothing read what it wrote', p['blastRadius'])
    a, _ = record(Variant(seed=3, hash_inputs=True))
    b, _ = record(Variant(seed=4, hash_inputs=True, autotune_step=2))
    j, _ = expect_cause(a, b, 'algorithmChoice', 'the same, its block among the conv\'s inputs')
    expect(process(j)['blastRadius']['taintedOperations'] > 0, 'the conv reads it: tainted',
           process(j)['blastRadius'])


@case
def pointer_parameter():
    """Same kernel and shape, one pointer 128 bytes earlier (a slice at
    another offset), or into another allocation: scalar parameters, with the
    operand and both sides' allocation and offset."""
    a, pa = record(Variant(seed=1))
    for target, words in (('slice', ['128 bytes earlier in run B', 'the same allocation']),
                          ('other', ['another allocation'])):
        b, pb = record(Variant(seed=2, pointer_step=2, pointer_target=target))
        j, fd = expect_cause(a, b, 'scalarParameters', 'pointer (%s)' % target)
        expect(not fd['path'] and fd['a']['seq'] == seq_of(pa, 'CUDAFunctor_add', step=2),
               'the add of step 2, matched one to one', fd['a'])
        ptr = [d for d in fd['params']['differing'] if d['meaning'] == 'pointer']
        expect(len(ptr) == 1 and ptr[0]['param'] == 3 and ptr[0]['offset'] == 0x18,
               'parameter 3 (bytes 0x18-0x20) differs as a pointer', fd['params'])
        ev = ' '.join(fd['evidence'])
        m = re.search(r'run A offset (0x[0-9a-f]+) of alloc#(\d+).*run B offset (0x[0-9a-f]+) of alloc#(\d+)', ev)
        expect(m is not None, 'evidence names allocation and offset on each side', fd['evidence'])
        ea = [e for e in pa.events if e['seq'] == fd['a']['seq']][0]['launch']['pointers']
        eb = [e for e in pb.events if e['seq'] == fd['b']['seq']][0]['launch']['pointers']
        pa3 = [x for x in ea if x['byteOffset'] == 0x18][0]
        expect(int(m.group(1), 16) == pa3['offset'] and int(m.group(2)) == pa3['allocation'],
               'run A side: alloc#%d+0x%x as written' % (pa3['allocation'], pa3['offset']))
        pb3 = [x for x in eb if x['byteOffset'] == 0x18][0]
        expect(int(m.group(3), 16) == pb3['offset'], 'run B side: offset 0x%x as written' % pb3['offset'])
        for w in words:
            expect(w in ev, 'evidence says "%s"' % w, fd['evidence'])
        expect(process(j)['pathDivergences']['count'] == 0, 'no path divergence', process(j)['pathDivergences'])


@case
def nondeterministic_kernel():
    """index_add's atomics add in another order in run B."""
    for hash_inputs in (False, True):
        a, pa = record(Variant(seed=1, hash_inputs=hash_inputs))
        b, _ = record(Variant(seed=2, hash_inputs=hash_inputs, atomics_step=2))
        j, fd = expect_cause(a, b, 'nondeterministicKernel', 'atomics (hash inputs %s)' % hash_inputs)
        expect(fd['a']['seq'] == seq_of(pa, 'indexFuncLargeIndex', step=2), 'the index_add of step 2', fd['a'])
        expect(fd['inputs']['identical'] and fd['params']['identical'], 'inputs and parameters identical')
        expect(any(k['matchedBy'] == 'framework op' and 'index_add' in k['op'] for k in fd['known']),
               'known culprit: index_add, by its framework op', fd['known'])
        out = fd['outputs']['differing']
        expect(len(out) == 1 and out[0]['chunks'] == 20 and 1 <= out[0]['differingChunks'] < 20,
               'the embedding gradient differs in some of its 20 chunks', out)
        p = process(j)
        expect(p['pathDivergences']['count'] == 0 and p['blastRadius']['independentCount'] == 0,
               'no path divergence, no independent divergence', p['blastRadius'])


@case
def host_addresses_in_parameters():
    """Recorded with the host's layout randomised (gpurr record --aslr):
    index_add's functor reference, a host address, differs in every launch.
    Alone it is no difference; with the atomics of step 2 in another order,
    the kernel is still the cause, not its parameters."""
    a, pa = record(Variant(seed=1, host_layout=1))
    b, _ = record(Variant(seed=2, host_layout=2))
    expect_identical(a, b, 'host addresses alone')
    b, _ = record(Variant(seed=2, host_layout=2, atomics_step=2))
    j, fd = expect_cause(a, b, 'nondeterministicKernel', 'atomics, host addresses differing')
    expect(fd['a']['seq'] == seq_of(pa, 'indexFuncLargeIndex', step=2), 'the index_add of step 2', fd['a'])
    diff = fd['params']['differing']
    expect(len(diff) == 1 and diff[0]['meaning'] == 'host addresses' and diff[0]['param'] == 4,
           'parameter 4 differs, as host addresses', fd['params'])
    expect(any('host addresses in no recorded allocation' in e for e in fd['evidence']),
           'the evidence says why they do not count', fd['evidence'])
    p = process(j)
    expect(p['blastRadius']['independentCount'] == 0, 'no independent divergence', p['blastRadius'])


@case
def heap_addresses_in_parameters():
    """index_add's functor is a heap object below 4 GiB, where a non-PIE
    Python keeps its heap with the layout fixed, at another place in each
    run. The trace's host regions (the index) say it is host memory: no
    difference, and with the atomics of step 2 the kernel is the cause. A
    trace without host regions (an older recorder) has no such evidence: the
    value counts, and the parameters are blamed as they were on a GPU."""
    a, pa = record(Variant(seed=1, host_heap=1))
    b, _ = record(Variant(seed=2, host_heap=2))
    expect_identical(a, b, 'heap addresses alone')
    c, _ = record(Variant(seed=2, host_heap=2, atomics_step=2))
    j, fd = expect_cause(a, c, 'nondeterministicKernel', 'atomics, heap addresses differing')
    diff = fd['params']['differing']
    expect(len(diff) == 1 and diff[0]['meaning'] == 'host addresses' and diff[0]['param'] == 4,
           'parameter 4 differs, as host addresses', fd['params'])
    d, _ = record(Variant(seed=2, host_heap=2, atomics_step=2), host_regions=())
    j, fd = expect_cause(a, d, 'scalarParameters', 'atomics, heap addresses, run B without host regions')
    expect(fd['params']['differing'][0]['meaning'] == '', 'no meaning claimed', fd['params'])


@case
def snapshots_and_chunks():
    """Chunks of 1 KiB (hashChunkBytes) and snapshots of some of step 2's
    launches: gpurr verify re-hashes every snapshot against the Python hash;
    the diff locates the atomics' difference by chunk and by value."""
    a, pa = record(Variant(seed=1, chunk_bytes=1024, snapshot_step=2))
    b, _ = record(Variant(seed=2, chunk_bytes=1024, snapshot_step=2, atomics_step=2))
    for t in (a, b):
        rc, j = verify(t)
        expect(j['snapshots'] >= 8, 'verify re-hashed %d snapshots of %s' % (j['snapshots'], os.path.basename(t)), j)
    j, fd = expect_cause(a, b, 'nondeterministicKernel', 'atomics, with snapshots')
    expect(fd['a']['seq'] == seq_of(pa, 'indexFuncLargeIndex', step=2), 'the index_add of step 2', fd['a'])
    out = [d for d in fd['outputs']['differing'] if d['a']['size'] == training.VOCAB * training.DIM * 4]
    expect(len(out) == 1, 'the embedding gradient differs', fd['outputs'])
    d = out[0]
    expect(d['chunkBytes'] == 0, 'no chunk digests for a range of 1250 chunks (FORMAT.md: 2 to 256)',
           {k: d[k] for k in ('chunkBytes', 'chunks', 'differingChunks')})
    v = d.get('values') or {}
    spans = d['differingSpans']
    expect(spans and all(e - b <= 8 for b, e in spans[:5]), 'differing spans at byte granularity: %s' % spans[:3], spans[:5])
    expect(v.get('differingBytes', 0) > 0 and v.get('differingFloat32', 0) >= 1 and v.get('maxAbsDiff', 1) < 1e-3,
           'from the snapshots: %s bytes, %s float32 values differ, max |d| %s'
           % (v.get('differingBytes'), v.get('differingFloat32'), v.get('maxAbsDiff')), d)


@case
def rng_state():
    """Dropout's Philox seed, then its offset, differ."""
    a, pa = record(Variant(seed=1))
    b, _ = record(Variant(seed=2, philox_seed=0xbad5eed))
    j, fd = expect_cause(a, b, 'rngState', 'Philox seed')
    expect(fd['a']['seq'] == seq_of(pa, 'fused_dropout', step=0), 'the first dropout', fd['a'])
    expect(any(d['meaning'] == 'philox seed/offset' for d in fd['params']['differing']),
           'the differing parameter is the Philox state', fd['params'])
    b, _ = record(Variant(seed=2, philox_offset_step=3))
    j, fd = expect_cause(a, b, 'rngState', 'Philox offset')
    expect(fd['a']['seq'] == seq_of(pa, 'fused_dropout', step=3), 'the dropout of step 3', fd['a'])


# Unset, PyTorch draws its CUDA generator's seed at random, 53 bits wide.
SEED_A, SEED_B = 0x1b2f5e07c4d9a3, 0x0e61d4a8f9b207


@case
def philox_inside_struct():
    """scaled_dot_product_attention with dropout, as memory-efficient
    attention runs it: the Philox state lies inside the kernel's one
    parameter, a struct, beside a heap address that differs anyway. The
    recorder cannot decode it there; the diff finds it by the seed the run's
    dropout launches take."""
    a, pa = record(Variant(seed=1, attention=True, philox_seed=SEED_A, host_heap=1))
    b, _ = record(Variant(seed=2, attention=True, philox_seed=SEED_B, host_heap=2))
    j, fd = expect_cause(a, b, 'rngState', 'unseeded runs')
    expect(fd['a']['seq'] == seq_of(pa, 'fmha_cutlassF', step=0), 'the first attention launch', fd['a'])
    differing = fd['params']['differing']
    expect(len(differing) == 1 and differing[0]['param'] == 0 and differing[0]['meaning'] == 'philox seed/offset',
           'its one parameter differs, as the Philox state', differing)
    expect(any('inside parameter 0' in e and 'seed=%d offset=16' % SEED_A in e and 'seed=%d' % SEED_B in e
               for e in fd['evidence']), 'the evidence gives both seeds, inside parameter 0', fd['evidence'])
    b, _ = record(Variant(seed=2, attention=True, philox_seed=SEED_A, host_heap=2, philox_offset_step=3))
    j, fd = expect_cause(a, b, 'rngState', 'the same seed, the offset advanced from step 3')
    expect(fd['a']['seq'] == seq_of(pa, 'fmha_cutlassF', step=3), 'the attention launch of step 3', fd['a'])
    # A seed no Philox launch of the run took, or a small one both runs share:
    # any field may hold such a value, and nothing says it is a seed.
    b, _ = record(Variant(seed=2, attention=True, philox_seed=SEED_A, attention_seed=SEED_B, host_heap=2))
    expect_cause(a, b, 'scalarParameters', 'a seed the run\'s Philox launches never took')
    a, _ = record(Variant(seed=1, attention=True, philox_seed=42))
    b, _ = record(Variant(seed=2, attention=True, philox_seed=42, philox_offset_step=3))
    expect_cause(a, b, 'scalarParameters', 'torch.manual_seed(42) in both, the offset advanced')


@case
def host_input():
    """One pixel of step 3's batch differs."""
    for capture in (False, True):
        a, pa = record(Variant(seed=1, capture_host_data=capture))
        b, pb = record(Variant(seed=2, capture_host_data=capture, host_input_step=3))
        j, fd = expect_cause(a, b, 'hostInput', 'host input (captured %s)' % capture)
        copies = image_copies(pa)
        expect(fd['a']['kind'] == 'memcpy' and fd['a']['seq'] == copies[3], 'the copy of step 3\'s images', fd['a'])
        if capture:
            expect(any('123' in e or '0x1ec' in e for e in fd['evidence']), 'evidence locates the byte (float 123)',
                   fd['evidence'])


@case
def algorithm_choice():
    """cuDNN picks an FFT engine (three kernels) at step 2."""
    a, pa = record(Variant(seed=1))
    b, pb = record(Variant(seed=2, algo_step=2))
    j, fd = expect_cause(a, b, 'algorithmChoice', 'FFT engine')
    st = fd['stretch']
    expect(st['a']['count'] == 1 and st['b']['count'] == 3, 'one kernel in run A, three in run B', st)
    expect(fd['a']['seq'] == seq_of(pa, 'fprop_implicit_gemm', step=2) and 'fft_r2c' in fd['b']['name'],
           'at step 2\'s convolution', fd)
    expect(any('engine=12' in e for e in fd['evidence']) and any('engine=3' in e for e in fd['evidence']),
           'evidence shows both engines', fd['evidence'])


@case
def uninitialised_memory():
    """The mean kernel reads a torch.empty buffer nothing wrote (both runs)."""
    a, pa = record(Variant(seed=1, uninit_step=2))
    b, _ = record(Variant(seed=2, uninit_step=2))
    j, fd = expect_cause(a, b, 'uninitialisedMemory', 'torch.empty read')
    expect(fd['a']['seq'] == seq_of(pa, 'reduce_kernel', step=2), 'the mean of step 2', fd['a'])
    d = [x for x in fd['inputs']['differing'] if x.get('unwrittenBytes')]
    expect(len(d) == 1 and d[0]['a']['size'] == 12 << 20, 'the 12 MiB buffer, never written', fd['inputs'])


@case
def inplace_op_on_empty_memory():
    """An in-place op (addcmul_) on a torch.empty buffer reads its garbage,
    while the functor it takes by value holds stack bytes that differ too (as
    empty_read.py showed on a GPU): uninitialised memory, not the parameters.
    An op that overwrites what it writes (copy_) is not taken to read it: its
    buffer's old contents are set aside and the parameters explain it. Where
    the trace says whether the op works in place (Origin.inPlace), that
    decides, not the op's name."""
    a, pa = record(Variant(seed=1, inplace_empty_step=2))
    b, _ = record(Variant(seed=2, inplace_empty_step=2))
    j, fd = expect_cause(a, b, 'uninitialisedMemory', 'in-place op on torch.empty')
    expect(fd['a']['seq'] == seq_of(pa, 'AddcmulFunctor', step=2), 'the addcmul_ of step 2', fd['a'])
    expect(any('aten::addcmul_ works in place' in e for e in fd['evidence']), 'the evidence says it works in place',
           fd['evidence'])
    a, _ = record(Variant(seed=1, inplace_empty_step=2, inplace_op='aten::copy_'))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, inplace_op='aten::copy_'))
    j, fd = expect_cause(a, b, 'scalarParameters', 'copy_ onto torch.empty with other functor bytes')
    expect(not any('works in place' in e for e in fd['evidence']), 'copy_: not in place', fd['evidence'])
    expect(any("an output buffer's old contents" in e for e in fd['evidence']),
           'the evidence sets the old contents aside', fd['evidence'])
    # Batch norm updates running statistics that Module.to_empty left
    # uninitialised: its name does not say it works in place, its schema
    # (Origin.inPlace) does. Without the field, the name rule sets the old
    # contents aside and blames the functor bytes.
    a, _ = record(Variant(seed=1, inplace_empty_step=2, inplace_op='aten::native_batch_norm', inplace_schema='yes'))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, inplace_op='aten::native_batch_norm', inplace_schema='yes'))
    j, fd = expect_cause(a, b, 'uninitialisedMemory', 'batch norm on running statistics left by to_empty')
    expect(any('aten::native_batch_norm works in place' in e for e in fd['evidence']),
           'the evidence says batch norm works in place', fd['evidence'])
    a, _ = record(Variant(seed=1, inplace_empty_step=2, inplace_op='aten::native_batch_norm'))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, inplace_op='aten::native_batch_norm'))
    expect_cause(a, b, 'scalarParameters', 'batch norm without Origin.inPlace: the name rule')
    # A word of the functor that holds a stale device address in run A only
    # (empty_read.py on an H200): the recorder counts one more pointer there,
    # and hashes one more range. The launches still pair up (same kernel and
    # launch configuration), and the unwritten accumulator is the cause.
    a, pa = record(Variant(seed=1, inplace_empty_step=2, stale_pointer=True))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, stale_pointer=True))
    j, fd = expect_cause(a, b, 'uninitialisedMemory', 'in-place op with a stale device address in one run')
    expect(fd['a']['seq'] == seq_of(pa, 'AddcmulFunctor', step=2), 'the addcmul_ of step 2', fd['a'])
    # The accumulator pairs with its counterpart; the range hashed through
    # the stale address, run A's alone, weighs nothing (DIFF.md): it is not
    # listed, and the evidence says it was left out.
    outs = fd['outputs']['differing']
    expect(any(o['a']['size'] == o['b']['size'] > 0 for o in outs) and
           not any(o['a']['size'] == 0 or o['b']['size'] == 0 for o in outs),
           'the accumulator compared, the stale range not', outs)
    expect(any('1 stale word' in e and '1 range hashed through it in one run alone' in e for e in fd['evidence']),
           'the evidence names the stale word and its range', fd['evidence'])
    # An op the schema says writes only its outputs is not in place, whatever its name.
    a, _ = record(Variant(seed=1, inplace_empty_step=2, inplace_schema='no'))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, inplace_schema='no'))
    expect_cause(a, b, 'scalarParameters', "Origin.inPlace 'no' overrides the name")


@case
def stale_word_alone():
    """The in-place op's functor holds a stale device address in run A only
    (as ReduceOp's and TensorListMetadata's unwritten words did on an H200),
    and fresh memory reads zeros in both runs, so the op computes the same
    bits: the launches pair up despite the stale word, the range hashed
    through it is run A's alone, and the runs are identical. The report says
    which launch was paired so, in text, JSON and HTML."""
    a, pa = record(Variant(seed=1, inplace_empty_step=2, stale_pointer=True, fresh_zeros=True))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, stale_pointer=True, fresh_zeros=True))
    j = expect_identical(a, b, 'a stale device address in one run only, the same bits computed')
    paired = process(j).get('pairedDespite', {}).get('staleWords')
    expect(paired is not None and paired['count'] == 1, 'one launch paired despite a stale word', paired)
    expect(paired['first']['seq'] == seq_of(pa, 'AddcmulFunctor', step=2), 'the addcmul_ of step 2', paired)
    expect('paired despite a stale word' in text_report(a, b), 'the text report says so')
    page = os.path.join(os.path.dirname(a), 'report.html')
    subprocess.run([GPURR, 'diff', '--html', page, a, b], capture_output=True)
    with open(page, encoding='utf-8') as f:
        expect('1 launch paired despite a stale word' in f.read(), 'the HTML page says so')


@case
def dead_device_address():
    """The in-place op's functor holds, in both runs, a device address where
    no allocation is live at the launch (memory freed long before), other in
    each run: no pointer (FORMAT.md section 4), and the host-address rule
    takes it as an address a kernel does not read through (DIFF.md, params):
    identical where the op computes the same bits. Where fresh memory differs,
    the cause is the uninitialised memory, not the word."""
    a, _ = record(Variant(seed=1, inplace_empty_step=2, stale_pointer='dead', fresh_zeros=True))
    b, _ = record(Variant(seed=2, inplace_empty_step=2, stale_pointer='dead', fresh_zeros=True))
    expect_identical(a, b, 'a dead device address in a functor, the same bits computed')
    a, _ = record(Variant(seed=3, inplace_empty_step=2, stale_pointer='dead'))
    b, _ = record(Variant(seed=4, inplace_empty_step=2, stale_pointer='dead'))
    _, fd = expect_cause(a, b, 'uninitialisedMemory', 'the same op on fresh memory that differs')
    marked = [d for d in fd['params']['differing'] if d.get('meaning') == 'host addresses']
    expect(len(marked) == len(fd['params']['differing']) == 1, 'the word marked host addresses', fd['params'])


@case
def environment():
    """CUBLAS_WORKSPACE_CONFIG unset in run B, where cuBLAS splits K at step 1;
    and an environment difference alone, with equal data."""
    env_b = {'PYTHONHASHSEED': '0'}
    a, pa = record(Variant(seed=1))
    b, _ = record(Variant(seed=2, split_k_step=1, env=env_b))
    j, fd = expect_cause(a, b, 'environment', 'split-K without CUBLAS_WORKSPACE_CONFIG')
    expect(fd['mechanism'] == 'nondeterministicKernel', 'mechanism: nondeterministic kernel', fd['mechanism'])
    expect(fd['a']['seq'] == seq_of(pa, 'tn_n_tilesize128x64x32', step=1), 'the linear layer of step 1', fd['a'])
    envs = process(j)['environment']
    expect(any(e['field'] == 'env CUBLAS_WORKSPACE_CONFIG' and e['a'] == ':4096:8' and e['b'] is None for e in envs),
           'environment lists CUBLAS_WORKSPACE_CONFIG', envs)
    b, _ = record(Variant(seed=2, env=env_b))
    j = expect_identical(a, b, 'environment difference alone')
    expect(len(process(j)['environment']) >= 1, 'the difference is still shown', process(j)['environment'])


# ------------------------------------------------------------ what old and broken traces do
FUTURE_MEMBER = 'memoryPressure @14 :MemoryPressure;'


def future_schema():
    """trace.capnp as a newer gpurr might have it: a new kind of event."""
    text = open(trace.SCHEMA_PATH).read()
    text = re.sub(r'@0x[0-9a-f]+;', '@0xc1a4aa4f6da9b517;', text, count=1)
    i = text.rindex('    graph @10 :GraphLaunch;')
    text = text[:i] + '    graph @10 :GraphLaunch;\n    ' + FUTURE_MEMBER + '\n' + text[i + len('    graph @10 :GraphLaunch;\n'):]
    text += '\nstruct MemoryPressure {\n  freeBytes @0 :UInt64;\n  device @1 :UInt32;\n  note @2 :Text;\n}\n'
    path = os.path.join(TMP, 'future.capnp')
    open(path, 'w').write(text)
    return trace.load_schema(path)


@case
def unknown_event_kind():
    """A newer writer (compatVersion 10) adds a kind of event: gpurr skips it
    with one warning naming the trace's version, and compares the rest."""
    s = future_schema()
    a, pa = record(Variant(seed=1))
    prog = training.Training(Variant(seed=2)).run()
    allocs = [e['seq'] for e in prog.events if 'alloc' in e]
    extra = [(q + 1, {'seq': q + 1, 'timeNs': [e for e in prog.events if e['seq'] == q][0]['timeNs'], 'thread': 0,
                      'memoryPressure': {'freeBytes': 1 << 30, 'device': 0, 'note': 'low'}}) for q in allocs]
    b = os.path.join(TMP, 'future.gpurr')
    prog.write(b, env={'CUBLAS_WORKSPACE_CONFIG': ':4096:8', 'PYTHONHASHSEED': '0'}, compat_version=10,
               schema_module=s, extra_events=extra)
    rc, j = verify(b)
    expect(j['eventsOfUnknownKind'] == len(extra), 'verify: sound, %d events of an unknown kind' % len(extra), j)
    for x, y in ((a, b), (b, a)):
        rc, j, err = diff(x, y)
        expect(rc == 0 and j['identical'], 'diff %s: identical, exit 0' % ('A B' if x == a else 'B A'), {'rc': rc, 'err': err})
        warn = [l for l in err.splitlines() if 'skipped' in l]
        expect(len(warn) == 1 and '10' in warn[0], 'one warning, naming compatibility 10', err)
    info = json.loads(subprocess.run([GPURR, 'info', '--json', b], capture_output=True, text=True).stdout)
    expect(info['eventsOfUnknownKind'] == len(extra) and info['header']['compatVersion'] == 10,
           'info counts them', {k: info.get(k) for k in ('eventsOfUnknownKind', 'events')})


@case
def damaged_traces():
    """A recording killed mid-block (no index, a partial last block) compares up
    to what it kept; a corrupt block or frame is trouble (exit 2)."""
    a, pa = record(Variant(seed=1))
    b, pb = record(Variant(seed=2))
    t = os.path.join(TMP, 'truncated.gpurr')
    shutil.copytree(b, t)
    os.remove(os.path.join(t, 'index'))
    ev = os.path.join(t, 'events')
    size = os.path.getsize(ev)
    with open(ev, 'r+b') as f:
        f.truncate(size - 300)
    rc, j, err = diff(a, t)
    expect(rc == 0 and j['identical'], 'truncated run B: identical up to where it stops, exit 0', {'rc': rc, 'err': err})
    expect(any('lost' in w or 'complete' in w or 'cleanly' in w for w in process(j)['warnings']),
           'a warning says what was lost', process(j)['warnings'])
    expect(process(j)['operations']['b'] < process(j)['operations']['a'], 'run B has fewer operations',
           process(j)['operations'])
    # truncated and diverging after the cut: still identical; before: found
    rc, j = verify(t, want_ok=False)
    print('  (verify on the truncated trace: exit %d, %s)' % (rc, j.get('problems') or j.get('notes')))
    expect(rc in (0, 1) and j.get('readable'), 'verify reads the truncated trace', j)

    def corrupt(name, offset_fn, data):
        c = os.path.join(TMP, name)
        shutil.copytree(b, c)
        with open(os.path.join(c, 'events'), 'r+b') as f:
            f.seek(offset_fn(c))
            f.write(data)
        return c
    idx = trace.schema().Index
    with open(os.path.join(b, 'index'), 'rb') as f:
        with idx.from_bytes(f.read()) as index:
            third = index.blocks[2].fileOffset
    c = corrupt('badmagic.gpurr', lambda c: third + 16, b'XXXXXXXX')
    rc, j, err = diff(a, c)
    expect(rc == 2, 'bad magic in the third block: exit 2', {'rc': rc, 'err': err})
    rc, j = verify(c, want_ok=False)
    expect(rc in (1, 2) and not j.get('ok'), 'verify finds it (exit %d)' % rc, j)
    c = corrupt('badframe.gpurr', lambda c: third + 64 + 40, b'\xff\x00\xff\x00')
    rc, j, err = diff(a, c)
    expect(rc == 2 and err.strip(), 'damaged zstd frame: exit 2 with a message', {'rc': rc, 'err': err})
    rc, j = verify(c, want_ok=False)
    expect(rc in (1, 2) and not j.get('ok'), 'verify finds it (exit %d)' % rc, j)


@case
def stopped_after_step():
    """Run B took another cuDNN algorithm in step 1, and gpurr stopped it
    after step 2 (Index.stoppedAfterStep; its events end there): the diff
    names step 1's divergence alone, and does not compare run A's later
    steps. The same events with an index that says the program ended by
    itself make those steps a divergence of their own."""
    a, pa = record(Variant(seed=1))
    b, _ = record(Variant(seed=2, algo_step=1))
    t = reader.read(b)
    cut = next(i for i, e in enumerate(t.events) if e.get('origin', {}).get('step', -1) > 2)
    t.events = t.events[:cut]
    t.stopped_after_step = 2
    stopped = reader.write(t, os.path.join(TMP, 'stopped.gpurr'))
    verify(stopped)
    rc, j, err = diff(a, stopped)
    p = process(j)
    fd = p['firstDivergence']
    expect(rc == 1 and fd is not None and fd['cause'] == 'algorithmChoice', 'the FFT engine of step 1: exit 1',
           {'rc': rc, 'err': err, 'first': fd and fd['summary']})
    expect(fd['a']['seq'] == seq_of(pa, 'fprop_implicit_gemm', step=1), "at step 1's convolution", fd['a'])
    expect(p['pathDivergences']['count'] == 1, 'no other path divergence', p['pathDivergences']['count'])
    expect(any('gpurr stopped it after training step 2' in w and 'not compared' in w for w in p['warnings']),
           "a warning says run A's later operations were not compared", p['warnings'])
    t.stopped_after_step = -1
    ended = reader.write(t, os.path.join(TMP, 'ended.gpurr'))
    rc, j, err = diff(a, ended)
    expect(rc == 1 and process(j)['pathDivergences']['count'] > 1,
           'with an index that says the program ended by itself, run A\'s later steps are a divergence too',
           process(j)['pathDivergences']['count'])


@case
def incomparable_traces():
    """Range digests of different chunk sizes cannot be compared: refused
    (exit 2), forced or not. Another command line: refused unless forced."""
    a, _ = record(Variant(seed=1))
    b, _ = record(Variant(seed=2, chunk_bytes=1024))
    for force in ([], ['--force']):
        r = subprocess.run([GPURR, 'diff', '--json'] + force + [a, b], capture_output=True, text=True)
        expect(r.returncode == 2 and 'chunks of 65536 bytes' in r.stderr and 'chunks of 1024' in r.stderr,
               'chunks of 65536 and 1024 bytes%s: exit 2, saying why' % (' (--force)' if force else ''),
               {'rc': r.returncode, 'stderr': r.stderr})
    _count[0] += 1
    c = os.path.join(TMP, 'other-command.gpurr')
    training.Training(Variant(seed=2)).run().write(
        c, env={'CUBLAS_WORKSPACE_CONFIG': ':4096:8', 'PYTHONHASHSEED': '0'}, command=('python3', 'train.py', '--lr', '0.1'))
    verify(c)
    rc, j, err = diff(a, c)
    expect(rc == 2 and 'different programs' in err, 'another command line: exit 2', {'rc': rc, 'err': err})
    r = subprocess.run([GPURR, 'diff', '--json', '--force', a, c], capture_output=True, text=True)
    j = json.loads(r.stdout)
    expect(r.returncode == 0 and j['forced'] and process(j)['warnings'], 'with --force: identical, with a warning',
           {'rc': r.returncode, 'warnings': process(j)['warnings']})


def main():
    global GPURR
    if sys.argv[1:2] == ['--list']:
        print('\n'.join(CASES))
        return 0
    GPURR = os.path.abspath(sys.argv[1])

    def scratch(path):
        global TMP
        TMP = path
    return runner.run(CASES, sys.argv[2:] or list(CASES), Failure, scratch, 'gpurr-outside-')


if __name__ == '__main__':
    sys.exit(main())
