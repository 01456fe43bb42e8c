#!/usr/bin/env bash
# tests/gpu/run.sh BUILD_DIR [PART...]: the GPU suite against an existing
# build (it builds nothing), on a machine with a GPU, python3 and PyTorch.
# BUILD_DIR is a build folder or a bundle made from one by
# scripts/gpu_bundle.sh (the same layout, stripped, for a GPU machine).
# PARTs (default: all, in this order):
#   0. probe: the GPU probes (probe/run_probes.sh): answers to the questions
#      about CUDA 13, CUPTI and PyTorch that only a GPU gives; its report is
#      saved as probes.txt in the logs folder;
#   1. programs: each program of expectations.txt recorded twice with
#      BUILD_DIR/bin/gpurr record and the traces compared launch by launch;
#   2. pytorch: the PyTorch training script: output unchanged by recording, two
#      recordings identical, launch count equal to torch.profiler's;
#   2b. annotations: the library annotations (annotations/check_annotations.sh);
#   2c. bisect: gpurr bisect on PyTorch scripts (bisect/check_bisect.py);
#   2d. wheel: the wheel a bundle carries, pip-installed into a fresh
#       environment, records train_cnn.py (check_wheel_gpu.sh);
#   2e. frameworks: torch.compile, CUDA graphs, torchrun, JAX and
#       torch.profiler programs recorded (frameworks/check_frameworks.sh);
#   3. hash: the device hash against the CPU hash (hash_match), when built;
#   4. ctest: every other ctest test labelled gpu.
# Prints one line per check and a summary; exits non-zero when a check fails.
# Each check is stopped after GPURR_CHECK_TIMEOUT seconds (default 900);
# logs go to GPURR_GPU_LOGS (default a new folder under TMPDIR).
# The build folder may have been copied from another machine: its binaries
# find their libraries through their RPATH (BUILD_DIR/lib), not the
# environment.
set -u
here=$(cd "$(dirname "$0")" && pwd)
all_parts="probe programs pytorch annotations bisect wheel frameworks hash ctest"
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: tests/gpu/run.sh BUILD_DIR|BUNDLE [PART...]   (parts: $all_parts)" >&2
  exit 2
fi
build=$(cd "$1" && pwd -P)
shift
parts=${*:-$all_parts}
for p in $parts; do
  case " $all_parts " in
    *" $p "*) ;;
    *) echo "tests/gpu/run.sh: unknown part '$p' (parts: $all_parts)" >&2; exit 2 ;;
  esac
done
wanted() { case " $parts " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
passed=0
failed=0
skipped=0
failures=()
if [ -n "${GPURR_GPU_LOGS:-}" ]; then
  log=$GPURR_GPU_LOGS
  mkdir -p "$log"
else
  log=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-gpu-run-XXXXXX")
fi

pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); failures+=("$1"); }
skip() { echo "SKIP $1"; skipped=$((skipped + 1)); }

# Runs a check script. Its PASS/FAIL lines count one check each; a script
# that prints none counts as one check, `name`, by its exit status (77:
# skipped).
check() {
  local name=$1
  shift
  local out=$log/${name// /_}.log
  timeout "${GPURR_CHECK_TIMEOUT:-900}" "$@" >"$out" 2>&1
  local rc=$?
  [ $rc -eq 124 ] && echo "stopped after ${GPURR_CHECK_TIMEOUT:-900} s (GPURR_CHECK_TIMEOUT)" >>"$out"
  grep -v '^PASS \|^FAIL ' "$out" | sed 's/^/    /'
  if [ $rc -eq 77 ]; then
    skip "$name"
    return
  fi
  local p f line
  p=$(grep -c '^PASS ' "$out")
  f=$(grep -c '^FAIL ' "$out")
  if [ $((p + f)) -eq 0 ]; then
    if [ $rc -eq 0 ]; then pass "$name"; else fail "$name (exit status $rc)"; fi
    return
  fi
  while IFS= read -r line; do
    case $line in
      'PASS '*) pass "${line#PASS }" ;;
      'FAIL '*) fail "${line#FAIL }" ;;
    esac
  done < <(grep '^PASS \|^FAIL ' "$out")
  [ $rc -ne 0 ] && [ "$f" -eq 0 ] && fail "$name (exit status $rc)"
}

