#!/usr/bin/env bash
# scripts/gpu_bundle.sh BUILD_DIR OUT_DIR [WHEEL]: a stripped, self-contained
# copy of what the GPU suite (tests/gpu/run.sh) runs, small enough to carry to
# a GPU machine that has CUDA, cuDNN, Python and PyTorch but none of gpurr's
# other libraries.
#
# With WHEEL (scripts/build_wheel.sh's), the bundle is that wheel plus the
# GPU tests: gpurr itself (bin/gpurr, lib/libgpurr_*, share/gpurr/) comes
# from the wheel, so the suite checks what users install, and the wheel
# travels in OUT_DIR/wheel/ for the suite's `wheel` part (pip install on
# the GPU machine). The test programs still come from BUILD_DIR.
#
# OUT_DIR keeps the build folder's layout, so `tests/gpu/run.sh OUT_DIR`
# treats it as a build: bin/gpurr, lib/ (the recorder and the Cap'n Proto,
# kj, zstd, xxhash and fmt libraries every binary finds through its RPATH),
# the GPU test programs under tests/, the GPU benchmarks under bench/, and a
# CTestTestfile.cmake holding only the tests labelled `gpu`. The scripts,
# PyTorch programs and checkers come from the source tree beside run.sh.
# Every ELF file is stripped of debug information and symbols it does not
# export. Prints the bundle's size; exits non-zero when something it needs is
# not built or a binary would load a library from outside the bundle. What it
# needs: bin/gpurr, lib/libgpurr_recorder.so and PyTorch's two layers,
# lib/libgpurr_torch.so (op names) and lib/libgpurr_torch_cuda.so (the CUDA
# caching allocator's blocks), which framework/CMakeLists.txt leaves out
# without a word where GPURR_TORCH_PYTHON has no PyTorch or its PyTorch no
# libc10_cuda.so: a bundle without them would record less than users get.
set -euo pipefail
usage="usage: scripts/gpu_bundle.sh BUILD_DIR OUT_DIR [WHEEL]"
build=$(cd "${1:?$usage}" && pwd -P)
out=${2:?$usage}
wheel=${3:-}
if [ -n "$wheel" ]; then
  [ -f "$wheel" ] || { echo "gpu_bundle: no wheel $wheel (scripts/build_wheel.sh makes it)" >&2; exit 2; }
  wheel=$(cd "$(dirname "$wheel")" && pwd -P)/$(basename "$wheel")
fi
[ -x "$build/bin/gpurr" ] || { echo "gpu_bundle: $build/bin/gpurr is not built (cmake --build $build)" >&2; exit 2; }
[ -f "$build/lib/libgpurr_recorder.so" ] ||
  { echo "gpu_bundle: $build/lib/libgpurr_recorder.so is not built (configure with the CUDA toolkit)" >&2; exit 2; }
[ -f "$build/lib/libgpurr_torch.so" ] ||
  { echo "gpu_bundle: $build/lib/libgpurr_torch.so is not built: configure with GPURR_TORCH_PYTHON naming a" \
      "Python whose PyTorch imports (framework/CMakeLists.txt skips it otherwise)" >&2; exit 2; }
[ -f "$build/lib/libgpurr_torch_cuda.so" ] ||
  { echo "gpu_bundle: $build/lib/libgpurr_torch_cuda.so is not built: GPURR_TORCH_PYTHON's PyTorch needs" \
      "lib/libc10_cuda.so (a CUDA build of PyTorch) and the CUDA toolkit must be found" \
      "(framework/CMakeLists.txt skips it otherwise)" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd -P)

