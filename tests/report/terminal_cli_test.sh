#!/usr/bin/env bash
# Text a trace holds never reaches the terminal as control characters: a
# pair of traces written with the capnp, zstd and xxhsum tools
# (tests/format/write_trace_with_cli.sh) whose op, module and command line
# hold escape sequences (window title, clear screen, conceal), a carriage
# return, a right-to-left override, a byte that is not UTF-8 and a line
# feed (a line of their own would pass for one of the report's). `gpurr
# info`, `dump`, `diff` (text and HTML) and the refusal of two different
# programs print them escaped; `--json` stays valid JSON of the same text.
#
#   terminal_cli_test.sh GPURR SOURCE_DIR
set -euo pipefail
g=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

case_dir=$src/tests/diff/cases/cli_written
bad='\x1b]0;PWNED\x07\x1b[2J\r\xe2\x80\xaeevil\x1b[8m\xff\nforged: a line of its own'  # Cap'n Proto text escapes
bad=${bad//\\/\\\\}  # and sed's
for run in a b; do
  sed -e "s/op = \"aten::index_add_\"/op = \"aten::index_add_$bad\"/" \
      -e "s/module = \"net.pool\"/module = \"net.pool$bad\"/" "$case_dir/$run.txt" > "$tmp/$run.txt"
  sed -e "s/\"train.py\"\]/\"train.py\", \"$run$bad\"]/" "$case_dir/header.txt" > "$tmp/$run.header.txt"
  bash "$src/tests/format/write_trace_with_cli.sh" "$src/trace_format/trace.capnp" "$tmp/$run.gpurr" \
    "$tmp/$run.txt" "$tmp/$run.header.txt" > /dev/null
done

# clean FILE WHAT [page]: no ESC, BEL, CR, U+202E or stray byte; the escapes
# shown; unless a page, no name starting a line.
clean() {
  python3 - "$1" "$2" "${3:-}" <<'PY' || fail "$2"
import sys
data = open(sys.argv[1], 'rb').read()
for bad in (b'\x1b', b'\x07', b'\r', '\u202e'.encode(), b'\xff'):
    assert bad not in data, f'{sys.argv[2]}: {bad!r} reaches the terminal'
data.decode('utf-8')
for shown in (rb'\x1b]0;PWNED\x07\x1b[2J\x0d\u202eevil\x1b[8m\xff',):
    assert shown in data, f'{sys.argv[2]}: the escaped text is not shown'
assert sys.argv[3] == 'page' or b'\nforged:' not in data, f'{sys.argv[2]}: a name starts a line of its own'
PY
}
"$g" info "$tmp/a.gpurr" > "$tmp/info.txt" 2>&1 || fail "info"
clean "$tmp/info.txt" "gpurr info"
"$g" dump "$tmp/a.gpurr" > "$tmp/dump.txt" 2>&1 || fail "dump"
clean "$tmp/dump.txt" "gpurr dump"
rc=0; "$g" diff --force --color=always "$tmp/a.gpurr" "$tmp/b.gpurr" > "$tmp/diff.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$tmp/diff.txt"; fail "diff exited $rc, expected 1"; }
# --color=always: the report's own colours are the only escapes left.
python3 -c "import sys; sys.exit(b'\x1b[1m' not in open(sys.argv[1], 'rb').read())" "$tmp/diff.txt" ||
  fail "the report's own colours are gone"
sed 's/\x1b\[[0-9;]*m//g' "$tmp/diff.txt" > "$tmp/diff.plain"
clean "$tmp/diff.plain" "gpurr diff"
rc=0; "$g" diff "$tmp/a.gpurr" "$tmp/b.gpurr" > "$tmp/refused.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$tmp/refused.txt"; fail "diff of two programs exited $rc, expected 2"; }
grep -q "record different programs" "$tmp/refused.txt" || fail "no refusal"
{ "$g" diff --json "$tmp/a.gpurr" "$tmp/b.gpurr" 2>/dev/null || true; } | python3 -c 'import json, sys
assert json.load(sys.stdin)["errorKind"] == "differentPrograms"' || fail "the refusal's errorKind"
python3 -c "import sys; d = open(sys.argv[1], 'rb').read(); assert all(x not in d for x in (b'\x1b', b'\r', b'\nforged'))" \
  "$tmp/refused.txt" || fail "the refusal lets escapes through"
"$g" diff --force --html "$tmp/page.html" "$tmp/a.gpurr" "$tmp/b.gpurr" > /dev/null 2>&1 || true
clean "$tmp/page.html" "gpurr diff --html" page
# JSON: valid, and the op is the trace's text itself.
"$g" diff --force --json "$tmp/a.gpurr" "$tmp/b.gpurr" > "$tmp/diff.json" 2>/dev/null || true
python3 - "$tmp/diff.json" <<'PY' || fail "diff --json"
import json, sys
d = json.load(open(sys.argv[1]))
op = d['processes'][0]['firstDivergence']['a']['origin']['op']
assert op == 'aten::index_add_\x1b]0;PWNED\x07\x1b[2J\r\u202eevil\x1b[8m\ufffd\nforged: a line of its own', repr(op)
PY
echo "terminal: all checks passed"
