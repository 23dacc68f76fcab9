#!/usr/bin/env bash
# A CI build job's caches (.github/workflows/ci.yml): uv's in .nox/uv-cache, on the
# filesystem of nox's environments (uv hard-links a torch of GBs into them instead of
# copying it), ccache's in .nox/ccache (the noxfile's CCACHE_DIR); and their key: the
# machine, the compiler, and the noxfile (the test tools and their pins) with the torch
# matrix. The job adds its torch (or session) to the key.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "UV_CACHE_DIR=$PWD/.nox/uv-cache" >>"$GITHUB_ENV"
echo "CCACHE_DIR=$PWD/.nox/ccache" >>"$GITHUB_ENV"
tools="$(cat noxfile.py requirements/torch-matrix.txt | sha256sum | cut -c1-16)"
echo "key=$(uname -m)-gcc$(c++ -dumpfullversion)-$tools" | tee -a "$GITHUB_OUTPUT"
