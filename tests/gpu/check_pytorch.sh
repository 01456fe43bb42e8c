#!/usr/bin/env bash
# check_pytorch.sh BUILD_DIR: an unmodified PyTorch training script
# (train_cnn.py) under `gpurr record`:
#   - its output (the final loss, to the last bit) is the same recorded or not;
#   - two recordings match at every launch (the training is deterministic);
#   - the recorded launch count equals torch.profiler's kernel count
#     (count_launches.py, run separately: the two cannot share CUPTI);
#   - a run ended by Ctrl-C after step 3 exits 130 and keeps every launch up
#     to there: its trace, left open, agrees with a complete one as far as
#     it goes (`gpurr diff`: not known past its end, exit 2);
#   - a run ended by SIGTERM or a crash after step 3 exits as it would
#     unrecorded (143, 139) and keeps as many launches as the Ctrl-C run.
# Prints one PASS or FAIL line per check; exits 77 (skipped) without a GPU or
# PyTorch. Its files (each run's output, the comparisons and diffs, and
# info.txt: `gpurr info` of every trace) go to GPURR_GPU_KEEP, a folder that
# tests/gpu/run.sh names in its logs, and stay there with the traces; without
# it, to a new folder under TMPDIR that is kept only when a check fails.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: check_pytorch.sh BUILD_DIR}" && pwd)
gpurr=$build/bin/gpurr
python=${PYTHON:-python3}

"$build/tests/gpu/gpu_probe" >/dev/null || exit 77
"$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 77)" 2>/dev/null
case $? in
  0) ;;
  77) echo "PyTorch sees no GPU: skipped"; exit 77 ;;
  *) echo "no PyTorch for $python: skipped"; exit 77 ;;
esac

if [ -n "${GPURR_GPU_KEEP:-}" ]; then
  work=$GPURR_GPU_KEEP
  mkdir -p "$work" || exit 1
  keep=1
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-gpu-pytorch-XXXXXX")
  keep=0
