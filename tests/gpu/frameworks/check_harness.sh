#!/usr/bin/env bash
# check_harness.sh BUILD_DIR FAKE_PROGRAM PYTHON: check_frameworks.sh on the
# CPU. A fake build folder whose GPU probe says yes, and whose gpurr runs
# `record`'s command as it is and then writes the trace a recorder would
# (FAKE_PROGRAM framework: Triton's kernels and a graph launch; a trace per
# rank under torchrun); the programs run with --device cpu. The cases that
# finish in seconds on a CPU (torchrun, the profiler, JAX) must pass; a
# recorder that changes the program's output (FAKE_CHATTY=1) must make them
# fail. The compiled cases take a minute of compiling on a CPU: the smoke
# test (run_cpu.sh) runs those scripts. (The torchrun cases run on gloo.)
# Then ddp_gloo_planted, whose checks read real traces: the real gpurr with
# the recorder that needs no GPU (tests/framework's stand-in) must pass it.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: check_harness.sh BUILD_DIR FAKE_PROGRAM PYTHON}" && pwd -P)
fake_program=${2:?usage: check_harness.sh BUILD_DIR FAKE_PROGRAM PYTHON}
python=${3:?usage: check_harness.sh BUILD_DIR FAKE_PROGRAM PYTHON}
fake=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-frameworks-harness-XXXXXX")
trap 'rm -rf "$fake"' EXIT
export TMPDIR=$fake
status=0

mkdir -p "$fake/bin" "$fake/tests/gpu"
printf '#!/bin/sh\necho "1 GPU (a stand-in)"\n' >"$fake/tests/gpu/gpu_probe"
cat >"$fake/bin/gpurr" <<STANDIN
#!/usr/bin/env bash
# gpurr, with record's recorder replaced: the command runs as it is, then the
# trace is written as the recorder would write it.
if [ "\$1" != record ]; then exec "$build/bin/gpurr" "\$@"; fi
[ "\$2 \$3 \$5" = "--force -o --" ] || { echo "stand-in: unexpected record arguments: \$*" >&2; exit 2; }
out=\$4
shift 5
if [ -n "\${FAKE_CHATTY:-}" ]; then "\$@" | sed '\$a one more line'; rc=\${PIPESTATUS[0]}; else "\$@"; rc=\$?; fi
rm -rf "\$out" "\$out.tmp"
mkdir -p "\$out.tmp"
# Under torchrun the worker has RANK set: its trace is rank0.gpurr, written
# as the output itself when it is the only process that used CUDA.
rank=
case " \$* " in *" torch.distributed.run "*) rank=0 ;; esac
RANK=\$rank GPURR_OUTPUT=\$out.tmp FAKE_BROKEN=1 "$fake_program" framework >/dev/null
case " \$* " in
  *" --nproc_per_node 1 "*) mv "\$out.tmp/rank0.gpurr" "\$out" ;;
  *" torch.distributed.run "*)
    mkdir "\$out" && cp -r "\$out.tmp/rank0.gpurr" "\$out/rank0.gpurr" && mv "\$out.tmp/rank0.gpurr" "\$out/rank1.gpurr" ;;
  *) mv "\$out.tmp/proc0.gpurr" "\$out" ;;
esac
rm -rf "\$out.tmp"
echo "gpurr: trace written to \$out" >&2
exit \$rc
STANDIN
chmod +x "$fake/bin/gpurr" "$fake/tests/gpu/gpu_probe"

cases="ddp_gloo ddp_nccl with_profiler jax_step"
export PYTHON=$python GPURR_FRAMEWORKS_ARGS="--device cpu --steps 2"
"$here/check_frameworks.sh" "$fake" $cases >"$fake/good.log" 2>&1
rc=$?
# ddp_gloo: output, launches, diff, a trace per rank; ddp_nccl: output,
# launches, diff, its rank's trace; with_profiler: output, launches, diff,
# warnings; jax_step: skipped without JAX, else output, launches, diff.
want=12
grep -q "jax_step: skipped" "$fake/good.log" || want=15
if [ $rc -ne 0 ] || [ "$(grep -c '^PASS ' "$fake/good.log")" -ne $want ] || grep -q '^FAIL ' "$fake/good.log"; then
  echo "FAIL: check_frameworks.sh on a faithful stand-in (exit $rc, $want checks expected to pass):"
  cat "$fake/good.log"
  status=1
fi
# The collectives it prints for the GPU run to show (the stand-in writes none).
if ! grep -q "^  rank1.gpurr: collectives none, 0 with a digest" "$fake/good.log"; then
  echo "FAIL: check_frameworks.sh did not print ddp_gloo's collectives:"
  cat "$fake/good.log"
  status=1
fi

FAKE_CHATTY=1 "$here/check_frameworks.sh" "$fake" $cases >"$fake/chatty.log" 2>&1
rc=$?
if [ $rc -eq 0 ] || ! grep -q "^FAIL ddp_gloo: recording changed the output" "$fake/chatty.log" ||
   ! grep -q "^FAIL with_profiler: recording changed the output" "$fake/chatty.log"; then
  echo "FAIL: check_frameworks.sh did not catch a recorder that changes the output (exit $rc):"
  cat "$fake/chatty.log"
  status=1
fi

mkdir -p "$fake/real/bin" "$fake/real/tests/gpu"
cp "$fake/tests/gpu/gpu_probe" "$fake/real/tests/gpu/"
printf '#!/bin/sh\nGPURR_RECORDER_LIB=%s exec %s "$@"\n' "$build/tests/framework/libgpurr_fake_recorder.so" \
  "$build/bin/gpurr" >"$fake/real/bin/gpurr"
chmod +x "$fake/real/bin/gpurr"
# Three steps: without launches the CPU's rank 0 first differs at step 2's
# all-reduce.
GPURR_FRAMEWORKS_ARGS="--device cpu --steps 3" "$here/check_frameworks.sh" "$fake/real" ddp_gloo_planted \
  >"$fake/planted.log" 2>&1
rc=$?
if [ $rc -ne 0 ] || [ "$(grep -c '^PASS ' "$fake/planted.log")" -ne 5 ] || grep -q '^FAIL ' "$fake/planted.log"; then
  echo "FAIL: check_frameworks.sh ddp_gloo_planted with the recorder on the CPU (exit $rc, 5 checks expected to pass):"
  cat "$fake/planted.log"
  status=1
fi
[ $status -eq 0 ] && echo "check_frameworks.sh: a faithful stand-in passes $want checks, one that changes the output" \
  "fails; ddp_gloo_planted passes on the CPU"
exit $status
