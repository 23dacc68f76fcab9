#!/usr/bin/env bash
# setuptools ahead of time: build a wheel of a standalone package, install it, use it.
# requires: ninja c++ pip setuptools
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="${EXAMPLE_WORKDIR:-$(mktemp -d)}"

# setuptools writes build/ and *.egg-info beside setup.py: build from a copy.
mkdir -p "$work/src"
cp -r "$here/setup.py" "$here/pyproject.toml" "$here/csrc" "$here/src" "$work/src/"

echo "== pip wheel --no-build-isolation (compiles csrc/linear.cpp)"
start=$SECONDS
python -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
  -w "$work/dist" "$work/src"
echo "built $(basename "$work"/dist/*.whl) in $((SECONDS - start)) s"

echo "== pip install --target (a private folder, not this environment)"
python -m pip install -q --disable-pip-version-check --no-deps --target "$work/site" "$work"/dist/*.whl

echo "== use it"
PYTHONPATH="$work/site" python "$here/use_linear.py"
