#!/usr/bin/env bash
# check_skip.sh RUN_PROBES BUILD_DIR: on a machine without a GPU,
# run_probes.sh prints one line saying why and exits 77. A GPU, where there
# is one, is hidden (CUDA_VISIBLE_DEVICES=""), so the check means the same on
# every machine.
set -u
out=$(CUDA_VISIBLE_DEVICES= "$1" "$2" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 77 ] || { echo "FAIL: run_probes.sh exited $rc, not 77"; exit 1; }
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { echo "FAIL: more than one line"; exit 1; }
case $out in
  "no GPU"*) ;;
  *) echo "FAIL: the line does not start with 'no GPU'"; exit 1 ;;
esac
