#!/usr/bin/env bash
# The recorder under faults, run for real: bin/gpurr record runs
# recorded_program, which records itself with the recorder's own session,
# trace thread and writer over a fake device.
#   enospc  the trace's file system (a real 256 KiB tmpfs) fills while the
#           program runs: one warning, the program's output and exit status
#           unchanged, the trace readable up to its last complete block, and
#           `gpurr info` saying it ended early. Skipped (77) where mounting
#           is not allowed.
#   enospc-start  the trace's file system is full before the trace is made:
#           no inode left for its directory (a tmpfs of 3 inodes), or no room
#           for its header (4 KiB): one warning that the process is not
#           recorded, the program's output and exit status unchanged, no
#           unreadable trace left, and record says no trace was written.
#   kill    the recorded process is killed (SIGKILL) in the middle of a step:
#           the trace is readable up to its last block, `gpurr info` says
#           it ended early, and `gpurr diff` against a complete run claims
#           nothing past it (exit status 2); as a rank of a job, the diff of
#           the two jobs' directories names it incomplete.
#   signal  the recorded process ends by a signal at once, in the middle of
#           a step, well within the recorder's second between blocks:
#           SIGTERM (sent twice), a write through a null pointer (SIGSEGV)
#           abort() (SIGABRT), and a SIGTERM handler of the program's own
#           that cleans up and raises the signal again with the default
#           action back (by raise, and by kill to its process group). Each ends as it does unrecorded (exit status,
#           output), and the trace holds every launch made before it,
#           `gpurr info` saying it ended early. A program that handles
#           SIGTERM itself keeps its own handler, which ends it by _exit;
#           that trace, and one of a program that calls _exit in a step,
#           are closed whole.
#   behind  the trace thread falls behind (GPURR_TEST_SLOW_WRITER_US) with a
#           1 MiB queue: events are dropped, `gpurr info` says how many and
#           where, and `gpurr diff` against a complete run claims nothing
#           past the gap (exit status 2).
#
#   faults_test.sh BUILD_DIR PROGRAM enospc|enospc-start|kill|signal|behind
set -u
build=$1 program=$2 mode=$3
unset RANK SLURM_PROCID LOCAL_RANK NODE_RANK WORLD_SIZE SLURM_NTASKS SLURM_STEP_NUM_TASKS  # set below for a job
gpurr=$build/bin/gpurr
work=$(mktemp -d)
mounted=
cleanup() {
  [ -n "$mounted" ] && umount "$mounted" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
expect() {  # FILE PATTERN: the file holds a line matching the pattern
  grep -q -- "$2" "$1" || { cat "$1" >&2; fail "$1 does not say '$2'"; }
}

case $mode in
enospc)
  mkdir "$work/disk"
  if ! mount -t tmpfs -o size=256k tmpfs "$work/disk" 2>/dev/null; then
    echo "cannot mount a tmpfs here (not root, or not allowed): skipped"
    exit 77
  fi
  mounted=$work/disk
  steps=40 launches=2000
  env -u GPURR_OUTPUT "$program" $steps $launches > "$work/plain.out"
  plain=$?
  "$gpurr" record -o "$work/disk/run.gpurr" -- "$program" $steps $launches > "$work/rec.out" 2> "$work/rec.err"
  code=$?
  cat "$work/rec.err"
  [ "$code" = "$plain" ] || fail "exit status $code under the recorder, $plain without"
  cmp -s "$work/plain.out" "$work/rec.out" || fail "the program's output changed under the recorder"
  df -k "$work/disk" | tail -1
  n=$(grep -c "cannot write the trace" "$work/rec.err")
  [ "$n" = 1 ] || fail "$n warnings that the trace cannot be written, not one"
  # The recorder's warnings; gpurr record's summary then says the trace
  # ended early (checked below, with gpurr info).
  n=$(grep "gpurr: warning: " "$work/rec.err" | grep -vc "run.gpurr: the recording did not end cleanly")
  [ "$n" = 1 ] || fail "$n recorder warnings, not one"
  expect "$work/rec.err" "1 incomplete"
  trace=$work/disk/run.gpurr
  ;;
