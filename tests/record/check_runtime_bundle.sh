#!/usr/bin/env bash
# check_runtime_bundle.sh BUILD_DIR: the build folder carries the shared
# libraries its binaries need beyond CUDA and glibc, and the binaries find
# them there by themselves (RPATH $ORIGIN/../lib, no LD_LIBRARY_PATH).
set -u
build=${1:?usage: check_runtime_bundle.sh BUILD_DIR}
status=0
fail() { echo "FAIL: $*"; status=1; }

binaries=("$build/bin/gpurr")
[ -f "$build/lib/libgpurr_recorder.so" ] && binaries+=("$build/lib/libgpurr_recorder.so")
[ -x "$build/bin/gpurr" ] || { echo "FAIL: $build/bin/gpurr is not built"; exit 1; }

for lib in libcapnp-0.9.2.so libkj-0.9.2.so libzstd.so.1 libxxhash.so.0 libfmt.so.9; do
  [ -f "$build/lib/$lib" ] || fail "$build/lib/$lib is missing: build the gpurr_runtime target (part of all)"
done

for bin in "${binaries[@]}"; do
  rpath=$(readelf -d "$bin" | sed -n 's/.*(RPATH).*\[\(.*\)\]/\1/p')
  case ":$rpath:" in
    *':$ORIGIN/../lib:'*) ;;
    *) fail "$bin has RPATH '$rpath', expected it to hold \$ORIGIN/../lib" ;;
  esac
  # Every bundled library must resolve to lib/, not to the system's copy.
  deps=$(env -u LD_LIBRARY_PATH ldd "$bin")
  for lib in libcapnp-0.9.2.so libkj-0.9.2.so libzstd.so.1 libxxhash.so.0 libfmt.so.9; do
    line=$(grep -F "$lib =>" <<<"$deps")
    [ -z "$line" ] && continue  # not needed by this binary
    real=$(sed -n 's/.*=> \(.*\) (0x.*/\1/p' <<<"$line")
    [ "$(readlink -f "$real")" = "$(readlink -f "$build/lib/$lib")" ] ||
      fail "$bin loads $lib from $real, not from $build/lib"
  done
  grep -q "not found" <<<"$deps" && [[ "$bin" != *libgpurr_recorder.so ]] &&
    fail "$bin has unresolved libraries: $(grep 'not found' <<<"$deps" | tr -d '\t')"
done

# The tool runs with nothing but its own folder to find libraries in.
env -u LD_LIBRARY_PATH "$build/bin/gpurr" --version >/dev/null || fail "$build/bin/gpurr --version does not run"

# As on a machine without these libraries: hide the system's copies in a
# private mount namespace (where this machine allows one) and run from the
# build folder alone.
hide=""
for lib in libcapnp-0.9.2.so libkj-0.9.2.so libzstd.so.1 libxxhash.so.0 libfmt.so.9; do
  for dir in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /usr/lib /usr/local/lib; do
    [ -e "$dir/$lib" ] && hide+=" $dir/$lib"
  done
done
if [ -n "$hide" ] && unshare -m true 2>/dev/null; then
  source_dir=$(cd "$(dirname "$0")/../.." && pwd)
  recorder_check=true
  [ -f "$build/lib/libgpurr_recorder.so" ] && command -v python3 >/dev/null &&
    recorder_check="python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' $build/lib/libgpurr_recorder.so"
  if ! env -u LD_LIBRARY_PATH unshare -m sh -c "
      for f in $hide; do mount --bind /dev/null \$f || exit 3; done
      $build/bin/gpurr info $source_dir/examples/synthetic.gpurr >/dev/null && $recorder_check"; then
    fail "with the system's copies hidden, bin/gpurr or the recorder does not load from $build/lib"
  else
    echo "runs with the system's copies hidden:$hide"
  fi
else
  echo "(no private mount namespace here: the run with the system's copies hidden is left out)"
fi

[ $status -eq 0 ] && echo "runtime bundle complete: ${binaries[*]}"
exit $status
