"""Records paths.py through gpurr's PyTorch layer (the test's fake recorder,
"kernels" without parameter words inside aten::addmm, aten::relu and
aten::mul, every op observed as gpurr bisect records) once as it is and
once per planted path, and checks that `gpurr diff` names the operations
the program ran in one run only: where every block launches the same
kernels, the alignment alone could take another block's for them; also
against a run gpurr stopped after the step of the planted path; one more
turn of a loop (the same op at the same line) is the program's path, not a
library's; and, recorded by default (the layer learns steps 0 and 1, then
gives ops by place), the extra multiplication is not blamed on a library
and the launches it may be are given; an optimizer step skipped (run B's
steps counted otherwise from there) is that step's updates, not a step's
work moved; a spare block called in another's place is another path, not
the same operations (every kernel the same, in the same order); two blocks
called in the other order from lines of their own are reordered. And that
recording leaves the program's output unchanged."""
import re
import argparse
import json
import os
import shutil
import subprocess
import sys

p = argparse.ArgumentParser()
for a in ("--gpurr", "--recorder", "--launcher", "--scripts", "--work"):
    p.add_argument(a, required=True)
args = p.parse_args()
shutil.rmtree(args.work, ignore_errors=True)
os.makedirs(args.work)
failures = []
program = os.path.join(args.scripts, "paths.py")
launch_in = os.path.join(args.scripts, "launch_in.py")
with open(program) as f:
    text = f.read().splitlines()
PLANT_LINE = 1 + [n for n, t in enumerate(text) if "# the planted multiplication" in t][0]
END_LINE = 1 + [n for n, t in enumerate(text) if "# the planted layer call at a step's end" in t][0]
HALVE_LINE = 1 + [n for n, t in enumerate(text) if "# the halving, in a loop" in t][0]
STEP_LINE = 1 + [n for n, t in enumerate(text) if t.strip() == "opt.step()"][0]


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def record(plant, *options, name=None, full=True, ops="aten::addmm,aten::relu,aten::mul", hashed=False, **extra):
    """paths.py with `plant` (and `extra` in its environment), run plainly
    and recorded with `options` (every op observed where `full`), launching
    inside `ops` (hashing their CPU tensors where `hashed`); the trace."""
    env = dict(os.environ, GPURR_RECORDER_LIB=args.recorder, GPURR_TEST_LAUNCHER=args.launcher,
               GPURR_TEST_LAUNCH_WORDS="0", GPURR_FULL_ATTRIBUTION="1" if full else "0", PATHS_PLANT=plant, **extra)
    if hashed:
        env["GPURR_TEST_HASH"] = "1"
    plain = subprocess.run([sys.executable, program], capture_output=True, text=True, timeout=300, env=env)
    trace = os.path.join(args.work, (name or plant or "straight") + ".gpurr")
    r = subprocess.run([args.gpurr, "record", *options, "-o", trace, "--", sys.executable, launch_in,
                        ops, program], capture_output=True, text=True, timeout=300,
                       env=env)
    stopped = "--until-step" in options  # then the output ends after that step's
    check(plain.returncode == 0 and r.returncode == 0 and
          (plain.stdout.startswith(r.stdout) if stopped else r.stdout == plain.stdout),
          f"{plant}: output unchanged ({plain.returncode}, {r.returncode}): {plain.stdout!r} vs {r.stdout!r} "
          f"{r.stderr[-800:]}")
    return trace


def first_divergence(a, b):
    r = subprocess.run([args.gpurr, "diff", "--json", a, b], capture_output=True, text=True)
    check(r.returncode == 1, f"diff {a} {b}: exit status {r.returncode}: {r.stderr[-800:]}")
    return ((json.loads(r.stdout).get("processes") or [{}])[0].get("firstDivergence") or {}) if r.stdout else {}


def origins(side):
    return [(o["origin"]["op"], o["origin"]["module"], o["origin"]["line"], o["origin"]["step"])
            for o in side["ops"]]


def check_block(a, b, side, modules, step, what):
    """The first divergence of `a` against `b` is a stretch of run `side`
    alone: one call of a block (its three launches), in `modules` at `step`."""
    fd = first_divergence(a, b)
    stretch = fd.get("stretch") or {}
    got = origins(stretch.get(side, {"ops": []}))
    other = "a" if side == "b" else "b"
    check(fd.get("path") and stretch.get(other, {}).get("count") == 0 and stretch.get(side, {}).get("count") == 3 and
          {m for _, m, _, _ in got} == modules and {s for *_, s in got} == {step},
          f"{what} ({os.path.basename(a)}, {os.path.basename(b)}): {fd.get('summary')} {got}")


