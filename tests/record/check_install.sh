#!/usr/bin/env bash
# check_install.sh BUILD_DIR SOURCE_DIR: `cmake --install BUILD --prefix P`
# gives a gpurr that works from P, and from wherever P is moved: every ELF
# file's RPATH is relative to itself ($ORIGIN), never the build folder.
set -u
build=$(cd "${1:?usage: check_install.sh BUILD_DIR SOURCE_DIR}" && pwd -P)
source=$(cd "${2:?usage: check_install.sh BUILD_DIR SOURCE_DIR}" && pwd -P)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }

cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
mv "$work/prefix" "$work/moved"  # relocated
p=$work/moved
for f in bin/gpurr share/gpurr/known_culprits.json; do
  [ -e "$p/$f" ] || fail "the install lacks $f"
done
if [ -f "$build/lib/libgpurr_recorder.so" ]; then
  [ -e "$p/lib/libgpurr_recorder.so" ] || fail "the install lacks lib/libgpurr_recorder.so"
fi
while IFS= read -r -d '' f; do
  [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  rpath=$(readelf -d "$f" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]/\1/p')
  case $rpath in *"$build"* | *"$source"*) fail "${f#"$p"/} has RPATH '$rpath', which names the build" ;; esac
  case ${f#"$p"/} in
    bin/* | lib/libgpurr_*) case ":$rpath:" in *'$ORIGIN'*) ;; *) fail "${f#"$p"/} has RPATH '$rpath', not \$ORIGIN-relative" ;; esac ;;
  esac
done < <(find "$p" -type f -print0)

g=$p/bin/gpurr
env -u LD_LIBRARY_PATH "$g" --version >/dev/null || fail "gpurr --version does not run from the install"
env -u LD_LIBRARY_PATH "$g" info "$source/examples/synthetic.gpurr" >/dev/null || fail "gpurr info does not run"
env -u LD_LIBRARY_PATH "$g" diff "$source/examples/synthetic.gpurr" "$source/examples/synthetic.gpurr" >/dev/null ||
  fail "gpurr diff of a trace with itself is not identical"
if [ -e "$p/lib/libgpurr_recorder.so" ]; then
  (cd "$work" && env -u LD_LIBRARY_PATH "$g" record -o "$work/t.gpurr" -- sh -c 'exit 5') >/dev/null 2>"$work/record.err"
  rc=$?
  [ $rc -eq 5 ] || { fail "gpurr record from the install exited $rc, not the command's 5:"; cat "$work/record.err"; }
fi
[ $status -eq 0 ] && echo "installed, moved, and gpurr runs from $p"
exit $status
