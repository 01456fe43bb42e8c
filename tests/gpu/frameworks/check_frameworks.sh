#!/usr/bin/env bash
# check_frameworks.sh BUILD_DIR [NAME...]: programs of other shapes than
# train_cnn.py under `gpurr record`, each run plainly once and recorded twice
# (README.md in this folder says what each must do, and why):
#   compile_step    torch.compile: Triton kernels through cuLaunchKernelEx
#   compile_graphs  torch.compile(mode="reduce-overhead"): CUDA graphs
#   ddp_gloo        two processes under torchrun, gloo: a trace per rank
#   ddp_gloo_planted  the same against a run planted on rank 1: the origin, rank 0 a receiver
#   ddp_nccl        one process under torchrun, NCCL: autograd's thread on NCCL's stream
#   jax_step        a JAX training step: nothing PyTorch-specific
#   with_profiler   a program that profiles itself with torch.profiler
# For each: the program's output and exit status unchanged by recording,
# launches recorded, what the case adds (below), and the two recordings
# identical by `gpurr diff`. Prints one PASS or FAIL line per check; exits 77
# (skipped) without a GPU. Each case's files (outputs, diffs, the traces, and
# info.txt: `gpurr info` of each recording) are in a folder of its name: in
# GPURR_GPU_KEEP, a folder tests/gpu/run.sh names in its logs, where they
# stay; without it, in a new folder under TMPDIR, kept only when a check
# fails. Inductor's and Triton's caches are always in a folder of their own
# under TMPDIR, removed at the end.
# GPURR_FRAMEWORKS_ARGS: more arguments for every program (the harness test
# runs them with "--device cpu" against a stand-in recorder).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: check_frameworks.sh BUILD_DIR [NAME...]}" && pwd)
shift
names=${*:-ddp_gloo ddp_gloo_planted ddp_nccl jax_step with_profiler compile_graphs compile_step}
gpurr=$build/bin/gpurr
python=${PYTHON:-python3}
read -r -a extra <<<"${GPURR_FRAMEWORKS_ARGS:-}"
"$build/tests/gpu/gpu_probe" >/dev/null || { echo "no GPU: skipped"; exit 77; }
"$python" -c "" 2>/dev/null || { echo "no $python: skipped"; exit 77; }

if [ -n "${GPURR_GPU_KEEP:-}" ]; then
  work=$GPURR_GPU_KEEP
  mkdir -p "$work" || exit 1
  keep=1
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-gpu-frameworks-XXXXXX")
  keep=0