straight = record("")
# One more multiplication in block 1 at step 2, among the same kernels of
# every block: its own line, module and step; in either order of the runs.
mul = record("mul")
for a, b, side in ((straight, mul, "b"), (mul, straight, "a")):
    fd = first_divergence(a, b)
    stretch = fd.get("stretch") or {}
    other = "a" if side == "b" else "b"
    check(fd.get("path") and stretch.get(other, {}).get("count") == 0 and stretch.get(side, {}).get("count") == 1 and
          origins(stretch[side]) == [("aten::mul", "Stack.blocks.1", PLANT_LINE, 2)] and
          "took another path" in fd.get("summary", ""),
          f"one more mul (run {side.upper()}): {fd.get('summary')} {stretch}")
# Recorded by default, step 2 is given its ops by place: the planted
# multiplication takes the origin of the halving after it, whose own launch
# is the first that matches no learnt step. Which launch the program added
# is not known: not a library's choice, and the launches it may be hold it.
truth = first_divergence(straight, mul)["stretch"]["b"]["ops"][0]["launchIndex"]
fd = first_divergence(record("", name="straight-default", full=False), record("mul", name="mul-default", full=False))
span = [re.search(r"may be any of #(\d+) to #(\d+)", e) for e in fd.get("evidence", [])]
span = [(int(m[1]), int(m[2])) for m in span if m]
check(fd.get("path") and fd.get("summary", "").startswith("unknown:") and "did not observe" in fd["summary"] and
      fd.get("unobserved") and len(span) == 1 and span[0][0] <= truth <= span[0][1],
      f"one more mul, recorded by default (launch #{truth}): {fd.get('summary')} {fd.get('evidence')}")
# One more turn of block 1's loop at step 2: the same op, line and kernel
# as the launch before it: the program's path.
fd = first_divergence(straight, record("loop"))
stretch = fd.get("stretch") or {}
check(fd.get("path") and stretch.get("a", {}).get("count") == 0 and stretch.get("b", {}).get("count") == 1 and
      origins(stretch["b"]) == [("aten::mul", "Stack.blocks.1", HALVE_LINE, 2)] and
      "ran aten::mul in Stack.blocks.1 here once more than run A: the program called it again (a loop's extra "
      "turn)" in fd.get("summary", ""),
      f"one more turn of a loop: {fd.get('summary')} {stretch}")
# One more layer call as the last launch of step 2, the same launch as step
# 3's first. A run stopped by gpurr after step 2 did all of it: against the
# other run whole, that call is still a divergence, in either order of the
# runs and whichever run was stopped (the steps after it not compared).
stopped, end = record("", "--until-step", "2", name="stopped"), record("end")
end_stopped, straight_whole = record("end", "--until-step", "2", name="end-stopped"), straight
for a, b, side in ((stopped, end, "b"), (end, stopped, "a"), (straight_whole, end_stopped, "b"),
                   (end_stopped, straight_whole, "a")):
    fd = first_divergence(a, b)
    stretch = fd.get("stretch") or {}
    check(fd.get("path") and stretch.get(side, {}).get("count") == 1 and
          origins(stretch[side]) == [("aten::addmm", "Stack.blocks.0.fc", END_LINE, 2)],
          f"one more call at the end of the step a run was stopped after ({os.path.basename(a)}, "
          f"{os.path.basename(b)}): {fd.get('summary')} {stretch}")
# Block 2 called twice at step 1: one call's launches, all of block 2's;
# also where gpurr stopped that run after the step, the other run whole, in
# either order.
block2 = {"Stack.blocks.2.fc", "Stack.blocks.2"}
check_block(straight, record("twice"), "b", block2, 1, "a block called twice")
# The optimizer's step skipped at step 1 (launches in its aten::add_ too):
# run B's later steps are numbered one less, and it ends a step earlier
# with all the same work but those 8 updates: they are the divergence, not
# a step's work moved, whether observed or given by place.
for full in (True, False):
    kind = "observed" if full else "by place"
    optimizer = "aten::addmm,aten::relu,aten::mul,aten::add_"
    fd = first_divergence(record("", name=f"optimizer-{kind}", full=full, ops=optimizer),
                          record("nostep", name=f"nostep-{kind}", full=full, ops=optimizer))
    stretch = fd.get("stretch") or {}
    check(fd.get("path") and stretch.get("b", {}).get("count") == 0 and stretch.get("a", {}).get("count") == 8 and
          {(op, line, step) for op, _, line, step in origins(stretch.get("a", {"ops": []}))} ==
          {("aten::add_", STEP_LINE, 1)},
          f"an optimizer step skipped ({kind}): {fd.get('summary')} {stretch}")
