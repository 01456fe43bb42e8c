#!/usr/bin/env bash
# check_snapshot_determinism.sh BUILD_DIR CHECKER PROGRAM KERNEL RUNS deterministic|nondeterministic
#
# Records PROGRAM with --snapshot KERNEL --kernels KERNEL
# --check-determinism=RUNS and checks the trace (CHECKER). For a
# deterministic kernel the program's output must also be the same recorded
# as not: the re-runs restore the state they started from. Exits 77
# (skipped) where there is no GPU.
set -u
build=$(cd "${1:?usage: check_snapshot_determinism.sh BUILD_DIR CHECKER PROGRAM KERNEL RUNS EXPECT}" && pwd)
checker=$2 program=$3 kernel=$4 runs=$5 expect=$6
"$build/tests/gpu/gpu_probe" >/dev/null || exit 77
[ -x "$program" ] || { echo "FAIL: $program is not built"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-snapdet-XXXXXX")
trap 'rm -rf "$work"' EXIT

"$program" >"$work/plain.out" 2>"$work/plain.err" || { echo "FAIL: $program fails unrecorded"; exit 1; }
if ! "$build/bin/gpurr" record -o "$work/t.gpurr" --kernels "$kernel" --snapshot "$kernel" \
     --check-determinism="$runs" -- "$program" >"$work/rec.out" 2>"$work/rec.err"; then
  echo "FAIL: the recorded run failed:"; tail -20 "$work/rec.err"; exit 1
fi
if grep -q "warning" "$work/rec.err"; then
  echo "FAIL: the recorder warned:"; grep "warning" "$work/rec.err"; exit 1
fi
"$checker" "$work/t.gpurr" "$kernel" "$runs" "$expect" || { echo "FAIL: trace check"; exit 1; }
if [ "$expect" = deterministic ] && ! cmp -s "$work/plain.out" "$work/rec.out"; then
  echo "FAIL: the program printed something else when recorded:"
  diff "$work/plain.out" "$work/rec.out" | head -20
  exit 1
fi
tail -1 "$work/rec.err"
echo "PASS"
