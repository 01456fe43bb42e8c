"""The hostile inputs of gpurr's resource-exhaustion regression suite: each
case builds one or two crafted trace directories (FORMAT.md) in a work
folder and says which gpurr commands to run on them and what to expect.
Sizes are picked so that a gpurr without the fix needs more than 1.5 GB of
address space, runs past 60 s or crashes, while a fixed gpurr answers in
about a second. run_hostile.py runs them; CASES maps a name to its Case.
Run with the gpurr venv's Python (pycapnp, zstandard, xxhash)."""
import os
import re
import struct

from hostile_kit import (SEQ_T, TIME_T, Trace, alias_text_list, frame_event, frame_function,
                         header_bytes, sync_template, templated, zero_blob, zframe)

KERNEL = '_Z6kernelPf'


class Cmd:
    """One gpurr invocation. args: its arguments (after `gpurr`); traces:
    the trace paths an error line may name; expect: 'error' (must exit 2 and
    print `gpurr SUB: error: ...` naming one of the traces; `verify` may
    instead exit 1 listing problems that name the trace), 'ok' (exit 0 or
    1) or 'any' (0, 1 or 2; an exit 2 must still print such an error line);
    check: optional fn(rc, stdout, stderr) returning a failure text or None."""

    def __init__(self, args, traces, expect='any', check=None):
        self.args = [str(a) for a in args]
        self.traces = [str(t) for t in traces]
        self.expect = expect
        self.check = check


class Case:
    def __init__(self, name, summary, build, handled=False):
        self.name = name
        self.summary = summary
        self.build = build          # build(folder) -> [Cmd]
        self.handled = handled      # gpurr handled it when the suite was written


CASES = {}


def case(name, summary, handled=False):
    def register(fn):
        CASES[name] = Case(name, summary, fn, handled)
        return fn
    return register


def readers(path, which=('info', 'dump', 'verify', 'diff'), expect='any', check=None):
    """The read-only commands on one trace (diff: against itself)."""
    cmds = []
    for w in which:
        args = [w, path] + ([path] if w == 'diff' else [])
        cmds.append(Cmd(args, [path], expect, check))
    return cmds


def rc_is(want, text=None, where='stderr'):
    """A check: exit status `want` and, when given, `text` in stderr (or stdout)."""
    def check(rc, out, err):
        if rc != want:
            return 'exit %d, expected %d' % (rc, want)
        if text is not None and text not in (err if where == 'stderr' else out):
            return 'no %r on %s' % (text, where)
        return None
    return check


def not_identical(rc, out, err):
    """For a diff of two runs that differ: never `identical` with exit 0."""
    if rc == 0:
        return 'exit 0 (identical) for two runs whose events differ'
    if re.search(r'\bidentical\b', out, re.I) and rc != 2:
        return 'says identical for two runs whose events differ'
    return None


def pair(folder, make, *variants):
    """Builds make(path, variant) for each variant in folder/a, folder/b..."""
    return [make(os.path.join(folder, chr(ord('a') + i)), v) for i, v in enumerate(variants)]


def with_u64(raw, old, new):
    """raw with the one 8-byte little-endian occurrence of old replaced by new."""
    o, n = struct.pack('<Q', old), struct.pack('<Q', new)
    assert raw.count(o) == 1, 'placeholder %x found %d times' % (old, raw.count(o))
    return raw.replace(o, n)


DIGEST_T = 0x5a5a5a5a00000001   # placeholder digest, patched per run


def diff_cmds(a, b, check=None, json=False):
    return [Cmd(['diff'] + (['--json'] if json else []) + [a, b], [a, b], 'any', check)]


# --------------------------------------------------------------------------
# Bombs found by the audit.


@case('opstack_alias', "b1: one event's origin.opStack lists 131072 pointers to one 8 KiB Text "
                       '(1 GiB of copies) at the start of a 200 MiB block')
