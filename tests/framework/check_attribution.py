"""Records real PyTorch CPU programs through gpurr's PyTorch layer and checks
the origins in the trace: ops, op stacks, forward/backward, module paths,
source lines, steps, a second thread, torch.compile, a program without
torch, --no-framework, the warning a profiler session asking for the GPU
gets, and that the program's output and exit code are unchanged."""
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


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def env(**extra):
    e = dict(os.environ, GPURR_RECORDER_LIB=args.recorder, GPURR_TEST_LAUNCHER=args.launcher)
    e.update(extra)
    return e


def record(name, command, *options, **extra):
    out = os.path.join(args.work, name + ".gpurr")
    r = subprocess.run([args.gpurr, "record", "-o", out, *options, "--", *command],
                       env=env(**extra), capture_output=True, text=True, timeout=300)
    return r, out


def events(trace):
    r = subprocess.run([args.gpurr, "dump", "--json", trace], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in r.stdout.splitlines()]


def marked(script, mark):
    with open(script) as f:
        for n, line in enumerate(f, 1):
            if f"# at:{mark}" in line:
                return n
    raise KeyError(mark)


def kernel(e):
    return e["launch"]["function"] if e["kind"] == "launch" else ""


train = os.path.join(args.scripts, "train_attributed.py")
plain = subprocess.run([sys.executable, train], capture_output=True, text=True, timeout=300)
# Every op observed, as gpurr bisect records (GPURR_FULL_ATTRIBUTION=1); the
# layer's default, which follows a template after two steps, is checked below.
r, trace = record("train", [sys.executable, train], GPURR_FULL_ATTRIBUTION="1")
print(r.stderr, end="")
check(r.returncode == 3, f"exit code passed through (got {r.returncode})")
check(r.stdout == plain.stdout, f"output unchanged: {plain.stdout!r} vs {r.stdout!r}")
check("gpurr: warning" not in r.stderr, "no warning from the layer")
launches = [e for e in events(trace) if e["kind"] == "launch"]
check(all("origin" in e for e in launches), "every launch has an origin")
by_kernel = {}
for e in launches:
    by_kernel.setdefault(kernel(e), []).append(e["origin"])

select = by_kernel.get("aten::index_select_kernel", [])
check(len(select) == 2, f"index_select launched once per step ({len(select)})")
if select:
    o = select[0]
    check(o["op"] == "aten::index_select", f"forward op {o['op']}")
    check(o["phase"] == "forward", f"forward phase {o['phase']}")
    check(o["module"] == "Net.embed", f"forward module {o['module']}")
    check(o["file"] == train and o["line"] == marked(train, "embed"), f"forward line {o['file']}:{o['line']}")
    check([s["step"] for s in [select[0], select[-1]]] == [0, 1], f"steps {[s['step'] for s in select]}")

add = by_kernel.get("aten::index_add__kernel", [])
check(len(add) == 2, f"index_add_ in each backward ({len(add)})")
if add:
    o = add[0]
    check(o["op"] == "aten::index_add_", f"backward op {o['op']}")
    check(o["phase"] == "backward", f"backward phase {o['phase']}")
    check(o["forwardOp"] == "aten::index_select", f"forward op of the backward: {o['forwardOp']}")
    check(o["module"] == "Net.embed", f"backward module {o['module']}")
    check(o["line"] == marked(train, "embed"), f"backward line {o['line']}")
    check(any("IndexSelectBackward0" in s for s in o["opStack"]), f"backward stack {o['opStack']}")
    check(o["step"] == 0, f"backward step {o['step']}")

addmm = by_kernel.get("aten::addmm_kernel", [])
check(len(addmm) == 2, f"addmm once per forward ({len(addmm)})")
if addmm:
    o = addmm[0]
    check(o["opStack"][-2:] == ["aten::linear", "aten::addmm"], f"linear > addmm: {o['opStack']}")
    check(o["module"] == "Net.fc", f"Linear's module {o['module']}")
    # Inside torch.nn.Linear, the program's innermost line is Net.forward's call.
    check(o["line"] == marked(train, "relu") + 1, f"Linear's line {o['line']}")

relu = by_kernel.get("aten::relu_kernel", [])
check(relu and relu[0]["module"] == "Net" and relu[0]["line"] == marked(train, "relu"), f"relu {relu[:1]}")
mm = by_kernel.get("aten::mm_kernel", [])
check(mm and all(o["phase"] == "backward" and o["forwardOp"] == "aten::linear" for o in mm),
      f"mm in backward of linear: {[(o['phase'], o['forwardOp']) for o in mm]}")
