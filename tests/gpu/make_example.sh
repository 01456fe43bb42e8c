#!/usr/bin/env bash
# make_example.sh BUILD_DIR OUT_DIR: the pair of traces the README's quick
# start diffs, recorded on a GPU: tests/gpu/bisect/index_add.py (index_add_
# accumulates with float atomics) recorded twice, as a user would. Checks
# that the pair is small enough to ship (<= 5 MiB together) and that
# `gpurr diff` names a nondeterministic kernel, then writes OUT_DIR/a.gpurr,
# OUT_DIR/b.gpurr and OUT_DIR/diff.txt (the report, for the README). Copy
# OUT_DIR into examples/gpu/ and commit it. Exits 77 without a GPU, or
# without PyTorch seeing one (PYTHON names the interpreter).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: make_example.sh BUILD_DIR OUT_DIR}" && pwd)
out=${2:?usage: make_example.sh BUILD_DIR OUT_DIR}
gpurr=$build/bin/gpurr
python=${PYTHON:-python3}
"$build/tests/gpu/gpu_probe" >/dev/null || { echo "no GPU: skipped"; exit 77; }
"$python" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null ||
  { echo "no GPU for PyTorch ($python): skipped"; exit 77; }
mkdir -p "$out"
for run in a b; do
  if ! (cd "$here/bisect" && "$gpurr" record --force -o "$out/$run.gpurr" -- "$python" index_add.py) \
      >"$out/$run.log" 2>&1; then
    echo "FAIL example: recording $run failed:"
    tail -20 "$out/$run.log"
    exit 1
  fi
done
bytes=$(du -sb "$out/a.gpurr" "$out/b.gpurr" | awk '{n += $1} END {print n}')
(cd "$out" && "$gpurr" diff a.gpurr b.gpurr) >"$out/diff.txt" 2>&1
rc=$?
cause=$(cd "$out" && "$gpurr" diff --json a.gpurr b.gpurr 2>/dev/null |
  "$python" -c "import json, sys; d = json.load(sys.stdin); print(d['processes'][0]['firstDivergence']['cause'])" 2>/dev/null)
status=0
if [ "$bytes" -le $((5 << 20)) ]; then
  echo "PASS example: $bytes bytes for the pair (at most 5 MiB)"
else
  echo "FAIL example: $bytes bytes for the pair (more than 5 MiB)"
  status=1
fi
if [ $rc -eq 1 ] && [ "$cause" = nondeterministicKernel ]; then
  echo "PASS example: gpurr diff names a nondeterministic kernel"
else
  echo "FAIL example: gpurr diff exits $rc, cause '${cause:-none}' (expected 1, nondeterministicKernel)"
  status=1
fi
rm -f "$out/a.log" "$out/b.log"
sed 's/^/    /' "$out/diff.txt" | head -40
exit $status
