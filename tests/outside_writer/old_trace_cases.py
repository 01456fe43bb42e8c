"""run_cases.py's cases on old and broken traces: a newer schema, an unknown
event kind, damaged files, the `checksums` of header and index (FORMAT.md
section 5), a program stopped after a step, and traces that cannot be
compared."""
import json
import os
import re
import shutil
import struct
import subprocess

import case_kit as kit
from case_kit import case, diff, expect, first, process, record, seq_of, verify
from gpurr_outside import reader, trace, training
from gpurr_outside.training import Variant


FUTURE_MEMBER = 'memoryPressure @14 :MemoryPressure;'


def future_schema():
    """trace.capnp as a newer gpurr might have it: a new kind of event."""
    text = open(trace.SCHEMA_PATH).read()
    text = re.sub(r'@0x[0-9a-f]+;', '@0xc1a4aa4f6da9b517;', text, count=1)
    i = text.rindex('    graph @10 :GraphLaunch;')
    text = text[:i] + '    graph @10 :GraphLaunch;\n    ' + FUTURE_MEMBER + '\n' + text[i + len('    graph @10 :GraphLaunch;\n'):]
    text += '\nstruct MemoryPressure {\n  freeBytes @0 :UInt64;\n  device @1 :UInt32;\n  note @2 :Text;\n}\n'
    path = os.path.join(kit.TMP, 'future.capnp')
    open(path, 'w').write(text)
    return trace.load_schema(path)


@case
def unknown_event_kind():
    """A newer writer (compatVersion 13) adds a kind of event: gpurr skips it
    with one warning naming the trace's version, and compares the rest."""
    s = future_schema()
    a, pa = record(Variant(seed=1))
    prog = training.Training(Variant(seed=2)).run()
    allocs = [e['seq'] for e in prog.events if 'alloc' in e]
    extra = [(q + 1, {'seq': q + 1, 'timeNs': [e for e in prog.events if e['seq'] == q][0]['timeNs'], 'thread': 0,
                      'memoryPressure': {'freeBytes': 1 << 30, 'device': 0, 'note': 'low'}}) for q in allocs]
    b = os.path.join(kit.TMP, 'future.gpurr')
    prog.write(b, env={'CUBLAS_WORKSPACE_CONFIG': ':4096:8', 'PYTHONHASHSEED': '0'}, compat_version=13,
               schema_module=s, extra_events=extra)
    rc, j = verify(b)
    expect(j['eventsOfUnknownKind'] == len(extra), 'verify: sound, %d events of an unknown kind' % len(extra), j)
    for x, y in ((a, b), (b, a)):
        rc, j, err = diff(x, y)
        expect(rc == 0 and j['identical'], 'diff %s: identical, exit 0' % ('A B' if x == a else 'B A'), {'rc': rc, 'err': err})
        warn = [l for l in err.splitlines() if 'skipped' in l]
        expect(len(warn) == 1 and '13' in warn[0], 'one warning, naming compatibility 13', err)
    info = json.loads(subprocess.run([kit.GPURR, 'info', '--json', b], capture_output=True, text=True).stdout)
    expect(info['eventsOfUnknownKind'] == len(extra) and info['header']['compatVersion'] == 13,
           'info counts them', {k: info.get(k) for k in ('eventsOfUnknownKind', 'events')})


