#!/usr/bin/env bash
# scripts/gpu_session.sh BUNDLE [SECONDS]: everything a short GPU lease runs,
# as one command that ends within SECONDS (default 540) and leaves its logs
# under $OUT (the device tool's folder of files that come back), in the order
# the real-models issue asks for:
#   1. the benchmarks alone on the machine, so that their timings are clean
#      (tests/gpu/run.sh bench: step_breakdown on the MLP, unit_costs,
#      callback_bench, callback_bench_dlopen; 150 s at most);
#   2. `models` (GPURR_MODELS_LANES lanes, default 6) beside `pytorch`,
#      `bisect empty_read.py` and `frameworks ddp_nccl ddp_gloo_planted`;
#   3. `gpurr info`'s summary of every trace (dropped events, recorder cost)
#      and the module digests of gpt2_compile's traces (infos.txt).
# $OUT receives bench.tgz, models.tgz and rest.tgz (each tarred by run.sh
# after every check, so a stopped command still leaves them), logs.tgz (all
# logs, no traces: machine.txt has the GPU, the cores and the libraries'
# versions) and traces.tgz (the deterministic pairs' traces, up to 15 MiB:
# false alarms are read from them on the build machine). Prints the timings
# and every PASS/FAIL/SKIP/FOUND/COST line. Made with scripts/gpu_bundle.sh:
#   scripts/gpu_bundle.sh build out/bundle
#   device run, carrying out/bundle:  scripts/gpu_session.sh out/bundle 540
set -u
b=${1:?usage: scripts/gpu_session.sh BUNDLE [SECONDS]}
: "${OUT:?OUT must name the folder whose files come back}"
start=$(date +%s)
end=$((start + ${2:-540}))
here=$(cd "$(dirname "$0")" && pwd)
run=$here/../tests/gpu/run.sh
L=${TMPDIR:-/tmp}/gpurr-logs
rm -rf "$L"
mkdir -p "$L"
export PYTHONUNBUFFERED=1
since() { echo "$1 at $(($(date +%s) - start)) s" >>"$L/machine.txt"; }
{ nvidia-smi; nproc; free -g
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.backends.cudnn.version())'
  pip show transformers torchvision timm torch-geometric pytorch-lightning lightning accelerate 2>/dev/null |
    grep -E '^(Name|Version)'; } >"$L/machine.txt" 2>&1

GPURR_DEADLINE=$((start + 150)) GPURR_CHECK_TIMEOUT=120 GPURR_GPU_LOGS=$L/bench GPURR_GPU_TAR=$OUT/bench.tgz \
  GPURR_BENCH="step_breakdown unit_costs callback_bench callback_bench_dlopen" GPURR_BENCH_WORKLOADS=mlp \
  "$run" "$b" bench >"$L/bench.txt" 2>&1
since "bench done"

export GPURR_DEADLINE=$end
GPURR_GPU_LOGS=$L/models GPURR_GPU_TAR=$OUT/models.tgz GPURR_MODELS_LANES=${GPURR_MODELS_LANES:-6} \
  GPURR_CHECK_TIMEOUT=420 "$run" "$b" models >"$L/models.txt" 2>&1 &
GPURR_GPU_LOGS=$L/rest GPURR_GPU_TAR=$OUT/rest.tgz GPURR_CHECK_TIMEOUT=240 GPURR_BISECT_ONLY=empty_read.py \
  GPURR_FRAMEWORKS="ddp_nccl ddp_gloo_planted" "$run" "$b" pytorch bisect frameworks >"$L/rest.txt" 2>&1
since "rest done"
wait
since "models done"

for t in $(find "$L" -name '*.gpurr' | sort); do
  echo "== ${t#"$L"/}"
  timeout 5 "$b/bin/gpurr" info "$t" 2>&1 | grep -E 'dropped|events|launches|recorder|status' | head -8
  case $t in *gpt2_compile*) timeout 5 "$b/bin/gpurr" dump "$t" 2>/dev/null | grep -m 12 'digest=' ;; esac
done >"$L/infos.txt" 2>&1
parent=$(dirname "$L") logs=$(basename "$L")
(cd "$parent" && tar czf "$OUT/logs.tgz" --exclude='*.gpurr' --exclude='*.gpurr/*' "$logs")
(cd "$parent" && find "$logs" -path '*.gpurr*' -type f -printf '%s %p\n' | sort -k2 |
  awk '$2 ~ /deterministic/ && (s += $1) < 15728640 {print $2}' | tar czf "$OUT/traces.tgz" -T -)
cat "$L/machine.txt"
grep -h -E '^(PASS|FAIL|SKIP|FOUND|COST)' "$L"/*.txt "$L"/*/*.log 2>/dev/null | cut -c1-300
