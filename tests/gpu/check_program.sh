#!/usr/bin/env bash
# check_program.sh BUILD_DIR PROGRAM [--same-output] [compare_traces.py options...]
#
# Records PROGRAM twice with BUILD_DIR/bin/gpurr and compares the two traces
# launch by launch (compare_traces.py). With --same-output, the program's
# stdout must also be the same recorded as not: recording must not change
# what the program computes. Exits 77 (skipped) where there is no GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: check_program.sh BUILD_DIR PROGRAM [options]}" && pwd)
program=${2:?usage: check_program.sh BUILD_DIR PROGRAM [options]}
shift 2
same_output=0
if [ "${1:-}" = "--same-output" ]; then same_output=1; shift; fi
gpurr=$build/bin/gpurr
name=$(basename "$program")

"$build/tests/gpu/gpu_probe" >/dev/null || exit 77
[ -x "$program" ] || { echo "FAIL record $name ($program is not built)"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-gpu-$name-XXXXXX")
keep=0
cleanup() { [ $keep -eq 1 ] && echo "  (traces kept in $work)" || rm -rf "$work"; }
trap cleanup EXIT

for run in a b; do
  if ! "$gpurr" record --force -o "$work/$run.gpurr" -- "$program" >"$work/$run.out" 2>"$work/$run.err"; then
    echo "  the recorded run $run failed:"
    sed 's/^/  /' "$work/$run.err" | tail -20
    keep=1
    echo "FAIL record $name"
    exit 1
  fi
  if [ ! -d "$work/$run.gpurr" ]; then
    echo "  run $run left no trace:"
    sed 's/^/  /' "$work/$run.err" | tail -20
    echo "FAIL record $name"
    exit 1
  fi
done
sed 's/^/  a: /' "$work/a.out"
sed 's/^/  b: /' "$work/b.out"
grep -h "^gpurr: " "$work/a.err" | sed 's/^/  a: /'
if grep -q "^gpurr: warning: " "$work/a.err" "$work/b.err"; then
  echo "  (the recorder warned; see above)"
fi

status=0
if [ $same_output -eq 1 ]; then
  "$program" >"$work/plain.out" 2>"$work/plain.err" || { echo "  the plain run failed"; status=1; }
  if ! cmp -s "$work/plain.out" "$work/a.out"; then
    echo "  recording changed the program's output:"
    diff "$work/plain.out" "$work/a.out" | sed 's/^/  /' | head -20
    status=1
  fi
fi
if ! python3 "$here/compare_traces.py" --gpurr "$gpurr" "$@" "$work/a.gpurr" "$work/b.gpurr"; then
  status=1
fi
if [ $status -ne 0 ]; then keep=1; echo "FAIL record $name"; else echo "PASS record $name"; fi
exit $status
