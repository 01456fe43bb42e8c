"""Records module_paths.py through gpurr's PyTorch layer (the test's fake
recorder, "kernels" launched inside aten::addmm and aten::mm) and checks the
module each launch names where a program calls its modules in ways other
than one model called whole: a torch.fx model of its own, a part called on
its own before the whole, a child replaced after a call, parts called from
a method of a module never called itself, two models of one class, an
exception other than Exception caught outside the modules it left,
activation checkpointing (its forward recomputed in the backward pass), an
optimizer stepped inside a module's forward, a Python autograd.Function's
own backward and a second phase's optimizer taking over the step count;
a step that stops matching its template inside a module or inside a
backward node;
then two threads each evaluating its own model while the layer follows its
templates, steps that run the same kernels through other layers or
experts of one kind (LayerDrop, a mixture of experts), and a weight
updated once by the kernel the step's first op runs on the batch. The program's output
must be unchanged by the layer."""
import argparse
import collections
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
program = os.path.join(args.scripts, "module_paths.py")
# The line of Block.forward that calls its layer.
with open(program) as f:
    text = f.read().splitlines()
BLOCK_LINE = 1 + [n for n, t in enumerate(text) if "return torch.relu(self.fc(v))" in t][0]
# The lines of Product's forward and backward that multiply.
PRODUCT_LINE = 1 + [n for n, t in enumerate(text) if "# the forward's own line" in t][0]
PRODUCT_BACKWARD_LINE = 1 + [n for n, t in enumerate(text) if "# the backward's own line" in t][0]


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def record(name, *program_args, **extra):
    """The program run plainly and recorded; the recorded run's launches."""
    env = dict(os.environ, GPURR_RECORDER_LIB=args.recorder, GPURR_TEST_LAUNCHER=args.launcher)
    plain = subprocess.run([sys.executable, program, *program_args], capture_output=True, text=True, timeout=300,
                           env=dict(env, **extra, GPURR_TEST_LAUNCHER=""))
    trace = os.path.join(args.work, name + ".gpurr")
    r = subprocess.run([args.gpurr, "record", "-o", trace, "--", sys.executable, program, *program_args],
                       capture_output=True, text=True, timeout=300, env=dict(env, **extra))
    check(plain.returncode == 0 and r.returncode == 0 and r.stdout == plain.stdout,
          f"{name}: output unchanged ({plain.returncode}, {r.returncode}): {plain.stdout!r} vs {r.stdout!r} "
          f"{r.stderr[-800:]}")
    check("gpurr: warning" not in r.stderr, f"{name}: no warning from the layer: {r.stderr[-800:]}")
    dump = subprocess.run([args.gpurr, "dump", "--json", trace], capture_output=True, text=True)
    return [e for e in map(json.loads, dump.stdout.splitlines()) if e["kind"] == "launch"]


# Every op observed (GPURR_FULL_ATTRIBUTION=1, as gpurr bisect records):
# (op's kernel, phase, module) of each step's launches, as sets.
launches = record("cases", GPURR_FULL_ATTRIBUTION="1")
steps = {}
lines = {}  # (step, op's kernel, phase, module) -> the source lines of its launches
for e in launches:
    o = e.get("origin") or {}
    key = (e["launch"]["function"].split("_kernel")[0], o.get("phase"), o.get("module") or "")
    steps.setdefault(o.get("step"), set()).add(key)
    lines.setdefault((o.get("step"), *key), set()).add(f"{os.path.basename(o.get('file') or '')}:{o.get('line')}")


def modules(step, op, phase):
    return {m for k, ph, m in steps.get(step, ()) if k == op and ph == phase}


# A program's own fx model calls its modules: rooted at the traced class.
check(modules(0, "aten::addmm", "forward") == {"Traced.body.0.fc", "Traced.body.1.fc"},
      f"fx: {modules(0, 'aten::addmm', 'forward')}")
