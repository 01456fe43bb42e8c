#!/usr/bin/env bash
# check_harness.sh BUILD_DIR FAKE_PROGRAM: the GPU suite's harness, on the CPU.
# Builds a fake build folder whose GPU probe says yes and whose test programs
# are FAKE_PROGRAM (traces written as the recorder would), then runs run.sh on
# it: every program's expectation must be met, and a recorder that makes
# every run identical (FAKE_BROKEN=1) must make the atomicAdd and
# uninitialised-memory checks fail, and run.sh with them. Also checks the
# parts of a machine lent for a fixed time: parts run in the order given,
# the logs tarred after each check (GPURR_GPU_TAR), and a deadline already
# past (GPURR_DEADLINE) runs nothing and lists every part as not reached.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: check_harness.sh BUILD_DIR FAKE_PROGRAM}" && pwd -P)
fake_program=${2:?usage: check_harness.sh BUILD_DIR FAKE_PROGRAM}
fake=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-harness-XXXXXX")
trap 'rm -rf "$fake"' EXIT
export TMPDIR=$fake  # run.sh's logs and kept traces go with it
status=0

mkdir -p "$fake/bin" "$fake/tests/gpu/programs"
ln -s "$build/bin/gpurr" "$fake/bin/gpurr"
ln -s "$build/lib" "$fake/lib"
printf '#!/bin/sh\necho "1 GPU (a stand-in)"\n' >"$fake/tests/gpu/gpu_probe"
chmod +x "$fake/tests/gpu/gpu_probe"
while read -r program _; do
  case $program in '' | '#'*) continue ;; esac
  printf '#!/bin/sh\nexec "%s" %s\n' "$fake_program" "$program" >"$fake/tests/gpu/programs/$program"
  chmod +x "$fake/tests/gpu/programs/$program"
done <"$here/expectations.txt"
programs=$(grep -c '^[a-z]' "$here/expectations.txt")

# PyTorch is left out (PYTHON names no interpreter): it needs a real GPU.
PYTHON=/nonexistent GPURR_GPU_LOGS=$fake/logs GPURR_GPU_TAR=$fake/logs.tgz \
  "$here/run.sh" "$fake" >"$fake/good.log" 2>&1
rc=$?
if [ $rc -ne 0 ] || ! grep -q "gpurr GPU suite: $((programs + 1)) passed, 0 failed" "$fake/good.log"; then
  echo "FAIL: run.sh on a faithful stand-in (exit $rc):"
  cat "$fake/good.log"
  status=1
fi
logged=$(tar tzf "$fake/logs.tgz" 2>/dev/null | grep -c '^logs/record_.*\.log$')
if [ "$logged" -ne "$programs" ]; then
  echo "FAIL: the tarred logs ($fake/logs.tgz) hold $logged program logs, not $programs:"
  tar tzf "$fake/logs.tgz"
  status=1
fi

# Parts run in the order given; a deadline already past runs nothing.
PYTHON=/nonexistent "$here/run.sh" "$fake" hash programs >"$fake/order.log" 2>&1
if [ "$(grep '^== ' "$fake/order.log" | cut -d' ' -f2 | tr '\n' ' ')" != "hash programs " ]; then
  echo "FAIL: run.sh did not run its parts in the order given (hash, programs):"
  cat "$fake/order.log"
  status=1
fi
PYTHON=/nonexistent GPURR_DEADLINE=$(date +%s) GPURR_GPU_LOGS=$fake/late GPURR_GPU_TAR=$fake/late.tgz \
  "$here/run.sh" "$fake" programs bisect >"$fake/late.log" 2>&1
rc=$?
if [ $rc -ne 0 ] || grep -q '^PASS record\|^FAIL record' "$fake/late.log" ||
   [ "$(cat "$fake/late/not_reached.txt" 2>/dev/null)" != "programs bisect" ] ||
   ! grep -q "^SKIP bisect (not reached before GPURR_DEADLINE)" "$fake/late.log" ||
   ! tar tzf "$fake/late.tgz" 2>/dev/null | grep -q '^late/not_reached.txt$'; then
  echo "FAIL: run.sh with its deadline past (exit $rc) ran a check or did not list the parts not reached:"
  cat "$fake/late.log"
  status=1
fi

FAKE_BROKEN=1 PYTHON=/nonexistent "$here/run.sh" "$fake" >"$fake/broken.log" 2>&1
rc=$?
if [ $rc -eq 0 ] || ! grep -q "gpurr GPU suite: $((programs - 1)) passed, 2 failed" "$fake/broken.log" ||
   ! grep -q "failed: record atomic_reduce" "$fake/broken.log" ||
   ! grep -q "failed: record uninit_read" "$fake/broken.log"; then
  echo "FAIL: run.sh did not report the two checks a blind recorder breaks (exit $rc):"
  cat "$fake/broken.log"
  status=1
fi
[ $status -eq 0 ] && echo "run.sh: a faithful stand-in passes all $programs programs, a blind one fails 2"
exit $status
