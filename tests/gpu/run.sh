#!/usr/bin/env bash
# tests/gpu/run.sh BUILD_DIR [PART...]: the GPU suite against an existing
# build (it builds nothing), on a machine with a GPU, python3 and PyTorch.
# BUILD_DIR is a build folder or a bundle made from one by
# scripts/gpu_bundle.sh (the same layout, stripped, for a GPU machine).
# PARTs run in the order given (default: all, in this order):
#   probe: the GPU probes (probe/run_probes.sh): answers to the questions
#     about CUDA 13, CUPTI and PyTorch that only a GPU gives; its report is
#     saved as probes.txt in the logs folder;
#   programs: each program of expectations.txt recorded twice with
#     BUILD_DIR/bin/gpurr record and the traces compared launch by launch;
#   pytorch: the PyTorch training script: output unchanged by recording, two
#     recordings identical, launch count equal to torch.profiler's (its runs'
#     files in pytorch/ of the logs folder);
#   annotations: the library annotations (annotations/check_annotations.sh);
#   bisect: gpurr bisect on PyTorch scripts (bisect/check_bisect.py), each
#     bisect's folder (reports, logs, traces) in bisect/ of the logs folder;
#   wheel: the wheel a bundle carries, pip-installed into a fresh
#     environment, records train_cnn.py (check_wheel_gpu.sh);
#   frameworks: torch.compile, CUDA graphs, torchrun, JAX and
#     torch.profiler programs recorded (frameworks/check_frameworks.sh), each
#     case's files (outputs, diffs, gpurr info, traces) in frameworks/ of the
#     logs folder;
#   models: transformers, torchvision, timm, torch-geometric and Lightning
#     models recorded, diffed and bisected (models/check_models.py), their
#     runs' files and the cost table in models/ of the logs folder;
#   hash: the device hash against the CPU hash (hash_match), when built;
#   ctest: every other ctest test labelled gpu;
#   example: the pair of traces for examples/gpu/ (make_example.sh), written
#     to example/ in the logs folder;
#   bench: the GPU benchmarks, side by side (bench/step_time.sh,
#     bench/step_breakdown.sh, unit_costs, callback_bench, callback_bench_dlopen, gpu_hash_bench,
#     snapshot_bench, blob_bench, replay_bench, bench/bisect_time.sh).
# Prints one line per check and a summary; exits non-zero when a check fails.
# Each check is stopped after GPURR_CHECK_TIMEOUT seconds (default 900);
# logs go to GPURR_GPU_LOGS (default a new folder under TMPDIR).
# For a machine lent for a fixed time:
#   GPURR_DEADLINE (seconds since 1970): no check runs past it; a part that
#     would start less than a minute before it is not started, and the parts
#     not reached are listed (and saved as not_reached.txt in the logs);
#   GPURR_GPU_TAR (a .tgz path): the logs folder is tarred there after every
#     check, so that a command stopped at its limit still leaves them
#     (files over 8 MiB, the traces the pytorch, bisect and frameworks
#     checks keep, and the other traces once they pass 8 MiB together, are
#     left out and listed in left_out.txt).
# The build folder may have been copied from another machine: its binaries
# find their libraries through their RPATH (BUILD_DIR/lib), not the
# environment.
set -u
here=$(cd "$(dirname "$0")" && pwd)
all_parts="probe programs pytorch annotations bisect wheel frameworks models hash ctest example bench"
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
deadline=${GPURR_DEADLINE:-}
case $deadline in
  '' | *[!0-9]*) [ -n "$deadline" ] && { echo "tests/gpu/run.sh: GPURR_DEADLINE must be seconds since 1970, not '$deadline'" >&2; exit 2; } ;;
