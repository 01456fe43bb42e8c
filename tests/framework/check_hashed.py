"""Real PyTorch CPU programs recorded with their tensors hashed: the test
recorder's device hashes host memory and the CPU allocator's tensors are its
allocations (GPURR_TEST_HASH, launch_on_ops.cpp), so the diff compares what
the ops wrote, as it does a GPU program's kernels. Ground truth comes from
the programs' own output (losses and parameter digests per step):
- torchvision's ResNet-18 (the models suite's epochs.py): recording leaves
  its output unchanged; deterministic mode recorded twice is identical with
  every launch hashed; in default mode, whose second epoch is shuffled by
  Python's unseeded random, the runs first differ in step 2, and the diff's
  first divergence is there, in the first convolution (ResNet.conv1);
- DistributedDataParallel over gloo on two ranks (ddp_gloo.py): identical
  twice; with a divergence planted in rank 1's backward in step 1, rank 1 is
  the origin, its first divergence the planted op (index_add_, at its line,
  step 1), and rank 0 a receiver through that step's all-reduce;
- two independent products in the other order (swapped.py): reordered,
  also where each one's line moved with it; three layers' weights
  penalised in the order of a set of their names (set_order.py) under two
  hash seeds: two operations swapped, PYTHONHASHSEED the known culprit;
- one relu more in one run, whose output the next layer reads
  (extra_relu.py): another path at its line, the first relu the same; and
  a torch.empty tensor read in every step: uninitialised memory, its later
  reads bytes read at their first use, listed once;
- steps of kinds that run the same kernels (alternating.py: a GAN, a loop
  that evaluates every third step, one so with SGD's momentum), followed by
  place: no launch takes another op's module or another kind of step's
  line; the loop with momentum settles into following from step 6 on;
- four ranks, two of them in a subgroup that runs five all-reduces for each
  of the world's (subgroups.py): a divergence planted on rank 2 at step 1 and
  one on rank 0 at step 2 are both origins, and rank 2's is the earliest,
  although rank 0 has taken part in fewer collectives when it diverges:
  rank 2's reached it through the world's all-reduce of step 1; planted on
  both at step 1, neither reached the other, and both are the earliest,
  before different collectives."""
import argparse
import json
import os
import shutil
import subprocess
import sys

p = argparse.ArgumentParser()
for a in ("--gpurr", "--recorder", "--launcher", "--scripts", "--models", "--work"):
    p.add_argument(a, required=True)
args = p.parse_args()
shutil.rmtree(args.work, ignore_errors=True)
os.makedirs(args.work)
failures = []
env = dict(os.environ, GPURR_RECORDER_LIB=args.recorder, GPURR_TEST_LAUNCHER=args.launcher, GPURR_TEST_HASH="1",
           PYTHONUNBUFFERED="1")
launch_in = os.path.join(args.scripts, "launch_in.py")


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def run(command, **extra):
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=dict(env, **extra))


def record(name, ops, script_args, **extra):
    out = os.path.join(args.work, name)
    r = run([args.gpurr, "record", "-o", out, "--", sys.executable, launch_in, ops] + script_args, **extra)
    check(r.returncode == 0, f"{name}: recorded (exit {r.returncode}): {r.stderr[-2000:]}")
    check("gpurr: warning" not in r.stderr, f"{name}: no warning: {r.stderr[-2000:]}")
    return out, r.stdout


def diff(a, b):
    r = run([args.gpurr, "diff", "--json", a, b])
    return r.returncode, json.loads(r.stdout) if r.stdout.startswith("{") else {}


def hashed(trace):
    info = json.loads(run([args.gpurr, "info", "--json", trace]).stdout)
    return info["bytesHashed"], info["launchesNotHashed"], info["launches"]


def first_origin(report, name):
    """The origin of run A's side of the first divergence of process `name`
    ("": the only one)."""
    for process in report.get("processes", []):
        if name in ("", process.get("name")):
            return (((process.get("firstDivergence") or {}).get("a")) or {}).get("origin") or {}
    return {}


def steps(text):
    """The program's step lines: {step: line}."""
    return {int(line.split()[1]): line for line in text.splitlines() if line.startswith("step ")}


# ResNet-18 over two epochs; its batch is made outside every listed op, so
# the first convolution is the first operation to read it.
epochs = [os.path.join(args.models, "epochs.py"), "--device", "cpu", "--steps", "3"]
conv = "aten::convolution,aten::addmm"
plain = run([sys.executable] + epochs + ["--mode", "deterministic"])
if plain.returncode == 77:
    print("SKIP epochs.py:", plain.stdout.strip().splitlines()[-1])
