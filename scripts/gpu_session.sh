#!/usr/bin/env bash
# scripts/gpu_session.sh BUNDLE [SECONDS]: everything a short GPU lease runs,
# as one command that leaves its logs under $OUT (the device tool's folder of
# files that come back), in the order the real-models issue asks for:
#   1. the benchmarks alone on the machine, so that their timings are clean
#      (tests/gpu/run.sh bench: step_breakdown on the MLP, unit_costs,
#      callback_bench, callback_bench_dlopen; 150 s at most);
#   2. `models` (GPURR_MODELS_LANES lanes, default 6) beside
#      `frameworks ddp_nccl ddp_gloo_planted`, `bisect empty_read.py` and
#      `pytorch`, in that order (run.sh starts no part in the last minute, so
#      the part least often run on a GPU goes first), until SECONDS (default
#      540) have passed;
#   3. logs.tgz and traces.tgz (below), then, for at most 30 s more,
#      `gpurr info`'s summary of every trace (dropped events, recorder cost)
#      and the module digests of gpt2_compile's traces (infos.txt), then
#      logs.tgz again with infos.txt.
# The whole command ends at most about SECONDS + 35 s after it started
# (575 s for 540: inside a 600 s limit): each run.sh is stopped 15 s after
# its deadline if it has not ended, and the infos stop at SECONDS + 30.
# $OUT receives bench.tgz, models.tgz and rest.tgz (each tarred by run.sh
# after every check, so a stopped command still leaves them; rest.tgz holds
# the pytorch, bisect and frameworks checks' files but their traces:
# outputs, diffs, `gpurr info`, reports), logs.tgz (all logs, no traces:
# machine.txt has the GPU, the cores and the libraries' versions) and
# traces.tgz (the models' deterministic pairs' traces, up to 15 MiB: false
# alarms are read from them on the build machine). Prints the timings and
# every PASS/FAIL/SKIP/FOUND/COST line, once. Made with scripts/gpu_bundle.sh:
#   scripts/gpu_bundle.sh build out/bundle
#   device run, carrying out/bundle:  scripts/gpu_session.sh out/bundle 540
set -u
b=${1:?usage: scripts/gpu_session.sh BUNDLE [SECONDS]}
: "${OUT:?OUT must name the folder whose files come back}"
start=$(date +%s)
seconds=${2:-540}
end=$((start + seconds))
here=$(cd "$(dirname "$0")" && pwd)
run=$here/../tests/gpu/run.sh
L=${TMPDIR:-/tmp}/gpurr-logs
rm -rf "$L"
mkdir -p "$L"
export PYTHONUNBUFFERED=1
since() { echo "$1 at $(($(date +%s) - start)) s" >>"$L/machine.txt"; }
# Seconds from now until $1 (at least 1): a limit for `timeout`.
secs_until() { local s=$(($1 - $(date +%s))); [ $s -lt 1 ] && s=1; echo $s; }
{ timeout 30 nvidia-smi; nproc; free -g
  timeout 60 python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.backends.cudnn.version())'
  timeout 60 pip show transformers torchvision timm torch-geometric pytorch-lightning lightning accelerate 2>/dev/null |
    grep -E '^(Name|Version)'; } >"$L/machine.txt" 2>&1

GPURR_DEADLINE=$((start + 150)) GPURR_CHECK_TIMEOUT=120 GPURR_GPU_LOGS=$L/bench GPURR_GPU_TAR=$OUT/bench.tgz \
  GPURR_BENCH="step_breakdown unit_costs callback_bench callback_bench_dlopen" GPURR_BENCH_WORKLOADS=mlp \
  timeout -k 5 "$(secs_until $((start + 165)))" "$run" "$b" bench >"$L/bench.txt" 2>&1
since "bench done"

export GPURR_DEADLINE=$end
GPURR_GPU_LOGS=$L/models GPURR_GPU_TAR=$OUT/models.tgz GPURR_MODELS_LANES=${GPURR_MODELS_LANES:-6} \
  GPURR_CHECK_TIMEOUT=420 timeout -k 5 "$(secs_until $((end + 15)))" "$run" "$b" models >"$L/models.txt" 2>&1 &
GPURR_GPU_LOGS=$L/rest GPURR_GPU_TAR=$OUT/rest.tgz GPURR_CHECK_TIMEOUT=240 GPURR_BISECT_ONLY=empty_read.py \
  GPURR_FRAMEWORKS="ddp_nccl ddp_gloo_planted" timeout -k 5 "$(secs_until $((end + 15)))" \
  "$run" "$b" frameworks bisect pytorch >"$L/rest.txt" 2>&1
since "rest done"
wait
since "models done"

# The logs and the traces first, so that they come back whatever follows.
parent=$(dirname "$L") logs=$(basename "$L")
tar_logs() {
  (cd "$parent" && tar czf "$OUT/logs.tgz.part" --exclude='*.gpurr' --exclude='*.gpurr/*' "$logs" &&
    mv -f "$OUT/logs.tgz.part" "$OUT/logs.tgz")
}
tar_logs
(cd "$parent" && find "$logs/models" -path '*.gpurr*' -type f -printf '%s %p\n' | sort -k2 |
  awk '$2 ~ /deterministic/ && (s += $1) < 15728640 {print $2}' | tar czf "$OUT/traces.tgz.part" -T - &&
  mv -f "$OUT/traces.tgz.part" "$OUT/traces.tgz")
since "logs.tgz and traces.tgz written"

# The traces' summaries, until SECONDS + 30.
info_end=$((end + 30))
# Seconds left for one command (5 at most; 0 when none is: `timeout 0` would
# mean no limit, so the caller stops).
left() { local s=$((info_end - $(date +%s))); [ $s -gt 5 ] && s=5; [ $s -lt 0 ] && s=0; echo $s; }
find "$L" -name '*.gpurr' | sort | while IFS= read -r t; do
  s=$(left)
  if [ "$s" -lt 1 ]; then
    echo "(stopped at SECONDS + 30 s: the traces from here on are not summarised)"
    break
  fi
  echo "== ${t#"$L"/}"
  timeout "$s" "$b/bin/gpurr" info "$t" 2>&1 | grep -E 'dropped|events|launches|recorder|status' | head -8
  case $t in
    *gpt2_compile*) s=$(left); [ "$s" -ge 1 ] && timeout "$s" "$b/bin/gpurr" dump "$t" 2>/dev/null | grep -m 12 'digest=' ;;
  esac
done >"$L/infos.txt" 2>&1
since "infos done"
tar_logs
cat "$L/machine.txt"
# run.sh's own lines (bench.txt, models.txt, rest.txt) count every check:
# PASS and FAIL are taken there only, not again from the checks' logs, which
# give the lines run.sh does not count (the models' SKIP, FOUND and COST).
for part in bench models rest; do
  grep -h -E '^(PASS|FAIL|SKIP)' "$L/$part.txt"
  grep -h -E '^(SKIP|FOUND|COST)' "$L/$part"/*.log
done 2>/dev/null | cut -c1-300
