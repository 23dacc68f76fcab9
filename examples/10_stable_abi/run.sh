#!/usr/bin/env bash
# The LibTorch stable ABI: one abi3 wheel for every torch from 2.13 on, checked here.
# requires: c++ pip setuptools nm c++filt
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="${EXAMPLE_WORKDIR:-$(mktemp -d)}"

# setuptools writes build/ and *.egg-info beside setup.py: build from a copy.
mkdir -p "$work/src"
cp -r "$here/setup.py" "$here/pyproject.toml" "$here/csrc" "$here/src" "$work/src/"

echo "== pip wheel --no-build-isolation (compiles csrc/softclip.cpp against the stable API)"
start=$SECONDS
python -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
  -w "$work/dist" "$work/src"
wheel="$(ls "$work"/dist/softclip-*.whl)"
echo "built $(basename "$wheel") in $((SECONDS - start)) s"

python -m pip install -q --disable-pip-version-check --no-deps --target "$work/site" "$wheel"
cd "$work"  # not $here: the import must find the installed package, not the sources
PYTHONPATH="$work/site" python "$here/check.py" "$wheel"
