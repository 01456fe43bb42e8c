#!/usr/bin/env python3
"""Cases for the job view of `gpurr diff A/ B/` on directories of per-rank
traces written by the outside writer (gpurr_outside/job.py: an 8-rank job
whose gradients are all-reduced through NCCL).

usage: job_cases.py GPURR CASE [CASE...]   (or --list)

Each case writes two runs of the job that differ in one way, checks that
`gpurr verify` finds every trace sound, and checks the job's verdict in
`gpurr diff --json`, the text report and the HTML page."""
import json
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import case_kit as kit  # noqa: E402
    from case_kit import Failure, case, expect  # noqa: E402
    from gpurr_outside import job as jobs  # noqa: E402
except ImportError as e:
    sys.exit('job_cases.py: %s (scripts/setup.sh installs pycapnp, zstandard, xxhash and numpy '
             'into the test environment)' % e)

ENV = {'CUBLAS_WORKSPACE_CONFIG': ':4096:8', 'PYTHONHASHSEED': '0'}
OTHERS_THAN_5 = [0, 1, 2, 3, 4, 6, 7]


def write(name, job, env=None, ranks=None):
    d = os.path.join(kit.TMP, name)
    for path in job.run().write(d, env=env or ENV, ranks=ranks):
        r = subprocess.run([kit.GPURR, 'verify', '--json', path], capture_output=True, text=True)
        if r.returncode != 0 or not json.loads(r.stdout or '{}').get('ok'):
            raise Failure('gpurr verify %s: exit %d %s %s' % (path, r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return d


def diff(a, b):
    """The JSON report, the text report and the HTML page of `gpurr diff a b`."""
    html = os.path.join(kit.TMP, 'report.html')
    r = subprocess.run([kit.GPURR, 'diff', '--json', '--html', html, a, b], capture_output=True, text=True)
    try:
        j = json.loads(r.stdout)
    except ValueError:
        raise Failure('gpurr diff --json: exit %d, no JSON: %s' % (r.returncode, r.stderr[-2000:]))
    text = subprocess.run([kit.GPURR, 'diff', a, b], capture_output=True, text=True).stdout
    print('\n'.join('    | ' + line for line in text.split('\n') if line and not line.startswith('  ')
                    and '== process' not in line)[:6000])
    page = open(html).read() if os.path.exists(html) else ''
    return r.returncode, j, r.stderr, text, page


def roles(job):
    return {x['rank']: x['role'] for x in job['ranks']}


def table_ranks(page):
    """The ranks of the HTML ranks table's rows: a row of one rank, or of ranks
    alike but for their own rank and event numbers ("0-4, 6")."""
    table = page[page.find('<h3>Ranks</h3>'):]
    table = table[:table.find('</table>')]
    ranks = []
    for cell in re.findall(r'<tr><td><b>([0-9, -]+)</b></td>', table):
        for part in cell.split(', '):
            lo, _, hi = part.partition('-')
            ranks.extend(range(int(lo), int(hi or lo) + 1))
    return set(ranks) if len(ranks) == len(set(ranks)) else None


def check_page(page, *texts):
    expect('<section id="job">' in page and 'href="#job"' in page, 'the HTML page has the job section, linked')
    expect('<th>first divergent operation</th>' in page, 'the ranks side by side')
    expect(table_ranks(page) == set(range(8)), 'every rank in the ranks table, once', table_ranks(page))
    for t in texts:
        expect(t in page, 'the page says %r' % t)


@case
def job_origin_on_rank_5():
    """Rank 5 copies another batch at step 1: the origin; the all-reduce of step 1 carries it to the other ranks."""
    a = write('a', jobs.Job())
    b = write('b', jobs.Job(seed=2, planted={5: 1}))
    rc, j, err, text, page = diff(a, b)
    expect(rc == 1 and not j['identical'], 'different, exit 1', {'rc': rc, 'stderr': err})
    job = j.get('job')
    expect(job is not None and job['collectiveMismatches'] == [], 'the job view, no collective mismatch', job)
    expect(roles(job) == {r: 'origin' if r == 5 else 'receiver' for r in range(8)},
           'rank 5 the origin, the other 7 receivers', roles(job))
    causes = {x['rank']: x['cause'] for x in job['ranks']}
    expect(causes[5] == 'hostInput' and all(causes[r] == 'collective' for r in OTHERS_THAN_5),
           'rank 5 by a host input, the others by the collective', causes)
    expect(job['earliestOrigin']['rank'] == 5 and [x['rank'] for x in job['earliestOrigins']] == [5],
           'earliest origin: rank 5, alone', job['earliestOrigins'])
    expect(len(job['spread']) == 1, 'one collective carried it', job['spread'])
    s = job['spread'][0]
    expect(s['from'] == [5] and s['to'] == OTHERS_THAN_5 and s['step'] == 1, 'from rank 5 to the rest, at step 1', s)
    c = s['collective']
    expect(c['op'] == 'allReduce' and c['sequence'] == 1 and c['line'] == 30 and c['file'] == 'train.py' and
           c['call'].startswith('ncclAllReduce sum 1024 float32'), 'the all-reduce, its line and step', c)
    expect(job['cause'] is None, 'no job cause at a collective', job['cause'])
    expect('earliest origin: rank 5, ' in text, 'the text names the earliest origin')
    expect('at train.py:30, step 1 carried the divergence from rank 5 to ranks 0-4, 6, 7' in text, 'the text says how it spread')
    expect('\nranks 0-4, 6, 7: 7 receivers, after 1 collective: ncclAllReduce sum 1024 float32' in text,
           'the text gives the receivers of one collective one line')
    sections = [line for line in text.split('\n') if line.startswith('== ')][1:]
    expect(sections == ['== process rank5.gpurr ==', '== process rank0.gpurr ==',
                        '== ranks 1-4, 6, 7: the same report as rank0.gpurr, each with its own rank =='],
           "the processes' reports: the origin's first, then the receivers', alike but for their rank, once", sections)
    notes = {x['rank']: x['notes'] for x in job['ranks']}
    expect(notes[5] == [] and all(notes[r] and notes[r][0].startswith('a receiver: rank 5 sent other data to the '
                                                                      'collective that brought the divergence here')
                                  for r in OTHERS_THAN_5),
           "each receiver's report says where its divergence came from", notes)
    expect(text.count('\n  job      a receiver: rank 5 sent other data') == 1, 'in the text too, once')
    expect(all(len(notes[r]) == 1 for r in OTHERS_THAN_5), 'nothing else to note: no independent collective', notes)
    check_page(page, 'Earliest origin', 'How it spread', 'ranks 0-4, 6, 7', '>origin<', '>receiver<',
               'ranks 1-4, 6, 7: the same as <code>rank0.gpurr</code>, each with its own rank')
    expect(page.count('<h3>process <code>') == 2, "the page's causes: rank 0's and rank 5's, the rest alike to rank 0's",
           page.count('<h3>process <code>'))


@case
def job_origin_at_another_line():
    """Rank 5 copies another batch at step 1, from another line in run B (one
    branch of the program, or the other): the job's rows show both runs'."""
    a = write('a', jobs.Job())
    b = write('b', jobs.Job(seed=2, planted={5: 1}, planted_line=26))
    rc, j, err, text, page = diff(a, b)
    job = j.get('job') or {}
    expect(rc == 1 and (job.get('earliestOrigin') or {}).get('rank') == 5, 'rank 5 the earliest origin', job)
    line = next((l for l in text.split('\n') if l.startswith('earliest origin: rank 5, ')), '')
    expect(re.search(r'run A #\d+ .*train\.py:28.*, run B #\d+ .*train\.py:26', line) is not None,
           "the earliest origin's row names both runs' lines", line)
    expect('<td>run A train.py:28, run B train.py:26</td>' in page, "the page's ranks table too")


@case
def job_origin_sends_again():
    """Rank 5's batch differs at steps 1 and 2 of a job that all-reduces statistics it never applies: every
    receiver's all-reduce of step 2 reads identical data and receives other data. A rank's own report calls it
    an independent divergence; the job's notes say that rank 5 sent it other data."""
    a = write('a', jobs.Job(update=False))
    b = write('b', jobs.Job(seed=2, planted={5: {1, 2}}, update=False))
    rc, j, err, text, page = diff(a, b)
    job = j.get('job')
    expect(rc == 1 and job is not None, 'different, exit 1, a job view', {'rc': rc, 'stderr': err})
    expect(roles(job) == {r: 'origin' if r == 5 else 'receiver' for r in range(8)},
           'rank 5 the origin, the other 7 receivers', roles(job))
    procs = {p['name']: p for p in j['processes']}
    for r in OTHERS_THAN_5:
        blast = procs['rank%d.gpurr' % r]['blastRadius']
        expect(blast['independentCount'] == 1 and blast['independent'][0]['a']['kind'] == 'collective',
               "rank %d's own report: the all-reduce of step 2 is an independent divergence" % r, blast)
    notes = {x['rank']: x['notes'] for x in job['ranks']}
    second = [x for x in procs['rank0.gpurr']['blastRadius']['independent']][0]['a']['seq']
    for r in OTHERS_THAN_5:
        expect(len(notes[r]) == 2 and notes[r][1] == ('not independent: rank 5 sent other data to the collective '
                                                     'listed above (run A #%d) too; that is why it received other '
                                                     'data' % second),
               "rank %d: the job's note says rank 5 sent the step-2 all-reduce other data too" % r, notes[r])
    expect(notes[5] == [], "the origin's report needs no note (its step-2 copy is its own)", notes[5])
    expect(text.count('\n  job      not independent: rank 5 sent other data') == 1, 'in the text too (once: '
           'the receivers have one report)')
    # The ranks table gives ranks 0-4 one row and ranks 6 and 7 another,
    # each with the note (without the event number, each rank's own).
    table = page[page.find('<h3>Ranks</h3>'):]
    table = table[:table.find('</table>')]
    expect(table.count('<div class="muted">not independent: rank 5 sent other data to the collective listed above '
                       'too') == table.count('>receiver</td>') == 2, 'and on the HTML page, a row of receivers each',
           table)


@case
def job_two_origins():
    """Ranks 2 and 5 copy other batches at step 1, before the same all-reduce: both are origins, in rank order."""
    a = write('a', jobs.Job())
    b = write('b', jobs.Job(seed=2, planted={5: 1, 2: 1}))
    rc, j, err, text, page = diff(a, b)
    job = j.get('job')
    expect(rc == 1 and job is not None, 'different, exit 1, a job view', {'rc': rc, 'stderr': err})
    expect([x['rank'] for x in job['earliestOrigins']] == [2, 5] and job['earliestOrigin']['rank'] == 2,
           'earliest origins: ranks 2 and 5 (earliestOrigin the first)', job['earliestOrigins'])
    expect(all(x['collectivesBefore'] == 1 for x in job['earliestOrigins']), 'each after one collective')
    s = job['spread']
    expect(len(s) == 1 and s[0]['from'] == [2, 5] and s[0]['to'] == [0, 1, 3, 4, 6, 7],
           'the all-reduce carried it from ranks 2 and 5 to the rest', s)
    expect('earliest origins: ranks 2, 5, each after 1 collective' in text, 'the text names both origins')
    check_page(page, 'Earliest origins', '2 ranks diverged before the same collective')


@case
def job_origin_takes_another_path():
    """Rank 3 alone launches one kernel more at step 1 in run B, which changes no byte: its first divergence is
    a stretch run B alone took, after one collective, named by run B's operation; no other rank diverges."""
    a = write('a', jobs.Job())
    b = write('b', jobs.Job(extra={3: 1}))
    rc, j, err, text, page = diff(a, b)
    job = j.get('job')
    expect(rc == 1 and job is not None, 'different, exit 1, a job view', {'rc': rc, 'stderr': err})
    expect(roles(job) == {3: 'origin'}, 'rank 3 the origin, alone', roles(job))
    origin = job['earliestOrigin']
    first = [p for p in j['processes'] if p['name'] == 'rank3.gpurr'][0]['firstDivergence']
    expect(origin['rank'] == 3 and origin['collectivesBefore'] == 1, 'after the all-reduce of step 0', origin)
    # The runs' events agree up to there: run A's next event has the number of run B's stretch.
    expect(first['a'] is None and first['b']['seq'] > 0 and origin['seq'] == first['b']['seq'],
           "placed in run A where run B's stretch comes", {'origin': origin, 'b': first['b']})
    expect('earliest origin: rank 3, run B #%d ' % first['b']['seq'] in text and 'aten::mul_' in text,
           "the text names run B's operation", text[:1500])


@case
def job_reduction_order():
    """Every rank sends identical data in both runs; run B's all-reduce of step 1 adds in another order."""
    a = write('a', jobs.Job())
    b = write('b', jobs.Job(seed=2, pairwise_step=1))
    rc, j, err, text, page = diff(a, b)
    job = j.get('job')
    expect(rc == 1 and job is not None, 'different, exit 1, a job view', {'rc': rc, 'stderr': err})
    expect(roles(job) == {r: 'receiver' for r in range(8)}, 'every rank a receiver', roles(job))
    expect(all(x['cause'] == 'collective' for x in job['ranks']), "each rank's own cause: collective")
    expect(job['earliestOrigins'] == [] and job['earliestOrigin'] is None, 'no origin')
    s = job['spread']
    expect(len(s) == 1 and s[0]['from'] == [] and s[0]['to'] == list(range(8)) and s[0]['everyRankSentIdentical'] and
           s[0]['step'] == 1, 'the all-reduce of step 1 gave every rank other data, no rank sending other data', s)
    cause = job['cause']
    expect(cause is not None and cause['cause'] == 'collectiveReductionOrder' and
           cause['mechanism'] == 'collectiveReductionOrder', 'job cause: collectiveReductionOrder', cause)
    expect(cause['collective']['sequence'] == 1 and cause['collective']['step'] == 1, 'at the all-reduce of step 1',
           cause['collective'])
    expect(any('each of its 8 ranks sent identical data' in x for x in cause['evidence']) and
           any('NCCL chose another algorithm or protocol' in x for x in cause['evidence']),
           'evidence: identical inputs on every rank, NCCL chose differently', cause['evidence'])
    expect('NCCL_ALGO=Ring' in cause['fix'] and 'NCCL_ALGO=^NVLS' in cause['fix'], 'fix: pin or exclude NVLS',
           cause['fix'])
    expect('job cause: collective reduction order: ' in text and 'no origin' not in text,
           'the text names the job cause, not a missing origin')
    check_page(page, '>collective reduction order<', 'NCCL_ALGO=^NVLS', 'every rank sent identical data')


@case
def job_other_call_no_reduction_order():
    """Rank 5 all-gathers at step 1 where the others all-reduce (or all-reduces with max where they sum), sending
    what it would have (identical data), and the job hangs there: a collective mismatch, rank 5 the origin; the all-reduce the others' divergence is at was
    issued differently, so no job cause is given (not the reduction order, with NCCL's fix)."""
    a = write('a', jobs.Job(steps=2))
    for other_call in ((5, 1), (5, 1, 'max')):
        check_other_call(a, other_call)


def check_other_call(a, other_call):
    b = write('b%d' % len(other_call), jobs.Job(steps=2, other_call=other_call))
    rc, j, err, text, page = diff(a, b)
    job = j.get('job')
    expect(rc == 1 and job is not None, 'different, exit 1, a job view', {'rc': rc, 'stderr': err})
    expect(len(job['collectiveMismatches']) == 1, 'one collective mismatch', job['collectiveMismatches'])
    expect(job['earliestOrigin'] is not None and job['earliestOrigin']['rank'] == 5, 'earliest origin: rank 5',
           job['earliestOrigin'])
    expect(job['cause'] is None and 'job cause' not in text and 'NCCL_ALGO' not in text,
           'no job cause, no NCCL fix', job['cause'])
    expect(all(s['issuedDifferently'] and not s['everyRankSentIdentical'] for s in job['spread']),
           'the spread: issued differently, not every rank sending identical data', job['spread'])


@case
def job_reduction_order_nccl_environment():
    """The same with NCCL_ALGO=Ring in run A and Tree in run B: the cause is the environment."""
    a = write('a', jobs.Job(), env=dict(ENV, NCCL_ALGO='Ring'))
    b = write('b', jobs.Job(seed=2, pairwise_step=1), env=dict(ENV, NCCL_ALGO='Tree'))
    rc, j, err, text, page = diff(a, b)
    job = j.get('job')
    expect(rc == 1 and job is not None, 'different, exit 1, a job view', {'rc': rc, 'stderr': err})
    cause = job['cause']
    expect(cause is not None and cause['cause'] == 'environment' and cause['mechanism'] == 'collectiveReductionOrder',
           'job cause: environment, at a collective whose reduction order changed', cause)
    expect('env NCCL_ALGO' in cause['summary'] and
           any('env NCCL_ALGO (run A Ring, run B Tree)' in x for x in cause['evidence']),
           'it names NCCL_ALGO and both values', cause)
    expect(any('each of its 8 ranks sent identical data' in x for x in cause['evidence']),
           'the collective is its evidence', cause['evidence'])
    expect('job cause: environment: ' in text, 'the text names the job cause')
    check_page(page, '>environment<', 'At the collective itself: collective reduction order')


@case
def job_rank_missing():
    """Rank 7's trace is missing from run B; rank 5 is the origin: the job report still names it."""
    a = write('a', jobs.Job())
    b = write('b', jobs.Job(seed=2, planted={5: 1}), ranks=range(7))
    rc, j, err, text, page = diff(a, b)
    job = j.get('job')
    expect(rc == 1 and job is not None, 'different, exit 1, a job view', {'rc': rc, 'stderr': err})
    expect(job['earliestOrigin'] is not None and job['earliestOrigin']['rank'] == 5, 'earliest origin: rank 5',
           job['earliestOrigin'])
    expect('earliest origin: rank 5, ' in text and '<section id="job">' in page, 'the text and the page name it')


@case
def job_rank_killed():
    """Rank 3 of run B was killed in step 1, before its all-reduce (no index, a partial last block); rank 5 is the
    origin: the job report still names it."""
    a = write('a', jobs.Job())
    job_b = jobs.Job(seed=2, planted={5: 1}).run()
    d = os.path.join(kit.TMP, 'b')
    job_b.write(d, env=ENV, ranks=[r for r in range(8) if r != 3])
    p3 = job_b.procs[3]
    cut = next(i for i, e in enumerate(p3.events) if 'collective' in e and e['origin']['step'] == 1)
    p3.events = p3.events[:cut]
    path = os.path.join(d, 'rank3.gpurr')
    p3.write(path, env=ENV, compat_version=9, command=('python3', 'train.py', '--ddp'), write_index=False,
             events_per_block=4)
    with open(os.path.join(path, 'events'), 'r+b') as f:
        f.truncate(os.path.getsize(os.path.join(path, 'events')) - 100)
    rc, j, err, text, page = diff(a, d)
    job = j.get('job')
    expect(rc == 1 and job is not None, 'different, exit 1, a job view', {'rc': rc, 'stderr': err})
    expect(job['earliestOrigin'] is not None and job['earliestOrigin']['rank'] == 5, 'earliest origin: rank 5',
           job['earliestOrigin'])
    expect('earliest origin: rank 5, ' in text and '<section id="job">' in page, 'the text and the page name it')
    expect(job['collectiveMismatches'] == [],
           'no collective mismatch: rank 3 issued nothing after its trace ends, not another collective',
           job['collectiveMismatches'])


def rank_5_planted(**options):
    """The JSON report and its job view of a job (jobs.Job(**options)) whose rank 5 copies another batch at step 1
    in run B, checked: exit 1, rank 5 the origin, the other 7 receivers."""
    a = write('a', jobs.Job(**options))
    b = write('b', jobs.Job(seed=2, planted={5: 1}, **options))
    rc, j, err, text, page = diff(a, b)
    job = j.get('job')
    expect(rc == 1 and job is not None, 'different, exit 1, a job view', {'rc': rc, 'stderr': err})
    expect(roles(job) == {r: 'origin' if r == 5 else 'receiver' for r in range(8)},
           'rank 5 the origin, the other 7 receivers', roles(job))
    return j, job


@case
def job_async_origin_on_rank_5():
    """As job_origin_on_rank_5, the all-reduces asynchronous (what each rank receives not hashed, as under
    DistributedDataParallel): the receivers diverge at the update after the all-reduce, which carried it."""
    j, job = rank_5_planted(asynchronous=True)
    expect(job['earliestOrigin'] is not None and job['earliestOrigin']['rank'] == 5, 'earliest origin: rank 5',
           job['earliestOrigin'])
    # Each receiver's own report: what its update read arrived through the all-reduce.
    causes = {p['name']: (p['firstDivergence'] or {}).get('cause') for p in j['processes']}
    expect(all(causes['rank%d.gpurr' % r] == 'collective' for r in range(8) if r != 5),
           "each receiver's own cause: the collective it received through", causes)


@case
def job_object_origin_on_rank_5():
    """As job_async_origin_on_rank_5, the all-reduces an object collective's (what each rank sends is not hashed
    either): no rank is known to have sent it other data, but rank 5 diverged before it issued it: the likely
    sender, and the origin; the others are receivers through it. (That no rank sent step 0's all-reduce other data
    is not known, but the others' receipt of it, read by their updates, was identical: rank 5 received nothing
    other there.)"""
    a = write('a', jobs.Job(objects=True))
    b = write('b', jobs.Job(seed=2, planted={5: 1}, objects=True))
    rc, j, err, text, page = diff(a, b)
    job = j.get('job')
    expect(rc == 1 and job is not None, 'different, exit 1, a job view', {'rc': rc, 'stderr': err})
    expect(roles(job) == {r: 'origin' if r == 5 else 'receiver' for r in range(8)},
           'rank 5 the origin, the other 7 receivers', roles(job))
    expect(job['earliestOrigin'] is not None and job['earliestOrigin']['rank'] == 5, 'earliest origin: rank 5',
           job['earliestOrigin'])
    spread = job['spread']
    expect(len(spread) == 1 and spread[0]['from'] == [] and spread[0]['divergedBefore'] == [5] and
           spread[0]['to'] == OTHERS_THAN_5, 'the all-reduce reached the others; rank 5 diverged before it', spread)
    expect('what rank 5 sent it was not hashed, and it diverged before it issued it: the likely sender' in text,
           'the text names rank 5 the likely sender')
    expect('rank 5 (diverged before it; what they sent was not hashed)' in page, 'so does the page')


@case
def job_pipeline():
    """A 4-stage pipeline: each step, stage k receives stage k-1's gradient and sends on to k+1, so that the
    stages' sequence numbers on the communicator differ (stage 0 sends once a step, stage 1 receives and sends).
    Two runs alike are identical, with no collective mismatch; stage 1's batch differing at step 1 makes it the
    origin, and stages 2 and 3 receivers, each through the receive from the stage before."""
    a = write('a', jobs.Job(ranks=4, pipeline=True))
    same = write('same', jobs.Job(ranks=4, pipeline=True))
    rc, j, err, text, page = diff(a, same)
    job = j.get('job')
    expect(rc == 0 and job is not None and job['collectiveMismatches'] == [] and job['ranks'] == [],
           'identical runs: exit 0, no mismatch, no rank diverged', {'rc': rc, 'job': job})
    b = write('b', jobs.Job(ranks=4, pipeline=True, seed=2, planted={1: 1}))
    rc, j, err, text, page = diff(a, b)
    job = j.get('job')
    expect(rc == 1 and job is not None and job['collectiveMismatches'] == [], 'different, exit 1, no mismatch',
           {'rc': rc, 'job': job})
    expect(roles(job) == {1: 'origin', 2: 'receiver', 3: 'receiver'}, 'stage 1 the origin, 2 and 3 receivers',
           roles(job))
    spread = sorted((s['from'], s['to'], s['collective']['op']) for s in job['spread'])
    expect(spread == [([1], [2], 'recv'), ([2], [3], 'recv')],
           'through the receive from stage 1, then from stage 2', job['spread'])


@case
def job_copy_inside_collective():
    """As job_origin_on_rank_5, each rank's all-reduce receiving into an output that a launch attributed to
    another line writes before the call in the trace (gloo's reduce_scatter, inside c10d's call): the other ranks'
    first divergence is that copy, and they are receivers through the all-reduce, whose output it wrote."""
    j, job = rank_5_planted(copy_inside=True)
    firsts = {p['name']: p['firstDivergence']['a']['name'] for p in j['processes'] if p.get('firstDivergence')}
    expect(all('copy_kernel' in firsts['rank%d.gpurr' % r] for r in OTHERS_THAN_5),
           "each receiver's first divergence is the copy inside the call", firsts)
    expect(job['earliestOrigin']['rank'] == 5 and [s['from'] for s in job['spread']] == [[5]],
           'earliest origin rank 5, the all-reduce carried it', job['spread'])


@case
def job_async_origin_missing():
    """The same with rank 5's trace missing from run B: no rank recorded sent the all-reduce other data, and
    rank 5, which may have, was not recorded: no rank is named the origin, and the job says where it may have
    begun."""
    a = write('a', jobs.Job(asynchronous=True))
    b = write('b', jobs.Job(seed=2, planted={5: 1}, asynchronous=True), ranks=OTHERS_THAN_5)
    rc, j, err, text, page = diff(a, b)
    job = j.get('job')
    expect(rc == 1 and job is not None, 'different, exit 1, a job view', {'rc': rc, 'stderr': err})
    expect(roles(job) == {r: 'unknown' for r in OTHERS_THAN_5}, 'no origin, no receiver for sure', roles(job))
    expect(job['earliestOrigin'] is None and job['earliestOrigins'] == [], 'no earliest origin', job['earliestOrigins'])
    expect('no origin among the ranks recorded' in text and
           'it may have begun on a rank not recorded in both runs: rank5.gpurr (missing in run B)' in text,
           'the text says where it may have begun')
    expect('may have begun on a rank not recorded in both runs' in page, 'so does the page')


@case
def job_async_receiver_missing():
    """Rank 3's trace missing from run B instead: rank 5 is still the origin, the others receivers (each saw
    the all-reduce that rank 5 sent other data)."""
    a = write('a', jobs.Job(asynchronous=True))
    b = write('b', jobs.Job(seed=2, planted={5: 1}, asynchronous=True), ranks=[r for r in range(8) if r != 3])
    rc, j, err, text, page = diff(a, b)
    job = j.get('job')
    expect(rc == 1 and job is not None, 'different, exit 1, a job view', {'rc': rc, 'stderr': err})
    expect(roles(job) == {r: 'origin' if r == 5 else 'receiver' for r in range(8) if r != 3},
           'rank 5 the origin, the 6 others recorded receivers', roles(job))


@case
def job_sizes_differ():
    """Run B is the same job on 4 ranks: the jobs differ in size, said first; no collective's reduction order is
    blamed, although the ranks both runs have sent identical data at step 0."""
    a = write('a', jobs.Job())
    b = write('b', jobs.Job(ranks=4))
    rc, j, err, text, page = diff(a, b)
    job = j.get('job')
    expect(rc == 1 and job is not None, 'different, exit 1, a job view', {'rc': rc, 'stderr': err})
    expect(job.get('sizes', {}).get('a') == 8 and job['sizes'].get('b') == 4, 'the sizes named', job.get('sizes'))
    expect(job['cause'] is None and all(not s['everyRankSentIdentical'] for s in job['spread']),
           'no reduction order blamed', {'cause': job['cause'], 'spread': job['spread']})
    expect('the jobs differ in size: communicator ' in text and 'has 8 ranks in run A and 4 in run B' in text,
           'the text says so')
    expect('the jobs differ in size' in page, 'so does the page')


@case
def job_directory_commands():
    """A run's directory of per-rank traces, rank 3's cut short as a killed rank leaves it: `gpurr info` gives a
    row a rank and the job's totals, `gpurr verify` checks every trace, and a command that takes one trace says
    how to name one."""
    job = jobs.Job(ranks=12).run()
    d = os.path.join(kit.TMP, 'job')
    job.write(d, env=ENV, ranks=[r for r in range(12) if r != 3])
    p3 = job.procs[3]
    p3.write(os.path.join(d, 'rank3.gpurr'), env=ENV, compat_version=9, command=('python3', 'train.py', '--ddp'),
             write_index=False, events_per_block=4)
    run = lambda *args: subprocess.run([kit.GPURR] + list(args), capture_output=True, text=True)
    r = run('info', '--json', d)
    expect(r.returncode == 0, 'info DIR: exit 0', r.stderr[-2000:])
    j = json.loads(r.stdout)
    names = [p['process'] for p in j['processes']]
    expect(names == ['rank%d.gpurr' % i for i in range(12)], 'a row a rank, in rank order (rank10 after rank9)',
           names)
    expect(j['traces'] == 12 and j['incomplete'] == 1 and j['unreadable'] == 0 and j['collectives'] == 12 * 3,
           'the totals: 12 traces, one incomplete, 3 all-reduces a rank', {k: v for k, v in j.items() if k != 'processes'})
    expect([p['complete'] for p in j['processes']] == [i != 3 for i in range(12)], 'rank 3 incomplete')
    expect(sum(p['launches'] for p in j['processes']) == j['launches'], 'the launches add up')
    r = run('info', d)
    rows = [line.split()[0] for line in r.stdout.split('\n')[2:] if line.strip()]
    expect(r.returncode == 0 and rows == ['rank%d.gpurr' % i for i in range(12)] + ['total'],
           'the text: a row a rank, then the total', r.stdout)
    expect('incomplete' in r.stdout.split('\n')[2 + 3] and '11 complete, 1 incomplete' in r.stdout,
           "rank 3's row and the total say it is incomplete", r.stdout)
    r = run('verify', '--json', d)
    v = json.loads(r.stdout or '{}')
    expect(r.returncode == 1 and v.get('traces') == 12 and v.get('ok') is False and
           [p['ok'] for p in v['processes']] == [i != 3 for i in range(12)],
           'verify DIR: every trace checked, rank 3 has problems (its index is missing), exit 1',
           {'rc': r.returncode, 'stderr': r.stderr[-1000:]})
    r = run('verify', d)
    expect(r.stdout.rstrip().endswith(': 11 of 12 traces ok'), 'verify DIR: the directory\'s verdict last', r.stdout)
    r = run('dump', d)
    expect(r.returncode == 2 and 'a directory of 12 per-process traces' in r.stderr and
           os.path.join(d, 'rank0.gpurr') in r.stderr, 'dump DIR: exit 2, saying how to name one trace', r.stderr)


if __name__ == '__main__':
    sys.exit(kit.main(sys.argv, 'gpurr-job-'))
