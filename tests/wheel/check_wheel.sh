#!/usr/bin/env bash
# check_wheel.sh WHEEL_DIR BUILD_DIR: the wheel scripts/build_wheel.sh made,
# installed the way users install it (pip, into a fresh virtual environment),
# with this machine's Cap'n Proto, kj, zstd, xxhash and fmt hidden:
# - it is at most 25 MiB and auditwheel agrees with its manylinux tag (its
#   symbol versions; PyTorch's libraries aside);
# - every ELF file in it needs only glibc, libstdc++ and libgcc (PyTorch's
#   own libraries too for the PyTorch layer, loaded only after `import
#   torch`): libcuda and CUPTI are reached through dlopen;
# - the installed `gpurr` runs --version, info, diff --json and verify, and
#   bisects the CPU demo; `import gpurr` works; its recorder, started as the
#   driver starts it, loads the CUPTI of PyTorch's environment; on this machine, which has
#   no CUDA driver, `gpurr record -- true` says so in one line and exits 0,
#   and `gpurr bisect -- true` exits 2 naming the missing driver;
# - `pip uninstall gpurr` leaves no file behind;
# - the Debian package made beside it holds the same programs, and they run.
# Prints the wheel's size and the time `pip install` took (figures, not
# checks: see the README).
set -u
here=$(cd "$(dirname "$0")" && pwd)
source=$(cd "$here/../.." && pwd)
usage="usage: check_wheel.sh WHEEL_DIR BUILD_DIR"
dist=$(cd "${1:?$usage}" && pwd -P)
build=$(cd "${2:?$usage}" && pwd -P)
tools=${GPURR_WHEEL_TOOLS:-/opt/gpurr-wheel-tools}
version=$(sed -n 's/^project(gpurr VERSION \([0-9.]*\).*/\1/p' "$source/CMakeLists.txt")
wheel=$(ls "$dist"/gpurr-"$version"-py3-none-manylinux_2_35_x86_64.whl 2>/dev/null)
if [ -z "$wheel" ]; then
  echo "FAIL: no gpurr-$version-py3-none-manylinux_2_35_x86_64.whl in $dist: run scripts/build_wheel.sh"
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-wheel-XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }
limit_mib=25

size=$(stat -c %s "$wheel")
echo "wheel: $(basename "$wheel"), $((size / 1024)) KiB"
[ "$size" -le $((limit_mib * 1024 * 1024)) ] || fail "the wheel holds $((size / 1024 / 1024)) MiB, over $limit_mib MiB"
# auditwheel's own verdict: the symbol versions allow the tag, and the only
# libraries from outside are PyTorch's (the PyTorch layer's, loaded after
# `import torch`).
if [ -x "$tools/bin/auditwheel" ]; then
  "$tools/bin/auditwheel" show --json "$wheel" >"$work/show.json" 2>"$work/show.err"
  python3 - "$work/show.json" <<'PY' || fail "auditwheel show does not agree with manylinux_2_35_x86_64"
import json, sys
d = json.load(open(sys.argv[1]))
torch = {"libc10.so", "libc10_cuda.so", "libtorch_cpu.so"}
print(f"auditwheel show: symbols allow {d['sym_tag']}; libraries from outside the wheel: {sorted(d['external_libs'])}")
sys.exit(d["sym_tag"] != "manylinux_2_35_x86_64" or not set(d["external_libs"]) <= torch)
PY
else
  fail "no auditwheel in $tools (scripts/setup.sh installs it)"
fi