@case
def damaged_traces():
    """A recording killed mid-block (no index, a partial last block) compares up
    to what it kept; a block whose header is corrupt is read by the index
    checksums vouches for, or compared up to without one; one whose zstd
    frame is corrupt is compared up to it."""
    a, pa = record(Variant(seed=1))
    b, pb = record(Variant(seed=2))
    t = os.path.join(kit.TMP, 'truncated.gpurr')
    shutil.copytree(b, t)
    # a recording that did not end cleanly has neither index nor checksums
    os.remove(os.path.join(t, 'index'))
    os.remove(os.path.join(t, 'checksums'))
    ev = os.path.join(t, 'events')
    size = os.path.getsize(ev)
    with open(ev, 'r+b') as f:
        f.truncate(size - 300)
    rc, j, err = diff(a, t)
    # Identical up to where it stops, and nothing known past it: neither
    # identical nor different, exit 2, and the gap named.
    expect(rc == 2 and not j['identical'] and process(j)['identical'] and first(j) is None,
           'truncated run B: not known past where it stops, exit 2', {'rc': rc, 'err': err})
    gaps = process(j).get('gaps', [])
    expect(len(gaps) == 1 and gaps[0].startswith("run B's trace ends (its recording did not end cleanly)"),
           'the gap says where run B ends', gaps)
    expect(any('lost' in w or 'complete' in w or 'cleanly' in w for w in process(j)['warnings']),
           'a warning says what was lost', process(j)['warnings'])
    expect(process(j)['operations']['b'] < process(j)['operations']['a'], 'run B has fewer operations',
           process(j)['operations'])
    # truncated and diverging after the cut: still identical; before: found
    rc, j = verify(t, want_ok=False)
    print('  (verify on the truncated trace: exit %d, %s)' % (rc, j.get('problems') or j.get('notes')))
    expect(rc in (0, 1) and j.get('readable'), 'verify reads the truncated trace', j)

    def corrupt(name, offset_fn, data):
        c = os.path.join(kit.TMP, name)
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
    whole, _, _ = diff(a, b)
    rc, j, err = diff(a, c)
    # The index, which checksums vouches for, says where the block's frame is.
    warned = [w for w in process(j)['warnings'] if "read by its index's entry" in w] if j else []
    expect(rc == whole and warned and 'header of block 3 of' in warned[0] and 'bad magic' in warned[0],
           'bad magic in the third block: read by the index, compared whole (exit %d)' % whole,
           {'rc': rc, 'err': err, 'warnings': j and process(j)['warnings']})
    rc, j = verify(c, want_ok=False)
    expect(rc == 1 and not j.get('ok'), 'verify finds it (exit %d)' % rc, j)
    os.remove(os.path.join(c, 'checksums'))
    rc, j, err = diff(a, c)
    # Nothing vouches for the index: compared up to the block, as a trace cut short there.
    warned = [w for w in process(j)['warnings']
              if 'header of block 3' in w and 'is corrupt (bad magic)' in w] if j else []
    expect(rc == 2 and warned and 'compared up to its corrupt block' in warned[0],
           'and without checksums: compared up to it, not known after, exit 2',
           {'rc': rc, 'err': err, 'warnings': j and process(j)['warnings']})
    c = corrupt('badframe.gpurr', lambda c: third + 64 + 40, b'\xff\x00\xff\x00')
    rc, j, err = diff(a, c)
    # Compared up to the corrupt block, as a trace cut short there.
    warned = [w for w in process(j)['warnings'] if 'block 3 of' in w and 'is corrupt' in w] if j else []
    expect(rc == 2 and warned and 'compared up to its corrupt block' in warned[0] and process(j)['gaps'],
           'damaged zstd frame in the third block: compared up to it, not known after, exit 2',
           {'rc': rc, 'err': err, 'warnings': j and process(j)['warnings']})
    expect(process(j)['operations']['b'] < process(j)['operations']['a'], 'run B read up to the block',
           process(j)['operations'])
    rc, j = verify(c, want_ok=False)
    expect(rc in (1, 2) and not j.get('ok'), 'verify finds it (exit %d)' % rc, j)


def changed_copy(src, name, file, change):
    """A copy of the trace src named name, whose `file` is change(its bytes)
    (None: removed)."""
    c = os.path.join(kit.TMP, name)
    shutil.copytree(src, c)
    f = os.path.join(c, file)
    with open(f, 'rb') as fh:
        data = change(fh.read())
    if data is None:
        os.remove(f)
    else:
        with open(f, 'wb') as fh:
            fh.write(data)
    return c


def flip(data, marker, at):
    """data with byte `at` of the first occurrence of marker changed."""
    i = bytes(data).index(marker) + at
    return data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]


def refused(path, other, what):
    """gpurr verify and gpurr diff (either side) refuse the trace at path with
    an error, exit 2; returns verify's error."""
    rc, j = verify(path, want_ok=False)
    expect(rc == 2 and not j.get('ok') and not j.get('readable'), what + ': verify cannot read it, exit 2',
           {'rc': rc, 'out': j})
    for x, y in ((other, path), (path, other)):
        rc, _, err = diff(x, y)
        expect(rc == 2 and err.strip(), what + ': diff %s: exit 2 with a message' % ('A B' if x == other else 'B A'),
               {'rc': rc, 'stderr': err})
    return j.get('error', '')