fi
caches=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-gpu-frameworks-caches-XXXXXX")
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  rm -rf "$caches"
  if [ "$keep" -eq 0 ]; then rm -rf "$work"; return; fi
  local d t
  for d in "$work"/*/; do
    for t in "$d"*.gpurr; do
      [ -e "$t" ] || continue
      echo "== $(basename "$t")"
      timeout 10 "$gpurr" info "$t" 2>&1
    done >"${d}info.txt"
  done
  echo "  (files kept in $work)"
}
trap cleanup EXIT
status=0
name=
pass() { echo "PASS $name: $*"; }
fail() { echo "FAIL $name: $*"; status=1; keep=1; }
indent() { sed 's/^/    /'; }

# Launches of a trace, or of every trace of a directory of them (a trace
# is a directory too: one of traces holds *.gpurr).
launches() {
  local total=0 t n traces
  traces=("$1"/*.gpurr)
  [ -e "${traces[0]}" ] || traces=("$1")
  for t in "${traces[@]}"; do
    n=$("$gpurr" info --json "$t" | "$python" -c "import json, sys; print(json.load(sys.stdin)['launches'])") || return 1
    total=$((total + n))
  done
  echo $total
}

# Prints (not checked) the collectives of a trace or directory of them, by
# source and call, and how many carry a digest of what they sent: what the
# next GPU run is to show (docs/GPU_FACTS.md).
collectives() {
  local t traces
  traces=("$1"/*.gpurr)
  [ -e "${traces[0]}" ] || traces=("$1")
  for t in "${traces[@]}"; do
    "$gpurr" dump --json "$t" | "$python" -c "import collections, json, sys
calls, digested = collections.Counter(), 0
for line in sys.stdin:
    e = json.loads(line)
    if e['kind'] != 'collective':
        continue
    c = e['collective']
    calls[c['source'] + ' ' + c['call']] += 1
    digested += any(i['digest'] != '0' * 16 for i in c['inputs'])
print('  %s: collectives %s, %d with a digest of what they sent'
      % (sys.argv[1], dict(calls) or 'none', digested))" \
      "$(basename "$t")"
  done
}

# run_case NAME HOW [VAR=VALUE...] -- COMMAND...: the plain run, two
# recordings, their outputs, launches and diff. HOW: "sorted" compares the
# outputs' lines sorted (processes interleave them); "-" as they are.
# Returns 77 when the plain run skips.
# Each run (the plain one and both recordings) starts from empty Inductor
# and Triton caches: with a cache an earlier run wrote, a later one skips
# compile-time work (autotuning, its benchmarking launches) and the
# recordings would differ by it. The same folder ($caches/NAME), emptied
# before each run: the cache paths are in the recorded environment, and
# folders of different names would make `gpurr diff` name the environment as
# a cause. (Not in $w: compiled kernels are not worth carrying back.)
run_case() {
  name=$1
  local how=$2
  shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local w=$work/$name
  mkdir -p "$w"
  local order=cat
  [ "$how" = sorted ] && order="sort"
  local cache=$caches/$name
  local cache_env=(TORCHINDUCTOR_CACHE_DIR="$cache/inductor" TRITON_CACHE_DIR="$cache/triton")
  rm -rf "$cache" && mkdir "$cache"
  (cd "$here" && env "${cache_env[@]}" "${envs[@]}" "$@") >"$w/plain.raw" 2>"$w/plain.err"
  local rc=$?
  if [ $rc -eq 77 ]; then
    echo "  $name: skipped ($(tail -1 "$w/plain.raw"))"
    return 77
  fi
  $order "$w/plain.raw" >"$w/plain.out"
  if [ $rc -ne 0 ]; then
    fail "fails without recording (exit status $rc)"
    tail -20 "$w/plain.err" | indent
    return 1
  fi
  local run rrc
  for run in a b; do
    rm -rf "$cache" && mkdir "$cache"
    (cd "$here" && env "${cache_env[@]}" "${envs[@]}" "$gpurr" record --force -o "$w/$run.gpurr" -- "$@") \
      >"$w/$run.raw" 2>"$w/$run.err"
    rrc=$?
    $order "$w/$run.raw" >"$w/$run.out"
    grep -h "^gpurr: " "$w/$run.err" | sed "s/^/  $name $run: /"
    if [ $rrc -ne $rc ]; then
      fail "recorded run $run exits $rrc, the plain run $rc"
      tail -20 "$w/$run.err" | indent
      return 1
    fi
  done
  if cmp -s "$w/plain.out" "$w/a.out" && cmp -s "$w/plain.out" "$w/b.out"; then
    pass "output unchanged by recording ($(wc -l <"$w/plain.out") lines, last: $(tail -1 "$w/plain.out"))"
  else
    fail "recording changed the output"
    diff "$w/plain.out" "$w/a.out" | indent
  fi
  local n
  if n=$(launches "$w/a.gpurr") && [ "$n" -gt 0 ]; then
    pass "$n launches recorded"
  else
    fail "no launches recorded (gpurr info: ${n:-failed})"
  fi
  "$gpurr" diff "$w/a.gpurr" "$w/b.gpurr" >"$w/diff.txt" 2>&1
  case $? in
    0) pass "two recordings identical (gpurr diff)" ;;
    1) fail "two recordings differ:"; head -30 "$w/diff.txt" | indent ;;
    *) fail "gpurr diff failed:"; tail -10 "$w/diff.txt" | indent ;;
  esac
  return 0
}

for case_name in $names; do
  case $case_name in
    compile_step)
      run_case compile_step - -- "$python" compile_step.py "${extra[@]}" || continue
      n=$("$gpurr" dump "$work/$name/a.gpurr" | grep -c " launch triton_")
      if [ "$n" -gt 0 ]; then pass "$n launches of Triton kernels"; else fail "no launch of a triton_* kernel"; fi
      # Which code each Triton kernel ran (ModuleLoad.digest): the same image
      # in both recordings where they kept the same configuration. Told, not
      # judged: two cold runs may keep other configurations.
      images=$(for t in a b; do "$gpurr" dump --json "$work/$name/$t.gpurr"; echo; done | "$python" -c "
import json, sys
runs, digests, run = [{}], {}, 0
for line in sys.stdin:
    if not line.strip():
        runs.append({}); digests = {}; continue
    e = json.loads(line)
    if e['kind'] == 'module':
        digests[e['module']['ordinal']] = e['module'].get('digest')
    elif e['kind'] == 'launch' and e['launch']['function'].startswith('triton_') and \\
            not (e.get('origin') or {}).get('benchmarking'):
        runs[-1].setdefault(e['launch']['function'], set()).add(digests.get(e['launch']['module']))
a, b = runs[0], runs[1]
same = [k for k in a if a[k] == b.get(k) and None not in a[k]]
print(f'{len(same)} of {len(a)} Triton kernels launched from images of the same digests in both recordings',
      'others: ' + ', '.join(sorted(set(a) - set(same)))[:300] if len(same) < len(a) else '')")
      pass "$images"
      ;;
    compile_graphs)
      run_case compile_graphs - -- "$python" compile_graphs.py "${extra[@]}" || continue
      n=$("$gpurr" info --json "$work/$name/a.gpurr" |
        "$python" -c "import json, sys; print(json.load(sys.stdin)['eventsByKind'].get('graph', 0))")
      if [ "$n" -gt 0 ]; then pass "$n graph launches recorded"; else fail "no graph launch recorded"; fi
      # Each graph's nodes read at its instantiation: it hashes what they
      # point into, not every allocation (nodeCount 0).
      whole=$("$gpurr" dump --json "$work/$name/a.gpurr" | "$python" -c "import json, sys
print(sum(1 for l in sys.stdin for e in [json.loads(l)]
          if e['kind'] == 'graph' and not e['graph']['captured'] and e['graph']['nodeCount'] == 0))")
      if [ "${whole:-x}" = 0 ]; then pass "every graph launch read node by node"
      else fail "${whole:-?} graph launches hashed every allocation (their nodes were not read; see the recorder's warning)"; fi
      ;;
    ddp_gloo)
      run_case ddp_gloo sorted -- "$python" -m torch.distributed.run --standalone --nproc_per_node 2 ddp_gloo.py "${extra[@]}" || continue
      if [ -d "$work/$name/a.gpurr/rank0.gpurr" ] && [ -d "$work/$name/a.gpurr/rank1.gpurr" ]; then
        pass "a trace per rank: $(ls "$work/$name/a.gpurr" | tr '\n' ' ')"
      else
        fail "expected rank0.gpurr and rank1.gpurr in $work/$name/a.gpurr: $(ls "$work/$name/a.gpurr" 2>&1 | tr '\n' ' ')"
      fi
      collectives "$work/$name/a.gpurr"
      ;;
    ddp_gloo_planted)
      # Two recordings, one with rank 1 summing a gradient in another order
      # in step 1 (DDP_PLANT=1): the job's diff must name rank 1 the origin
      # and rank 0 a receiver through step 1's all-reduce. That takes what
      # each rank sent: DDP's all-reduces of CUDA tensors, hashed on the
      # device (RECORDING.md, c10d).
      name=ddp_gloo_planted
      w=$work/$name
      mkdir -p "$w"
      for run in a planted; do
        plant=DDP_PLANT=0
        [ $run = planted ] && plant=DDP_PLANT=1
        (cd "$here" && env "$plant" "$gpurr" record --force -o "$w/$run.gpurr" -- "$python" -m torch.distributed.run \
          --standalone --nproc_per_node 2 ddp_gloo.py "${extra[@]}") >"$w/$run.out" 2>"$w/$run.err"
        rc=$?
        if [ $rc -eq 77 ]; then echo "  $name: skipped"; continue 2; fi
        if [ $rc -ne 0 ]; then fail "recording $run exits $rc"; tail -20 "$w/$run.err" | indent; continue 2; fi
      done
      "$gpurr" diff --json "$w/a.gpurr" "$w/planted.gpurr" >"$w/diff.json" 2>"$w/diff.err"
      rc=$?
      # The same diff as a user reads it, for the logs.
      timeout 60 "$gpurr" diff "$w/a.gpurr" "$w/planted.gpurr" >"$w/diff.txt" 2>&1
      while read -r verdict what; do
        if [ "$verdict" = ok ]; then pass "$what"; else fail "$what"; fi
      done < <("$python" - "$w/diff.json" $rc "$gpurr" "$w/a.gpurr" <<'CHECK'
import json, subprocess, sys
path, rc, gpurr, trace = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def say(ok, what):
    print("ok" if ok else "no", what)
say(rc == 1, f"the planted run differs (gpurr diff exit {rc})")
try:
    job = json.load(open(path)).get("job") or {}
except ValueError:
    job = {}
roles = {r["rank"]: r["role"] for r in job.get("ranks", [])}
say(roles == {0: "receiver", 1: "origin"}, f"rank 1 the origin, rank 0 a receiver: {roles}")
spread = job.get("spread") or []
say(len(spread) == 1 and spread[0]["from"] == [1] and spread[0]["to"] == [0] and spread[0]["step"] == 1,
    "step 1's all-reduce carried it from rank 1 to rank 0: "
    + "; ".join(f"{s['from']} to {s['to']} at step {s['step']}" for s in spread))
for rank in (0, 1):
    out = subprocess.run([gpurr, "dump", "--json", f"{trace}/rank{rank}.gpurr"], capture_output=True, text=True).stdout
    reduces = [e["collective"] for e in map(json.loads, out.splitlines())
               if e["kind"] == "collective" and e["collective"]["call"] == "c10d::allreduce_"]
    sent = sum(1 for c in reduces if c["inputs"] and all(i["digest"] != "0" * 16 for i in c["inputs"]))
    say(reduces and sent == len(reduces),
        f"rank {rank}: {sent} of {len(reduces)} DDP all-reduces with a digest of what they sent")
CHECK
)
      ;;
    ddp_nccl)
      run_case ddp_nccl - -- "$python" -m torch.distributed.run --standalone --nproc_per_node 1 ddp_nccl.py "${extra[@]}" || continue
      # torchrun's agent makes no CUDA call: the one worker's trace is the
      # whole recording, written as a.gpurr itself, with its rank.
      trace=$work/$name/a.gpurr
      rank=$("$gpurr" info --json "$trace" 2>/dev/null | "$python" -c "import json, sys; print(json.load(sys.stdin)['header']['rank'])" 2>/dev/null)
      if [ "$rank" = 0 ]; then pass "one trace, of rank 0"
      else fail "expected one trace of rank 0 at $trace, found rank '${rank:-?}': $(ls "$trace" 2>&1 | tr '\n' ' ')"; continue; fi
      collectives "$trace"
      # What the diff's canonical order meets here (not checked): how many
      # host threads launch on how many streams, and on how many of them
      # each thread does.
      "$gpurr" dump --json "$trace" | "$python" -c "import json, sys
pairs = {(e['thread'], e['launch']['stream']) for l in sys.stdin for e in [json.loads(l)] if e['kind'] == 'launch'}
print('  ddp_nccl: launches from %d host threads on %d streams: %s' % (len({t for t, _ in pairs}),
      len({s for _, s in pairs}), ', '.join('thread %d on %#x' % p for p in sorted(pairs))))"
      ;;
    jax_step)
      # XLA's platform allocator: a buffer is an allocation of its own, as
      # the recorder's ranges want (with the default pool, a launch's range
      # is the rest of the pool).
      run_case jax_step - XLA_FLAGS=--xla_gpu_deterministic_ops=true XLA_PYTHON_CLIENT_ALLOCATOR=platform \
        -- "$python" jax_step.py "${extra[@]}" || continue
      ;;
    with_profiler)
      run_case with_profiler - -- "$python" with_profiler.py "${extra[@]}" || continue
      # What the profiler saw, recorded or not: recorded, no GPU events.
      for run in plain a; do
        echo "  with_profiler $run: $(grep -h '^profiler: ' "$work/$name/$run.err")"
      done
      # gpurr holds CUPTI from CUDA's start, so a profiler that asks for CUDA
      # activity gets no GPU events: gpurr's PyTorch layer says so, once.
      want=0
      grep -q "^profiler: CPU and CUDA activity" "$work/$name/a.err" && want=1
      n=$(grep -c "^gpurr: warning: .*torch\.profiler.*CUPTI" "$work/$name/a.err")
      others=$(grep "^gpurr: .*\(warning\|cannot\|CUPTI\)" "$work/$name/a.err" | grep -vc "torch\.profiler")
      if [ "$n" -eq $want ] && [ "$others" -eq 0 ]; then
        pass "$n warning(s) from gpurr that the profiler gets no GPU events ($want expected), none else"
      else
        fail "$n warnings from gpurr that the profiler gets no GPU events ($want expected), $others others:"
        grep "^gpurr: " "$work/$name/a.err" | indent
      fi
      ;;
    *)
      echo "check_frameworks.sh: unknown case '$case_name'" >&2
      exit 2
      ;;
  esac
done
exit $status
