#!/usr/bin/env bash
# A CI build job's caches and their key (docs/ci.md, "Caches"): uv's under .nox, on the
# environments' filesystem (uv hard-links a torch instead of copying it). The job adds its torch.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "UV_CACHE_DIR=$PWD/.nox/uv-cache" >>"$GITHUB_ENV"
echo "CCACHE_DIR=$PWD/.nox/ccache" >>"$GITHUB_ENV"
tools="$(cat noxfile.py requirements/torch-matrix.txt | sha256sum | cut -c1-16)"
echo "key=$(uname -m)-gcc$(c++ -dumpfullversion)-$tools" | tee -a "$GITHUB_OUTPUT"
