#!/usr/bin/env python3
"""Benign differences planted in a real recording: the diff's verdict must not move.

usage: plant_real.py GPURR [CHECK...]   (--list: the checks ctest runs;
       no check: every one)

examples/gpu/a.gpurr and b.gpurr are two recordings made on an H200 of a
PyTorch script whose index_add_ uses float atomics. Each check reads run B
with gpurr_outside/reader.py, plants one difference a real run could show
without meaning anything (an extra allocation, more modules, buffers handed
out in another order, a stale device address in an unused word, an
operation moved), writes it back with the outside writer's TraceWriter,
checks that `gpurr verify` finds it sound, and checks that `gpurr diff
--json a.gpurr B'` says what it says for a and b: the same cause at the
same operation, the same blast radius, no path divergence. A check prints
what it planted and what it checked, and exits 1 at the first expectation
that does not hold."""
import json
import os
import struct
import subprocess
import sys

sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from gpurr_outside import reader, runner  # noqa: E402
    from gpurr_outside.reader import BLOCK, kind  # noqa: E402
except ImportError as e:
    sys.exit('plant_real.py: %s (scripts/setup.sh installs pycapnp, zstandard, xxhash and numpy '
             'into the test environment)' % e)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
A = os.path.normpath(os.path.join(ROOT, 'examples', 'gpu', 'a.gpurr'))
B = os.path.normpath(os.path.join(ROOT, 'examples', 'gpu', 'b.gpurr'))
GPURR = None
TMP = None
CHECKS = {}
class Failure(Exception):
    pass


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def expect(cond, what, detail=None):
    if not cond:
        raise Failure(what + ('' if detail is None else ': ' + json.dumps(detail, indent=1)[:4000]))
    print('  ok  ' + what)


# ------------------------------------------------------------ running gpurr

def verify(path):
    r = subprocess.run([GPURR, 'verify', '--json', path], capture_output=True, text=True)
    j = json.loads(r.stdout) if r.stdout.strip() else {}
    expect(r.returncode == 0 and j.get('ok'), 'gpurr verify finds %s sound' % os.path.basename(path),
           {'rc': r.returncode, 'out': r.stdout[-2000:], 'err': r.stderr[-2000:]})


def diff(a, b):
    r = subprocess.run([GPURR, 'diff', '--json', a, b], capture_output=True, text=True)
    if r.returncode not in (0, 1) or not r.stdout.strip():
        raise Failure('gpurr diff %s %s: exit %d %s' % (a, b, r.returncode, r.stderr[-2000:]))
    return json.loads(r.stdout)


def _op(side):
    """An operation as the verdict names it, by what does not move when
    events are inserted before it (its seq in run B does)."""
    return side and {k: side.get(k) for k in ('index', 'kind', 'name', 'stream', 'thread', 'launchIndex')}


def summary(j):
    """What a planted benign difference must leave as it is."""
    p = j['processes'][0]
    fd = p.get('firstDivergence') or {}
    br = p.get('blastRadius') or {}
    return {
        'identical': j['identical'],
        'operations': p['operations'],
        'warnings': p['warnings'],
        'environment': p['environment'],
        'cause': fd.get('cause'),
        'mechanism': fd.get('mechanism'),
        'path': fd.get('path'),
        'first': fd and {'aSeq': (fd.get('a') or {}).get('seq'), 'a': _op(fd.get('a')), 'b': _op(fd.get('b'))},
        'pathDivergences': p['pathDivergences']['count'],
        'blastRadius': {k: v for k, v in br.items() if k != 'independent'},
        'independent': [{'aSeq': (d.get('a') or {}).get('seq'), 'b': _op(d.get('b'))}
                        for d in br.get('independent', [])],
    }


_baseline = []


def baseline():
    if not _baseline:
        _baseline.append(summary(diff(A, B)))
    return _baseline[0]


def expect_same_verdict(planted, what):
    """`gpurr diff a B'` says what `gpurr diff a b` says."""
    path = reader.write(planted, os.path.join(TMP, '%s.gpurr' % what.replace(' ', '_')))
    verify(path)
    got = summary(diff(A, path))
    want = baseline()
    if got != want:
        delta = {k: {'a vs b': want[k], "a vs b'": got[k]} for k in want if got[k] != want[k]}
        raise Failure('%s: the verdict moved: %s' % (what, json.dumps(delta, indent=1)[:6000]))
    print('  ok  %s: %s at seq %s (operation %s), %d path divergences, %d independent' % (
        what, got['cause'], got['first']['aSeq'], got['first']['a']['index'], got['pathDivergences'],
        got['blastRadius'].get('independentCount', 0)))