# The hooks run in their nodes' evaluation, outside the nodes' own scopes:
# backward all the same. The bias's in AccumulateGrad's, which has no forward
# op; the embedding output's in index_select's node's, linked to index_select.
neg = by_kernel.get("aten::neg_kernel", [])
leaf = [o for o in neg if any(s.endswith("AccumulateGrad") for s in o["opStack"])]
inner = [o for o in neg if any(s.endswith("IndexSelectBackward0") for s in o["opStack"])]
check(len(neg) == 8 and len(leaf) == 4 and len(inner) == 4
      and all(o["phase"] == "backward" and o["op"] == "aten::neg" for o in neg),
      f"the hooks' ops in backward: {[(o['phase'], o['op'], o['opStack']) for o in neg]}")
check(all(o["forwardOp"] == "" for o in leaf), f"a leaf's hook: no forward op: {[o['forwardOp'] for o in leaf]}")
check(all(o["forwardOp"] == "aten::index_select" and o["module"] == "Net.embed" and o["line"] == marked(train, "embed")
          for o in inner), f"index_select's node's hook: its forward op, module and line: {inner[:1]}")
side = [o for o in by_kernel.get("aten::mul_kernel", []) if o["module"] == "Side"]
check(len(side) == 1 and side[0]["line"] == marked(train, "side"), f"the second thread's module and line: {side}")
# Whether each op updates an argument in place, from its schema: index_add_
# its self, batch norm its running statistics (undeclared); an out= argument
# is written, not updated.
in_place = {k: sorted({o["inPlace"] for o in v}) for k, v in by_kernel.items()}
expected = {"aten::index_add__kernel": ["yes"], "aten::native_batch_norm_kernel": ["yes"],
            "aten::index_select_kernel": ["no"], "aten::addmm_kernel": ["no"], "aten::mm_kernel": ["no"],
            "aten::relu_kernel": ["no"], "aten::mul_kernel": ["no"], "aten::sub_kernel": ["no"],
            "aten::neg_kernel": ["no"]}
check(in_place == expected, f"in place by schema: {in_place}")
sub = by_kernel.get("aten::sub_kernel", [])
check(len(sub) == 1 and sub[0]["line"] == marked(train, "out"), f"the out= op: {sub}")
steps = [e["origin"]["step"] for e in launches]
check(steps == sorted(steps), "steps never go back")
for step in set(steps):
    counts = [e["origin"]["stepLaunch"] for e in launches if e["origin"]["step"] == step]
    check(counts == list(range(len(counts))), f"launches of step {step} counted from 0: {counts}")

# By default the layer observes steps 0 and 1, then stops: steps 2 to 4 take
# step 1's origins by place (their own step and count). After the loop, the
# second thread's first launch matches nothing (it carries its step alone)
# and the layer observes again: the launches after it are attributed as ops.
full = [e["origin"] for e in launches]
r, trace = record("follow", [sys.executable, train], GPURR_TEST_STEPS="5")
check(r.returncode == 3 and "gpurr: warning" not in r.stderr, f"follow run: {r.returncode} {r.stderr}")
followed = [e for e in events(trace) if e["kind"] == "launch"]
steps, by_place = {}, {}
for e in followed:
    o = dict(e["origin"])
    step = o.pop("step")
    by_place.setdefault(step, set()).add(o.pop("byPlace"))
    steps.setdefault(step, []).append((kernel(e), o))
check(sorted(steps) == [0, 1, 2, 3, 4, 5], f"follow steps {sorted(steps)}")
# A followed launch says so (Origin.byPlace); an observed one does not.
check(by_place == {0: {False}, 1: {False}, 2: {True}, 3: {True}, 4: {True}, 5: {False}},
      f"launches attributed by place, by step: {by_place}")
for s in (2, 3, 4):
    check(steps.get(s) == steps.get(1), f"step {s} followed step 1: {steps.get(s)} vs {steps.get(1)}")
after = steps.get(5, [])
check([k for k, _ in after] == ["aten::mul_kernel", "aten::native_batch_norm_kernel", "aten::sub_kernel"],
      f"after the loop: {after}")
