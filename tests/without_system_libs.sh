#!/usr/bin/env bash
# tests/without_system_libs.sh CMD [ARGS...]: runs CMD with this machine's
# copies of the libraries gpurr links besides CUDA and the C/C++ runtime
# (Cap'n Proto, kj, zstd, xxhash, fmt) hidden, as on a machine that lacks
# them: in a private mount namespace, with /dev/null over each. Without the
# right to make a mount namespace, CMD runs with them in place, and this
# says so. Exits with CMD's status (3 when a copy cannot be hidden).
set -u
hidden=()
for lib in libcapnp-0.9.2.so libkj-0.9.2.so libzstd.so.1 libxxhash.so.0 libfmt.so.9; do
  for dir in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/local/lib; do
    [ -e "$dir/$lib" ] && hidden+=("$(readlink -f "$dir/$lib")")
  done
done
mapfile -t hidden < <(printf '%s\n' "${hidden[@]}" | sort -u)
if [ ${#hidden[@]} -gt 0 ] && unshare -m --propagation private true 2>/dev/null; then
  echo "hiding this machine's copies: ${hidden[*]}"
  # shellcheck disable=SC2016  # expanded by the inner shell
  exec unshare -m --propagation private bash -c \
    'n=$1; shift; for f in "${@:1:n}"; do mount --bind /dev/null "$f" || exit 3; done; shift "$n"; exec "$@"' \
    bash "${#hidden[@]}" "${hidden[@]}" "$@"
fi
echo "running with this machine's copies in place (no private mount namespace here)"
exec "$@"
