#!/usr/bin/env bash
# Writes a trace as a newer gpurr would: its schema (trace_format/trace.capnp
# with additions made by the rules of FORMAT.md §9) has a new kind of event
# (Event.checkpoint, a union member this gpurr does not know) and new fields
# in Header, KernelLaunch and Memcpy; its header says compatVersion 15. Old
# readers must skip the new events (one warning) and ignore the new fields.
#
#   make_future_trace.sh SOURCE_DIR OUT_DIR
set -euo pipefail
src=$1 out=$2
here=$src/tests/format/future
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out"
python3 - "$src/trace_format/trace.capnp" "$tmp/future.capnp" <<'PY'
import sys
schema = open(sys.argv[1]).read()
def add(after, text):
    global schema
    assert after in schema, after
    schema = schema.replace(after, after + text, 1)
add("    dropped @13 :EventsDropped;  # compatVersion 9\n", "    checkpoint @14 :Checkpoint;   # added: a new kind of event\n")
add("  number @21 :UInt64 = 0xffffffffffffffff;", "\n  priority @22 :Int32;         # added\n  label @23 :Text;             # added")
add("  captureId @9 :UInt64;        # the capture's id, when captured", "\n  bandwidth @10 :Float64;      # added")
add("  pointersResolved @17 :Bool = true;", "\n  futureQuirk @18 :Bool;       # added")
schema += "\nstruct Checkpoint {\n  step @0 :UInt64;\n  path @1 :Text;\n}\n"
open(sys.argv[2], "w").write(schema)
PY
bash "$src/tests/format/write_trace_with_cli.sh" "$tmp/future.capnp" "$out" \
  "$here/events.txt" "$here/header.txt" > /dev/null
