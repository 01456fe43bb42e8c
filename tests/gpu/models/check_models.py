#!/usr/bin/env python3
"""check_models.py BUILD_DIR [--only CASE]... [--keep DIR] [--lanes N]:
gpurr on real model code (the scripts of this folder), each case of
expectations.txt in the modes it lists.

deterministic mode: one plain run, then `gpurr bisect` (two recordings
compared) with the framework layer attributing as `gpurr record` does by
default (GPURR_FULL_ATTRIBUTION=0: it observes two steps, then follows
them; bisect otherwise observes every op). Checks: the verdict is
identical, and both recordings printed exactly the plain run's step lines
(losses and parameter digests). Its figures are the case's cost: recorded
over plain step time (medians of the steps after the first), launches per
step (`gpurr info`'s median step), the recorder's median time per launch in
its callbacks and the GPU operations it enqueued per launch (`gpurr
info`'s recorderCost), how the layer attributed the steps (observed in
full / followed / partly observed: its origins.layerSteps), trace bytes
per step, bisect's wall time over the plain run's, and peak host memory
(the largest process of each) recorded over plain.

default mode: two plain runs, the ground truth. Where their step lines
differ, `gpurr bisect` must say diverged (reproduced, or with a replay that
proves the kernel nondeterministic) at or before the first step that
differs, and name the first divergence's cause, op, module path (rooted at
the case's model class), source line and step, and what expectations.txt
asks for the case. Where they agree, bisect runs too when time is left, and
what it says is reported (a bitwise divergence that washes out of the
parameters is a true finding).

Prints `PASS models CASE MODE: ...` / `FAIL models CASE MODE: ...` lines
(what tests/gpu/run.sh counts), `FOUND` lines (what each bisect named),
`COST` lines, and at the end the cost table as Markdown (also cost.md in
the work folder). Jobs run in --lanes parallel lanes (default 3, or
GPURR_MODELS_LANES): the figures are taken with that many cases sharing the
GPU. With GPURR_DEADLINE (seconds since 1970) no job starts less than 40 s
before it; those not started are listed as SKIP.

Exits 0 when every check passes, 1 when one fails, 2 on a usage error, 77
where there is no GPU. Standard library only; parsing and evaluation are
unit-tested on the CPU (test_check_models.py).
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bisect"))
import check_bisect  # noqa: E402  (the bisect checker's report readers)

MODES = ("deterministic", "default")
FIELDS = ("modes", "cause", "culprit", "module", "op", "line", "step")


class Case:
    """One line of expectations.txt."""

    def __init__(self, name, script, args, fields):
        self.name = name
        self.script = script
        self.args = list(args)
        self.modes = tuple(fields.get("modes", MODES))
        self.expect = {k: v for k, v in fields.items() if k != "modes"}

    def command(self, python, mode):
        return [python, os.path.join(HERE, self.script), "--mode", mode] + self.args


def parse_expectations(text):
    """The cases of expectations.txt, in file order: each line is a case
    name, its script, the script's own arguments (words without '='), then
    key=value fields (`|` separates accepted values). Raises ValueError
    naming the line for anything malformed."""
    cases, seen = [], set()
    for number, raw in enumerate(text.splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        where = f"expectations line {number}"
        if len(words) < 2 or not words[1].endswith(".py"):
            raise ValueError(f"{where}: expected CASE SCRIPT.py [ARG...] [key=value...]")
        name, script = words[0], words[1]
        if name in seen:
            raise ValueError(f"{where}: case {name} is listed twice")
        seen.add(name)
        args, fields = [], {}
        for word in words[2:]:
            key, sep, value = word.partition("=")
            if not sep:
                if fields:
                    raise ValueError(f"{where}: argument {word!r} after a key=value field")
                args.append(word)
                continue
            if key not in FIELDS:
                raise ValueError(f"{where}: unknown key {key!r} (one of {', '.join(FIELDS)})")
            if key in fields or not value:
                raise ValueError(f"{where}: {key} given twice or empty")
            fields[key] = value.split("|")
        for mode in fields.get("modes", []):
            if mode not in MODES:
                raise ValueError(f"{where}: unknown mode {mode!r}")
        for cause in fields.get("cause", []):
            if cause not in check_bisect.CAUSES:
                raise ValueError(f"{where}: unknown cause {cause!r}")
        for step in fields.get("step", []):
            if not step.isdigit():
                raise ValueError(f"{where}: step= takes step numbers")
        cases.append(Case(name, script, args, fields))
    return cases


def step_lines(text):
    """The lines a model script prints that must be equal between runs that
    compute the same bits ("step N loss ... params ..." and "final ...")."""
    return [line for line in text.splitlines() if line.startswith(("step ", "final "))]


def first_differing_step(a, b):
    """The first step whose line differs between two runs' step lines, or
    None when they agree. A run that stopped early differs at the step it
    did not print."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return int(x.split()[1]) if x.startswith("step ") else i
    if len(a) != len(b):
        longer = a if len(a) > len(b) else b
        line = longer[min(len(a), len(b))]
        return int(line.split()[1]) if line.startswith("step ") else min(len(a), len(b))
    return None