if len(after) == 3 and len(full) >= 3:
    check(after[0][1]["op"] == "" and after[0][1]["stepLaunch"] == 0, f"the first launch unlike step 1: {after[0]}")
    for (_, o), f in zip(after[1:], full[-2:]):
        f = dict(f, stepLaunch=o["stepLaunch"])
        f.pop("step")
        f.pop("byPlace")
        check(o == f, f"observed again after the loop: {o} vs {f}")

# A loop that logs every fourth step: one launch more (a copy of the loss),
# at the start of the step after it. The first two such steps match no
# template where the extra launch is (from there on they are observed); they
# come at a period, so the layer observes the third in full and the recorder
# keeps it as a second template. From then on each kind of step is followed
# by its own template: every step's origins are those of a run that observes
# every op, but for the two that taught the period.
logs = os.path.join(args.scripts, "logs_every.py")


def attributed_steps(name, **extra):
    """The logs_every.py run `name` recorded twice, observing every op and as
    by default: each run's launches by step, and the second's layerSteps."""
    plain_logs = subprocess.run([sys.executable, logs], capture_output=True, text=True, timeout=300,
                                env=dict(os.environ, **extra))
    by_step, tally = [], None
    for full in (True, False):
        r, trace = record(f"{name}_{'full' if full else 'follow'}", [sys.executable, logs],
                          **dict(extra, GPURR_FULL_ATTRIBUTION="1" if full else "0"))
        check(r.returncode == 0 and r.stdout == plain_logs.stdout and "gpurr: warning" not in r.stderr,
              f"{name} run: {r.returncode} {r.stderr}")
        steps = {}
        for e in events(trace):
            if e["kind"] == "launch":
                o = dict(e["origin"])
                o.pop("byPlace")  # what differs from the full run is the origin itself
                steps.setdefault(o.pop("step"), []).append((kernel(e), o))
        by_step.append(steps)
        info = subprocess.run([args.gpurr, "info", "--json", trace], capture_output=True, text=True, check=True)
        tally = json.loads(info.stdout)["origins"]["layerSteps"]
    full, followed = by_step
    check(sorted(full) == sorted(followed) == list(range(22)), f"{name} steps {sorted(full)} {sorted(followed)}")
    return full, followed, [s for s in sorted(full) if full[s] != followed.get(s)], tally


full, followed, unlike, tally = attributed_steps("logs")
check(unlike == [4, 8], f"steps attributed unlike the run that observes every op: {unlike} (expected [4, 8])")
check(tally == {"observed": 3, "followed": 17, "unmatched": 2, "templates": 2, "switches": 5},
      f"the index's layerSteps: {tally}")
log_line = marked(logs, "log")
for s in (4, 8, 12, 16, 20):
    first = followed.get(s, [("", {})])[0]
    check(first[0] == "aten::mul_kernel", f"step {s} begins with the log's launch: {first}")
    if s in (4, 8):
        check(first[1].get("op") == "", f"step {s}: the launch that matched no template carries no op: {first}")
    else:
        check(first[1].get("op") == "aten::mul" and first[1].get("line") == log_line,
              f"step {s}: the log's launch followed from its own template: {first}")
# Steps that change for good at step 10: steps 10 and 11 match no template,
# two in a row, so the layer observes step 12 in full and follows it after.
_, _, unlike, tally = attributed_steps("change", GPURR_TEST_LOG_EVERY="0", GPURR_TEST_CHANGE_AT="10")
check(unlike == [10, 11], f"steps that changed: attributed unlike the full run: {unlike} (expected [10, 11])")
check(tally is not None and (tally["observed"], tally["followed"], tally["unmatched"]) == (3, 17, 2),
      f"steps that changed: the index's layerSteps: {tally}")

# A forward pre-hook scales the last layer's weight under torch.no_grad in
# step 1 alone, one of the steps the layer learns: its template has the
# hook's launch, which no later step runs. Each later step skips it (the
# next launch is found one place on, at the same autograd counter) and is
# followed on: every step is attributed as in the run that observes every op.
_, followed, unlike, tally = attributed_steps("hooked", GPURR_TEST_LOG_EVERY="0", GPURR_TEST_HOOK_AT="1")
check(unlike == [], f"steps after a hook that ran in one step: attributed unlike the full run: {unlike}")
check(tally is not None and (tally["observed"], tally["followed"], tally["unmatched"]) == (2, 20, 0),
      f"steps after a hook that ran in one step: the index's layerSteps: {tally}")