# ------------------------------------------------------------ editing a trace

def walk(obj, fn):
    """Calls fn on every dict inside obj, depth first."""
    if isinstance(obj, dict):
        fn(obj)
        for v in obj.values():
            walk(v, fn)
    elif isinstance(obj, list):
        for v in obj:
            walk(v, fn)


def position(t, seq):
    return next(i for i, e in enumerate(t.events) if e['seq'] == seq)


def insert(t, pos, event):
    """Inserts an event before t.events[pos], taking its neighbour's block,
    thread and time; later events' seqs move up by one."""
    near = t.events[pos] if pos < len(t.events) else t.events[-1]
    event = dict(event, seq=near['seq'] if pos < len(t.events) else near['seq'] + 1,
                 timeNs=near['timeNs'], thread=near['thread'])
    event[BLOCK] = near[BLOCK]
    for e in t.events[pos:]:
        e['seq'] += 1
    t.events.insert(pos, event)


def allocations(t):
    return {e['alloc']['ordinal']: e['alloc'] for e in t.events if 'alloc' in e}


def launches(t):
    return [e for e in t.events if 'launch' in e]


def range_lists(L):
    return [L.get(k, []) for k in ('inputs', 'outputs', 'reads')]


def words(params):
    return [(o, struct.unpack_from('<Q', params, o)[0]) for o in range(0, len(params) - 7, 8)]


def op_ranges(e):
    """(allocation, start, end) of every device range an operation touches."""
    k = kind(e)
    if k == 'launch':
        rs = [r for lst in range_lists(e['launch']) for r in lst]
    elif k in ('memcpy', 'memset'):
        rs = [e[k][side] for side in ('dst', 'src') if side in e[k]]
    elif k == 'graph':
        rs = e['graph'].get('inputs', []) + e['graph'].get('outputs', [])
    else:
        return []
    return [(r['allocation'], r['offset'], r['offset'] + r['size']) for r in rs if r['allocation']]


def is_operation(e):
    return kind(e) in ('launch', 'memcpy', 'memset', 'graph') and not e[kind(e)].get('captured')


# ------------------------------------------------------------ the checks

@check
def real_identity():
    """Run B read and written back unchanged diffs exactly as run B does."""
    t = reader.read(B)
    path = reader.write(t, os.path.join(TMP, 'identity.gpurr'))
    verify(path)
    again = reader.read(path)
    expect(again.events == t.events and again.header == t.header and again.host_regions == t.host_regions,
           'read back: the same header, %d events, %d host regions' % (len(t.events), len(t.host_regions)))
    want = diff(A, B)
    got = diff(A, path)
    text = json.dumps(got).replace(json.dumps(path)[1:-1], json.dumps(B)[1:-1])
    expect(text == json.dumps(want), 'the diff JSON is the same, byte for byte (paths aside)')
    s = summary(want)
    print('  verdict for a vs b: %s at seq %s, %d path divergences, %d independent divergences' % (
        s['cause'], s['first']['aSeq'], s['pathDivergences'], s['blastRadius']['independentCount']))


def free_address(t, size):
    """A device address range no allocation, host region or parameter word
    of run B falls in: where an unused allocation could have been handed out."""
    taken = [(a['address'], a['address'] + a['size']) for a in allocations(t).values()] + list(t.host_regions)
    values = [v for L in launches(t) for _, v in words(L['launch']['params'])]
    base = min(a['address'] for a in allocations(t).values() if a['kind'] == 'device')
    address = (base - size - (2 << 20)) & ~((2 << 20) - 1)
    while any(s < address + size and address < e for s, e in taken) or \
            any(address <= v < address + size for v in values):
        address -= 2 << 20
    return address