check(modules(0, "aten::mm", "backward") == {"Traced.body.0.fc", "Traced.body.1.fc"},
      f"fx backward: {modules(0, 'aten::mm', 'backward')}")
# A part called on its own, before the whole ever ran, is the whole's part:
# the outermost module that holds it names it.
check(modules(1, "aten::mm", "backward") == {"Outer.inner.0.fc", "Outer.head"},
      f"a part first: {modules(1, 'aten::mm', 'backward')}")
check(modules(1, "aten::addmm", "forward") == {"Outer.inner.0.fc", "Outer.head"},
      f"a part first, forward: {modules(1, 'aten::addmm', 'forward')}")
# A child set after the module was named takes its attribute's name.
check(modules(2, "aten::addmm", "forward") == {"Outer.inner.0.fc", "Outer.head"},
      f"a child replaced: {modules(2, 'aten::addmm', 'forward')}")
# Parts called from a method of their owner, which is never called itself.
check(modules(3, "aten::addmm", "forward") == {"Owner.gen.0", "Owner.disc.0"},
      f"an owner's method: {modules(3, 'aten::addmm', 'forward')}")
# Two live models of one class called on their own are told apart.
check(modules(4, "aten::addmm", "forward") == {"Sequential.0", "Sequential#2.0"},
      f"two models of one class: {modules(4, 'aten::addmm', 'forward')}")
# The modules a BaseException left are left at the optimizer's step: the
# next step's op outside every module names none.
check(modules(5, "aten::addmm", "forward") == {"Raising.fc", "Raising.outer"},
      f"interrupted: {modules(5, 'aten::addmm', 'forward')}")
check(modules(6, "aten::addmm", "forward") == {""}, f"after the interruption: {modules(6, 'aten::addmm', 'forward')}")
# Activation checkpointing: the forward recomputed in the backward pass is
# its module's forward, and (reentrant) the backward it runs names it.
for step, kind in ((7, "non-reentrant"), (8, "reentrant")):
    check(modules(step, "aten::addmm", "forward") == {"Checkpointed.a.fc", "Checkpointed.b.fc"} and
          not modules(step, "aten::addmm", "backward"),
          f"checkpoint ({kind}): {sorted(k for k in steps.get(step, ()) if k[0] == 'aten::addmm')}")
    check(modules(step, "aten::mm", "backward") == {"Checkpointed.a.fc", "Checkpointed.b.fc"},
          f"checkpoint ({kind}) backward: {modules(step, 'aten::mm', 'backward')}")
    # Its ops, in the forward and recomputed, have the line of the block's
    # forward that called them (not none in the backward pass, nor the
    # checkpoint call's line for the reentrant CheckpointFunction's).
    check(lines.get((step, "aten::addmm", "forward", "Checkpointed.a.fc")) == {f"module_paths.py:{BLOCK_LINE}"},
          f"checkpoint ({kind}) lines: {lines.get((step, 'aten::addmm', 'forward', 'Checkpointed.a.fc'))}")

# An optimizer stepped inside a module's forward: the rest of it is still
# the module's.
check(modules(10, "aten::addmm", "forward") == {"Stepping.fc"} and
      modules(11, "aten::addmm", "forward") == {"Stepping.after"},
      f"a step inside a forward: {modules(10, 'aten::addmm', 'forward')} {modules(11, 'aten::addmm', 'forward')}")

# A Python autograd.Function's backward runs the program's own code: its ops
# have the backward's line, not the line of the forward op they differentiate.
check(lines.get((11, "aten::mm", "forward", "Custom")) == {f"module_paths.py:{PRODUCT_LINE}"} and
      lines.get((11, "aten::mm", "backward", "Custom")) == {f"module_paths.py:{PRODUCT_BACKWARD_LINE}"},
      f"a Python autograd.Function's lines: {lines.get((11, 'aten::mm', 'forward', 'Custom'))} "
      f"{lines.get((11, 'aten::mm', 'backward', 'Custom'))}")