@case
def checksums_clean():
    """A trace that ended cleanly has `checksums` (compatVersion 13), as
    `xxhsum -H2 header index` prints it, and `xxhsum -c` accepts it: gpurr
    verify finds it sound and the diff compares two such traces. A trace
    without an index has none."""
    a, pa = record(Variant(seed=1))
    b, _ = record(Variant(seed=2))
    for t in (a, b):
        with open(os.path.join(t, 'checksums'), 'rb') as f:
            text = f.read()
        cli = subprocess.run(['xxhsum', '-H2', 'header', 'index'], cwd=t, capture_output=True, check=True).stdout
        expect(text == cli, '%s: checksums is what `xxhsum -H2 header index` prints' % os.path.basename(t),
               [text.decode(), cli.decode()])
        r = subprocess.run(['xxhsum', '-c', 'checksums'], cwd=t, capture_output=True, text=True)
        expect(r.returncode == 0, '`xxhsum -c checksums` accepts it', r.stdout + r.stderr)
        rc, j = verify(t)
        expect(rc == 0 and j['ok'] and not j['problems'] and j['blocks'] > 1,
               'verify: sound, no problems, %d blocks' % j['blocks'], j)
        t_read = reader.read(t)
        expect(t_read.has_index and t_read.index_problem is None and t_read.header['compatVersion'] == 13,
               'the outside reader checks it and uses the index; compatVersion 13')
    rc, j, err = diff(a, b)
    p = process(j) if j else {}
    expect(rc == 0 and j['identical'], 'diff of two traces with checksums: identical, exit 0', {'rc': rc, 'err': err})
    expect(not any('index' in w or 'checksums' in w for w in p.get('warnings', [])),
           'no warning about their index or checksums', p.get('warnings'))
    kit._count[0] += 1
    c = os.path.join(kit.TMP, 'no-index.gpurr')
    pa.write(c, env={'CUBLAS_WORKSPACE_CONFIG': ':4096:8', 'PYTHONHASHSEED': '0'}, write_index=False,
             host_regions=training.HOST_REGIONS)
    expect(not os.path.exists(os.path.join(c, 'index')) and not os.path.exists(os.path.join(c, 'checksums')),
           'a trace written without an index has no checksums')


@case
def checksums_damaged_header():
    """One byte of the header changed after checksums were written (an
    environment variable's value: the message still parses, and without
    checksums the trace reads as sound): refused, saying the header is
    damaged (FORMAT.md section 5), by verify and by the diff, exit 2."""
    a, _ = record(Variant(seed=1))
    b, _ = record(Variant(seed=2))
    change = lambda d: flip(d, b':4096:8', 6)
    plain = changed_copy(b, 'header-changed-no-checksums.gpurr', 'header', change)
    os.remove(os.path.join(plain, 'checksums'))
    rc, _ = verify(plain)
    expect(rc == 0, 'without checksums the changed header reads as sound')
    c = changed_copy(b, 'header-changed.gpurr', 'header', change)
    error = refused(c, a, 'header changed')
    expect('header' in error and any(w in error for w in ('damaged', 'checksum', 'XXH3')),
           'the error says the header is damaged', error)
    try:
        reader.read(c)
        refused_outside = False
    except ValueError as e:
        refused_outside = 'header' in str(e)
    expect(refused_outside, 'the outside reader refuses it too')


@case
def checksums_damaged_index():
    """One byte of the index changed after checksums were written (a host
    region's end: every block entry still describes the file exactly), or
    the index removed while checksums lists it: the index is ignored, the
    blocks scanned instead (FORMAT.md section 5): verify reads every block
    and reports the problem, naming the index (exit 1); the diff compares
    every operation and says why."""
    a, _ = record(Variant(seed=1))
    b, _ = record(Variant(seed=2))
    rc, clean = verify(b)
    end = struct.pack('<Q', training.HOST_REGIONS[0][1])
    change = lambda d: flip(d, end, 2)
    plain = changed_copy(b, 'index-changed-no-checksums.gpurr', 'index', change)
    os.remove(os.path.join(plain, 'checksums'))
    rc, _ = verify(plain)
    expect(rc == 0, 'without checksums the changed index reads as sound')
    for name, how in (('index-changed.gpurr', change), ('index-missing.gpurr', lambda d: None)):
        c = changed_copy(b, name, 'index', how)
        what = 'index changed' if how is change else 'index listed but missing'
        rc, j = verify(c, want_ok=False)
        expect(rc == 1 and j.get('readable') and not j['ok'], what + ': verify reads the trace, problems found, exit 1',
               {'rc': rc, 'out': j})
        expect(any('index' in p for p in j['problems']), what + ': a problem names the index', j['problems'])
        expect(j['blocks'] == clean['blocks'] and j['events'] == clean['events'],
               what + ': every block scanned (%d blocks, %d events)' % (j['blocks'], j['events']), j)
        rc, dj, err = diff(a, c)
        p = process(dj) if dj else {}
        ops = p.get('operations', {})
        expect(rc in (0, 2) and p.get('firstDivergence') is None and ops.get('a') == ops.get('b') == ops.get('matched'),
               what + ': the diff compares every operation, no divergence (exit %d)' % rc, {'rc': rc, 'err': err, 'ops': ops})
        expect(any('index' in w for w in p.get('warnings', [])), what + ': a warning says why the index was ignored',
               p.get('warnings'))
        t = reader.read(c)
        expect(not t.has_index and t.index_problem and not t.host_regions and len(t.events) == clean['events'],
               what + ': the outside reader ignores the index too', t.index_problem)


