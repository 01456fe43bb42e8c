#!/usr/bin/env bash
# run_cpu.sh PYTHON: each framework program of this folder on the CPU
# (--device cpu), twice: it must run, print a line per step, and print the
# same both times (its output is what check_frameworks.sh compares, recorded
# or not, on a GPU). JAX's is skipped where JAX is not installed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
python=${1:?usage: run_cpu.sh PYTHON}
work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-frameworks-cpu-XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
cd "$here" || exit 2
for case in compile_step compile_graphs ddp_gloo ddp_nccl jax_step with_profiler; do
  cmd=("$python" "$case.py")
  lines=3
  if [ "$case" = ddp_gloo ]; then
    cmd=("$python" -m torch.distributed.run --standalone --nproc_per_node 2 "$case.py")
    lines=6
  elif [ "$case" = ddp_nccl ]; then
    cmd=("$python" -m torch.distributed.run --standalone --nproc_per_node 1 "$case.py")
  fi
  for run in 1 2; do
    "${cmd[@]}" --device cpu --steps 3 >"$work/$case.$run.raw" 2>"$work/$case.$run.err"
    rc=$?
    sort "$work/$case.$run.raw" >"$work/$case.$run.out"
    [ $rc -eq 77 ] && break
  done
  if [ $rc -eq 77 ]; then
    echo "SKIP $case: $(tail -1 "$work/$case.1.raw")"
  elif [ $rc -ne 0 ]; then
    echo "FAIL $case: exit status $rc"
    tail -20 "$work/$case.$run.err"
    status=1
  elif [ "$(grep -c 'step [0-9]' "$work/$case.1.out")" -lt $lines ]; then
    echo "FAIL $case: fewer than $lines step lines:"
    cat "$work/$case.1.out"
    status=1
  elif ! cmp -s "$work/$case.1.out" "$work/$case.2.out"; then
    echo "FAIL $case: two runs print differently:"
    diff "$work/$case.1.out" "$work/$case.2.out"
    status=1
  else
    echo "PASS $case: $(wc -l <"$work/$case.1.out") lines, the same twice"
  fi
done
exit $status