# A second phase's optimizer, the first one alive: it leads from its second
# step on (its first iteration shares the step of its second).
check([sorted(modules(step, "aten::addmm", "forward")) for step in (12, 13, 14, 15)] ==
      [["Phases.fc"], ["Phases.fc"], ["Phases.fc"], []],
      f"two phases: {[modules(step, 'aten::addmm', 'forward') for step in (12, 13, 14, 15)]}")

# A layer held by two parts is named by the part that calls it.
check(modules(9, "aten::addmm", "forward") == {"Shared.enc.0", "Shared.dec.1"},
      f"a layer held by two parts: {modules(9, 'aten::addmm', 'forward')}")

# Two threads, each evaluating a model of its own, their launches
# interleaving otherwise in each step, under the default attribution: no
# launch takes the other thread's module. The launches carry no parameter
# words here, so that only the thread in each place's key tells them apart.
launches = record("threads", "threads", GPURR_TEST_LAUNCH_WORDS="0")
roots = {}
for e in launches:
    module = (e.get("origin") or {}).get("module") or ""
    roots.setdefault(e["thread"], set()).add(module.split(".")[0])
crossed = [t for t, r in roots.items() if {"Alpha", "Beta"} <= r]
check(any("Alpha" in r for r in roots.values()) and any("Beta" in r for r in roots.values()) and not crossed,
      f"threads: the roots each thread's launches name: {roots}")

# LayerDrop and experts: a step running the same kernels through other
# modules of one kind matches no template (the launches are given other
# parameters) and is observed from the first such launch; every launch
# names the module that every op observed names, or none: the one at which
# the step stopped matching, and the backward launches of its op (at most
# two: its input's and weight's gradients). The backward launches of the ops
# that ran before it, while the recorder followed, take the template's
# forward ops by their autograd sequence numbers (by place). A step
# that differs only in which fused expert it takes (one parameter of one
# module) is followed: of the 12 steps, 0, 1, 7 and 8 are observed in full
# (7 at the period of the steps that did not match, 8 because 7 was of a
# kind learned already), 3 and 5 partly, the rest followed.
truth = record("dropping-full", "dropping", GPURR_FULL_ATTRIBUTION="1")
followed = record("dropping", "dropping")
wrong, unnamed, by_place = [], collections.Counter(), 0
notes = [a["text"] for e in followed for a in e["launch"].get("annotations", []) if a.get("kind") == "note"]
check(len(notes) == 2 and all(n.startswith("matched no template: given another weight") for n in notes),
      f"dropping: the launches at which a step stopped matching say why: {notes}")
for o, t in zip(followed, truth):
    o, t = o.get("origin") or {}, t.get("origin") or {}
    if o.get("module") and o.get("module") != t.get("module"):
        wrong.append((o.get("step"), o.get("op"), o.get("module"), t.get("module")))
    elif not o.get("module") and t.get("module"):
        unnamed[(o.get("step"), t.get("phase"))] += 1
    by_place += o.get("phase") == "backward" and o.get("byPlace", False) and o.get("step") in (3, 5)
info = subprocess.run([args.gpurr, "info", "--json", os.path.join(args.work, "dropping.gpurr")], capture_output=True,
                      text=True)
steps_by = json.loads(info.stdout)["origins"]["layerSteps"] if info.returncode == 0 else {}
check(len(followed) == len(truth) and not wrong and by_place >= 6 and
      all(n <= (1 if phase == "forward" else 2) for (_, phase), n in unnamed.items()) and
      (steps_by.get("observed"), steps_by.get("followed"), steps_by.get("unmatched")) == (4, 6, 2),
      f"dropping: {len(followed)} vs {len(truth)} launches, {len(wrong)} named another module "
      f"(step, op, named, true): {wrong[:6]}; launches unnamed by step and phase: {dict(unnamed)}; backward launches "
      f"named by place in the partly observed steps: {by_place}; steps: {steps_by}")