enospc-start)
  steps=2 launches=100
  env -u GPURR_OUTPUT "$program" $steps $launches > "$work/plain.out"
  plain=$?
  for limit in nr_inodes=3 size=4k; do
    mkdir "$work/disk"
    if ! mount -t tmpfs -o "$limit" tmpfs "$work/disk" 2>/dev/null; then
      echo "cannot mount a tmpfs here (not root, or not allowed): skipped"
      exit 77
    fi
    mounted=$work/disk
    "$gpurr" record -o "$work/disk/run.gpurr" -- "$program" $steps $launches > "$work/rec.out" 2> "$work/rec.err"
    code=$?
    cat "$work/rec.err"
    [ "$code" = "$plain" ] || fail "$limit: exit status $code under the recorder, $plain without"
    cmp -s "$work/plain.out" "$work/rec.out" || fail "$limit: the program's output changed under the recorder"
    n=$(grep -c "gpurr: warning: " "$work/rec.err")
    [ "$n" = 1 ] || fail "$limit: $n warnings, not one"
    expect "$work/rec.err" "this process is not recorded"
    # (Without a CUDA driver, record has said so up front instead.)
    grep -q "nothing will be recorded" "$work/rec.err" ||
      expect "$work/rec.err" "no trace written (no CUDA process ran, or a warning above says why)"
    [ -z "$(ls -A "$work/disk")" ] || { ls -laR "$work/disk"; fail "$limit: something is left on the disk"; }
    umount "$work/disk" && mounted= && rmdir "$work/disk"
  done
  echo "ok"
  exit 0
  ;;
kill)
  steps=4 launches=3000
  "$gpurr" record -o "$work/full.gpurr" -- "$program" $steps $launches > "$work/full.out" 2> "$work/full.err"
  [ $? = 7 ] || { cat "$work/full.err"; fail "the complete run did not exit with its own status"; }
  # A trace closed cleanly carries checksums that xxhsum itself accepts.
  (cd "$work/full.gpurr" && xxhsum -c checksums) || fail "xxhsum -c rejects the trace's checksums"
  KILL_IN_STEP=2 "$gpurr" record -o "$work/killed.gpurr" -- "$program" $steps $launches \
    > "$work/rec.out" 2> "$work/rec.err"
  code=$?
  cat "$work/rec.err"
  [ "$code" = 137 ] || fail "exit status $code, not 137 (128 + SIGKILL)"
  [ "$(wc -l < "$work/rec.out")" = 2 ] || fail "the killed program should have finished 2 steps"
  "$gpurr" diff "$work/full.gpurr" "$work/killed.gpurr" > "$work/diff.out" 2>&1
  dcode=$?
  cat "$work/diff.out"
  # Identical up to where the killed run stops, nothing known past it.
  [ "$dcode" = 2 ] || fail "diff exit status $dcode, not 2 (not known past the kill)"
  expect "$work/diff.out" "no index"
  expect "$work/diff.out" "compared up to its last complete block"
  expect "$work/diff.out" "after run B's trace ends; not compared"
  expect "$work/diff.out" "not known: "
  expect "$work/diff.out" "up to where run B's trace ends (its recording did not end cleanly)"
  # As ranks of a job, one gpurr per rank (RANK and WORLD_SIZE in its own
  # environment, as srun starts them): the killed rank's trace joins the
  # job's directory, and the diff of two jobs says which rank is incomplete
  # and which missing.
  export WORLD_SIZE=3
  for r in 0 1 2; do RANK=$r "$gpurr" record -o "$work/job-a" -- "$program" $steps $launches >/dev/null 2>&1; done
  RANK=0 "$gpurr" record -o "$work/job-b" -- "$program" $steps $launches >/dev/null 2>&1
  RANK=1 KILL_IN_STEP=2 "$gpurr" record -o "$work/job-b" -- "$program" $steps $launches >/dev/null 2>"$work/rank1.err"
  expect "$work/rank1.err" "rank1.gpurr written to $work/job-b/, the job's directory (RANK=1)"
  "$gpurr" diff "$work/job-a" "$work/job-b" > "$work/job.out" 2>&1
  dcode=$?
  cat "$work/job.out"
  # Rank 0 identical, rank 1 up to its kill, rank 2 never recorded in run
  # B: nothing is known to differ, and not all is known.
  [ "$dcode" = 2 ] || fail "diff exit status $dcode, not 2 (not known: a rank is missing, another cut short)"
  expect "$work/job.out" "^not known: the processes compared agree, but rank2.gpurr was recorded in run A only"
  expect "$work/job.out" "^ranks: 3 in $work/job-a, 2 in $work/job-b"
  expect "$work/job.out" "^  missing in $work/job-b: rank2.gpurr"
  expect "$work/job.out" "^  incomplete in $work/job-b: rank1.gpurr ([0-9,]* operations kept) (the recording did not end cleanly"
  "$gpurr" diff --json "$work/job-a" "$work/job-b" > "$work/job.json" 2>&1
  python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["ranks"]