is_elf() { [ -f "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

# copy RELATIVE_PATH: from the build folder into the bundle, stripped if ELF.
copy() {
  local rel=$1
  mkdir -p "$out/$(dirname "$rel")"
  cp -p "$build/$rel" "$out/$rel"
  if is_elf "$out/$rel"; then
    strip --strip-unneeded "$out/$rel"
  fi
}

copy bin/gpurr
for f in "$build"/lib/*; do
  [ -f "$f" ] && copy "lib/$(basename "$f")"
done
data=$(cd "$build" && find share -type f 2>/dev/null || true)
for f in $data; do copy "$f"; done

# gpurr itself from the wheel: what users install, already stripped.
if [ -n "$wheel" ]; then
  mkdir -p "$out/wheel" "$out/.unpacked"
  cp "$wheel" "$out/wheel/"
  python3 -m zipfile -e "$wheel" "$out/.unpacked"
  rm -f "$out"/lib/libgpurr_*
  cp -r "$out/.unpacked/gpurr/bin" "$out/.unpacked/gpurr/lib" "$out/.unpacked/gpurr/share" "$out/"
  chmod +x "$out/bin/gpurr"
  rm -rf "$out/.unpacked"
  for lib in libgpurr_recorder.so libgpurr_torch.so libgpurr_torch_cuda.so; do
    [ -f "$out/lib/$lib" ] ||
      { echo "gpu_bundle: the wheel $wheel has no gpurr/lib/$lib (scripts/build_wheel.sh from a build that has it)" >&2; exit 2; }
  done
fi

# Every program the suite's scripts run: the GPU test programs and checkers
# (tests/gpu/..., the snapshot check of tests/recorder) and the GPU
# benchmarks. Only executables: no object files, no CPU test binaries.
programs=$(cd "$build" && find tests/gpu tests/recorder/snapshot_determinism_check bench \
  -path '*/CMakeFiles' -prune -o -type f -perm -u+x -print 2>/dev/null | sort)
for rel in $programs; do
  case $rel in
    bench/diff_bench | bench/write_bench | tests/gpu/compare_traces_tests | tests/gpu/gpu_fake_program) continue ;;
  esac
  is_elf "$build/$rel" && copy "$rel"
done

# The ctest tests labelled gpu, as a CTestTestfile.cmake of their own; every
# file of the build folder they name comes along. CMakeCache.txt keeps the
# two paths run.sh rewrites when the bundle has moved.
(cd "$build" && ctest --show-only=json-v1 -L gpu) >"$out/.gpu-tests.json"
python3 - "$build" "$out" <<'EOF'
import json, os, shutil, sys

build, out = sys.argv[1], sys.argv[2]
tests = json.load(open(os.path.join(out, ".gpu-tests.json")))["tests"]
os.remove(os.path.join(out, ".gpu-tests.json"))

def arg(s):
    return "[==[" + s + "]==]"

lines = ["# The GPU tests of the build this bundle was made from (scripts/gpu_bundle.sh)."]
needed = set()
for t in tests:
    cmd = t.get("command") or []
    for word in cmd:
        if word.startswith(build + "/") and os.path.isfile(word):
            needed.add(os.path.relpath(word, build))
    lines.append("add_test(%s %s)" % (arg(t["name"]), " ".join(arg(w) for w in cmd)))
    props = []
    for p in t.get("properties", []):
        name, value = p["name"], p["value"]
        if name in ("LABELS", "ENVIRONMENT"):
            value = ";".join(value)
        elif name in ("SKIP_RETURN_CODE", "TIMEOUT", "WORKING_DIRECTORY"):
            value = str(value)
            if name == "WORKING_DIRECTORY" and value.startswith(build + "/"):
                os.makedirs(os.path.join(out, os.path.relpath(value, build)), exist_ok=True)
        else:
            continue
        props.append("%s %s" % (name, arg(value)))
    if props:
        lines.append("set_tests_properties(%s PROPERTIES %s)" % (arg(t["name"]), " ".join(props)))
open(os.path.join(out, "CTestTestfile.cmake"), "w").write("\n".join(lines) + "\n")
with open(os.path.join(out, ".needed"), "w") as f:
    f.write("\n".join(sorted(needed)) + "\n")
EOF
while read -r rel; do
  [ -n "$rel" ] && [ ! -e "$out/$rel" ] && copy "$rel"
done <"$out/.needed"
rm -f "$out/.needed"
grep -E '^CMAKE_(CACHEFILE_DIR|HOME_DIRECTORY):INTERNAL=' "$build/CMakeCache.txt" >"$out/CMakeCache.txt"

# Every binary must find gpurr's libraries inside the bundle, never on the
# system (the GPU machine has none of them).
bundled='libcapnp-0.9.2.so|libkj-0.9.2.so|libzstd.so.1|libxxhash.so.0|libfmt.so.9|libgpurr_'
problems=0
# (The copied third-party libraries have no RPATH of their own: they are
# found, and find each other, through the RPATH of the binary that loads
# them, so they are checked through those binaries.)
while IFS= read -r -d '' f; do
  is_elf "$f" || continue
  case ${f#"$out"/} in lib/libcapnp* | lib/libkj* | lib/libzstd* | lib/libxxhash* | lib/libfmt*) continue ;; esac
  while read -r name _ path _; do
    case $(readlink -f "$path") in
      "$out"/lib/*) ;;
      *) echo "gpu_bundle: ${f#"$out"/} loads $name from $path, not from the bundle" >&2; problems=1 ;;
    esac
  done < <(env -u LD_LIBRARY_PATH ldd "$f" 2>/dev/null | grep -E "^[[:space:]]+($bundled)[^ ]* => ")
done < <(find "$out" -type f -print0)
[ $problems -eq 0 ] || exit 1
echo "gpu_bundle: $out: $(du -sh "$out" | cut -f1) in $(find "$out" -type f | wc -l) files"
