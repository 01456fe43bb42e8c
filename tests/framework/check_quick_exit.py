"""gpurr record --quick-exit on a real PyTorch CPU program (quick_exit.py):
a program gpurr stops ends without the interpreter's teardown, and yet its
atexit handlers run, its open file and C's stdio are flushed, the trace is
complete and the exit status is 0; a program that ends otherwise (its own
sys.exit in a `finally`, or never stopped) ends as usual, status and
teardown included."""
import argparse
import gzip
import json
import os
import shutil
import signal
import subprocess

p = argparse.ArgumentParser()
for a in ("--gpurr", "--recorder", "--launcher", "--python", "--scripts", "--work"):
    p.add_argument(a, required=True)
args = p.parse_args()
shutil.rmtree(args.work, ignore_errors=True)
os.makedirs(args.work)
script = os.path.join(args.scripts, "quick_exit.py")
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


gz_log = ""  # the last run's log.gz, as run() read it


def run(name, *options, **extra):
    """Records quick_exit.py in work/NAME; returns the result, the trace's
    `gpurr info --json`, which of the program's markers exist and its
    log.txt (its log.gz in gz_log)."""
    global gz_log
    work = os.path.join(args.work, name)
    os.makedirs(work)
    env = dict(os.environ, GPURR_RECORDER_LIB=args.recorder, GPURR_TEST_LAUNCHER=args.launcher, **extra)
    trace = os.path.join(work, "run.gpurr")
    r = subprocess.run([args.gpurr, "record", "-o", trace, *options, "--", args.python, script, work],
                       env=env, capture_output=True, text=True, timeout=300)
    info = subprocess.run([args.gpurr, "info", "--json", trace], capture_output=True, text=True)
    info = json.loads(info.stdout) if info.returncode == 0 else {}
    marks = {m for m in ("atexit", "teardown") if os.path.exists(os.path.join(work, m))}
    with open(os.path.join(work, "log.txt")) as f:
        log = f.read()
    try:
        with gzip.open(os.path.join(work, "log.gz"), "rt") as f:
            gz_log = f.read()
    except (OSError, EOFError) as e:
        gz_log = f"unreadable ({e})"
    return r, info, marks, log


two_steps = "step 0\nstep 1\nfrom C stdio"
r, info, marks, log = run("quick", "--until-step", "1", "--quick-exit")
check(r.returncode == 0, f"stopped, quick exit: status 0 (got {r.returncode}): {r.stderr[-800:]}")
check(r.stdout == two_steps, f"stopped, quick exit: Python's and C's output kept: {r.stdout!r}")
check(log.count("\n") == 2 and log.startswith("step 0 loss"), f"stopped, quick exit: the open file flushed: {log!r}")
check(gz_log == "step 0\nstep 1\n", f"stopped, quick exit: the open gzip file closed whole: {gz_log!r}")
check(marks == {"atexit"}, f"stopped, quick exit: atexit handlers ran, the teardown did not: {sorted(marks)}")
check(info.get("complete") and info.get("stoppedAfterStep") == 1,
      f"stopped, quick exit: the trace is complete and stopped after step 1: {info}")

# An evaluation after each step (eval mode, no gradients) is the rest of
# the step's iteration: it runs, and the program stops at the next step's
# forward.
r, info, marks, log = run("evaluated", "--until-step", "1", "--quick-exit", QUICK_EXIT_EVAL="1")
check(r.returncode == 0 and r.stdout == two_steps and info.get("stoppedAfterStep") == 1 and
      [line.split()[0] + line.split()[1] for line in log.splitlines()] == ["step0", "eval0", "step1", "eval1"],
      f"stopped after step 1: its evaluation ran: {r.returncode} {r.stdout!r} {log!r} {info.get('stoppedAfterStep')}")

# What the program does on its way out calls the model in training mode (a
# final loss in its `finally`): it is not stopped again there.
r, info, marks, log = run("final", "--until-step", "1", "--quick-exit", QUICK_EXIT_FINAL="1")
check(r.returncode == 0 and r.stdout == two_steps and "\nfinal " in log and marks == {"atexit"},
      f"stopped after step 1: the finally block's model call ran: {r.returncode} {r.stdout!r} {log!r} {marks}")