# A run stopped after step 1 made step 2's batch (a multiplication after
# step 1's optimizer step, before the module call the stop waits for), which
# the other run made otherwise: not compared, the runs identical as far as
# the stopped one went.
stopped = record("", "--until-step", "1", name="batch-stopped", hashed=True, PATHS_BATCH="1")
r = subprocess.run([args.gpurr, "diff", stopped, record("batch", hashed=True, PATHS_BATCH="1")], capture_output=True,
                   text=True)
check(r.returncode == 0 and "identical:" in r.stdout and "gpurr stopped it after training step 1" in r.stdout
      and "run A ran 1 operation after training step 1, before gpurr stopped it (an evaluation or the next "
      "batch's data): not compared" in r.stdout,
      f"the next step's batch made before the stop: {r.returncode} {r.stdout[-800:]}")
# gpurr info counts that batch's launch as no step's: steps 0 and 1 alone.
r = subprocess.run([args.gpurr, "info", stopped], capture_output=True, text=True)
check("median of 2 steps" in r.stdout and "steps 0 to 1 (and 1 launch of step 2, begun before gpurr stopped the "
      "program)" in r.stdout, f"info of a run stopped after step 1: {r.stdout}")
twice_stopped = record("twice", "--until-step", "1", name="twice-stopped")
check_block(straight, twice_stopped, "b", block2, 1, "a block called twice, that run stopped after the step")
check_block(twice_stopped, straight, "a", block2, 1, "a block called twice, that run stopped after the step")
# Block 1 skipped from step 2: run A's launches of block 1 alone; step 3's
# forward skips it again, the first's stretch once more.
skip = record("skip")
check_block(straight, skip, "a", {"Stack.blocks.1.fc", "Stack.blocks.1"}, 2, "a block skipped")
r = subprocess.run([args.gpurr, "diff", "--json", straight, skip], capture_output=True, text=True)
blast = ((json.loads(r.stdout).get("processes") or [{}])[0].get("blastRadius") or {}) if r.stdout else {}
check(blast.get("repeatsFirst") == 1 and blast.get("independentCount", 0) > 1,
      f"a block skipped: step 3's stretch repeats the first: {blast.get('repeatsFirst')} of "
      f"{blast.get('independentCount')}")
# A spare block called in block 1's place at step 2: the same kernels in the
# same order from other modules, another path (not identical, not reordered).
fd = first_divergence(straight, record("alt"))
stretch = fd.get("stretch") or {}
check(fd.get("path") and stretch.get("a", {}).get("count") == 3 and stretch.get("b", {}).get("count") == 3 and
      {m for _, m, _, s in origins(stretch["b"])} == {"Stack.alt.fc", "Stack.alt"} and
      "ran aten::addmm in Stack.blocks.1.fc here, where run B ran aten::addmm in Stack.alt.fc: the program took "
      "another path" in fd.get("summary", ""),
      f"a spare block in block 1's place: {fd.get('summary')} {stretch}")
# Blocks 1 and 2 called in the other order at step 2, each from a line of
# its own (block 0 too, from another line than the loop's: matched): the
# same operations reordered, the lines moved with them.
fd = first_divergence(straight, record("swap"))
check(fd.get("path") and fd.get("summary", "").startswith("reordered: the same 6 operations in another order") and
      {s for *_, s in origins((fd.get("stretch") or {}).get("a", {"ops": []}))} == {2},
      f"two blocks swapped, from lines of their own: {fd.get('summary')}")

# The same path twice, the launches of one kernel alone hashed: identical,
# and the report says that the others had only their parameters compared;
# with no tensor hashed, that no outputs were compared at all.
for hashed in (True, False):
    straight = record("", "--kernels", "addmm", name=f"addmm-hashed-{hashed}", hashed=hashed)
    again = record("", "--kernels", "addmm", name=f"addmm-hashed-again-{hashed}", hashed=hashed)
    r = subprocess.run([args.gpurr, "diff", straight, again], capture_output=True, text=True)
    said = "not hashed" if hashed else "no operation of either trace has outputs"
    check(r.returncode == 0 and "identical:" in r.stdout and said in r.stdout,
          f"the same path twice (hashed {hashed}): {r.returncode} {r.stdout[-600:]}")
    r = subprocess.run([args.gpurr, "diff", "--json", straight, again], capture_output=True, text=True)
    operations = (json.loads(r.stdout).get("processes") or [{}])[0].get("operations", {}) if r.stdout else {}
    check(operations.get("notHashed", {}).get("a", 0) > 0 and (operations.get("withOutputs", {}).get("a", 0) > 0)
          == hashed, f"the JSON counts them (hashed {hashed}): {operations}")

if failures:
    raise SystemExit(f"{len(failures)} check(s) failed")
print("paths: all checks passed")
