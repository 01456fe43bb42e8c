#!/usr/bin/env python3
"""Cases for `gpurr diff` on traces written by the outside writer.

usage: run_cases.py GPURR CASE [CASE...]   (or --list)

Each case records two simulated training runs that differ in one way, checks
that `gpurr verify` finds both traces sound, and checks `gpurr diff --json`'s
verdict and exit status. A case prints what it checked and exits 1 at the
first expectation that does not hold."""
import os
import random
import re
import subprocess
import sys

sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import case_kit as kit  # noqa: E402
    import named_cases  # noqa: E402,F401  (its cases join the table)
    import old_trace_cases  # noqa: E402,F401
    from case_kit import (case, diff, expect, expect_cause, expect_identical, first, image_copies,  # noqa: E402
                          process, record, seq_of, text_report, verify)
    from gpurr_outside import bufhash, model, training  # noqa: E402
    from gpurr_outside.training import Variant  # noqa: E402
except ImportError as e:
    sys.exit('run_cases.py: %s (scripts/setup.sh installs pycapnp, zstandard, xxhash and numpy '
             'into the test environment)' % e)


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
    dump = subprocess.run([kit.GPURR, 'dump', b], capture_output=True, text=True).stdout
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
    a first use that a launch only reads and whose outputs do not show it;
    and a trace hashing every input whose launch that wrote a range was not
    hashed (a step --steps left out). The diff must not blame the kernel,
    and says that the range's last writer left no digest."""
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
        if scenario in ('unhashed_writer', 'hash_lost_on_gpu', 'unhashed_step'):  # W's hash was dropped: not hashed
            p.memset(0, stream, x, 0, origin=origin('aten::zero_', 2))
            w = launch('_Z1Wv', [model.Ptr(x, 'w')], lambda: x.put(np.full(1024, 1.0 + variant * 1e-7, np.float32)),
                       'aten::index_add_', 3)
            w['launch']['outputs'] = []
            w['launch']['notHashed'] = True
            if scenario == 'unhashed_writer':  # known when W was launched: x counts untouched again
                p.untouched(x)
            elif scenario == 'unhashed_step':  # every input hashed; W in a step --steps left out
                pass
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
        kit._count[0] += 1
        path = os.path.join(kit.TMP, '%s-%d.gpurr' % (scenario, kit._count[0]))
        p.write(path)
        verify(path)
        return path, p

    for scenario, reader, evidence in (('unhashed_writer', '_Z1Rv', 'without a digest'),
                                       ('hash_lost_on_gpu', '_Z1Rv', 'without a digest'),
                                       ('unhashed_step', '_Z1Rv', 'without a digest'),
                                       ('copy_2d', '_Z1Mv', 'without a digest'),
                                       ('one_sided', '_Z1Cv', 'in one run only'),
                                       ('read_first_use', '_Z1Kv', 'read at its first use with different bytes')):
        a, pa = program(scenario, 1, 0, hash_inputs=scenario == 'unhashed_step')
        b, _ = program(scenario, 2, 1, hash_inputs=scenario == 'unhashed_step')
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


if __name__ == '__main__':
    sys.exit(kit.main(sys.argv))
