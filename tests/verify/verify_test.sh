#!/usr/bin/env bash
# gpurr verify on good traces (exit 0) and on damaged copies (exit 1, one
# problem per line naming what is wrong), and on what is no trace (exit 2).
#
#   verify_test.sh GPURR SOURCE_DIR
set -euo pipefail
g=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
# expect CODE TEXT TRACE: gpurr verify TRACE exits CODE and prints TEXT
expect() {
  local code=$1 text=$2 rc=0
  "$g" verify "$3" > "$tmp/out" 2>&1 || rc=$?
  [ "$rc" = "$code" ] || { cat "$tmp/out"; fail "verify $3 exited $rc, expected $code"; }
  grep -qF -- "$text" "$tmp/out" || { cat "$tmp/out"; fail "verify $3 does not say: $text"; }
}

# Good traces: the example, every golden diff trace but the one cut short
# and the one with a corrupt block.
expect 0 ": ok: 3 blocks, 19 events" "$src/examples/synthetic.gpurr"
for t in "$src"/tests/diff/cases/*/?.gpurr "$src"/tests/diff/cases/processes/?/*.gpurr \
         "$src"/tests/format/compat/*.gpurr; do
  [ "$t" = "$src/tests/diff/cases/truncated/b.gpurr" ] && continue
  [ "$t" = "$src/tests/diff/cases/corrupt_block/b.gpurr" ] && continue
  expect 0 ": ok:" "$t"
done
# A bit flipped in a block since it was written: that block is named, the others are checked.
expect 1 "block 3 of 4: $src/tests/diff/cases/corrupt_block/b.gpurr/events: block at offset 2656 is corrupt" \
  "$src/tests/diff/cases/corrupt_block/b.gpurr"
# A snapshot is re-hashed: nondeterministic_kernel's run A has one.
expect 0 "1 snapshot checked" "$src/tests/diff/cases/nondeterministic_kernel/a.gpurr"
# A recording that did not end cleanly.
expect 1 "index: the recording did not end cleanly" "$src/tests/diff/cases/truncated/b.gpurr"

fresh() { rm -rf "$tmp/t.gpurr"; cp -r "$src/tests/diff/cases/nondeterministic_kernel/a.gpurr" "$tmp/t.gpurr"; chmod -R u+w "$tmp/t.gpurr"; }
flip() {  # flip the byte at offset $2 of file $1
  python3 -c "import sys; p, o = sys.argv[1], int(sys.argv[2]); b = bytearray(open(p, 'rb').read()); b[o] ^= 0x40; open(p, 'wb').write(b)" "$1" "$2"
}

# A byte flipped in a blob file (zstd's checksum or the frame catches it).
fresh
blob=$(find "$tmp/t.gpurr/blobs" -type f | sort | head -1)
flip "$blob" 20
expect 1 "corrupt blob" "$tmp/t.gpurr"
expect 1 "$(basename "$blob")" "$tmp/t.gpurr"

# A blob whose frame is sound but whose bytes are not those of its name.
fresh
blob=$(find "$tmp/t.gpurr/blobs" -type f | sort | head -1)
zstd -q -d -c "$blob" > "$tmp/content"
flip "$tmp/content" 0
zstd -q -f -c "$tmp/content" > "$blob"
expect 1 "content does not match its name" "$tmp/t.gpurr"

# The events file cut short inside its first block, and a byte flipped in
# its only block: a problem each time (exit 1), not an unreadable trace,
# since the header and the index read.
rm -rf "$tmp/one.gpurr"; cp -r "$src/tests/diff/cases/curand_state/a.gpurr" "$tmp/one.gpurr"; chmod -R u+w "$tmp/one.gpurr"
[ "$("$g" info --json "$tmp/one.gpurr" | python3 -c 'import json, sys; print(json.load(sys.stdin)["blocks"])')" = 1 ] ||
  fail "curand_state/a.gpurr is no longer a trace of one block"
cp -r "$tmp/one.gpurr" "$tmp/flipped.gpurr"
truncate -s "$(( $(stat -c %s "$tmp/one.gpurr/events") / 2 ))" "$tmp/one.gpurr/events"
expect 1 "one.gpurr: block 1 of 1 is corrupt (its frame of" "$tmp/one.gpurr"
grep -qF "one.gpurr: $tmp/one.gpurr" "$tmp/out" && fail "verify names the trace twice: $(cat "$tmp/out")"
flip "$tmp/flipped.gpurr/events" "$(( $(stat -c %s "$tmp/flipped.gpurr/events") / 2 ))"
expect 1 "block 1 of 1:" "$tmp/flipped.gpurr"

# The index cut short: ignored, and reported.
fresh
truncate -s 20 "$tmp/t.gpurr/index"
expect 1 "ignored the index and scanned the blocks instead" "$tmp/t.gpurr"

# checksums (FORMAT.md §5), written here by xxhsum: a damaged header is
# refused, a damaged index ignored, a line of another form an error, and a
# file name this gpurr does not know skipped.
sums() { (cd "$tmp/t.gpurr" && xxhsum -H2 header index > checksums && printf "%s" "$1" >> checksums); }
fresh; sums $'0123456789abcdef0123456789abcdef  a-later-file\n'
expect 0 ": ok:" "$tmp/t.gpurr"
fresh; sums ""; flip "$tmp/t.gpurr/header" "$(( $(stat -c %s "$tmp/t.gpurr/header") - 3 ))"
expect 2 "header: damaged (or checksums is): its XXH3-128 is" "$tmp/t.gpurr"
expect 2 "remove the trace's checksums file to read it anyway" "$tmp/t.gpurr"
fresh; sums ""; flip "$tmp/t.gpurr/index" "$(( $(stat -c %s "$tmp/t.gpurr/index") - 3 ))"
expect 1 "index: damaged (or checksums is): its XXH3-128 is" "$tmp/t.gpurr"
expect 1 "ignored the index and scanned the blocks instead: read 2 complete blocks" "$tmp/t.gpurr"
fresh; sums ""; rm "$tmp/t.gpurr/index"
expect 1 "index: missing, though checksums lists it" "$tmp/t.gpurr"
fresh; sums $'not a checksum line\n'
expect 2 "line 3 is not \"<32 hex digits>  <file>\"" "$tmp/t.gpurr"
fresh; sums "$(cd "$tmp/t.gpurr" && xxhsum -H2 index)"$'\n'
expect 2 "line 3 names index again: the file is damaged" "$tmp/t.gpurr"
fresh; (cd "$tmp/t.gpurr" && xxhsum -H2 index > checksums)
expect 2 "lists no header: the file is damaged" "$tmp/t.gpurr"
fresh; : > "$tmp/t.gpurr/checksums"
expect 2 "lists no header: the file is damaged" "$tmp/t.gpurr"
# No checksums file at all: readable, and said, since nothing then vouches
# for the index's own fields.
fresh; rm "$tmp/t.gpurr/checksums"
expect 0 "note: no checksums file: the header and the index are checked against the blocks alone" "$tmp/t.gpurr"

# A block's frame damaged (checksum).
fresh
flip "$tmp/t.gpurr/events" 80
expect 1 "block 1 of " "$tmp/t.gpurr"

# A block header's launch count damaged (byte 44 of the first block): the
# index, which checksums vouches for, no longer agrees, so the block is read
# by its entry. Without checksums, the index is not trusted: the blocks are
# scanned, and the header is checked against what the block holds.
fresh
python3 -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[44] ^= 1; open(p, 'wb').write(b)" \
  "$tmp/t.gpurr/events"
expect 1 "events: the header of block 1 of 2 (at offset 0) is damaged (it differs from the index's entry): read by its" \
  "$tmp/t.gpurr"
expect 1 "1 problem: 2 blocks, 17 events" "$tmp/t.gpurr"
rm "$tmp/t.gpurr/checksums"
expect 1 "events: block 1 of 2 at offset 0: its header counts 2 launches, it holds 3" "$tmp/t.gpurr"

# A blob write that did not finish, and a blob no event refers to.
fresh
d=$(dirname "$(find "$tmp/t.gpurr/blobs" -type f | head -1)")
echo partial > "$d/$(basename "$(find "$d" -type f | head -1)").tmp"
expect 1 "a blob write that did not finish" "$tmp/t.gpurr"

# A snapshot whose digest and chunk digests are not its bytes'.
rm -rf "$tmp/snap.gpurr"
bash "$src/tests/format/write_trace_with_cli.sh" "$src/trace_format/trace.capnp" "$tmp/snap.gpurr" \
  "$src/tests/verify/events.txt" > /dev/null
expect 1 "event #1: snapshot of output 0 of the launch" "$tmp/snap.gpurr"
expect 1 "the recorded digest is 00000000000004d2" "$tmp/snap.gpurr"
expect 1 "1 of its 1 chunk digests differ from the recorded ones" "$tmp/snap.gpurr"

# JSON: the same problems.
"$g" verify --json "$tmp/snap.gpurr" > "$tmp/json" || [ $? = 1 ] || fail "verify --json exit status"
python3 - "$tmp/json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"] is False and j["readable"] is True, j
assert len(j["problems"]) == 2 and j["snapshots"] == 1, j
PY

# Not a trace: usage trouble.
expect 2 "no such trace" "$tmp/does-not-exist.gpurr"
mkdir -p "$tmp/empty.gpurr"
expect 2 "not a gpurr trace" "$tmp/empty.gpurr"
"$g" verify > /dev/null 2>&1 && fail "verify without a trace succeeded"
rc=0; "$g" verify > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "verify without a trace exited $rc, expected 2"
"$g" verify --help | grep -q "re-hashed" || fail "verify --help"
echo "verify: all checks passed"
