"""gpurr bisect on a real PyTorch CPU program whose runs after the first
diverge in step 1 (diverges_later.py): run 2 is compared with run 1 while
it records and stopped soon after its first divergence, the confirmation
run stops after step 1, runs 2 and 3 are started while run 1 records
(held at their first launch until the run before ends), and the report
still names the divergence, its op, line and step, reproduced, with run
1's later operations not compared. Then the same under a real torchrun
(its runs not overlapped), `gpurr record --stop-file` on its own, and on a
job of two ranks, which it does not stop early."""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys

p = argparse.ArgumentParser()
for a in ("--gpurr", "--recorder", "--launcher", "--scripts", "--work"):
    p.add_argument(a, required=True)
args = p.parse_args()
shutil.rmtree(args.work, ignore_errors=True)
os.makedirs(args.work)
failures = []
script = os.path.join(args.scripts, "diverges_later.py")
steps = 200


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def marked(mark):
    with open(script) as f:
        for n, line in enumerate(f, 1):
            if f"# at:{mark}" in line:
                return n
    raise KeyError(mark)


# GPURR_BISECT_MIN_AVAILABLE_MB=0 and GPURR_BISECT_MIN_CPUS=1: runs start early
# whatever memory a busy machine has left and however few CPUs it has, as
# the checks below expect.
env = dict(os.environ, GPURR_RECORDER_LIB=args.recorder, GPURR_TEST_LAUNCHER=args.launcher,
           GPURR_TEST_MARKER=os.path.join(args.work, "marker"), GPURR_TEST_STEPS=str(steps),
           GPURR_BISECT_MIN_AVAILABLE_MB="0", GPURR_BISECT_MIN_CPUS="1")
out = os.path.join(args.work, "bisect")
r = subprocess.run([args.gpurr, "bisect", "-o", out, "--", sys.executable, script], env=env,
                   capture_output=True, text=True, timeout=500)
print(r.stdout, r.stderr, sep="\n")
check(r.returncode == 1, f"bisect says diverged (exit {r.returncode})")
report = json.load(open(os.path.join(out, "report.json")))
runs = report["runs"]
check(len(runs) == 3, f"two runs and the confirmation: {len(runs)}")
if len(runs) == 3:
    first, second, confirm = runs
    check(first["stoppedAfterStep"] is None and not first["stoppedByBisect"], f"run 1 goes to the end: {first}")
    check(second["stoppedByBisect"] and second["stoppedAfterStep"] is not None
          and 2 <= second["stoppedAfterStep"] < steps - 1, f"run 2 stopped soon after step 1: {second}")
    check(confirm["stoppedAfterStep"] == 1 and confirm["stoppedByBisect"],
          f"the bisect stopped the confirmation run after step 1: {confirm}")
    check(second["launches"] < first["launches"] and confirm["launches"] < second["launches"],
          f"launches: {first['launches']}, {second['launches']}, {confirm['launches']}")
    # Runs 2 and 3 were started while run 1 recorded, held at their first
    # launch until the run before had ended.
    check(first["startedDuring"] is None and second["startedDuring"] == 1 and confirm["startedDuring"] == 1,
          f"started during: {[run['startedDuring'] for run in runs]}")
text = open(os.path.join(out, "report.txt")).read()
check(f"diverges_later.py:{marked('extra')}" in text, "the report names the extra op's line")
check("step 1" in text, "the report names step 1")
check("soon after its first divergence" in text, "the run's line says bisect stopped it")
check(report.get("reproduced") is True, f"reproduced: {report.get('reproduced')}")
check("gpurr stopped it after training step" in text, "run 1's later operations are said not compared")
check(not any(name.endswith(".stop") or ".staging-" in name for name in os.listdir(out)),
      f"no stop file or staging directory left: {os.listdir(out)}")

# --until-step 0, before the step where the runs part: identical up to the
# step where --until-step (not the bisect) stopped every run.
out_until = os.path.join(args.work, "bisect-until")
r = subprocess.run([args.gpurr, "bisect", "-o", out_until, "--until-step", "0", "--", sys.executable, script],
                   env=dict(env, GPURR_TEST_MARKER=os.path.join(args.work, "marker-until")), capture_output=True,
                   text=True, timeout=500)
until = json.load(open(os.path.join(out_until, "report.json"))) if os.path.exists(out_until) else {}
check(r.returncode == 0 and "identical: the 2 runs are bitwise identical up to training step 0, where gpurr stopped "
      "them" in r.stdout and [(x["stoppedAfterStep"], x["stoppedByBisect"]) for x in until.get("runs", [])] ==
      [(0, False), (0, False)], f"bisect --until-step 0: identical up to step 0 ({r.returncode}): {r.stdout[-1500:]}")

