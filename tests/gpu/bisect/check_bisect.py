#!/usr/bin/env python3
"""check_bisect.py BUILD_DIR [--only SCRIPT]... [--keep DIR]: `gpurr bisect`
end to end on the unmodified PyTorch scripts of this folder.

For each script of expectations.txt: one plain `python3 SCRIPT` run (timed),
then `BUILD_DIR/bin/gpurr bisect -o DIR -- python3 SCRIPT` (timed), and
DIR/report.json checked against the script's expectations: the verdict, the
exit status that goes with it, the first divergence's cause, the known
culprit, the replay verdict, every run's exit code, and that report.txt and
report.html were written. Prints one `PASS bisect SCRIPT: ...` or
`FAIL bisect SCRIPT: ...` line per script (the lines tests/gpu/run.sh counts)
and one `TIME SCRIPT bisect=..s plain=..s ratio=..` line.

Exits 0 when every check passes, 1 when one fails, 2 on a usage error, and 77
(skipped) where there is no GPU: no nvidia-smi, or PyTorch missing or seeing
no GPU. Standard library only; the checking itself (evaluate) needs no GPU
and is unit-tested by test_check_bisect.py.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

VERDICTS = ("identical", "diverged", "notReproduced", "failed")
# gpurr bisect's exit status for each verdict.
EXIT_STATUS = {"identical": 0, "diverged": 1, "notReproduced": 1, "failed": 2}
# docs/DIFF.md, "Causes" (the --json names).
CAUSES = ("environment", "hostInput", "rngState", "scalarParameters", "algorithmChoice", "reordered",
          "nondeterministicKernel", "uninitialisedMemory", "collective", "collectiveReductionOrder", "unknown")
# replayer/README.md, "JSON".
REPLAY_VERDICTS = ("equal", "different", "nondeterministic", "unrecorded")
REPORT_FILES = ("report.json", "report.txt", "report.html")


class Expectation:
    """What one script's bisect must report; empty sets are not checked."""

    def __init__(self, script, verdicts, causes=(), culprit=None, replay=(), origin=None):
        self.script = script
        self.verdicts = frozenset(verdicts)
        self.causes = frozenset(causes)
        self.culprit = culprit
        self.replay = frozenset(replay)
        # op / module / step / line of the first divergence's origin: a list
        # of accepted values each (line: a text the script's line contains).
        self.origin = dict(origin or {})

    def __repr__(self):
        return (f"Expectation({self.script!r}, verdicts={sorted(self.verdicts)}, "
                f"causes={sorted(self.causes)}, culprit={self.culprit!r}, replay={sorted(self.replay)})")


def parse_expectations(text):
    """The expectations of expectations.txt, in file order. Raises ValueError
    naming the line for anything malformed."""
    out = []
    seen = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        script, *fields = line.split()
        where = f"expectations line {number} ({script})"
        if not script.endswith(".py"):
            raise ValueError(f"{where}: the first word must be a script name ending in .py")
        if script in seen:
            raise ValueError(f"{where}: the script is listed twice")
        seen.add(script)
        values = {}
        for field in fields:
            key, sep, value = field.partition("=")
            if not sep or not value:
                raise ValueError(f"{where}: expected key=value, got {field!r}")
            if key in values:
                raise ValueError(f"{where}: {key} given twice")
            values[key] = value.split("|")
        unknown = set(values) - {"verdict", "cause", "culprit", "replay", "op", "module", "step", "line"}
        if unknown:
            raise ValueError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        verdicts = values.get("verdict")
        if not verdicts:
            raise ValueError(f"{where}: verdict= is required")
        for v in verdicts:
            if v not in VERDICTS:
                raise ValueError(f"{where}: unknown verdict {v!r} (one of {', '.join(VERDICTS)})")
        causes = values.get("cause", [])
        for c in causes:
            if c not in CAUSES:
                raise ValueError(f"{where}: unknown cause {c!r} (one of {', '.join(CAUSES)})")
        if set(verdicts) - {"identical"} and not causes:
            raise ValueError(f"{where}: a verdict other than identical needs cause=")
        culprit = values.get("culprit")
        if culprit and len(culprit) != 1:
            raise ValueError(f"{where}: one culprit id only")
        replay = values.get("replay", [])
        for r in replay:
            if r not in REPLAY_VERDICTS:
                raise ValueError(f"{where}: unknown replay verdict {r!r} (one of {', '.join(REPLAY_VERDICTS)})")
        origin = {k: values[k] for k in ("op", "module", "step", "line") if k in values}
        for v in origin.get("step", []):
            if not v.isdigit():
                raise ValueError(f"{where}: step= takes step numbers, got {v!r}")
        out.append(Expectation(script, verdicts, causes, culprit[0] if culprit else None, replay, origin))
    return out


def first_divergences(diff):
    """(process name, firstDivergence) of each process of a `gpurr diff --json`
    object that has one, in the diff's order."""
    if not isinstance(diff, dict):
        return []
    out = []
    for process in diff.get("processes") or []:
        if isinstance(process, dict) and isinstance(process.get("firstDivergence"), dict):
            out.append((process.get("name", ""), process["firstDivergence"]))
    return out