else:
    da, out_a = record("epochs-det-a", conv, epochs + ["--mode", "deterministic"])
    db, _ = record("epochs-det-b", conv, epochs + ["--mode", "deterministic"])
    check(steps(out_a) == steps(plain.stdout) and len(steps(out_a)) == 3,
          f"epochs: output unchanged by recording: {steps(plain.stdout)} vs {steps(out_a)}")
    size, not_hashed, launches = hashed(da)
    check(size > 0 and not_hashed == 0 and launches > 0, f"epochs: every launch hashed: {size} B, {not_hashed} not")
    code, report = diff(da, db)
    check(code == 0 and report.get("verdict") == "identical", f"epochs deterministic: identical (exit {code})")

    ua, out_ua = record("epochs-default-a", conv, epochs + ["--mode", "default"])
    ub, out_ub = record("epochs-default-b", conv, epochs + ["--mode", "default"])
    sa, sb = steps(out_ua), steps(out_ub)
    first = min((s for s in sa if sa[s] != sb.get(s)), default=None)
    check(first == 2, f"epochs default: the programs' own output first differs in step 2: {sa} vs {sb}")
    code, report = diff(ua, ub)
    origin = first_origin(report, "")
    check(code == 1 and origin.get("step") == 2 and origin.get("op") == "aten::convolution" and
          origin.get("module") == "ResNet.conv1" and origin.get("file", "").endswith("resnet.py"),
          f"epochs default: first divergence in step 2's first convolution (exit {code}): {origin}")

# DDP over gloo, a divergence planted in rank 1's backward.
ddp = os.path.join(args.scripts, "ddp_gloo.py")
with open(ddp) as f:
    planted = next(n for n, line in enumerate(f, 1) if "index_add_(" in line)
ops = "aten::addmm,aten::mm,aten::index_add_"
a, _ = record("ddp-a", ops, [ddp])
b, _ = record("ddp-b", ops, [ddp])
check(all(hashed(os.path.join(a, f"rank{r}.gpurr"))[0] > 0 for r in (0, 1)), "ddp: both ranks hashed")
code, report = diff(a, b)
check(code == 0, f"ddp: two runs identical (exit {code})")
c, _ = record("ddp-planted", ops, [ddp], DDP_PLANT="1")
code, report = diff(a, c)
job = report.get("job") or {}
roles = {x["rank"]: x["role"] for x in job.get("ranks", [])}
check(code == 1 and roles == {0: "receiver", 1: "origin"},
      f"ddp planted: rank 1 the origin, rank 0 a receiver: {roles}")
origin = first_origin(report, "rank1.gpurr")
check(origin.get("op") == "aten::index_add_" and origin.get("line") == planted and origin.get("step") == 1 and
      origin.get("phase") == "backward", f"ddp planted: rank 1's first divergence is the planted op: {origin}")

# Two independent layers in the other order: the same operations, issued
# from the same lines (or, written out in the other order, from lines that
# moved with them), each writing into an allocation made in the other
# order. A reordering, not another path nor a library's choice.
swapped = os.path.join(args.scripts, "swapped.py")
a, out_a = record("swapped-a", "aten::addmm", [swapped])
for variant, what in (("1", "swapped"), ("2", "swapped, lines moved")):
    b, out_b = record(f"swapped-{variant}", "aten::addmm", [swapped], SWAPPED=variant)
    check(out_a == out_b, f"{what}: the results are the same: {out_a!r} vs {out_b!r}")
    code, report = diff(a, b)
    fd = (report.get("processes") or [{}])[0].get("firstDivergence") or {}
    check(code == 1 and fd.get("cause") == "reordered" and fd.get("summary", "").startswith("reordered: the same 2"),
          f"{what}: a reordering of 2 operations (exit {code}): {fd.get('cause')}: {fd.get('summary')}")

# Three layers' weights penalised in the order a set of their names
# iterates, which PYTHONHASHSEED decides: two seeds that order them
# otherwise. The same abs() on the same weights in another order, each
# paired by its place with another layer's (one shape): two operations
# swapped, reordered, with the PYTHONHASHSEED entry of the culprits table;
# the layers keep their names (the rest of the program uses them in one
# order), and each later step's loop is a reordering of its own.
set_order = os.path.join(args.scripts, "set_order.py")
with open(set_order) as f:
    penalty = 1 + [n for n, t in enumerate(f.read().splitlines()) if "# at:penalty" in t][0] + 1
orders = {}
for seed in range(32):
    order = run([sys.executable, "-c", "print(list(set(['alpha', 'beta', 'gamma'])))"], PYTHONHASHSEED=str(seed))
    orders.setdefault(order.stdout, str(seed))
    if len(orders) == 2:
        break