def step_times(text):
    """The step times (ms) a script wrote to stderr, by step."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0] == "gpurr-models:" and parts[1] == "step" and parts[3] == "ms":
            out[int(parts[2])] = float(parts[4])
    return out


def steady_ms(times):
    """The median time of the steps after the first (the first compiles,
    autotunes and allocates), or of all when there is only one."""
    later = [ms for step, ms in sorted(times.items()) if step > 0] or list(times.values())
    return statistics.median(later) if later else None


def origin_problems(case, origin, first_step):
    """What is wrong with a first divergence's origin for this case: it must
    name an op, a module path rooted at the case's model class, a source
    line and a step at or before first_step (None: the plain runs agreed)."""
    if not isinstance(origin, dict):
        return ["the first divergence has no origin (op, module, line, step)"]
    problems = []
    named = {origin.get("op"), origin.get("forwardOp")} | set(origin.get("opStack") or [])
    named.discard(None)
    if not named:
        problems.append("no op named")
    ops = case.expect.get("op")
    if ops and not named & set(ops):
        problems.append(f"op {origin.get('op')!r}, expected {' or '.join(ops)}")
    module = origin.get("module") or ""
    roots = case.expect.get("module") or []
    if not module and "-" not in roots:
        problems.append("no module path")
    elif module and roots and not any(module == r or module.startswith(r + ".") for r in roots):
        problems.append(f"module {module!r}, expected " +
                        " or ".join("outside every module" if r == "-" else f"under {r}" for r in roots))
    if not origin.get("file") or not origin.get("line"):
        problems.append("no source line")
    lines = case.expect.get("line")
    if lines and os.path.basename(str(origin.get("file"))) not in lines:
        problems.append(f"source file {origin.get('file')}, expected {' or '.join(lines)}")
    step = origin.get("step")
    if not isinstance(step, int):
        problems.append("no step")
    elif first_step is not None and step > first_step:
        problems.append(f"step {step}, after step {first_step} where the parameters first differ")
    steps = case.expect.get("step")
    if steps and str(step) not in steps:
        problems.append(f"step {step}, expected {' or '.join(steps)}")
    return problems


def describe(origin):
    if not isinstance(origin, dict):
        return "no origin"
    op = origin.get("op") or "?"
    if origin.get("forwardOp") and origin.get("forwardOp") != op:
        op += f" (backward of {origin['forwardOp']})"
    return (f"{op} in {origin.get('module') or '?'}, {origin.get('file')}:{origin.get('line')}, "
            f"step {origin.get('step')}")


def benign_notes(report):
    """What the diff of a bisect's two recordings paired or renamed rather
    than call it a divergence (docs/DIFF.md: stale words, launch
    configurations, renamed allocations), one phrase each, so that a GPU
    run shows which of these its models need."""
    notes = []
    diff = report.get("diff") if isinstance(report, dict) else None
    for process in (diff or {}).get("processes") or []:
        if not isinstance(process, dict):
            continue
        if process.get("allocationsRenamed"):
            notes.append(f"{process['allocationsRenamed']} of run B's allocations renamed")
        for kind, paired in sorted((process.get("pairedDespite") or {}).items()):
            notes.append(f"{paired.get('count')} launches paired despite {kind}")
    return notes


def evaluate_default(case, report, exit_status, first_step):
    """Checks a default-mode bisect against the ground truth (first_step:
    the first step whose plain runs' lines differ, or None). Returns
    (problems, finding)."""
    if not isinstance(report, dict):
        return [f"no readable report.json (gpurr bisect exit status {exit_status})"], ""
    verdict = report.get("verdict")
    divergences = check_bisect.first_divergences(report.get("diff"))
    finding = f"verdict {verdict}"
    problems = []
    if verdict == "failed" or verdict not in check_bisect.VERDICTS:
        return [f"gpurr bisect verdict {verdict!r}" +
                (f" ({report.get('replayError')})" if report.get("replayError") else "")], finding
    if verdict == "identical":
        if first_step is not None:
            problems.append(f"verdict identical, but two plain runs differ from step {first_step}")
        return problems, finding
    if not divergences:
        return [f"verdict {verdict} without a first divergence"], finding
    _, fd = divergences[0]
    op = fd.get("a") if isinstance(fd.get("a"), dict) else fd.get("b")
    origin = op.get("origin") if isinstance(op, dict) else None
    kernel = (op.get("demangled") or op.get("name") or "") if isinstance(op, dict) else ""
    known = [k.get("id") for k in fd.get("known") or [] if isinstance(k, dict)]
    replay = report.get("replay") if isinstance(report.get("replay"), dict) else {}
    finding += (f", cause {fd.get('cause')} at {kernel[:70]}; {describe(origin)}"
                f"; known {', '.join(map(str, known)) or 'none'}"
                f"; replay {replay.get('verdict', 'not run: ' + str(report.get('replayError') or '-'))}")
    if verdict == "notReproduced" and replay.get("verdict") != "nondeterministic":
        # An algorithm chosen anew in every run (cudnn.benchmark's timing)
        # may be chosen otherwise elsewhere in the confirm run: that run
        # diverging by an algorithm choice too reproduces the cause.
        confirm = check_bisect.first_divergences(report.get("confirmation"))
        anew = fd.get("cause") == "algorithmChoice" and confirm and confirm[0][1].get("cause") == "algorithmChoice"
        if not anew:
            problems.append("the confirm run did not reproduce the divergence and replay proved nothing")
    causes = case.expect.get("cause")
    if causes and fd.get("cause") not in causes:
        problems.append(f"cause {fd.get('cause')!r}, expected {' or '.join(causes)}")
    culprits = case.expect.get("culprit")
    if culprits and not set(culprits) & set(known):
        problems.append(f"known culprit {' or '.join(culprits)} not named (named: {', '.join(map(str, known)) or 'none'})")
    problems += origin_problems(case, origin, first_step)
    return problems, finding


class Runner:
    """Runs the jobs, prints their lines (one at a time), keeps the figures."""

    def __init__(self, gpurr, python, work, timeout, deadline):
        self.gpurr, self.python, self.work = gpurr, python, work
        self.timeout, self.deadline = timeout, deadline
        self.lock = threading.Lock()
        self.failed = 0
        self.costs = {}

    def say(self, line):
        with self.lock:
            if line.startswith("FAIL "):
                self.failed += 1
            print(line, flush=True)

    def left(self):
        return None if self.deadline is None else self.deadline - time.time()

    def run(self, command, stem, env=None):
        """Runs command with stdout and stderr into stem.out / stem.err:
        (exit status or None when it ran past the limit, seconds, peak RSS
        in KiB of the largest process of its tree)."""
        limit = self.timeout
        if self.left() is not None:
            limit = max(1, min(limit, self.left() - 15))
        start = time.monotonic()
        with open(stem + ".out", "wb") as out, open(stem + ".err", "wb") as err:
            proc = subprocess.Popen(command, stdout=out, stderr=err, env=env, start_new_session=True)
            timer = threading.Timer(limit, self.kill, (proc.pid,))
            timer.start()
            _, status, usage = os.wait4(proc.pid, 0)
            timer.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)
        code = proc.returncode if proc.returncode not in (-9,) else None
        return code, time.monotonic() - start, usage.ru_maxrss

    @staticmethod
    def kill(pid):
        try:
            os.killpg(pid, 9)
        except OSError:
            pass

    def env(self, case):
        """The environment of every run of a case: Inductor's and Triton's
        caches in a folder of the case's own (a subfolder per mode) that
        common.py empties once the run holds the GPU, so that every run
        compiles as the first did."""
        env = dict(os.environ)
        env["GPURR_MODELS_FRESH_CACHE"] = os.path.join(tempfile.gettempdir(), "gpurr-models-cache", case.name)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def bisect(self, case, mode, tag, **env):
        """gpurr bisect of the case, with `env` added to its environment:
        (exit status, seconds, peak RSS, report or None, bisect folder)."""
        out_dir = os.path.join(self.work, case.name, f"{mode}-{tag}")
        shutil.rmtree(out_dir, ignore_errors=True)
        code, seconds, rss = self.run([self.gpurr, "bisect", "-o", out_dir, "--"] + case.command(self.python, mode),
                                      out_dir + ".log", dict(self.env(case), **env))
        report = None
        try:
            with open(os.path.join(out_dir, "report.json")) as f:
                report = json.load(f)
        except (OSError, ValueError):
            pass
        return code, seconds, rss, report, out_dir

    def tail(self, path, n=8):
        try:
            with open(path, errors="replace") as f:
                return ["    " + line for line in f.read().splitlines()[-n:]]
        except OSError:
            return []

    def read(self, path):
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def plain(self, case, mode, tag):
        stem = os.path.join(self.work, case.name, f"{mode}-plain{tag}")
        code, seconds, rss = self.run(case.command(self.python, mode), stem, self.env(case))
        return code, seconds, rss, self.read(stem + ".out"), self.read(stem + ".err"), stem

    def ran(self, name, which, code, out, stem):
        """Whether a plain run ran; SKIP (77) or FAIL, with its stderr's
        end, where not."""
        if code == 77:
            self.say(f"SKIP {name}: {out.strip().splitlines()[-1] if out.strip() else 'skipped'}")
        elif code != 0:
            self.say(f"FAIL {name}: {which} exited with {code}")
            for line in self.tail(stem + ".err", 12):
                self.say(line)
        return code == 0

    def skipped(self, case, mode):
        if self.left() is not None and self.left() < 40:
            self.say(f"SKIP models {case.name} {mode}: GPURR_DEADLINE reached before it started")
            return True
        return False

    def deterministic(self, case):
        name = f"models {case.name} deterministic"
        if self.skipped(case, "deterministic"):
            return
        code, plain_s, plain_rss, out, err, stem = self.plain(case, "deterministic", "")
        if not self.ran(name, "the plain run", code, out, stem):
            return
        warned = sorted({line.strip() for line in err.splitlines() if "deterministic" in line and "Warning" in line})
        for w in warned[:5]:
            self.say(f"NOTE {name}: {w[:300]}")
        # The recordings attribute as `gpurr record`'s do by default: their
        # step time is what a user who leaves recording on pays.
        bcode, bisect_s, bisect_rss, report, out_dir = self.bisect(case, "deterministic", "bisect",
                                                                   GPURR_FULL_ATTRIBUTION="0")
        problems = []
        verdict = report.get("verdict") if isinstance(report, dict) else None
        if not isinstance(report, dict):
            problems.append(f"no report.json (gpurr bisect exit status {bcode})")
        elif verdict != "identical":
            divs = check_bisect.first_divergences(report.get("diff"))
            fd = divs[0][1] if divs else {}
            op = fd.get("a") if isinstance(fd.get("a"), dict) else fd.get("b")
            problems.append(f"two recordings not identical: verdict {verdict}, cause {fd.get('cause')} "
                            f"({fd.get('summary')}) at {describe(op.get('origin') if isinstance(op, dict) else None)}")
        for note in benign_notes(report):
            self.say(f"NOTE {name}: {note}")
        plain_lines = step_lines(out)
        recorded = []
        for run in (1, 2):
            log = self.read(os.path.join(out_dir, f"run{run}.log"))
            recorded.append(log)
            if step_lines(log) != plain_lines:
                problems.append(f"recorded run {run} printed other step lines than the plain run "
                                f"(first differing step {first_differing_step(plain_lines, step_lines(log))})")
        if not plain_lines:
            problems.append("the plain run printed no step lines")
        self.cost(case, out, err, plain_s, plain_rss, recorded[0], bisect_s, bisect_rss, out_dir)
        if problems:
            self.say(f"FAIL {name}: {'; '.join(problems)}")
            for line in self.tail(out_dir + ".log"):
                self.say(line)
        else:
            self.say(f"PASS {name}: two recordings identical, output unchanged by recording "
                     f"({plain_lines[-1] if plain_lines else ''})")

    def cost(self, case, out, err, plain_s, plain_rss, recorded_log, bisect_s, bisect_rss, out_dir):
        plain_ms = steady_ms(step_times(err))
        rec_ms = steady_ms(step_times(recorded_log))
        steps = len([line for line in step_lines(out) if line.startswith("step ")]) or 1
        trace = os.path.join(out_dir, "run1.gpurr")
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(trace) for f in fs)
        per_step = launches = recorder = layer = None
        try:
            info = json.loads(subprocess.run([self.gpurr, "info", "--json", trace], capture_output=True,
                                             timeout=120).stdout)
            per_step = (info.get("perStep") or {}).get("medianLaunches")
            launches = info.get("launches")
            recorder = info.get("recorderCost") or {}
            layer = (info.get("origins") or {}).get("layerSteps")
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        figures = {
            "plain_ms": plain_ms, "recorded_ms": rec_ms,
            "ratio": rec_ms / plain_ms if plain_ms and rec_ms else None,
            "launches": launches, "launches_per_step": per_step, "trace_bytes_per_step": size / steps,
            # The recorder's own measurements: its time per launch in the
            # callbacks (median) and the GPU operations it enqueued per launch
            # (hash launches and copies; the deferral's goal is 0.25).
            "callback_us": recorder["medianNs"] / 1e3 if recorder and "medianNs" in recorder else None,
            "gpu_ops_per_launch": recorder.get("meanGpuOps") if recorder else None,
            # How the layer attributed the steps: observed in full, followed
            # from templates, partly observed (an operation matched none).
            "steps_layer": "/".join(str(layer.get(k, "?")) for k in ("observed", "followed", "unmatched"))
            if isinstance(layer, dict) else None,
            "plain_s": plain_s, "bisect_s": bisect_s, "bisect_ratio": bisect_s / plain_s if plain_s else None,
            "plain_rss_mib": plain_rss / 1024, "recorded_rss_mib": bisect_rss / 1024,
            "rss_ratio": bisect_rss / plain_rss if plain_rss else None,
        }
        with self.lock:
            self.costs[case.name] = figures
        self.say("COST " + case.name + " " + " ".join(
            f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items()))

    def default(self, case, queue_extra):
        name = f"models {case.name} default"
        if self.skipped(case, "default"):
            return
        runs = []
        for tag in ("1", "2"):
            code, seconds, _, out, err, stem = self.plain(case, "default", tag)
            if not self.ran(name, f"plain run {tag}", code, out, stem):
                return
            runs.append(step_lines(out))
        first = first_differing_step(runs[0], runs[1])
        if first is None:
            self.say(f"FOUND {case.name} default: two plain runs identical ({runs[0][-1] if runs[0] else ''})")
            queue_extra(lambda: self.default_bisect(case, None))
        else:
            self.say(f"FOUND {case.name} default: two plain runs differ from step {first}")
            self.default_bisect(case, first)

    def default_bisect(self, case, first):
        name = f"models {case.name} default"
        if first is None and self.left() is not None and self.left() < 90:
            self.say(f"SKIP {name} bisect (plain runs identical): GPURR_DEADLINE near")
            return
        code, seconds, _, report, out_dir = self.bisect(case, "default", "bisect")
        problems, finding = evaluate_default(case, report, code, first)
        self.say(f"FOUND {case.name} default bisect ({seconds:.0f} s): {finding}")
        for note in benign_notes(report):
            self.say(f"NOTE {name}: {note}")
        if first is None:
            # Ground truth says equal: whatever bisect says is reported, and
            # only a failure to run is a failure.
            if not isinstance(report, dict) or report.get("verdict") == "failed":
                self.say(f"FAIL {name}: gpurr bisect failed (exit status {code})")
                for line in self.tail(out_dir + ".log"):
                    self.say(line)
            return
        if problems:
            self.say(f"FAIL {name}: {'; '.join(problems)}")
            for line in self.tail(out_dir + ".log"):
                self.say(line)
        else:
            self.say(f"PASS {name}: plain runs differ from step {first}; bisect {finding}")

    def table(self):
        head = ("| case | plain step (ms) | recorded step (ms) | recorded/plain | launches/step | "
                "recorder us/launch | its GPU ops/launch | steps observed/followed/partly | "
                "trace KiB/step | bisect/plain wall | peak RSS plain (MiB) | recorded/plain RSS |")
        rows = [head, "|" + "---|" * 12]

        def f(v, fmt):
            return format(v, fmt) if isinstance(v, (int, float)) else "-"
        for name, c in self.costs.items():
            rows.append(f"| {name} | {f(c['plain_ms'], '.2f')} | {f(c['recorded_ms'], '.2f')} | "
                        f"{f(c['ratio'], '.2f')}x | {c['launches_per_step'] or '-'} | "
                        f"{f(c.get('callback_us'), '.1f')} | {f(c.get('gpu_ops_per_launch'), '.3f')} | "
                        f"{c.get('steps_layer') or '-'} | "
                        f"{f(c['trace_bytes_per_step'] / 1024, '.0f')} | {f(c['bisect_ratio'], '.1f')}x | "
                        f"{f(c['plain_rss_mib'], '.0f')} | {f(c['rss_ratio'], '.2f')}x |")
        return "\n".join(rows)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", help="the build folder or bundle (its bin/gpurr is used)")
    parser.add_argument("--only", action="append", default=[], metavar="CASE")
    parser.add_argument("--keep", metavar="DIR", help="write every run's files here and keep them")
    parser.add_argument("--lanes", type=int, default=int(os.environ.get("GPURR_MODELS_LANES", "3")))
    parser.add_argument("--timeout", type=float, default=300, help="seconds per run (default 300)")
    args = parser.parse_args(argv)
    python = os.environ.get("PYTHON", "python3")
    with open(os.path.join(HERE, "expectations.txt")) as f:
        cases = parse_expectations(f.read())
    if args.only:
        unknown = set(args.only) - {c.name for c in cases}
        if unknown:
            print(f"check_models.py: not in expectations.txt: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        cases = [c for c in cases if c.name in args.only]
    why = check_bisect.have_gpu(python)
    if why:
        print(f"{why}: skipped")
        return 77
    gpurr = os.path.join(os.path.abspath(args.build), "bin", "gpurr")
    if not os.access(gpurr, os.X_OK):
        print(f"FAIL models: {gpurr} is not built")
        return 1
    work = args.keep or tempfile.mkdtemp(prefix="gpurr-gpu-models-")
    os.makedirs(work, exist_ok=True)
    for c in cases:
        os.makedirs(os.path.join(work, c.name), exist_ok=True)
    deadline = os.environ.get("GPURR_DEADLINE")
    runner = Runner(gpurr, python, work, args.timeout, float(deadline) if deadline else None)
    print(f"models: {len(cases)} cases in {args.lanes} lanes; files in {work}", flush=True)

    # The deterministic jobs first (their figures are the cost table), the
    # default ones after; bisects of default pairs that agreed come last.
    jobs = [(runner.deterministic, c) for c in cases if "deterministic" in c.modes]
    jobs += [(runner.default, c) for c in cases if "default" in c.modes]
    extra = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.lanes)) as pool:
        futures = [pool.submit(job, c, extra.append) if job == runner.default else pool.submit(job, c)
                   for job, c in jobs]
        concurrent.futures.wait(futures)
        for fut in futures:
            if fut.exception():
                runner.say(f"FAIL models: the checker itself failed: {fut.exception()!r}")
        concurrent.futures.wait([pool.submit(job) for job in extra])
    table = runner.table()
    with open(os.path.join(work, "cost.md"), "w") as f:
        f.write(table + "\n")
    print(f"\ncost ({args.lanes} lanes sharing the GPU):\n{table}", flush=True)
    return 0 if runner.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