def check_origin(expect, origin, script_lines):
    """Problems of a first divergence's origin (its op's "origin" object, or
    None) against expect.origin; script_lines: the script's text by line."""
    if not expect.origin:
        return []
    if not isinstance(origin, dict):
        return ["the first divergence has no origin (op, module, line, step)"]
    problems = []
    ops = expect.origin.get("op")
    if ops:
        named = {origin.get("op"), origin.get("forwardOp")} | set(origin.get("opStack") or [])
        if not named & set(ops):
            problems.append(f"op {origin.get('op')!r} (stack {origin.get('opStack')}), expected {' or '.join(ops)}")
    modules = expect.origin.get("module")
    if modules and origin.get("module") not in modules:
        problems.append(f"module {origin.get('module')!r}, expected {' or '.join(modules)}")
    steps = expect.origin.get("step")
    if steps and str(origin.get("step")) not in steps:
        problems.append(f"step {origin.get('step')!r}, expected {' or '.join(steps)}")
    for text in expect.origin.get("line", []):
        lines = [n for n, line in enumerate(script_lines, 1) if text in line]
        where = f"{os.path.basename(str(origin.get('file')))}:{origin.get('line')}"
        if not lines:
            problems.append(f"line= text {text!r} is not in {expect.script}")
        elif os.path.basename(str(origin.get("file"))) != expect.script or origin.get("line") != lines[0]:
            problems.append(f"source {where}, expected {expect.script}:{lines[0]}")
    return problems


def evaluate(expect, report, exit_status, present, script_lines=()):
    """Checks one bisect against its expectation.

    report: the parsed report.json (None when missing or unreadable);
    exit_status: gpurr bisect's exit status; present: the names of the
    non-empty files in the output directory. Returns (problems, summary):
    no problems means PASS; summary says what was found, for the PASS line.
    """
    problems = []
    for name in REPORT_FILES[1:]:
        if name not in present:
            problems.append(f"{name} missing or empty")
    if not isinstance(report, dict):
        problems.insert(0, f"no readable report.json (gpurr bisect exit status {exit_status})")
        return problems, ""

    verdict = report.get("verdict")
    facts = [f"verdict {verdict}"]
    if verdict not in expect.verdicts:
        problems.append(f"verdict {verdict!r}, expected {' or '.join(sorted(expect.verdicts))}")
    wanted_status = EXIT_STATUS.get(verdict)
    if wanted_status is not None and exit_status != wanted_status:
        problems.append(f"exit status {exit_status} with verdict {verdict}, expected {wanted_status}")

    runs = report.get("runs")
    if not isinstance(runs, list) or len(runs) < 2:
        problems.append(f"report.json has {len(runs) if isinstance(runs, list) else 'no'} runs, expected 2 or more")
    else:
        for i, run in enumerate(runs, 1):
            code = run.get("exitCode") if isinstance(run, dict) else None
            if code != 0:
                log = run.get("log") if isinstance(run, dict) else None
                problems.append(f"run {i} of the command exited with {code} (log {log})")
        launches = [run.get("launches") for run in runs if isinstance(run, dict)]
        facts.append(f"{len(runs)} runs of {launches[0]} launches" if launches else f"{len(runs)} runs")

    divergences = first_divergences(report.get("diff"))
    if verdict == "identical":
        if divergences:
            name, fd = divergences[0]
            problems.append(f"verdict identical, but the diff has a first divergence (cause {fd.get('cause')!r})")
    elif verdict in ("diverged", "notReproduced"):
        if not divergences:
            problems.append(f"verdict {verdict} without a first divergence in report.json's diff")
        else:
            name, fd = divergences[0]
            cause = fd.get("cause")
            op = fd.get("a") if isinstance(fd.get("a"), dict) else fd.get("b")
            kernel = (op.get("demangled") or op.get("name") or "") if isinstance(op, dict) else ""
            facts.append(f"cause {cause}" + (f" in {name}" if name else "") +
                         (f" at {kernel[:60]}{'...' if len(kernel) > 60 else ''}" if kernel else ""))
            if expect.causes and cause not in expect.causes:
                evidence = "; ".join(str(e) for e in (fd.get("evidence") or [])[:2])
                problems.append(f"cause {cause!r}, expected {' or '.join(sorted(expect.causes))}"
                                + (f" ({fd.get('summary')}; {evidence})" if fd.get("summary") else ""))
            origin = op.get("origin") if isinstance(op, dict) else None
            if isinstance(origin, dict):
                facts.append(f"op {origin.get('op')} in {origin.get('module') or '?'} at "
                             f"{os.path.basename(str(origin.get('file')))}:{origin.get('line')}, step {origin.get('step')}")
            problems += check_origin(expect, origin, script_lines)
            if expect.culprit:
                ids = [k.get("id") for k in fd.get("known") or [] if isinstance(k, dict)]
                if expect.culprit in ids:
                    facts.append(f"culprit {expect.culprit}")
                else:
                    problems.append(f"known culprit {expect.culprit!r} not named (named: {', '.join(map(str, ids)) or 'none'})")
    elif verdict == "failed":
        problems.append("gpurr bisect says it failed" +
                        (f" (replayError: {report['replayError']})" if report.get("replayError") else ""))

    if expect.replay and verdict in ("diverged", "notReproduced"):
        replay = report.get("replay")
        if not isinstance(replay, dict):
            problems.append(f"no replay: {report.get('replayError') or 'report.json has neither replay nor replayError'}")
        else:
            rv = replay.get("verdict")
            facts.append(f"replay {rv} ({replay.get('distinctResults')} distinct results in {replay.get('runs')} runs)")
            if rv not in expect.replay:
                problems.append(f"replay verdict {rv!r}, expected {' or '.join(sorted(expect.replay))}"
                                + (f" ({replay.get('summary')})" if replay.get("summary") else ""))
    return problems, ", ".join(facts)


