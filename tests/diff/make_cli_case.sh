#!/usr/bin/env bash
# Writes a diff case's two traces with nothing but the capnp, zstd and xxhsum
# command-line tools (tests/format/write_trace_with_cli.sh), from the case's
# a.txt, b.txt and header.txt. With a third argument, checks that the result
# is byte for byte the checked-in pair in that directory.
#
#   make_cli_case.sh CASE_DIR OUT_DIR [CHECKED_IN_DIR]
set -euo pipefail
here=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$2
rm -rf "$out/a.gpurr" "$out/b.gpurr"
mkdir -p "$out"
for run in a b; do
  bash "$root/tests/format/write_trace_with_cli.sh" "$root/trace_format/trace.capnp" \
    "$out/$run.gpurr" "$here/$run.txt" "$here/header.txt" > /dev/null
done
if [ $# -ge 3 ]; then
  for run in a b; do
    for f in version header events index checksums; do
      cmp "$out/$run.gpurr/$f" "$3/$run.gpurr/$f"
    done
  done
  echo "$(basename "$here"): regenerated traces match the checked-in ones"
fi
