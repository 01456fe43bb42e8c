#!/usr/bin/env bash
# check_bundle.sh BUILD_DIR [WHEEL_DIR]: scripts/gpu_bundle.sh makes a bundle
# (with the wheel in WHEEL_DIR, when there is one: gpurr as users install it,
# plus the GPU tests) that fits
# the GPU machine's carry limit (40 MiB, leaving room for wheels and logs),
# whose every binary loads gpurr's libraries from inside the bundle even with
# this machine's copies of them hidden, and which tests/gpu/run.sh accepts:
# on a machine without a GPU, every part is skipped cleanly (exit 77).
set -u
here=$(cd "$(dirname "$0")" && pwd)
source=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: check_bundle.sh BUILD_DIR [WHEEL_DIR]}" && pwd -P)
wheel=""
[ -n "${2:-}" ] && wheel=$(ls "$2"/gpurr-*.whl 2>/dev/null | head -1)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-bundle-XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }
limit_mib=40

bundle=$work/bundle
if ! "$source/scripts/gpu_bundle.sh" "$build" "$bundle" $wheel >"$work/bundle.log" 2>&1; then
  cat "$work/bundle.log"
  echo "FAIL: scripts/gpu_bundle.sh failed"
  exit 1
fi
cat "$work/bundle.log"

size=$(du -sb "$bundle" | cut -f1)
[ "$size" -le $((limit_mib * 1024 * 1024)) ] ||
  fail "the bundle holds $((size / 1024 / 1024)) MiB, over $limit_mib MiB"
for f in bin/gpurr lib/libgpurr_recorder.so tests/gpu/gpu_probe tests/gpu/programs/atomic_reduce \
         tests/gpu/hash_match/hash_match tests/gpu/probe/cupti_probe tests/gpu/probe/libprobe_subscriber.so \
         tests/gpu/probe/libprobe_kernels.so share/gpurr/known_culprits.json CTestTestfile.cmake; do
  [ -e "$bundle/$f" ] || fail "the bundle lacks $f"
done
if [ -n "$wheel" ]; then
  echo "with the wheel $(basename "$wheel")"
  [ -f "$bundle/wheel/$(basename "$wheel")" ] || fail "the bundle lacks wheel/$(basename "$wheel")"
  for f in bin/gpurr lib/libgpurr_recorder.so share/gpurr/known_culprits.json; do
    python3 -c "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read('gpurr/' + sys.argv[2]))" \
      "$wheel" "$f" | cmp -s - "$bundle/$f" || fail "the bundle's $f is not the wheel's"
  done
fi
grep -q 'add_test(\[==\[replay_atomic_nondeterministic\]==\]' "$bundle/CTestTestfile.cmake" ||
  fail "the bundle's CTestTestfile.cmake lacks the replay GPU tests"
if grep -q 'recorder_test\|gpu_suite_harness' "$bundle/CTestTestfile.cmake"; then
  fail "the bundle's CTestTestfile.cmake holds tests not labelled gpu"
fi
while IFS= read -r -d '' f; do
  readelf -S "$f" 2>/dev/null | grep -q '\.debug_info' && fail "${f#"$bundle"/} keeps its debug information"
done < <(find "$bundle" -type f -print0)

# Every binary loads, with this machine's copies of the libraries the bundle
# carries hidden, as on the GPU machine (tests/without_system_libs.sh).
# Where no private mount namespace can be made, the same check runs with the
# copies in place: RPATH entries come before the system's folders, so a
# binary that loads them from the bundle here does so there.
cat >"$work/load_all.sh" <<'EOF'
#!/usr/bin/env bash
# Every ELF file of the bundle resolves every library it needs but CUDA's,
# and gpurr runs.
bundle=$1
rc=0
while IFS= read -r -d '' f; do
  [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  # gpurr's copies of capnp, kj, zstd, xxhash and fmt are found through the
  # RPATH of the binary that loads them, not their own; PyTorch's libraries
  # are the process's (libgpurr_torch.so is loaded after `import torch`).
  case ${f#"$bundle"/} in lib/libcapnp* | lib/libkj* | lib/libzstd* | lib/libxxhash* | lib/libfmt*) continue ;; esac
  missing=$(env -u LD_LIBRARY_PATH ldd "$f" 2>&1 | grep 'not found' |
            grep -vE 'lib(cuda|cudart|cublas|cublasLt|cudnn|curand|cupti|nvrtc|c10|torch_cpu)[^ ]*\.so' | tr -d '\t')
  [ -n "$missing" ] && { echo "FAIL: ${f#"$bundle"/} cannot load: $missing"; rc=1; }
done < <(find "$bundle" -type f -print0)
env -u LD_LIBRARY_PATH "$bundle/bin/gpurr" --version >/dev/null || { echo "FAIL: bin/gpurr --version does not run"; rc=1; }
env -u LD_LIBRARY_PATH "$bundle/bin/gpurr" info "$bundle/../synthetic.gpurr" >/dev/null ||
  { echo "FAIL: bin/gpurr info does not run"; rc=1; }
exit $rc
EOF
chmod +x "$work/load_all.sh"
cp -r "$source/examples/synthetic.gpurr" "$work/synthetic.gpurr"
"$source/tests/without_system_libs.sh" "$work/load_all.sh" "$bundle" || status=1

# run.sh takes the bundle as its build folder; here, with no GPU, it skips
# every part and says so.
"$here/run.sh" "$bundle" >"$work/run.log" 2>&1
rc=$?
if [ $rc -ne 77 ]; then
  fail "tests/gpu/run.sh BUNDLE without a GPU exited $rc, expected 77 (skipped):"
  sed 's/^/    /' "$work/run.log"
else
  for part in probe programs pytorch annotations bisect wheel frameworks hash ctest example bench; do
    grep -q "^SKIP $part" "$work/run.log" || fail "run.sh did not report part '$part' skipped: $(cat "$work/run.log")"
  done
fi
[ $status -eq 0 ] && echo "the bundle: $((size / 1024 / 1024)) MiB, self-contained, run.sh skips it cleanly without a GPU"
exit $status