check(len(orders) == 2, f"set order: two hash seeds that order the set otherwise: {orders}")
seed_a, seed_b = list(orders.values())[:2]
set_ops = "aten::addmm,aten::mm,aten::abs,aten::sgn,aten::mul,aten::_foreach_add_"
a, out_a = record("set-a", set_ops, [set_order], PYTHONHASHSEED=seed_a)
b, out_b = record("set-b", set_ops, [set_order], PYTHONHASHSEED=seed_b)
check(steps(out_a) == steps(out_b) and out_a.splitlines()[0] != out_b.splitlines()[0],
      f"set order: another order, the same results: {out_a!r} vs {out_b!r}")
code, report = diff(a, b)
process = (report.get("processes") or [{}])[0]
fd = process.get("firstDivergence") or {}
origin = ((fd.get("a") or {}).get("origin")) or {}
independent = (process.get("blastRadius") or {}).get("independent") or []
check(code == 1 and fd.get("cause") == "reordered" and fd.get("swap") and origin.get("op") == "aten::abs" and
      origin.get("line") == penalty and origin.get("step") == 0 and
      "python-hash-seed" in [k.get("id") for k in fd.get("known") or []],
      f"set order: two operations swapped at the penalty's abs, line {penalty}, step 0, PYTHONHASHSEED known "
      f"(exit {code}): {fd.get('cause')}: {fd.get('summary')}: {origin}: {fd.get('known')}")
check(all(i.get("reason", "").startswith("reordered: ") and
          (((i.get("a") or {}).get("origin")) or {}).get("step", 0) > 0 for i in independent),
      f"set order: each later step's loop a reordering of its own, none in step 0: {independent}")

# One relu more in run B, on the first relu's output, which the next layer
# then reads: the first relu is the same in both runs, and the extra one,
# at its line, is the first divergence (another path), not the first relu
# made to point elsewhere by naming the extra relu's output as the first's
# (or, the extra relu in run A, the first relu's output as the extra's).
extra = os.path.join(args.scripts, "extra_relu.py")
with open(extra) as f:
    extra_line = 1 + [n for n, t in enumerate(f.read().splitlines()) if "# at:extra" in t][0]
a, _ = record("extra-a", "aten::mm,aten::addmm,aten::relu", [extra])
b, _ = record("extra-b", "aten::mm,aten::addmm,aten::relu", [extra], EXTRA="1")
code, report = diff(a, b)
fd = (report.get("processes") or [{}])[0].get("firstDivergence") or {}
origin = (fd.get("b") or {}).get("origin") or {}
check(code == 1 and fd.get("path") and fd.get("a") is None and origin.get("line") == extra_line and
      "another path" in fd.get("summary", ""),
      f"extra relu: another path at line {extra_line} (exit {code}): {fd.get('cause')}: {fd.get('summary')}: {origin}")
# The same with the extra relu in run A.
code, report = diff(b, a)
fd = (report.get("processes") or [{}])[0].get("firstDivergence") or {}
origin = (fd.get("a") or {}).get("origin") or {}
check(code == 1 and fd.get("path") and fd.get("b") is None and origin.get("line") == extra_line,
      f"extra relu in run A: another path at line {extra_line} (exit {code}): {fd.get('cause')}: "
      f"{fd.get('summary')}: {origin}")

# A torch.empty tensor read in every step, its bytes other in each run
# (glibc's MALLOC_PERTURB_), adding nothing to the results: uninitialised
# memory at its first read; its reads in the later steps, which read no data
# derived from it, are bytes each read at their first use, listed once with
# the count of those like them, whether the layer observed or followed.
a, _ = record("empty-a", "aten::mm,aten::addmm,aten::relu", [extra], EMPTY="1", MALLOC_PERTURB_="165")
b, _ = record("empty-b", "aten::mm,aten::addmm,aten::relu", [extra], EMPTY="1", MALLOC_PERTURB_="7")
code, report = diff(a, b)
process = (report.get("processes") or [{}])[0]
independent = (process.get("blastRadius") or {}).get("independent") or []
check(code == 1 and (process.get("firstDivergence") or {}).get("cause") == "uninitialisedMemory" and
      len(independent) == 1 and independent[0].get("more") == 2 and independent[0].get("reason", "").startswith(
          "outputs differ; its inputs differ in bytes it read at their first use, which no recorded operation had "
          "written (uninitialised memory)"),
      f"torch.empty read in every step (exit {code}): {(process.get('firstDivergence') or {}).get('cause')}; "
      f"the later reads: {independent}")