python3 -m venv "$work/venv" || { echo "FAIL: cannot make a virtual environment"; exit 1; }
venv=$work/venv
site=$("$venv/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
(cd "$venv" && find . -path ./bin -prune -o -print | sort) >"$work/before.txt"
start=$(date +%s.%N)
"$venv/bin/python3" -m pip install -q --disable-pip-version-check --no-index "$wheel" >"$work/pip.log" 2>&1 ||
  { cat "$work/pip.log"; echo "FAIL: pip install of the wheel failed"; exit 1; }
end=$(date +%s.%N)
printf "pip install: %.2f s into a fresh virtual environment\n" "$(echo "$end - $start" | bc)"
pkg=$site/gpurr
[ -x "$venv/bin/gpurr" ] || fail "pip put no gpurr command in the environment's bin/"

# Every ELF file: the libraries it needs.
allowed='^(libc\.so\.6|libm\.so\.6|libstdc\+\+\.so\.6|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1)$'
torch_libs='^(libc10\.so|libc10_cuda\.so|libtorch_cpu\.so)$'
elves=0
while IFS= read -r -d '' f; do
  [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  elves=$((elves + 1))
  rel=${f#"$pkg"/}
  while read -r lib; do
    [[ $lib =~ $allowed ]] && continue
    case $rel in lib/libgpurr_torch*.so) [[ $lib =~ $torch_libs ]] && continue ;; esac
    fail "$rel needs $lib"
  done < <(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  readelf -S "$f" | grep -q '\.debug_info' && fail "$rel keeps its debug information"
done < <(find "$pkg" -type f -print0)
for f in bin/gpurr lib/libgpurr_recorder.so share/gpurr/known_culprits.json share/gpurr/trace.capnp \
         share/gpurr/python/sitecustomize.py \
         share/gpurr/python/gpurr_import_watch.py share/gpurr/python/gpurr_torch_layer.py \
         share/gpurr/python/gpurr_torch_paths.py share/gpurr/python/gpurr_torch_collectives.py \
         share/gpurr/python/gpurr_torch_tools.py __init__.py __main__.py; do
  [ -e "$pkg/$f" ] || fail "the wheel lacks gpurr/$f"
done
[ "$elves" -ge 2 ] || fail "the wheel holds $elves ELF files"
nm -D --defined-only "$pkg/lib/libgpurr_recorder.so" | grep -qi 'capnp\|zstd\|XXH' &&
  fail "libgpurr_recorder.so exports Cap'n Proto, zstd or xxhash symbols"

# The installed gpurr, run with this machine's copies of the libraries it
# once linked hidden (tests/without_system_libs.sh).
cp -r "$source/examples/synthetic.gpurr" "$work/synthetic.gpurr"
cat >"$work/use.sh" <<'USE'
#!/usr/bin/env bash
set -u
venv=$1 work=$2 build=$3 version=$4
g=$venv/bin/gpurr
rc=0
bad() { echo "FAIL: $*"; rc=1; }
out=$(env -u LD_LIBRARY_PATH "$g" --version 2>&1) || bad "gpurr --version failed: $out"
case $out in "gpurr $version"*) ;; *) bad "gpurr --version says '$out'" ;; esac
echo "$out" | grep -q 'trace format 1' || bad "gpurr --version names no trace format: $out"
env -u LD_LIBRARY_PATH "$g" info "$work/synthetic.gpurr" >"$work/info.txt" 2>&1 || bad "gpurr info failed: $(cat "$work/info.txt")"
env -u LD_LIBRARY_PATH "$g" verify "$work/synthetic.gpurr" >"$work/verify.txt" 2>&1 || bad "gpurr verify failed: $(cat "$work/verify.txt")"
env -u LD_LIBRARY_PATH "$g" diff --json "$work/synthetic.gpurr" "$work/synthetic.gpurr" >"$work/diff.json" 2>&1
[ $? -eq 0 ] || bad "gpurr diff --json of a trace with itself did not exit 0: $(head -5 "$work/diff.json")"
"$venv/bin/python3" -c "import json, sys; sys.exit(json.load(open(sys.argv[1]))['identical'] is not True)" \
  "$work/diff.json" || bad "gpurr diff --json: $(head -c 300 "$work/diff.json")"
"$venv/bin/python3" -c "import gpurr, os, sys; sys.exit(not (gpurr.__version__ == sys.argv[1] and os.access(gpurr.executable(), os.X_OK)))" \
  "$version" || bad "import gpurr: no version $version or no executable"
"$venv/bin/python3" -m gpurr --version >/dev/null || bad "python -m gpurr --version failed"
# The recorder as the CUDA driver starts it (InitializeInjection), in a
# process that has no libcupti yet: it loads the Python environment's CUPTI
# that `gpurr record` names, says so (--verbose), then stops at the missing
# driver, in one warning.
cupti=$(ls "${GPURR_TEST_VENV:-/opt/gpurr-venv}"/lib/python3*/site-packages/nvidia/cu13/lib/libcupti.so.13 2>/dev/null | head -1)
[ -n "$cupti" ] || bad "no nvidia-cuda-cupti in ${GPURR_TEST_VENV:-/opt/gpurr-venv} (scripts/setup.sh installs PyTorch with it)"
if [ -n "$cupti" ] && ! ldconfig -p | grep -q 'libcuda\.so\.1 '; then
  GPURR_OUTPUT=$work/injected GPURR_VERBOSE=1 GPURR_PYTHON_CUPTI=$cupti "$venv/bin/python3" -c \
    "import ctypes, gpurr; print('InitializeInjection', ctypes.CDLL(gpurr.recorder_library()).InitializeInjection())" \
    >"$work/inject.txt" 2>&1
  grep -q "^gpurr: CUPTI $cupti (the program's Python environment), checkpoint API " "$work/inject.txt" &&
    grep -q "cannot load the CUDA driver (libcuda.so.1).*nothing is recorded" "$work/inject.txt" &&
    grep -q "InitializeInjection 1" "$work/inject.txt" ||
    bad "the recorder, started without a driver: $(cat "$work/inject.txt")"
fi
if ! ldconfig -p | grep -q 'libcuda\.so\.1 '; then
  (cd "$work" && env -u LD_LIBRARY_PATH "$g" record -o "$work/true.gpurr" -- true >"$work/record.txt" 2>&1)
  r=$?
  [ $r -eq 0 ] || bad "gpurr record -- true exited $r, not true's 0"
  n=$(grep -c 'libcuda.so.1' "$work/record.txt")
  [ "$n" -eq 1 ] || bad "gpurr record -- true printed $n lines naming libcuda.so.1: $(cat "$work/record.txt")"
  grep -q 'no CUDA driver.*nothing will be recorded' "$work/record.txt" || bad "gpurr record -- true: $(cat "$work/record.txt")"
  (cd "$work" && env -u LD_LIBRARY_PATH "$g" bisect -o bt -- true >"$work/bisect_true.txt" 2>&1)
  r=$?
  [ $r -eq 2 ] || bad "gpurr bisect -- true exited $r, not 2"
  grep -q 'libcuda.so.1' "$work/bisect_true.txt" || bad "gpurr bisect -- true names no missing driver: $(cat "$work/bisect_true.txt")"
fi
exit $rc
USE
chmod +x "$work/use.sh"
"$source/tests/without_system_libs.sh" "$work/use.sh" "$venv" "$work" "$build" "$version" || status=1

# The CPU demo, bisected by the installed gpurr: the stand-in program is
# the project's build, which links this machine's libraries, so it runs
# with them in place.
(cd "$work" && env -u LD_LIBRARY_PATH "$venv/bin/gpurr" bisect -o demo -- "$build/tests/bisect/fake_cuda_program" \
  nondeterministic demo-state >"$work/bisect.txt" 2>&1)
rc=$?
[ $rc -eq 1 ] || fail "gpurr bisect of the CPU demo exited $rc, not 1: $(tail -5 "$work/bisect.txt")"
grep -q 'cause    nondeterministic kernel' "$work/bisect.txt" || fail "gpurr bisect named no nondeterministic kernel"
grep -q 'op       aten::index_add_' "$work/bisect.txt" || fail "gpurr bisect named no op: $(cat "$work/bisect.txt")"

"$venv/bin/python3" -m pip uninstall -y -q --disable-pip-version-check gpurr >"$work/uninstall.log" 2>&1 ||
  { cat "$work/uninstall.log"; fail "pip uninstall gpurr failed"; }
(cd "$venv" && find . -path ./bin -prune -o -print | sort) >"$work/after.txt"
left=$(comm -13 "$work/before.txt" "$work/after.txt" | grep -v '__pycache__')
[ -z "$left" ] || fail "pip uninstall gpurr left: $left"
[ -e "$venv/bin/gpurr" ] && fail "pip uninstall gpurr left bin/gpurr"

# The Debian package made from the same build: its files, unpacked, run.
deb=$dist/gpurr_${version}_amd64.deb
if [ -f "$deb" ]; then
  dpkg-deb -x "$deb" "$work/deb" || fail "dpkg-deb cannot unpack $(basename "$deb")"
  for f in usr/bin/gpurr usr/lib/libgpurr_recorder.so usr/share/gpurr/known_culprits.json usr/share/gpurr/trace.capnp \
           usr/share/gpurr/python/sitecustomize.py usr/share/gpurr/python/gpurr_import_watch.py; do
    [ -e "$work/deb/$f" ] || fail "$(basename "$deb") lacks /$f"
  done
  "$work/deb/usr/bin/gpurr" info "$work/synthetic.gpurr" >/dev/null 2>&1 || fail "gpurr from $(basename "$deb") does not run"
  echo "deb: $(basename "$deb"), $(($(stat -c %s "$deb") / 1024)) KiB, depends on: $(dpkg-deb -f "$deb" Depends)"
else
  fail "no $(basename "$deb") in $dist: run scripts/build_wheel.sh"
fi

[ $status -eq 0 ] && echo "the wheel installs, runs without this machine's libraries, and uninstalls cleanly"
exit $status
