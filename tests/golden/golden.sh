#!/usr/bin/env bash
# Golden ("diff") tests of gpurr's output on checked-in traces.
#
#   golden.sh BUILD_DIR CHECK
#
# CHECK is one of: regenerate, dump, dump-json, dump-filter, info, info-json,
# errors, gpu-example (the pair recorded on a GPU, examples/gpu/). With UPDATE=1 the expected files are rewritten from the actual output.
set -euo pipefail
build=$(cd "$1" && pwd) check=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
gpurr=$build/bin/gpurr
expected_dir=$src/tests/golden
cd "$src"  # traces are named relative to the source tree in the output

# compare NAME: stdin against tests/golden/NAME
compare() {
  local name=$1 actual
  actual=$(mktemp)
  cat > "$actual"
  if [ "${UPDATE:-0}" = 1 ]; then
    cp "$actual" "$expected_dir/$name"
    echo "updated $name"
  elif ! diff -u "$expected_dir/$name" "$actual"; then
    echo "FAIL: output differs from tests/golden/$name (UPDATE=1 to accept)"
    rm -f "$actual"
    exit 1
  fi
  rm -f "$actual"
}

# expect_error CODE TEXT CMD...: CMD exits with CODE and says TEXT on stderr
expect_error() {
  local code=$1 text=$2 err rc=0
  shift 2
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -qF -- "$text" <<< "$err"; then
    echo "FAIL: '$*' exited $rc (expected $code) saying: $err (expected: $text)"
    exit 1
  fi
}

trace=examples/synthetic.gpurr
case "$check" in
  regenerate)
    # Writing is deterministic: the example trace is reproduced byte for byte.
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    "$build/examples/make_example_trace" "$tmp/synthetic.gpurr" > /dev/null
    diff -r "$trace" "$tmp/synthetic.gpurr"
    ;;
  dump) "$gpurr" dump "$trace" | compare synthetic.dump.txt ;;
  dump-json) "$gpurr" dump --json "$trace" | compare synthetic.dump.jsonl ;;
  dump-filter)
    { "$gpurr" dump --range 5:13 --kernel 'gemm|reduce' "$trace"
      "$gpurr" dump --range 7 "$trace"
      "$gpurr" dump --range 16: "$trace"; } | compare synthetic.dump-filter.txt ;;
  info) "$gpurr" info "$trace" | compare synthetic.info.txt ;;
  info-json) "$gpurr" info --json "$trace" | compare synthetic.info.json ;;
  errors)
    expect_error 2 "no such trace" "$gpurr" dump does-not-exist.gpurr
    expect_error 2 "a trace is a directory" "$gpurr" info tests/golden/golden.sh
    expect_error 2 "no version marker" "$gpurr" info docs
    holder=$(mktemp -d) && mkdir "$holder/package" && echo 1.0 > "$holder/package/version"
    expect_error 2 "no version marker" "$gpurr" info "$holder"  # a file named version is no trace's marker
    rm -rf "$holder"
    expect_error 2 "a directory of 2 per-process traces (a.gpurr, ...), not one trace" "$gpurr" dump examples/gpu
    expect_error 2 "invalid regular expression" "$gpurr" dump --kernel '(' "$trace"
    expect_error 2 "back-references (\1) are not supported" "$gpurr" dump --kernel '(a)\1' "$trace"
    expect_error 2 "back-references (\1) are not supported" "$gpurr" record --kernels '(gemm)\1' -- true
    expect_error 2 "--html: give the page's file name" "$gpurr" diff --html '' "$trace" "$trace"
    expect_error 2 "--start-gate /nonexistent/gate: directory /nonexistent does not exist" \
      "$gpurr" record --start-gate /nonexistent/gate -- true
    expect_error 2 "--launch: '18446744073709551616' is too large (at most 9223372036854775807)" \
      "$gpurr" replay "$trace" --launch 18446744073709551616 --plan
    expect_error 2 "docs: a directory, not the known-culprits file (a JSON file)" \
      "$gpurr" diff --culprits docs "$trace" "$trace"
    expect_error 2 "README.md: not valid JSON: parse error at line 1" "$gpurr" diff --culprits README.md "$trace" "$trace"
    expect_error 2 "gpurr record: error: --check-determinism takes its count after '=': --check-determinism=5" \
      "$gpurr" record --check-determinism 5 -- echo a b
    # A restarted job's directory that kept only its earlier attempt.
    job=$(mktemp -d) && mkdir -p "$job/attempts/0" && cp -r "$trace" "$job/attempts/0/rank0.gpurr"
    expect_error 2 "not a gpurr trace (no version marker); the traces of the job's earlier attempts are in \
$job/attempts/0 (give that directory)" "$gpurr" info "$job"
    expect_error 2 "neither a gpurr trace nor a directory of traces; the traces of the job's earlier attempts are" \
      "$gpurr" diff "$job" "$job"
    rm -rf "$job"
    # A line feed in a path is written \n: it cannot start a line of its own.
    odd=$(mktemp -d) && cp -r "$trace" "$odd/a
