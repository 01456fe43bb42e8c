#!/usr/bin/env bash
# tests/gpu/probe/run_probes.sh BUILD_DIR|BUNDLE: runs every GPU probe
# (README.md beside this script) against a build or a bundle made by
# scripts/gpu_bundle.sh, in about three minutes, and writes a text report to
# stdout: each probe's detail lines (its answers indented among them), then
# a summary of its `PROBE <id> <answer>` lines, the only lines of the report
# that start with PROBE (one per answer, for grep). Without a GPU it prints
# one line saying why and exits 77.
# PYTHON names the interpreter with PyTorch (default python3); a probe
# that runs past its time limit is stopped and reported as such.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: tests/gpu/probe/run_probes.sh BUILD_DIR|BUNDLE" >&2
  exit 2
fi
build=$(cd "$1" && pwd -P)
dir=$build/tests/gpu/probe
probe=$dir/cupti_probe
for f in "$probe" "$dir/libprobe_subscriber.so" "$dir/libprobe_kernels.so"; do
  [ -e "$f" ] || { echo "error: $f is missing: build the gpu_probes target (ninja -C BUILD_DIR gpu_probes)" >&2; exit 2; }
done
out=$("$probe" check 2>&1)
rc=$?
if [ $rc -eq 77 ]; then
  echo "$out" | head -1
  exit 77
elif [ $rc -ne 0 ]; then
  echo "error: cupti_probe check failed ($rc): $out"
  exit 1
fi
python=${PYTHON:-python3}
start=$(date +%s)
echo "gpurr GPU probes: build $build"
echo "$out"
echo "python: $($python -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda)' 2>&1 | tail -1)"

# CUDA libraries the system may lack (libcudart for libprobe_kernels.so,
# cuBLAS) are looked up in PyTorch's wheels, as tests/gpu/run.sh does.
wheels=$($python "$(dirname "$0")/../wheel_lib_dirs.py" 2>/dev/null)
export PROBE_WHEEL_LIBS=$wheels
echo "LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-(unset)}"
echo "toolkit libcupti: $(ls /usr/local/cuda/lib64/libcupti.so.13 /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 2>/dev/null | tr '\n' ' ')"
echo "toolkit libcheckpoint: $(ls /usr/local/cuda/lib64/libcheckpoint.so /usr/local/cuda/extras/CUPTI/lib64/libcheckpoint.so 2>/dev/null | tr '\n' ' ')"
echo "wheel libcupti: $(for d in ${wheels//:/ }; do ls "$d"/libcupti.so* "$d"/libcheckpoint.so 2>/dev/null; done | tr '\n' ' ')"
if ldd "$dir/libprobe_kernels.so" | grep -q "not found"; then
  echo "libcudart.so.13 is not on the loader's path: taking PyTorch's wheels"
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$wheels
fi

report=$(mktemp "${TMPDIR:-/tmp}/gpurr-probes-XXXXXX")
trap 'rm -f "$report"' EXIT
# answer LINE: a PROBE line of our own, into the report (for the summary)
# and indented among the details.
answer() {
  echo "$1" >>"$report"
  echo "  $1"
}
# step SECONDS LABEL COMMAND...: runs one probe, its output into the report;
# printed with its PROBE lines indented, so that each starts a line once, in
# the summary.
step() {
  local limit=$1 label=$2
  shift 2
  echo
  echo "== $label"
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$report" | sed 's/^PROBE /  PROBE /'
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    answer "PROBE ${label%% *} stopped-after-${limit}s"
  elif [ "$rc" -ne 0 ]; then
    answer "PROBE ${label%% *} exited-$rc (a crash leaves the answers above it only)"
  fi
  echo "   ($((SECONDS - t0)) s)"
}

inject=$dir/libprobe_subscriber.so
step 30 "launches (P1.6 P2.2 P2.6 P2.9)" "$probe" launches
step 30 "modules LAZY (P3.3 P3.5 P3.6)" env CUDA_MODULE_LOADING=LAZY "$probe" modules
step 30 "modules EAGER (P3.3 P3.5 P3.6)" env CUDA_MODULE_LOADING=EAGER "$probe" modules
step 30 "memory (P4.1 P4.4)" "$probe" memory
step 40 "fresh memory (P4.6)" "$probe" fresh
step 30 "address reservation (P8.6)" "$probe" reserve
step 30 "checkpoint in a callback (P5.7)" "$probe" checkpoint
step 30 "lazy loading (P6.4)" env CUDA_MODULE_LOADING=LAZY "$probe" lazyload
step 60 "injection return value (P1.2)" "$probe" inject "$build/lib/libgpurr_recorder.so"
step 90 "driver calls inside callbacks (P5.1)" "$probe" callbacks
if $python -c 'import torch' 2>/dev/null; then
  step 120 "torch launches (P1.6 P2.2 P2.6)" env CUDA_INJECTION64_PATH="$inject" "$python" "$here/torch_probe.py" launches
  step 60 "torch allocator, default (P4.1 P4.4)" env -u PYTORCH_CUDA_ALLOC_CONF CUDA_INJECTION64_PATH="$inject" \
    "$python" "$here/torch_probe.py" alloc default
  step 60 "torch allocator, expandable_segments (P4.1)" env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
    CUDA_INJECTION64_PATH="$inject" "$python" "$here/torch_probe.py" alloc expandable
  step 60 "torch allocator, cudaMallocAsync (P4.1)" env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync \
    CUDA_INJECTION64_PATH="$inject" "$python" "$here/torch_probe.py" alloc cudaMallocAsync
  step 60 "cuInit before import torch (P1.7)" env CUDA_INJECTION64_PATH="$inject" "$python" "$here/torch_probe.py" early-init
  step 120 "torch graphs and the allocator's trace (P4.8)" "$python" "$here/torch_probe.py" graph-blocks
else
  answer "PROBE torch not-run ($python cannot import torch)"
fi

echo
echo "== summary ($(($(date +%s) - start)) s)"
grep '^PROBE ' "$report"
