#!/usr/bin/env bash
# check_replay_stream.sh BUILD_DIR PROGRAM MIN_LAUNCHES [--relocate]
#
# Records PROGRAM with `gpurr record --full`, then re-runs its whole GPU
# command stream with `gpurr replay --all` and expects every recorded digest
# to match: verdict "equal", exit status 0, every launch replayed and hashed
# in the recording (--full hashes them all; at least MIN_LAUNCHES), every
# checked launch and copy to the host equal. Then replays the first half of
# the stream (--until) and, with --relocate, the whole stream away from the
# recorded addresses. Prints one PASS/FAIL line per check; exits 77
# (skipped) where there is no GPU, or when PROGRAM exits 77 itself.
set -u
usage="usage: check_replay_stream.sh BUILD_DIR PROGRAM MIN_LAUNCHES [--relocate]"
build=$(cd "${1:?$usage}" && pwd)
program=${2:?$usage}
min_launches=${3:?$usage}
relocate=0
if [ "${4:-}" = "--relocate" ]; then relocate=1; fi
gpurr=$build/bin/gpurr
name=$(basename "$program")

"$build/tests/gpu/gpu_probe" >/dev/null || exit 77
[ -x "$program" ] || { echo "FAIL replay_stream $name ($program is not built)"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-replay-stream-$name-XXXXXX")
keep=0
cleanup() { [ $keep -eq 1 ] && echo "  (trace and replay output kept in $work)" || rm -rf "$work"; }
trap cleanup EXIT

trace=$work/$name.gpurr
"$gpurr" record --full --force -o "$trace" -- "$program" >"$work/record.out" 2>"$work/record.err"
recorded=$?
if [ $recorded -eq 77 ]; then
  sed 's/^/  /' "$work/record.out" | tail -3
  exit 77  # the program skipped itself (a PyTorch script without PyTorch)
fi
if [ $recorded -ne 0 ] || [ ! -d "$trace" ]; then
  echo "  recording $name with --full failed:"
  sed 's/^/  /' "$work/record.err" | tail -20
  keep=1
  echo "FAIL replay_stream $name (record --full)"
  exit 1
fi
grep -h "^gpurr: warning: " "$work/record.err" | sed 's/^/  record: /'

status=0
# replay_and_check LABEL MODE [gpurr replay options...]: MODE is "whole"
# (the whole stream: at least MIN_LAUNCHES) or "until:K" (nothing after K).
replay_and_check() {
  local label=$1 mode=$2
  shift 2
  "$gpurr" replay "$trace" --all --json "$@" >"$work/$label.json" 2>"$work/$label.err"
  local rc=$?
  if python3 - "$work/$label.json" "$rc" "$mode" "$min_launches" <<'PY'
import json
import sys

path, rc, mode, minimum = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
try:
    with open(path) as f:
        r = json.load(f)
except (OSError, ValueError) as e:
    print(f"  gpurr replay printed no JSON (exit status {rc}): {e}")
    sys.exit(1)
problems = []
if r["verdict"] != "equal":
    problems.append(f"verdict {r['verdict']}: {r['summary']}")
if rc != 0:
    problems.append(f"exit status {rc}")
m = r["mismatch"]
if m is not None:
    for o in m["outputs"]:
        problems.append(f"#{m['seq']} {m['kind']} {m['function']}: output {o['output']} recorded {o['recorded']}, "
                        f"replayed {o['replayed']}")
if r["unhashedLaunches"] != 0:
    problems.append(f"{r['unhashedLaunches']} of {r['launches']} launches were not hashed in the recording "
                    "(--full hashes every launch)")
if r["checkedLaunches"] == 0 and r["launches"] > 0:
    problems.append(f"{r['launches']} launches replayed, none checked")
if r["matchingLaunches"] != r["checkedLaunches"]:
    problems.append(f"{r['matchingLaunches']} of {r['checkedLaunches']} checked launches match")
if r["matchingCopiesToHost"] != r["checkedCopiesToHost"]:
    problems.append(f"{r['matchingCopiesToHost']} of {r['checkedCopiesToHost']} copies to the host match")
if mode == "whole":
    if r["launches"] < minimum:
        problems.append(f"{r['launches']} launches replayed, expected at least {minimum}")
    if r["stopSeq"] is not None:
        problems.append(f"stopped before #{r['stopSeq']}: {r['stopReason']}")
else:
    until = int(mode.split(":")[1])
    if r["lastSeq"] > until:
        problems.append(f"replayed up to #{r['lastSeq']}, past --until {until}")
print(f"  {r['summary']}; {r['launches']} launches, {r['bytesRestored']} bytes restored, "
      f"replay {r['replayMs']:.1f} ms, relocated {r['relocated']}")
for w in r["warnings"]:
    print(f"  warning: {w}")
for p in problems:
    print(f"  {p}")
sys.exit(1 if problems else 0)
PY
  then
    echo "PASS replay_stream $name $label"
  else
    sed 's/^/  /' "$work/$label.err" | tail -20
    status=1
    keep=1
    echo "FAIL replay_stream $name $label"
  fi
}

replay_and_check all whole
last=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lastSeq"])' "$work/all.json" 2>/dev/null || echo 0)
half=$((last / 2))
replay_and_check "until-$half" "until:$half" --until "$half"
if [ $relocate -eq 1 ]; then
  replay_and_check relocated whole --relocate
fi
exit $status
