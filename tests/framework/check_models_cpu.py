"""The CPU half of the GPU models suite (tests/gpu/models/): each model
script, its model code the library's own, runs on the CPU (--device cpu)
once plainly and once under `gpurr record` with the test's fake recorder,
"kernels" launched inside chosen ops (launch_in.py), for STEPS training
steps. Checks that the PyTorch layer leaves every script's output (losses,
parameter digests) unchanged, that the launches carry the library's module
paths, the source line (the library's file, or the script's where the
script called the op) and the training step, and that the layer, as
`gpurr record` runs it by default, observed steps 0 and 1 and followed the
rest: every launch of a later step carries the origin of the launch at its
place in step 0 or 1 (the trace's layerSteps: 2 observed, none partly).

A script whose library is not installed is reported as SKIP; prints one
PASS/FAIL line per script and exits 1 when one failed."""
import argparse
import json
import os
import subprocess
import sys
import time

STEPS = 4  # each script's training steps: epochs.py's two epochs of two batches

# Per case (a script and its own arguments): the ops to launch in, and what
# launches of an op must carry. `module`: the exact nn.Module path (None: outside every
# module); `recompiles`: dynamo's recompilations, logged, must be as many
# recorded as plain; `file`: the base name of the source line's file; `phase`;
# `steps`: the steps its launches must span; `inside`: a range that must be
# open around it; `every`: every launch of the op in the module has the
# line's file, not only the first.
CASES = {
    "llama.py": {
        "ops": "aten::embedding,aten::scaled_dot_product_attention,aten::_fused_adamw_",
        "expect": [
            {"op": "aten::embedding", "phase": "forward", "module": "LlamaForCausalLM.model.embed_tokens",
             "file": "modeling_llama.py", "steps": list(range(STEPS))},
            {"op": "aten::scaled_dot_product_attention", "phase": "forward",
             "module": "LlamaForCausalLM.model.layers.0.self_attn", "file": "sdpa_attention.py"},
            {"op": "aten::_fused_adamw_", "phase": "forward", "module": None, "file": "llama.py"},
        ],
    },
    # Activation checkpointing (transformers' gradient_checkpointing_enable):
    # each layer's forward recomputed in the backward pass has the module and
    # the library's line of the forward it repeats, at every launch.
    "llama.py --checkpointing": {
        "ops": "aten::scaled_dot_product_attention",
        "expect": [
            {"op": "aten::scaled_dot_product_attention", "phase": "forward",
             "module": "LlamaForCausalLM.model.layers.0.self_attn", "file": "sdpa_attention.py", "every": True,
             "steps": list(range(STEPS))},
        ],
    },
    "gpt2.py": {
        "ops": "aten::embedding,aten::addmm",
        "expect": [
            {"op": "aten::embedding", "phase": "forward", "module": "GPT2LMHeadModel.transformer.wte",
             "file": "modeling_gpt2.py", "steps": list(range(STEPS))},
            {"op": "aten::addmm", "phase": "forward", "module": "GPT2LMHeadModel.transformer.h.1.mlp.c_fc",
             "file": "pytorch_utils.py"},
        ],
    },
    # torch.compile'd around the model (aot_eager: the ops themselves run, in
    # the compiled graph): no module hook runs inside it, so the graph's
    # launches take the module that holds its ops, which the layer enters
    # around it; the line is the script's call of the compiled function.
    # Dynamo's guards count the global module hooks, so the layer keeps them
    # once a graph is compiled: it makes dynamo compile nothing again.
    "gpt2.py --compile --compile-backend aot_eager": {
        "ops": "aten::embedding",
        "recompiles": True,
        "expect": [
            {"op": "aten::embedding", "phase": "forward", "module": "GPT2LMHeadModel", "file": "gpt2.py",
             "steps": list(range(STEPS)), "inside": "CompiledFunction"},
        ],
    },
    "resnet50.py": {
        "ops": "aten::convolution,aten::addmm",
        "expect": [
            {"op": "aten::convolution", "phase": "forward", "module": "ResNet.layer2.0.conv1", "file": "resnet.py"},
            {"op": "aten::addmm", "phase": "forward", "module": "ResNet.fc", "file": "resnet.py",
             "steps": list(range(STEPS))},
        ],
    },
    "vit.py": {
        "ops": "aten::scaled_dot_product_attention,aten::convolution",
        "expect": [
            {"op": "aten::scaled_dot_product_attention", "phase": "forward",
             "module": "VisionTransformer.blocks.11.attn", "file": "attention.py"},
            {"op": "aten::convolution", "phase": "forward", "module": "VisionTransformer.patch_embed.proj",
             "file": "patch_embed.py"},
        ],
    },
    "gcn.py": {
        "ops": "aten::scatter_add_,aten::index_select",
        "expect": [
            {"op": "aten::scatter_add_", "phase": "forward", "module": "GCN.conv1.aggr_module",
             "file": "_scatter.py", "steps": list(range(STEPS))},
        ],
    },
    "lightning_fit.py": {
        "ops": "aten::convolution,aten::convolution_backward,aten::addmm",
        "expect": [
            # Lightning runs the step inside optimizer.step(closure): the
            # script's own forward still names the line.
            {"op": "aten::addmm", "phase": "forward", "module": "SmallConvNet.head", "file": "lightning_fit.py",
             "steps": list(range(STEPS)), "inside": "Optimizer.step#SGD.step"},
            {"op": "aten::convolution_backward", "phase": "backward", "module": "SmallConvNet.features.0",
             "file": "lightning_fit.py"},
        ],
    },
    "epochs.py": {
        "ops": "aten::addmm",
        "expect": [
            {"op": "aten::addmm", "phase": "forward", "module": "ResNet.fc", "file": "resnet.py",
             "steps": list(range(STEPS))},
        ],
    },
}