assert r["missing"] == {"a": [], "b": ["rank2.gpurr"]}, r
assert [t["process"] for t in r["incomplete"]["b"]] == ["rank1.gpurr"] and not r["incomplete"]["a"], r' \
    "$work/job.json" || fail "diff --json: ranks"
  unset WORLD_SIZE
  trace=$work/killed.gpurr
  ;;
signal)
  steps=4 launches=3000
  for how in TERM SEGV ABRT RERAISE GROUP; do
    SIGNAL_IN_STEP=2 SIGNAL=$how env -u GPURR_OUTPUT "$program" $steps $launches > "$work/plain-$how.out" 2>/dev/null
    plain=$?
    SIGNAL_IN_STEP=2 SIGNAL=$how "$gpurr" record -o "$work/$how.gpurr" -- "$program" $steps $launches \
      > "$work/$how.out" 2> "$work/$how.err"
    code=$?
    cat "$work/$how.err"
    [ "$code" = "$plain" ] || fail "SIG$how: exit status $code under the recorder, $plain without"
    [ "$code" -gt 128 ] || fail "SIG$how: exit status $code, not that of a signal"
    cmp -s "$work/plain-$how.out" "$work/$how.out" || fail "SIG$how: the program's output changed under the recorder"
    "$gpurr" info --json "$work/$how.gpurr" > "$work/$how.json" || fail "SIG$how: gpurr info"
    python3 -c 'import json, sys
i = json.load(open(sys.argv[1]))
want = 2 * 3000 + 1500
got = i["launches"]
assert got == want, f"{got} launches in the trace, not the {want} made before the signal"
assert not i["complete"], "the trace should read as not ended cleanly"' "$work/$how.json" || fail "SIG$how: the trace"
  done
  # A program with its own SIGTERM handler keeps it; the handler ends the
  # program by _exit, and the trace is closed first, whole. So with _exit
  # called outside a handler.
  HANDLES_TERM=1 SIGNAL_IN_STEP=2 SIGNAL=TERM "$gpurr" record -o "$work/own.gpurr" -- "$program" $steps $launches \
    > "$work/own.out" 2> "$work/own.err"
  code=$?
  [ "$code" = 3 ] || { cat "$work/own.err"; fail "a program's own SIGTERM handler: exit status $code, not its 3"; }
  expect "$work/own.out" "^handled SIGTERM$"
  SIGNAL_IN_STEP=2 SIGNAL=EXIT "$gpurr" record -o "$work/exit.gpurr" -- "$program" $steps $launches \
    > "$work/exit.out" 2> "$work/exit.err"
  code=$?
  [ "$code" = 9 ] || { cat "$work/exit.err"; fail "_exit(9): exit status $code, not 9"; }
  # An exec (a launcher handing over to another program): the trace is
  # closed first, and the program run has the output and status.
  SIGNAL_IN_STEP=2 SIGNAL=EXEC "$gpurr" record -o "$work/exec.gpurr" -- "$program" $steps $launches \
    > "$work/exec.out" 2> "$work/exec.err"
  code=$?
  [ "$code" = 9 ] || { cat "$work/exec.err"; fail "exec: exit status $code, not the program's 9"; }
  expect "$work/exec.out" "^exec ran$"
  for t in own exit exec; do
    "$gpurr" info --json "$work/$t.gpurr" > "$work/$t.json" || fail "$t: gpurr info"
    python3 -c 'import json, sys