echo "gpurr GPU suite: build $build"
for f in "$build/bin/gpurr" "$build/lib/libgpurr_recorder.so" "$build/tests/gpu/gpu_probe"; do
  [ -e "$f" ] || { echo "error: $f is missing: build everything (ninja -C BUILD_DIR) first" >&2; exit 2; }
done
if ! probe=$("$build/tests/gpu/gpu_probe"); then
  echo "no GPU on this machine ($probe): nothing to run"
  for p in $parts; do skip "$p (no GPU)"; done
  exit 77
fi
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
echo "machine: $probe${gpu:+; $gpu}"
echo "python3: $(python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null || echo 'no torch')"

# CUDA libraries (CUPTI for the recorder; cuBLAS, cuDNN, cuRAND for the test
# programs) may live in PyTorch's wheels rather than the system: where the
# system lacks them, they are looked up there.
extra=$(python3 "$here/wheel_lib_dirs.py" 2>/dev/null)

# The bundled libraries must resolve from BUILD_DIR/lib by RPATH alone; CUDA's
# from the system, else from PyTorch's wheels.
bundled='libcapnp-0.9.2.so|libkj-0.9.2.so|libzstd.so.1|libxxhash.so.0|libfmt.so.9'
deps=$(env -u LD_LIBRARY_PATH ldd "$build/bin/gpurr" "$build/lib/libgpurr_recorder.so" 2>&1)
libdir=$(readlink -f "$build/lib")
elsewhere=""
while read -r name _ path _; do
  if [ "$path" = "not" ]; then
    elsewhere+="$name (not found) "
  elif [ "$(readlink -f "$(dirname "$path")")" != "$libdir" ]; then
    elsewhere+="$name ($path) "
  fi
done < <(grep -E "^[[:space:]]+($bundled) => " <<<"$deps")
if [ -n "$elsewhere" ]; then
  fail "bundled libraries do not resolve from $build/lib: $elsewhere"
else
  pass "bundled libraries resolve from $build/lib"
fi
if grep -q "not found" <<<"$deps"; then
  if [ -n "$extra" ] && ! LD_LIBRARY_PATH=$extra ldd "$build/lib/libgpurr_recorder.so" | grep -q "not found"; then
    echo "  CUDA libraries the system lacks are taken from PyTorch's wheels"
    export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$extra
  else
    fail "libraries not found: $(grep "not found" <<<"$deps" | tr -s ' \t\n' ' ')"
  fi
fi

# 0. The probes: one report; a probe that fails to answer is a failed check.
if wanted probe; then
  if [ -x "$build/tests/gpu/probe/cupti_probe" ]; then
    timeout "${GPURR_CHECK_TIMEOUT:-900}" "$here/probe/run_probes.sh" "$build" >"$log/probes.txt" 2>&1
    rc=$?
    sed -n '/^== summary/,$p' "$log/probes.txt" | sed 's/^/    /'
    if [ $rc -eq 77 ]; then
      skip "probes"
    elif [ $rc -ne 0 ]; then
      fail "probes (exit status $rc; report in $log/probes.txt)"
    elif grep -q '^PROBE [^ ]* \(stopped-after\|exited-\)' "$log/probes.txt"; then
      fail "probes: $(grep -c '^PROBE [^ ]* \(stopped-after\|exited-\)' "$log/probes.txt") probe program(s) stopped or crashed (report in $log/probes.txt)"
    else
      pass "probes answered ($(grep -c '^PROBE ' "$log/probes.txt") answers in $log/probes.txt)"
    fi
  else
    skip "probes ($build/tests/gpu/probe/cupti_probe is not built)"
  fi
