#!/usr/bin/env bash
# gpurr's test command: installs what is missing, builds (a compiler warning
# fails the build), builds the wheel (dist/, which the `wheel` test installs
# and uses), runs every test this machine can run (GPU tests only where a GPU
# is present; `seams` holds the folders' rules, scripts/check_seams.py), then
# a short fuzz run of the trace reader.
#
#   scripts/test.sh            GPURR_FUZZ_SECONDS=N to change the fuzz run (default 60, 0 skips)
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
# A build folder made here keeps line tables only (-g1: backtraces still
# name files and lines), about a quarter faster to compile than -g; one that
# exists keeps its configuration.
configure=(-DGPURR_WERROR=ON)
[ -f build/CMakeCache.txt ] || configure+=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
cmake -S . -B build -G Ninja "${configure[@]}"
cmake --build build
./scripts/build_wheel.sh dist

if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
  labels=()
else
  echo "test: no GPU here: tests labelled 'gpu' are skipped"
  labels=(-LE gpu)
fi
ctest --test-dir build --output-on-failure -j "$(nproc)" "${labels[@]}"

seconds=${GPURR_FUZZ_SECONDS:-60}
if [ "$seconds" -gt 0 ]; then
  ./scripts/fuzz.sh "$seconds"
fi