esac
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
log=$(cd "$log" && pwd -P)
case ${GPURR_GPU_TAR:-} in '' | /*) ;; *) GPURR_GPU_TAR=$PWD/$GPURR_GPU_TAR ;; esac

pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); failures+=("$1"); }
skip() { echo "SKIP $1"; skipped=$((skipped + 1)); }

# The logs folder, tarred where GPURR_GPU_TAR says (written aside, then
# moved, so that the tarball is whole whenever the command is stopped).
# Files over 8 MiB are left out, and so are the traces the pytorch, bisect
# and frameworks checks keep (their outputs, diffs, reports and `gpurr info`
# say what they hold), and the other traces' files (the example pair's, the
# models') once they pass 8 MiB together: the tarball has to stay small
# enough to come back from a remote machine.
save_logs() {
  [ -n "${GPURR_GPU_TAR:-}" ] || return 0
  (cd "$(dirname "$log")" && b=$(basename "$log") &&
    kept=(-path "$b/pytorch/*.gpurr/*" -o -path "$b/bisect/*.gpurr/*" -o -path "$b/frameworks/*.gpurr/*") &&
    traces=$(find "$b" -path '*.gpurr/*' -type f ! \( "${kept[@]}" \) -printf '%s\n' |
      awk '{s += $1} END {print s + 0}') &&
    big=(\( -size +8388608c -o "${kept[@]}" \)) &&
    if [ "$traces" -gt 8388608 ]; then big=(\( "${big[@]}" -o -path '*.gpurr/*' \)); fi &&
    find "$b" -type f "${big[@]}" >"$log/left_out.txt" &&
    find "$b" -type f ! "${big[@]}" -print0 |
      tar czf "$GPURR_GPU_TAR.part" --null -T - &&
    mv -f "$GPURR_GPU_TAR.part" "$GPURR_GPU_TAR")
}

# The seconds a check may take: GPURR_CHECK_TIMEOUT, or less where the
# deadline is nearer (ten seconds kept for the summary and the tarball).
limit() {
  local l=${GPURR_CHECK_TIMEOUT:-900}
  if [ -n "$deadline" ]; then
    local left=$((deadline - $(date +%s) - 10))
    [ $left -lt $l ] && l=$left
  fi
  echo $l
}

# Runs a check script. Its PASS/FAIL lines count one check each; a script
# that prints none counts as one check, `name`, by its exit status (77:
# skipped), failed where it prints a line "goal missed: ..." (a benchmark).
check() {
  local name=$1
  shift
  local out=$log/${name// /_}.log
  local l
  l=$(limit)
  if [ "$l" -lt 1 ]; then
    echo "not run: GPURR_DEADLINE reached" >"$out"
    skip "$name (GPURR_DEADLINE reached)"
    return
  fi
  timeout -k 10 "$l" "$@" >"$out" 2>&1
  local rc=$?
  { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && echo "stopped after $l s (GPURR_CHECK_TIMEOUT or GPURR_DEADLINE)" >>"$out"
  grep -v '^PASS \|^FAIL ' "$out" | sed 's/^/    /'
  save_logs
  if [ $rc -eq 77 ]; then
    skip "$name"
    return
  fi
  local p f line
  p=$(grep -c '^PASS ' "$out")
  f=$(grep -c '^FAIL ' "$out")
  if [ $((p + f)) -eq 0 ]; then
    if grep -q '^goal missed: ' "$out"; then
      fail "$name: goal missed: $(sed -n 's/^goal missed: //p' "$out" | paste -sd ';' | sed 's/;/; /g')"
    elif [ $rc -eq 0 ]; then pass "$name"; else fail "$name (exit status $rc)"; fi
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
[ -n "$deadline" ] && echo "deadline: $(date -u -d "@$deadline" '+%H:%M:%S UTC'), $((deadline - $(date +%s))) s from now"

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

# The probes: one report; a probe that fails to answer is a failed check.
part_probe() {
  if [ ! -x "$build/tests/gpu/probe/cupti_probe" ]; then
    skip "probes ($build/tests/gpu/probe/cupti_probe is not built)"
    return
  fi
  timeout -k 10 "$(limit)" "$here/probe/run_probes.sh" "$build" >"$log/probes.txt" 2>&1
  local rc=$?
  save_logs
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
}

# The CUDA programs, each recorded twice.
part_programs() {
  local program options binary
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
}

# PyTorch; its files kept in pytorch/ of the logs.
part_pytorch() { check "pytorch train_cnn.py" env GPURR_GPU_KEEP="$log/pytorch" "$here/check_pytorch.sh" "$build"; }

# The algorithm choices and RNG state of library calls.
part_annotations() { check "library annotations" "$here/annotations/check_annotations.sh" "$build"; }

# gpurr bisect on unmodified PyTorch scripts (bisect/expectations.txt).
# GPURR_BISECT_ONLY="a.py b.py" narrows it to those scripts. Each bisect's
# folder and logs kept in bisect/ of the logs.
part_bisect() {
  local only=() s
  for s in ${GPURR_BISECT_ONLY:-}; do only+=(--only "$s"); done
  check "gpurr bisect" python3 "$here/bisect/check_bisect.py" "$build" --keep "$log/bisect" "${only[@]}"
}

# The pip route: the bundle's wheel installed and used.
part_wheel() { check "wheel" "$here/check_wheel_gpu.sh" "$build"; }

# Programs of other shapes: compiled, graphed, distributed, JAX, profiled.
# GPURR_FRAMEWORKS="name..." narrows it to those programs, in that order.
# Each case's files kept in frameworks/ of the logs.
part_frameworks() {
  # shellcheck disable=SC2086  # names are words by design
  check "frameworks" env GPURR_GPU_KEEP="$log/frameworks" "$here/frameworks/check_frameworks.sh" "$build" \
    ${GPURR_FRAMEWORKS:-}
}

# The models people train (models/expectations.txt). GPURR_MODELS="case..."
# narrows it to those cases.
part_models() {
  local only=() c
  for c in ${GPURR_MODELS:-}; do only+=(--only "$c"); done
  python3 "$here/models/check_models.py" --help >/dev/null || { fail "models: check_models.py does not start"; return; }
  check "models" python3 "$here/models/check_models.py" "$build" --keep "$log/models" "${only[@]}"
}

# The device hash against the CPU reference.
part_hash() {
  local hm
  for hm in "$build/tests/gpu/hash_match/hash_match" "$build/tests/gpu/hash_match"; do
    if [ -f "$hm" ] && [ -x "$hm" ]; then
      check "hash_match" "$hm"
      return
    fi
  done
  echo "(no hash_match in this build)"
}

# The other GPU tests registered with ctest. A build folder copied from
# another machine names that machine's paths in its test files: point them
# at where the build and the sources are now (the build is a copy anyway).
part_ctest() {
  local configured configured_source source
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
  if [ ! -f "$build/CTestTestfile.cmake" ]; then
    skip "ctest -L gpu (no ctest files in $build)"
  elif ! command -v ctest >/dev/null; then
    skip "ctest -L gpu (no ctest on this machine)"
  else
    local exclude='^(gpu_record_|gpu_pytorch_|gpu_library_annotations$|gpu_bisect$|gpu_models$|hash_match$)'
    if (cd "$build" && timeout -k 10 "$(limit)" ctest -L gpu -E "$exclude" --output-on-failure) >"$log/ctest.log" 2>&1; then
      pass "ctest -L gpu, the other GPU tests ($(grep -o '[0-9]*% tests passed.*\|No tests were found' "$log/ctest.log" | head -1))"
    else
      sed 's/^/    /' "$log/ctest.log" | tail -40
      fail "ctest -L gpu, the other GPU tests"
    fi
    save_logs
  fi
}

# The pair of traces for examples/gpu/ and the README's quick start.
part_example() { check "example" "$here/make_example.sh" "$build" "$log/example"; }

# The benchmarks: figures, each benchmark a check (a missed goal fails it:
# those with a goal print "goal missed: ..." after their figures and exit 1).
# GPURR_BENCH="name..." narrows it to those, in this order (names: step_time
# step_breakdown unit_costs callback_bench callback_bench_dlopen
# gpu_hash_bench snapshot_bench blob_bench replay_bench bisect_time
# bisect_until), and
# GPURR_BENCH_WORKLOADS="mlp" step_breakdown's workloads (default both, mlp
# and cnn). unit_costs and callback_bench take a second or two: what each
# call the launch path counts costs here, and those counts with this
# machine's cores to spare (the build machines' two are shared with the fake
# GPU's hashing).
part_bench() {
  local bench=$here/../../bench b
  local chosen=" ${GPURR_BENCH:-step_time step_breakdown unit_costs callback_bench callback_bench_dlopen \
gpu_hash_bench snapshot_bench blob_bench replay_bench bisect_time bisect_until} "
  local workloads=(${GPURR_BENCH_WORKLOADS:-})
  wants() { [[ $chosen == *" $1 "* ]]; }
  wants step_time && check "bench step_time" "$bench/step_time.sh" "$build" 3
  wants step_breakdown && check "bench step_breakdown" "$bench/step_breakdown.sh" "$build" "${workloads[@]}"
  for b in unit_costs callback_bench callback_bench_dlopen gpu_hash_bench snapshot_bench blob_bench replay_bench; do
    wants $b || continue
    if [ -x "$build/bench/$b" ]; then
      check "bench $b" "$build/bench/$b"
    else
      skip "bench $b (not built)"
    fi
  done
  wants bisect_time && check "bench bisect_time" "$bench/bisect_time.sh" "$build" index_add.py
  # Time to an answer: 20 steps diverging in step 0 (goal bisect/plain <= 1.5).
  wants bisect_until && check "bench bisect_time --until-step 19" "$bench/bisect_time.sh" --until-step 19 "$build"
  return 0
}

not_reached=()
for p in $parts; do
  # A part started less than a minute before the deadline would leave only
  # a stopped log: the parts from there on are listed for the next command.
  if [ -n "$deadline" ] && [ $((deadline - $(date +%s))) -lt 60 ]; then
    not_reached+=("$p")
    continue
  fi
  echo "== $p ($(date -u '+%H:%M:%S'))"
  "part_$p"
done
if [ ${#not_reached[@]} -gt 0 ]; then
  echo "${not_reached[*]}" >"$log/not_reached.txt"
  for p in "${not_reached[@]}"; do skip "$p (not reached before GPURR_DEADLINE)"; done
fi
save_logs

echo
echo "gpurr GPU suite: $passed passed, $failed failed, $skipped skipped"
for f in "${failures[@]}"; do echo "  failed: $f"; done
[ ${#not_reached[@]} -gt 0 ] && echo "not reached (next command): tests/gpu/run.sh $build ${not_reached[*]}"
echo "logs: $log"
[ $failed -eq 0 ]
