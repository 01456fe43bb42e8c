#!/usr/bin/env python3
"""Runs gpurr's resource-exhaustion regression suite (hostile_cases.py):
builds each hostile trace in a work folder, runs the case's gpurr commands
under a 1.5 GB address-space limit (prlimit --as) and a 60 s timeout,
measuring wall time and peak RSS (/usr/bin/time), and prints
`PASS name (...)` or `FAIL name: why` per case; exits 1 if any failed.
Usage: run_hostile.py --gpurr PATH [--work DIR] [--keep] [--list] [CASE...]
Run it with a Python that has pycapnp, zstandard and xxhash (the gpurr
venv's, e.g. /opt/gpurr-venv/bin/python)."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import hostile_cases  # noqa: E402
except ImportError as e:  # pycapnp, zstandard or xxhash missing
    sys.exit('run_hostile.py: %s (run it with the gpurr venv\'s Python, which has pycapnp, '
             'zstandard and xxhash)' % e)

# Bytes of address space gpurr may map: 1.5 GB, and for each core 16 MiB
# more (a decoding thread's stack); malloc keeps two arenas at most
# (MALLOC_ARENA_MAX below), each of which reserves 64 MiB.
AS_LIMIT = 1500000000 + (os.cpu_count() or 1) * (16 << 20)
TIMEOUT = 60              # seconds per command
FORBIDDEN = ('internal error', 'bad_alloc', 'std::')
OUT_HEAD = 1 << 20        # bytes of stdout a check sees (head and tail)


class Result:
    def __init__(self):
        self.rc = None            # exit status, or None when killed by a signal
        self.signal = None
        self.timed_out = False
        self.wall = 0.0
        self.rss_kb = 0
        self.out = ''
        self.err = ''


def run_gpurr(gpurr, args, folder, timeout, as_limit):
    """Runs gpurr ARGS under the limits; returns a Result."""
    r = Result()
    tfile = os.path.join(folder, '.time')
    ofile = os.path.join(folder, '.stdout')
    efile = os.path.join(folder, '.stderr')
    cmd = ['/usr/bin/time', '-f', '%M', '-o', tfile,
           'timeout', '-k', '5', str(timeout),
           'prlimit', '--as=%d' % as_limit, gpurr] + args
    env = dict(os.environ, NO_COLOR='1', MALLOC_ARENA_MAX='2')
    t = time.monotonic()
    with open(ofile, 'wb') as so, open(efile, 'wb') as se:
        p = subprocess.run(cmd, stdout=so, stderr=se, stdin=subprocess.DEVNULL, env=env)
    r.wall = time.monotonic() - t
    timing = open(tfile).read() if os.path.exists(tfile) else ''
    lines = timing.strip().splitlines()
    if lines and lines[-1].strip().isdigit():
        r.rss_kb = int(lines[-1])
    m = re.search(r'terminated by signal (\d+)', timing)
    if m:
        r.signal = int(m.group(1))
    elif p.returncode == 124 or (p.returncode == 137 and r.wall >= timeout):
        r.timed_out = True
    elif p.returncode > 128:
        r.signal = p.returncode - 128
    else:
        r.rc = p.returncode
    size = os.path.getsize(ofile)
    with open(ofile, 'rb') as so:
        head = so.read(OUT_HEAD)
        if size > 2 * OUT_HEAD:
            so.seek(size - OUT_HEAD)
            head += b'\n...\n' + so.read()
        else:
            head += so.read()
    r.out = head.decode('utf-8', 'replace')
    with open(efile, 'rb') as se:
        r.err = se.read(4 * OUT_HEAD).decode('utf-8', 'replace')
    for f in (tfile, ofile, efile):
        if os.path.exists(f):
            os.remove(f)
    return r


def error_line(err, sub, traces):
    """The first `gpurr SUB: error: ...` line of err naming one of traces."""
    for line in err.splitlines():
        if line.startswith('gpurr %s: error: ' % sub) and any(t in line for t in traces):
            return line
    return None


def judge(cmd, r, timeout):
    """None when the command's result meets its expectations, else why not."""
    what = 'gpurr ' + ' '.join(os.path.basename(a) if os.path.isabs(a) else a for a in cmd.args)
    if r.timed_out:
        return '%s: ran past %d s (peak RSS %d MB)' % (what, timeout, r.rss_kb // 1024)
    if r.signal is not None:
        return '%s: killed by signal %d after %.1f s (peak RSS %d MB)%s' % (
            what, r.signal, r.wall, r.rss_kb // 1024, last_line(r.err))
    if r.rc not in (0, 1, 2):
        return '%s: exit status %d%s' % (what, r.rc, last_line(r.err))
    for bad in FORBIDDEN:
        if bad in r.err:
            line = next((x for x in r.err.splitlines() if bad in x), '')
            return '%s: %r on stderr: %s' % (what, bad, line.strip()[:300])
    sub = cmd.args[0]
    if cmd.expect == 'error' and r.rc != 2:
        # `gpurr verify` reports a damaged trace as problems (exit 1), one
        # line each, naming the trace.
        named = any(t in line for line in r.out.splitlines() for t in cmd.traces)
        if not (sub == 'verify' and r.rc == 1 and named):
            return '%s: exit %d, expected an error (exit 2%s)%s' % (
                what, r.rc, ', or 1 with problems naming the trace' if sub == 'verify' else '',
                last_line(r.err))
    if cmd.expect == 'ok' and r.rc == 2:
        return '%s: exit 2, expected 0 or 1%s' % (what, last_line(r.err))
    # A diff of traces cut short (a damaged index is not trusted: the blocks
    # are scanned as after a crash) with no difference before the cut is
    # not known, exit 2, said on standard output (docs/DIFF.md).
    not_known = sub == 'diff' and (r.out.lstrip().startswith('not known:') or '\nnot known:' in r.out)
    if r.rc == 2 and error_line(r.err, sub, cmd.traces) is None and not not_known:
        return '%s: exit 2 without a `gpurr %s: error: ` line naming the trace%s' % (
            what, sub, last_line(r.err))
    if cmd.check is not None:
        why = cmd.check(r.rc, r.out, r.err)
        if why:
            return '%s: %s%s' % (what, why, last_line(r.err))
    return None


def last_line(err):
    lines = [x for x in err.strip().splitlines() if x.strip()]
    return (' [stderr: %s]' % lines[-1].strip()[:300]) if lines else ''


def run_case(c, gpurr, work, timeout, as_limit, keep):
    folder = os.path.join(work, c.name)
    if os.path.lexists(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    t = time.monotonic()
    try:
        cmds = c.build(folder)
    except Exception as e:  # a broken case is a failure of the suite, said so
        return False, 'building the input failed: %s: %s' % (type(e).__name__, e)
    built = time.monotonic() - t
    wall, rss = 0.0, 0
    for cmd in cmds:
        r = run_gpurr(gpurr, cmd.args, folder, timeout, as_limit)
        wall += r.wall
        rss = max(rss, r.rss_kb)
        why = judge(cmd, r, timeout)
        if why:
            if not keep:
                shutil.rmtree(folder, ignore_errors=True)
            return False, why
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return True, '%d cmd%s, %.2f s, peak RSS %d MB; input built in %.1f s' % (
        len(cmds), '' if len(cmds) == 1 else 's', wall, rss // 1024, built)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--gpurr', required=False, help='the gpurr binary to test')
    ap.add_argument('--work', help='folder for the hostile inputs (default: a temporary one, removed after)')
    ap.add_argument('--keep', action='store_true', help="keep each case's inputs in the work folder")
    ap.add_argument('--list', action='store_true', help='list the cases and exit')
    ap.add_argument('--timeout', type=int, default=TIMEOUT, help='seconds per command (default 60)')
    ap.add_argument('--as-limit', type=int, default=AS_LIMIT, help='address-space limit in bytes (default 1.5e9)')
    ap.add_argument('cases', nargs='*', metavar='CASE', help='cases to run (default: all)')
    a = ap.parse_args()
    if a.list:
        for c in hostile_cases.CASES.values():
            print('%-24s %s%s' % (c.name, '(handled) ' if c.handled else '', c.summary))
        return 0
    if not a.gpurr:
        ap.error('--gpurr is required')
    gpurr = os.path.abspath(a.gpurr)
    if not os.access(gpurr, os.X_OK):
        ap.error('%s: not an executable' % gpurr)
    unknown = [n for n in a.cases if n not in hostile_cases.CASES]
    if unknown:
        ap.error('unknown case(s): %s (see --list)' % ', '.join(unknown))
    names = a.cases or list(hostile_cases.CASES)
    temp = a.work is None
    work = os.path.abspath(a.work) if a.work else tempfile.mkdtemp(prefix='gpurr-hostile-')
    os.makedirs(work, exist_ok=True)
    failed = []
    start = time.monotonic()
    try:
        for name in names:
            ok, detail = run_case(hostile_cases.CASES[name], gpurr, work, a.timeout, a.as_limit, a.keep)
            print(('PASS %s (%s)' if ok else 'FAIL %s: %s') % (name, detail), flush=True)
            if not ok:
                failed.append(name)
    finally:
        if temp and not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print('%d of %d cases passed in %.1f s%s' % (
        len(names) - len(failed), len(names), time.monotonic() - start,
        ('; failed: ' + ' '.join(failed)) if failed else ''))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