# A real torchrun job on one fixed port: a launcher of many processes, its
# runs not overlapped (two side by side could meet at one rendezvous); the
# bisect finds the divergence and reproduces it.
torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
if os.path.exists(torchrun):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out_job = os.path.join(args.work, "bisect-torchrun")
    env_job = dict(env, GPURR_TEST_MARKER=os.path.join(args.work, "marker-torchrun"), GPURR_TEST_STEPS="60")
    r = subprocess.run([args.gpurr, "bisect", "-o", out_job, "--", torchrun, "--nproc-per-node", "1",
                        "--master-port", str(port), script], env=env_job, capture_output=True, text=True, timeout=500)
    print(r.stdout, r.stderr, sep="\n")
    check(r.returncode == 1, f"torchrun: bisect says diverged (exit {r.returncode})")
    check("two runs of a torchrun job side by side could meet at one rendezvous" in r.stderr,
          "torchrun: bisect says it runs one run after another")
    job = json.load(open(os.path.join(out_job, "report.json")))
    check(job.get("reproduced") is True and all(run["exitCode"] == 0 for run in job["runs"]),
          f"torchrun: every run succeeded, and the divergence was reproduced: {job.get('runs')}")
    check(all(run["startedDuring"] is None for run in job["runs"]),
          f"torchrun: no run started during another: {[run['startedDuring'] for run in job['runs']]}")
else:
    print(f"no {torchrun}: the torchrun case is skipped")

# gpurr record --stop-file on its own: a file that names step 3 from the
# start stops the program after step 3; without the layer it is refused.
stop = os.path.join(args.work, "stop")
with open(stop, "w") as f:
    f.write("3\n")
env_alone = dict(env, GPURR_TEST_MARKER=os.path.join(args.work, "marker-alone"))
trace = os.path.join(args.work, "alone.gpurr")
r = subprocess.run([args.gpurr, "record", "-o", trace, "--stop-file", stop, "--", sys.executable, script],
                   env=env_alone, capture_output=True, text=True, timeout=300)
check(r.returncode == 0, f"record --stop-file: exit 0 (got {r.returncode}): {r.stderr[-800:]}")
check(r.stdout.count("loss") == 4, f"record --stop-file 3: steps 0 to 3 ran: {r.stdout!r}")
check("gpurr: stopped the program after training step 3 (--stop-file)" in r.stderr, f"record says so: {r.stderr!r}")
# Written while the program runs, after the layer has begun to follow its
# template (step 2 on): the program stops after the step the file names, or
# at its next step when that has passed.
late = os.path.join(args.work, "stop-late")
env_late = dict(env, GPURR_TEST_MARKER=os.path.join(args.work, "marker-late"))
trace_late = os.path.join(args.work, "late.gpurr")
proc = subprocess.Popen([args.gpurr, "record", "-o", trace_late, "--stop-file", late, "--", sys.executable, script],
                        env=env_late, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
lines = []
for line in proc.stdout:
    lines.append(line)
    if line.startswith("step 10 "):
        with open(late + ".part", "w") as f:
            f.write("12\n")
        os.rename(late + ".part", late)
err = proc.stderr.read()
proc.wait(timeout=300)
last = int(lines[-1].split()[1]) if lines else -1
check(proc.returncode == 0, f"late stop file: exit 0 (got {proc.returncode}): {err[-800:]}")
check(12 <= last < steps - 1, f"late stop file naming step 12: the program stopped after step {last}")
check(f"gpurr: stopped the program after training step {last} (--stop-file)" in err, f"record says so: {err!r}")
r = subprocess.run([args.gpurr, "record", "-o", trace + "2", "--stop-file", stop, "--no-framework", "--",
                    sys.executable, script], env=env_alone, capture_output=True, text=True, timeout=300)
check(r.returncode == 2 and "--stop-file needs the PyTorch layer" in r.stderr,
      f"--stop-file without the layer: {r.returncode} {r.stderr!r}")

# A job of two ranks whose ranks read the stop file at different steps
# (ranks_stop_skew.py): not stopped early by a file written while it runs,
# so that no rank is left alone in a collective; each rank says so. One
# there from the start (bisect's confirmation run) stops every rank after
# the step it names.
skew = os.path.join(args.work, "stop-skew")
r = subprocess.run([args.gpurr, "record", "-o", os.path.join(args.work, "skew"), "--stop-file", skew, "--",
                    sys.executable, os.path.join(args.scripts, "ranks_stop_skew.py")],
                   env=dict(env, GPURR_TEST_MARKER=os.path.join(args.work, "marker-skew")), capture_output=True,
                   text=True, timeout=300)
check(r.returncode == 0, f"ranks and a stop file: exit 0 (got {r.returncode}): {r.stderr[-1500:]}")
check(r.stdout.count("finished step 5") == 2, f"ranks and a stop file: both ranks ran to the end: {r.stdout!r}")
check(r.stderr.count("a job of several ranks is not stopped early") == 2, f"each rank says so: {r.stderr[-1500:]!r}")
with open(skew, "w") as f:
    f.write("1\n")
r = subprocess.run([args.gpurr, "record", "-o", os.path.join(args.work, "skew-early"), "--stop-file", skew, "--",
                    sys.executable, os.path.join(args.scripts, "ranks_stop_skew.py")],
                   env=dict(env, GPURR_TEST_MARKER=os.path.join(args.work, "marker-skew-early")), capture_output=True,
                   text=True, timeout=300)
check(r.returncode == 0 and r.stdout.count("finished step 1") == 2 and "finished step 2" not in r.stdout,
      f"ranks and a stop file there from the start: both stop after step 1: {r.returncode} {r.stdout!r}")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