# Steps of kinds that run the same kernels, recorded by default (two steps
# observed, then followed) and observing every op: a GAN whose generator's
# loss runs, on activations, the kernel the critic's step runs on its first
# layer's weight at that place, and a loop that evaluates every third step
# from another line, under torch.no_grad (with SGD's momentum too). No
# launch named by place takes another op's module or another kind of step's
# line, and most are named by place. The evaluations (each run after the
# optimizer's step, the next step's first operations) run the training's
# kernels with the same weights, but without gradients: a step of either
# kind is told from the other from its first launch, so that hardly any
# launch of those loops goes without the line its op was called from.
alternating = os.path.join(args.scripts, "alternating.py")


def origins(trace):
    dump = run([args.gpurr, "dump", "--json", trace])
    return [e.get("origin") or {} for e in map(json.loads, dump.stdout.splitlines()) if e["kind"] == "launch"]


for kind in ("gan", "evaluating", "momentum"):
    ops = "aten::addmm,aten::mm" + (",aten::mul_,aten::add_" if kind == "momentum" else "")
    trace = record(f"{kind}-followed", ops, [alternating, kind])[0]
    followed = origins(trace)
    truth = origins(record(f"{kind}-full", ops, [alternating, kind], GPURR_FULL_ATTRIBUTION="1")[0])
    wrong = [(o, t) for o, t in zip(followed, truth) if (o.get("module") and o.get("module") != t.get("module")) or
             (o.get("line") and o.get("line") != t.get("line"))]
    lineless = sum(1 for o, t in zip(followed, truth) if t.get("line") and not o.get("line"))
    check(len(followed) == len(truth) and not wrong and sum(o.get("byPlace", False) for o in followed) > len(truth) / 3
          and (kind == "gan" or lineless <= len(truth) / 20),
          f"{kind}: {len(followed)} vs {len(truth)} launches, {sum(o.get('byPlace', False) for o in followed)} by "
          f"place, {lineless} without their line; named otherwise (followed, observed): {wrong[:3]}")
    if kind == "momentum":
        # Steps 2 and 3 match no template (the kinds learned are step 0's,
        # the optimizer's first, and step 1's, an evaluation's); step 4, an
        # evaluation's, is learned again, and then step 5, between two
        # evaluations: from step 6 on every step follows a template.
        info = json.loads(run([args.gpurr, "info", "--json", trace]).stdout or "{}")
        steps = (info.get("origins") or {}).get("layerSteps") or {}
        check(steps.get("followed", 0) >= 16 and steps.get("unmatched", 99) <= 2,
              f"momentum: from step 6 on every step followed a template: {steps}")

# Origins across a subgroup and the world.
subgroups = os.path.join(args.scripts, "subgroups.py")
ops = "aten::relu,aten::add"
a, _ = record("subgroups-a", ops, [subgroups])
for plant, earliest, same in (("2:1,0:2", [2], False), ("2:1,0:1", [0, 2], False)):
    b, _ = record(f"subgroups-{plant}", ops, [subgroups], SUBGROUPS_PLANT=plant)
    code, report = diff(a, b)
    job = report.get("job") or {}
    roles = {x["rank"]: x["role"] for x in job.get("ranks", [])}
    check(code == 1 and roles == {0: "origin", 1: "receiver", 2: "origin", 3: "receiver"},
          f"subgroups {plant}: ranks 0 and 2 the origins, 1 and 3 receivers: {roles}")
    check([x["rank"] for x in job.get("earliestOrigins", [])] == earliest and
          job.get("earliestBeforeSameCollective") == same,
          f"subgroups {plant}: earliest origins {earliest}: {[x['rank'] for x in job.get('earliestOrigins', [])]} "
          f"(before the same collective: {job.get('earliestBeforeSameCollective')})")
    spread = [(s["from"], s["to"]) for s in job.get("spread", [])]
    check(spread and spread[0] == ([2], [1]), f"subgroups {plant}: the subgroup's all-reduce carried it first, from "
          f"rank 2 to rank 1: {spread}")
# Rank 2's trace missing from run B: rank 1 received its divergence through
# a collective no rank recorded sent other data, rank 2 not recorded with
# it: it may have begun there (an origin or a receiver).
missing = os.path.join(args.work, "subgroups-missing")
shutil.rmtree(missing, ignore_errors=True)
shutil.copytree(b, missing)
shutil.rmtree(os.path.join(missing, "rank2.gpurr"))
code, report = diff(a, missing)
roles = {x["rank"]: x["role"] for x in (report.get("job") or {}).get("ranks", [])}
check(code == 1 and roles == {0: "origin", 1: "unknown", 3: "receiver"},
      f"subgroups, rank 2 missing in run B: rank 1 an origin or a receiver: {roles}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("PASS")