fi
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  if [ "$keep" -eq 0 ]; then rm -rf "$work"; return; fi
  for t in "$work"/*.gpurr; do
    [ -e "$t" ] || continue
    echo "== $(basename "$t")"
    timeout 10 "$gpurr" info "$t" 2>&1
  done >"$work/info.txt"
  echo "  (files kept in $work)"
}
trap cleanup EXIT
status=0
fail() { echo "FAIL pytorch: $*"; status=1; keep=1; }

if ! "$python" "$here/train_cnn.py" >"$work/plain.out" 2>"$work/plain.err"; then
  fail "train_cnn.py fails without recording:"
  tail -20 "$work/plain.err" | sed 's/^/  /'
  exit 1
fi
sed 's/^/  plain: /' "$work/plain.out"
for run in a b; do
  if ! "$gpurr" record --force -o "$work/$run.gpurr" -- "$python" "$here/train_cnn.py" \
      >"$work/$run.out" 2>"$work/$run.err"; then
    fail "recorded run $run failed:"
    tail -20 "$work/$run.err" | sed 's/^/  /'
    exit 1
  fi
  grep -h "^gpurr: " "$work/$run.err" | sed "s/^/  $run: /"
done

if cmp -s "$work/plain.out" "$work/a.out" && cmp -s "$work/plain.out" "$work/b.out"; then
  echo "PASS pytorch: output unchanged by recording ($(cat "$work/plain.out"))"
else
  fail "recording changed the output:"
  diff "$work/plain.out" "$work/a.out" | sed 's/^/  a: /'
  diff "$work/plain.out" "$work/b.out" | sed 's/^/  b: /'
fi

# Two kernels take structs by value whose unused parts no constructor writes,
# so they hold whatever the host stack held (docs/GPU_FACTS.md, third run):
# ReduceOp's empty functor and its OffsetCalculators' unused dimensions, and
# the address slots of TensorListMetadata past a launch's tensors. Their
# bytes may differ there, where no pointer does.
if python3 "$here/compare_traces.py" --gpurr "$gpurr" --min-launches 50 \
    --may-differ 'at::native::reduce_kernel<.*ReduceOp<=params' \
    --may-differ 'multi_tensor_apply_kernel<.*TensorListMetadata<=params' \
    "$work/a.gpurr" "$work/b.gpurr" >"$work/compare.out"; then
  echo "PASS pytorch: two recordings match at every launch ($(tail -1 "$work/compare.out"))"
else
  fail "two recordings of a deterministic training differ:"
  sed 's/^/  /' "$work/compare.out"
fi

# What a user sees: gpurr diff finds the runs identical.
if "$gpurr" diff "$work/a.gpurr" "$work/b.gpurr" >"$work/diff.out" 2>&1; then
  echo "PASS pytorch: gpurr diff finds the two recordings identical"
else
  fail "gpurr diff finds the two recordings different:"
  head -30 "$work/diff.out" | sed 's/^/  /'
fi

# Ctrl-C: Python kills itself with SIGINT after its atexit handlers; the
# recorder wrote what it held before (docs/RECORDING.md).
TRAIN_CNN_INTERRUPT=3 "$gpurr" record --force -o "$work/int.gpurr" -- "$python" "$here/train_cnn.py" \
  >"$work/int.out" 2>"$work/int.err"
code=$?
"$gpurr" diff "$work/a.gpurr" "$work/int.gpurr" >"$work/int-diff.out" 2>&1
dcode=$?
launches() { "$gpurr" info --json "$1" | "$python" -c "import json, sys; print(json.load(sys.stdin)['launches'])"; }
whole=$(launches "$work/a.gpurr") kept=$(launches "$work/int.gpurr")
if [ "$code" = 130 ] && [ "$dcode" = 2 ] && grep -q "^not known: " "$work/int-diff.out" && [ $((kept * 2)) -ge "$whole" ]; then
  echo "PASS pytorch: Ctrl-C after step 3 keeps its $kept launches of $whole, agreeing with a whole run up to there"
else
  fail "Ctrl-C after step 3: exit $code, diff exit $dcode, $kept of $whole launches kept:"
  tail -5 "$work/int.err" | sed 's/^/  /'
  head -8 "$work/int-diff.out" | sed 's/^/  /'
fi

# A signal after step 3 (SIGTERM, as Slurm or torchrun sends it; a crash),
# which Python leaves to its default action: the recorder writes what it
# held before the signal ends the program, with its own status (143, 139),
# and keeps as many launches as Ctrl-C there did (recorder/signal_flush.h).
for sig in TERM:143 SEGV:139; do
  TRAIN_CNN_SIGNAL=${sig%:*}:3 "$gpurr" record --force -o "$work/$sig.gpurr" -- "$python" "$here/train_cnn.py" \
    >"$work/$sig.out" 2>"$work/$sig.err"
  code=$?
  "$gpurr" diff "$work/a.gpurr" "$work/$sig.gpurr" >"$work/$sig-diff.out" 2>&1
  dcode=$?
  got=$(launches "$work/$sig.gpurr")
  if [ "$code" = "${sig#*:}" ] && [ "$dcode" = 2 ] && grep -q "^not known: " "$work/$sig-diff.out" &&
     [ "$got" = "$kept" ]; then
    echo "PASS pytorch: SIG${sig%:*} after step 3 exits ${sig#*:} and keeps its $got launches, as Ctrl-C there"
  else
    fail "SIG${sig%:*} after step 3: exit $code (not ${sig#*:}), diff exit $dcode, $got launches kept (Ctrl-C: $kept):"
    tail -5 "$work/$sig.err" | sed 's/^/  /'
    head -8 "$work/$sig-diff.out" | sed 's/^/  /'
  fi
done

recorded=$("$gpurr" info --json "$work/a.gpurr" | "$python" -c "import json, sys; print(json.load(sys.stdin)['launches'])")
if profiled=$("$python" "$here/count_launches.py" 2>"$work/profile.err"); then
  if [ "$recorded" = "$profiled" ]; then
    echo "PASS pytorch: recorded launch count equals the profiler's ($recorded)"
  else
    fail "gpurr recorded $recorded launches, torch.profiler counted $profiled kernels"
  fi
else
  fail "count_launches.py failed:"
  tail -20 "$work/profile.err" | sed 's/^/  /'
fi
exit $status