def have_gpu(python):
    """'' when this machine has a GPU that PyTorch sees, else why not."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "no nvidia-smi"
    try:
        if subprocess.run([smi, "-L"], capture_output=True, timeout=60).returncode != 0:
            return "nvidia-smi -L fails"
        probe = subprocess.run(
            [python, "-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"],
            capture_output=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot probe the GPU: {e}"
    if probe.returncode == 3:
        return "PyTorch sees no GPU"
    if probe.returncode != 0:
        return f"no PyTorch for {python}"
    return ""


def timed(command, out_path, timeout):
    """Runs command with stdout and stderr into out_path: (exit status,
    seconds); exit status None when it timed out."""
    start = time.monotonic()
    with open(out_path, "wb") as out:
        try:
            code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = None
    return code, time.monotonic() - start


def tail(path, lines=15):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()[-lines:]
    except OSError:
        return []


def check_script(expect, gpurr, python, work, timeout):
    """Runs and checks one script; prints its PASS/FAIL and TIME lines.
    Returns whether it passed."""
    script = os.path.join(HERE, expect.script)
    name = f"bisect {expect.script}"
    stem = os.path.splitext(expect.script)[0]
    plain_code, plain = timed([python, script], os.path.join(work, f"{stem}.plain.log"), timeout)
    out_dir = os.path.join(work, stem)
    log = os.path.join(work, f"{stem}.bisect.log")
    code, seconds = timed([gpurr, "bisect", "-o", out_dir, "--", python, script], log, timeout)
    ratio = f"{seconds / plain:.1f}" if plain > 0 else "-"
    problems = []
    if plain_code != 0:
        problems.append(f"the plain run exited with {plain_code}: " +
                        " | ".join(tail(os.path.join(work, f"{stem}.plain.log"), 3)))
    if code is None:
        problems.append(f"gpurr bisect ran past {timeout} s")
    report, report_error = None, ""
    try:
        with open(os.path.join(out_dir, "report.json")) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        report_error = str(e)
    present = set()
    if os.path.isdir(out_dir):
        present = {n for n in os.listdir(out_dir) if os.path.isfile(os.path.join(out_dir, n))
                   and os.path.getsize(os.path.join(out_dir, n)) > 0}
    with open(os.path.join(HERE, expect.script)) as f:
        script_lines = f.read().splitlines()
    found, summary = evaluate(expect, report, code, present, script_lines)
    problems += [f"{p}: {report_error}" if report_error and p.startswith("no readable report.json") else p
                 for p in found]
    if problems:
        print(f"FAIL {name}: {'; '.join(problems)}" + (f" (found: {summary})" if summary else ""))
        for line in tail(log):
            print(f"    {line}")
        print(f"    (output in {out_dir}, bisect log {log})")
    else:
        print(f"PASS {name}: {summary}")
    print(f"TIME {stem} bisect={seconds:.1f}s plain={plain:.1f}s ratio={ratio}", flush=True)
    return not problems


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", help="the build folder (its bin/gpurr is used)")
    parser.add_argument("--only", action="append", default=[], metavar="SCRIPT",
                        help="check only this script (repeatable)")
    parser.add_argument("--keep", metavar="DIR", help="write the bisect outputs here and keep them")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run (default 900)")
    args = parser.parse_args(argv)
    python = os.environ.get("PYTHON", "python3")

    with open(os.path.join(HERE, "expectations.txt")) as f:
        expectations = parse_expectations(f.read())
    if args.only:
        unknown = set(args.only) - {e.script for e in expectations}
        if unknown:
            print(f"check_bisect.py: not in expectations.txt: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        expectations = [e for e in expectations if e.script in args.only]

    why = have_gpu(python)
    if why:
        print(f"{why}: skipped")
        return 77
    gpurr = os.path.join(args.build, "bin", "gpurr")
    if not os.access(gpurr, os.X_OK):
        print(f"FAIL bisect: {gpurr} is not built")
        return 1

    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        work = args.keep
    else:
        work = tempfile.mkdtemp(prefix="gpurr-gpu-bisect-")
    passed = sum(check_script(e, gpurr, python, work, args.timeout) for e in expectations)
    if passed == len(expectations) and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"    (files in {work})")
    return 0 if passed == len(expectations) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
