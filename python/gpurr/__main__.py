"""`gpurr ...` (the console script) and `python -m gpurr ...`: replaces this
Python process with the native gpurr program, so its exit status, signals
and terminal are the program's own."""
import os
import sys

from gpurr import executable


def main():
    program = executable()
    try:
        os.execv(program, ["gpurr"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write(f"gpurr: cannot run {program}: {e.strerror}; reinstall gpurr (pip install --force-reinstall gpurr)\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
