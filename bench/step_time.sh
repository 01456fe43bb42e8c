#!/usr/bin/env bash
# bench/step_time.sh BUILD_DIR [ROUNDS]: what recording costs a training
# step, on whatever GPU is present. For each workload of bench/step_time.py
# (cnn: tests/gpu/train_cnn.py's network; mlp: a launch-bound small MLP),
# ROUNDS (default 3) rounds of one plain run and one run under `gpurr
# record` (hash mode, the default), side by side; each run reports its
# median step time after warm-up. Prints, per workload, the medians over the
# rounds, recorded / plain (goal <= 1.10), the launches per step and the
# trace's bytes per launch (events compressed, then with blobs); then a line
# "goal missed: ..." for each workload over the goal.
# PYTHON names the interpreter. Exits 77 (skipped) without a GPU or PyTorch,
# 1 when a run failed or a goal was missed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
usage="bench/step_time.sh BUILD_DIR [ROUNDS]" name=step-time
. "$here/step_common.sh"
rounds=${2:-3}
goal=1.10

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

printf '%-5s %12s %12s %9s %14s %16s\n' workload "plain ms" "recorded ms" ratio "launches/step" "trace B/launch"
status=0
missed=()
for w in cnn mlp; do
  : >"$work/$w.plain"
  : >"$work/$w.recorded"
  for ((r = 0; r < rounds; r++)); do
    if ! out=$("$python" "$here/step_time.py" "$w" --steps $steps --warmup $warmup 2>"$work/err"); then
      echo "$w: the plain run failed:"; tail -5 "$work/err"; status=1; continue 2
    fi
    field median_ms <<<"$out" >>"$work/$w.plain"
    if ! out=$("$gpurr" record --force -o "$work/$w.gpurr" -- "$python" "$here/step_time.py" "$w" \
        --steps $steps --warmup $warmup 2>"$work/err"); then
      echo "$w: the recorded run failed:"; tail -5 "$work/err"; status=1; continue 2
    fi
    field median_ms <<<"$out" >>"$work/$w.recorded"
  done
  plain=$(median <"$work/$w.plain")
  recorded=$(median <"$work/$w.recorded")
  info=$("$gpurr" info --json "$work/$w.gpurr")
  read -r per_step per_launch per_launch_all < <("$python" -c "
import json, sys
d = json.loads(sys.stdin.read())
n = max(d['launches'], 1)
print(round(d['launches'] / ($steps + $warmup), 1), round(d['eventsCompressedBytes'] / n, 1),
      round((d['eventsCompressedBytes'] + d['blobBytes']) / n, 1))" <<<"$info")
  ratio=$(awk -v a="$recorded" -v b="$plain" 'BEGIN {print a / b}')
  printf '%-5s %12.3f %12.3f %8.2fx %14s %7s / %-7s\n' "$w" "$plain" "$recorded" \
    "$ratio" "$per_step" "$per_launch" "$per_launch_all"
  awk -v r="$ratio" -v goal="$goal" 'BEGIN {exit !(r > goal)}' && missed+=("$w recorded / plain $(printf '%.2f' "$ratio")x (goal <= $goal)")
done
echo "(medians of $rounds rounds of $steps steps after $warmup of warm-up; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
for m in "${missed[@]}"; do echo "goal missed: $m"; status=1; done
exit $status