hooked = [o for _, o in followed.get(1, []) if o.get("line") == marked(logs, "hook")]
check(len(hooked) == 1 and hooked[0]["module"] == "Sequential.2", f"the hook's launch in step 1: {hooked}")

# AMP's GradScaler skips the optimizer steps of steps 0, 1 and 9, whose
# gradients overflow: each is still a step of its own, as the loop counts
# them, and each step is attributed as in the run that observes every op.
_, _, unlike, tally = attributed_steps("amp", GPURR_TEST_LOG_EVERY="0", GPURR_TEST_AMP_SKIP="0,1,9")
check(unlike == [], f"steps of a GradScaler that skipped some: attributed unlike the full run: {unlike}")
check(tally is not None and (tally["observed"], tally["followed"], tally["unmatched"]) == (2, 20, 0),
      f"steps of a GradScaler that skipped some: the index's layerSteps: {tally}")

# Each op's tensor arguments, with what its schema writes (GPURR_TEST_CPU_OPERANDS
# makes the layer report CPU tensors): index_select reads the embedding's
# weight and the indices; index_add_ writes its self and reads the rest;
# addmm and mm read all theirs; batch norm writes its running statistics.
log = os.path.join(args.work, "operands.log")
r, _ = record("operands", [sys.executable, train], GPURR_TEST_CPU_OPERANDS="1", GPURR_TEST_OPERANDS_LOG=log)
check(r.returncode == 3 and r.stdout == plain.stdout, "operands run")
weight = [line.split()[-1] for line in r.stderr.splitlines() if line.startswith("weight storage ")]
operands = {}
with open(log) as f:
    for line in f:
        name, *rest = line.split()
        operands.setdefault(name, []).append(rest)
kinds = lambda ops: sorted(o.split(":")[1] for o in ops)  # noqa: E731
select = operands.get("aten::index_select_kernel", [])
check(len(select) == 2 and all(kinds(o) == ["r", "r"] for o in select), f"index_select operands {select}")
check(weight and all(weight[0] + ":r" in o for o in select), f"index_select reads the weight {weight}")
add = operands.get("aten::index_add__kernel", [])
check(len(add) == 2 and all(kinds(o) == ["r", "r", "w"] for o in add), f"index_add_ operands {add}")
addmm = operands.get("aten::addmm_kernel", [])
check(len(addmm) == 2 and all(kinds(o) == ["r", "r", "r"] for o in addmm), f"addmm operands {addmm}")
mm = operands.get("aten::mm_kernel", [])
check(mm and all(kinds(o) == ["r", "r"] for o in mm), f"mm operands {mm}")
# Batch norm writes its running statistics, which its schema does not declare.
running = [line.split()[-1] for line in r.stderr.splitlines() if line.startswith("running_mean storage ")]
norm = operands.get("aten::native_batch_norm_kernel", [])
check(len(norm) == 1 and running and running[0] + ":w" in norm[0], f"batch norm writes running_mean {norm} {running}")

# A loop that steps no torch.optim optimizer (a hand-written update)
# completes no training step: --steps hashes nothing, and record says so.
manual = os.path.join(args.work, "manual_sgd.py")
with open(manual, "w") as f:
    f.write("import torch\nw = torch.ones(4, requires_grad=True)\nfor i in range(3):\n"
            "    (w * 2).sum().backward()\n    with torch.no_grad():\n        w -= 0.1 * w.grad\n"
            "    w.grad = None\nprint(w.tolist())\n")
r, _ = record("manual", [sys.executable, os.path.join(args.scripts, "launch_in.py"), "aten::mul", manual], "--steps",
              "1:3")
check(r.returncode == 0 and "gpurr: warning: --steps 1:3: the program completed no training step, so no launch was "
      "hashed" in r.stderr, f"--steps on a loop without an optimizer: {r.returncode} {r.stderr[-600:]}")

