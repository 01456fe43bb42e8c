#!/usr/bin/env python3
"""The house's seams, checked: what keeps gpurr's folders easy to find one's way in.

  scripts/check_seams.py [ROOT]     exit 0 when every rule holds, 1 with one line per breach

Rules (on the files git tracks, or every file under ROOT outside build folders
when ROOT is not a git checkout):
  - no source file outside tests/ is over 900 lines;
  - every C++/CUDA source file outside tests/ opens with a comment saying what it is for;
  - every top-level folder with sources has a README.md;
  - recorder/ and replayer/ never include each other; report/ never includes cli/;
  - only trace_format/ sees Cap'n Proto (its headers, or the generated trace.capnp.h).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

MAX_LINES = 900
SOURCE = re.compile(r"\.(cpp|cc|h|hpp|cu|cuh|py|sh|cmake)$")
CXX = re.compile(r"\.(cpp|cc|h|hpp|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)
# Folders whose files may not include from the folders named.
FORBIDDEN = {
    "recorder": ("replayer/",),
    "replayer": ("recorder/",),
    "report": ("cli/",),
}
CAPNP = re.compile(r"^(capnp/|kj/)|\.capnp\.h$")
# Top-level folders that hold no sources of their own, or only data.
NO_README = {"tests", "docs", "data", "dist", "out"}


def tracked_files(root: Path) -> list[str]:
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], check=True,
                             capture_output=True).stdout
        return [f for f in out.decode().split("\0") if f and (root / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "build", "dist", "out"))]
            files += [os.path.relpath(os.path.join(dirpath, f), root) for f in filenames]
        return files


def opens_with_comment(text: str) -> bool:
    return text.lstrip("\ufeff").startswith(("//", "/*"))


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    breaches = []
    folders_with_sources = set()
    for rel in sorted(tracked_files(root)):
        parts = rel.split("/")
        if parts[0] == "tests" or not SOURCE.search(rel):
            continue
        text = (root / rel).read_text(errors="replace")
        if len(parts) > 1:
            folders_with_sources.add(parts[0])
        lines = text.count("\n")
        if lines > MAX_LINES:
            breaches.append(f"{rel}: {lines} lines, over {MAX_LINES}: split it by stage")
        if not CXX.search(rel):
            continue
        if not opens_with_comment(text):
            breaches.append(f"{rel}: does not open with a comment saying what the file is for")
        folder = parts[0]
        for header in INCLUDE.findall(text):
            for banned in FORBIDDEN.get(folder, ()):
                if header.startswith(banned):
                    breaches.append(f"{rel}: includes {header}: {folder}/ never includes {banned}")
            if folder != "trace_format" and CAPNP.search(header):
                breaches.append(f"{rel}: includes {header}: only trace_format/ sees Cap'n Proto")
    for folder in sorted(folders_with_sources - NO_README):
        if not (root / folder / "README.md").is_file():
            breaches.append(f"{folder}/: no README.md listing its files in data-flow order")
    for breach in breaches:
        print(f"check_seams: {breach}")
    if not breaches:
        print("check_seams: every seam holds")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
