"""scripts/check_seams.py held to its rules: a tree that keeps them passes, and
each kind of breach, planted alone in a copy, fails with a line naming it."""
import subprocess
import sys
import tempfile
from pathlib import Path

CHECK = Path(__file__).resolve().parents[2] / "scripts" / "check_seams.py"

GOOD = {
    "recorder/README.md": "# recorder/\n",
    "recorder/launch.cpp": "// The launch path.\n#include \"recorder/launch.h\"\n#include \"trace_format/trace.h\"\n",
    "report/README.md": "# report/\n",
    "report/page.cpp": "/* The page. */\n#include \"report/page.h\"\n",
    "trace_format/README.md": "# trace_format/\n",
    "trace_format/codec.cpp": "// Cap'n Proto, here only.\n#include <capnp/message.h>\n#include \"trace_format/trace.capnp.h\"\n",
    "tests/big_test.cpp": "#include <x>\n" + "int a;\n" * 1000,
}

BREACHES = {
    "over 900": ("recorder/big.cpp", "// Big.\n" + "int a;\n" * 900, "901 lines, over 900"),
    "no opening line": ("recorder/bare.cpp", "#include \"recorder/bare.h\"\n", "does not open with a comment"),
    "recorder includes replayer": ("recorder/x.cpp", "// X.\n#include \"replayer/plan.h\"\n", "recorder/ never includes replayer/"),
    "replayer includes recorder": ("replayer/README.md|replayer/x.cpp", "// X.\n#include \"recorder/session.h\"\n", "replayer/ never includes recorder/"),
    "report includes cli": ("report/x.cpp", "// X.\n#include \"cli/text.h\"\n", "report/ never includes cli/"),
    "Cap'n Proto outside trace_format": ("diff/README.md|diff/x.cpp", "// X.\n#include <kj/common.h>\n", "only trace_format/ sees Cap'n Proto"),
    "generated header outside trace_format": ("diff/README.md|diff/y.cpp", "// Y.\n#include \"trace_format/trace.capnp.h\"\n", "only trace_format/ sees Cap'n Proto"),
    "folder without README": ("kernels/k.cu", "// K.\n", "kernels/: no README.md"),
}


def run(files: dict) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            path = Path(root, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        subprocess.run(["git", "init", "-q", root], check=True)
        subprocess.run(["git", "-C", root, "add", "."], check=True)
        return subprocess.run([sys.executable, str(CHECK), root], capture_output=True, text=True)


def main() -> int:
    failures = 0
    good = run(GOOD)
    if good.returncode != 0:
        print(f"FAIL: a tree that keeps the rules was refused:\n{good.stdout}")
        failures += 1
    for name, (paths, text, expected) in BREACHES.items():
        files = dict(GOOD)
        *readmes, path = paths.split("|")
        for readme in readmes:
            files[readme] = "# folder\n"
        files[path] = text
        result = run(files)
        if result.returncode != 1 or expected not in result.stdout:
            print(f"FAIL: {name}: exit {result.returncode}, expected a line with {expected!r}:\n{result.stdout}")
            failures += 1
        else:
            print(f"ok: {name}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