# --until-step 0: the program stops at step 1's forward, after step 0's
# iteration printed its loss; exit code 0; the trace is complete and says so.
r, trace = record("until", [sys.executable, train], "--until-step", "0")
first_line = plain.stdout.splitlines(keepends=True)[:1]
check(r.returncode == 0, f"--until-step 0: exit code 0 (got {r.returncode}): {r.stderr[-1000:]}")
check(r.stdout.splitlines(keepends=True) == first_line, f"--until-step 0: step 0's output only: {r.stdout!r}")
check("gpurr: stopped the program after training step 0 (--until-step)" in r.stderr, f"record says so: {r.stderr!r}")
info = json.loads(subprocess.run([args.gpurr, "info", "--json", trace], capture_output=True, text=True).stdout)
check(info["complete"] and info["stoppedAfterStep"] == 0, f"info: complete, stopped after step 0: {info.get('complete')} "
      f"{info.get('stoppedAfterStep')}")
text = subprocess.run([args.gpurr, "info", trace], capture_output=True, text=True).stdout
check("gpurr stopped the program after training step 0" in text, f"info's text says so: {text[-400:]!r}")
steps = [e["origin"]["step"] for e in events(trace) if e["kind"] == "launch"]
check(steps and set(steps) <= {0, 1}, f"--until-step 0: launches of steps 0 and 1 only: {sorted(set(steps))}")
check([kernel(e) for e in events(trace)].count("aten::index_select_kernel") == 1,
      "--until-step 0: index_select launched in step 0 only")
r, _ = record("until-noframework", [sys.executable, train], "--until-step", "0", "--no-framework")
check(r.returncode == 2 and "--until-step needs the PyTorch layer" in r.stderr, f"--until-step without the layer: "
      f"{r.returncode} {r.stderr!r}")

# --no-framework: no origins.
r, trace = record("off", [sys.executable, train], "--no-framework")
check(r.returncode == 3 and r.stdout == plain.stdout, "--no-framework run")
check(all("origin" not in e for e in events(trace)), "--no-framework: no origins")

# A program without torch sees nothing; a sitecustomize of its own still runs.
own = os.path.join(args.work, "own")
os.makedirs(own)
with open(os.path.join(own, "sitecustomize.py"), "w") as f:
    f.write("print('own sitecustomize')\n")
command = [sys.executable, "-c", "import sys; print('no torch', 'torch' in sys.modules); sys.exit(5)"]
r, _ = record("notorch", command, PYTHONPATH=own)
check(r.returncode == 5, f"no-torch exit code {r.returncode}")
check(r.stdout == "own sitecustomize\nno torch False\n", f"no-torch output {r.stdout!r}")

# A torch the layer does not know (its hook APIs missing): one warning, and
# the program runs as before.
fake = os.path.join(args.work, "faketorch", "torch")
os.makedirs(fake)
with open(os.path.join(fake, "__init__.py"), "w") as f:
    f.write("__version__ = '9.9.0'\n")
command = [sys.executable, "-c", "import torch; print('fake', torch.__version__)"]
r, _ = record("faketorch", command, PYTHONPATH=os.path.dirname(fake))
check(r.returncode == 0 and r.stdout == "fake 9.9.0\n", f"fake torch run: {r.returncode} {r.stdout!r}")
warnings = [line for line in r.stderr.splitlines() if line.startswith("gpurr: warning:")]
check(len(warnings) == 1 and "PyTorch layer did not start" in warnings[0], f"one warning: {warnings}")

# A program that profiles itself: a CPU-only session says nothing; the first
# of three that ask for CUDA activity (which gpurr's hold on CUPTI would
# leave without GPU events) brings one warning, the others none.
profiled = os.path.join(args.scripts, "profiled_attributed.py")
plain = subprocess.run([sys.executable, profiled], capture_output=True, text=True, timeout=300)
r, _ = record("profiled", [sys.executable, profiled])
check(r.returncode == 0 and r.stdout == plain.stdout and plain.stdout.count("events\n") == 4,
      f"profiled run: exit code {r.returncode}, output {plain.stdout!r} vs {r.stdout!r}")
said = [line for line in r.stderr.splitlines() if line.startswith(("gpurr: warning:", "session "))]
warnings = [line for line in said if line.startswith("gpurr: warning:")]
check(len(warnings) == 1 and "torch.profiler" in warnings[0] and "CUPTI" in warnings[0],
      f"one warning that the profiler gets no GPU events: {warnings}")
check("session 2" in said and said[said.index("session 2") + 1:][:1] == warnings[:1],
      f"the warning comes with the first session that asks for CUDA: {said}")

