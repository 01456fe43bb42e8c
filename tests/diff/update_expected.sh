#!/usr/bin/env bash
# Regenerates the golden diff cases: the trace pairs (make_diff_traces, and
# make_cli_case.sh with the capnp and zstd tools for the cases with a.txt), then each case's expected
# report. Review `git diff tests/diff/cases` before committing the result.
#
#   tests/diff/update_expected.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cases=$here/cases
gpurr=$build/bin/gpurr

# Trace pairs.
for dir in "$cases"/*/; do
  name=$(basename "$dir")
  [ -f "$dir/a.txt" ] && continue
  [ -f "$dir/traces" ] && continue
  rm -rf "$dir"a.gpurr "$dir"b.gpurr "$dir"a "$dir"b
done
"$build/tests/diff/make_diff_traces" "$cases"
for dir in "$cases"/*/; do
  if [ -f "$dir/a.txt" ]; then bash "$here/make_cli_case.sh" "$dir" "$dir"; fi
done

# Expected reports.
for dir in "$cases"/*/; do
  traces=$dir
  [ -f "$dir/traces" ] && traces=$dir/$(cat "$dir/traces")
  options=()
  [ -f "$dir/options" ] && mapfile -t options < "$dir/options"
  if [ -d "$traces/a.gpurr" ]; then a=a.gpurr b=b.gpurr; else a=a b=b; fi
  (
    cd "$traces"
    set +e
    "$gpurr" diff "$a" "$b" --color=auto "${options[@]}" > "$dir/expected.txt" 2> "$dir/expected.stderr"
    echo $? > "$dir/expected.exit"
    "$gpurr" diff "$a" "$b" --json "${options[@]}" > "$dir/expected.json" 2> /dev/null
    set -e
    [ -s "$dir/expected.stderr" ] || rm "$dir/expected.stderr"
  )
done
(cd "$cases/nondeterministic_kernel" && "$gpurr" diff a.gpurr b.gpurr --color=always > expected.color.txt || true)
echo "updated $(ls -d "$cases"/*/ | wc -l) cases in $cases"