b.gpurr"
    first=$("$gpurr" diff "$odd/a
b.gpurr" "$trace" | head -1)
    [ "$first" = "gpurr diff $odd/a\nb.gpurr $trace" ] || { echo "FAIL: a line feed in a path printed raw: $first"; exit 1; }
    rm -rf "$odd"
    # A corrupt block in the middle: dump shows the whole blocks before and
    # after it (events #0-#18 and #25-#29), and says which it left out.
    rc=0 && out=$("$gpurr" dump tests/diff/cases/corrupt_block/b.gpurr 2>&1) || rc=$?
    shown=$(grep -c '^#' <<< "$out")
    if [ "$rc" -ne 0 ] || [ "$shown" -ne 24 ] || ! grep -q '^#25 ' <<< "$out" ||
       ! grep -qE "^gpurr dump: warning: .*block at offset 2656 is corrupt: .*: events #19 to #24 are not shown$" \
         <<< "$out"
    then
      echo "FAIL: dump of a trace with a corrupt block (exit $rc, $shown events): $out"; exit 1
    fi
    # A damaged snapshot costs the values' detail, and says so.
    pair=$(mktemp -d) && cp -r tests/diff/cases/nondeterministic_kernel/{a,b}.gpurr "$pair"
    for blob in "$pair"/a.gpurr/blobs/*/*; do printf '\377' | dd of="$blob" bs=1 seek=20 conv=notrunc 2>/dev/null; done
    rc=0 && out=$("$gpurr" diff "$pair/a.gpurr" "$pair/b.gpurr") || rc=$?
    if [ "$rc" -ne 1 ] || ! grep -qE "^warning: .*/blobs/.*: corrupt blob: .*; the bytes and values of that range \
are not compared, its digests are$" <<< "$out"; then
      echo "FAIL: a damaged snapshot was not said (exit $rc): $out"; exit 1
    fi
    rm -rf "$pair"
    # A command that cannot run: said once, before any run starts.
    expect_error 2 "gpurr bisect: error: cannot run '/nonexistent/train': command not found" \
      "$gpurr" bisect -- /nonexistent/train
    # With --json, every command that fails still prints its object.
    for cmd in "bisect --json -- /nonexistent/train" "replay --json no.gpurr --launch 1" "dump --json no.gpurr" \
               "diff --json --culprits /nonexistent $trace $trace" "diff --json --html /nonexistent/p.html $trace $trace" \
               "diff --json --html docs $trace $trace" "replay --json --launch x $trace" "bisect --json --runs 0 -- true" \
               "bisect --json --bogus -- true" "replay --json"; do
      rc=0 && out=$($gpurr $cmd 2>/dev/null) || rc=$?
      if [ "$rc" -ne 2 ] || ! grep -q '"error": *"[^"]' <<< "$out"; then
        echo "FAIL: gpurr $cmd exited $rc printing no error object: $out"; exit 1
      fi
    done
    # An unreadable command line: bisect's and diff's objects have the form
    # of their other refusals, whichever part of it cannot be read.
    for cmd in "bisect --json --runs 0 -- true" "bisect --json --bogus -- true"; do
      { $gpurr $cmd 2>/dev/null || true; } | python3 -c 'import json, sys
j = json.load(sys.stdin); assert j["gpurrBisect"] == 1 and j["verdict"] == "failed" and j["error"], j' ||
        { echo "FAIL: gpurr $cmd: not bisect's refusal"; exit 1; }
    done
    { $gpurr diff --json --bogus "$trace" "$trace" 2>/dev/null || true; } | python3 -c 'import json, sys
j = json.load(sys.stdin); assert j["gpurrDiff"] == 1 and j["verdict"] == "error" and j["errorKind"] == "option", j' ||
      { echo "FAIL: diff --json --bogus: not diff's refusal"; exit 1; }
    copy=$(mktemp -d)/t.gpurr && cp -r "$trace" "$copy"
    expect_error 2 "would replace a file of the trace $copy; give the page another name" \
      "$gpurr" diff --html "$copy/events" "$copy" "$trace"
    ln "$copy/checksums" "$copy.page"  # another name of one of its files
    expect_error 2 "would replace a file of the trace $copy; give the page another name" \
      "$gpurr" diff --html "$copy.page" "$copy" "$trace"
    "$gpurr" verify "$copy" > /dev/null || { echo "FAIL: diff --html into a trace damaged it"; exit 1; }
    rm -rf "$(dirname "$copy")"
    expect_error 2 "tests/golden/golden.sh: neither a gpurr trace nor a directory of traces" \
      "$gpurr" diff examples/gpu/a.gpurr tests/golden/golden.sh
    expect_error 2 "--range: expected A:B, A:, :B or N with event numbers" "$gpurr" dump --range x:y "$trace"
    expect_error 2 "selects no event (B must be larger than A)" "$gpurr" dump --range 5:2 "$trace"
    expect_error 2 "no such event: the trace's events are #0 to #" "$gpurr" dump --range 5000 "$trace"
    if "$gpurr" dump --kernel '' "$trace" | grep -v ' launch '; then
      echo "FAIL: dump --kernel '' printed events that are not launches"; exit 1
    fi
    expect_error 2 "trace is required" "$gpurr" dump
    expect_error 2 "no command 'no-such-command'; the commands are info, dump, verify, record, replay, diff, bisect" \
      "$gpurr" no-such-command
    expect_error 2 "" "$gpurr" dump --no-such-flag "$trace"
    # With --json, a trace that cannot be read is still one JSON object.
    expect_error 2 "no such trace" "$gpurr" info --json does-not-exist.gpurr
    { "$gpurr" info --json does-not-exist.gpurr 2>/dev/null || true; } | python3 -c 'import json, sys
j = json.load(sys.stdin); assert j == {"trace": "does-not-exist.gpurr", "error": "does-not-exist.gpurr: no such trace"}, j' ||
      { echo "FAIL: info --json on a missing trace"; exit 1; }
    { "$gpurr" diff --json does-not-exist.gpurr "$trace" 2>/dev/null || true; } | python3 -c 'import json, sys
j = json.load(sys.stdin); assert j["error"] == "does-not-exist.gpurr: no such trace" and j["gpurrDiff"] == 1, j
assert j["errorKind"] == "unreadableTrace", j' ||
      { echo "FAIL: diff --json on a missing trace"; exit 1; }
    # A refusal says which, for scripts.
    for pair in "notATrace examples/gpu/a.gpurr tests/golden/golden.sh" \
                "traceAndDirectory examples/gpu/a.gpurr examples/gpu" \
                "differentGpuModels examples/gpu/a.gpurr $trace" \
                "option --culprits /nonexistent $trace $trace"; do
      kind=${pair%% *}
      { "$gpurr" diff --json ${pair#* } 2>/dev/null || true; } | python3 -c 'import json, sys
j = json.load(sys.stdin); assert j["verdict"] == "error" and j["errorKind"] == sys.argv[1], j' "$kind" ||
        { echo "FAIL: diff --json ${pair#* }: errorKind is not $kind"; exit 1; }
    done
    "$gpurr" --help | grep -q "dump" || { echo "FAIL: --help lists no commands"; exit 1; }
    "$gpurr" dump --help | grep -q -- "--kernel" || { echo "FAIL: dump --help"; exit 1; }
    ;;
  gpu-example)
    # Recorded on a GPU: the traces are whole, and the diff names the
    # nondeterministic index_add_ (exit status 1: the runs differ).
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    for t in examples/gpu/a.gpurr examples/gpu/b.gpurr; do "$gpurr" verify "$t" > /dev/null; done
    for form in text json; do
      flags=()
      [ "$form" = json ] && flags=(--json)
      rc=0
      "$gpurr" diff "${flags[@]}" examples/gpu/a.gpurr examples/gpu/b.gpurr > "$tmp/$form" || rc=$?
      [ "$rc" -eq 1 ] || { echo "FAIL: gpurr diff ($form) exited $rc (expected 1: the runs differ)"; exit 1; }
    done
    compare gpu_example.diff.txt < "$tmp/text"
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["processes"][0]["firstDivergence"]
assert d["cause"] == "nondeterministicKernel", d["cause"]
assert d["a"]["origin"]["op"] == "aten::index_add_", d["a"]["origin"]
' "$tmp/json" || { echo "FAIL: gpurr diff --json does not name the nondeterministic index_add_"; exit 1; }
    ;;
  *) echo "unknown check $check"; exit 2 ;;
esac