i = json.load(open(sys.argv[1]))
assert i["launches"] == 2 * 3000 + 1500 and i["complete"], (i["launches"], i["complete"])' \
      "$work/$t.json" || fail "$t: the trace closed before _exit"
  done
  # An exec that fails (no such program) leaves the recording going: the
  # program ends as usual and the trace holds every step.
  SIGNAL_IN_STEP=2 SIGNAL=EXEC_MISSING "$gpurr" record -o "$work/missing.gpurr" -- "$program" $steps $launches \
    > "$work/missing.out" 2> "$work/missing.err"
  code=$?
  [ "$code" = 7 ] || { cat "$work/missing.err"; fail "a failed exec: exit status $code, not the program's 7"; }
  expect "$work/missing.out" "^exec failed$"
  "$gpurr" info --json "$work/missing.gpurr" > "$work/missing.json" || fail "a failed exec: gpurr info"
  python3 -c 'import json, sys
i = json.load(open(sys.argv[1]))
assert i["launches"] == int(sys.argv[2]) * 3000 and i["complete"], (i["launches"], i["complete"])' \
    "$work/missing.json" "$steps" || fail "a failed exec: the trace holds every step"
  trace=$work/TERM.gpurr
  ;;
behind)
  steps=3 launches=2000
  "$gpurr" record -o "$work/full.gpurr" -- "$program" $steps $launches > "$work/full.out" 2> "$work/full.err"
  GPURR_TEST_SLOW_WRITER_US=300 "$gpurr" record --trace-queue 1 -o "$work/slow.gpurr" -- \
    "$program" $steps $launches > "$work/rec.out" 2> "$work/rec.err"
  code=$?
  cat "$work/rec.err"
  [ "$code" = 7 ] || fail "exit status $code, not the program's 7"
  cmp -s "$work/full.out" "$work/rec.out" || fail "the program's output changed"
  n=$(grep -c "gpurr: warning: " "$work/rec.err")
  [ "$n" = 1 ] || fail "$n warnings, not one"
  expect "$work/rec.err" "are dropped"
  "$gpurr" info "$work/slow.gpurr" > "$work/info.out" || fail "gpurr info"
  cat "$work/info.out"
  expect "$work/info.out" "^dropped .* events dropped (.* launches) at .*, the first at event #"
  expect "$work/info.out" "^status .*complete; .* events dropped"
  "$gpurr" diff "$work/full.gpurr" "$work/slow.gpurr" > "$work/diff.out" 2>&1
  dcode=$?
  cat "$work/diff.out"
  [ "$dcode" = 2 ] || fail "diff exit status $dcode, not 2"
  expect "$work/diff.out" "run B's recorder dropped .* events at event #"
  expect "$work/diff.out" "^not known: .* nothing after it was compared"
  echo "ok"
  exit 0
  ;;
*) fail "unknown mode $mode" ;;
esac

[ -d "$trace" ] || fail "no trace at $trace"
"$gpurr" info "$trace" > "$work/info.out" 2>&1 || { cat "$work/info.out"; fail "gpurr info cannot read the trace"; }
cat "$work/info.out"
expect "$work/info.out" "^status .*incomplete"
if [ "$mode" = enospc ]; then
  # The partial block the disk cut is not counted in the ratio, and is said.
  expect "$work/info.out" "^size .* read, .* after them not ([0-9.]* .*B uncompressed, [1-9][0-9.]*x)"
fi
"$gpurr" info --json "$trace" > "$work/info.json" || fail "gpurr info --json"
expect "$work/info.json" '"complete": false'
launches=$(sed -n 's/^  "launches": \([0-9]*\),$/\1/p' "$work/info.json")
[ "${launches:-0}" -gt 0 ] || fail "no launch readable in the trace"
echo "ok: $launches launches readable"
