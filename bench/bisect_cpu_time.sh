#!/usr/bin/env bash
# bench/bisect_cpu_time.sh [--until-step N] BUILD_DIR [ROUNDS]: bisect's time to an answer
# without a GPU, the CPU proxy of bench/bisect_time.sh. The program is
# tests/framework/diverges_later.py (200 steps of about 50 ms of real
# PyTorch on the CPU; runs after the first take another path in step 1),
# recorded through the fake-device recorder of the framework tests, which
# holds a run started early at its first launch as the recorder holds it
# in its first CUDA call. Each round runs, one after another: the program
# plainly, `gpurr bisect`, and `gpurr bisect --no-overlap`, and prints each
# run's seconds (after the run before it ended), where it was stopped and
# during which run it was started. With --until-step N, as
# bench/bisect_time.sh: the plain run is the program told to run N + 1
# steps, the bisects `gpurr bisect --until-step N` of the program told to
# run ten times as many. The goal: bisect within 1.5x the plain run.
# PYTHON names an interpreter with PyTorch (default python3); exits 77
# (skipped) without PyTorch, 2 on a usage error.
set -u
source "$(dirname "$0")/bisect_args.sh"
parse_until_step "bench/bisect_cpu_time.sh [--until-step N] BUILD_DIR [ROUNDS]" "$@"
set -- "${rest[@]}"
plain_steps=200 bisect_steps=200 until=()
if [ -n "$until_step" ]; then
  plain_steps=$((until_step + 1)) bisect_steps=$((10 * (until_step + 1))) until=(--until-step "$until_step")
fi
build=$(cd "$1" && pwd)
rounds=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
script=$here/../tests/framework/diverges_later.py
python=${PYTHON:-python3}
"$python" -c "import torch" 2>/dev/null || { echo "no PyTorch for $python: skipped"; exit 77; }
for f in bin/gpurr tests/framework/libgpurr_fake_recorder.so tests/framework/libgpurr_test_launch_on_ops.so; do
  [ -e "$build/$f" ] || { echo "error: $build/$f is not built" >&2; exit 2; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-bisect-cpu-XXXXXX")
trap 'rm -rf "$work"' EXIT
export GPURR_RECORDER_LIB=$build/tests/framework/libgpurr_fake_recorder.so
export GPURR_TEST_LAUNCHER=$build/tests/framework/libgpurr_test_launch_on_ops.so
export GPURR_TEST_MARKER=$work/marker
for round in $(seq "$rounds"); do
  rm -f "$work/marker"
  t0=$EPOCHREALTIME
  GPURR_TEST_LAUNCHER="" GPURR_TEST_STEPS=$plain_steps "$python" "$script" >/dev/null
  plain=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  echo "round $round: plain run $plain s"
  for option in "" --no-overlap; do
    rm -rf "$work/marker" "$work/bisect"
    GPURR_TEST_STEPS=$bisect_steps "$build/bin/gpurr" bisect $option "${until[@]}" -o "$work/bisect" -- \
      "$python" "$script" >/dev/null 2>&1
    "$python" - "$work/bisect/report.json" "$plain" "${option:-(default)}" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
plain = float(sys.argv[2])
runs = "; ".join(f"run {i + 1} {r['seconds']:.1f} s"
                 + (f", stopped after step {r['stoppedAfterStep']}" if r["stoppedAfterStep"] is not None else "")
                 + (f", started during run {r['startedDuring']}" if r["startedDuring"] else "")
                 for i, r in enumerate(report["runs"]))
ratio = report["seconds"] / plain
print(f"  bisect {sys.argv[3]}: {report['seconds']:.1f} s, {ratio:.2f}x the plain run "
      f"({'met' if ratio <= 1.5 else 'MISSED'}: goal 1.5x), {report['verdict']}; {runs}")
PY
  done
done
