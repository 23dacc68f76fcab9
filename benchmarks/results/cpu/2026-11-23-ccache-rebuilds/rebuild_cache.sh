#!/usr/bin/env bash
# Rebuild times of one package with and without a compiler cache (ccache), from the
# repository's root:
#
#   bash benchmarks/results/cpu/2026-11-23-ccache-rebuilds/rebuild_cache.sh PYTHON [PACKAGE]
#
# PYTHON is an environment with torch, setuptools and ninja; PACKAGE defaults to add_ext.
# For each mode (off: USE_CCACHE=0, on: USE_CCACHE=1 with an empty cache) it times
# `pip install --no-build-isolation` three times: the first build, a rebuild after `touch`
# of one source, and a build into an emptied build folder (what a new torch tag, a
# `rm -rf build` or another checkout costs). Prints one line per build: mode step seconds.
set -euo pipefail
python=$1
package=${2:-add_ext}
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
command -v ccache >/dev/null || { echo "rebuild_cache: ccache is not on PATH (apt-get install ccache)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source=$(find "packages/$package/csrc" -name '*.cpp' | sort | tail -1)
echo "# $package, $("$python" -c 'import torch; print("torch", torch.__version__)'), $(nproc) cores, ccache $(ccache --version | head -1 | awk '{print $3}'), touched $source"
for mode in off on; do
  export SHARED_BUILD_DIR="$work/build-$mode" CCACHE_DIR="$work/cache-$mode"
  if [ "$mode" = off ]; then export USE_CCACHE=0; else export USE_CCACHE=1; fi
  build() {
    local start=$SECONDS
    "$python" -m pip install -q --no-build-isolation --no-deps --force-reinstall \
      --target "$work/site-$mode" "packages/$package" >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
    echo "$mode $1 $((SECONDS - start))"
  }
  build first
  touch "$source"
  build touch-one-source
  rm -rf "$SHARED_BUILD_DIR"
  build empty-build-folder
done
