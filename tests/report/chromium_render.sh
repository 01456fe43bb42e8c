#!/usr/bin/env bash
# Renders the HTML reports of two golden diff pairs in headless Chromium: a
# diverged bisect report with replay (nondeterministic kernel) and a diff-only
# path divergence (algorithm choice). Checks that each screenshot has the
# window's size and is not blank, and that the DOM Chromium built holds the
# divergent launch's row. Exit 77 (skipped) when Chromium is not installed.
#
#   chromium_render.sh MAKE_DIFF_TRACES GPURR MAKE_REPORT FIXTURES OUT_DIR
set -euo pipefail
make_traces=$1 gpurr=$2 make_report=$3 fixtures=$4 out=$5
here=$(cd "$(dirname "$0")" && pwd)

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
done
if [ -z "$browser" ]; then
  echo "skipped: no chromium installed (scripts/setup.sh installs it)"
  exit 77
fi

rm -rf "$out"
mkdir -p "$out/profile"
"$make_traces" "$out/cases"

chrome() {
  # A profile of its own, so that no user's settings or extensions apply.
  timeout 90 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
    --no-first-run --user-data-dir="$out/profile" "$@" 2>>"$out/chromium.log"
}

render() {  # NAME CASE [BASE.json]
  local name=$1 case=$2 base=${3:-}
  local dir="$out/cases/$case" rc=0
  (cd "$dir" && "$gpurr" diff a.gpurr b.gpurr >/dev/null) || rc=$?
  if [ "$rc" -ne 1 ]; then echo "FAIL: gpurr diff on $case exited $rc, expected 1"; exit 1; fi
  "$make_report" "$dir/a.gpurr" "$dir/b.gpurr" ${base:+--base "$base"} "$out/$name.html"
  chrome --screenshot="$out/$name.png" --window-size=1280,2000 "file://$out/$name.html"
  chrome --dump-dom "file://$out/$name.html" >"$out/$name.dom.html"
  python3 "$here/check_png.py" "$out/$name.png" 1280 2000
  # The row Chromium built for the divergent launch: one row, holding the kernel.
  local rows
  rows=$(grep -o '<tr class="div[^"]*" id="divergent-row">' "$out/$name.dom.html" | wc -l)
  if [ "$rows" -ne 1 ]; then echo "FAIL: $name: $rows divergent rows in the rendered DOM, expected 1"; exit 1; fi
  python3 - "$out/$name.dom.html" "$4" <<'PY'
import sys
dom, want = open(sys.argv[1], encoding="utf-8").read(), sys.argv[2]
start = dom.index('id="divergent-row"')
row = dom[start:dom.index("</tr>", start)]
if want not in row:
    raise SystemExit(f"FAIL: the divergent row does not name {want}: {row[:400]}")
print(f"divergent row names {want}")
PY
}

render diverged nondeterministic_kernel "$fixtures/bisect_replayed.json" 'at::native::indexFuncLargeIndex&lt;float&gt;'
render path algorithm_choice "" 'cudnn_fft_r2c_nhwc_input_transform_kernel'
echo "ok: $out/diverged.png $out/path.png"
