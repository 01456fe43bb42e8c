#!/usr/bin/env bash
# Writes this case's two traces with nothing but the capnp, zstd and xxhsum
# command-line tools (tests/format/write_trace_with_cli.sh), from a.txt, b.txt
# and header.txt. With a second argument, checks that the result is byte for
# byte the checked-in pair in that directory.
#
#   make.sh OUT_DIR [CHECKED_IN_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
out=$1
rm -rf "$out/a.gpurr" "$out/b.gpurr"
mkdir -p "$out"
for run in a b; do
  bash "$root/tests/format/write_trace_with_cli.sh" "$root/trace_format/trace.capnp" \
    "$out/$run.gpurr" "$here/$run.txt" "$here/header.txt" > /dev/null
done
if [ $# -ge 2 ]; then
  for run in a b; do
    for f in version header events index; do
      cmp "$out/$run.gpurr/$f" "$2/$run.gpurr/$f"
    done
  done
  echo "cli_written: regenerated traces match the checked-in ones"
fi