@check
def real_extra_allocation():
    """An extra, unused allocation of a common size early, in the middle and
    late: every later allocation ordinal moves up by one."""
    t0 = reader.read(B)
    allocs = [e for e in t0.events if 'alloc' in e]
    for at in (allocs[1], allocs[len(allocs) // 2], allocs[-2]):
        t = reader.read(B)
        ordinal = at['alloc']['ordinal']
        size = at['alloc']['size']

        def shift(d):
            if 'allocation' in d and d['allocation'] >= ordinal:
                d['allocation'] += 1
        for e in t.events:
            for k in ('alloc', 'free'):
                if k in e and e[k]['ordinal'] >= ordinal:
                    e[k]['ordinal'] += 1
            walk(e, shift)
        insert(t, position(t, at['seq']), {'alloc': {
            'ordinal': ordinal, 'address': free_address(t, size), 'size': size, 'kind': at['alloc']['kind'],
            'device': at['alloc']['device'], 'stream': at['alloc']['stream']}})
        expect_same_verdict(t, 'unused %d-byte allocation %d before seq %d' % (size, ordinal, at['seq']))


@check
def real_module_ordinals():
    """An autotuner's three modules loaded first: every module ordinal, in
    module events and FunctionDefs, moves up by three."""
    t = reader.read(B)
    for e in t.events:
        if 'module' in e:
            e['module']['ordinal'] += 3
        if 'launch' in e:
            module, name = e['launch']['function']
            e['launch']['function'] = (module + 3 if module else 0, name)
    arch = next(e['module']['arch'] for e in t.events if 'module' in e)
    for ordinal in (3, 2, 1):
        insert(t, 0, {'module': {'ordinal': ordinal, 'arch': arch,
                                 'cubin': {'idHigh': 0, 'idLow': 0, 'size': 0, 'encoding': 'raw'}}})
    expect_same_verdict(t, 'three modules loaded first')


def swap_pair(t):
    """Two allocations of equal size and kind that one launch lists in the
    same range list: (launch seq, ordinal, ordinal); else any launch using both."""
    allocs = allocations(t)
    best = None
    for e in launches(t):
        for same_list in (True, False):
            lists = range_lists(e['launch']) if same_list else [sum(range_lists(e['launch']), [])]
            for lst in lists:
                used = sorted({r['allocation'] for r in lst if r['allocation']})
                for i, x in enumerate(used):
                    for y in used[i + 1:]:
                        if (allocs[x]['size'], allocs[x]['kind']) == (allocs[y]['size'], allocs[y]['kind']):
                            if same_list:
                                return e['seq'], x, y, True
                            best = best or (e['seq'], x, y, False)
    return best


@check
def real_swapped_buffers():
    """Two live allocations of equal size and kind handed out in the other
    order: their device addresses swap, in allocation events, ranges and the
    parameter words that point into them; every digest stays with its buffer;
    each launch's ranges are in address order again."""
    t = reader.read(B)
    pair = swap_pair(t)
    expect(pair is not None, 'a launch uses two allocations of equal size and kind')
    seq, x, y, same_list = pair
    allocs = allocations(t)
    base = {x: allocs[y]['address'], y: allocs[x]['address']}
    size = allocs[x]['size']
    old = {o: allocs[o]['address'] for o in (x, y)}
    # Words that point into either allocation without being listed would
    # change meaning; a recorder lists every word that points into a live one.
    unlisted = [(e['seq'], o) for e in launches(t) for o, v in words(e['launch']['params'])
                if o not in {p['byteOffset'] for p in e['launch'].get('pointers', [])}
                and any(old[k] <= v < old[k] + size for k in old)]
    expect(not unlisted, 'no parameter word points into allocation %d or %d unlisted' % (x, y), unlisted)

    def move(d):
        if d.get('allocation') in base and 'address' in d:
            d['address'] = base[d['allocation']] + d['offset']
    for e in t.events:
        if 'alloc' in e and e['alloc']['ordinal'] in base:
            e['alloc']['address'] = base[e['alloc']['ordinal']]
        elif 'free' in e and e['free']['ordinal'] in base:
            e['free']['address'] = base[e['free']['ordinal']]
        walk(e, move)
        if 'launch' in e:
            L = e['launch']
            params = bytearray(L['params'])
            for p in L.get('pointers', []):
                if p['allocation'] in base:
                    struct.pack_into('<Q', params, p['byteOffset'], base[p['allocation']] + p['offset'])
            L['params'] = bytes(params)
            for k in ('inputs', 'outputs', 'reads'):
                if k in L:
                    L[k] = sorted(L[k], key=lambda r: r['address'])
    print('  allocations %d and %d (%d bytes) swap addresses; seq %d uses both%s' % (
        x, y, size, seq, ' in one range list' if same_list else ' (in different range lists)'))
    expect_same_verdict(t, 'allocations %d and %d swapped' % (x, y))


def plant_stale_word(t, seq, byte_offset, r, first_use):
    """Sets the launch's word at byte_offset to the device address of
    (allocation, offset), lists it in `pointers` and adds the range a
    recorder makes from it: hashed before the launch too when it is the
    bytes' first use, after it with the same digest (the kernel never
    touches them)."""
    e = t.events[position(t, seq)]
    L = e['launch']
    address = r['address']
    params = bytearray(L['params'])
    struct.pack_into('<Q', params, byte_offset, address)
    L['params'] = bytes(params)
    L['pointers'] = sorted(L.get('pointers', []) + [
        {'byteOffset': byte_offset, 'allocation': r['allocation'], 'offset': r['offset']}],
        key=lambda p: p['byteOffset'])
    for k in (('inputs', 'outputs') if first_use else ('outputs',)):
        L[k] = sorted(L.get(k, []) + [dict(r)], key=lambda x: x['address'])


def unused_words(t):
    """(seq, byte offset, what) of words no kernel reads, in structs passed
    by value: sizes[2] and sizes[3] of the first two-dimensional
    TensorInfo<T, unsigned int> (216 bytes: data, sizes[25], strides[25],
    dims), and the first slot past the tensors of list 0 in the first
    foreach launch's TensorListMetadata (addresses[depth][...] first)."""
    found = []
    for e in launches(t):
        L = e['launch']
        name = L['function'][1]
        listed = {q['byteOffset'] for q in L.get('pointers', [])}
        if 'TensorInfo' in name and not any('TensorInfo' in w for _, _, w in found):
            p = next((p for p in L.get('paramLayout', []) if p['size'] == 216 and p['offset'] % 8 == 0
                      and struct.unpack_from('<i', L['params'], p['offset'] + 208)[0] == 2), None)
            if p and p['offset'] + 16 not in listed:
                found.append((e['seq'], p['offset'] + 16, 'TensorInfo sizes[2..3]'))
        if 'Foreach' in name and not any('TensorList' in w for _, _, w in found):
            slot = next(o for o in range(0, 512, 8) if o not in listed)
            if struct.unpack_from('<Q', L['params'], slot)[0] == 0:
                found.append((e['seq'], slot, 'TensorListMetadata address slot %d' % (slot // 8)))
    return found


def stale_words(where):
    """Plants, at the unused word `where` names (unused_words), a device
    address into a buffer an earlier launch wrote (hashed after the launch
    alone), then into memory no operation touches (hashed before and after
    too); both must leave the verdict as it is."""
    t0 = reader.read(B)
    sites = [s for s in unused_words(t0) if where in s[2]]
    expect(len(sites) == 1, 'a launch passes a %s by value with an unused word' % where, unused_words(t0))
    seq, word, where = sites[0]
    touched = {r[0] for e in t0.events for r in op_ranges(e)}
    pos = position(t0, seq)
    mine = {r[0:2] for r in op_ranges(t0.events[pos])}
    written = next(r for e in reversed(t0.events[:pos]) for r in e.get('launch', {}).get('outputs', [])
                   if r.get('bound') == 'block' and (r['allocation'], r['offset']) not in mine)
    fresh = max((e['alloc'] for e in t0.events[:pos] if 'alloc' in e and e['alloc']['ordinal'] not in touched
                 and e['alloc']['kind'] == 'device'), key=lambda a: a['size'])
    offset = 4096
    # fresh memory: hashed before the launch too, its digest anything
    untouched = {'address': fresh['address'] + offset, 'size': fresh['size'] - offset,
                 'allocation': fresh['ordinal'], 'offset': offset, 'digest': 0x5eed5eed5eed5eed,
                 'bound': 'allocation'}
    failures = []
    for what, r, first_use in (('a buffer written before', written, False),
                               ('memory no operation touches', untouched, True)):
        t = reader.read(B)
        plant_stale_word(t, seq, word, dict(r), first_use)
        print('  seq %d (%s), word %d (%s) points at allocation %d offset %d (%s, a %d-byte range)' % (
            seq, t.events[pos]['origin']['op'], word, where, r['allocation'], r['offset'], what, r['size']))
        try:
            expect_same_verdict(t, 'stale word at seq %d into %s' % (seq, what))
        except Failure as f:
            print('  FAIL ' + str(f))
            failures.append(str(f).split(':')[0])
    if failures:
        raise Failure('; '.join(failures))


@check
def real_stale_word():
    """In run B only, an unused address slot of a foreach launch's
    TensorListMetadata (a launch the first divergence taints) holds a device
    address into a live allocation, listed in `pointers`, with the range a
    recorder hashes through it."""
    stale_words('TensorListMetadata')


@check
def real_stale_word_at_divergence():
    """The same at the first divergent launch, index_add_: sizes[2..3] of
    its two-dimensional TensorInfo, 0 in run A. The stale word weighs
    nothing: the verdict stays nondeterministic kernel."""
    stale_words('TensorInfo')


RNG_KERNELS = ('PhiloxCudaState', 'curandState')


def movable(t, first):
    """A launch that can move n operations later, n = 3, 2, 1: on its thread
    and stream, passing no free of memory it uses, no launch of its kernel,
    and no operation that touches bytes it touches; it and those it passes
    take no random numbers (their Philox offsets would move with the order).
    One before the first divergence if any, else the first after it.
    Returns (event index, indices of the operations it passes)."""
    found = []
    for n in (3, 2, 1):
        for i, e in enumerate(t.events):
            if 'launch' not in e or any(k in e['launch']['function'][1] for k in RNG_KERNELS):
                continue
            mine = op_ranges(e)
            passed, j = [], i + 1
            while j < len(t.events) and len(passed) < n:
                o = t.events[j]
                if o['thread'] != e['thread'] or ('free' in o and any(r[0] == o['free']['ordinal'] for r in mine)):
                    break
                if is_operation(o):
                    theirs = op_ranges(o)
                    if o[kind(o)].get('stream') != e['launch']['stream'] or \
                            ('launch' in o and (o['launch']['function'][1] == e['launch']['function'][1] or
                                                any(k in o['launch']['function'][1] for k in RNG_KERNELS))) or \
                            any(a == b and s < f2 and s2 < f for a, s, f in mine for b, s2, f2 in theirs):
                        break
                    passed.append(j)
                j += 1
            if len(passed) == n:
                found.append((i, passed))
        before = [f for f in found if t.events[f[1][-1]]['seq'] < first]
        if found:
            return (before or found)[0]
    return None


@check
def real_moved_operation():
    """A launch whose inputs nothing in between writes and whose outputs
    nothing in between reads or writes, moved a few operations later on its
    stream and thread, after the first divergence: the same verdict and the
    same independent divergences; the move is one reordering, its two ends
    listed as path divergences marked reordered and explained by the first
    divergence's taint (DIFF.md, Reorderings), one operation fewer matched."""
    t = reader.read(B)
    found = movable(t, baseline()['first']['aSeq'])
    expect(found is not None, 'a launch can move later')
    i, passed = found
    end = passed[-1] + 1
    window = t.events[i:end]
    stamps = [(w['seq'], w['timeNs'], w[BLOCK]) for w in window]
    window = window[1:] + window[:1]
    for w, (seq, ns, block) in zip(window, stamps):
        w['seq'], w['timeNs'], w[BLOCK] = seq, ns, block
    t.events[i:end] = window
    e = window[-1]
    print('  seq %d (%s) moved %d operations later, after seq %d (%s)' % (
        stamps[0][0], e['origin']['op'], len(passed), stamps[-1][0], window[-2].get('origin', {}).get('op')))
    path = reader.write(t, os.path.join(TMP, 'moved.gpurr'))
    verify(path)
    j = diff(A, path)
    got, want = summary(j), baseline()
    for k in ('identical', 'cause', 'mechanism', 'path', 'first', 'independent'):
        expect(got[k] == want[k], 'the same %s' % k, {'a vs b': want[k], "a vs b'": got[k]})
    expect(got['blastRadius']['independentCount'] == want['blastRadius']['independentCount'],
           'the same number of independent divergences', got['blastRadius'])
    listed = j['processes'][0]['pathDivergences']['listed']
    expect(got['pathDivergences'] == want['pathDivergences'] + 2 and
           all(s.get('reordered') and s.get('readsTaintedData') for s in listed[-2:]),
           'the move: its two ends, reordered and explained', listed)
    crossed = {s['reordered'].get('crossed') for s in listed[-2:]}
    expect(crossed == {len(passed)}, 'crossing %d operations' % len(passed), listed)
    expect(got['operations']['matched'] == want['operations']['matched'] - 1, 'one operation fewer matched',
           got['operations'])


# ------------------------------------------------------------ main

def main():
    global GPURR
    if sys.argv[1:2] == ['--list']:
        print('\n'.join(CHECKS))
        return 0
    GPURR = os.path.abspath(sys.argv[1])
    names = sys.argv[2:]
    if not names:
        names = list(CHECKS)

    def scratch(path):
        global TMP
        TMP = path
    return runner.run(CHECKS, names, Failure, scratch, 'gpurr-plant-')


if __name__ == '__main__':
    sys.exit(main())
