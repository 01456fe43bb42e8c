# bench/bisect_args.sh: the arguments bisect_time.sh and bisect_cpu_time.sh
# share, read by `source`: parse_until_step USAGE "$@" takes a leading
# `--until-step N` into $until_step ("" without it) and leaves the rest in
# $rest; it exits 2 with USAGE when no BUILD_DIR follows.
parse_until_step() {
  local usage=$1
  shift
  until_step=""
  if [ "${1:-}" = "--until-step" ]; then
    until_step=${2:-}
    shift 2 || true
    case $until_step in ''|*[!0-9]*) echo "--until-step needs a step number" >&2; exit 2 ;; esac
  fi
  if [ $# -lt 1 ] || [ ! -d "$1" ]; then
    echo "usage: $usage" >&2
    exit 2
  fi
  rest=("$@")
}