# An ensemble's second member, of the first's class, trained after it: its
# weights are not the template's, and the step stops matching at its first
# launch given one (before any launch of the step was given its place's
# weight, a word that points at no parameter the layer reported is no stale
# one); it is learned anew, and no launch takes the first member's modules.
def named_pairs(name):
    """Case `name` recorded observing every op and as by default: each
    launch's (step, module named by default, module observed)."""
    truth = record(f"{name}-full", name, GPURR_FULL_ATTRIBUTION="1")
    followed = record(name, name)
    check(len(followed) == len(truth), f"{name}: {len(followed)} vs {len(truth)} launches")
    return [((o.get("origin") or {}).get("step"), (o.get("origin") or {}).get("module") or "",
             (t.get("origin") or {}).get("module") or "") for o, t in zip(followed, truth)]


pairs = named_pairs("ensemble")
roots = collections.Counter(true.split(".")[0] for _, _, true in pairs)
wrong = [p for p in pairs if p[1] and p[1] != p[2]]
unnamed = sum(1 for _, got, true in pairs if true and not got)
check(set(roots) >= {"Member", "Member#2"} and not wrong and unnamed <= 4,
      f"ensemble: roots {dict(roots)}, {len(wrong)} named another module (step, named, true): {wrong[:6]}; "
      f"{unnamed} unnamed")
# Heads on a frozen backbone: the second head's first step, before its
# optimizer stepped, takes the first head's modules (the backbone gave the
# step its template's weight, and the head's weights were not known); from
# its optimizer's first step on, none does.
pairs = named_pairs("probes")
first = min((step for step, _, true in pairs if true.startswith("Head#2")), default=None)
wrong = [p for p in pairs if p[1] and p[1] != p[2]]
check(first is not None and all(step == first for step, _, _ in wrong),
      f"probes: named another module after the second head's first step ({first}) (step, named, true): {wrong[:6]}")

# A weight updated once, before a step's first op, by the kernel that op
# runs on the batch, under torch.no_grad: run without gradients where the
# template's launch there recorded them (and given a weight where it was
# given none), the update matches no template (it says why) and carries no
# op or line rather than the projection's; every launch named is named as
# when every op is observed.
truth = record("updated-full", "updated", GPURR_FULL_ATTRIBUTION="1")
followed = record("updated", "updated")
fields = ("step", "op", "module", "line")
pairs = [tuple(tuple((e.get("origin") or {}).get(f) for f in fields) for e in (o, t))
         for o, t in zip(followed, truth)]
wrong = [(got, true) for got, true in pairs if got[1] and got != true]
notes = [a["text"] for e in followed for a in e["launch"].get("annotations", []) if a.get("kind") == "note"]
check(len(followed) == len(truth) and not wrong and len(notes) == 1 and
      notes[0] == "matched no template: the step learned ran this kernel at this launch's place recording gradients, "
      "this launch without (torch.no_grad)",
      f"updated: {len(followed)} vs {len(truth)} launches, named otherwise (followed, observed): {wrong[:4]}; "
      f"notes: {notes}")

# A step that stops matching inside a module: the modules running then
# name the ops they run from there on, as when every op is observed; only
# the launch at which it stopped matching (no phase either) and its op's
# backward have none.
truth = record("resumed-full", "resumed", GPURR_FULL_ATTRIBUTION="1")
followed = record("resumed", "resumed")
named = [((o.get("origin") or {}).get("step"), (o.get("origin") or {}).get("phase"),
          (o.get("origin") or {}).get("module") or "", (t.get("origin") or {}).get("module") or "")
         for o, t in zip(followed, truth)]
