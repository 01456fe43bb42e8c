#!/usr/bin/env bash
# Builds the trace reader fuzzer (clang, libFuzzer, ASan + UBSan) in
# build-fuzz and runs it for SECONDS (default 60) over a copy of
# tests/fuzz/corpus. Exits non-zero when the fuzzer finds anything (crash,
# sanitizer report, leak, timeout, out-of-memory); the input that caused it
# is kept in build-fuzz/findings/. Inputs worth keeping go to
# tests/fuzz/corpus/ as regress-<what>.
#
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail

seconds=${1:-60}
if ! [[ $seconds =~ ^[0-9]+$ ]] || (( $# > 1 )); then
  echo "usage: scripts/fuzz.sh [SECONDS]" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
cxx=$(command -v clang++-14 || command -v clang++ || true)
cc=$(command -v clang-14 || command -v clang || true)
if [[ -z $cxx || -z $cc ]]; then
  echo "fuzz.sh: clang with libFuzzer is needed (apt-get install clang)" >&2
  exit 1
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DGPURR_FUZZ=ON -DGPURR_CUDA=OFF -DGPURR_TESTS=OFF >/dev/null
ninja -C "$build" -j"${GPURR_FUZZ_BUILD_JOBS:-2}" gpurr_reader_fuzzer

# Fuzz a copy: the fuzzer adds every input that finds new coverage.
run=$build/fuzz-run
findings=$build/findings
rm -rf "$run"
mkdir -p "$run/corpus" "$findings"
cp "$root"/tests/fuzz/corpus/* "$run/corpus/"
export GPURR_FUZZ_TMP
GPURR_FUZZ_TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-fuzz-run.XXXXXX")
if [[ -d /dev/shm ]]; then
  rm -rf "$GPURR_FUZZ_TMP"
  GPURR_FUZZ_TMP=$(mktemp -d /dev/shm/gpurr-fuzz-run.XXXXXX)
fi
trap 'rm -rf "$GPURR_FUZZ_TMP"' EXIT

before=$(find "$findings" -type f | wc -l)
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0
status=0
# malloc_limit: nothing may allocate more than twice the reader's own
# limits (256 MiB per block) because a file said so.
"$build/tests/fuzz/gpurr_reader_fuzzer" "$run/corpus" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 \
  -artifact_prefix="$findings/" -print_final_stats=1 || status=$?
after=$(find "$findings" -type f | wc -l)
if (( status != 0 || after > before )); then
  echo "fuzz.sh: the reader fuzzer found a problem (exit $status); inputs in $findings:" >&2
  ls -l "$findings" >&2
  exit 1
fi
echo "fuzz.sh: $seconds s of fuzzing found nothing"
