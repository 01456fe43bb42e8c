# Sourced by bench/step_time.sh and bench/step_breakdown.sh, with their
# arguments, once they set `usage` and `name`: the build folder ($1) and its
# gpurr, the interpreter (PYTHON), the GPU check (exit 77 without one), a
# temporary folder removed at exit, the step counts and `field`.
[ $# -ge 1 ] && [ -d "$1" ] || { echo "usage: $usage" >&2; exit 2; }
build=$(cd "$1" && pwd)
gpurr=$build/bin/gpurr
python=${PYTHON:-python3}
"$python" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 77)" 2>/dev/null ||
  { echo "no GPU for PyTorch ($python): skipped"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/gpurr-$name-XXXXXX")
trap 'rm -rf "$work"' EXIT
steps=200
warmup=20
# field NAME: NAME's value in the JSON object on the last line of stdin.
field() { "$python" -c "import json, sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }
