#!/bin/sh
# Installs what hetero needs to build and test on Debian/Ubuntu.
# The Makefile runs this itself when pkg-config misses a dependency.
set -e
PKGS="build-essential pkg-config libhwloc-dev libnuma-dev ocl-icd-opencl-dev opencl-headers \
pocl-opencl-icd clinfo check libsubunit-dev libmicrohttpd-dev libjansson-dev python3 python3-pip python3-venv \
libopenmpi-dev openmpi-bin"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: no apt-get here; install: hwloc, libnuma, an OpenCL ICD loader with headers," >&2
  echo "  PoCL (or another OpenCL driver), Check, libmicrohttpd, jansson, pkg-config; Open MPI (optional: the" >&2
  echo "  pipeline over processes, docs/mpi.md)" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "install-deps: not root; run as root: apt-get install $PKGS" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $PKGS >/dev/null
echo "install-deps: installed $PKGS" >&2
# Headless Chromium drives hetero-server's web page in the webui suite
# (tests/webui_check.py).  Apart, so that a distribution without a
# 'chromium' package still gets the rest; the suite then says SKIPPED
# (FAILED under CI), and HX_CHROMIUM can name another Chrome.
if $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
  echo "install-deps: installed chromium" >&2
else
  echo "install-deps: could not install chromium: the webui suite will be skipped" >&2
fi
