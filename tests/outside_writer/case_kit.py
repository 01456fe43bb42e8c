"""What the outside writer's diff cases share (run_cases.py, named_cases.py,
old_trace_cases.py; job_cases.py its table, expectations and main): the
table of cases, expectations, a simulated training run written by the
outside writer and checked by `gpurr verify`, and `gpurr diff`'s verdict. GPURR (the gpurr binary) and TMP (the case's scratch
folder) are set by main() before each case runs."""
import json
import os
import subprocess

from gpurr_outside import runner, training

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
        raise Failure(what + ('' if detail is None else ': ' + json.dumps(detail, indent=1)[:4000]))
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


def main(argv, prefix='gpurr-outside-'):
    """A case script's command line: --list, or GPURR [CASE...]; each case's
    scratch folder is named with `prefix`."""
    global GPURR
    if argv[1:2] == ['--list']:
        print('\n'.join(CASES))
        return 0
    GPURR = os.path.abspath(argv[1])

    def scratch(path):
        global TMP
        TMP = path
    return runner.run(CASES, argv[2:] or list(CASES), Failure, scratch, prefix)
