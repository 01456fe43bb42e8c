#!/usr/bin/env bash
# Writes a gpurr trace using nothing but the `capnp` and `zstd` command-line
# tools (plus `xxhsum` to name a blob and write `checksums`), following
# trace_format/FORMAT.md. It
# is the proof that FORMAT.md says enough to write a trace without gpurr's code.
#
#   write_trace_with_cli.sh SCHEMA OUT_DIR EVENTS_TEXT [HEADER_TEXT]
#
# SCHEMA is trace_format/trace.capnp. EVENTS_TEXT holds one Frame per line in
# Cap'n Proto text format (blank lines and lines starting with # are skipped;
# a line "---" ends a block). HEADER_TEXT is a Header in text format (default:
# a minimal one). Each block's BlockHeader is computed here. A line may use
# @BLOB:<file> in place of a BlobRef: the file is stored in the blob store and
# the reference filled in.
set -euo pipefail

schema=$1 out=$2 events_text=$3 header_text=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out/blobs"

# version marker
printf 'gpurr-trace 1\n' > "$out/version"

# header: one message
if [ -z "$header_text" ]; then
  echo '(formatVersion = 1, compatVersion = 1, toolVersion = "capnp-cli")' > "$tmp/header.txt"
  header_text=$tmp/header.txt
fi
capnp encode "$schema" Header < "$header_text" > "$out/header"

# blobs/<hh>/<xxh128>: a zstd frame of the bytes, named by XXH3-128 of them.
blob_ref() {
  local file=$1 id size hi lo
  id=$(xxhsum -H2 "$file" | cut -d' ' -f1)
  size=$(stat -c %s "$file")
  mkdir -p "$out/blobs/${id:0:2}"
  zstd -q -1 -f -c "$file" > "$out/blobs/${id:0:2}/$id"
  hi=$((16#${id:0:16})) lo=$((16#${id:16:16}))
  # Cap'n Proto text wants unsigned decimals; bash arithmetic is signed.
  printf '(idHigh = %s, idLow = %s, size = %s)' \
    "$(python3 -c "print($hi % 2**64)")" "$(python3 -c "print($lo % 2**64)")" "$size"
}

: > "$out/events"
block=0
entries=()
flush_block() {
  [ -s "$tmp/frames" ] || return 0
  local n_events n_launches first_seq first_t last_t usize csize
  read -r n_events n_launches first_seq first_t last_t < "$tmp/stats"
  zstd -q -1 --check -f "$tmp/frames" -o "$tmp/frames.zst"
  usize=$(stat -c %s "$tmp/frames")
  csize=$(stat -c %s "$tmp/frames.zst")
  offset=$(stat -c %s "$out/events")
  # magic: "GPURRBLK" read as a little-endian 64-bit number
  echo "(magic = 0x4b4c425252555047, compressedSize = $csize, uncompressedSize = $usize,
         firstSeq = $first_seq, eventCount = $n_events, launchCount = $n_launches,
         firstTimeNs = $first_t, lastTimeNs = $last_t)" |
    capnp encode "$schema" BlockHeader >> "$out/events"
  cat "$tmp/frames.zst" >> "$out/events"
  entries+=("(fileOffset = $offset, firstSeq = $first_seq, eventCount = $n_events,
             launchCount = $n_launches, firstTimeNs = $first_t, lastTimeNs = $last_t,
             compressedSize = $csize, uncompressedSize = $usize)")
  : > "$tmp/frames"
  block=$((block + 1))
}

: > "$tmp/frames"
echo "0 0 0 0 0" > "$tmp/stats"
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in
    ''|'#'*) continue ;;
    ---) flush_block; echo "0 0 0 0 0" > "$tmp/stats"; continue ;;
  esac
  while [[ "$line" =~ @BLOB:([^[:space:],\)]+) ]]; do
    line=${line/"@BLOB:${BASH_REMATCH[1]}"/$(blob_ref "$(dirname "$events_text")/${BASH_REMATCH[1]}")}
  done
  echo "$line" | capnp encode "$schema" Frame >> "$tmp/frames"
  # Block statistics from the event's own fields.
  if [[ "$line" =~ ^\(event ]]; then
    seq=$(sed -E 's/.*seq = ([0-9]+).*/\1/' <<< "$line")
    t=$(sed -nE 's/.*timeNs = ([0-9]+).*/\1/p' <<< "$line"); t=${t:-0}
    read -r n l f ft lt < "$tmp/stats"
    [ "$n" -eq 0 ] && { f=$seq; ft=$t; }
    [[ "$line" =~ launch\ = ]] && l=$((l + 1))
    echo "$((n + 1)) $l $f $ft $t" > "$tmp/stats"
  fi
done < "$events_text"
flush_block

# index: written last, as a recorder does when it closes a trace cleanly
(IFS=,; echo "(blocks = [${entries[*]}])") | capnp encode "$schema" Index > "$out/index"
# checksums: after the index, the two files' XXH3-128 as xxhsum prints them
(cd "$out" && xxhsum -H2 header index > checksums)
echo "wrote $block block(s) to $out"
