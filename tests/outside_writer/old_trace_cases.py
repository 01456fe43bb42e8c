"""run_cases.py's cases on old and broken traces: a newer schema, an unknown
event kind, damaged files, a program stopped after a step, and traces that
cannot be compared."""
import json
import os
import re
import shutil
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
    to what it kept; a corrupt block or frame is trouble (exit 2)."""
    a, pa = record(Variant(seed=1))
    b, pb = record(Variant(seed=2))
    t = os.path.join(kit.TMP, 'truncated.gpurr')
    shutil.copytree(b, t)
    os.remove(os.path.join(t, 'index'))
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
