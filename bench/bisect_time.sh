#!/usr/bin/env bash
# bench/bisect_time.sh BUILD_DIR [SCRIPT.py...]: the time `gpurr bisect` takes,
# from the command to its report, on each PyTorch script of tests/gpu/bisect/
# (default: every script of its expectations.txt), against one plain
# `python3 SCRIPT` run, on whatever GPU is present. Prints a table:
#   plain    one run of the script alone (seconds)
#   runs     each recorded run's seconds, from report.json's runs[].seconds:
#            from its start, or for a run started during an earlier one
#            (marked *) from when the run before it ended and let it go
#   bisect   gpurr bisect, start to exit (the report is written last)
#   ratio    bisect / plain
# PYTHON names the interpreter (default python3). Exits 77 (skipped) without
# a GPU (no nvidia-smi, or PyTorch missing or seeing no GPU), 2 on a usage
# error, 1 when a bisect wrote no report.json.
#
# With --until-step N (default script index_add.py, which diverges in step
# 0 and takes a step count as its argument): the plain run is the script
# told to run N + 1 steps, and the bisect is `gpurr bisect --until-step N`
# of the script told to run ten times as many (a long job, stopped by gpurr
# after step N). The goal: bisect within 1.5x the plain run.
set -u
here=$(cd "$(dirname "$0")" && pwd)
scripts_dir=$(cd "$here/../tests/gpu/bisect" && pwd)
source "$here/bisect_args.sh"
parse_until_step "bench/bisect_time.sh [--until-step N] BUILD_DIR [SCRIPT.py...]" "$@"
set -- "${rest[@]}"
build=$(cd "$1" && pwd)
shift
gpurr=$build/bin/gpurr
python=${PYTHON:-python3}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no GPU (nvidia-smi): skipped"
  exit 77
fi
"$python" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)" 2>/dev/null
case $? in
  0) ;;
  3) echo "PyTorch sees no GPU: skipped"; exit 77 ;;
  *) echo "no PyTorch for $python: skipped"; exit 77 ;;
esac
[ -x "$gpurr" ] || { echo "error: $gpurr is not built" >&2; exit 2; }

if [ $# -gt 0 ]; then
  scripts=("$@")
elif [ -n "$until_step" ]; then
  scripts=(index_add.py)
else
  mapfile -t scripts < <(sed -n 's/^\([A-Za-z0-9_]*\.py\)[[:space:]].*/\1/p' "$scripts_dir/expectations.txt")
fi
for s in "${scripts[@]}"; do
  [ -f "$scripts_dir/$s" ] || { echo "error: no $scripts_dir/$s" >&2; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-bisect-time-XXXXXX")
now() { date +%s.%N; }
# Warm the caches (PyTorch's import, the CUDA context) so that the first
# script's plain run is not charged for them.
"$python" -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()" >/dev/null 2>&1

echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
echo "$("$python" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda)')"
printf '%-24s %8s %18s %8s %7s  %-14s %s\n' script plain runs bisect ratio verdict launches
status=0
total_plain=0
total_bisect=0
for s in "${scripts[@]}"; do
  stem=${s%.py}
  t0=$(now)
  plain_args=() bisect_args=() until=()
  if [ -n "$until_step" ]; then
    plain_args=($((until_step + 1)))
    bisect_args=($((10 * (until_step + 1))))
    until=(--until-step "$until_step")
  fi
  "$python" "$scripts_dir/$s" "${plain_args[@]}" >"$work/$stem.plain.log" 2>&1
  plain_rc=$?
  t1=$(now)
  "$gpurr" bisect -o "$work/$stem" "${until[@]}" -- "$python" "$scripts_dir/$s" "${bisect_args[@]}" \
    >"$work/$stem.bisect.log" 2>&1
  t2=$(now)
  summary=$("$python" - "$work/$stem/report.json" <<'EOF' 2>/dev/null
import json, sys
r = json.load(open(sys.argv[1]))
runs = [x for x in r.get("runs") or [] if isinstance(x, dict)]
secs = [f"{x['seconds']:.1f}" + ("*" if x.get("startedDuring") else "") for x in runs
        if isinstance(x.get("seconds"), (int, float))]
launches = sorted({x.get("launches") for x in runs}, key=str)
print("/".join(secs) or "-", r.get("verdict"),
      "/".join(str(n) for n in launches) or "-")
EOF
)
  if [ -z "$summary" ]; then
    summary="- no-report -"
    status=1
  fi
  read -r record verdict launches <<<"$summary"
  plain=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  bisect=$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.2f", b - a }')
  ratio=$(awk -v p="$plain" -v b="$bisect" 'BEGIN { if (p > 0) printf "%.1f", b / p; else print "-" }')
  [ $plain_rc -eq 0 ] || plain="${plain}!"
  printf '%-24s %8s %18s %8s %7s  %-14s %s\n' "$s" "$plain" "$record" "$bisect" "$ratio" "$verdict" "$launches"
  total_plain=$(awk -v a="$total_plain" -v b="$plain" 'BEGIN { print a + b }')
  total_bisect=$(awk -v a="$total_bisect" -v b="$bisect" 'BEGIN { print a + b }')
done
printf '%-24s %8.2f %18s %8.2f %7s\n' total "$total_plain" "" "$total_bisect" \
  "$(awk -v p="$total_plain" -v b="$total_bisect" 'BEGIN { if (p > 0) printf "%.1f", b / p; else print "-" }')"
echo "(seconds, wall clock; a plain time marked ! exited non-zero; outputs in $work)"
[ -z "$until_step" ] || echo "(--until-step $until_step: goal bisect/plain <= 1.5)"
exit $status