def step_lines(text):
    return [line for line in text.splitlines() if line.startswith(("step ", "final "))]


def followed_problems(gpurr, trace, launches):
    """What is wrong with the steps the layer followed: it must have observed
    steps 0 and 1 and followed the others to their end, and each followed
    step's launches (kernel, origin but its step) must be those of step 0 or
    step 1, the steps it learned."""
    info = json.loads(subprocess.run([gpurr, "info", "--json", trace], capture_output=True, text=True).stdout)
    tally = info["origins"]["layerSteps"]
    if tally is None or (tally["observed"], tally["followed"], tally["unmatched"]) != (2, STEPS - 2, 0):
        return [f"steps attributed {tally}, expected 2 observed in full and {STEPS - 2} followed"]
    by_step, by_place = {}, {}
    for e in launches:
        o = dict(e.get("origin") or {})
        step = o.pop("step", None)
        by_place.setdefault(step, set()).add(o.pop("byPlace", None))
        by_step.setdefault(step, []).append((e["launch"]["function"], o))
    learned = [by_step.get(0), by_step.get(1)]
    problems = [f"step {s} followed otherwise than step 0 or 1 ran: {by_step.get(s)} vs {learned}"[:800]
                for s in range(2, STEPS) if by_step.get(s) not in learned]
    # A followed launch says so (Origin.byPlace); an observed one does not.
    if by_place != {s: {s >= 2} for s in range(STEPS)}:
        problems.append(f"launches attributed by place, by step: {by_place}")
    return problems


