#!/usr/bin/env bash
# check_annotations.sh BUILD_DIR: the library calls behind kernel launches,
# recorded by the preloaded wrappers of libgpurr_recorder.so:
#   - cuRAND with two seeds: gpurr diff says RNG state and names both seeds;
#   - a cuBLASLt GEMM: its launches carry the decoded algorithm;
#   - PyTorch, cudnn.benchmark=True: the conv launches carry cuDNN engines,
#     the Linear layer's the cuBLAS call (a wrapper that failed to reach
#     the real library would make the script raise: recording fails);
#   - PyTorch dropout with two seeds: RNG state, both seeds named.
# Prints one PASS or FAIL line per check; exits 77 (skipped) without a GPU.
# The PyTorch checks are skipped (SKIP line) without PyTorch.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: check_annotations.sh BUILD_DIR}" && pwd)
gpurr=$build/bin/gpurr
programs=$build/tests/gpu/annotations
python=${PYTHON:-python3}

"$build/tests/gpu/gpu_probe" >/dev/null || exit 77
for p in curand_seeded lt_gemm; do
  [ -x "$programs/$p" ] || { echo "$programs/$p is not built: skipped"; exit 77; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-gpu-annotations-XXXXXX")
keep=0
cleanup() { [ $keep -eq 1 ] && echo "  (files kept in $work)" || rm -rf "$work"; }
trap cleanup EXIT
status=0
pass() { echo "PASS annotations: $*"; }
fail() { echo "FAIL annotations: $*"; status=1; keep=1; }

# record NAME COMMAND...: records into $work/NAME.gpurr; false (after a FAIL
# line) when the command or the recording fails.
record() {
  local name=$1
  shift
  if ! "$gpurr" record --force -o "$work/$name.gpurr" -- "$@" >"$work/$name.out" 2>"$work/$name.err"; then
    fail "recording $name failed:"
    tail -20 "$work/$name.err" | sed 's/^/  /'
    return 1
  fi
}

# rng_pair NAME SEED_A SEED_B: the diff of the two recordings names RNG state
# and both seeds (--force: the two runs differ in their arguments, the seeds).
rng_pair() {
  local name=$1 a=$2 b=$3
  "$gpurr" diff --force "$work/$name-$a.gpurr" "$work/$name-$b.gpurr" >"$work/$name.diff" 2>&1
  if grep -q "cause    RNG state" "$work/$name.diff" && grep -q "seed=$a" "$work/$name.diff" &&
     grep -q "seed=$b" "$work/$name.diff"; then
    pass "$name with seeds $a and $b: RNG state, both seeds named"
  else
    fail "$name with seeds $a and $b: the diff does not name RNG state with both seeds:"
    sed 's/^/  /' "$work/$name.diff" | head -30
  fi
}

# 1. cuRAND, two seeds.
if record curand-11 "$programs/curand_seeded" 11 && record curand-22 "$programs/curand_seeded" 22; then
  rng_pair curand 11 22
  if "$gpurr" dump "$work/curand-11.gpurr" | grep -q "rng curand seed=11"; then
    pass "cuRAND generation launches carry the generator's seed"
  else
    fail "no launch of curand_seeded carries 'rng curand seed=11'"
  fi
fi

# 2. cuBLASLt GEMM.
if record lt_gemm "$programs/lt_gemm"; then
  "$gpurr" dump "$work/lt_gemm.gpurr" >"$work/lt_gemm.dump"
  if grep -q "algo cublasLt cublasLtMatmul algo=[0-9]* tile=" "$work/lt_gemm.dump"; then
    pass "cuBLASLt GEMM launches carry the decoded algorithm ($(grep -o 'algo=[0-9]* tile=[0-9]*' "$work/lt_gemm.dump" | head -1))"
  else
    fail "no launch of lt_gemm carries a decoded cublasLtMatmul algorithm:"
    grep -i "cublas\|algo" "$work/lt_gemm.dump" | head -10 | sed 's/^/  /'
  fi
  if "$gpurr" dump --json "$work/lt_gemm.gpurr" 2>/dev/null | grep -q '"candidates": *\[ *{'; then
    pass "the heuristic's candidates are recorded"
  else
    echo "  (candidates not checked: gpurr dump --json gave none)"
  fi
fi

# 3 and 4. PyTorch.
"$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 77)" 2>/dev/null
if [ $? -ne 0 ]; then
  echo "SKIP annotations: PyTorch checks (no PyTorch with CUDA for $python)"
else
  if record conv "$python" "$here/torch_annotations.py" conv; then
    "$gpurr" dump "$work/conv.gpurr" >"$work/conv.dump"
    if grep -q "algo cudnn cudnnBackendExecute engine=[0-9]" "$work/conv.dump"; then
      pass "cudnn.benchmark conv net: launches carry the chosen engines ($(grep -o 'engine=[0-9]*' "$work/conv.dump" | sort -u | tr '\n' ' '))"
    else
      fail "no launch of the conv net carries a cuDNN engine:"
      grep -i "cudnn" "$work/conv.dump" | head -10 | sed 's/^/  /'
    fi
    # The Linear layer's GEMM goes through cuBLAS or cuBLASLt, which PyTorch
    # loads RTLD_LOCAL: the wrappers must reach the real library.
    if grep -qE "algo cublas(Lt)? cublas" "$work/conv.dump"; then
      pass "the Linear layer's GEMM launches carry the cuBLAS call ($(grep -oE 'algo cublas(Lt)? cublas[A-Za-z_0-9]*' "$work/conv.dump" | sort -u | tr '\n' ' '))"
    else
      fail "no launch of the conv net carries a cuBLAS or cuBLASLt annotation:"
      grep -i "gemm\|cublas" "$work/conv.dump" | head -10 | sed 's/^/  /'
    fi
  fi
  if record dropout-1 "$python" "$here/torch_annotations.py" dropout 1 &&
     record dropout-2 "$python" "$here/torch_annotations.py" dropout 2; then
    rng_pair dropout 1 2
  fi
fi
exit $status