@case
def checksums_unknown_name():
    """checksums lines naming files gpurr does not know (a later version's;
    one that exists with other bytes, one that does not exist) are skipped
    (FORMAT.md section 5): verify finds the trace sound, the diff identical."""
    a, _ = record(Variant(seed=1))
    b, _ = record(Variant(seed=2))
    extra = b'%s  summary\n%s  later-file\n' % (trace.checksum(b'something').encode(), trace.checksum(b'').encode())
    c = changed_copy(b, 'unknown-name.gpurr', 'checksums', lambda d: d + extra)
    with open(os.path.join(c, 'summary'), 'wb') as f:
        f.write(b'other bytes')
    rc, j = verify(c)
    expect(rc == 0 and j['ok'] and not j['problems'], 'verify: sound, exit 0', j)
    rc, j, err = diff(a, c)
    expect(rc == 0 and j['identical'], 'diff: identical, exit 0', {'rc': rc, 'err': err})
    expect(reader.read(c).has_index, 'the outside reader skips them too')


@case
def checksums_malformed():
    """A checksums line of another form than `<32 lowercase hex digits>
    <name>` and a line feed, a name listed twice or a file that lists no
    header makes the file damaged: an error that says so (FORMAT.md section
    5), for verify and the diff (exit 2); so does a file over 64 KiB
    (section 10)."""
    a, _ = record(Variant(seed=1))
    b, _ = record(Variant(seed=2))
    forms = (('a line of prose', lambda d: d + b'not a checksum line\n'),
             ('upper-case hex digits', lambda d: d[:32].upper() + d[32:]),
             ('one space', lambda d: d.replace(b'  header', b' header', 1)),
             ('31 hex digits', lambda d: d[1:]),
             ('no final line feed', lambda d: d[:-1]),
             ('an empty line', lambda d: d + b'\n'),
             ('header listed twice', lambda d: d + d.split(b'\n')[0] + b'\n'),
             ('no header listed', lambda d: b''.join(l + b'\n' for l in d.split(b'\n') if l and b'header' not in l)),
             ('an empty file', lambda d: b''))
    for i, (what, change) in enumerate(forms):
        c = changed_copy(b, 'malformed-%d.gpurr' % i, 'checksums', change)
        error = refused(c, a, what)
        expect('checksums' in error and 'damaged' in error, what + ': the error says checksums is damaged', error)
        try:
            reader.read(c)
            refused_outside = False
        except ValueError as e:
            refused_outside = 'checksums' in str(e)
        expect(refused_outside, what + ': the outside reader refuses it too')
    c = changed_copy(b, 'checksums-too-large.gpurr', 'checksums', lambda d: d + b'\n' * (64 << 10))
    error = refused(c, a, 'a checksums file over 64 KiB')
    expect('checksums' in error, 'the error names the checksums file', error)


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
    stopped = reader.write(t, os.path.join(kit.TMP, 'stopped.gpurr'))
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
    # The same program unchanged, stopped by gpurr after step 2 against one
    # cut short later (killed, no index): everything both recorded agrees;
    # the longer one's end, past the stopped one's, is not where they were
    # compared.
    same = reader.read(record(Variant(seed=3))[0])
    stopped_same = reader.read(a)
    cut_a = next(i for i, e in enumerate(stopped_same.events) if e.get('origin', {}).get('step', -1) > 2)
    stopped_same.events, stopped_same.stopped_after_step = stopped_same.events[:cut_a], 2
    killed_later = len(same.events) - 3
    same.events, same.has_index = same.events[:killed_later], False
    rc, j, err = diff(reader.write(stopped_same, os.path.join(kit.TMP, 'stopped-same.gpurr')),
                      reader.write(same, os.path.join(kit.TMP, 'killed-later.gpurr')))
    p = process(j)
    expect(rc == 0 and j['verdict'] == 'identical' and not p.get('gaps'),
           'stopped by gpurr against one killed later: identical, no gap',
           {'rc': rc, 'err': err, 'verdict': j.get('verdict'), 'gaps': p.get('gaps'), 'warnings': p.get('warnings')})
    t.stopped_after_step = -1
    ended = reader.write(t, os.path.join(kit.TMP, 'ended.gpurr'))
    rc, j, err = diff(a, ended)
    expect(rc == 1 and process(j)['pathDivergences']['count'] > 1,
           'with an index that says the program ended by itself, run A\'s later steps are a divergence too',
           process(j)['pathDivergences']['count'])