def main():
    p = argparse.ArgumentParser()
    for a in ("--gpurr", "--recorder", "--launcher", "--models", "--work"):
        p.add_argument(a, required=True)
    p.add_argument("--only", action="append", default=[])
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, GPURR_RECORDER_LIB=args.recorder, GPURR_TEST_LAUNCHER=args.launcher,
               PYTHONUNBUFFERED="1")
    failed = 0
    for name, case in CASES.items():
        script, *own = name.split()
        if args.only and script not in args.only and name not in args.only:
            continue
        start = time.monotonic()
        command = [os.path.join(args.models, script), *own, "--device", "cpu", "--mode", "deterministic",
                   "--steps", str(STEPS)]
        run_env = dict(env, TORCH_LOGS="recompiles") if case.get("recompiles") else env
        plain = subprocess.run([sys.executable] + command, capture_output=True, text=True, timeout=300,
                               env=run_env)
        if plain.returncode == 77:
            print(f"SKIP {name}: {plain.stdout.strip().splitlines()[-1]}")
            continue
        trace = os.path.join(args.work, "_".join([script[:-3]] + [a.strip("-") for a in own]) + ".gpurr")
        record = [args.gpurr, "record", "--force", "-o", trace, "--", sys.executable,
                  os.path.join(here, "launch_in.py"), case["ops"]] + command
        recorded = subprocess.run(record, capture_output=True, text=True, timeout=300, env=run_env)
        if recorded.returncode == 0 and step_lines(plain.stdout) != step_lines(recorded.stdout):
            # Under ctest beside other tests, the compiled model's runs have
            # printed other parameter digests (the same first loss), never
            # when run alone, and the plain run was the odd one as often as
            # the recorded one: both run again once, said, and the second
            # pair compared.
            print(f"NOTE {name}: run again, plain and recorded, the first pair's outputs differed: "
                  f"{step_lines(plain.stdout)[:1]} vs {step_lines(recorded.stdout)[:1]}")
            plain = subprocess.run([sys.executable] + command, capture_output=True, text=True, timeout=300,
                                   env=run_env)
            recorded = subprocess.run(record, capture_output=True, text=True, timeout=300, env=run_env)
        problems = []
        if plain.returncode != 0 or recorded.returncode != 0:
            problems.append(f"exit codes: plain {plain.returncode}, recorded {recorded.returncode}: "
                            + (plain.stderr or recorded.stderr)[-600:])
        elif step_lines(plain.stdout) != step_lines(recorded.stdout) or not step_lines(plain.stdout):
            problems.append(f"output changed by the layer: {step_lines(plain.stdout)} vs {step_lines(recorded.stdout)}")
        if case.get("recompiles") and \
                recorded.stderr.count("Recompiling function") != plain.stderr.count("Recompiling function"):
            problems.append("dynamo compiled again under the layer: " + next(
                (line for line in recorded.stderr.splitlines() if "triggered by" in line or "- " in line), "")[-300:])
        if "gpurr: warning" in recorded.stderr:
            problems.append("the layer warned: " + next(line for line in recorded.stderr.splitlines()
                                                         if "gpurr: warning" in line))
        origins = []
        if not problems:
            dump = subprocess.run([args.gpurr, "dump", "--json", trace], capture_output=True, text=True)
            launches = [e for e in map(json.loads, dump.stdout.splitlines()) if e["kind"] == "launch"]
            origins = [e.get("origin") or {} for e in launches]
            if not origins:
                problems.append("no launches recorded")
            problems += followed_problems(args.gpurr, trace, launches)
        for want in case["expect"] if origins else []:
            mine = [o for o in origins if o.get("op") == want["op"] and o.get("phase") == want["phase"]]
            if not mine:
                seen = sorted({(o.get("op"), o.get("phase")) for o in origins})
                problems.append(f"no {want['phase']} launch of {want['op']} (seen: {seen})")
                continue
            where = f"{want['op']} ({want['phase']})"
            inside = [o for o in mine if (o.get("module") or None) == want["module"]]
            if not inside:
                problems.append(f"{where}: no launch in module {want['module']!r} "
                                f"(seen: {sorted({o.get('module') or '' for o in mine})})")
                continue
            for o in inside if want.get("every") else inside[:1]:
                if os.path.basename(str(o.get("file"))) != want["file"] or not o.get("line"):
                    problems.append(f"{where}: line {o.get('file')}:{o.get('line')} (step {o.get('step')}), "
                                    f"expected in {want['file']}")
                    break
            o = inside[0]
            if "inside" in want and want["inside"] not in (o.get("opStack") or []):
                problems.append(f"{where}: not inside {want['inside']} (stack {o.get('opStack')})")
            got = sorted({x.get("step") for x in inside})
            if "steps" in want and got != want["steps"]:
                problems.append(f"{where}: steps {got}, expected {want['steps']}")
        seconds = time.monotonic() - start
        if problems:
            failed += 1
            print(f"FAIL {name}: " + "; ".join(problems))
        else:
            o = [x for x in origins if x.get("op") == case["expect"][0]["op"]
                 and (x.get("module") or None) == case["expect"][0]["module"]][0]
            print(f"PASS {name}: output unchanged, {len(origins)} launches attributed; e.g. {o.get('op')} in "
                  f"{o.get('module')}, {os.path.basename(str(o.get('file')))}:{o.get('line')}, step {o.get('step')} "
                  f"({seconds:.0f} s)")
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