def opstack_alias(folder, P=1 << 17, SB=8192, PAD=200000):
    frames = []
    ev = {'seq': 1, 'timeNs': 1, 'thread': 0,
          'origin': {'op': 'aten::x', 'opStack': ['A' * SB] + [''] * (P - 1)},
          'alloc': {'ordinal': 1, 'address': 4096, 'size': 4096}}
    frames.append(alias_text_list(frame_event(ev, first_words=P * 3 + SB // 8 + 1000), P))
    frames.append(templated(sync_template(1000), list(range(2, 2 + PAD))))
    raw = b''.join(frames)
    assert len(raw) <= 256 << 20, len(raw)
    path = os.path.join(folder, 't')
    t = Trace(path)
    t.add_block(raw, 1, 1 + PAD, 0, t0=1, t1=1 + PAD)
    t.close()
    return readers(path, ('info', 'dump', 'verify'))


@case('diff_opstack', "b9: b1's aliased opStack (100000 x 8 KiB) on the launch where two runs "
                      'first diverge; gpurr diff')
def diff_opstack(folder, P=100000, SB=8192, PAD=200000):
    def make(path, digest):
        frames = [frame_event({'seq': 1, 'timeNs': 1, 'alloc': {'ordinal': 1, 'address': 1 << 40, 'size': 1 << 20}}),
                  frame_function(0, KERNEL)]
        ev = {'seq': 2, 'timeNs': 2, 'origin': {'op': 'aten::x', 'opStack': ['A' * SB] + [''] * (P - 1)},
              'launch': {'function': 0, 'stream': 7, 'grid': {'x': 1}, 'block': {'x': 1}, 'params': b'\0' * 8,
                         'pointers': [{'byteOffset': 0, 'allocation': 1, 'offset': 0}],
                         'inputs': [{'address': 1 << 40, 'size': 1 << 20, 'allocation': 1, 'digest': 5}],
                         'outputs': [{'address': 1 << 40, 'size': 1 << 20, 'allocation': 1, 'digest': digest}]}}
        frames.append(alias_text_list(frame_event(ev, first_words=P * 3 + SB // 8 + 4096), P))
        frames.append(templated(sync_template(1000), list(range(3, 3 + PAD))))
        raw = b''.join(frames)
        t = Trace(path)
        t.add_block(raw, 1, 2 + PAD, 1, t0=1, t1=2 + PAD)
        return t.close()
    a, b = pair(folder, make, 1, 2)
    return diff_cmds(a, b) + diff_cmds(a, b, json=True)


@case('index_empty_entries', 'b2: an index whose blocks list holds millions of zero-size entries '
                             '(one tag word, sparse zero padding), no checksums file')
def index_empty_entries(folder, MIB=64):
    path = os.path.join(folder, 't')
    t = Trace(path)
    t.add_block(frame_event({'seq': 1, 'timeNs': 1, 'sync': {'kind': 'contextSynchronize'}}), 1, 1, 0, t0=1, t1=1)
    t.close(index=False)
    size_words = (MIB << 20) // 8 - 1
    N = min(size_words * 4 - 16, (1 << 29) - 1)   # traversal 4x words; 29-bit count
    # root: Index struct (0 data, 5 pointers); blocks: inline composite list of 0 words
    # whose tag says N elements of 0 data and 0 pointer words
    words = [(0 << 2) | 0 | (0 << 32) | (5 << 48),
             (4 << 2) | 1 | (7 << 32) | (0 << 35),
             0, 0, 0, 0,
             (N << 2)]
    msg = struct.pack('<II', 0, len(words)) + struct.pack('<%dQ' % len(words), *words)
    with open(os.path.join(path, 'index'), 'wb') as f:
        f.write(msg)
        f.truncate(MIB << 20)                   # sparse zero padding
    return readers(path)


@case('ranges_quadratic', 'b5: a matched launch pair whose 100000 output ranges never pair '
                          'between runs (compareRanges O(N^2)); gpurr diff')
def ranges_quadratic(folder, N=100000):
    def make(path, base):
        t = Trace(path)
        frames = [frame_event({'seq': 1, 'timeNs': 1, 'alloc': {'ordinal': 1, 'address': 1 << 40, 'size': 1 << 40}}),
                  frame_function(0, KERNEL)]
        outs = [{'address': (1 << 40) + base + i, 'size': 16, 'allocation': 1, 'offset': base + i,
                 'digest': base + i + 1} for i in range(N)]
        frames.append(frame_event({'seq': 2, 'timeNs': 2, 'launch': {
            'function': 0, 'stream': 7, 'grid': {'x': 1}, 'block': {'x': 1}, 'params': b'\0' * 8,
            'pointers': [{'byteOffset': 0, 'allocation': 1, 'offset': 0}],
            'inputs': outs, 'outputs': outs}}, first_words=N * 8 * 2 + 4096))
        t.add_block(b''.join(frames), 1, 2, 1, t0=1, t1=2)
        return t.close()
    a, b = pair(folder, make, 0, N)
    return diff_cmds(a, b)


@case('pointers_quadratic', 'b6: a matched launch pair with 600000 pointer parameters each, one output '
                            'digest differs (compareParams O(N^2)); gpurr diff')
def pointers_quadratic(folder, N=600000):
    ptrs = [{'byteOffset': 8 * i, 'allocation': 1, 'offset': 0} for i in range(N)]
    raw = frame_event({'seq': 1, 'timeNs': 1, 'alloc': {'ordinal': 1, 'address': 1 << 40, 'size': 1 << 30}})
    raw += frame_function(0, KERNEL)
    raw += frame_event({'seq': 2, 'timeNs': 2, 'launch': {
        'function': 0, 'stream': 7, 'grid': {'x': 1}, 'block': {'x': 1}, 'params': b'\0' * (8 * N),
        'pointers': ptrs,
        'inputs': [{'address': 1 << 40, 'size': 1 << 30, 'allocation': 1, 'offset': 0, 'digest': 5}],
        'outputs': [{'address': 1 << 40, 'size': 1 << 30, 'allocation': 1, 'offset': 0, 'digest': DIGEST_T}]}},
        first_words=N * 4 + 4096)

    def make(path, digest):
        t = Trace(path)
        t.add_block(with_u64(raw, DIGEST_T, digest), 1, 2, 1, t0=1, t1=2)
        return t.close()
    a, b = pair(folder, make, 1, 2)
    return diff_cmds(a, b)


def snapshot_launch_trace(path, S, K, digest):
    """A launch whose K output ranges each carry a snapshot of the same blob of S zero bytes."""
    t = Trace(path)
    ref = zero_blob(path, S)
    frames = [frame_event({'seq': 1, 'timeNs': 1, 'alloc': {'ordinal': 1, 'address': 1 << 40, 'size': 1 << 40}}),
              frame_function(0, KERNEL)]
    outs = [{'address': (1 << 40) + i * S, 'size': S, 'allocation': 1, 'offset': i * S, 'digest': digest,
             'snapshot': ref} for i in range(K)]
    frames.append(frame_event({'seq': 2, 'timeNs': 2, 'launch': {
        'function': 0, 'stream': 7, 'grid': {'x': 1}, 'block': {'x': 1}, 'params': b'\0' * 8,
        'pointers': [{'byteOffset': 0, 'allocation': 1, 'offset': 0}],
        'outputs': outs}}, first_words=K * 16 + 4096))
    t.add_block(b''.join(frames), 1, 2, 1, t0=1, t1=2)
    return t.close()


@case('snapshot_blob_rereads', 'b7: a launch whose 4000 output ranges all snapshot one blob of '
                               '16 MiB of zeros (re-read and re-hashed per reference); verify and diff')
def snapshot_blob_rereads(folder, S=16 << 20, K=4000):
    a, b = pair(folder, lambda p, d: snapshot_launch_trace(p, S, K, d), 1, 2)
    return [Cmd(['verify', a], [a])] + diff_cmds(a, b)


@case('snapshot_blob_huge', 'b7: one output snapshot referring to a blob of 2 GiB + 64 KiB of zeros '
                            '(readers allocate the declared size); verify and diff')
def snapshot_blob_huge(folder, S=(2 << 30) + (64 << 10)):
    a, b = pair(folder, lambda p, d: snapshot_launch_trace(p, S, 1, d), 1, 2)
    return [Cmd(['verify', a], [a])] + diff_cmds(a, b)


@case('replay_plan_free_scan', 'b8: 200000 live allocations then 200000 frees by an address no '
                               'allocation has; gpurr replay --plan of the last launch')
def replay_plan_free_scan(folder, N=200000, M=200000):
    alloc_t = frame_event({'seq': SEQ_T, 'timeNs': TIME_T,
                           'alloc': {'ordinal': 0x33333333, 'address': 0x4444444444444444, 'size': 4096}})
    free_t = frame_event({'seq': SEQ_T, 'timeNs': TIME_T, 'free': {'ordinal': 0, 'address': 0x10}})
    ao = alloc_t.find(struct.pack('<I', 0x33333333))
    aa = alloc_t.find(struct.pack('<Q', 0x4444444444444444))
    path = os.path.join(folder, 't')
    t = Trace(path)
    seq, PER = 1, 200000
    done = 0
    while done < N:
        n = min(PER, N - done)
        raw = bytearray(templated(alloc_t, list(range(seq, seq + n))))
        for i in range(n):
            struct.pack_into('<I', raw, i * len(alloc_t) + ao, done + i + 1)
            struct.pack_into('<Q', raw, i * len(alloc_t) + aa, 0x700000000000 + (done + i + 1) * 4096)
        t.add_block(bytes(raw), seq, n, 0, t0=seq, t1=seq + n - 1)
        seq += n
        done += n
    done = 0
    while done < M:
        n = min(PER, M - done)
        t.add_block(templated(free_t, list(range(seq, seq + n))), seq, n, 0, t0=seq, t1=seq + n - 1)
        seq += n
        done += n
    raw = frame_function(0, KERNEL) + frame_event({'seq': seq, 'timeNs': seq, 'launch': {'function': 0, 'stream': 7}})
    t.add_block(raw, seq, 1, 1, t0=seq, t1=seq)
    t.close()
    return [Cmd(['replay', '--plan', '-l', seq, path], [path])]


@case('environment_quadratic', 'b10: two headers whose environments list 150000 distinct variables '
                               '(union of keys O(K^2)); gpurr diff')
def environment_quadratic(folder, K=150000):
    env = [{'key': 'K%07d' % i, 'value': 'vvvvvvv'} for i in range(K)]
    header = header_bytes(environment=env)

    def make(path, val):
        t = Trace(path, header=header.replace(b'vvvvvvv\0', val.encode() * 7 + b'\0'))
        t.add_block(frame_event({'seq': 1, 'timeNs': 1, 'sync': {}}), 1, 1, 0, t0=1, t1=1)
        return t.close()
    a, b = pair(folder, make, 'x', 'y')
    return diff_cmds(a, b)


@case('dependencies_quadratic', "b12: 20000 one-byte writers then 10000 launches on another thread each "
                                "reading all of them (N*M data-dependency pairs); gpurr diff")
def dependencies_quadratic(folder, N=20000, M=10000):
    wt = frame_event({'seq': SEQ_T, 'timeNs': TIME_T, 'thread': 0, 'launch': {
        'function': 0, 'stream': 1, 'grid': {'x': 1}, 'block': {'x': 1},
        'outputs': [{'address': 0x33333333, 'size': 1, 'allocation': 1, 'offset': 0x33333333, 'digest': 7}]}})
    off_w = [i for i in range(len(wt) - 3) if wt[i:i + 4] == struct.pack('<I', 0x33333333)]

    def make(path, last_digest):
        t = Trace(path)
        head = frame_event({'seq': 1, 'timeNs': 1, 'alloc': {'ordinal': 1, 'address': 1 << 40, 'size': 1 << 32}})
        head += frame_event({'seq': 2, 'timeNs': 2, 'alloc': {'ordinal': 2, 'address': 1 << 41, 'size': 1 << 20}})
        t.add_block(head, 1, 2, 0, t0=1, t1=2)
        seq, PER, done = 3, 100000, 0
        while done < N:
            n = min(PER, N - done)
            raw = bytearray(templated(wt, list(range(seq, seq + n))))
            for i in range(n):
                for o in off_w:
                    struct.pack_into('<I', raw, i * len(wt) + o, done + i)
            t.add_block(frame_function(0, '_Z1wPf') + bytes(raw), seq, n, n, t0=seq, t1=seq + n - 1)
            seq += n
            done += n
        t.add_block(frame_event({'seq': seq, 'timeNs': seq, 'thread': 0, 'sync': {'kind': 'contextSynchronize'}}),
                    seq, 1, 0, t0=seq, t1=seq)
        seq += 1
        frames = [frame_function(0, '_Z1rPf')]
        for i in range(M):
            frames.append(frame_event({'seq': seq + i, 'timeNs': seq + i, 'thread': 1, 'launch': {
                'function': 0, 'stream': 2, 'grid': {'x': 1}, 'block': {'x': 1},
                'inputs': [{'address': 1 << 40, 'size': N, 'allocation': 1, 'offset': 0, 'digest': 9}],
                'outputs': [{'address': (1 << 41) + i, 'size': 1, 'allocation': 2, 'offset': i,
                             'digest': last_digest if i == M - 1 else 3}]}}))
        t.add_block(b''.join(frames), seq, M, M, t0=seq, t1=seq + M - 1)
        return t.close()
    a, b = pair(folder, make, 1, 2)
    return diff_cmds(a, b)


@case('read_by_inputs', 'b13: after a first divergence, 2 launches each listing 200000 input and '
                        '200000 output ranges (readByInputs O(N^2) per launch); gpurr diff')
def read_by_inputs(folder, N=200000, K=2):
    ins = [{'address': (1 << 40) + i, 'size': 1, 'allocation': 1, 'offset': i, 'digest': 1} for i in range(N)]
    outs = [{'address': (1 << 41) + i, 'size': 1, 'allocation': 2, 'offset': i, 'digest': 1} for i in range(N)]
    heavy = frame_event({'seq': SEQ_T, 'timeNs': TIME_T, 'launch': {'function': 1, 'stream': 7, 'inputs': ins,
                                                                       'outputs': outs}}, first_words=N * 16 + 4096)
    heavies = templated(heavy, list(range(4, 4 + K)))

    def make(path, digest):
        t = Trace(path)
        frames = [frame_event({'seq': 1, 'timeNs': 1, 'alloc': {'ordinal': 1, 'address': 1 << 40, 'size': 1 << 30}}),
                  frame_event({'seq': 2, 'timeNs': 2, 'alloc': {'ordinal': 2, 'address': 1 << 41, 'size': 1 << 30}}),
                  frame_function(0, '_Z5firstPf'), frame_function(1, '_Z5heavyPf')]
        frames.append(frame_event({'seq': 3, 'timeNs': 3, 'launch': {
            'function': 0, 'stream': 7, 'outputs': [{'address': 1 << 41, 'size': 1 << 30, 'allocation': 2,
                                                      'digest': digest}]}}))
        frames.append(heavies)
        raw = b''.join(frames)
        assert len(raw) <= 256 << 20, len(raw)
        t.add_block(raw, 1, 3 + K, 1 + K, t0=1, t1=3 + K, level=1, window_log=26)
        return t.close()
    a, b = pair(folder, make, 1, 2)
    return diff_cmds(a, b)


@case('long_kernel_name', 'b15: one block declares a kernel with a 1 MiB mangled name and holds '
                          '20000 launches of it (the name copied per decoded launch); info, verify, diff')
def long_kernel_name(folder, S=1 << 20, L=20000):
    path = os.path.join(folder, 't')
    t = Trace(path)
    fname = '_Z' + str(S - 4) + 'k' * (S - 4 - len(str(S - 4))) + 'v'
    lt = frame_event({'seq': SEQ_T, 'timeNs': TIME_T, 'launch': {'function': 0, 'stream': 7}})
    raw = frame_function(0, fname) + templated(lt, list(range(1, L + 1)))
    t.add_block(raw, 1, L, L, t0=1, t1=L, level=3)
    t.close()
    # not dump: it prints the whole name per launch (L * S bytes of output)
    return readers(path, ('info', 'verify', 'diff'))


def huge_ordinal_check(rc, out, err):
    return rc_is(2, 'far beyond')(rc, out, err)


@case('huge_ordinal_alloc', 'b16: an alloc event and a launch range with allocation ordinal 0xffffffff '
                            '(a vector index); diff must exit 2 saying "far beyond"')
def huge_ordinal_alloc(folder, ORD=0xffffffff):
    def make(path, digest):
        t = Trace(path)
        raw = frame_event({'seq': 1, 'timeNs': 1, 'alloc': {'ordinal': ORD, 'address': 1 << 40, 'size': 4096}})
        raw += frame_function(0, '_Z1kPf')
        raw += frame_event({'seq': 2, 'timeNs': 2, 'launch': {'function': 0, 'stream': 7, 'outputs': [
            {'address': 1 << 40, 'size': 4096, 'allocation': ORD, 'digest': digest}]}})
        t.add_block(raw, 1, 2, 1, t0=1, t1=2)
        return t.close()
    a, b = pair(folder, make, 1, 2)
    return [Cmd(['diff', a, b], [a, b], 'error', huge_ordinal_check),
            Cmd(['diff', '--json', a, b], [a, b], 'error', huge_ordinal_check)]


@case('huge_ordinal_pointer', 'b16b: no alloc event, only a pointer parameter naming allocation '
                              '0xffffffff; diff must exit 2 saying "far beyond"')
def huge_ordinal_pointer(folder, ORD=0xffffffff):
    def make(path, digest):
        t = Trace(path)
        raw = frame_function(0, '_Z1kPf')
        raw += frame_event({'seq': 1, 'timeNs': 1, 'launch': {
            'function': 0, 'stream': 7, 'params': b'\0' * 8, 'pointers': [{'byteOffset': 0, 'allocation': ORD}],
            'outputs': [{'address': 1 << 40, 'size': 8, 'digest': digest}]}})
        t.add_block(raw, 1, 1, 1, t0=1, t1=1)
        return t.close()
    a, b = pair(folder, make, 1, 2)
    return [Cmd(['diff', a, b], [a, b], 'error', huge_ordinal_check)]


@case('hash_chunk_bytes_1', 'b17: the header says hashChunkBytes = 1 and a launch output snapshots '
                            '256 MiB of zeros (one 256-lane chunk per byte); gpurr verify')
def hash_chunk_bytes_1(folder, S=256 << 20):
    path = os.path.join(folder, 't')
    t = Trace(path, header=header_bytes(options={'hashInputs': True, 'hashChunkBytes': 1}))
    ref = zero_blob(path, S)
    raw = frame_event({'seq': 1, 'timeNs': 1, 'alloc': {'ordinal': 1, 'address': 1 << 40, 'size': S}})
    raw += frame_function(0, '_Z1kPf')
    raw += frame_event({'seq': 2, 'timeNs': 2, 'launch': {'function': 0, 'stream': 7, 'outputs': [
        {'address': 1 << 40, 'size': S, 'allocation': 1, 'digest': 1, 'snapshot': ref}]}})
    t.add_block(raw, 1, 2, 1, t0=1, t1=2)
    t.close()
    return [Cmd(['verify', path], [path])]


@case('no_content_size_diff', 'two runs whose only block is a zstd frame without its content size, '
                              'with different launch digests: diff must not say identical')
def no_content_size_diff(folder):
    def make(path, digest):
        raw = frame_function(0, KERNEL) + frame_event({'seq': 1, 'timeNs': 1, 'launch': {
            'function': 0, 'stream': 7, 'outputs': [{'address': 1 << 40, 'size': 16, 'digest': digest}]}})
        t = Trace(path)
        t.add_block(raw, 1, 1, 1, frame=zframe(raw, content_size=False), t0=1, t1=1)
        return t.close()
    a, b = pair(folder, make, 1, 2)
    return diff_cmds(a, b, not_identical) + diff_cmds(a, b, not_identical, json=True)


# --------------------------------------------------------------------------
# Inputs gpurr already handled (a clear error or a bounded cost) when the
# audit ran; they must keep passing. info, dump, verify, and diff against itself.

EV1 = frame_event({'seq': 1, 'timeNs': 1, 'sync': {}})


def one_block(folder, raw, index=True, **block):
    """A trace of one block of `raw` (add_block's other arguments in
    `block`), with or without its index, which every reader must refuse."""
    path = os.path.join(folder, 't')
    t = Trace(path)
    t.add_block(raw, 1, 1, 0, t0=1, t1=1, **block)
    t.close(index=index)
    return readers(path, expect='error')


@case('h_no_content_size', 'a block whose zstd frame lacks its content size', handled=True)
def h_no_content_size(folder):
    return one_block(folder, EV1, frame=zframe(EV1, content_size=False))


@case('h_content_size_lies', 'a 64-byte frame whose block header declares 200 MiB, no index', handled=True)
def h_content_size_lies(folder):
    return one_block(folder, EV1, index=False, frame=zframe(EV1, checksum=False), usize=200 << 20)


@case('h_zero_bomb_block', 'one block of 256 MiB of zeros (decompresses, then fails to parse)', handled=True)
def h_zero_bomb_block(folder):
    return one_block(folder, bytes(256 << 20))


@case('h_over_limit_block', 'a block header declaring 256 MiB + 8 bytes, no index', handled=True)
def h_over_limit_block(folder):
    return one_block(folder, EV1, index=False, usize=(256 << 20) + 8)


@case('h_many_frames', "one block whose compressed bytes are 10000 concatenated zstd frames", handled=True)
def h_many_frames(folder):
    path = os.path.join(folder, 't')
    t = Trace(path)
    t.add_block(EV1, 1, 1, 0, frame=zframe(EV1[:8]) * 10000, usize=len(EV1), t0=1, t1=1)
    t.close()
    return readers(path, expect='error')


@case('h_index_past_end', 'an index entry at offset 2^62 with 2^32-1 events and bytes', handled=True)
def h_index_past_end(folder):
    path = os.path.join(folder, 't')
    t = Trace(path)
    t.add_block(EV1, 1, 1, 0, t0=1, t1=1)
    t.entries.append({'fileOffset': 1 << 62, 'firstSeq': 2, 'eventCount': 0xffffffff,
                      'compressedSize': 0xffffffff, 'uncompressedSize': 0xffffffff})
    t.close()
    return readers(path)


@case('h_header_17mib', 'a header of 17 MiB (over the 16 MiB limit)', handled=True)
def h_header_17mib(folder):
    path = os.path.join(folder, 't')
    t = Trace(path, header=header_bytes(commandLine=['x' * (17 << 20)]))
    t.add_block(EV1, 1, 1, 0, t0=1, t1=1)
    t.close()
    return readers(path, expect='error')


def events_replaced(folder, make):
    """A trace without an index whose events file `make(path)` puts back as
    something other than a file."""
    path = os.path.join(folder, 't')
    t = Trace(path)
    t.close(index=False)
    os.remove(os.path.join(path, 'events'))
    make(os.path.join(path, 'events'))
    return readers(path, expect='error')


@case('h_events_dev_zero', 'events is a symbolic link to /dev/zero', handled=True)
def h_events_dev_zero(folder):
    return events_replaced(folder, lambda p: os.symlink('/dev/zero', p))


@case('h_events_fifo', 'events is a named pipe (nobody writes to it)', handled=True)
def h_events_fifo(folder):
    return events_replaced(folder, os.mkfifo)


@case('h_empty_struct_list', "a launch whose inputs list claims 2^29-1 zero-size elements", handled=True)
def h_empty_struct_list(folder):
    m = bytearray(frame_event({'seq': 1, 'timeNs': 1, 'launch': {'function': 0, 'inputs': [{'size': 1}]}}))
    w = list(struct.unpack('<%dQ' % (len(m) // 8), m))
    for i, x in enumerate(w):
        if x & 3 == 1 and (x >> 32) & 7 == 7 and (x >> 35) == 7:  # list of one 7-word RangeDigest
            tag = i + 1 + ((x >> 2) & 0x3fffffff)
            w[tag] = ((1 << 29) - 1) << 2     # N elements, 0 data, 0 pointers
            w[i] = x & 0x7ffffffff             # 0 words
            break
    else:
        raise AssertionError('inputs list not found')
    raw = frame_function(0, '_Z1kv') + struct.pack('<%dQ' % len(w), *w)
    raw += bytes(64 << 20)   # make traversal limits generous
    path = os.path.join(folder, 't')
    t = Trace(path)
    t.add_block(raw, 1, 1, 1, t0=1, t1=1)
    t.close()
    return readers(path, expect='error')
