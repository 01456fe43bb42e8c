#!/usr/bin/env bash
# bench/step_breakdown.sh BUILD_DIR [WORKLOAD...]: where the recorder's cost
# per training step goes. For each workload of bench/step_time.py (default:
# mlp cnn), one plain run, then runs under `gpurr record --verbose` that each
# leave a part of the recorder out, side by side:
#   full          the default: hash mode with the PyTorch layer
#   no-framework  --no-framework: without the PyTorch layer (op, module, step)
#   no-hash       --kernels ^no-such-kernel$: launches listed, nothing hashed
#   bare          --no-framework --kernels ^no-such-kernel$: the CUPTI callbacks and the
#                 trace alone
#   cupti         no recorder: the plain command with an injection library
#                 that subscribes to CUPTI's callbacks as the recorder does
#                 and does nothing in them (bench/empty_subscriber.cpp):
#                 what CUPTI's dispatch alone costs
# Prints each run's median step time, its ratio over plain, and the
# recorder's own account of its cost (time its threads spent in it per
# launch, GPU operations it enqueued per launch, and under it how that time
# divides among the parts of its launch callbacks). States no goal
# (bench/step_time.sh holds the goal); exits 77 without a GPU, 1 when a run
# failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
usage="bench/step_breakdown.sh BUILD_DIR [WORKLOAD...]" name=step-breakdown
. "$here/step_common.sh"
shift
workloads=("$@")
[ $# -eq 0 ] && workloads=(mlp cnn)
# row WORKLOAD VARIANT OUTPUT [NOTE]: the run's median step time and its ratio
# over the plain run's ($plain).
row() {
  local ms
  ms=$(field median_ms <<<"$3")
  printf '%-5s %-13s %9.3f ms %6.2fx  %s\n' "$1" "$2" "$ms" "$(awk -v a="$ms" -v b="$plain" 'BEGIN {print a / b}')" "${4:-}"
}

declare -A flags=([full]="" [no-framework]="--no-framework" [no-hash]="--kernels ^no-such-kernel$"
                  [bare]="--no-framework --kernels ^no-such-kernel$")
empty=$build/bench/libgpurr_empty_subscriber.so
status=0
for w in "${workloads[@]}"; do
  run=("$python" "$here/step_time.py" "$w" --steps $steps --warmup $warmup)
  if ! out=$("${run[@]}" 2>"$work/err"); then
    echo "$w: the plain run failed:"; tail -5 "$work/err"; status=1; continue
  fi
  plain=$(field median_ms <<<"$out")
  printf '%-5s %-13s %9.3f ms\n' "$w" plain "$plain"
  if [ -e "$empty" ]; then
    if out=$(CUDA_INJECTION64_PATH=$empty "${run[@]}" 2>"$work/err"); then
      row "$w" cupti "$out"
    else
      echo "$w cupti: the run failed:"; tail -5 "$work/err"; status=1
    fi
  fi
  for v in full no-framework no-hash bare; do
    # shellcheck disable=SC2086  # the flags are words
    if ! out=$("$gpurr" record --force --verbose ${flags[$v]} -o "$work/$w.gpurr" -- "${run[@]}" 2>"$work/err"); then
      echo "$w $v: the recorded run failed:"; tail -5 "$work/err"; status=1; continue
    fi
    row "$w" "$v" "$out" "$(grep -o 'recorder .*' "$work/err" | tail -1)"
    parts=$(grep -o 'launch callbacks by part.*' "$work/err" | tail -1)
    [ -z "$parts" ] || printf '%-19s %s
' "" "$parts"
  done
done
echo "(one run each, $steps steps after $warmup of warm-up; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
exit $status