# Two optimizers (a GAN's): steps are the first's, and the second's step of
# the last iteration runs before the stop.
r, info, marks, log = run("two-optimizers", "--until-step", "1", "--quick-exit", QUICK_EXIT_GAN="1")
check(r.returncode == 0 and r.stdout == two_steps and log.count("\n") == 2 and info.get("stoppedAfterStep") == 1,
      f"two optimizers, stopped after step 1: its iteration ended: {r.returncode} {r.stdout!r} {log!r} "
      f"{info.get('stoppedAfterStep')}")

# Each step trained on a thread of its own, joined: the thread ends quietly
# (no traceback of the stop's exception), and so does the main thread once
# the join returns, the program stopped whole.
r, info, marks, log = run("thread", "--until-step", "1", QUICK_EXIT_THREAD="1")
check(r.returncode == 0 and r.stdout == two_steps and log.count("\n") == 2 and info.get("stoppedAfterStep") == 1
      and info.get("complete") and "Traceback" not in r.stderr and "_Stop" not in r.stderr,
      f"trained on a thread, stopped after step 1: the program ended there: {r.returncode} {r.stdout!r} {log!r} "
      f"{info.get('stoppedAfterStep')} {r.stderr[-1500:]}")

# A stop file naming a step passed already (written after step 2, read at
# step 3's optimizer step): the program stops after step 3, whose iteration
# ends.
stop_file = os.path.join(args.work, "stop")
r, info, marks, log = run("stop-file-passed", "--stop-file", stop_file, "--quick-exit", QUICK_EXIT_STOP_FILE=stop_file)
check(r.returncode == 0 and r.stdout == "step 0\nstep 1\nstep 2\nstep 3\nfrom C stdio" and
      info.get("stoppedAfterStep") == 3,
      f"a stop file naming a step passed: stopped after the step that read it, whole: {r.returncode} {r.stdout!r} "
      f"{info.get('stoppedAfterStep')}")

r, info, marks, log = run("usual", "--until-step", "1")
check(r.returncode == 0 and r.stdout == two_steps, f"stopped: {r.returncode} {r.stdout!r}")
check(marks == {"atexit", "teardown"}, f"stopped without --quick-exit: the teardown ran: {sorted(marks)}")
check(info.get("complete") and info.get("stoppedAfterStep") == 1, f"stopped: {info}")

r, info, marks, log = run("finally", "--until-step", "1", "--quick-exit", QUICK_EXIT_FINALLY="3")
check(r.returncode == 3, f"the program's own exit after the stop: its status 3 (got {r.returncode})")
check(marks == {"atexit", "teardown"}, f"the program's own exit: the usual end: {sorted(marks)}")
check(info.get("complete") and info.get("stoppedAfterStep") == 1, f"the program's own exit: {info}")

r, info, marks, log = run("whole", "--quick-exit")
check(r.returncode == 0 and r.stdout.count("step ") == 5, f"never stopped: {r.returncode} {r.stdout!r}")
check(marks == {"atexit", "teardown"}, f"never stopped: the usual end: {sorted(marks)}")
check(info.get("complete") and info.get("stoppedAfterStep") is None, f"never stopped: {info}")
per_step = info.get("launches", 0) // 5

# Ctrl-C after step 1, well within the recorder's second between blocks:
# Python kills itself with SIGINT after its atexit handlers, so the
# recorder's exit handler never closes the trace; what it recorded is
# written all the same, and the trace reads as cut where the program stopped.
r, info, marks, log = run("interrupt", "--quick-exit", QUICK_EXIT_INTERRUPT="1")
check(r.returncode == -signal.SIGINT, f"Ctrl-C: gpurr dies of SIGINT (got {r.returncode}): {r.stderr[-800:]}")
check("atexit" in marks, f"Ctrl-C: the program's atexit handler ran: {sorted(marks)}")
check(per_step > 0 and info.get("launches") == 2 * per_step and not info.get("complete"),
      f"Ctrl-C: every launch of steps 0 and 1 ({2 * per_step}) kept in a trace left open: {info}")

