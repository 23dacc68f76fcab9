#!/usr/bin/env bash
# What CI needs on a fresh machine before nox, the same for .ci/run and the workflow's jobs:
# the build's system packages (where apt-get is; root or sudo), nox and uv. --tools: nox
# and uv only (lint, the list of CI's sessions).
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ "${1:-}" != "--tools" ] && command -v apt-get >/dev/null 2>&1; then
  # OpenCV for warp_perspective's OpenCV backend, cmake for the C++ examples, ccache for
  # .nox/ccache (a later run on the same machine recompiles nothing unchanged).
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    libopencv-dev pkg-config cmake g++ ccache >/dev/null
fi

# This machine kind caps pip at the torch releases on its disk (/etc/xdg/pip); the matrix's
# latest, 2.15.0, comes from PyPI. Lifting the cap changes nothing else.
if [ -d /etc/xdg/pip ] && grep -qs "torch<=" /etc/xdg/pip/constraints.txt; then
  $sudo rm -r /etc/xdg/pip
fi
# uv: nox's installer for the environments (the CUDA builds of torch are GBs).
python3 -m pip install -q nox uv
