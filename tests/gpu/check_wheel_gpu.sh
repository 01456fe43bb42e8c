#!/usr/bin/env bash
# check_wheel_gpu.sh BUNDLE: the route users take on a GPU machine. The wheel
# the bundle carries (scripts/gpu_bundle.sh BUILD OUT WHEEL puts it in
# OUT/wheel/) is pip-installed into a fresh virtual environment that sees
# this machine's PyTorch, and that `gpurr` records train_cnn.py twice:
#   - the program's output is unchanged and both recordings hold launches
#     with their PyTorch origins;
#   - the recorder says which CUPTI it loaded (record --verbose), and it is
#     the one PyTorch uses (a single libcupti in the process);
#   - `gpurr diff` finds the two runs identical.
# Prints one PASS or FAIL line per check; exits 77 (skipped) without a GPU,
# PyTorch or a wheel in the bundle.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "${1:?usage: check_wheel_gpu.sh BUNDLE}" && pwd)
python=${PYTHON:-python3}
wheel=$(ls "$bundle"/wheel/gpurr-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "no wheel in $bundle/wheel (scripts/gpu_bundle.sh BUILD OUT WHEEL): skipped"; exit 77; }
"$bundle/tests/gpu/gpu_probe" >/dev/null || exit 77
"$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 77)" 2>/dev/null || {
  echo "PyTorch sees no GPU: skipped"
  exit 77
}

work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-gpu-wheel-XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
fail() { echo "FAIL wheel: $*"; status=1; }

"$python" -m venv --system-site-packages "$work/venv" &&
  "$work/venv/bin/python3" -m pip install -q --disable-pip-version-check --no-index "$wheel" >"$work/pip.log" 2>&1 ||
  { cat "$work/pip.log"; echo "FAIL wheel: pip install $(basename "$wheel") failed"; exit 1; }
gpurr=$work/venv/bin/gpurr
echo "PASS wheel: pip install $(basename "$wheel"): $("$gpurr" --version)"

# PyTorch may live in another virtual environment (python3 on PATH that
# environment's), which --system-site-packages does not reach: a .pth file
# names the folder holding torch, after the venv's own (gpurr from the wheel,
# installed first so that pip does not find another gpurr there).
torch_site=$("$python" -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
venv_site=$("$work/venv/bin/python3" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
echo "$torch_site" >"$venv_site/gpurr-gpu-test-torch.pth"
echo "  PyTorch from $torch_site; gpurr from $("$work/venv/bin/python3" -c 'import gpurr, os; print(os.path.dirname(gpurr.__file__))' 2>&1)"

"$work/venv/bin/python3" "$here/train_cnn.py" >"$work/plain.out" 2>"$work/plain.err"
rc=$?
if [ $rc -ne 0 ]; then
  tail -10 "$work/plain.out" | sed 's/^/  out: /'
  tail -20 "$work/plain.err" | sed 's/^/  err: /'
  echo "FAIL wheel: train_cnn.py fails without recording (exit status $rc)"
  exit 1
fi
for run in a b; do
  if ! "$gpurr" record --verbose -o "$work/$run.gpurr" -- "$work/venv/bin/python3" "$here/train_cnn.py" \
      >"$work/$run.out" 2>"$work/$run.err"; then
    tail -20 "$work/$run.err" | sed 's/^/  /'
    fail "recorded run $run failed"
    exit 1
  fi
  grep -h "^gpurr: " "$work/$run.err" | sed "s/^/  $run: /"
done
cmp -s "$work/plain.out" "$work/a.out" && cmp -s "$work/plain.out" "$work/b.out" &&
  echo "PASS wheel: output unchanged by recording" || fail "recording changed the output"

cupti=$(sed -n 's/^gpurr: CUPTI \([^ ]*\) (.*/\1/p' "$work/a.err" | head -1)
if [ -z "$cupti" ]; then
  fail "record --verbose named no CUPTI"
else
  torch_cupti=$("$work/venv/bin/python3" -c "
import torch, re
torch.zeros(1, device='cuda')
print(' '.join(sorted({l.split()[-1] for l in open('/proc/self/maps') if re.search(r'libcupti\.so', l)})))")
  echo "  the recorder's CUPTI: $cupti; PyTorch's process maps: ${torch_cupti:-none}"
  case " $torch_cupti " in
    "  " | *" $(readlink -f "$cupti") "* | *" $cupti "*) echo "PASS wheel: the recorder loads the CUPTI PyTorch's process loads" ;;
    *) fail "the recorder loaded $cupti, PyTorch's process loads $torch_cupti" ;;
  esac
fi

"$gpurr" info --json "$work/a.gpurr" >"$work/info.json" 2>&1 || fail "gpurr info failed: $(head -3 "$work/info.json")"
"$work/venv/bin/python3" - "$work/info.json" <<'PY' || fail "the recording holds no launches with their origins"
import json, sys
d = json.load(open(sys.argv[1]))
print(f"  info: {d['launches']} launches, {d['origins']['withOrigin']} of {d['origins']['operations']} operations with their origin")
sys.exit(d["launches"] < 50 or d["origins"]["withOrigin"] == 0)
PY
"$gpurr" diff "$work/a.gpurr" "$work/b.gpurr" >"$work/diff.txt" 2>&1
rc=$?
[ $rc -eq 0 ] && echo "PASS wheel: gpurr diff finds the two recordings identical" ||
  { sed 's/^/  /' "$work/diff.txt" | head -30; fail "gpurr diff exited $rc"; }
exit $status