wrong = [n for n in named if n[2] and n[2] != n[3]]
unnamed = collections.Counter((step, phase) for step, phase, got, true in named if true and not got)
check(len(followed) == len(truth) and not wrong and unnamed[(3, "unknown")] == 1 and
      all(n <= (1 if phase == "unknown" else 2 if phase == "backward" else 0) for (_, phase), n in unnamed.items()) and
      {got for step, phase, got, _ in named if step == 3 and phase == "forward"} ==
      {"Model.block.first", "Model.block", "Model.block.last", "Model", "Model.head"},
      f"resumed: {len(followed)} vs {len(truth)} launches, named another module (step, phase, named, true): "
      f"{wrong[:6]}; unnamed by step and phase: {dict(unnamed)}; step 3's forward: "
      f"{[n for n in named if n[0] == 3 and n[1] == 'forward']}")

# A step that stops matching inside a backward node: the ops left in the
# node are the backward pass's, with the node's forward op, module and line
# (the Function's own backward), as when every op is observed.
truth = record("resumed-backward-full", "resumed-backward", GPURR_FULL_ATTRIBUTION="1")
followed = record("resumed-backward", "resumed-backward")
fields = ("step", "phase", "forwardOp", "module", "line")
pairs = [tuple(tuple((e.get("origin") or {}).get(f) for f in fields) for e in (o, t))
         for o, t in zip(followed, truth)]
diverged = [got for got, true in pairs if got[1] == "unknown"]
after = [(got, true) for got, true in pairs if got[0] == 3 and true[1] == "backward" and got[1] != "unknown"]
check(len(followed) == len(truth) and len(diverged) == 1 and after and all(got == true for got, true in after),
      f"resumed in backward: {len(followed)} vs {len(truth)} launches; where it stopped matching: {diverged}; "
      f"step 3's backward (followed, observed): {after}")

# Against a run without that op, the first divergence is where step 3
# stopped matching: its op unobserved, the report says how to name it.
record("resumed-backward-straight", "resumed-backward", RESUMED_EXTRA_STEP="-1")
r = subprocess.run([args.gpurr, "diff", os.path.join(args.work, "resumed-backward-straight.gpurr"),
                    os.path.join(args.work, "resumed-backward.gpurr")], capture_output=True, text=True)
check(r.returncode == 1 and "unnamed" in r.stdout and "gpurr bisect" in r.stdout,
      f"the report says how to name an unobserved op: {r.stdout[:1500]}")
r = subprocess.run([args.gpurr, "diff", "--json", os.path.join(args.work, "resumed-backward-straight.gpurr"),
                    os.path.join(args.work, "resumed-backward.gpurr")], capture_output=True, text=True)
first = ((json.loads(r.stdout).get("processes") or [{}])[0].get("firstDivergence") or {}) if r.stdout else {}
check(first.get("unobserved") is True, f"the JSON says so: {r.stdout[:1500]}")

# Forward hooks of a module's own, which run after the layer's global exit
# hook: their ops name the hooked module, in every step, observed or
# followed; so do the ops a module that calls itself runs after its inner
# call, whose own hooks ran before.
with open(program) as f:
    text = f.read().splitlines()
hook_line = 1 + [n for n, t in enumerate(text) if "# the hook's op" in t][0]
after_line = 1 + [n for n, t in enumerate(text) if "# after the inner call" in t][0]
for attribution in ("1", "0"):
    named = collections.defaultdict(set)
    for e in record(f"hooked-{attribution}", "hooked", GPURR_FULL_ATTRIBUTION=attribution):
        o = e.get("origin") or {}
        if o.get("phase") == "forward" and o.get("line") in (hook_line, after_line):
            named[o.get("line")].add(o.get("module"))
    check(named == {hook_line: {"Hooked.mlp", "Hooked.rec"}, after_line: {"Hooked.rec"}},
          f"hooked (full attribution {attribution}): the modules the hooks' ops name (line {hook_line}) and the ops "
          f"after the inner call (line {after_line}): {dict(named)}")

if failures:
    raise SystemExit(f"{len(failures)} check(s) failed")
print("module paths: all checks passed")