# SIGTERM after step 1 (Slurm at a job's time limit, torchrun stopping a
# rank), which Python leaves to its default action: the recorder writes what
# it holds before the signal ends the program.
r, info, marks, log = run("term", QUICK_EXIT_TERM="1")
check(r.returncode == -signal.SIGTERM, f"SIGTERM: gpurr dies of SIGTERM (got {r.returncode}): {r.stderr[-800:]}")
check(r.stdout == "step 0\nstep 1\n", f"SIGTERM: the program's output up to the signal: {r.stdout!r}")
check(per_step > 0 and info.get("launches") == 2 * per_step and not info.get("complete"),
      f"SIGTERM: every launch of steps 0 and 1 ({2 * per_step}) kept in a trace left open: {info}")

# The same in a Python program that never imports torch (a JAX program, a
# plain CUDA one through ctypes): three launches, then Ctrl-C.
def record_plain(name, start, ending, *options):
    """Records a Python program that never imports torch (a JAX program, a
    plain CUDA one through ctypes): START, three launches, then ENDING.
    Returns the result and the trace's `gpurr info --json`."""
    plain = os.path.join(args.work, name + ".py")
    with open(plain, "w") as f:
        f.write("import ctypes, faulthandler, os, signal, time\n" + start + "\n"
                "recorder = ctypes.CDLL(os.environ['CUDA_INJECTION64_PATH'])\n"
                "for _ in range(3):\n"
                "    recorder.gpurr_test_launch(b'_Z6kernelv')\n" + ending + "\n")
    trace = os.path.join(args.work, name + ".gpurr")
    env = dict(os.environ, GPURR_RECORDER_LIB=args.recorder)
    r = subprocess.run([args.gpurr, "record", "-o", trace, *options, "--", args.python, plain], env=env,
                       capture_output=True, text=True, timeout=300)
    info = subprocess.run([args.gpurr, "info", "--json", trace], capture_output=True, text=True)
    return r, json.loads(info.stdout) if info.returncode == 0 else {}


# `status`: gpurr's (-N: it dies of the signal N the program died of).
# `complete`: whether the trace is closed as at an exit (else it reads as
# cut where the program stopped).
for name, start, ending, options, status, complete in (
        ("Ctrl-C", "", "raise KeyboardInterrupt", (), -signal.SIGINT, False),
        # No atexit handler of gpurr's: Python's own kill(getpid(), SIGINT)
        # after its exit handlers reaches the recorder's `kill` first.
        ("Ctrl-C with --no-framework", "", "raise KeyboardInterrupt", ("--no-framework",), -signal.SIGINT, False),
        ("SIGTERM with --no-framework", "", "os.kill(os.getpid(), signal.SIGTERM); time.sleep(30)",
         ("--no-framework",), -signal.SIGTERM, False),
        # faulthandler (pytest turns it on) takes the faults before the
        # recorder starts; it prints the stack, puts the handler before it
        # back (the default) and raises the signal again: the recorder's
        # `raise` takes it first.
        ("a crash under faulthandler", "faulthandler.enable()", "ctypes.string_at(0)", ("--no-framework",),
         -signal.SIGSEGV, False),
        # os._exit skips every exit handler: the recorder's `_exit` closes the
        # trace first.
        ("os._exit", "", "os._exit(5)", (), 5, True),
        ("os._exit with --no-framework", "", "os._exit(5)", ("--no-framework",), 5, True),
        # os.execv replaces the program without exit handlers too (a launcher
        # that hands over, a job that restarts itself): the recorder's `execv`
        # closes the trace first; the program run gives the status.
        ("os.execv", "", "os.execv('/bin/sh', ['sh', '-c', 'exit 6'])", (), 6, True)):
    r, info = record_plain(name.replace("-", "").replace(" ", "_").replace(".", "").lower(), start, ending,
                           *options)
    check(r.returncode == status and info.get("launches") == 3 and bool(info.get("complete")) == complete,
          f"{name} without PyTorch: status {status}, the 3 launches kept, complete {complete} ({r.returncode}, "
          f"{info.get('launches')}, {info.get('complete')}): {r.stderr[-600:]}")
    if start:
        check("Fatal Python error: Segmentation fault" in r.stderr,
              f"{name}: faulthandler's report kept: {r.stderr[-600:]}")

if failures:
    raise SystemExit(f"{len(failures)} check(s) failed")
print("quick exit: all checks passed")