# torch.compile: no graph breaks from the layer; compiled regions attributed.
compiled = os.path.join(args.scripts, "compiled_attributed.py")
plain = subprocess.run([sys.executable, compiled], capture_output=True, text=True, timeout=300)
r, trace = record("compiled", [sys.executable, compiled])
print(r.stderr[-2000:], end="")
check(r.returncode == 0, f"compiled exit code {r.returncode}")
check(r.stdout == plain.stdout and "breaks 0" in r.stdout, f"graph breaks: {plain.stdout!r} vs {r.stdout!r}")
compiled_launches = [e["origin"] for e in events(trace) if e["kind"] == "launch"]
for o in compiled_launches:
    print("compiled:", o["phase"], o["op"], "|", " > ".join(o["opStack"]), "|", o["module"], o["line"])
check(any(o["op"] == "aten::addmm" and o["line"] == marked(compiled, "compiled") for o in compiled_launches),
      "compiled forward launches carry their op and the line that called the compiled model")
# No module hook runs inside a compiled graph: the layer enters the module
# that holds the graph's ops around it, for its forward and so its backward.
for mark in ("compiled_function", "compiled_module"):
    line = marked(compiled, mark)
    forward = [o for o in compiled_launches if o["line"] == line and o["phase"] == "forward" and
               "CompiledFunction" in o["opStack"]]  # not the ops dynamo traced while compiling
    backward = [o for o in compiled_launches if o["line"] == line and o["phase"] == "backward" and
                "CompiledFunctionBackward" in o["opStack"]]
    check(forward and all(o["module"] == "Net.layers" for o in forward),
          f"{mark}: forward launches in Net.layers: {[(o['op'], o['module']) for o in forward]}")
    check(backward and all(o["module"] == "Net.layers" for o in backward),
          f"{mark}: backward launches in Net.layers: {[(o['op'], o['module']) for o in backward]}")

# Inductor's autotuner (torch's own CachingAutotuner, in step 3, which the
# layer follows by its template): what it launched while it timed candidates
# is marked benchmarking, the step is still followed, and gpurr diff sets
# those launches aside against a run that found the choice in the cache.
tuned = os.path.join(args.scripts, "autotuned.py")
plain = subprocess.run([sys.executable, tuned], capture_output=True, text=True, timeout=300)
r, cold = record("autotuned", [sys.executable, tuned])
print(r.stderr[-2000:], end="")
check(r.returncode == 0 and r.stdout == plain.stdout, f"autotuned output unchanged: {plain.stdout!r} vs {r.stdout!r}")
check("gpurr: warning" not in r.stderr, "autotuned: no warning from the layer")
tuned_launches = [e for e in events(cold) if kernel(e) == "triton_poi_fused_add_0"]
marked_launches = [e["origin"] for e in tuned_launches if e["origin"]["benchmarking"]]
check(len(marked_launches) == 3 and all(
    o["opStack"][-1] == "CachingAutotuner.benchmark_all_configs" and o["step"] == 3 and o["line"] == 0
    for o in marked_launches), f"the three candidates' launches marked benchmarking, in step 3: {marked_launches}")
own = [e["origin"] for e in tuned_launches if not e["origin"]["benchmarking"]]
check([o["step"] for o in own] == list(range(6)), f"the kernel's own launches, one a step, unmarked: {own}")
info = json.loads(subprocess.run([args.gpurr, "info", "--json", cold], capture_output=True, text=True,
                                 check=True).stdout)["origins"]
check(info["benchmarking"] == 3, f"info counts the benchmarking operations: {info}")
check(info["layerSteps"]["followed"] >= 3 and info["layerSteps"]["unmatched"] == 0,
      f"the autotuning step still followed its template: {info['layerSteps']}")
r, warm = record("autotuned-warm", [sys.executable, tuned], AUTOTUNED_WARM="1")
check(r.returncode == 0 and r.stdout == plain.stdout, f"warm run: same output {r.stdout!r}")
d = subprocess.run([args.gpurr, "diff", "--json", cold, warm], capture_output=True, text=True)
j = json.loads(d.stdout) if d.stdout else {}
p = (j.get("processes") or [{}])[0]
check(d.returncode == 0 and j.get("identical"), f"autotuned and warm runs identical: {d.returncode} {d.stderr}")
check(p.get("setAside") == {"benchmarking": {"a": 3, "b": 0}}, f"the autotuning set aside: {p.get('setAside')}")

print(f"{len(failures)} failures" if failures else "all attribution checks passed")
sys.exit(1 if failures else 0)