@case
def layer_steps():
    """An index that says how the framework layer attributed the steps
    (Index.layerSteps, compatVersion 10): `gpurr info` shows it, in text and
    JSON; a trace without it (every older one) shows null; it changes no
    verdict of the diff."""
    a, _ = record(Variant(seed=1))
    t = reader.read(a)
    steps = {'observed': 3, 'followed': 95, 'unmatched': 2, 'templates': 2, 'switches': 19}
    t.layer_steps = steps
    t.header['compatVersion'] = 10
    told = reader.write(t, os.path.join(kit.TMP, 'layer-steps.gpurr'))
    verify(told)
    r = subprocess.run([kit.GPURR, 'info', '--json', told], capture_output=True, text=True)
    expect(r.returncode == 0 and json.loads(r.stdout)['origins']['layerSteps'] == steps,
           'info --json gives the index\'s layerSteps', {'rc': r.returncode, 'out': r.stdout[-2000:]})
    r = subprocess.run([kit.GPURR, 'info', told], capture_output=True, text=True)
    expect(r.returncode == 0 and '3 observed in full, 95 followed from 2 templates (19 switches), 2 partly observed'
           in r.stdout, 'info says how the steps were attributed', r.stdout)
    r = subprocess.run([kit.GPURR, 'info', '--json', a], capture_output=True, text=True)
    expect(json.loads(r.stdout)['origins']['layerSteps'] is None, 'null in a trace whose index has none',
           r.stdout[-500:])
    rc, j, err = diff(a, told)
    expect(rc == 0, 'the same events: identical', {'rc': rc, 'err': err})


@case
def incomparable_traces():
    """Range digests of different chunk sizes cannot be compared: refused
    (exit 2), forced or not. Another command line: refused unless forced."""
    a, _ = record(Variant(seed=1))
    b, _ = record(Variant(seed=2, chunk_bytes=1024))
    for force in ([], ['--force']):
        r = subprocess.run([kit.GPURR, 'diff', '--json'] + force + [a, b], capture_output=True, text=True)
        expect(r.returncode == 2 and 'chunks of 65536 bytes' in r.stderr and 'chunks of 1024' in r.stderr,
               'chunks of 65536 and 1024 bytes%s: exit 2, saying why' % (' (--force)' if force else ''),
               {'rc': r.returncode, 'stderr': r.stderr})
    kit._count[0] += 1
    c = os.path.join(kit.TMP, 'other-command.gpurr')
    training.Training(Variant(seed=2)).run().write(
        c, env={'CUBLAS_WORKSPACE_CONFIG': ':4096:8', 'PYTHONHASHSEED': '0'}, command=('python3', 'train.py', '--lr', '0.1'))
    verify(c)
    rc, j, err = diff(a, c)
    expect(rc == 2 and 'different programs' in err, 'another command line: exit 2', {'rc': rc, 'err': err})
    r = subprocess.run([kit.GPURR, 'diff', '--json', '--force', a, c], capture_output=True, text=True)
    j = json.loads(r.stdout)
    expect(r.returncode == 0 and j['forced'] and process(j)['warnings'], 'with --force: identical, with a warning',
           {'rc': r.returncode, 'warnings': process(j)['warnings']})
