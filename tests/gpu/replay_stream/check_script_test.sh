#!/usr/bin/env bash
# check_script_test.sh: check_replay_stream.sh itself, on the CPU, against a
# stand-in build (a gpu_probe that says yes, a bin/gpurr that "records" an
# empty trace and prints a replay result chosen by $STUB_RESULT). It must
# pass a clean replay and fail every kind of mismatch it is meant to catch.
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-replay-stream-script-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/build/bin" "$work/build/tests/gpu"
printf '#!/bin/sh\necho "1 GPU"\n' >"$work/build/tests/gpu/gpu_probe"
printf '#!/bin/sh\nexit ${STUB_PROGRAM_EXIT:-0}\n' >"$work/program"
cat >"$work/build/bin/gpurr" <<'STUB'
#!/usr/bin/env bash
# record --full --force -o TRACE -- PROGRAM | replay TRACE --all --json [--until K] [--relocate]
if [ "$1" = record ]; then
  [ "$2" = --full ] || { echo "record without --full" >&2; exit 2; }
  "$7"
  rc=$?
  mkdir -p "$5"
  exit $rc
fi
verdict=equal mismatch=null checked=20 matching=20 unhashed=0 stop=null last=40 code=0
case $STUB_RESULT in
  different) verdict=different code=1 matching=7
    mismatch='{"seq": 17, "kind": "launch", "function": "step", "outputs": [{"output": 0, "recorded": "00000000000000aa", "replayed": "00000000000000bb"}]}' ;;
  unhashed) checked=12 matching=12 unhashed=8 ;;
  unchecked) checked=0 matching=0 ;;
  stopped) verdict=stopped code=2 stop=30 ;;
  past-until) ;;
esac
for a in "$@"; do
  if [ "$prev" = --until ] && [ "$STUB_RESULT" != past-until ]; then last=$a; fi
  prev=$a
done
cat <<JSON
{"verdict": "$verdict", "summary": "stub $STUB_RESULT", "mismatch": $mismatch, "launches": 20,
 "checkedLaunches": $checked, "matchingLaunches": $matching, "unhashedLaunches": $unhashed, "checkedCopiesToHost": 2, "matchingCopiesToHost": 2,
 "stopSeq": $stop, "stopReason": "graph", "lastSeq": $last, "bytesRestored": 4096, "replayMs": 1.5,
 "relocated": false, "warnings": []}
JSON
exit $code
STUB
chmod +x "$work/build/bin/gpurr" "$work/build/tests/gpu/gpu_probe" "$work/program"

failures=0
expect() {  # expect RESULT MIN_LAUNCHES EXPECTED_STATUS PATTERN [--relocate]
  local result=$1 min=$2 want=$3 pattern=$4
  shift 4
  local out rc
  out=$(STUB_RESULT=$result "$here/check_replay_stream.sh" "$work/build" "$work/program" "$min" "$@" 2>&1)
  rc=$?
  if [ $rc -ne "$want" ] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "check_replay_stream.sh with a '$result' replay: exit $rc (expected $want), output:"
    echo "$out" | sed 's/^/  | /'
    echo "  (expected to find: $pattern)"
    failures=$((failures + 1))
  fi
}
expect equal 19 0 "PASS replay_stream program until-20"
expect equal 19 0 "PASS replay_stream program relocated" --relocate
expect equal 25 1 "20 launches replayed, expected at least 25"
expect different 19 1 "#17 launch step: output 0 recorded 00000000000000aa, replayed 00000000000000bb"
expect unhashed 19 1 "8 of 20 launches were not hashed in the recording"
expect unchecked 19 1 "20 launches replayed, none checked"
expect stopped 19 1 "stopped before #30: graph"
expect past-until 19 1 "replayed up to #40, past --until 20"
# A program that skips itself (exit 77: a PyTorch script without PyTorch)
# skips the check rather than failing it.
out=$(STUB_PROGRAM_EXIT=77 STUB_RESULT=equal "$here/check_replay_stream.sh" "$work/build" "$work/program" 19 2>&1)
rc=$?
if [ $rc -ne 77 ]; then
  echo "check_replay_stream.sh with a program that exits 77: exit $rc (expected 77), output:"
  echo "$out" | sed 's/^/  | /'
  failures=$((failures + 1))
fi
out=$(STUB_PROGRAM_EXIT=3 STUB_RESULT=equal "$here/check_replay_stream.sh" "$work/build" "$work/program" 19 2>&1)
rc=$?
if [ $rc -ne 1 ] || ! grep -q "FAIL replay_stream program (record --full)" <<<"$out"; then
  echo "check_replay_stream.sh with a program that fails: exit $rc (expected 1), output:"
  echo "$out" | sed 's/^/  | /'
  failures=$((failures + 1))
fi
if [ $failures -ne 0 ]; then
  echo "FAIL check_replay_stream.sh ($failures case(s))"
  exit 1
fi
echo "PASS check_replay_stream.sh catches what it should"