fi

# 1. The CUDA programs, each recorded twice.
if wanted programs; then
  while read -r program options; do
    case $program in '' | '#'*) continue ;; esac
    binary=$build/tests/gpu/programs/$program
    if [ ! -x "$binary" ]; then
      fail "record $program: $binary is not built"
      continue
    fi
    if [ -n "$extra" ] && ldd "$binary" | grep -q "not found"; then
      export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$extra
    fi
    # shellcheck disable=SC2086  # options are words by design
    check "record $program" "$here/check_program.sh" "$build" "$binary" $options
  done <"$here/expectations.txt"
fi

# 2. PyTorch.
wanted pytorch && check "pytorch train_cnn.py" "$here/check_pytorch.sh" "$build"

# 2b. The algorithm choices and RNG state of library calls.
wanted annotations && check "library annotations" "$here/annotations/check_annotations.sh" "$build"

# 2c. gpurr bisect on unmodified PyTorch scripts (bisect/expectations.txt).
wanted bisect && check "gpurr bisect" python3 "$here/bisect/check_bisect.py" "$build"

# 2d. The pip route: the bundle's wheel installed and used.
wanted wheel && check "wheel" "$here/check_wheel_gpu.sh" "$build"

# 2e. Programs of other shapes: compiled, graphed, distributed, JAX, profiled.
wanted frameworks && check "frameworks" "$here/frameworks/check_frameworks.sh" "$build"

# 3. The device hash against the CPU reference.
if wanted hash; then
  ran_by_name=()
  for hm in "$build/tests/gpu/hash_match/hash_match" "$build/tests/gpu/hash_match"; do
    if [ -f "$hm" ] && [ -x "$hm" ]; then
      check "hash_match" "$hm"
      ran_by_name+=(hash_match)
      break
    fi
  done
  [ ${#ran_by_name[@]} -eq 0 ] && echo "(no hash_match in this build)"
fi

# 4. The other GPU tests registered with ctest. A build folder copied from
# another machine names that machine's paths in its test files: point them
# at where the build and the sources are now (the build is a copy anyway).
configured=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
configured_source=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
source=$(cd "$here/../.." && pwd -P)
if [ -n "$configured" ] && [ -n "$configured_source" ] &&
   { [ "$configured" != "$build" ] || [ "$configured_source" != "$source" ]; }; then
  echo "  the build was configured as $configured (sources $configured_source); its test files now name $build (sources $source)"
  find "$build" \( -name CTestTestfile.cmake -o -name '*_include-*.cmake' -o -name '*_tests-*.cmake' \) -print0 |
    xargs -0 -r sed -i -e "s#$configured#@GPURR_BUILD@#g" -e "s#$configured_source#@GPURR_SOURCE@#g" \
      -e "s#@GPURR_BUILD@#$build#g" -e "s#@GPURR_SOURCE@#$source#g"
fi
if ! wanted ctest; then
  :
elif [ ! -f "$build/CTestTestfile.cmake" ]; then
  skip "ctest -L gpu (no ctest files in $build)"
elif ! command -v ctest >/dev/null; then
  skip "ctest -L gpu (no ctest on this machine)"
else
  exclude='^(gpu_record_|gpu_pytorch_|gpu_library_annotations$|gpu_bisect$|hash_match$)'
  if (cd "$build" && ctest -L gpu -E "$exclude" --output-on-failure) >"$log/ctest.log" 2>&1; then
    pass "ctest -L gpu, the other GPU tests ($(grep -o '[0-9]*% tests passed.*\|No tests were found' "$log/ctest.log" | head -1))"
  else
    sed 's/^/    /' "$log/ctest.log" | tail -40
    fail "ctest -L gpu, the other GPU tests"
  fi
fi

echo
echo "gpurr GPU suite: $passed passed, $failed failed, $skipped skipped"
for f in "${failures[@]}"; do echo "  failed: $f"; done
echo "logs: $log"
[ $failed -eq 0 ]
